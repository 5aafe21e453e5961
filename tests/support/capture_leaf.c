/*
 * tests/support/capture_leaf.c: see capture_leaf.h.
 */
#include "tests/support/capture_leaf.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/cuda_layer.h"

struct gmr_capture_leaf {
  gmr_resource base;
  const gmr__cuda_ops *cuda;
  bool host; /* aligned_alloc / free instead of cudaMalloc / cudaFree */
  _Atomic unsigned long allocate_calls;
  _Atomic unsigned long capturing_calls;
  _Atomic size_t live_bytes;
};

static gmr_status leaf_malloc(gmr_capture_leaf *l, size_t bytes, size_t alignment,
                              void **out_ptr, gmr_failure *failure) {
  if (alignment > GMR_DEFAULT_ALIGNMENT) {
    snprintf(failure->message, sizeof failure->message, "capture_leaf: alignment %zu above 256",
             alignment);
    return GMR_ERR_UNSUPPORTED;
  }
  if (l->host) {
    *out_ptr = aligned_alloc(GMR_DEFAULT_ALIGNMENT, (bytes + 255) & ~(size_t)255);
    if (*out_ptr == NULL) return GMR_ERR_OUT_OF_MEMORY;
    atomic_fetch_add(&l->live_bytes, bytes);
    return GMR_OK;
  }
  cudaError_t err = l->cuda->malloc(out_ptr, bytes);
  if (err != cudaSuccess) {
    *out_ptr = NULL;
    return gmr__cuda_fail(failure, "cudaMalloc", err);
  }
  atomic_fetch_add(&l->live_bytes, bytes);
  return GMR_OK;
}

static gmr_status leaf_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  (void)stream;
  gmr_capture_leaf *l = (gmr_capture_leaf *)self;
  atomic_fetch_add(&l->allocate_calls, 1);
  return leaf_malloc(l, bytes, alignment, out_ptr, failure);
}

static gmr_status leaf_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                          gmr_stream stream, void **out_ptr,
                                          gmr_failure *failure) {
  (void)stream;
  gmr_capture_leaf *l = (gmr_capture_leaf *)self;
  atomic_fetch_add(&l->capturing_calls, 1);
  enum cudaStreamCaptureMode saved = cudaStreamCaptureModeGlobal;
  cudaError_t err = gmr__cuda_capture_relaxed_enter(l->cuda, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
  gmr_status st = leaf_malloc(l, bytes, alignment, out_ptr, failure);
  gmr__cuda_capture_relaxed_leave(l->cuda, saved);
  return st;
}

static gmr_status leaf_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  (void)alignment;
  (void)stream;
  gmr_capture_leaf *l = (gmr_capture_leaf *)self;
  if (l->host) {
    free(ptr);
    atomic_fetch_sub(&l->live_bytes, bytes);
    return GMR_OK;
  }
  cudaError_t err = l->cuda->free(ptr);
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  atomic_fetch_sub(&l->live_bytes, bytes);
  return GMR_OK;
}

static gmr_status leaf_destroy(gmr_resource *self) {
  gmr_capture_leaf *l = (gmr_capture_leaf *)self;
  if (atomic_load(&l->live_bytes) != 0) return GMR_ERR_BUSY;
  free(l);
  return GMR_OK;
}

static const gmr_resource_vtbl capturing_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "capture_leaf",
    .allocate = leaf_allocate,
    .deallocate = leaf_deallocate,
    .destroy = leaf_destroy,
    .allocate_capturing = leaf_allocate_capturing,
};

static const gmr_resource_vtbl plain_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "plain_leaf",
    .allocate = leaf_allocate,
    .deallocate = leaf_deallocate,
    .destroy = leaf_destroy,
};

gmr_capture_leaf *gmr_capture_leaf_create(bool can_capture) {
  gmr_capture_leaf *l = calloc(1, sizeof *l);
  if (l == NULL) return NULL;
  l->base.vtbl = can_capture ? &capturing_vtbl : &plain_vtbl;
  l->cuda = gmr__cuda();
  return l;
}

gmr_capture_leaf *gmr_capture_leaf_create_host(bool can_capture) {
  gmr_capture_leaf *l = gmr_capture_leaf_create(can_capture);
  if (l != NULL) l->host = true;
  return l;
}

gmr_resource *gmr_capture_leaf_as_resource(gmr_capture_leaf *leaf) { return &leaf->base; }

unsigned long gmr_capture_leaf_allocate_calls(const gmr_capture_leaf *leaf) {
  return atomic_load(&((gmr_capture_leaf *)leaf)->allocate_calls);
}

unsigned long gmr_capture_leaf_capturing_calls(const gmr_capture_leaf *leaf) {
  return atomic_load(&((gmr_capture_leaf *)leaf)->capturing_calls);
}

size_t gmr_capture_leaf_live_bytes(const gmr_capture_leaf *leaf) {
  return atomic_load(&((gmr_capture_leaf *)leaf)->live_bytes);
}
