/*
 * resources/pool/pool_resource.c: the coalescing, stream-ordered pool: the
 * order in which allocate tries its steps, deallocate, and the vtable. See
 * gmr/pool_resource.h for the algorithm and pool_internal.h for the data
 * structures, the locks and the other files of the pool; the comments here
 * say why.
 */
#define _POSIX_C_SOURCE 200809L

#include "gmr/pool_resource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "core/nvtx_mem.h"
#include "util/thread_home.h"
#include "resources/pool/pool_internal.h"

static unsigned log2_of(size_t power_of_two) {
  return (unsigned)__builtin_ctzll((unsigned long long)power_of_two);
}

/* ---- the request -------------------------------------------------------- */

_Thread_local gmr__pool_last_arena gmr__pool_last;

gmr_status gmr__pool_request_identify(gmr_pool_resource *pool, gmr__pool_request *r,
                                      gmr_failure *failure) {
  if (r->key_known) return GMR_OK;
  /* Outside any lock: three thread-local driver calls. */
  cudaError_t err = gmr__stream_key_of(pool->cuda, pool->events_mode, r->stream, &r->key);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaStreamGetId", err);
  r->key_known = true;
  return GMR_OK;
}

static gmr_status no_host_memory(gmr_failure *failure) {
  return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                          "pool_resource: no host memory for the pool's bookkeeping");
}

gmr_status gmr__pool_prepare(gmr__pool_arena *a, const gmr__pool_request *r, uint32_t *si,
                             gmr_failure *failure) {
  if (!gmr__pool_reserve_headers(a, 2) || !gmr__block_map_reserve_one(&a->live) ||
      (*si = gmr__pool_slot_of(a, r->key)) == UINT32_MAX) {
    return no_host_memory(failure);
  }
  return GMR_OK;
}

void gmr__pool_hand_out(gmr__pool_arena *a, gmr__pool_block *b, const gmr__pool_request *r,
                        void **out_ptr) {
  gmr__pool_block *x = gmr__pool_take(a, b, r->size, r->alignment);
  gmr__block_map_insert(&a->live, x);
  gmr__pool_hand_out_cached(a, x, r, out_ptr);
}

/* ---- allocation --------------------------------------------------------- */

typedef enum step_result { SERVED, NOT_FOUND, FAILED, NEED_ID } step_result;

/* The slot step 1 takes from: the stream's (created now if the id is
 * known), or for a stream whose id is not known, the slot of the last stream
 * with its handle when its memory is free for anyone or nothing is in it
 * (else NEED_ID: the id decides whose it is), the shared slot when it has
 * none. Reserves nothing: a hit in the cache of recent frees needs nothing,
 * the rest of step 1 headers and room in the live map (step_one_fit). Pre:
 * lock held. */
__attribute__((always_inline)) static inline step_result step_one_slot(
    gmr__pool_arena *a, const gmr__pool_request *r, uint32_t *si, bool *id_matters,
    gmr_failure *failure, gmr_status *st) {
  *id_matters = false;
  *si = r->key_known ? gmr__pool_slot_of(a, r->key) : gmr__pool_slot_for_handle(a, r->stream);
  if (*si == UINT32_MAX) {
    if (r->key_known) {
      *st = no_host_memory(failure);
      return FAILED;
    }
    *si = GMR__POOL_SHARED_SLOT;
    return SERVED;
  }
  /* By handle (the default) the handle's slot is the stream's own; with
   * stream_ids, its memory not known done is the stream's only once the id
   * says the slot's stream is still the one with the handle. */
  if (!a->pool->stream_ids || *si == GMR__POOL_SHARED_SLOT) return SERVED;
  const gmr__pool_slot *slot = gmr__pool_slot_at(a, *si);
  /* Blocks held back by record_stream count: they are filed back into this
   * slot, as its stream's frees, once their uses are done. */
  bool holds = slot->index.block_count > 0 || slot->cache_count > 0 || slot->deferred_count > 0;
  *id_matters = holds && !gmr__stream_event_settled(&slot->base.ev);
  return *id_matters && !r->key_known ? NEED_ID : SERVED;
}

/* Step 1 past the cache of recent frees: the best fit among the stream's
 * and the shared blocks (headers and a place in the live map reserved
 * first). A fit that
 * would split a block is left for the slow path while completed memory of
 * other streams may be waiting to be found (PyTorch's order). Pre: lock
 * held; released on return. */
