/*
 * resources/fixed_block/fixed_block_shard.c (internal): one shard: what
 * its stream slots hold (the table is stream_ordered/stream_slots.h, keyed by handle
 * and id, stream_ordered/stream_event.h), the stacks of free blocks, blocks of other
 * streams (events) and of other shards, blocks waiting for record_stream
 * events, and settling before trim and destroy. See fixed_block_internal.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "core/nvtx_mem.h"
#include "resources/fixed_block/fixed_block_internal.h"

/* ---- shards ---------------------------------------------------------------- */

gmr__fb_shard *gmr__fb_shard_for(gmr_fixed_block_resource *r, gmr__stream_key key) {
  if (r->shard_count == 1) return r->shards[0];
  if (!r->config.stream_ordered) return r->shards[gmr__thread_home() % r->shard_count];
  return r->shards[gmr__stream_home_of(&r->stream_home, key, r->shard_count)];
}

/* ---- stream slots (the table is stream_ordered/stream_slots.h) ------------------------ */

static gmr__stream_slot *slot_create(void *ctx) {
  gmr__fb_shard *s = ctx;
  gmr__fb_slot *slot = calloc(1, sizeof *slot); /* event NULL: created on first record */
  if (slot == NULL) return NULL;
  if (s->stack_capacity > 0) {
    slot->stack = malloc(s->stack_capacity * sizeof *slot->stack);
    if (slot->stack == NULL) {
      free(slot);
      return NULL;
    }
  }
  return &slot->base;
}

static void slot_destroy(void *ctx, gmr__stream_slot *base) {
  (void)ctx;
  gmr__fb_slot *slot = (gmr__fb_slot *)(void *)base;
  free(slot->stack);
  free(slot);
}

static bool slot_empty(void *ctx, uint32_t si) {
  const gmr__fb_slot *slot = gmr__fb_slot_at((gmr__fb_shard *)ctx, si);
  return slot->count == 0 && slot->deferred_count == 0;
}

static void move_all(gmr__fb_shard *s, uint32_t from, uint32_t to);

/* The table's slot_return: the free blocks of `from` go to `to`; deferred
 * blocks stay with `from`. */
static bool slot_move_all(void *ctx, uint32_t from, uint32_t to) {
  gmr__fb_shard *s = ctx;
  if (gmr__fb_slot_at(s, from)->count == 0) return false;
  move_all(s, from, to);
  return true;
}

static const gmr__stream_slots_ops slot_ops = {
    .create = slot_create,
    .destroy = slot_destroy,
    .empty = slot_empty,
    .move_all = slot_move_all,
    .started = NULL,
};

/* ---- blocks ---------------------------------------------------------------- */

void gmr__fb_push_free(gmr__fb_shard *s, uint32_t si, gmr__fb_block *b) {
  gmr__fb_slot *slot = gmr__fb_slot_at(s, si);
  b->slot = si;
  b->request_bytes = 0;
  b->in_list = false;
  slot->stack[slot->count++] = b;
}

gmr__fb_block *gmr__fb_pop_free(gmr__fb_shard *s, uint32_t si, size_t bytes) {
  gmr__fb_slot *slot = gmr__fb_slot_at(s, si);
  gmr__fb_block *b = slot->stack[--slot->count];
  b->chunk->live_count++;
  s->in_use_blocks++;
  b->request_bytes = bytes;
  b->given_before = true;
  if (s->r->config.nvtx_annotate) {
    gmr__nvtx_mem_region_register(b->chunk->nvtx_heap, (void *)b->addr, bytes);
  }
  return b;
}

/* Move every free block of slot `from` onto slot `to`, keeping their order,
 * so the most recently freed block is still the next one handed out. */
static void move_all(gmr__fb_shard *s, uint32_t from, uint32_t to) {
  gmr__fb_slot *src = gmr__fb_slot_at(s, from);
  for (size_t i = 0; i < src->count; ++i) gmr__fb_push_free(s, to, src->stack[i]);
  src->count = 0;
}

/* ---- record_stream: uses and the deferred list ------------------------------- */

typedef struct gmr__fb_use {
  gmr__stream_key key;
  cudaEvent_t event; /* deferred: recorded at the free; NULL when done */
} gmr__fb_use;

struct gmr__fb_uses {
  uint32_t count;
  uint32_t capacity;
  uint64_t epoch;         /* deferred: the shard's sync_epoch at the free */
  bool needs_device_sync; /* deferred: a record failed */
  gmr__fb_use items[];
};

static cudaEvent_t event_take(gmr__fb_shard *s) {
  cudaEvent_t e = NULL;
  return gmr__event_cache_take(&s->spare_events, s->r->cuda, &e) == cudaSuccess ? e : NULL;
}

