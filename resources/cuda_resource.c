/*
 * resources/cuda_resource.c: the leaf resource over the CUDA runtime's four
 * allocation kinds. See gmr/cuda_resource.h.
 */
#include "gmr/cuda_resource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/counters.h"
#include "core/cuda_layer.h"

struct gmr_cuda_resource {
  gmr_resource base; /* first: the resource is usable as a gmr_resource */
  const gmr__cuda_ops *cuda;
  gmr_cuda_kind kind;
  int device;
  cudaMemPool_t pool; /* async only */
  gmr__byte_counter held;
};

static const char *alloc_call_name(gmr_cuda_kind kind) {
  switch (kind) {
    case GMR_CUDA_KIND_ASYNC:
      return "cudaMallocFromPoolAsync";
    case GMR_CUDA_KIND_MANAGED:
      return "cudaMallocManaged";
    case GMR_CUDA_KIND_PINNED:
      return "cudaHostAlloc";
    default:
      return "cudaMalloc";
  }
}

static gmr_status cuda_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_cuda_resource *r = (gmr_cuda_resource *)self;
  if (alignment > GMR_DEFAULT_ALIGNMENT) {
    snprintf(failure->message, sizeof failure->message,
             "cuda_resource guarantees 256-byte alignment; %zu was asked", alignment);
    return GMR_ERR_UNSUPPORTED;
  }
  /* cudaMalloc-family calls during capture would invalidate it: refuse first.
   * Stream-ordered pool allocations are legal in a capture. */
  if (r->kind != GMR_CUDA_KIND_ASYNC && gmr__cuda_stream_is_capturing(r->cuda, stream)) {
    snprintf(failure->message, sizeof failure->message,
             "%s is not allowed while the stream is capturing a CUDA graph; allocate before "
             "capture or use a graph_arena_resource",
             alloc_call_name(r->kind));
    return GMR_ERR_CAPTURE_UNSAFE;
  }
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(r->cuda, r->device, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  void *ptr = NULL;
  switch (r->kind) {
    case GMR_CUDA_KIND_DEVICE:
      err = r->cuda->malloc(&ptr, bytes);
      break;
    case GMR_CUDA_KIND_ASYNC:
      err = r->cuda->malloc_from_pool_async(&ptr, bytes, r->pool, (cudaStream_t)stream);
      break;
    case GMR_CUDA_KIND_MANAGED:
      err = r->cuda->malloc_managed(&ptr, bytes);
      break;
    case GMR_CUDA_KIND_PINNED:
      err = r->cuda->host_alloc(&ptr, bytes);
      break;
  }
  gmr__cuda_device_leave(r->cuda, saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, alloc_call_name(r->kind), err);
  gmr__counter_add(&r->held, bytes);
  *out_ptr = ptr;
  return GMR_OK;
}

static gmr_status cuda_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  (void)alignment;
  gmr_cuda_resource *r = (gmr_cuda_resource *)self;
  if (r->kind != GMR_CUDA_KIND_ASYNC && gmr__cuda_stream_is_capturing(r->cuda, stream)) {
    return GMR_ERR_CAPTURE_UNSAFE; /* nothing freed: free it after the capture */
  }
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(r->cuda, r->device, &saved);
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  switch (r->kind) {
    case GMR_CUDA_KIND_DEVICE:
    case GMR_CUDA_KIND_MANAGED:
      err = r->cuda->free(ptr);
      break;
    case GMR_CUDA_KIND_ASYNC:
      err = r->cuda->free_async(ptr, (cudaStream_t)stream);
      break;
    case GMR_CUDA_KIND_PINNED:
      err = r->cuda->free_host(ptr);
      break;
  }
  gmr__cuda_device_leave(r->cuda, saved);
  if (err != cudaSuccess) {
    /* The pointer was not ours, or CUDA is in an error state: nothing was
     * released, so the counters stay as they are. */
    return gmr__status_from_cuda(err);
  }
  gmr__counter_sub(&r->held, bytes);
  return GMR_OK;
}

static gmr_status cuda_destroy(gmr_resource *self) {
  gmr_cuda_resource *r = (gmr_cuda_resource *)self;
  if (atomic_load(&r->held.live_count) != 0) return GMR_ERR_BUSY;
  if (r->pool != NULL) {
    int saved = -1;
    if (gmr__cuda_device_enter(r->cuda, r->device, &saved) == cudaSuccess) {
      cudaError_t err = r->cuda->mem_pool_destroy(r->pool);
      gmr__cuda_device_leave(r->cuda, saved);
      if (err != cudaSuccess) return gmr__status_from_cuda(err);
    }
  }
  free(r);
  return GMR_OK;
}

static gmr_status cuda_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_cuda_resource *r = (gmr_cuda_resource *)self;
  *released_bytes = 0;
  if (r->kind != GMR_CUDA_KIND_ASYNC) return GMR_OK; /* nothing cached */
  uint64_t before = 0, after = 0;
  cudaError_t err =
      r->cuda->mem_pool_get_attribute(r->pool, cudaMemPoolAttrReservedMemCurrent, &before);
  if (err == cudaSuccess) err = r->cuda->mem_pool_trim_to(r->pool, 0);
  if (err == cudaSuccess) {
    err = r->cuda->mem_pool_get_attribute(r->pool, cudaMemPoolAttrReservedMemCurrent, &after);
  }
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  *released_bytes = before > after ? (size_t)(before - after) : 0;
  return GMR_OK;
}

