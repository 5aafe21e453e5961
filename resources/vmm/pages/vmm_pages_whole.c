/*
 * resources/vmm/pages/vmm_pages_whole.c (internal): requests of whole pages
 * in vmm_pages (vmm_pages.h): allocation (the phases of vmm_pages_alloc.c
 * under the pool's mutex, the device current, relaxed capture mode), frees
 * with what orders the reuse of the freed pages, record_stream, and the
 * live map's verdicts on bad frees. The small path's chunks come from here
 * too (marked internal).
 */
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/base/vmm_sleep_run.h"
#include "resources/vmm/pages/vmm_pages.h"

static void lock(vmm_pages *p) { pthread_mutex_lock(&p->pool.lock); }
static void unlock(vmm_pages *p) { pthread_mutex_unlock(&p->pool.lock); }

/* ---- the live map ------------------------------------------------------- */

vmm_region *gmr__vmm_live_region(vmm_pages *p, const void *ptr) {
  uint64_t v = 0;
  if (!gmr__u64_map_get(&p->live, (uint64_t)(uintptr_t)ptr, &v)) return NULL;
  return (vmm_region *)(uintptr_t)v;
}

/* Why `ptr` is not a live allocation of whole pages (lock held). */
/* Why `ptr` is not a live allocation of whole pages (lock held). */
gmr_status gmr__vmm_bad_free(vmm_pages *p, const void *ptr) {
  return gmr__u64_map_get(&p->freed, (uint64_t)(uintptr_t)ptr, NULL) ? GMR_ERR_DOUBLE_FREE
                                                                     : GMR_ERR_UNKNOWN_POINTER;
}

/* ---- allocation of whole pages ------------------------------------------ */

gmr_status gmr__vmm_allocate_pages_locking(vmm_pages *p, size_t bytes, size_t alignment,
                                           gmr_stream stream, bool force_capturing, bool internal,
                                           void **out_ptr, gmr_failure *failure) {
  size_t rounded = gmr__align_up(bytes, p->pool.page_bytes);
  lock(p);
  if (gmr__vmm_asleep(&p->pool)) {
    unlock(p);
    return gmr__vmm_busy_asleep(failure, "allocating");
  }
  vmm_region *r = NULL;
  gmr_status st = force_capturing ? GMR_OK
                                  : gmr__vmm_allocate_pages(p, rounded, stream, false, true, &r,
                                                            failure);
  if (st == GMR_OK && r == NULL) {
    int saved_device = -1;
    cudaError_t err = gmr__cuda_device_enter(p->pool.cuda, p->pool.device, &saved_device);
    if (err != cudaSuccess) {
      st = gmr__cuda_fail(failure, "cudaSetDevice", err);
    } else {
      bool capturing = force_capturing || gmr__cuda_stream_is_capturing(p->pool.cuda, stream);
      enum cudaStreamCaptureMode saved_mode = cudaStreamCaptureModeGlobal;
      /* Relaxed whoever captures: page mapping and event queries are
       * potentially unsafe calls, which in global mode would break a capture
       * another stream (or thread) is making. */
      err = gmr__cuda_capture_relaxed_enter(p->pool.cuda, &saved_mode);
      if (err != cudaSuccess) {
        st = gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
      } else {
        st = gmr__vmm_allocate_pages(p, rounded, stream, capturing, false, &r, failure);
        gmr__cuda_capture_relaxed_leave(p->pool.cuda, saved_mode);
      }
      gmr__cuda_device_leave(p->pool.cuda, saved_device);
    }
  }
  if (st == GMR_OK) {
    r->requested_bytes = bytes;
    r->alignment = alignment;
    r->internal = internal;
    if (internal) p->internal_count++;
    *out_ptr = (void *)r->addr;
  } else {
    gmr__vmm_fill_free_info(p, failure);
  }
  unlock(p);
  return st;
}

/* ---- frees -------------------------------------------------------------- */

static void forget_live(vmm_pages *p, vmm_region *r) {
  (void)gmr__u64_map_remove(&p->live, (uint64_t)r->addr, NULL);
  (void)gmr__u64_map_put(&p->freed, (uint64_t)r->addr, 1); /* best effort: only classifies */
  if (r->internal) p->internal_count--;
}

/* Free an asleep allocation: it has no pages, only addresses and a copy (a
 * pinned copy cudaFreeHost refuses is kept as unfreed, the free succeeds). */
static void free_asleep(vmm_pages *p, vmm_region *r) {
  if (r->saved != NULL) {
    (void)gmr__vmm_host_free(&p->unreleased, p->saved_host, r->saved, r->bytes);
    p->saved_bytes -= r->bytes;
    r->saved = NULL;
  }
  p->asleep_bytes -= r->bytes;
  p->asleep_count--;
  forget_live(p, r);
  gmr__vmm_region_clear_blockers(p, r);
  (void)gmr__vmm_make_hole(p, r);
}

/* What orders the reuse of a freed region. */
typedef struct free_cover {
  vmm_event *event;     /* recorded on the freeing stream; NULL: nothing pending */
  bool unordered;       /* no event and no wait: reusable by the freeing stream only */
  vmm_event **blockers; /* recorded on the streams record_stream named */
  uint32_t blocker_count;
  bool capture_wait;    /* a stream record_stream named captures: its markers */
  gmr__capture_markers markers;
} free_cover;

/* Cover the free of r on `stream` (`entered`: the pool's device is
 * current). Each stream gets an event recorded now; where none can be (no
 * event, a refused record, the device not made current, no host memory)
 * the free still succeeds, as gmr's pool's does, and nothing is reused
 * early: the host waits for that stream (cudaStreamSynchronize), so its
 * work up to the free is done and nothing is pending. A freeing
 * stream that cannot be waited for either makes the region unordered
 * (reusable by that stream alone, in stream order, as a free during a
 * capture, until sleep or destroy synchronise the device). A capturing stream
 * records nothing (unordered; a used stream's work runs at the replay).
 * Returns GMR_ERR_CUDA only when a used stream can be neither recorded on
 * nor waited for; nothing is kept then. */
