/*
 * core/adaptor.h (internal): what every adaptor (a resource over one upstream
 * that changes some calls and passes the others down) has in common.
 *
 * Its struct starts with a gmr__adaptor, and its vtable names the base's
 * slot for each call it leaves alone (get_upstream always; record_stream,
 * extend). trim, get_footprint and get_memory_info stay NULL: their dispatch
 * walks on to the upstream (gmr_resource_trim calls each layer's trim once,
 * so an adaptor's trim must never call the upstream's too). The slots it
 * changes call the upstream through core/forward.h, never through the public
 * dispatch, which would check the request again and reset the failure record.
 *
 * Thread-safe: the base adds no state; the upstream is set at create (the
 * device guard's registry alone changes it, while no thread uses the guard).
 */
#ifndef GMR_CORE_ADAPTOR_H_
#define GMR_CORE_ADAPTOR_H_

#include "core/forward.h"
#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr__adaptor {
  gmr_resource resource;  /* first: an adaptor is a gmr_resource */
  gmr_resource *upstream; /* borrowed; create checked it (gmr__resource_check_vtbl) */
} gmr__adaptor;

/* Make `a` a resource with `vtbl` over `upstream` (checked by the caller). */
static inline void gmr__adaptor_init(gmr__adaptor *a, const gmr_resource_vtbl *vtbl,
                                     gmr_resource *upstream) {
  a->resource.vtbl = vtbl;
  a->upstream = upstream;
}

/* Slots that pass the call to the upstream unchanged (pre: `self` is a
 * gmr__adaptor). Inline: a vtable that names one gets its own copy. */
static inline gmr_resource *gmr__adaptor_get_upstream(const gmr_resource *self) {
  return ((const gmr__adaptor *)(const void *)self)->upstream;
}

static inline gmr_status gmr__adaptor_record_stream(gmr_resource *self, void *ptr,
                                                    gmr_stream stream) {
  return gmr__forward_record_stream(gmr__adaptor_get_upstream(self), ptr, stream);
}

static inline gmr_status gmr__adaptor_extend(gmr_resource *self, void *ptr, size_t bytes,
                                             size_t new_bytes, size_t alignment, gmr_stream stream,
                                             gmr_failure *failure) {
  return gmr__forward_extend(gmr__adaptor_get_upstream(self), ptr, bytes, new_bytes, alignment,
                             stream, failure);
}

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_ADAPTOR_H_ */
