/*
 * nccl/deprecated_downcasts.c: the exported symbols of libgmr_nccl's
 * per-type *_as_resource() and *_from_resource() functions of gmr 0.1, for
 * programs built against its headers; removed in 0.3.0. The headers define
 * them as static inline functions now; core/deprecated_downcasts.c says why
 * and does the same for libgmr.
 *
 * Thread-safe: yes (as the functions they replace).
 */

#include <stddef.h>

#include "gmr/config.h"
#include "gmr/resource.h"

/* The handle types, opaque here as in their headers. */
typedef struct gmr_cumem_resource gmr_cumem_resource;
typedef struct gmr_symmetric_resource gmr_symmetric_resource;
typedef struct gmr_chunk_listener_adaptor gmr_chunk_listener_adaptor;

/* The prototypes the headers of 0.1 declared; no header declares them now. */
GMR_API gmr_resource *gmr_cumem_resource_as_resource(gmr_cumem_resource *h);
GMR_API gmr_cumem_resource *gmr_cumem_resource_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_symmetric_resource_as_resource(gmr_symmetric_resource *h);
GMR_API gmr_symmetric_resource *gmr_symmetric_resource_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_chunk_listener_adaptor_as_resource(gmr_chunk_listener_adaptor *h);
GMR_API gmr_chunk_listener_adaptor *gmr_chunk_listener_adaptor_from_resource(gmr_resource *r);

gmr_resource *gmr_cumem_resource_as_resource(gmr_cumem_resource *h) {
  return (gmr_resource *)(void *)h;
}

gmr_cumem_resource *gmr_cumem_resource_from_resource(gmr_resource *r) {
  return (gmr_cumem_resource *)gmr_resource_downcast(r, "cumem_resource");
}

gmr_resource *gmr_symmetric_resource_as_resource(gmr_symmetric_resource *h) {
  return (gmr_resource *)(void *)h;
}

gmr_symmetric_resource *gmr_symmetric_resource_from_resource(gmr_resource *r) {
  return (gmr_symmetric_resource *)gmr_resource_downcast(r, "symmetric_resource");
}

gmr_resource *gmr_chunk_listener_adaptor_as_resource(gmr_chunk_listener_adaptor *h) {
  return (gmr_resource *)(void *)h;
}

gmr_chunk_listener_adaptor *gmr_chunk_listener_adaptor_from_resource(gmr_resource *r) {
  return (gmr_chunk_listener_adaptor *)gmr_resource_downcast(r, "chunk_listener_adaptor");
}
