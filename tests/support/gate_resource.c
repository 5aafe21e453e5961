/*
 * tests/support/gate_resource.c: see gate_resource.h.
 */
#include "tests/support/gate_resource.h"

#include <stdatomic.h>
#include <stdlib.h>

struct gmr_gate_resource {
  gmr_resource base;
  gmr_resource *upstream;
  _Atomic unsigned long refuse_count;
  _Atomic int refuse_status;
};

static gmr_status gate_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_gate_resource *g = (gmr_gate_resource *)self;
  return gmr_resource_allocate_ex(g->upstream, bytes, alignment, stream, out_ptr, failure);
}

static gmr_status gate_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  gmr_gate_resource *g = (gmr_gate_resource *)self;
  unsigned long left = atomic_load(&g->refuse_count);
  while (left > 0) {
    if (atomic_compare_exchange_weak(&g->refuse_count, &left, left - 1)) {
      return (gmr_status)atomic_load(&g->refuse_status);
    }
  }
  return gmr_resource_deallocate(g->upstream, ptr, bytes, alignment, stream);
}

static gmr_status gate_destroy(gmr_resource *self) {
  free(self);
  return GMR_OK;
}

static gmr_resource *gate_get_upstream(const gmr_resource *self) {
  return ((const gmr_gate_resource *)self)->upstream;
}

static const gmr_resource_vtbl gate_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "gate_resource",
    .allocate = gate_allocate,
    .deallocate = gate_deallocate,
    .destroy = gate_destroy,
    .get_upstream = gate_get_upstream,
    .trim = NULL,
    .get_footprint = NULL,
};

gmr_gate_resource *gmr_gate_resource_create(gmr_resource *upstream) {
  gmr_gate_resource *g = calloc(1, sizeof *g);
  if (g == NULL) return NULL;
  g->base.vtbl = &gate_vtbl;
  g->upstream = upstream;
  return g;
}

gmr_resource *gmr_gate_resource_as_resource(gmr_gate_resource *g) { return &g->base; }

void gmr_gate_resource_refuse_frees(gmr_gate_resource *g, unsigned long count, gmr_status status) {
  atomic_store(&g->refuse_status, (int)status);
  atomic_store(&g->refuse_count, count);
}
