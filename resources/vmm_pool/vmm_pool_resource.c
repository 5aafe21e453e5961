/*
 * resources/vmm_pool/vmm_pool_resource.c: gmr_vmm_pool_resource's create,
 * destroy, vtable, request routing and frees (gmr/vmm_pool_resource.h;
 * data structures in vmm_pool_internal.h).
 *
 * (create: vmm_pool_create.c). FINE placement hands every request to its
 * engine (vmm_fine.h). PAGES placement serves whole pages here and requests
 * below one page through the small path (vmm_pool_small.c), whose chunks
 * are pages of this pool: the small path takes the pool's lock only to get
 * or give a chunk, and the pool never calls the small path with its lock
 * held.
 */
#include "gmr/vmm_pool_resource.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm_pool/vmm_pool_internal.h"
#include "resources/vmm_pool/vmm_sleep_common.h"


static void lock(gmr_vmm_pool_resource *p) { pthread_mutex_lock(&p->lock); }
static void unlock(gmr_vmm_pool_resource *p) { pthread_mutex_unlock(&p->lock); }

vmm_region *gmr__vmm_live_region(gmr_vmm_pool_resource *p, const void *ptr) {
  uint64_t v = 0;
  if (!gmr__u64_map_get(&p->live, (uint64_t)(uintptr_t)ptr, &v)) return NULL;
  return (vmm_region *)(uintptr_t)v;
}

static vmm_region *live_region(gmr_vmm_pool_resource *p, const void *ptr) {
  return gmr__vmm_live_region(p, ptr);
}

static gmr_status busy_asleep(gmr_failure *failure) {
  return gmr__failure_set(failure, GMR_ERR_BUSY,
                          "vmm_pool is asleep (gmr_vmm_pool_resource_sleep): wake it before "
                          "allocating");
}

/* ---- allocation of whole pages ------------------------------------------ */

gmr_status gmr__vmm_allocate_pages_locking(gmr_vmm_pool_resource *p, size_t bytes, size_t alignment,
                                           gmr_stream stream, bool force_capturing, bool internal,
                                           void **out_ptr, gmr_failure *failure) {
  size_t rounded = gmr__align_up(bytes, p->page_bytes);
  lock(p);
  if (atomic_load_explicit(&p->sleeping, memory_order_relaxed)) {
    unlock(p);
    return busy_asleep(failure);
  }
  vmm_region *r = NULL;
  gmr_status st = force_capturing ? GMR_OK
                                  : gmr__vmm_allocate_pages(p, rounded, stream, false, true, &r,
                                                            failure);
  if (st == GMR_OK && r == NULL) {
    int saved_device = -1;
    cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved_device);
    if (err != cudaSuccess) {
      st = gmr__cuda_fail(failure, "cudaSetDevice", err);
    } else {
      bool capturing = force_capturing || gmr__cuda_stream_is_capturing(p->cuda, stream);
      enum cudaStreamCaptureMode saved_mode = cudaStreamCaptureModeGlobal;
      /* Relaxed whoever captures: page mapping and event queries are
       * potentially unsafe calls, which in global mode would break a capture
       * another stream (or thread) is making. */
      err = gmr__cuda_capture_relaxed_enter(p->cuda, &saved_mode);
      if (err != cudaSuccess) {
        st = gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
      } else {
        st = gmr__vmm_allocate_pages(p, rounded, stream, capturing, false, &r, failure);
        gmr__cuda_capture_relaxed_leave(p->cuda, saved_mode);
      }
      gmr__cuda_device_leave(p->cuda, saved_device);
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

static gmr_status allocate_common(gmr_vmm_pool_resource *p, size_t bytes, size_t alignment,
                                  gmr_stream stream, void **out_ptr, gmr_failure *failure,
                                  bool capturing_api) {
  if (p->fine != NULL) {
    return gmr__vmm_shards_allocate(p, bytes, alignment, stream, capturing_api, out_ptr, failure);
  }
  if (bytes < p->page_bytes && p->small_pool_enabled) {
    lock(p);
    bool asleep = atomic_load_explicit(&p->sleeping, memory_order_relaxed);
    unlock(p);
    if (asleep) return busy_asleep(failure);
    return gmr__vmm_small_allocate(p, bytes, alignment, stream, capturing_api, out_ptr, failure);
  }
  if (alignment > p->page_bytes) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                            "vmm_pool aligns allocations to its page (%zu bytes); %zu was asked",
                            p->page_bytes, alignment);
  }
  return gmr__vmm_allocate_pages_locking(p, bytes, alignment, stream, capturing_api, false, out_ptr,
                                         failure);
}

