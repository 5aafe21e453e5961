/*
 * core/forward.h (internal): the one path by which an adaptor passes a
 * request the dispatch already checked from its vtable slot straight to its
 * upstream's slot.
 *
 * gmr_resource_allocate_ex() checks its arguments and resets the failure record; a
 * request that came through it has nothing left to check on the way down
 * (bytes in 1..GMR_MAX_ALLOCATION_BYTES, a power-of-two alignment, a non-NULL
 * out pointer, a fresh record; the upstream was checked with
 * gmr__resource_check_vtbl() at create). Every adaptor (core/adaptor.h: those
 * of adaptors/, the device guard, the chunk listener, the memory space, and
 * the scoped pool towards its arena) calls its upstream through these
 * helpers, never through the public dispatch, so arguments are checked once
 * per call, at the public entry, however deep the stack, and the record a
 * layer above filled travels down and back up. They keep the dispatch's
 * contract: on failure *out_ptr is NULL and the record names the deepest
 * resource that failed.
 * Optional slots an upstream lacks answer as the dispatch would
 * (record_stream: GMR_ERR_UNSUPPORTED; allocate_capturing:
 * GMR_ERR_CAPTURE_UNSAFE with a message; extend: GMR_ERR_UNSUPPORTED with a
 * message).
 *
 * pre: called from inside a vtable slot of an adaptor, with that slot's own
 *      (already checked) arguments; `failure` non-NULL.
 * Thread-safe: as the upstream.
 */
#ifndef GMR_CORE_FORWARD_H_
#define GMR_CORE_FORWARD_H_

#include <stdio.h>

#include "core/failure.h"
#include "gmr/resource.h"

/* gmr__forward_allocate or gmr__forward_allocate_capturing, for a slot that
 * does the same around either. */
typedef gmr_status gmr__forward_allocate_fn(gmr_resource *upstream, size_t bytes,
                                            size_t alignment, gmr_stream stream, void **out_ptr,
                                            gmr_failure *failure);

static inline gmr_status gmr__forward_allocate(gmr_resource *upstream, size_t bytes,
                                               size_t alignment, gmr_stream stream,
                                               void **out_ptr, gmr_failure *failure) {
  gmr_status st = upstream->vtbl->allocate(upstream, bytes, alignment, stream, out_ptr, failure);
  if (st != GMR_OK) {
    *out_ptr = NULL;
    gmr__failure_record(failure, st, upstream, bytes, alignment, stream);
  }
  return st;
}

static inline gmr_status gmr__forward_deallocate(gmr_resource *upstream, void *ptr, size_t bytes,
                                                 size_t alignment, gmr_stream stream) {
  return upstream->vtbl->deallocate(upstream, ptr, bytes, alignment, stream);
}

static inline gmr_status gmr__forward_allocate_capturing(gmr_resource *upstream, size_t bytes,
                                                         size_t alignment, gmr_stream stream,
                                                         void **out_ptr, gmr_failure *failure) {
  gmr_status st;
  if (upstream->vtbl->version < 2u || upstream->vtbl->allocate_capturing == NULL) {
    snprintf(failure->message, sizeof failure->message,
             "%s cannot allocate while a stream captures a CUDA graph",
             upstream->vtbl->type_name);
    st = GMR_ERR_CAPTURE_UNSAFE;
  } else {
    st = upstream->vtbl->allocate_capturing(upstream, bytes, alignment, stream, out_ptr, failure);
  }
  if (st != GMR_OK) {
    *out_ptr = NULL;
    gmr__failure_record(failure, st, upstream, bytes, alignment, stream);
  }
  return st;
}

static inline gmr_status gmr__forward_record_stream(gmr_resource *upstream, void *ptr,
                                                    gmr_stream stream) {
  if (upstream->vtbl->version < 2u || upstream->vtbl->record_stream == NULL) {
    return GMR_ERR_UNSUPPORTED;
  }
  return upstream->vtbl->record_stream(upstream, ptr, stream);
}

/* gmr_resource_extend() from inside an adaptor's extend slot: the dispatch above
 * checked ptr, the sizes (new_bytes > bytes) and the alignment. On failure
 * the record names the deepest resource that failed, with bytes = new_bytes
 * as gmr_resource_extend() reports it. */
static inline gmr_status gmr__forward_extend(gmr_resource *upstream, void *ptr, size_t bytes,
                                             size_t new_bytes, size_t alignment,
                                             gmr_stream stream, gmr_failure *failure) {
  gmr_status st;
  if (upstream->vtbl->version < 3u || upstream->vtbl->extend == NULL) {
    snprintf(failure->message, sizeof failure->message, "%s cannot grow an allocation in place",
             upstream->vtbl->type_name);
    st = GMR_ERR_UNSUPPORTED;
  } else {
    st = upstream->vtbl->extend(upstream, ptr, bytes, new_bytes, alignment, stream, failure);
  }
  if (st != GMR_OK) gmr__failure_record(failure, st, upstream, new_bytes, alignment, stream);
  return st;
}

#endif /* GMR_CORE_FORWARD_H_ */
