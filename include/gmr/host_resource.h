/*
 * gmr/host_resource.h: pageable host memory (the C library's aligned_alloc)
 * with any power-of-two alignment.
 *
 * It is a leaf resource: for host-side buffers, as the upstream of a pool of
 * host memory, and to test stacks without any CUDA layer. Streams are ignored:
 * memory is reusable as soon as it is freed, because nothing on a device uses
 * pageable memory asynchronously through gmr.
 *
 * Thread-safe: yes (atomics for the counters; the C library is thread-safe).
 */
#ifndef GMR_HOST_RESOURCE_H_
#define GMR_HOST_RESOURCE_H_

#include <stddef.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_host_resource gmr_host_resource;

/**
 * Create a host resource.
 * Ownership: the caller destroys *out with gmr_resource_destroy(), which
 *   returns GMR_ERR_BUSY while allocations are live.
 * Thread-safe: yes. Stream/device: no CUDA call at all.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (out is NULL); GMR_ERR_OUT_OF_MEMORY
 * (the resource itself could not be allocated; *out is then NULL).
 */
GMR_API GMR_NODISCARD gmr_status gmr_host_resource_create(gmr_host_resource **out);

/** The embedded gmr_resource. Thread-safe: yes. */
GMR_API gmr_resource *gmr_host_resource_as_resource(gmr_host_resource *r);

/** The gmr_host_resource behind `r`, or NULL if `r` is not one. */
GMR_API gmr_host_resource *gmr_host_resource_from_resource(gmr_resource *r);

/** Live allocations now. Thread-safe: yes; may miss calls in flight. */
GMR_API size_t gmr_host_resource_get_live_count(const gmr_host_resource *r);

#ifdef __cplusplus
}
#endif

#endif /* GMR_HOST_RESOURCE_H_ */
