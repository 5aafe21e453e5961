/*
 * resources/vmm/pages/vmm_pages_resource.c: `vmm_pages`
 * (gmr/vmm_pages_resource.h): create, destroy and the vtable, which routes
 * each request by its size: whole pages (vmm_pages_whole.c), or below one
 * page the small path (vmm_pages_small.c), whose chunks are pages of this
 * pool. The small path takes the pool's mutex only to get or give a chunk,
 * and the pool never calls the small path with its mutex held.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "core/resource_type.h"
#include "resources/vmm/pages/vmm_pages.h"

static void lock(vmm_pages *p) { pthread_mutex_lock(&p->pool.lock); }
static void unlock(vmm_pages *p) { pthread_mutex_unlock(&p->pool.lock); }

/* Whether a request of `bytes` takes the small path. */
static bool small_request(const vmm_pages *p, size_t bytes) {
  return bytes < p->pool.page_bytes && p->pool.config.small_pool;
}

/* ---- requests ---------------------------------------------------------------- */

static gmr_status allocate_common(vmm_pages *p, size_t bytes, size_t alignment,
                                  gmr_stream stream, void **out_ptr, gmr_failure *failure,
                                  bool capturing_api) {
  gmr_status beyond = gmr__vmm_refuse_beyond_device(&p->pool, bytes, failure);
  if (beyond != GMR_OK) return beyond;
  if (small_request(p, bytes)) {
    lock(p);
    bool asleep = gmr__vmm_asleep(&p->pool);
    unlock(p);
    if (asleep) return gmr__vmm_busy_asleep(failure, "allocating");
    return gmr__vmm_small_allocate(p, bytes, alignment, stream, capturing_api, out_ptr, failure);
  }
  if (alignment > p->pool.page_bytes) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                            "vmm_pool aligns allocations to its page (%zu bytes); %zu was asked",
                            p->pool.page_bytes, alignment);
  }
  return gmr__vmm_allocate_pages_locking(p, bytes, alignment, stream, capturing_api, false, out_ptr,
                                         failure);
}

static gmr_status pages_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                 gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return allocate_common((vmm_pages *)self, bytes, alignment, stream, out_ptr, failure, false);
}

static gmr_status pages_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                           gmr_stream stream, void **out_ptr,
                                           gmr_failure *failure) {
  return allocate_common((vmm_pages *)self, bytes, alignment, stream, out_ptr, failure, true);
}

static gmr_status pages_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                   gmr_stream stream) {
  vmm_pages *p = (vmm_pages *)self;
  if (small_request(p, bytes)) return gmr__vmm_small_deallocate(p, ptr, bytes, alignment, stream);
  gmr_status st = gmr__vmm_free_pages_locking(p, ptr, bytes, alignment, stream, false);
  /* A small block freed with a size of a page or more: the small path
   * names it (the pool's mutex is free again: engine lock first). */
  if (st == GMR_ERR_UNKNOWN_POINTER) st = gmr__vmm_small_verdict(p, ptr);
  return st;
}

static gmr_status pages_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  vmm_pages *p = (vmm_pages *)self;
  gmr_status st = gmr__vmm_small_record_stream(p, ptr, stream);
  if (st != GMR_ERR_UNKNOWN_POINTER) return st;
  st = gmr__vmm_record_stream_pages(p, ptr, stream);
  /* A small block freed already says so. */
  if (st == GMR_ERR_UNKNOWN_POINTER && gmr__vmm_small_verdict(p, ptr) == GMR_ERR_DOUBLE_FREE) {
    st = GMR_ERR_DOUBLE_FREE;
  }
  return st;
}