static void event_give(gmr__fb_shard *s, cudaEvent_t e) {
  if (gmr__event_cache_give(&s->spare_events, s->r->cuda, e) != cudaSuccess) {
    atomic_fetch_add_explicit(&s->r->events.destroy_failure_count, 1, memory_order_relaxed);
  }
}

void gmr__fb_uses_free(gmr__fb_shard *s, gmr__fb_block *b) {
  gmr__fb_uses *u = b->uses;
  if (u == NULL) return;
  for (uint32_t i = 0; i < u->count; ++i) {
    if (u->items[i].event != NULL) event_give(s, u->items[i].event);
  }
  free(u);
  b->uses = NULL;
}

gmr_status gmr__fb_add_use(gmr__fb_block *b, gmr__stream_key key) {
  gmr__fb_uses *u = b->uses;
  for (uint32_t i = 0; u != NULL && i < u->count; ++i) {
    if (gmr__stream_key_equal(u->items[i].key, key)) return GMR_OK;
  }
  if (u == NULL || u->count == u->capacity) {
    uint32_t capacity = u == NULL ? 2u : u->capacity * 2u;
    gmr__fb_uses *grown = realloc(u, sizeof *u + capacity * sizeof u->items[0]);
    if (grown == NULL) return GMR_ERR_OUT_OF_MEMORY;
    if (u == NULL) grown->count = 0;
    grown->capacity = capacity;
    b->uses = u = grown;
  }
  u->items[u->count].key = key;
  u->items[u->count].event = NULL;
  u->count++;
  return GMR_OK;
}

/* Record an event on every recorded stream other than slot `si`'s and put
 * `b` in the deferred list; false (uses freed) when no other stream. */
static bool defer(gmr__fb_shard *s, uint32_t si, gmr__fb_block *b) {
  const gmr__cuda_ops *cuda = s->r->cuda;
  gmr__fb_uses *u = b->uses;
  gmr__stream_key freeing = gmr__fb_slot_at(s, si)->base.ev.key;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < u->count; ++i) {
    if (!gmr__stream_key_equal(u->items[i].key, freeing)) u->items[kept++] = u->items[i];
  }
  u->count = kept;
  if (kept == 0) {
    gmr__fb_uses_free(s, b);
    return false;
  }
  u->needs_device_sync = false;
  for (uint32_t i = 0; i < u->count; ++i) {
    gmr__fb_use *use = &u->items[i];
    cudaStream_t stream = (cudaStream_t)use->key.stream;
    use->event = NULL;
    if (gmr__cuda_stream_is_capturing(cuda, stream)) {
      u->needs_device_sync = true;
      continue;
    }
    cudaEvent_t e = event_take(s);
    atomic_fetch_add_explicit(&s->r->events.record_count, 1, memory_order_relaxed);
    if (e == NULL || cuda->event_record(e, stream) != cudaSuccess) {
      if (e != NULL) event_give(s, e);
      u->needs_device_sync = true;
      continue;
    }
    use->event = e;
  }
  u->epoch = s->sync_epoch;
  b->deferred = true;
  b->slot = si;
  b->request_bytes = 0;
  b->in_list = false;
  b->prev_deferred = NULL;
  b->next_deferred = s->deferred;
  if (s->deferred != NULL) s->deferred->prev_deferred = b;
  s->deferred = b;
  s->deferred_count++;
  gmr__fb_slot_at(s, si)->deferred_count++;
  return true;
}

void gmr__fb_give_back(gmr__fb_shard *s, uint32_t si, gmr__fb_block *b) {
  /* Before the block can be handed out again. */
  if (s->r->config.nvtx_annotate) gmr__nvtx_mem_region_unregister((void *)b->addr);
  b->chunk->live_count--;
  s->in_use_blocks--;
  if (b->uses == NULL || !defer(s, si, b)) gmr__fb_push_free(s, si, b);
}

/* Deferred block `b` is done: back on its slot's stack. */
static void undefer(gmr__fb_shard *s, gmr__fb_block *b) {
  if (b->prev_deferred != NULL) {
    b->prev_deferred->next_deferred = b->next_deferred;
  } else {
    s->deferred = b->next_deferred;
  }
  if (b->next_deferred != NULL) b->next_deferred->prev_deferred = b->prev_deferred;
  b->next_deferred = b->prev_deferred = NULL;
  s->deferred_count--;
  gmr__fb_slot_at(s, b->slot)->deferred_count--;
  b->deferred = false;
  gmr__fb_uses_free(s, b);
  gmr__fb_push_free(s, b->slot, b);
}

void gmr__fb_drop_deferred(gmr__fb_shard *s) {
  while (s->deferred != NULL) undefer(s, s->deferred);
}