__attribute__((noinline)) static step_result step_one_fit(gmr__pool_arena *a,
                                                         const gmr__pool_request *r, uint32_t si,
                                                         void **out_ptr, gmr_failure *failure,
                                                         gmr_status *st) {
  if (!gmr__pool_reserve_headers(a, 2) || !gmr__block_map_reserve_one(&a->live)) {
    gmr__spin_lock_release(&a->lock);
    *st = no_host_memory(failure);
    return FAILED;
  }
  gmr__pool_block *b = gmr__pool_find_fit(a, si, r->need);
  if (b == NULL) {
    gmr__pool_flush_caches(a); /* merged, the recent frees may hold a block large enough */
    b = gmr__pool_find_fit(a, si, r->need);
  }
  if (b != NULL && b->node.bytes > r->need &&
      (a->deferred_count > 0 || gmr__reclaim_completion_unknown(&a->slots, si))) {
    b = NULL;
  }
  if (b != NULL) gmr__pool_hand_out(a, b, r, out_ptr);
  gmr__spin_lock_release(&a->lock);
  return b != NULL ? SERVED : NOT_FOUND;
}

/* Step 1 in the home arena: a recent free of exactly the size, else
 * step_one_fit. No CUDA call, except a record the stream owes another
 * stream (demand). Inline: the cache hit is the hot path of a warm pool,
 * and a call with this many arguments costs a tenth of it. */
__attribute__((always_inline)) static inline step_result step_one(
    gmr__pool_arena *a, const gmr__pool_request *r, void **out_ptr, bool *id_matters,
    gmr_failure *failure, gmr_status *st) {
  gmr_pool_resource *pool = a->pool;
  gmr__spin_lock_acquire(&a->lock);
  uint32_t si = 0;
  step_result res = step_one_slot(a, r, &si, id_matters, failure, st);
  if (res != SERVED) {
    gmr__spin_lock_release(&a->lock);
    return res;
  }
  gmr__pool_slot *slot = gmr__pool_slot_at(a, si);
  if (si != GMR__POOL_SHARED_SLOT && r->key_known) {
    gmr__stream_event_note_call(pool->cuda, &slot->base.ev, &pool->events);
  }
  gmr__pool_block *b = NULL;
  /* A cache hit needs no header, no index, no room in the live map (a
   * cached block never left it). */
  if (r->alignment <= GMR__POOL_UNIT && (b = gmr__pool_cache_take(slot, r->size)) != NULL) {
    gmr__pool_hand_out_cached(a, b, r, out_ptr);
    gmr__spin_lock_release(&a->lock);
    return SERVED;
  }
  return step_one_fit(a, r, si, out_ptr, failure, st);
}

/* Steps 2 and 3 in the home arena: deferred blocks whose streams are done,
 * completed memory of other streams, then other streams' memory through
 * their events (queried in relaxed capture mode: stream_ordered/stream_event.h). Pre:
 * the stream is not capturing, its id known. */
static bool slow_steps(gmr__pool_arena *a, const gmr__pool_request *r, void **out_ptr,
                       gmr_failure *failure, gmr_status *st) {
  gmr__spin_lock_acquire(&a->lock);
  uint32_t si = 0;
  *st = gmr__pool_prepare(a, r, &si, failure);
  gmr__pool_block *b = NULL;
  if (*st == GMR_OK) {
    if (a->deferred_count > 0) (void)gmr__pool_process_deferred(a, r->stream);
    /* Completed memory of other streams (queries, once per record) first. */
    (void)gmr__reclaim_collect(&a->slots, si, NULL, GMR__RECLAIM_QUERY_ONCE);
    b = gmr__pool_find_fit(a, si, r->need);
    if (b == NULL && si != GMR__POOL_SHARED_SLOT && a->slots.count > 2) {
      b = gmr__pool_from_other_streams(a, si, r->need);
    }
    if (b != NULL) gmr__pool_hand_out(a, b, r, out_ptr);
  }
  gmr__spin_lock_release(&a->lock);
  return b != NULL;
}

/* Everything after a first step 1 that did not serve the request: the id
 * learned and step 1 again, then the slow steps, other arenas, growth. Not
 * inline: pool_allocate keeps only the hot path in its frame. */
