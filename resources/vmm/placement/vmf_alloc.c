/*
 * resources/vmm/placement/vmf_alloc.c (internal): allocation by a placement
 * engine (vmf.h); what it does with what it handed out is vmf_free.c's.
 *
 * allocate(stream T), in order (gmr's pool's steps, over VMM memory):
 *  1. the best fit among the free regions filed under T and the shared ones
 *     (no CUDA call; this is the whole path once the pool is warm), after
 *     filing back regions whose record_stream events completed (queries,
 *     only while such regions wait);
 *  2. other streams' free regions whose work is known done: each such
 *     stream's event is recorded once if needed (default streams are
 *     recorded lazily) and queried; a done stream's regions become shared;
 *  3. a region of a stream whose work is pending: T waits for that stream's
 *     event on the GPU (cudaStreamWaitEvent) and takes all of its regions;
 *     steps 2 and 3, and the device synchronisation before step 4 when
 *     memory no record covers would fit, are stream_ordered/reclaim.h's;
 *  4. new or moved physical memory: the engine's source grows it (vmf.h,
 *     vmf_source).
 * Steps 2-3 are skipped while T captures a graph (no stream-ordered call on
 * other streams); step 4 then runs in relaxed capture mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/placement/vmf.h"

static size_t norm_alignment(size_t alignment) {
  return alignment <= VMF_UNIT ? VMF_UNIT : alignment;
}

/* ---- taking a region ----------------------------------------------------------- */

vmf_region *gmr__vmf_take(vmf_engine *e, vmf_region *r, size_t bytes, size_t alignment,
                          gmr_stream stream) {
  r = gmr__vmf_cut(e, r, bytes, alignment); /* headers reserved by the caller */
  gmr__vmf_set_state(e, r, VMF_LIVE);
  r->stream = stream;
  r->tag = e->default_tag;
  (void)gmr__u64_map_put(&e->live, (uint64_t)r->node.addr, (uint64_t)(uintptr_t)r); /* reserved */
  e->live_bytes += r->node.bytes;
  e->live_count++;
  if (e->live_bytes > e->peak_live_bytes) e->peak_live_bytes = e->live_bytes;
  return r;
}

/* ---- allocate ------------------------------------------------------------------------ */

static vmf_region *find_usable(vmf_engine *e, uint32_t slot, size_t bytes, size_t alignment) {
  vmf_region *own = gmr__vmf_bin_find(e, slot, bytes, alignment);
  vmf_region *shared = gmr__vmf_bin_find(e, VMF_SHARED, bytes, alignment);
  if (own == NULL) return shared;
  if (shared == NULL) return own;
  return shared->node.bytes < own->node.bytes ? shared : own;
}

/* Steps 2-4, with CUDA calls: the device current, relaxed capture mode
 * while `stream` captures. */
static gmr_status allocate_slow(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
                                uint32_t slot, bool capturing_api, bool may_grow,
                                bool *would_grow, vmf_region **out, gmr_failure *failure) {
  int saved_device = -1;
  cudaError_t err = gmr__cuda_device_enter(e->cuda, e->device, &saved_device);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  bool capturing = capturing_api || gmr__cuda_stream_is_capturing(e->cuda, (cudaStream_t)stream);
  enum cudaStreamCaptureMode saved_mode = cudaStreamCaptureModeGlobal;
  /* Relaxed whoever captures: page mapping and event queries are
   * potentially unsafe calls, which in global mode would break a capture
   * another stream (or thread) is making. */
  err = gmr__cuda_capture_relaxed_enter(e->cuda, &saved_mode);
  gmr_status st = GMR_OK;
  vmf_region *r = NULL;
  if (err != cudaSuccess) {
    st = gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
  } else {
    if (e->blocked != NULL) gmr__vmf_unblock(e, VMF_UNBLOCK_QUERY, stream);
    gmr__reclaim_want want = {bytes, alignment};
    if (!capturing) {
      /* Frees during a capture could not record this stream's event (nor
       * those of a batch not full yet); the stream is named now, so it
       * exists: record it, so that the free memory it holds can go to other
       * streams once done (none held: nothing to cover). */
      if (gmr__stream_event_fresh(&gmr__vmf_slot(e, slot)->base.ev) &&
          !gmr__vmf_slot(e, slot)->base.ev.lazy && gmr__vmf_slot_holds_fresh(e, slot) &&
          gmr__vmf_slot_check(e, stream, &slot, NULL)) {
        gmr__stream_event *ev = &gmr__vmf_slot(e, slot)->base.ev;
        uint64_t before = ev->covered_seq;
        gmr__stream_event_mark_freed(e->cuda, ev, true, &e->events);
        gmr__vmf_note_covered(e, slot, before);
      }
      /* 2: streams whose work is done give their regions to everyone; 3: T
       * waits for a stream that has a fitting region and takes them all. */
      bool pending = gmr__reclaim_collect(&e->slots, slot, NULL, GMR__RECLAIM_SETTLE);
      r = find_usable(e, slot, bytes, alignment);
      if (r == NULL && pending && gmr__reclaim_wait(&e->slots, slot, &want)) {
        r = find_usable(e, slot, bytes, alignment);
      }
      /* Memory no record covers yet (its stream owes a record, or is
       * gone) would have served: its stream is asked to record at its next
       * call (so that the next request finds it covered), and, where that
       * spares a growth now, one device synchronisation makes it anyone's. */
      if (r == NULL &&
          gmr__reclaim_demand(&e->slots, slot, &want,
                              gmr__vmf_slot_free_bytes(e, slot) +
                                  gmr__vmf_slot_free_bytes(e, VMF_SHARED)) &&
          may_grow && gmr__reclaim_device_synchronize(&e->slots) == cudaSuccess) {
        r = find_usable(e, slot, bytes, alignment);
      }
    } else {
      /* Capturing: no record and no wait, but memory of streams whose
       * recorded work is done may still be used (queries, relaxed mode). */
      (void)gmr__reclaim_collect(&e->slots, slot, NULL, GMR__RECLAIM_QUERY);
      r = find_usable(e, slot, bytes, alignment);
    }
    if (r != NULL) {
      gmr__vmf_bin_remove(e, r);
    } else if (!may_grow) {
      *would_grow = true;
      st = GMR_ERR_OUT_OF_MEMORY;
    } else {
      st = e->source->grow(e, bytes, alignment, stream, slot, capturing, &r, failure);
      /* A source may order the memory on the stream (vmm_pages' pages,
       * freed on it before): then it is the stream's newest free, covered
       * only if the stream recorded since (gmr__vmf_file_freed's rule). */
      if (st == GMR_OK && gmr__stream_event_fresh(&gmr__vmf_slot(e, slot)->base.ev)) {
        r->fresh = true;
      }
    }
    gmr__cuda_capture_relaxed_leave(e->cuda, saved_mode);
  }
  gmr__cuda_device_leave(e->cuda, saved_device);
  *out = r;
  return st;
}