/* Grow the LIVE region r of whole pages to new_bytes (mutex held). */
static gmr_status extend_pages(vmm_pages *p, vmm_region *r, size_t new_bytes, gmr_stream stream,
                               gmr_failure *failure) {
  size_t grow = gmr__align_up(new_bytes, p->pool.page_bytes) - r->bytes;
  gmr_status st = gmr__vmm_refuse_beyond_device(&p->pool, new_bytes, failure);
  if (st == GMR_OK && grow > 0) {
    int saved_device = -1;
    cudaError_t err = gmr__cuda_device_enter(p->pool.cuda, p->pool.device, &saved_device);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
    bool capturing = gmr__cuda_stream_is_capturing(p->pool.cuda, stream);
    enum cudaStreamCaptureMode saved_mode = cudaStreamCaptureModeGlobal;
    /* Relaxed whoever captures: page mapping and event queries are
     * potentially unsafe calls, which in global mode would break a capture
     * another stream (or thread) is making. */
    err = gmr__cuda_capture_relaxed_enter(p->pool.cuda, &saved_mode);
    if (err != cudaSuccess) {
      st = gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
    } else {
      st = gmr__vmm_extend_region(p, r, grow, stream, capturing, failure);
      gmr__cuda_capture_relaxed_leave(p->pool.cuda, saved_mode);
    }
    gmr__cuda_device_leave(p->pool.cuda, saved_device);
  }
  if (st == GMR_OK) r->requested_bytes = new_bytes;
  if (st == GMR_ERR_OUT_OF_MEMORY) gmr__vmm_fill_free_info(p, failure);
  return st;
}

static gmr_status pages_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                               size_t alignment, gmr_stream stream, gmr_failure *failure) {
  vmm_pages *p = (vmm_pages *)self;
  if (small_request(p, bytes)) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                            "vmm_pool: an allocation below a page (%zu bytes) lives in the small "
                            "path and cannot grow in place",
                            bytes);
  }
  lock(p);
  vmm_region *r = gmr__vmm_live_region(p, ptr);
  gmr_status st = GMR_OK;
  if (gmr__vmm_asleep(&p->pool)) {
    st = gmr__vmm_busy_asleep(failure, "allocating");
  } else if (r == NULL || r->internal) {
    st = gmr__failure_set(failure, gmr__vmm_bad_free(p, ptr) == GMR_ERR_DOUBLE_FREE
                                       ? GMR_ERR_DOUBLE_FREE
                                       : GMR_ERR_UNKNOWN_POINTER,
                          "vmm_pool: %p is not a live allocation of this pool", ptr);
  } else if (bytes != r->requested_bytes || alignment != r->alignment) {
    st = gmr__failure_set(failure, GMR_ERR_FREE_MISMATCH,
                          "vmm_pool: the allocation at %p has %zu bytes and alignment %zu, not "
                          "%zu and %zu",
                          ptr, r->requested_bytes, r->alignment, bytes, alignment);
  } else {
    st = extend_pages(p, r, new_bytes, stream, failure);
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

/* ---- what it holds ------------------------------------------------------------- */

static gmr_status pages_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  vmm_pages *p = (vmm_pages *)(uintptr_t)self;
  gmr_memory_info info = *out;
  gmr_memory_info small = GMR_MEMORY_INFO_INIT;
  size_t internal_bytes = 0; /* the small path's chunks that are among our live pages */
  vmf_engine *sp = gmr__vmm_small(p, false);
  if (sp != NULL && gmr__vmm_asleep(&p->pool)) {
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
  /* Only the fields the caller's struct has. */
  size_t known = out->size < sizeof info ? out->size : sizeof info;
  memcpy(out, &info, known);
  return GMR_OK;
}

static gmr_status pages_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  vmm_pages *p = (vmm_pages *)(uintptr_t)self;
  lock(p);
  out->held_bytes = gmr__vmm_held_bytes(p);
  out->peak_held_bytes = p->peak_held_pages * p->pool.page_bytes;
  unlock(p);
  return GMR_OK;
}

static gmr_status pages_trim(gmr_resource *self, size_t *released_bytes) {
  vmm_pages *p = (vmm_pages *)self;
  *released_bytes = 0;
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
  cudaError_t err = gmr__cuda_device_enter(p->pool.cuda, p->pool.device, &saved_device);
  if (err != cudaSuccess) {
    st = GMR_ERR_CUDA;
  } else {
    gmr__vmm_collect(p, true, NULL);
    st = gmr__vmm_trim_locked(p, released_bytes, &scratch);
    gmr__cuda_device_leave(p->pool.cuda, saved_device);
  }
  unlock(p);
  return st;
}

/* ---- destroy ------------------------------------------------------------------- */

