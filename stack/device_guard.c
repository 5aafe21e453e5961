/*
 * stack/device_guard.c: see stack/device_guard.h. An adaptor (core/adaptor.h)
 * that changes every call by the device it makes current around it.
 */
#include "stack/device_guard.h"

#include <stdlib.h>

#include "core/adaptor.h"
#include "core/cuda_layer.h"
#include "core/failure.h"
#include "core/forward.h"
#include "core/resource_type.h"

struct gmr__device_guard {
  gmr__adaptor base; /* first */
  const gmr__cuda_ops *cuda;
  int device;
};

static const gmr_resource_vtbl guard_vtbl;

static gmr__device_guard *as_guard(gmr_resource *r) { return (gmr__device_guard *)r; }

/* An allocation through `forward` (allocate or allocate_capturing). */
static gmr_status guard_allocate_with(gmr_resource *self, gmr__forward_allocate_fn *forward,
                                      size_t bytes, size_t alignment, gmr_stream stream,
                                      void **out_ptr, gmr_failure *failure) {
  gmr__device_guard *g = as_guard(self);
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(g->cuda, g->device, &saved);
  if (err != cudaSuccess) {
    *out_ptr = NULL;
    return gmr__cuda_fail(failure, "cudaSetDevice", err);
  }
  gmr_status st = forward(g->base.upstream, bytes, alignment, stream, out_ptr, failure);
  gmr__cuda_device_leave(g->cuda, saved);
  return st;
}

static gmr_status guard_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                 gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return guard_allocate_with(self, gmr__forward_allocate, bytes, alignment, stream, out_ptr,
                             failure);
}

static gmr_status guard_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                   gmr_stream stream) {
  gmr__device_guard *g = as_guard(self);
  int saved = -1;
  if (gmr__cuda_device_enter(g->cuda, g->device, &saved) != cudaSuccess) return GMR_ERR_CUDA;
  gmr_status st = gmr__forward_deallocate(g->base.upstream, ptr, bytes, alignment, stream);
  gmr__cuda_device_leave(g->cuda, saved);
  return st;
}

static gmr_status guard_destroy(gmr_resource *self) {
  free(as_guard(self));
  return GMR_OK;
}

static gmr_status guard_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  gmr__device_guard *g = as_guard(self);
  int saved = -1;
  if (gmr__cuda_device_enter(g->cuda, g->device, &saved) != cudaSuccess) return GMR_ERR_CUDA;
  gmr_status st = gmr__forward_record_stream(g->base.upstream, ptr, stream);
  gmr__cuda_device_leave(g->cuda, saved);
  return st;
}

static gmr_status guard_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                           gmr_stream stream, void **out_ptr,
                                           gmr_failure *failure) {
  return guard_allocate_with(self, gmr__forward_allocate_capturing, bytes, alignment, stream,
                             out_ptr, failure);
}

/* Growth in place may map pages (vmm, vmm_pages): on the resource's device. */
static gmr_status guard_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                               size_t alignment, gmr_stream stream, gmr_failure *failure) {
  gmr__device_guard *g = as_guard(self);
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(g->cuda, g->device, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  gmr_status st = gmr__adaptor_extend(self, ptr, bytes, new_bytes, alignment, stream, failure);
  gmr__cuda_device_leave(g->cuda, saved);
  return st;
}

static const gmr_resource_vtbl guard_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "device_guard",
    .allocate = guard_allocate,
    .deallocate = guard_deallocate,
    .destroy = guard_destroy,
    .get_upstream = gmr__adaptor_get_upstream,
    /* trim, footprint and memory info: the dispatch walks on (no CUDA call
     * here; the layer that gives memory to CUDA makes its own device current). */
    .record_stream = guard_record_stream,
    .allocate_capturing = guard_allocate_capturing,
    .extend = guard_extend,
};

gmr_status gmr__device_guard_create(gmr_resource *upstream, int device, gmr__device_guard **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (gmr__resource_check_vtbl(upstream) != GMR_OK || device < 0) return GMR_ERR_INVALID_ARGUMENT;
  gmr__device_guard *g = calloc(1, sizeof *g);
  if (g == NULL) return GMR_ERR_OUT_OF_MEMORY;
  gmr__adaptor_init(&g->base, &guard_vtbl, upstream);
  g->cuda = gmr__cuda();
  g->device = device;
  *out = g;
  return GMR_OK;
}

gmr_resource *gmr__device_guard_as_resource(gmr__device_guard *guard) {
  return guard == NULL ? NULL : &guard->base.resource;
}

gmr__device_guard *gmr__device_guard_from_resource(gmr_resource *r) {
  return r != NULL && r->vtbl == &guard_vtbl ? (gmr__device_guard *)r : NULL;
}

void gmr__device_guard_set_upstream(gmr__device_guard *guard, gmr_resource *upstream) {
  guard->base.upstream = upstream;
}

int gmr__device_guard_get_device(const gmr__device_guard *guard) { return guard->device; }
