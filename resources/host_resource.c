/*
 * resources/host_resource.c: pageable host memory. See gmr/host_resource.h.
 *
 * The books (util/books.h) hold every live allocation, so a free is checked
 * before libc sees it: libc's free() of a pointer it never gave aborts the
 * process, and one with the wrong size would corrupt the counters.
 */
#include "gmr/host_resource.h"

#include <stdlib.h>

#include "core/resource_type.h"
#include "util/books.h"
#include "util/counters.h"
#include "core/failure.h"

#define SHARD_COUNT 16
#define RECENT_FREE_COUNT 1024

struct gmr_host_resource {
  gmr_resource base; /* first */
  gmr__books books;
  gmr__byte_counter held;
};

static gmr_status host_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_host_resource *r = (gmr_host_resource *)self;
  /* aligned_alloc wants at least a pointer's alignment and a size that is a
   * multiple of it; the dispatch bounds bytes, so this cannot overflow. */
  size_t c_alignment = alignment < sizeof(void *) ? sizeof(void *) : alignment;
  size_t rounded = (bytes + c_alignment - 1) & ~(c_alignment - 1);
  void *ptr = aligned_alloc(c_alignment, rounded);
  if (ptr == NULL) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "host_resource: out of host memory: aligned_alloc of %zu bytes "
                            "(alignment %zu) failed",
                            bytes, alignment);
  }
  gmr__book_entry entry = {bytes, alignment, stream, 0, NULL, 0};
  if (!gmr__books_insert(&r->books, ptr, &entry)) {
    free(ptr);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "host_resource: no host memory for the books of %zu bytes", bytes);
  }
  gmr__counter_add(&r->held, bytes);
  *out_ptr = ptr;
  return GMR_OK;
}

static gmr_status host_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  (void)stream; /* pageable memory is reusable at once, whatever the stream */
  gmr_host_resource *r = (gmr_host_resource *)self;
  gmr__book_entry entry;
  gmr__book_verdict verdict = gmr__books_take(&r->books, ptr, bytes, alignment, NULL, &entry);
  if (verdict != GMR__BOOK_OK) return gmr__book_verdict_status(verdict);
  free(ptr);
  gmr__counter_sub(&r->held, entry.bytes);
  return GMR_OK;
}

static gmr_status host_destroy(gmr_resource *self) {
  gmr_host_resource *r = (gmr_host_resource *)self;
  if (atomic_load(&r->held.live_count) != 0) return GMR_ERR_BUSY;
  gmr__books_deinit(&r->books);
  free(r);
  return GMR_OK;
}

static gmr_status host_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_host_resource *r = (const gmr_host_resource *)self;
  gmr__counter_footprint(&r->held, out);
  return GMR_OK;
}

/* Everything held is live: the resource keeps no free memory of its own. */
static gmr_status host_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  const gmr_host_resource *r = (const gmr_host_resource *)self;
  out->held_bytes = atomic_load(&r->held.current_bytes);
  out->live_bytes = out->held_bytes;
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
    .get_memory_info = host_get_memory_info,
    .record_stream = NULL,      /* UNSUPPORTED: see gmr/host_resource.h */
    .allocate_capturing = host_allocate, /* no CUDA call: nothing a capture could see */
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type host_type = {&host_vtbl, NULL};

gmr_status gmr_host_resource_create(gmr_host_resource **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  gmr_host_resource *r = calloc(1, sizeof *r);
  if (r == NULL) return GMR_ERR_OUT_OF_MEMORY;
  if (!gmr__books_init(&r->books, SHARD_COUNT, RECENT_FREE_COUNT)) {
    free(r);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  r->base.vtbl = &host_vtbl;
  gmr__resource_type_register(&host_type);
  *out = r;
  return GMR_OK;
}

size_t gmr_host_resource_get_live_count(const gmr_host_resource *r) {
  return atomic_load(&r->held.live_count);
}
