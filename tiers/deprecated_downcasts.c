/*
 * tiers/deprecated_downcasts.c: the exported symbols of libgmr_tiers's
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
typedef struct gmr_memory_space gmr_memory_space;
typedef struct gmr_numa_host_resource gmr_numa_host_resource;

/* The prototypes the headers of 0.1 declared; no header declares them now. */
GMR_API gmr_resource *gmr_memory_space_as_resource(gmr_memory_space *h);
GMR_API gmr_memory_space *gmr_memory_space_from_resource(gmr_resource *r);
GMR_API gmr_resource *gmr_numa_host_resource_as_resource(gmr_numa_host_resource *h);
GMR_API gmr_numa_host_resource *gmr_numa_host_resource_from_resource(gmr_resource *r);

gmr_resource *gmr_memory_space_as_resource(gmr_memory_space *h) {
  return (gmr_resource *)(void *)h;
}

gmr_memory_space *gmr_memory_space_from_resource(gmr_resource *r) {
  return (gmr_memory_space *)gmr_resource_downcast(r, "memory_space");
}

gmr_resource *gmr_numa_host_resource_as_resource(gmr_numa_host_resource *h) {
  return (gmr_resource *)(void *)h;
}

gmr_numa_host_resource *gmr_numa_host_resource_from_resource(gmr_resource *r) {
  return (gmr_numa_host_resource *)gmr_resource_downcast(r, "numa_host_resource");
}
