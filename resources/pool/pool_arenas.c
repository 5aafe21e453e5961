/*
 * resources/pool/pool_arenas.c (internal): memory of the other arenas.
 *
 * An arena uses its own chunks; threads are spread over arenas so that they
 * do not share a lock. Before an arena grows, it takes a block another arena
 * holds free for the same stream (or for any stream): that needs no CUDA call
 * and no ordering, and it is what keeps a program whose threads take turns on
 * one stream (PyTorch's forward thread and its autograd thread) at the
 * footprint of one arena. Threads on streams of their own (the scaling case)
 * find nothing of theirs elsewhere and grow their own arena once. Only when
 * growth fails does an arena take other arenas' memory of other streams
 * (through events) and make them give back their wholly free chunks.
 */
#define _POSIX_C_SOURCE 200809L

#include "resources/pool/pool_internal.h"

bool gmr__pool_take_from_other_arenas(gmr_pool_resource *pool, gmr__pool_arena *home,
                                      const gmr__pool_request *r, void **out_ptr) {
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    if (a == home) continue;
    gmr__spin_lock_acquire(&a->lock);
    gmr__pool_block *b = NULL;
    bool cached = false;
    /* Room for the allocation in that arena's books; no slot is created. */
    if (gmr__pool_reserve_headers(a, 2) && gmr__block_map_reserve_one(&a->live)) {
      uint32_t si = gmr__pool_find_slot(a, r->key);
      if (si != UINT32_MAX && r->alignment <= GMR__POOL_UNIT) {
        b = gmr__pool_cache_take(gmr__pool_slot_at(a, si), r->size);
        cached = b != NULL;
      }
      if (b == NULL)
        b = gmr__pool_find_fit(a, si == UINT32_MAX ? GMR__POOL_SHARED_SLOT : si, r->need);
    }
    if (b != NULL) {
      if (cached) {
        gmr__pool_hand_out_cached(a, b, r, out_ptr);
      } else {
        gmr__pool_hand_out(a, b, r, out_ptr);
      }
    }
    gmr__spin_lock_release(&a->lock);
    if (b != NULL) return true;
  }
  return false;
}

gmr_status gmr__pool_allocate_elsewhere(gmr_pool_resource *pool, gmr__pool_arena *home,
                                        const gmr__pool_request *r, void **out_ptr,
                                        gmr_failure *failure) {
  gmr_failure scratch = GMR_FAILURE_INIT;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    if (a == home) continue;
    gmr__spin_lock_acquire(&a->lock);
    uint32_t si = 0;
    gmr__pool_block *b = NULL;
    if (gmr__pool_prepare(a, r, &si, &scratch) == GMR_OK) {
      gmr__pool_flush_caches(a);
      (void)gmr__pool_process_deferred(a, r->stream);
      b = gmr__pool_find_fit(a, si, r->need);
      if (b == NULL && si != GMR__POOL_SHARED_SLOT)
        b = gmr__pool_from_other_streams(a, si, r->need);
      if (b != NULL) gmr__pool_hand_out(a, b, r, out_ptr);
    }
    gmr__spin_lock_release(&a->lock);
    if (b != NULL) return GMR_OK;
  }
  /* Their wholly free chunks go back (after waiting for the streams that
   * used them), then the home arena tries to grow once more. */
  size_t released = 0;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    if (a == home) continue;
    pthread_mutex_lock(&a->grow_lock);
    gmr__pool_settle_everything(a);
    (void)gmr__pool_release_settled_chunks(a, &released);
    pthread_mutex_unlock(&a->grow_lock);
  }
  if (released == 0) return GMR_ERR_OUT_OF_MEMORY;
  return gmr__pool_grow(home, r, out_ptr, failure);
}
