/*
 * resources/fixed_block/fixed_block_resource.c: blocks of one size from
 * upstream chunks: allocate and deallocate (blocks, and larger requests
 * forwarded to the upstream), record_stream, the vtable. See
 * gmr/fixed_block_resource.h and fixed_block_internal.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "gmr/fixed_block_resource.h"

#include <stdlib.h>
#include <string.h>

#include "util/counters.h"
#include "core/failure.h"
#include "resources/fixed_block/fixed_block_internal.h"

void gmr__fb_held_add(gmr_fixed_block_resource *r, size_t bytes) {
  size_t now = atomic_fetch_add_explicit(&r->held_bytes, bytes, memory_order_relaxed) + bytes;
  gmr__raise_peak(&r->peak_held_bytes, now);
}

void gmr__fb_held_sub(gmr_fixed_block_resource *r, size_t bytes) {
  atomic_fetch_sub_explicit(&r->held_bytes, bytes, memory_order_relaxed);
}

gmr_status gmr__fb_note_free_info(gmr_fixed_block_resource *r, gmr_failure *failure,
                                  gmr_status status) {
  if (!failure->free_info_known) {
    size_t free_blocks = 0, blocks = 0, in_use = 0;
    gmr__fb_free_figures(r, &free_blocks, &blocks, &in_use);
    failure->free_info_known = true;
    failure->free_bytes = free_blocks * r->config.block_bytes;
    failure->largest_free_block_bytes = free_blocks > 0 ? r->config.block_bytes : 0;
  }
  return status;
}

/* ---- forwarded (oversize) requests --------------------------------------------- */

static gmr_status forward_allocate(gmr_fixed_block_resource *r, size_t bytes, size_t alignment,
                                   gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  if (r->config.oversize == GMR_FIXED_BLOCK_OVERSIZE_REFUSE) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                            "fixed_block_resource: %zu bytes is more than one block (%zu bytes); "
                            "use gmr_fixed_block_resource_allocate_blocks or oversize = FORWARD",
                            bytes, r->config.block_bytes);
  }
  gmr__spin_lock_acquire(&r->books);
  bool room = gmr__u64_map_reserve(&r->forwarded, r->forwarded.count + 1);
  gmr__spin_lock_release(&r->books);
  if (!room) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "fixed_block_resource: no host memory to track a forwarded allocation");
  }
  gmr_status st = gmr_resource_allocate_ex(r->upstream, bytes, alignment, stream, out_ptr, failure);
  if (st != GMR_OK) return st;
  gmr__spin_lock_acquire(&r->books);
  /* Another thread may have used the room reserved above: reserve again. */
  if (!gmr__u64_map_put(&r->forwarded, (uint64_t)(uintptr_t)*out_ptr, bytes)) {
    gmr__spin_lock_release(&r->books);
    GMR_IGNORE_STATUS(gmr_resource_deallocate(r->upstream, *out_ptr, bytes, alignment, stream));
    *out_ptr = NULL;
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "fixed_block_resource: no host memory to track a forwarded allocation");
  }
  r->forwarded_count++;
  r->forwarded_bytes += bytes;
  gmr__spin_lock_release(&r->books);
  gmr__fb_held_add(r, bytes);
  return GMR_OK;
}