static gmr_status vmm_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                               gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return allocate_common((gmr_vmm_pool_resource *)self, bytes, alignment, stream, out_ptr, failure,
                         false);
}

static gmr_status vmm_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                         gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return allocate_common((gmr_vmm_pool_resource *)self, bytes, alignment, stream, out_ptr, failure,
                         true);
}

/* ---- frees -------------------------------------------------------------- */

/* Why `ptr` is not a live allocation of whole pages (lock held). */
gmr_status gmr__vmm_bad_free(gmr_vmm_pool_resource *p, const void *ptr) {
  return gmr__u64_map_get(&p->freed, (uint64_t)(uintptr_t)ptr, NULL) ? GMR_ERR_DOUBLE_FREE
                                                                     : GMR_ERR_UNKNOWN_POINTER;
}

static gmr_status bad_free(gmr_vmm_pool_resource *p, const void *ptr) {
  return gmr__vmm_bad_free(p, ptr);
}

static void forget_live(gmr_vmm_pool_resource *p, vmm_region *r) {
  (void)gmr__u64_map_remove(&p->live, (uint64_t)r->addr, NULL);
  (void)gmr__u64_map_put(&p->freed, (uint64_t)r->addr, 1); /* best effort: only classifies */
  if (r->internal) p->internal_count--;
}

/* Free an asleep allocation: it has no pages, only addresses and a copy (a
 * pinned copy cudaFreeHost refuses is kept as unfreed, the free succeeds). */
