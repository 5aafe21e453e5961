/*
 * resources/pool/pool_capture.c (internal): allocate_capturing, the pool's
 * answer to a request made while the stream captures a CUDA graph
 * (gmr/resource.h): served without any stream-ordered call (no record, no
 * wait, no cudaMallocAsync), so the capture is neither joined nor broken.
 *
 * In order: the stream's own and shared free memory (no CUDA call at all);
 * blocks other arenas hold for the stream; then, with the thread in relaxed
 * capture mode (cudaThreadExchangeStreamCaptureMode, restored on every path),
 * deferred blocks and other streams' memory whose recorded events are done
 * (event queries, which global mode forbids), and finally a new chunk
 * through the upstream's own allocate_capturing (cudaMalloc or page mapping
 * in relaxed mode, as PyTorch's private pools grow during capture). A new
 * chunk is on no stream: it is filed for any stream. An upstream that cannot
 * allocate during capture (cudaMallocAsync would add a memory node to the
 * graph) says GMR_ERR_CAPTURE_UNSAFE, and so does the pool.
 */
#define _POSIX_C_SOURCE 200809L

#include "core/failure.h"
#include "resources/pool/pool_internal.h"

/* Free memory of the home arena, with no CUDA call other than relaxed-mode
 * queries (when `queries`). Pre: no lock held. */
static bool take_free(gmr__pool_arena *a, const gmr__pool_request *r, bool queries, void **out_ptr,
                      gmr_failure *failure, gmr_status *st) {
  gmr__spin_lock_acquire(&a->lock);
  uint32_t si = 0;
  *st = gmr__pool_prepare(a, r, &si, failure);
  gmr__pool_block *b = NULL;
  if (*st == GMR_OK) {
    gmr__pool_slot *slot = gmr__pool_slot_at(a, si);
    if (r->alignment <= GMR__POOL_UNIT && (b = gmr__pool_cache_take(slot, r->size)) != NULL) {
      gmr__pool_hand_out_cached(a, b, r, out_ptr);
      gmr__spin_lock_release(&a->lock);
      return true;
    }
    gmr__pool_flush_caches(a);
    if (queries) {
      if (a->deferred_count > 0) (void)gmr__pool_process_deferred(a, r->stream);
      /* Completed memory of other streams (queries, once per record) first. */
      (void)gmr__reclaim_collect(&a->slots, si, NULL, GMR__RECLAIM_QUERY_ONCE);
    }
    b = gmr__pool_find_fit(a, si, r->need);
    if (b != NULL) gmr__pool_hand_out(a, b, r, out_ptr);
  }
  gmr__spin_lock_release(&a->lock);
  return b != NULL;
}

gmr_status gmr__pool_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                        gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  gmr__pool_request r;
  gmr_status st = gmr__pool_request_init(pool, bytes, alignment, stream, true, &r, failure);
  if (st == GMR_OK) st = gmr__pool_request_identify(pool, &r, failure); /* relaxed mode */
  if (st != GMR_OK) return st;
  gmr__pool_arena *a = gmr__pool_arena_for(pool, r.key);
  if (take_free(a, &r, false, out_ptr, failure, &st)) return GMR_OK;
  if (st != GMR_OK) return gmr__pool_note_free_info(pool, failure, st);
  if (pool->arena_count > 1 && gmr__pool_take_from_other_arenas(pool, a, &r, out_ptr)) {
    return GMR_OK;
  }
  enum cudaStreamCaptureMode saved;
  cudaError_t err = gmr__cuda_capture_relaxed_enter(pool->cuda, &saved);
  if (err != cudaSuccess) {
    st = gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
    return gmr__pool_note_free_info(pool, failure, st);
  }
  if (!take_free(a, &r, true, out_ptr, failure, &st) && st == GMR_OK) {
    st = gmr__pool_grow(a, &r, out_ptr, failure);
  }
  gmr__cuda_capture_relaxed_leave(pool->cuda, saved);
  return st == GMR_OK ? GMR_OK : gmr__pool_note_free_info(pool, failure, st);
}