static gmr_status cuda_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_cuda_resource *r = (const gmr_cuda_resource *)self;
  if (r->kind == GMR_CUDA_KIND_ASYNC) {
    /* The pool's reserve is what the device gave it, including cached blocks. */
    uint64_t current = 0, high = 0;
    cudaError_t err =
        r->cuda->mem_pool_get_attribute(r->pool, cudaMemPoolAttrReservedMemCurrent, &current);
    if (err == cudaSuccess) {
      err = r->cuda->mem_pool_get_attribute(r->pool, cudaMemPoolAttrReservedMemHigh, &high);
    }
    if (err != cudaSuccess) return gmr__status_from_cuda(err);
    out->held_bytes = (size_t)current;
    out->peak_held_bytes = (size_t)high;
    return GMR_OK;
  }
  out->held_bytes = atomic_load(&r->held.current_bytes);
  out->peak_held_bytes = atomic_load(&r->held.peak_bytes);
  return GMR_OK;
}

static const gmr_resource_vtbl cuda_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "cuda_resource",
    .allocate = cuda_allocate,
    .deallocate = cuda_deallocate,
    .destroy = cuda_destroy,
    .get_upstream = NULL,
    .trim = cuda_trim,
    .get_footprint = cuda_get_footprint,
};

/* Create the pool an async resource allocates from, keeping what it reserves
 * up to the release threshold. */
static gmr_status create_pool(gmr_cuda_resource *r, uint64_t release_threshold_bytes) {
  int supported = 0;
  cudaError_t err =
      r->cuda->device_get_attribute(&supported, cudaDevAttrMemoryPoolsSupported, r->device);
  if (err != cudaSuccess) return GMR_ERR_CUDA;
  if (!supported) return GMR_ERR_UNSUPPORTED;
  err = r->cuda->mem_pool_create(&r->pool, r->device);
  if (err != cudaSuccess) {
    r->pool = NULL;
    return err == cudaErrorNotSupported ? GMR_ERR_UNSUPPORTED : gmr__status_from_cuda(err);
  }
  err = r->cuda->mem_pool_set_attribute(r->pool, cudaMemPoolAttrReleaseThreshold,
                                        release_threshold_bytes);
  if (err != cudaSuccess) {
    (void)r->cuda->mem_pool_destroy(r->pool);
    r->pool = NULL;
    return gmr__status_from_cuda(err);
  }
  return GMR_OK;
}

gmr_status gmr_cuda_resource_create(const gmr_cuda_resource_config *config,
                                    gmr_cuda_resource **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  gmr_cuda_resource_config cfg = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if ((int)cfg.kind < GMR_CUDA_KIND_DEVICE || cfg.kind > GMR_CUDA_KIND_PINNED) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  const gmr__cuda_ops *cuda = gmr__cuda();
  int device_count = 0;
  cudaError_t err = cuda->get_device_count(&device_count);
  if (err != cudaSuccess) return GMR_ERR_CUDA; /* includes "no GPU, no simulation" */
  int device = cfg.device;
  if (device == GMR_CURRENT_DEVICE) {
    err = cuda->get_device(&device);
    if (err != cudaSuccess) return GMR_ERR_CUDA;
  }
  if (device < 0 || device >= device_count) return GMR_ERR_INVALID_ARGUMENT;

  gmr_cuda_resource *r = calloc(1, sizeof *r);
  if (r == NULL) return GMR_ERR_OUT_OF_MEMORY;
  r->base.vtbl = &cuda_vtbl;
  r->cuda = cuda;
  r->kind = cfg.kind;
  r->device = device;
  if (cfg.kind == GMR_CUDA_KIND_ASYNC) {
    int saved = -1;
    err = gmr__cuda_device_enter(cuda, device, &saved);
    if (err != cudaSuccess) {
      free(r);
      return GMR_ERR_CUDA;
    }
    gmr_status st = create_pool(r, cfg.release_threshold_bytes);
    gmr__cuda_device_leave(cuda, saved);
    if (st != GMR_OK) {
      free(r);
      return st;
    }
  }
  *out = r;
  return GMR_OK;
}

gmr_resource *gmr_cuda_resource_as_resource(gmr_cuda_resource *r) {
  return r == NULL ? NULL : &r->base;
}

gmr_cuda_resource *gmr_cuda_resource_from_resource(gmr_resource *r) {
  return (r != NULL && r->vtbl == &cuda_vtbl) ? (gmr_cuda_resource *)r : NULL;
}

int gmr_cuda_resource_get_device(const gmr_cuda_resource *r) { return r->device; }

gmr_cuda_kind gmr_cuda_resource_get_kind(const gmr_cuda_resource *r) { return r->kind; }

size_t gmr_cuda_resource_get_live_count(const gmr_cuda_resource *r) {
  return atomic_load(&r->held.live_count);
}

static const char *const kind_names[] = {"device", "async", "managed", "pinned"};

const char *gmr_cuda_kind_name(gmr_cuda_kind kind) {
  if ((int)kind < 0 || (size_t)kind >= sizeof kind_names / sizeof kind_names[0]) return "unknown";
  return kind_names[kind];
}

gmr_status gmr_cuda_kind_from_name(const char *name, gmr_cuda_kind *out) {
  if (name == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; ++i) {
    if (strcmp(name, kind_names[i]) == 0) {
      *out = (gmr_cuda_kind)i;
      return GMR_OK;
    }
  }
  return GMR_ERR_INVALID_ARGUMENT;
}