static void free_asleep(gmr_vmm_pool_resource *p, vmm_region *r) {
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
static gmr_status cover_free(gmr_vmm_pool_resource *p, vmm_region *r, gmr_stream stream,
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
    c->unordered = p->cuda->stream_synchronize((cudaStream_t)stream) != cudaSuccess;
  }
  if (r->used_count > 0) c->blockers = calloc(r->used_count, sizeof *c->blockers);
  err = cudaSuccess;
  gmr_stream captured[16];
  uint32_t captured_count = 0;
  for (uint32_t i = 0; err == cudaSuccess && i < r->used_count; ++i) {
    gmr_stream u = r->used_streams[i];
    if (u == stream) continue;
    if (gmr__cuda_stream_is_capturing(p->cuda, u)) {
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
    err = p->cuda->stream_synchronize((cudaStream_t)u);
  }
  if (err == cudaSuccess && c->capture_wait && captured_count <= 16) {
    (void)gmr__capture_markers_take(p->cuda, stream, captured, captured_count, &c->markers);
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

gmr_status gmr__vmm_free_pages_locking(gmr_vmm_pool_resource *p, void *ptr, size_t bytes,
                                       size_t alignment, gmr_stream stream, bool internal) {
  lock(p);
  vmm_region *r = live_region(p, ptr);
  gmr_status st = GMR_OK;
  if (r == NULL) {
    st = bad_free(p, ptr);
  } else if (r->internal != internal) {
    st = GMR_ERR_UNKNOWN_POINTER; /* a chunk of the small pool is not the caller's */
  } else if (bytes != r->requested_bytes || alignment != r->alignment) {
    st = GMR_ERR_FREE_MISMATCH; /* exactly as asked, not the pages it rounds to */
  } else if (r->state == VMM_ASLEEP) {
    free_asleep(p, r);
  } else {
    int saved_device = -1;
    bool entered = gmr__cuda_device_enter(p->cuda, p->device, &saved_device) == cudaSuccess;
    bool capturing = gmr__cuda_stream_is_capturing(p->cuda, stream);
    free_cover c;
    st = cover_free(p, r, stream, capturing, entered, &c);
    if (entered) gmr__cuda_device_leave(p->cuda, saved_device);
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

static gmr_status vmm_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                 gmr_stream stream) {
  gmr_vmm_pool_resource *p = (gmr_vmm_pool_resource *)self;
  if (p->fine != NULL) return gmr__vmm_shards_deallocate(p, ptr, bytes, alignment, stream);
  if (bytes >= p->page_bytes || !p->small_pool_enabled) {
    gmr_status st = gmr__vmm_free_pages_locking(p, ptr, bytes, alignment, stream, false);
    /* A small block freed with a size of a page or more: the small path
     * names it (the pool's lock is free again: engine lock first). */
    if (st == GMR_ERR_UNKNOWN_POINTER) st = gmr__vmm_small_verdict(p, ptr);
    return st;
  }
  return gmr__vmm_small_deallocate(p, ptr, bytes, alignment, stream);
}

/* ---- optional slots ------------------------------------------------------ */

static gmr_status vmm_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  gmr_vmm_pool_resource *p = (gmr_vmm_pool_resource *)self;
  if (p->fine != NULL) return gmr__vmm_shards_record_stream(p, ptr, stream);
  vmf_engine *small = gmr__vmm_small(p, false);
  if (small != NULL) {
    gmr__vmf_lock(small);
    bool owned = gmr__vmf_owns(small, ptr);
    gmr__vmf_unlock(small);
    if (owned) return gmr__vmf_record_stream(small, ptr, stream);
  }
  lock(p);
  vmm_region *r = live_region(p, ptr);
  if (r == NULL || r->internal) {
    gmr_status st = r == NULL ? bad_free(p, ptr) : GMR_ERR_UNKNOWN_POINTER;
    unlock(p);
    if (st == GMR_ERR_UNKNOWN_POINTER && small != NULL) {
      /* A small block freed already says so. */
      gmr_status sst = gmr__vmf_record_stream(small, ptr, stream);
      if (sst == GMR_ERR_DOUBLE_FREE) st = sst;
    }
    return st;
  }
  gmr_status st = gmr__vmm_streams_add(&r->used_streams, &r->used_count, stream)
                      ? GMR_OK
                      : GMR_ERR_OUT_OF_MEMORY;
  unlock(p);
  return st;
}

static gmr_status vmm_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                             size_t alignment, gmr_stream stream, gmr_failure *failure) {
  gmr_vmm_pool_resource *p = (gmr_vmm_pool_resource *)self;
  if (p->fine != NULL) {
    return gmr__vmm_shards_extend(p, ptr, bytes, new_bytes, alignment, stream, failure);
  }
  if (bytes < p->page_bytes && p->small_pool_enabled) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                            "vmm_pool: an allocation below a page (%zu bytes) lives in the small "
                            "path and cannot grow in place",
                            bytes);
  }
  lock(p);
  vmm_region *r = live_region(p, ptr);
  gmr_status st = GMR_OK;
  if (atomic_load_explicit(&p->sleeping, memory_order_relaxed)) {
    st = busy_asleep(failure);
  } else if (r == NULL || r->internal) {
    st = gmr__failure_set(failure, bad_free(p, ptr) == GMR_ERR_DOUBLE_FREE
                                       ? GMR_ERR_DOUBLE_FREE
                                       : GMR_ERR_UNKNOWN_POINTER,
                          "vmm_pool: %p is not a live allocation of this pool", ptr);
  } else if (bytes != r->requested_bytes || alignment != r->alignment) {
    st = gmr__failure_set(failure, GMR_ERR_FREE_MISMATCH,
                          "vmm_pool: the allocation at %p has %zu bytes and alignment %zu, not "
                          "%zu and %zu",
                          ptr, r->requested_bytes, r->alignment, bytes, alignment);
  } else {
    size_t grow = gmr__align_up(new_bytes, p->page_bytes) - r->bytes;
    int saved_device = -1;
    cudaError_t err = grow == 0 ? cudaSuccess
                                : gmr__cuda_device_enter(p->cuda, p->device, &saved_device);
    if (err != cudaSuccess) {
      st = gmr__cuda_fail(failure, "cudaSetDevice", err);
    } else if (grow > 0) {
      bool capturing = gmr__cuda_stream_is_capturing(p->cuda, stream);
      enum cudaStreamCaptureMode saved_mode = cudaStreamCaptureModeGlobal;
      /* Relaxed whoever captures: page mapping and event queries are
       * potentially unsafe calls, which in global mode would break a capture
       * another stream (or thread) is making. */
      err = gmr__cuda_capture_relaxed_enter(p->cuda, &saved_mode);
      if (err != cudaSuccess) {
        st = gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
      } else {
        st = gmr__vmm_extend_region(p, r, grow, stream, capturing, failure);
        gmr__cuda_capture_relaxed_leave(p->cuda, saved_mode);
      }
      gmr__cuda_device_leave(p->cuda, saved_device);
    }
    if (st == GMR_OK) r->requested_bytes = new_bytes;
    if (st == GMR_ERR_OUT_OF_MEMORY) gmr__vmm_fill_free_info(p, failure);
  }
  unlock(p);
  /* A small block named with a size of a page or more: the small path says
   * what it is (its lock only now, never under the pool's mutex). */
  gmr_status small_st = st == GMR_ERR_UNKNOWN_POINTER ? gmr__vmm_small_verdict(p, ptr) : st;
  if (small_st != st) {
    st = gmr__failure_set(failure, small_st,
                          "vmm_pool: %p is a block of the small path, not an allocation of %zu "
                          "bytes%s",
                          ptr, bytes, small_st == GMR_ERR_DOUBLE_FREE ? " (it was freed)" : "");
  }
  return st;
}