__attribute__((noinline)) static gmr_status allocate_rest(gmr_pool_resource *pool,
                                                         gmr__pool_arena *a, gmr__pool_request *r,
                                                         step_result res, bool id_matters,
                                                         gmr_status st, void **out_ptr,
                                                         gmr_failure *failure) {
  gmr_stream stream = r->stream;
  if (res == NEED_ID) {
    st = gmr__pool_request_identify(pool, r, failure);
    if (st != GMR_OK) return st;
    res = step_one(a, r, out_ptr, &id_matters, failure, &st);
  }
  if (gmr__stream_id_asked_lazily(pool->events_mode, stream)) {
    gmr__stream_id_hint_set(stream, id_matters);
  }
  if (res == SERVED) return GMR_OK;
  if (res == FAILED) return gmr__pool_note_free_info(pool, failure, st);
  /* The slow path names the stream in waits, records and slots: its id. */
  st = gmr__pool_request_identify(pool, r, failure);
  if (st != GMR_OK) return st;
  /* The slow path: nothing of it may touch a stream that captures a graph. */
  bool capturing = pool->config.streams.stream_ordered &&
                   gmr__cuda_stream_is_capturing(pool->cuda, (cudaStream_t)stream);
  if (!capturing && slow_steps(a, r, out_ptr, failure, &st)) return GMR_OK;
  if (st != GMR_OK) return gmr__pool_note_free_info(pool, failure, st);
  if (pool->arena_count > 1 && gmr__pool_take_from_other_arenas(pool, a, r, out_ptr)) {
    return GMR_OK;
  }
  if (capturing) {
    st = gmr__failure_set(
        failure, GMR_ERR_CAPTURE_UNSAFE,
        "pool_resource: no free block of %zu bytes for this stream, and the "
        "pool cannot grow or wait for other streams while the stream captures "
        "a CUDA graph; use gmr_resource_allocate_capturing, allocate before the capture, "
        "or use a graph_arena_resource",
        r->need);
    return gmr__pool_note_free_info(pool, failure, st);
  }
  st = gmr__pool_grow(a, r, out_ptr, failure);
  if (st == GMR_OK) return GMR_OK;
  if ((st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED) && pool->arena_count > 1) {
    gmr_failure first = *failure;
    if (gmr__pool_allocate_elsewhere(pool, a, r, out_ptr, failure) == GMR_OK) return GMR_OK;
    *failure = first; /* the home arena's failure is the one to report */
  }
  return gmr__pool_note_free_info(pool, failure, st);
}

static gmr_status pool_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  gmr__pool_request r;
  gmr_status st = gmr__pool_request_init(pool, bytes, alignment, stream, false, &r, failure);
  if (st != GMR_OK) return st;
  /* A stream that keeps reusing its own memory needs its id at every
   * allocation: asked before the lock is taken, not after a first look. */
  if (!r.key_known && gmr__stream_id_hint(stream)) {
    st = gmr__pool_request_identify(pool, &r, failure);
    if (st != GMR_OK) return st;
  }
  gmr__pool_arena *a = gmr__pool_arena_for(pool, r.key);
  bool id_matters = false;
  step_result res = step_one(a, &r, out_ptr, &id_matters, failure, &st);
  if (res != SERVED) return allocate_rest(pool, a, &r, res, id_matters, st, out_ptr, failure);
  if (gmr__stream_id_asked_lazily(pool->events_mode, stream)) {
    gmr__stream_id_hint_set(stream, id_matters);
  }
  return GMR_OK;
}

/* ---- deallocation -------------------------------------------------------- */

/* The slot a free on `key`'s stream is filed under, the block found in `a`
 * (lock held): with the id unknown, the slot of the last stream with the
 * handle, unless there is none or a record is due on it (both need the id:
 * UINT32_MAX - 1, lock released). UINT32_MAX: no host memory. */
#define NEED_ID_SLOT (UINT32_MAX - 1u)
static uint32_t free_slot(gmr__pool_arena *a, gmr__stream_key key, bool known) {
  if (known) return gmr__pool_slot_of(a, key);
  uint32_t si = gmr__pool_slot_for_handle(a, key.stream);
  if (si == UINT32_MAX || (si != GMR__POOL_SHARED_SLOT &&
                           gmr__stream_event_record_due(&gmr__pool_slot_at(a, si)->base.ev))) {
    gmr__spin_lock_release(&a->lock);
    return NEED_ID_SLOT;
  }
  return si;
}

