/*
 * resources/fixed_block/fixed_block_shard.c (internal): one shard: what its
 * stream slots hold (stacks of free blocks) as the table
 * (stream_ordered/stream_slots.h) and the reclaim steps
 * (stream_ordered/reclaim.h) see it, blocks of other streams and of other
 * shards, blocks waiting for record_stream events
 * (stream_ordered/stream_uses.h), and settling before trim and destroy. See
 * fixed_block_internal.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "core/nvtx_mem.h"
#include "resources/fixed_block/fixed_block_internal.h"

/* ---- shards ---------------------------------------------------------------- */

_Thread_local gmr__fb_last_shard gmr__fb_last;

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

/* The table's slot_return, and the reclaim steps' take: the free blocks of
 * `from` go to `to`; deferred blocks stay with `from`. */
static bool slot_move_all(void *ctx, uint32_t from, uint32_t to) {
  gmr__fb_shard *s = ctx;
  if (gmr__fb_slot_at(s, from)->count == 0) return false;
  move_all(s, from, to);
  return true;
}

static bool slot_holds(void *ctx, uint32_t si) {
  return gmr__fb_slot_at((gmr__fb_shard *)ctx, si)->count > 0;
}

static void slot_take(void *ctx, uint32_t from, uint32_t to) { move_all(ctx, from, to); }

/* Blocks are all alike: `want` is a count of them. */
static bool slot_fits(void *ctx, uint32_t si, const gmr__reclaim_want *want) {
  return gmr__fb_slot_at((gmr__fb_shard *)ctx, si)->count >= want->amount;
}

static size_t slot_blocks(void *ctx, uint32_t si) {
  return gmr__fb_slot_at((gmr__fb_shard *)ctx, si)->count;
}

static void shard_synchronized(void *ctx, uint64_t epoch);

static const gmr__stream_slots_ops slot_ops = {
    .create = slot_create,
    .destroy = slot_destroy,
    .empty = slot_empty,
    .move_all = slot_move_all,
    .holds = slot_holds,
    .take = slot_take,
    .fits = slot_fits,
    .amount = slot_blocks,
    .synchronized = shard_synchronized,
};

/* ---- blocks ---------------------------------------------------------------- */

/* Move every free block of slot `from` onto slot `to`, keeping their order,
 * so the most recently freed block is still the next one handed out. */
static void move_all(gmr__fb_shard *s, uint32_t from, uint32_t to) {
  gmr__fb_slot *src = gmr__fb_slot_at(s, from);
  for (size_t i = 0; i < src->count; ++i) gmr__fb_push_free(s, to, src->stack[i]);
  src->count = 0;
}

/* ---- record_stream: uses and the deferred list ------------------------------- */

/* A stream that captures is waited for by the next device synchronisation
 * instead of an event. */
bool gmr__fb_defer(gmr__fb_shard *s, uint32_t si, gmr__fb_block *b) {
  if (!gmr__stream_uses_at_free(&b->uses, gmr__fb_slot_at(s, si)->base.ev.key, false, &s->slots,
                                &s->spare_events)) {
    return false;
  }
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
  gmr__stream_uses_free(&b->uses, &s->slots, &s->spare_events);
  gmr__fb_push_free(s, b->slot, b);
}

void gmr__fb_drop_deferred(gmr__fb_shard *s) {
  while (s->deferred != NULL) undefer(s, s->deferred);
}

void gmr__fb_process_deferred(gmr__fb_shard *s) {
  gmr__fb_block *next = NULL;
  for (gmr__fb_block *b = s->deferred; b != NULL; b = next) {
    next = b->next_deferred;
    if (gmr__stream_uses_over(b->uses, true, &s->slots, &s->spare_events)) undefer(s, b);
  }
}

/* ---- other streams: the reclaim steps (stream_ordered/reclaim.h) ---------- */

void gmr__fb_from_other_streams(gmr__fb_shard *s, uint32_t si, size_t count) {
  gmr__reclaim_want want = {count, 0};
  /* A shard has no shared slot: blocks of streams whose work is done come
   * straight to slot `si`. */
  bool pending = gmr__reclaim_collect(&s->slots, si, &want, GMR__RECLAIM_SETTLE);
  if (pending && gmr__fb_slot_at(s, si)->count < count) {
    (void)gmr__reclaim_wait(&s->slots, si, &want);
  }
}

bool gmr__fb_sync_would_help(const gmr__fb_shard *s, uint32_t si) {
  gmr__reclaim_want one = {1, 0};
  return s->deferred_count > 0 || gmr__reclaim_sync_would_help(&s->slots, si, &one);
}

/* After a device synchronisation begun at `epoch`: deferred blocks of
 * before it are done. */
static void shard_synchronized(void *ctx, uint64_t epoch) {
  gmr__fb_shard *s = ctx;
  gmr__fb_block *next = NULL;
  for (gmr__fb_block *b = s->deferred; b != NULL; b = next) {
    next = b->next_deferred;
    if (b->uses->epoch < epoch) undefer(s, b);
  }
}

void gmr__fb_settle_everything(gmr__fb_shard *s) {
  if (!s->r->config.streams.stream_ordered) return;
  gmr__spin_lock_acquire(&s->lock);
  gmr__fb_process_deferred(s);
  gmr__reclaim_settle_all(&s->slots, s->deferred_count > 0);
  gmr__spin_lock_release(&s->lock);
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

gmr__fb_shard *gmr__fb_shard_new(gmr_fixed_block_resource *r) {
  gmr__fb_shard *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  /* Cannot fail: no shared slot to make. */
  (void)gmr__stream_slots_init(&s->slots, &slot_ops, s, false, r->events_mode, r->stream_ids,
                               GMR__STREAM_SLOTS_REUSE_AT, r->cuda, &r->events);
  if (pthread_mutex_init(&s->grow_lock, NULL) != 0) {
    free(s);
    return NULL;
  }
  atomic_init(&s->lock.locked, 0);
  s->slots.lock = &s->lock; /* released around the reclaim steps' synchronisations */
  s->r = r;
  s->spare_events = (gmr__event_cache)GMR__EVENT_CACHE_INIT(SIZE_MAX);
  return s;
}

void gmr__fb_shard_free(gmr__fb_shard *s) {
  if (s == NULL) return;
  for (gmr__fb_block *b = s->deferred; b != NULL; b = b->next_deferred) {
    /* Its events were destroyed with the shard's spare events, or are NULL. */
    gmr__stream_uses_free(&b->uses, NULL, NULL);
  }
  gmr__stream_slots_deinit(&s->slots);
  for (size_t i = 0; i < s->chunk_count; ++i) {
    gmr__fb_chunk *c = s->chunks[i];
    for (size_t k = 0; k < c->block_count; ++k) {
      gmr__stream_uses_free(&c->blocks[k].uses, NULL, NULL);
    }
    free(c);
  }
  free(s->chunks);
  free(s->spare_events.events);
  pthread_mutex_destroy(&s->grow_lock);
  free(s);
}
