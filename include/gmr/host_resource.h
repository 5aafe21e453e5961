/*
 * gmr/host_resource.h: pageable host memory (the C library's aligned_alloc)
 * with any power-of-two alignment.
 *
 * It is a leaf resource: for host-side buffers, as the upstream of a pool of
 * host memory, and to test stacks without any CUDA layer. Streams are ignored:
 * memory is reusable as soon as it is freed, because nothing on a device uses
 * pageable memory asynchronously through gmr.
 *
 * Books: the resource keeps every live allocation (address -> bytes,
 * alignment) and checks each free against them before the C library sees it,
 * so a bad free changes nothing and is refused with gmr's vocabulary
 * (gmr/resource.h): GMR_ERR_UNKNOWN_POINTER (never allocated here),
 * GMR_ERR_DOUBLE_FREE (freed already; the last 1,024 frees of each address
 * region are remembered, an older one reads as unknown pointer),
 * GMR_ERR_FREE_MISMATCH (other bytes or alignment than the allocation's).
 * The footprint counts the bytes of the books, not the caller's.
 *
 * Optional slots: get_memory_info answers held = live (the bytes of live
 * allocations), free 0: the resource caches nothing. allocate_capturing is
 * allocate (no CUDA call, so a capture in progress never notices).
 * record_stream is GMR_ERR_UNSUPPORTED: a free here is an immediate free(),
 * never ordered after any stream's work, so the resource cannot keep the
 * promise record_stream asks for; answering GMR_OK would hide a hazard from a
 * program that registered the memory with CUDA and used it on a stream.
 *
 * Statuses: allocate gives GMR_ERR_OUT_OF_MEMORY when aligned_alloc fails
 * (the failure message names the bytes and alignment asked) or the books have
 * no host memory; deallocate gives the three bad-free statuses above.
 *
 * Thread-safe: yes (atomics for the counters, the books split in 16 shards
 * under spin locks; the C library is thread-safe).
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
 * (the resource itself or its books could not be allocated). On failure *out
 * is NULL (when out is not NULL) and nothing needs destroying.
 */
GMR_API GMR_NODISCARD gmr_status gmr_host_resource_create(gmr_host_resource **out);

/**
 * The gmr_host_resource's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `r`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_host_resource_as_resource(gmr_host_resource *r) {
  return (gmr_resource *)(void *)r;
}

/**
 * The gmr_host_resource behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "host_resource") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_host_resource *gmr_host_resource_from_resource(gmr_resource *r) {
  return (gmr_host_resource *)gmr_resource_downcast(r, "host_resource");
}

/** Live allocations now. pre: r is not NULL. Thread-safe: yes; may miss calls in flight. */
GMR_API size_t gmr_host_resource_get_live_count(const gmr_host_resource *r);

#ifdef __cplusplus
}
#endif

#endif /* GMR_HOST_RESOURCE_H_ */