static gmr_status pool_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  uintptr_t addr = (uintptr_t)ptr;
  gmr__stream_key key;
  bool known = true;
  /* A created stream's id only if the free needs it (stream_ordered/stream_event.h). */
  cudaError_t err = gmr__stream_key_begin(pool->cuda, pool->events_mode, stream, &key, &known);
  if (err != cudaSuccess) return gmr__status_from_cuda(err); /* nothing released */
  for (;;) {
    gmr__pool_arena *a = gmr__pool_arena_for(pool, key);
    gmr__spin_lock_acquire(&a->lock);
    gmr__block_map_hit hit = gmr__block_map_lookup(&a->live, addr);
    if (hit.block == NULL && pool->arena_count > 1) {
      /* Allocated by a thread of another arena. */
      gmr__spin_lock_release(&a->lock);
      a = gmr__pool_registry_find_arena(&pool->registry, addr);
      if (a == NULL) return GMR_ERR_UNKNOWN_POINTER;
      gmr__spin_lock_acquire(&a->lock);
      hit = gmr__block_map_lookup(&a->live, addr);
    }
    gmr__pool_block *b = hit.block;
    if (b == NULL || b->is_free) { /* free: a cached block, freed already */
      gmr__spin_lock_release(&a->lock);
      return gmr__pool_bad_free_verdict(pool, addr);
    }
    if (b->request_bytes != bytes || b->request_alignment_log2 != log2_of(alignment)) {
      gmr__spin_lock_release(&a->lock); /* another size: change nothing */
      return GMR_ERR_FREE_MISMATCH;
    }
    uint32_t si = free_slot(a, key, known);
    if (si == NEED_ID_SLOT) {
      err = gmr__stream_key_of(pool->cuda, pool->events_mode, stream, &key);
      if (err != cudaSuccess) return gmr__status_from_cuda(err); /* nothing released */
      known = true;
      continue;
    }
    if (si == UINT32_MAX) {
      gmr__spin_lock_release(&a->lock);
      return GMR_ERR_OUT_OF_MEMORY; /* no slot for a new stream: the caller keeps ptr */
    }
    /* Before the block can merge or be handed out again. */
    if (pool->config.streams.nvtx_annotate) gmr__nvtx_mem_region_unregister(ptr);
    a->in_use_bytes -= b->node.bytes;
    a->requested_bytes -= bytes;
    a->in_use_count--;
    a->recent_freed[a->recent_freed_next++ % GMR__POOL_RECENT_FREED] = addr;
    if (b->uses != NULL && gmr__pool_defer_free(a, si, b)) {
      gmr__block_map_remove_hit(&a->live, hit); /* checks the slot still holds it */
    } else if (gmr__pool_cacheable(a, b)) {
      gmr__pool_cache_put(a, si, b); /* it stays in the live map */
    } else {
      gmr__block_map_remove_hit(&a->live, hit);
      gmr__pool_file_free(a, si, b);
    }
    if (si != GMR__POOL_SHARED_SLOT) {
      gmr__stream_event_mark_freed(pool->cuda, &gmr__pool_slot_at(a, si)->base.ev, false,
                                   &pool->events);
    }
    gmr__spin_lock_release(&a->lock);
    return GMR_OK;
  }
}

/* ---- the vtable ---------------------------------------------------------- */

static gmr_status pool_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_pool_resource *pool = (const gmr_pool_resource *)self;
  out->held_bytes = atomic_load_explicit(&pool->held_bytes, memory_order_relaxed);
  out->peak_held_bytes = atomic_load_explicit(&pool->peak_held_bytes, memory_order_relaxed);
  return GMR_OK;
}

static gmr_resource *pool_get_upstream(const gmr_resource *self) {
  return ((const gmr_pool_resource *)self)->upstream;
}

const gmr_resource_vtbl gmr__pool_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "pool_resource",
    .allocate = pool_allocate,
    .deallocate = pool_deallocate,
    .destroy = gmr__pool_destroy,
    .get_upstream = pool_get_upstream,
    .trim = gmr__pool_trim,
    .get_footprint = pool_get_footprint,
    .get_memory_info = gmr__pool_get_memory_info,
    .record_stream = gmr__pool_record_stream,
    .allocate_capturing = gmr__pool_allocate_capturing,
};
