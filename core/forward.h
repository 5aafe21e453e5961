/*
 * core/forward.h (internal): pass a request that the dispatch already
 * checked from an adaptor's vtable slot straight to its upstream's slot.
 *
 * gmr_allocate_ex() checks its arguments and resets the failure record at
 * every layer; an adaptor on a hot path whose own call came through the
 * dispatch has nothing left to check (bytes in 1..GMR_MAX_ALLOCATION_BYTES, a
 * power-of-two alignment, a non-NULL out pointer, a fresh record; the
 * upstream was checked with gmr_resource_check() at create). These helpers
 * call the upstream's slot directly and keep the dispatch's contract: on
 * failure *out_ptr is NULL and the record names the deepest resource that
 * failed. The NVTX logging adaptor uses them to stay within its 5 ns budget.
 *
 * pre: called from inside a vtable slot of an adaptor, with that slot's own
 *      (already checked) arguments; `failure` non-NULL.
 * Thread-safe: as the upstream.
 */
#ifndef GMR_CORE_FORWARD_H_
#define GMR_CORE_FORWARD_H_

#include "core/failure.h"
#include "gmr/resource.h"

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

#endif /* GMR_CORE_FORWARD_H_ */