static gmr_status vmm_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  gmr_vmm_pool_resource *p = (gmr_vmm_pool_resource *)(uintptr_t)self;
  gmr_memory_info info = *out;
  if (p->fine != NULL) {
    gmr__vmm_shards_memory_info(p, &info);
  } else {
    gmr_memory_info small = GMR_MEMORY_INFO_INIT;
    size_t internal_bytes = 0; /* the small path's chunks that are among our live pages */
    vmf_engine *sp = gmr__vmm_small(p, false);
    if (sp != NULL && atomic_load_explicit(&p->sleeping, memory_order_relaxed)) {
      /* An asleep chunk is no live page of ours, and its blocks (live or
       * free) lie on no memory: count the mapped chunks alone. */
      gmr__vmm_small_mapped_info(p, &small, &internal_bytes);
    } else if (sp != NULL) {
      gmr__vmf_memory_info(sp, &small); /* awake: every chunk is mapped */
      internal_bytes = small.held_bytes;
    }
    lock(p);
    info.held_bytes = gmr__vmm_held_bytes(p);
    info.live_bytes = p->live_bytes -
                      (internal_bytes < p->live_bytes ? internal_bytes : p->live_bytes) +
                      small.live_bytes;
    info.free_bytes = p->free_list.bytes + small.free_bytes;
    info.largest_free_block_bytes = p->free_list.bytes > small.largest_free_block_bytes
                                        ? p->free_list.bytes
                                        : small.largest_free_block_bytes;
    info.free_block_count = p->free_list.count + small.free_block_count;
    unlock(p);
  }
  /* Only the fields the caller's struct has. */
  size_t known = out->size < sizeof info ? out->size : sizeof info;
  memcpy(out, &info, known);
  return GMR_OK;
}