gmr_status gmr__vmf_allocate(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
                             bool capturing_api, void **out_ptr, gmr_failure *failure) {
  bool would_grow = false;
  return gmr__vmf_allocate_ex(e, bytes, alignment, stream, capturing_api, true, &would_grow,
                              out_ptr, failure);
}

bool gmr__vmf_take_cached(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
                          void **out_ptr) {
  size_t align = norm_alignment(alignment);
  size_t n = gmr__align_up(bytes, VMF_UNIT);
  gmr__vmf_lock(e);
  uint32_t slot = VMF_SHARED;
  vmf_region *r = NULL;
  if (e->asleep_count == 0 && gmr__vmf_reserve_regions(e, 4) &&
      gmr__u64_map_reserve(&e->live, e->live.count + 1)) {
    r = gmr__vmf_find_slot(e, stream, &slot) ? find_usable(e, slot, n, align)
                                             : gmr__vmf_bin_find(e, VMF_SHARED, n, align);
  }
  if (r != NULL) {
    gmr__vmf_bin_remove(e, r);
    r = gmr__vmf_take(e, r, n, align, stream);
    r->requested_bytes = bytes;
    r->alignment = alignment;
    *out_ptr = (void *)r->node.addr;
  }
  gmr__vmf_unlock(e);
  return r != NULL;
}

gmr_status gmr__vmf_allocate_ex(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
                                bool capturing_api, bool may_grow, bool *would_grow,
                                void **out_ptr, gmr_failure *failure) {
  *would_grow = false;
  size_t align = norm_alignment(alignment);
  if (align > e->page_bytes) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                            "vmm_pool aligns allocations to at most its page (%zu bytes); %zu "
                            "was asked",
                            e->page_bytes, alignment);
  }
  if (bytes > GMR_MAX_ALLOCATION_BYTES) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: %zu bytes is more than any device has", bytes);
  }
  size_t n = gmr__align_up(bytes, VMF_UNIT);
  gmr__vmf_lock(e);
  if (e->asleep_count > 0) {
    gmr__vmf_unlock(e);
    return gmr__vmm_busy_asleep(failure, "allocating");
  }
  uint32_t slot = 0;
  if (!gmr__vmf_slot_of(e, stream, &slot) || !gmr__vmf_reserve_regions(e, 4) ||
      !gmr__u64_map_reserve(&e->live, e->live.count + 1)) {
    gmr__vmf_unlock(e);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: host memory for the bookkeeping ran out");
  }
  gmr_status st = GMR_OK;
  /* Another stream asked for this stream's fresh memory: record now (the
   * stream surely exists during this call), its id checked first. */
  vmf_slot *own = gmr__vmf_slot(e, slot);
  if (own->base.ev.demand && gmr__stream_event_fresh(&own->base.ev) && !own->base.ev.lazy &&
      gmr__vmf_slot_check(e, stream, &slot, NULL)) {
    gmr__stream_event *ev = &gmr__vmf_slot(e, slot)->base.ev;
    uint64_t before = ev->covered_seq;
    gmr__stream_event_note_call(e->cuda, ev, &e->events);
    gmr__vmf_note_covered(e, slot, before);
  }
  /* PyTorch's record_stream reuse (as gmr's pool): regions whose recorded
   * uses are done are filed again before the search, so the freeing
   * stream's next request of that size gets the same memory back. */
  if (e->blocked != NULL && !capturing_api) gmr__vmf_unblock(e, VMF_UNBLOCK_QUERY, stream);
  vmf_region *r = capturing_api ? NULL : find_usable(e, slot, n, align);
  if (r != NULL) {
    gmr__vmf_bin_remove(e, r);
  } else {
    st = allocate_slow(e, n, align, stream, slot, capturing_api, may_grow, would_grow, &r,
                       failure);
  }
  if (st == GMR_OK) {
    r = gmr__vmf_take(e, r, n, align, stream);
    r->requested_bytes = bytes;
    r->alignment = alignment; /* as asked: a free must name the same */
    *out_ptr = (void *)r->node.addr;
  } else if (!*would_grow) {
    gmr__vmf_fill_free_info(e, failure);
  }
  gmr__vmf_unlock(e);
  return st;
}
