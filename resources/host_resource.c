/*
 * resources/host_resource.c: pageable host memory. See gmr/host_resource.h.
 */
#include "gmr/host_resource.h"

#include <stdlib.h>

#include "core/counters.h"

struct gmr_host_resource {
  gmr_resource base; /* first */
  gmr__byte_counter held;
};

static gmr_status host_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  (void)stream;
  (void)failure;
  gmr_host_resource *r = (gmr_host_resource *)self;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  /* aligned_alloc wants a size that is a multiple of the alignment; the
   * dispatch bounds bytes, so this cannot overflow. */
  size_t rounded = (bytes + alignment - 1) & ~(alignment - 1);
  void *ptr = aligned_alloc(alignment, rounded);
  if (ptr == NULL) return GMR_ERR_OUT_OF_MEMORY;
  gmr__counter_add(&r->held, bytes);
  *out_ptr = ptr;
  return GMR_OK;
}

static gmr_status host_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  (void)alignment;
  (void)stream;
  gmr_host_resource *r = (gmr_host_resource *)self;
  gmr__counter_sub(&r->held, bytes);
  free(ptr);
  return GMR_OK;
}

static gmr_status host_destroy(gmr_resource *self) {
  gmr_host_resource *r = (gmr_host_resource *)self;
  if (atomic_load(&r->held.live_count) != 0) return GMR_ERR_BUSY;
  free(r);
  return GMR_OK;
}

static gmr_status host_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_host_resource *r = (const gmr_host_resource *)self;
  out->held_bytes = atomic_load(&r->held.current_bytes);
  out->peak_held_bytes = atomic_load(&r->held.peak_bytes);
  return GMR_OK;
}

static const gmr_resource_vtbl host_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "host_resource",
    .allocate = host_allocate,
    .deallocate = host_deallocate,
    .destroy = host_destroy,
    .get_upstream = NULL,
    .trim = NULL,
    .get_footprint = host_get_footprint,
};

gmr_status gmr_host_resource_create(gmr_host_resource **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr_host_resource *r = calloc(1, sizeof *r);
  *out = r;
  if (r == NULL) return GMR_ERR_OUT_OF_MEMORY;
  r->base.vtbl = &host_vtbl;
  return GMR_OK;
}

gmr_resource *gmr_host_resource_as_resource(gmr_host_resource *r) {
  return r == NULL ? NULL : &r->base;
}

gmr_host_resource *gmr_host_resource_from_resource(gmr_resource *r) {
  return (r != NULL && r->vtbl == &host_vtbl) ? (gmr_host_resource *)r : NULL;
}

size_t gmr_host_resource_get_live_count(const gmr_host_resource *r) {
  return atomic_load(&r->held.live_count);
}