static gmr_status vmm_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  gmr_vmm_pool_resource *p = (gmr_vmm_pool_resource *)(uintptr_t)self;
  if (p->fine != NULL) {
    gmr__vmm_shards_footprint(p, out);
    return GMR_OK;
  }
  lock(p);
  out->held_bytes = gmr__vmm_held_bytes(p);
  out->peak_held_bytes = p->peak_held_pages * p->page_bytes;
  unlock(p);
  return GMR_OK;
}

static gmr_status vmm_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_vmm_pool_resource *p = (gmr_vmm_pool_resource *)self;
  *released_bytes = 0;
  if (p->fine != NULL) return gmr__vmm_shards_trim(p, released_bytes);
  vmf_engine *small = gmr__vmm_small(p, false);
  gmr_failure scratch = GMR_FAILURE_INIT; /* trim returns no record; the callees write one */
  if (small != NULL) {
    /* Its wholly free chunks come back here as free pages first. */
    size_t ignored = 0;
    gmr_status st = gmr__vmf_trim(small, &ignored, &scratch);
    if (st != GMR_OK) return st;
  }
  lock(p);
  int saved_device = -1;
  gmr_status st = GMR_OK;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved_device);
  if (err != cudaSuccess) {
    st = GMR_ERR_CUDA;
  } else {
    gmr__vmm_collect(p, true, NULL);
    st = gmr__vmm_trim_locked(p, released_bytes, &scratch);
    gmr__cuda_device_leave(p->cuda, saved_device);
  }
  unlock(p);
  return st;
}

/* ---- destroy ------------------------------------------------------------ */

void gmr__vmm_free_host_side(gmr_vmm_pool_resource *p) {
  gmr__vmm_unreleased_deinit(&p->unreleased);
  gmr__vmm_event_cache_clear(p);
  gmr__capture_walks_free(&p->capture_walks);
  gmr__u64_map_clear(&p->live);
  gmr__u64_map_clear(&p->freed);
  if (p->fine != NULL) gmr__vmm_shards_free_host(p);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

/* Destroy's first step: nothing may still run on the memory that is about
 * to go (the pool's device current around cudaDeviceSynchronize). */
static cudaError_t synchronize_device(gmr_vmm_pool_resource *p) {
  int saved_device = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved_device);
  if (err != cudaSuccess) return err;
  err = p->cuda->device_synchronize();
  gmr__cuda_device_leave(p->cuda, saved_device);
  return err;
}

/* Destroy's second step: what the driver refused before goes first (the
 * pool's device current); while it still refuses, destroy changes nothing
 * (a later destroy asks again). */
static gmr_status retry_unreleased(gmr_vmm_pool_resource *p) {
  int saved_device = -1;
  if (gmr__cuda_device_enter(p->cuda, p->device, &saved_device) != cudaSuccess) {
    return GMR_ERR_CUDA;
  }
  gmr_status st = GMR_OK;
  if (p->fine != NULL) {
    st = gmr__vmm_shards_retry_unreleased(p);
  } else {
    size_t released = 0;
    lock(p);
    st = gmr__vmm_retry_unreleased(p, &released, NULL);
    unlock(p);
  }
  gmr__cuda_device_leave(p->cuda, saved_device);
  return st;
}

static gmr_status destroy_fine(gmr_vmm_pool_resource *p) {
  if (gmr__vmm_shards_busy(p)) return GMR_ERR_BUSY;
  if (synchronize_device(p) != cudaSuccess) return GMR_ERR_CUDA;
  gmr_status st = retry_unreleased(p);
  if (st != GMR_OK) return st;
  st = gmr__vmm_shards_destroy(p);
  if (st != GMR_OK) return st; /* still a valid pool: destroy may be tried again */
  gmr__vmm_free_host_side(p);
  return GMR_OK;
}