/* Free the pool's host memory (its VA chunks are already given back). */
static void free_host(vmm_pages *p) {
  gmr__vmm_unreleased_deinit(&p->unreleased);
  gmr__vmm_event_cache_clear(p);
  gmr__capture_walks_free(&p->capture_walks);
  gmr__u64_map_clear(&p->live);
  gmr__u64_map_clear(&p->freed);
  gmr__vmm_base_deinit(&p->pool);
  free(p);
}

/* What the driver refused before goes first (the pool's device current);
 * while it still refuses, destroy changes nothing (a later one asks again). */
static gmr_status retry_unreleased(vmm_pages *p) {
  int saved_device = -1;
  if (gmr__cuda_device_enter(p->pool.cuda, p->pool.device, &saved_device) != cudaSuccess) {
    return GMR_ERR_CUDA;
  }
  size_t released = 0;
  lock(p);
  gmr_status st = gmr__vmm_retry_unreleased(p, &released, NULL);
  unlock(p);
  gmr__cuda_device_leave(p->pool.cuda, saved_device);
  return st;
}

/* Give back every page and VA chunk (nothing live; the device synchronised). */
static gmr_status give_back_all(vmm_pages *p) {
  lock(p);
  gmr_status st = GMR_OK;
  int saved_device = -1;
  cudaError_t err = gmr__cuda_device_enter(p->pool.cuda, p->pool.device, &saved_device);
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
  if (st == GMR_OK && gmr__event_cache_clear(&p->event_cache, p->pool.cuda) != cudaSuccess) {
    st = GMR_ERR_CUDA;
  }
  while (st == GMR_OK && p->last_root != NULL) {
    if (!gmr__vmm_root_remove_last(p)) st = GMR_ERR_CUDA;
  }
  if (err == cudaSuccess) gmr__cuda_device_leave(p->pool.cuda, saved_device);
  unlock(p);
  return st;
}

static gmr_status pages_destroy(gmr_resource *self) {
  vmm_pages *p = (vmm_pages *)self;
  if (gmr__vmm_small_busy(p)) return GMR_ERR_BUSY;
  lock(p);
  bool busy = p->live_count + p->asleep_count > p->internal_count;
  unlock(p);
  if (busy) return GMR_ERR_BUSY;
  /* Nothing may still run on the memory that is about to go. */
  if (gmr__vmm_synchronize_device(&p->pool) != cudaSuccess) return GMR_ERR_CUDA;
  /* Ranges still reserved: busy; else the host side of sleep goes. */
  gmr_status st = gmr__vmm_base_release(&p->pool);
  if (st != GMR_OK) return st;
  st = retry_unreleased(p);
  if (st == GMR_OK) st = gmr__vmm_small_destroy(p);
  if (st == GMR_OK) st = give_back_all(p);
  if (st != GMR_OK) return st; /* still a valid pool: destroy may be tried again */
  free_host(p);
  return GMR_OK;
}

static const gmr_resource_vtbl pages_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "vmm_pages_resource",
    .allocate = pages_allocate,
    .deallocate = pages_deallocate,
    .destroy = pages_destroy,
    .trim = pages_trim,
    .get_footprint = pages_get_footprint,
    .get_memory_info = pages_get_memory_info,
    .record_stream = pages_record_stream,
    .allocate_capturing = pages_allocate_capturing,
    .extend = pages_extend,
};

/* gmr_resource_downcast() knows the type by its vtable, as itself and as a
 * VMM resource, and gmr_resource_check() its books (core/resource_type.h). */
static const gmr__resource_type pages_type = {&pages_vtbl, gmr__vmm_pages_check_books};
static const gmr__resource_member pages_member = {&pages_type, "vmm_pool_resource"};

/* What the handle's functions do here (the VMM base's operations). */
static const gmr__vmm_engine_ops pages_ops = {
    .stats = gmr__vmm_pages_stats,
    .regions = gmr__vmm_pages_regions,
    .dump_regions = gmr__vmm_pages_dump_regions,
    .set_default_tag = gmr__vmm_pages_set_default_tag,
    .set_tag = gmr__vmm_pages_set_tag,
    .tag_stats = gmr__vmm_pages_tag_stats,
    .sleep = gmr__vmm_pages_sleep,
    .wake = gmr__vmm_pages_wake,
};

