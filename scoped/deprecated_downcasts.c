/*
 * scoped/deprecated_downcasts.c: the exported symbols of libgmr_scoped's
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
typedef struct gmr_scoped_pool gmr_scoped_pool;

/* The prototypes the headers of 0.1 declared; no header declares them now. */
GMR_API gmr_resource *gmr_scoped_pool_as_resource(gmr_scoped_pool *h);

gmr_resource *gmr_scoped_pool_as_resource(gmr_scoped_pool *h) {
  return (gmr_resource *)(void *)h;
}