static gmr_status vmm_destroy(gmr_resource *self) {
  gmr_vmm_pool_resource *p = (gmr_vmm_pool_resource *)self;
  if (p->fine != NULL) return destroy_fine(p);
  vmf_engine *small = gmr__vmm_small(p, false);
  if (small != NULL) {
    gmr__vmf_lock(small);
    bool small_busy = small->live_count > 0;
    gmr__vmf_unlock(small);
    if (small_busy) return GMR_ERR_BUSY;
  }
  lock(p);
  bool busy = p->live_count + p->asleep_count > p->internal_count;
  unlock(p);
  if (busy) return GMR_ERR_BUSY;
  if (synchronize_device(p) != cudaSuccess) return GMR_ERR_CUDA;
  gmr_status retried = retry_unreleased(p);
  if (retried != GMR_OK) return retried;
  if (small != NULL) {
    gmr_status st = gmr__vmm_small_destroy(p);
    if (st != GMR_OK) return st;
  }
  lock(p);
  gmr_status st = GMR_OK;
  int saved_device = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved_device);
  if (err != cudaSuccess) st = GMR_ERR_CUDA;
  if (st == GMR_OK) {
    /* After the synchronisation every event is complete, also those that
     * frees during a capture could not record. */
    gmr__vmm_device_synchronized(p);
    gmr__vmm_collect(p, true, NULL);
    size_t released = 0;
    gmr_failure scratch = GMR_FAILURE_INIT; /* destroy returns no record */
    st = gmr__vmm_trim_locked(p, &released, &scratch);
  }
  /* The spare events too (trim gave back every region's), while a refusal
   * still leaves a pool that works. */
  if (st == GMR_OK && gmr__event_cache_clear(&p->event_cache, p->cuda) != cudaSuccess) {
    st = GMR_ERR_CUDA;
  }
  while (st == GMR_OK && p->last_root != NULL) {
    if (!gmr__vmm_root_remove_last(p)) st = GMR_ERR_CUDA;
  }
  if (err == cudaSuccess) gmr__cuda_device_leave(p->cuda, saved_device);
  unlock(p);
  if (st != GMR_OK) return st; /* still a valid pool: destroy may be tried again */
  gmr__vmm_free_host_side(p);
  return GMR_OK;
}

const gmr_resource_vtbl gmr__vmm_pool_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "vmm_pool_resource",
    .allocate = vmm_allocate,
    .deallocate = vmm_deallocate,
    .destroy = vmm_destroy,
    .trim = vmm_trim,
    .get_footprint = vmm_get_footprint,
    .get_memory_info = vmm_get_memory_info,
    .record_stream = vmm_record_stream,
    .allocate_capturing = vmm_allocate_capturing,
    .extend = vmm_extend,
};

/* ---- small public functions ------------------------------------------------ */

gmr_status gmr_vmm_pool_resource_set_default_tag(gmr_vmm_pool_resource *pool, uint32_t tag) {
  if (pool == NULL || tag > GMR_VMM_POOL_MAX_TAG) return GMR_ERR_INVALID_ARGUMENT;
  if (pool->fine != NULL) {
    gmr__vmm_shards_set_default_tag(pool, tag);
    return GMR_OK;
  }
  lock(pool);
  pool->default_tag = tag;
  unlock(pool);
  return GMR_OK;
}

gmr_status gmr_vmm_pool_resource_set_tag(gmr_vmm_pool_resource *pool, void *ptr, uint32_t tag) {
  if (pool == NULL || tag > GMR_VMM_POOL_MAX_TAG) return GMR_ERR_INVALID_ARGUMENT;
  if (pool->fine != NULL) return gmr__vmm_shards_set_tag(pool, ptr, tag);
  lock(pool);
  vmm_region *r = live_region(pool, ptr);
  gmr_status st = r == NULL || r->internal ? GMR_ERR_UNKNOWN_POINTER : GMR_OK;
  if (st == GMR_OK) r->tag = tag;
  unlock(pool);
  return st;
}