/* The free of a forwarded allocation (bytes above a block). */
static gmr_status forward_deallocate(gmr_fixed_block_resource *r, void *ptr, size_t bytes,
                                     size_t alignment, gmr_stream stream) {
  uintptr_t addr = (uintptr_t)ptr;
  gmr__spin_lock_acquire(&r->books);
  uint64_t known = 0;
  bool forwarded = gmr__u64_map_get(&r->forwarded, (uint64_t)addr, &known);
  if (!forwarded || known != bytes) {
    gmr__spin_lock_release(&r->books);
    /* Another size, or one of our blocks freed with a block's worth too many. */
    return forwarded || gmr__fb_in_a_chunk(r, addr) ? GMR_ERR_FREE_MISMATCH
                                                    : GMR_ERR_UNKNOWN_POINTER;
  }
  /* Books first: once upstream has it back, another thread may get the same
   * address from upstream and forward it through us. */
  gmr__u64_map_remove(&r->forwarded, (uint64_t)addr, NULL);
  r->forwarded_count--;
  r->forwarded_bytes -= bytes;
  gmr__spin_lock_release(&r->books);
  gmr_status st = gmr_resource_deallocate(r->upstream, ptr, bytes, alignment, stream);
  gmr__spin_lock_acquire(&r->books);
  if (st != GMR_OK) {
    /* Not released: it is still ours. Removal left room for it. */
    (void)gmr__u64_map_put(&r->forwarded, (uint64_t)addr, bytes);
    r->forwarded_count++;
    r->forwarded_bytes += bytes;
  }
  gmr__spin_lock_release(&r->books);
  if (st == GMR_OK) gmr__fb_held_sub(r, bytes);
  return st;
}

/* ---- blocks ----------------------------------------------------------------------- */

static gmr_status key_of(gmr_fixed_block_resource *r, gmr_stream stream, gmr__stream_key *key) {
  cudaError_t err = gmr__stream_key_of(r->cuda, r->events_mode, stream, key);
  return err == cudaSuccess ? GMR_OK : gmr__status_from_cuda(err);
}

/* The key as far as known without asking a created stream's id
 * (stream_ordered/stream_event.h). */
static inline gmr_status key_begin(gmr_fixed_block_resource *r, gmr_stream stream,
                                   gmr__stream_key *key, bool *known) {
  cudaError_t err = gmr__stream_key_begin(r->cuda, r->events_mode, stream, key, known);
  return err == cudaSuccess ? GMR_OK : gmr__status_from_cuda(err);
}

/* A free block for the stream of `key` in shard `s`, given out; with
 * `others`, other streams' blocks too (events; the key known). NULL if none.
 * With the id not `known`, the slot of the handle's last stream, whose blocks
 * are taken only when they are free for anyone: *id_matters says the id
 * would decide (the slot holds blocks not known done). */
__attribute__((always_inline)) static inline gmr__fb_block *take(gmr__fb_shard *s,
                                                                 gmr__stream_key key, bool known,
                                                                 size_t bytes, bool others,
                                                                 gmr_status *st,
                                                                 bool *id_matters) {
  gmr_fixed_block_resource *r = s->r;
  gmr__spin_lock_acquire(&s->lock);
  uint32_t si = known ? gmr__fb_slot_of(s, key) : gmr__fb_slot_for_handle(s, key.stream);
  gmr__fb_block *b = NULL;
  *st = known && si == UINT32_MAX ? GMR_ERR_OUT_OF_MEMORY : GMR_OK;
  *id_matters = false;
  if (si != UINT32_MAX) {
    gmr__fb_slot *slot = gmr__fb_slot_at(s, si);
    /* By handle (the default) the handle's slot is the stream's own. */
    /* Blocks held back by record_stream count: they come back to this slot
     * below, once their uses are done, and are the slot's stream's frees. */
    *id_matters = r->stream_ids && (slot->count > 0 || slot->deferred_count > 0) &&
                  !gmr__stream_event_settled(&slot->base.ev);
    if (known || !*id_matters) {
      if (known && r->config.streams.stream_ordered) {
        gmr__stream_event_note_call(r->cuda, &slot->base.ev, &r->events);
      }
      /* PyTorch's record_stream reuse: blocks this stream freed whose
       * recorded uses are done go back on its stack before one is taken, so
       * the same request gets the same block back (relaxed-mode queries:
       * legal during a capture). */
      bool processed = false;
      if (slot->deferred_count > 0 && r->config.streams.stream_ordered) {
        gmr__fb_process_deferred(s);
        processed = true;
      }
      if (slot->count == 0 && others && r->config.streams.stream_ordered) {
        if (s->deferred_count > 0 && !processed) gmr__fb_process_deferred(s);
        if (slot->count == 0) gmr__fb_from_other_streams(s, si, 1);
      }
      if (slot->count > 0) b = gmr__fb_pop_free(s, si, bytes);
    }
  }
  gmr__spin_lock_release(&s->lock);
  return b;
}

