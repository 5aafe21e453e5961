/*
 * tests/support/mock_resource.c: see mock_resource.h.
 */
#include "tests/support/mock_resource.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct gmr_mock_resource {
  gmr_resource base;
  gmr_resource *upstream;
  _Atomic unsigned long called_allocate;
  _Atomic unsigned long did_allocate;
  _Atomic unsigned long called_deallocate;
  _Atomic unsigned long called_trim;
  _Atomic size_t live_bytes;
  _Atomic unsigned long fail_skip;
  _Atomic unsigned long fail_count;
  gmr_status fail_status;
  int fail_cuda_error;
  size_t trim_release_bytes;
};

/* Decide atomically whether this allocation is one of the planned failures. */
static int should_fail(gmr_mock_resource *m) {
  unsigned long skip = atomic_load(&m->fail_skip);
  while (skip > 0) {
    if (atomic_compare_exchange_weak(&m->fail_skip, &skip, skip - 1)) return 0;
  }
  unsigned long count = atomic_load(&m->fail_count);
  while (count > 0) {
    if (atomic_compare_exchange_weak(&m->fail_count, &count, count - 1)) return 1;
  }
  return 0;
}

static gmr_status mock_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_mock_resource *m = (gmr_mock_resource *)self;
  atomic_fetch_add(&m->called_allocate, 1);
  if (should_fail(m)) {
    failure->cuda_error = m->fail_cuda_error;
    snprintf(failure->message, sizeof failure->message, "mock_resource: planned failure");
    return m->fail_status;
  }
  gmr_status st;
  if (m->upstream != NULL) {
    st = gmr_resource_allocate_ex(m->upstream, bytes, alignment, stream, out_ptr, failure);
  } else {
    size_t rounded = (bytes + alignment - 1) & ~(alignment - 1);
    *out_ptr = aligned_alloc(alignment < sizeof(void *) ? sizeof(void *) : alignment, rounded);
    st = *out_ptr != NULL ? GMR_OK : GMR_ERR_OUT_OF_MEMORY;
  }
  if (st == GMR_OK) {
    atomic_fetch_add(&m->did_allocate, 1);
    atomic_fetch_add(&m->live_bytes, bytes);
  }
  return st;
}

static gmr_status mock_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  gmr_mock_resource *m = (gmr_mock_resource *)self;
  atomic_fetch_add(&m->called_deallocate, 1);
  gmr_status st = GMR_OK;
  if (m->upstream != NULL) {
    st = gmr_resource_deallocate(m->upstream, ptr, bytes, alignment, stream);
  } else {
    free(ptr);
  }
  if (st == GMR_OK) atomic_fetch_sub(&m->live_bytes, bytes);
  return st;
}

static gmr_status mock_destroy(gmr_resource *self) {
  gmr_mock_resource *m = (gmr_mock_resource *)self;
  if (atomic_load(&m->live_bytes) != 0) return GMR_ERR_BUSY;
  free(m);
  return GMR_OK;
}

static gmr_resource *mock_get_upstream(const gmr_resource *self) {
  return ((const gmr_mock_resource *)self)->upstream;
}

static gmr_status mock_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_mock_resource *m = (gmr_mock_resource *)self;
  atomic_fetch_add(&m->called_trim, 1);
  *released_bytes = m->trim_release_bytes;
  return GMR_OK;
}

static const gmr_resource_vtbl mock_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "mock_resource",
    .allocate = mock_allocate,
    .deallocate = mock_deallocate,
    .destroy = mock_destroy,
    .get_upstream = mock_get_upstream,
    .trim = mock_trim,
    .get_footprint = NULL,
};

gmr_mock_resource *gmr_mock_resource_create(gmr_resource *upstream) {
  gmr_mock_resource *m = calloc(1, sizeof *m);
  if (m == NULL) return NULL;
  m->base.vtbl = &mock_vtbl;
  m->upstream = upstream;
  return m;
}

gmr_resource *gmr_mock_resource_as_resource(gmr_mock_resource *m) { return &m->base; }

void gmr_mock_resource_try_fail(gmr_mock_resource *m, unsigned long skip, unsigned long count,
                                gmr_status status, int cuda_error) {
  atomic_store(&m->fail_skip, skip);
  atomic_store(&m->fail_count, count);
  m->fail_status = status;
  m->fail_cuda_error = cuda_error;
}

unsigned long gmr_mock_resource_called_allocate(const gmr_mock_resource *m) {
  return atomic_load(&m->called_allocate);
}
unsigned long gmr_mock_resource_did_allocate(const gmr_mock_resource *m) {
  return atomic_load(&m->did_allocate);
}
unsigned long gmr_mock_resource_called_deallocate(const gmr_mock_resource *m) {
  return atomic_load(&m->called_deallocate);
}
unsigned long gmr_mock_resource_called_trim(const gmr_mock_resource *m) {
  return atomic_load(&m->called_trim);
}
size_t gmr_mock_resource_live_bytes(const gmr_mock_resource *m) {
  return atomic_load(&m->live_bytes);
}
void gmr_mock_resource_set_trim_release(gmr_mock_resource *m, size_t bytes) {
  m->trim_release_bytes = bytes;
}