/* ---- create -------------------------------------------------------------------- */

/* Map `pages` pages as the first free region (VPMM's eager pages). */
static gmr_status map_initial_pages(vmm_pages *p, size_t pages, gmr_failure *failure) {
  if (pages == 0) return GMR_OK;
  if (pages > GMR_MAX_ALLOCATION_BYTES / p->pool.page_bytes) {
    return gmr__vmm_initial_pages_fail(&p->pool, pages, GMR_ERR_OUT_OF_MEMORY, failure);
  }
  size_t bytes = pages * p->pool.page_bytes;
  vmm_region *hole = p->roots->first;
  if (hole->bytes < bytes) {
    vmm_root *root = NULL;
    CUresult cu = gmr__vmm_root_add(p, bytes, &root);
    if (cu != CUDA_SUCCESS) {
      return gmr__cu_fail(p->pool.vmm, failure, "cuMemAddressReserve", cu, NULL);
    }
    hole = root->first;
  }
  vmm_region *tail = gmr__vmm_region_new();
  if (tail == NULL) {
    return gmr__vmm_create_fail(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory");
  }
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(p->pool.cuda, p->pool.device, &saved);
  if (err != cudaSuccess) {
    gmr__vmm_region_delete(tail);
    return gmr__cuda_fail(failure, "cudaSetDevice", err);
  }
  gmr_status st = gmr__vmm_map_new_pages(p, hole->root, hole->addr, pages, failure);
  gmr__cuda_device_leave(p->pool.cuda, saved);
  if (st != GMR_OK) {
    gmr__vmm_region_delete(tail);
    /* The driver's out of memory (not the host's): the device is too small. */
    bool device_full = st == GMR_ERR_OUT_OF_MEMORY && failure->cuda_error != 0;
    return device_full ? gmr__vmm_initial_pages_fail(&p->pool, pages, st, failure) : st;
  }
  if (bytes < hole->bytes) {
    gmr__vmm_region_split(p, hole, bytes, tail);
  } else {
    gmr__vmm_region_delete(tail);
  }
  hole->stream = NULL;
  hole->id = p->next_id++;
  gmr__vmm_set_state(p, hole, VMM_FREE);
  return GMR_OK;
}

static gmr_status vmm_pages_resource_create_impl(const gmr_vmm_pool_resource_config *config,
                                                 gmr_vmm_pool_resource **out,
                                                 gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out == NULL) {
    return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT, "vmm_pool: out is NULL");
  }
  *out = NULL;
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) c = *config;
  gmr_status st = gmr__vmm_config_check(&c, failure);
  if (st != GMR_OK) return st;
  vmm_pages *p = calloc(1, sizeof *p);
  if (p == NULL) {
    return gmr__vmm_create_fail(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory");
  }
  gmr__resource_member_register(&pages_member);
  p->event_cache = (gmr__event_cache)GMR__EVENT_CACHE_INIT(256);
  atomic_init(&p->small, NULL);
  st = gmr__vmm_base_init(&p->pool, &c, &pages_vtbl, &pages_ops, failure);
  gmr__vmm_unreleased_init(&p->unreleased, p->pool.cuda, p->pool.vmm);
  if (st == GMR_OK) {
    vmm_root *root = NULL;
    CUresult cu = gmr__vmm_root_add(p, p->pool.va_chunk_bytes, &root);
    if (cu != CUDA_SUCCESS) {
      st = gmr__cu_fail(p->pool.vmm, failure, "cuMemAddressReserve", cu, NULL);
    }
  }
  if (st == GMR_OK) st = map_initial_pages(p, c.initial_pages, failure);
  if (st != GMR_OK) {
    while (p->last_root != NULL) {
      if (!gmr__vmm_root_remove_last(p)) break; /* cannot happen: nothing is mapped */
    }
    free_host(p);
    return st;
  }
  *out = &p->pool;
  return GMR_OK;
}

gmr_status gmr_vmm_pages_resource_create(const gmr_vmm_pool_resource_config *config,
                                         gmr_vmm_pool_resource **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, vmm_pages_resource_create_impl(config, out, f));
}