/* take() with other streams' blocks (events queried in relaxed capture
 * mode: stream_ordered/stream_event.h). Pre: the key known, the stream not capturing. */
static __attribute__((noinline)) gmr__fb_block *take_with_others(gmr__fb_shard *s,
                                                                  gmr__stream_key key,
                                                                  size_t bytes, gmr_status *st) {
  bool id_matters = false;
  return take(s, key, true, bytes, true, st, &id_matters);
}

typedef struct take_one {
  size_t bytes;
  gmr__fb_block *block;
} take_one;

static void pop_one(gmr__fb_shard *s, uint32_t si, void *ctx) {
  take_one *t = ctx;
  t->block = gmr__fb_pop_free(s, si, t->bytes);
}

/* The slow path of a one-block request: a device synchronisation that
 * releases enough, or growth (which hands out the block it grew for). */
static gmr_status grow_and_take(gmr__fb_shard *s, gmr__stream_key key, size_t bytes,
                                gmr_stream stream, gmr__fb_block **out, gmr_failure *failure) {
  gmr_fixed_block_resource *r = s->r;
  pthread_mutex_lock(&s->grow_lock);
  gmr_status st = GMR_OK;
  *out = take_with_others(s, key, bytes, &st); /* another thread may have grown */
  if (*out == NULL && st == GMR_OK && r->config.streams.stream_ordered) {
    gmr__spin_lock_acquire(&s->lock);
    uint32_t si = gmr__fb_slot_of(s, key);
    bool sync = si != UINT32_MAX && gmr__fb_sync_would_help(s, si);
    gmr__spin_lock_release(&s->lock);
    if (sync && gmr__reclaim_device_synchronize(&s->slots) == cudaSuccess) {
      *out = take_with_others(s, key, bytes, &st);
    }
  }
  if (*out == NULL && st == GMR_OK) {
    take_one t = {bytes, NULL};
    st = gmr__fb_grow(s, key, 1, stream, true, pop_one, &t, failure);
    *out = t.block;
  }
  pthread_mutex_unlock(&s->grow_lock);
  return st;
}

/* Learn the stream's id if it is not known yet (capture-safe). */
static gmr_status identify(gmr_fixed_block_resource *r, gmr_stream stream, gmr__stream_key *key,
                           bool *known, gmr_failure *failure) {
  if (*known) return GMR_OK;
  gmr_status st = key_of(r, stream, key);
  if (st != GMR_OK) {
    return gmr__failure_set(failure, st, "fixed_block_resource: cudaStreamGetId failed");
  }
  *known = true;
  return GMR_OK;
}

/* Everything after a first take() that found no block: the id learned and
 * take() again, then other streams, other shards, growth. Not inline:
 * fb_allocate keeps only the hot path in its frame. */
