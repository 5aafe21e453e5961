/*
 * adaptors/oom_adaptor.c: see gmr/oom_adaptor.h.
 */
#include "gmr/oom_adaptor.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "adaptors/oom_handler.h"
#include "core/forward.h"
#include "core/resource_type.h"

struct gmr_oom_adaptor {
  gmr_resource base; /* first */
  gmr_resource *upstream;
  gmr__oom_handler oom;
  _Atomic size_t live_count;
};

static const gmr_resource_vtbl oom_vtbl;

static gmr_status oom_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                               gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_oom_adaptor *a = (gmr_oom_adaptor *)self;
  gmr_status st = gmr__oom_handler_allocate(&a->oom, bytes, alignment, stream, out_ptr, failure);
  if (st == GMR_OK) atomic_fetch_add_explicit(&a->live_count, 1, memory_order_relaxed);
  return st;
}

/* A request for a capture goes straight to the upstream: the policy's trim
 * or wait could synchronise or stall the capture. */
static gmr_status oom_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                         gmr_stream stream, void **out_ptr,
                                         gmr_failure *failure) {
  gmr_oom_adaptor *a = (gmr_oom_adaptor *)self;
  gmr_status st =
      gmr__forward_allocate_capturing(a->upstream, bytes, alignment, stream, out_ptr, failure);
  gmr__oom_handler_note_failure(&a->oom, st);
  if (st == GMR_OK) atomic_fetch_add_explicit(&a->live_count, 1, memory_order_relaxed);
  return st;
}

static gmr_status oom_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  return gmr__forward_record_stream(((gmr_oom_adaptor *)self)->upstream, ptr, stream);
}

/* Growth in place is forwarded without the policy: a caller whose extend
 * fails allocates elsewhere instead (the pool takes a new chunk), and that
 * allocation runs the policy. One allocation either way: live_count stays. */
static gmr_status oom_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                             size_t alignment, gmr_stream stream, gmr_failure *failure) {
  return gmr__forward_extend(((gmr_oom_adaptor *)self)->upstream, ptr, bytes, new_bytes,
                             alignment, stream, failure);
}

static gmr_status oom_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                 gmr_stream stream) {
  gmr_oom_adaptor *a = (gmr_oom_adaptor *)self;
  gmr_status st = gmr__forward_deallocate(a->upstream, ptr, bytes, alignment, stream);
  if (st != GMR_OK) return st;
  atomic_fetch_sub_explicit(&a->live_count, 1, memory_order_relaxed);
  gmr__oom_handler_note_free(&a->oom);
  return GMR_OK;
}

static gmr_status oom_destroy(gmr_resource *self) {
  gmr_oom_adaptor *a = (gmr_oom_adaptor *)self;
  if (atomic_load(&a->live_count) != 0) return GMR_ERR_BUSY;
  gmr__oom_handler_deinit(&a->oom);
  free(a);
  return GMR_OK;
}

static gmr_resource *oom_get_upstream(const gmr_resource *self) {
  return ((const gmr_oom_adaptor *)self)->upstream;
}

static const gmr_resource_vtbl oom_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "oom_adaptor",
    .allocate = oom_allocate,
    .deallocate = oom_deallocate,
    .destroy = oom_destroy,
    .get_upstream = oom_get_upstream,
    .trim = NULL,            /* forwards to the upstream */
    .get_footprint = NULL,   /* asks the upstream */
    .get_memory_info = NULL, /* asks the upstream */
    .record_stream = oom_record_stream,
    .allocate_capturing = oom_allocate_capturing,
    .extend = oom_extend,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type oom_type = {&oom_vtbl, NULL};

gmr_status gmr_oom_adaptor_create(gmr_resource *upstream, const gmr_oom_policy *policy,
                                  gmr_oom_adaptor **out) {
  if (out != NULL) *out = NULL;
  if (policy != NULL && gmr_oom_policy_check(policy) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  /* From here on the policy is ours: every failure releases it. */
  if (out == NULL || gmr__resource_check_vtbl(upstream) != GMR_OK) {
    if (policy != NULL && policy->release != NULL) policy->release(policy->ctx);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_oom_adaptor *a = calloc(1, sizeof *a);
  if (a == NULL) {
    if (policy != NULL && policy->release != NULL) policy->release(policy->ctx);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  a->base.vtbl = &oom_vtbl;
  gmr__resource_type_register(&oom_type);
  a->upstream = upstream;
  gmr_status st = gmr__oom_handler_init(&a->oom, policy, &a->base, upstream);
  if (st != GMR_OK) {
    gmr__oom_handler_deinit(&a->oom); /* runs the policy's release */
    free(a);
    return st;
  }
  *out = a;
  return GMR_OK;
}

gmr__oom_handler *gmr__oom_adaptor_handler(gmr_resource *r) {
  /* The vtable itself: this file owns it (no need for the table of types). */
  return r != NULL && r->vtbl == &oom_vtbl ? &((gmr_oom_adaptor *)(void *)r)->oom : NULL;
}

gmr_status gmr_oom_adaptor_get_counts(const gmr_oom_adaptor *a, gmr_oom_counts *out) {
  const size_t header = offsetof(gmr_oom_counts, version) + sizeof out->version;
  if (a == NULL || out == NULL || out->size < header || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_oom_counts c = GMR_OOM_COUNTS_INIT;
  gmr__oom_handler_get_counts(&a->oom, &c);
  /* The header stays the caller's; nothing past out->size is written. */
  size_t n = out->size < sizeof c ? out->size : sizeof c;
  if (n > header) memcpy((char *)out + header, (const char *)&c + header, n - header);
  return GMR_OK;
}

size_t gmr_oom_adaptor_get_live_count(const gmr_oom_adaptor *a) {
  return atomic_load_explicit(&a->live_count, memory_order_relaxed);
}