void gmr__fb_process_deferred(gmr__fb_shard *s) {
  gmr_fixed_block_resource *r = s->r;
  gmr__fb_block *next = NULL;
  for (gmr__fb_block *b = s->deferred; b != NULL; b = next) {
    next = b->next_deferred;
    gmr__fb_uses *u = b->uses;
    bool done = !u->needs_device_sync;
    for (uint32_t i = 0; i < u->count && done; ++i) {
      if (u->items[i].event == NULL) continue;
      atomic_fetch_add_explicit(&r->events.query_count, 1, memory_order_relaxed);
      if (gmr__event_query_relaxed(r->cuda, u->items[i].event) != cudaSuccess) {
        done = false;
        break;
      }
      event_give(s, u->items[i].event);
      u->items[i].event = NULL;
    }
    if (done) undefer(s, b);
  }
}

/* ---- other streams ---------------------------------------------------------- */

void gmr__fb_from_other_streams(gmr__fb_shard *s, uint32_t si, size_t count, gmr_stream stream) {
  gmr_fixed_block_resource *r = s->r;
  gmr__fb_slot *t = gmr__fb_slot_at(s, si);
  bool pending = false;
  for (uint32_t i = 0; i < s->slots.count && t->count < count; ++i) {
    gmr__fb_slot *o = gmr__fb_slot_at(s, i);
    if (i == si || o->count == 0) continue;
    /* A fresh stream that may be gone is asked to record at its next call. */
    if (gmr__stream_event_settle(r->cuda, &o->base.ev, &r->events) != cudaSuccess) continue;
    if (gmr__stream_event_query(r->cuda, &o->base.ev, &r->events)) {
      move_all(s, i, si);
      gmr__stream_event_demand(&o->base.ev);
    } else {
      pending = true;
    }
  }
  for (uint32_t i = 0; pending && t->count < count && i < s->slots.count; ++i) {
    gmr__fb_slot *o = gmr__fb_slot_at(s, i);
    if (i == si || o->count == 0 || gmr__stream_event_fresh(&o->base.ev)) continue;
    if (gmr__stream_event_wait(r->cuda, &o->base.ev, stream, &r->events) != cudaSuccess) continue;
    move_all(s, i, si);
    gmr__stream_event_demand(&o->base.ev);
    gmr__stream_event_took_after_wait(r->cuda, &t->base.ev, &r->events);
  }
}

bool gmr__fb_sync_would_help(const gmr__fb_shard *s, uint32_t si, size_t count) {
  size_t have = gmr__fb_slot_at(s, si)->count + s->deferred_count;
  for (uint32_t i = 0; i < s->slots.count && have < count; ++i) {
    const gmr__fb_slot *o = gmr__fb_slot_at(s, i);
    if (i == si || o->base.ev.lazy || !gmr__stream_event_fresh(&o->base.ev)) continue;
    have += o->count;
  }
  return have >= count && have > gmr__fb_slot_at(s, si)->count;
}

cudaError_t gmr__fb_device_synchronize(gmr__fb_shard *s) {
  gmr_fixed_block_resource *r = s->r;
  gmr__spin_lock_acquire(&s->lock);
  uint32_t count = s->slots.count;
  for (uint32_t i = 0; i < count; ++i) {
    gmr__fb_slot_at(s, i)->snapshot_key = gmr__fb_slot_at(s, i)->base.ev.key;
    gmr__fb_slot_at(s, i)->snapshot_seq = gmr__fb_slot_at(s, i)->base.ev.free_seq;
  }
  uint64_t epoch = ++s->sync_epoch;
  gmr__spin_lock_release(&s->lock);
  /* Names no stream: legal whatever streams were destroyed. */
  atomic_fetch_add_explicit(&r->events.device_synchronize_count, 1, memory_order_relaxed);
  cudaError_t err = r->cuda->device_synchronize();
  if (err != cudaSuccess) return err;
  gmr__spin_lock_acquire(&s->lock);
  for (uint32_t i = 0; i < count && i < s->slots.count; ++i) {
    gmr__fb_slot *slot = gmr__fb_slot_at(s, i);
    if (gmr__stream_key_equal(slot->base.ev.key, slot->snapshot_key)) {
      gmr__stream_event_device_synchronized(&slot->base.ev, slot->snapshot_seq);
    }
  }
  gmr__fb_block *next = NULL;
  for (gmr__fb_block *b = s->deferred; b != NULL; b = next) {
    next = b->next_deferred;
    if (b->uses->epoch < epoch) undefer(s, b);
  }
  gmr__spin_lock_release(&s->lock);
  return cudaSuccess;
}