__attribute__((noinline)) static gmr_status allocate_rest(
    gmr_fixed_block_resource *r, gmr__fb_shard *s, gmr_stream stream, gmr__stream_key key,
    bool known, size_t bytes, gmr__fb_block *b, gmr_status st, bool id_matters, void **out_ptr,
    gmr_failure *failure) {
  if (b == NULL && st == GMR_OK && !known && id_matters) {
    st = identify(r, stream, &key, &known, failure);
    if (st == GMR_OK) b = take(s, key, true, bytes, false, &st, &id_matters);
  }
  if (gmr__stream_id_asked_lazily(r->events_mode, stream)) {
    gmr__stream_id_hint_set(stream, id_matters);
  }
  /* The slow path names the stream in waits, records and slots: its id. */
  if (b == NULL && st == GMR_OK) st = identify(r, stream, &key, &known, failure);
  if (b == NULL && st == GMR_OK) {
    bool capturing = r->config.streams.stream_ordered &&
                     gmr__cuda_stream_is_capturing(r->cuda, (cudaStream_t)stream);
    if (!capturing) b = take_with_others(s, key, bytes, &st);
    if (b == NULL && st == GMR_OK && r->shard_count > 1) {
      b = gmr__fb_take_from_other_shards(r, s, key, bytes);
    }
    if (b == NULL && st == GMR_OK) {
      if (capturing) {
        st = gmr__failure_set(failure, GMR_ERR_CAPTURE_UNSAFE,
                              "fixed_block_resource: not enough free blocks for this stream, and "
                              "no chunk can be added or other stream waited for during a CUDA "
                              "graph capture; allocate before the capture");
      } else {
        st = grow_and_take(s, key, bytes, stream, &b, failure);
      }
    }
  }
  if (st == GMR_ERR_OUT_OF_MEMORY && b == NULL && failure->message[0] == '\0') {
    (void)gmr__failure_set(failure, st,
                           "fixed_block_resource: no host memory for a new stream's free list");
  }
  if (b == NULL) return gmr__fb_note_free_info(r, failure, st);
  *out_ptr = (void *)b->addr;
  return GMR_OK;
}

static gmr_status fb_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                              gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_fixed_block_resource *r = (gmr_fixed_block_resource *)self;
  if (bytes > r->config.block_bytes) {
    return forward_allocate(r, bytes, alignment, stream, out_ptr, failure);
  }
  if (alignment > GMR__FB_UNIT) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                            "fixed_block_resource: blocks are 256-byte aligned; %zu was asked",
                            alignment);
  }
  gmr__stream_key key;
  bool known = true;
  gmr_status st = key_begin(r, stream, &key, &known);
  if (st != GMR_OK) {
    return gmr__failure_set(failure, st, "fixed_block_resource: cudaStreamGetId failed");
  }
  /* A stream that keeps reusing its own blocks needs its id at every
   * allocation: asked before the lock is taken, not after a first look. */
  if (!known && gmr__stream_id_hint(stream)) st = identify(r, stream, &key, &known, failure);
  if (st != GMR_OK) return st;
  gmr__fb_shard *s = gmr__fb_shard_for(r, key);
  bool id_matters = false;
  gmr__fb_block *b = take(s, key, known, bytes, false, &st, &id_matters);
  if (b == NULL) {
    return allocate_rest(r, s, stream, key, known, bytes, b, st, id_matters, out_ptr, failure);
  }
  if (gmr__stream_id_asked_lazily(r->events_mode, stream)) {
    gmr__stream_id_hint_set(stream, id_matters);
  }
  *out_ptr = (void *)b->addr;
  return GMR_OK;
}