static gmr_status cover_free(vmm_pages *p, vmm_region *r, gmr_stream stream,
                             bool capturing, bool entered, free_cover *c) {
  *c = (free_cover){NULL, capturing, NULL, 0, false, {0, NULL, 0}};
  cudaError_t err = cudaSuccess;
  if (!capturing && entered) {
    c->event = gmr__vmm_event_new(p, &err);
    if (c->event != NULL && gmr__vmm_event_record(p, c->event, stream) != cudaSuccess) {
      gmr__vmm_event_unref(p, c->event);
      c->event = NULL;
    }
  }
  if (!capturing && c->event == NULL) {
    c->unordered = p->pool.cuda->stream_synchronize((cudaStream_t)stream) != cudaSuccess;
  }
  if (r->used_count > 0) c->blockers = calloc(r->used_count, sizeof *c->blockers);
  err = cudaSuccess;
  gmr_stream captured[16];
  uint32_t captured_count = 0;
  for (uint32_t i = 0; err == cudaSuccess && i < r->used_count; ++i) {
    gmr_stream u = r->used_streams[i];
    if (u == stream) continue;
    if (gmr__cuda_stream_is_capturing(p->pool.cuda, u)) {
      /* Its work runs at the graph's replay: the graph's edges tell when
       * the use ends (stream_ordered/capture_reuse.h). */
      c->capture_wait = true;
      if (captured_count < sizeof captured / sizeof captured[0]) captured[captured_count] = u;
      captured_count++;
      continue;
    }
    vmm_event *e = entered && c->blockers != NULL ? gmr__vmm_event_new(p, &err) : NULL;
    if (e != NULL && gmr__vmm_event_record(p, e, u) == cudaSuccess) {
      c->blockers[c->blocker_count++] = e;
      continue;
    }
    gmr__vmm_event_unref(p, e);
    err = p->pool.cuda->stream_synchronize((cudaStream_t)u);
  }
  if (err == cudaSuccess && c->capture_wait && captured_count <= 16) {
    (void)gmr__capture_markers_take(p->pool.cuda, stream, captured, captured_count, &c->markers);
  }
  if (err == cudaSuccess && (c->blocker_count > 0 || c->capture_wait)) return GMR_OK;
  for (uint32_t i = 0; i < c->blocker_count; ++i) gmr__vmm_event_unref(p, c->blockers[i]);
  free(c->blockers);
  c->blockers = NULL;
  c->blocker_count = 0;
  if (err == cudaSuccess) return GMR_OK;
  gmr__vmm_event_unref(p, c->event);
  c->event = NULL;
  return GMR_ERR_CUDA;
}

gmr_status gmr__vmm_free_pages_locking(vmm_pages *p, void *ptr, size_t bytes,
                                       size_t alignment, gmr_stream stream, bool internal) {
  lock(p);
  vmm_region *r = gmr__vmm_live_region(p, ptr);
  gmr_status st = GMR_OK;
  if (r == NULL) {
    st = gmr__vmm_bad_free(p, ptr);
  } else if (r->internal != internal) {
    st = GMR_ERR_UNKNOWN_POINTER; /* a chunk of the small pool is not the caller's */
  } else if (bytes != r->requested_bytes || alignment != r->alignment) {
    st = GMR_ERR_FREE_MISMATCH; /* exactly as asked, not the pages it rounds to */
  } else if (r->state == VMM_ASLEEP) {
    free_asleep(p, r);
  } else {
    int saved_device = -1;
    bool entered =
        gmr__cuda_device_enter(p->pool.cuda, p->pool.device, &saved_device) == cudaSuccess;
    bool capturing = gmr__cuda_stream_is_capturing(p->pool.cuda, stream);
    free_cover c;
    st = cover_free(p, r, stream, capturing, entered, &c);
    if (entered) gmr__cuda_device_leave(p->pool.cuda, saved_device);
    if (st == GMR_OK) {
      forget_live(p, r);
      p->live_bytes -= r->bytes;
      p->live_count--;
      gmr__vmm_region_clear_blockers(p, r); /* the record_stream list */
      r->stream = stream;
      r->event = c.event;
      r->unordered = c.unordered;
      r->blockers = c.blockers;
      r->blocker_count = c.blocker_count;
      r->capture_wait = c.capture_wait;
      r->capture_markers = c.markers;
      r->id = p->next_id++;
      r->requested_bytes = 0;
      r->internal = false;
      gmr__vmm_set_state(p, r, VMM_FREE);
      if (!gmr__vmm_region_held(r)) (void)gmr__vmm_merge_free(p, r);
    }
  }
  unlock(p);
  return st;
}

/* ---- record_stream --------------------------------------------------------- */

gmr_status gmr__vmm_record_stream_pages(vmm_pages *p, void *ptr, gmr_stream stream) {
  lock(p);
  vmm_region *r = gmr__vmm_live_region(p, ptr);
  gmr_status st = GMR_OK;
  if (r == NULL) {
    st = gmr__vmm_bad_free(p, ptr);
  } else if (r->internal) {
    st = GMR_ERR_UNKNOWN_POINTER; /* a chunk of the small path is not the caller's */
  } else if (!gmr__vmm_streams_add(&r->used_streams, &r->used_count, stream)) {
    st = GMR_ERR_OUT_OF_MEMORY;
  }
  unlock(p);
  return st;
}