void gmr__fb_settle_everything(gmr__fb_shard *s) {
  gmr_fixed_block_resource *r = s->r;
  if (!r->config.stream_ordered) return;
  gmr__spin_lock_acquire(&s->lock);
  gmr__fb_process_deferred(s);
  bool need_sync = s->deferred_count > 0;
  for (uint32_t i = 0; i < s->slots.count; ++i) {
    gmr__fb_slot *slot = gmr__fb_slot_at(s, i);
    slot->snapshot_waiting = false;
    if (slot->count == 0 || gmr__stream_event_settled(&slot->base.ev)) continue;
    if (gmr__stream_event_settle(r->cuda, &slot->base.ev, &r->events) != cudaSuccess) {
      need_sync = true;
      continue;
    }
    if (gmr__stream_event_query(r->cuda, &slot->base.ev, &r->events)) continue;
    slot->snapshot_waiting = true;
    slot->snapshot_key = slot->base.ev.key;
    slot->snapshot_seq = slot->base.ev.covered_seq;
    slot->snapshot_event = slot->base.ev.event;
  }
  gmr__spin_lock_release(&s->lock);
  if (need_sync) {
    (void)gmr__fb_device_synchronize(s);
    return;
  }
  for (uint32_t i = 0;; ++i) {
    gmr__spin_lock_acquire(&s->lock);
    if (i >= s->slots.count) {
      gmr__spin_lock_release(&s->lock);
      break;
    }
    gmr__fb_slot *slot = gmr__fb_slot_at(s, i);
    bool wait = slot->snapshot_waiting;
    cudaEvent_t event = slot->snapshot_event;
    gmr__spin_lock_release(&s->lock);
    if (!wait) continue;
    atomic_fetch_add_explicit(&r->events.synchronize_count, 1, memory_order_relaxed);
    cudaError_t err = gmr__event_synchronize_relaxed(r->cuda, event);
    gmr__spin_lock_acquire(&s->lock);
    if (err == cudaSuccess && gmr__stream_key_equal(slot->base.ev.key, slot->snapshot_key) &&
        slot->base.ev.covered_seq == slot->snapshot_seq) {
      slot->base.ev.complete = true;
    }
    slot->snapshot_waiting = false;
    gmr__spin_lock_release(&s->lock);
  }
}

/* ---- other shards ----------------------------------------------------------- */

gmr__fb_block *gmr__fb_take_from_other_shards(gmr_fixed_block_resource *r, gmr__fb_shard *home,
                                              gmr__stream_key key, size_t bytes) {
  for (uint32_t i = 0; i < r->shard_count; ++i) {
    gmr__fb_shard *s = r->shards[i];
    if (s == home) continue;
    gmr__spin_lock_acquire(&s->lock);
    uint32_t si = gmr__fb_find_slot(s, key);
    gmr__fb_block *b = NULL;
    if (si != UINT32_MAX && gmr__fb_slot_at(s, si)->count > 0) b = gmr__fb_pop_free(s, si, bytes);
    gmr__spin_lock_release(&s->lock);
    if (b != NULL) return b;
  }
  return NULL;
}

/* ---- a shard ---------------------------------------------------------------- */

cudaError_t gmr__fb_shard_destroy_events(gmr__fb_shard *s) {
  gmr_fixed_block_resource *r = s->r;
  for (uint32_t i = 0; i < s->slots.count; ++i) {
    cudaError_t err =
        gmr__stream_event_deinit(r->cuda, &gmr__fb_slot_at(s, i)->base.ev, &r->events);
    if (err != cudaSuccess) return err;
  }
  cudaError_t err = gmr__event_cache_clear(&s->spare_events, r->cuda);
  if (err != cudaSuccess) {
    atomic_fetch_add_explicit(&r->events.destroy_failure_count, 1, memory_order_relaxed);
  }
  return err;
}

gmr__fb_shard *gmr__fb_shard_new(gmr_fixed_block_resource *r) {
  gmr__fb_shard *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  /* Cannot fail: no shared slot to make. */
  (void)gmr__stream_slots_init(&s->slots, &slot_ops, s, false, r->events_mode, r->stream_ids,
                               GMR__STREAM_SLOTS_REUSE_AT);
  if (pthread_mutex_init(&s->grow_lock, NULL) != 0) {
    free(s);
    return NULL;
  }
  atomic_init(&s->lock.locked, 0);
  s->r = r;
  s->spare_events = (gmr__event_cache)GMR__EVENT_CACHE_INIT(SIZE_MAX);
  return s;
}

void gmr__fb_shard_free(gmr__fb_shard *s) {
  if (s == NULL) return;
  for (gmr__fb_block *b = s->deferred; b != NULL; b = b->next_deferred) {
    free(b->uses); /* events were destroyed with the shard's spare events, or leak-free NULL */
    b->uses = NULL;
  }
  gmr__stream_slots_deinit(&s->slots);
  for (size_t i = 0; i < s->chunk_count; ++i) {
    gmr__fb_chunk *c = s->chunks[i];
    for (size_t k = 0; k < c->block_count; ++k) free(c->blocks[k].uses);
    free(c);
  }
  free(s->chunks);
  free(s->spare_events.events);
  pthread_mutex_destroy(&s->grow_lock);
  free(s);
}