static gmr_status fb_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                gmr_stream stream) {
  gmr_fixed_block_resource *r = (gmr_fixed_block_resource *)self;
  if (bytes > r->config.block_bytes) return forward_deallocate(r, ptr, bytes, alignment, stream);
  uintptr_t addr = (uintptr_t)ptr;
  gmr__stream_key key;
  bool known = true;
  /* A created stream's id only if the free needs it (stream_ordered/stream_event.h). */
  gmr_status st = key_begin(r, stream, &key, &known);
  if (st != GMR_OK) return st; /* nothing released */
  for (;;) {
    gmr__fb_shard *s = NULL;
    gmr__fb_block *b = gmr__fb_find_block(r, gmr__fb_shard_for(r, key), addr, &s);
    if (b == NULL) {
      gmr__spin_lock_acquire(&r->books);
      bool forwarded = gmr__u64_map_get(&r->forwarded, (uint64_t)addr, NULL);
      gmr__spin_lock_release(&r->books);
      return forwarded ? GMR_ERR_FREE_MISMATCH : GMR_ERR_UNKNOWN_POINTER;
    }
    gmr_status verdict = GMR_OK;
    if (b->request_bytes == 0 && !b->in_list) {
      verdict = b->given_before ? GMR_ERR_DOUBLE_FREE : GMR_ERR_UNKNOWN_POINTER;
    } else if (b->in_list || b->request_bytes != bytes || alignment > GMR__FB_UNIT) {
      verdict = GMR_ERR_FREE_MISMATCH; /* a block of a list, or another size: change nothing */
    }
    uint32_t si = 0;
    if (verdict == GMR_OK && !known) {
      /* Filed by handle unless there is no slot for it or a record is due. */
      si = gmr__fb_slot_for_handle(s, stream);
      if (si == UINT32_MAX || gmr__stream_event_record_due(&gmr__fb_slot_at(s, si)->base.ev)) {
        gmr__spin_lock_release(&s->lock);
        st = key_of(r, stream, &key);
        if (st != GMR_OK) return st; /* nothing released */
        known = true;
        continue;
      }
    } else if (verdict == GMR_OK) {
      si = gmr__fb_slot_of(s, key);
      if (si == UINT32_MAX) verdict = GMR_ERR_OUT_OF_MEMORY;
    }
    if (verdict == GMR_OK) {
      gmr__fb_give_back(s, si, b);
      if (r->config.streams.stream_ordered) {
        gmr__stream_event_mark_freed(r->cuda, &gmr__fb_slot_at(s, si)->base.ev, false, &r->events);
      }
    }
    gmr__spin_lock_release(&s->lock);
    return verdict;
  }
}

static gmr_status fb_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  gmr_fixed_block_resource *r = (gmr_fixed_block_resource *)self;
  gmr__stream_key key;
  gmr_status st = key_of(r, stream, &key);
  if (st != GMR_OK) return st;
  gmr__fb_shard *s = NULL;
  gmr__fb_block *b = gmr__fb_find_block(r, gmr__fb_shard_for(r, key), (uintptr_t)ptr, &s);
  if (b == NULL) {
    /* An allocation above a block lives in the upstream: it keeps the uses. */
    gmr__spin_lock_acquire(&r->books);
    bool forwarded = gmr__u64_map_get(&r->forwarded, (uint64_t)(uintptr_t)ptr, NULL);
    gmr__spin_lock_release(&r->books);
    return forwarded ? gmr_resource_record_stream(r->upstream, ptr, stream)
                     : GMR_ERR_UNKNOWN_POINTER;
  }
  if (b->request_bytes == 0 && !b->in_list) {
    st = GMR_ERR_UNKNOWN_POINTER;
  } else if (r->config.streams.stream_ordered) {
    /* Without stream ordering every free is anyone's at once: nothing to keep. */
    st = gmr__stream_uses_add(&b->uses, key);
  }
  gmr__spin_lock_release(&s->lock);
  return st;
}

static gmr_status fb_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_fixed_block_resource *r = (const gmr_fixed_block_resource *)self;
  out->held_bytes = atomic_load_explicit(&r->held_bytes, memory_order_relaxed);
  out->peak_held_bytes = atomic_load_explicit(&r->peak_held_bytes, memory_order_relaxed);
  return GMR_OK;
}

static gmr_resource *fb_get_upstream(const gmr_resource *self) {
  return ((const gmr_fixed_block_resource *)self)->upstream;
}

const gmr_resource_vtbl gmr__fb_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "fixed_block_resource",
    .allocate = fb_allocate,
    .deallocate = fb_deallocate,
    .destroy = gmr__fb_destroy,
    .get_upstream = fb_get_upstream,
    .trim = gmr__fb_trim,
    .get_footprint = fb_get_footprint,
    .get_memory_info = gmr__fb_get_memory_info,
    .record_stream = fb_record_stream,
    .allocate_capturing = NULL,
};
