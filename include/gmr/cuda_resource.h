/*
 * gmr/cuda_resource.h: the leaf resource that gets memory from the CUDA
 * runtime, in one of four kinds.
 *
 *   device   cudaMalloc / cudaFree. Synchronises (cudaFree waits for the
 *            device); capture-unsafe.
 *   async    cudaMallocFromPoolAsync / cudaFreeAsync on a cudaMemPool_t the
 *            resource creates for its device (never the device's default
 *            pool). Stream-ordered, no synchronisation; allowed during graph
 *            capture (CUDA then makes graph memory nodes). Release threshold
 *            configurable; by default the pool keeps everything it reserved
 *            (UINT64_MAX), as RMM's cuda_async_memory_resource does.
 *   managed  cudaMallocManaged(cudaMemAttachGlobal) / cudaFree.
 *   pinned   cudaHostAlloc(cudaHostAllocDefault) / cudaFreeHost: page-locked
 *            host memory the device can access.
 *
 * Device: the resource remembers the device it was created for and makes it
 * current around each CUDA call when another device is current, restoring the
 * caller's device afterwards (RMM's cuda_set_device_raii).
 *
 * Capture: for the device, managed and pinned kinds, an allocate or deallocate
 * on a stream that is capturing returns GMR_ERR_CAPTURE_UNSAFE without calling
 * CUDA, so the capture survives. (A call from a thread whose stream is not
 * capturing, while another thread captures in global mode, is refused by CUDA
 * itself: GMR_ERR_CAPTURE_UNSAFE with cuda_error 900.)
 *
 * Errors: cudaErrorMemoryAllocation -> GMR_ERR_OUT_OF_MEMORY; capture errors
 * (900-908) -> GMR_ERR_CAPTURE_UNSAFE; anything else -> GMR_ERR_CUDA. The
 * cudaError_t value is kept in gmr_failure::cuda_error (gmr_allocate_ex).
 *
 * Alignment: CUDA gives 256 bytes; a request for more returns
 * GMR_ERR_UNSUPPORTED.
 *
 * Thread-safe: yes (atomics for the counters; the CUDA calls are thread-safe).
 */
#ifndef GMR_CUDA_RESOURCE_H_
#define GMR_CUDA_RESOURCE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gmr_cuda_kind {
  GMR_CUDA_KIND_DEVICE = 0,
  GMR_CUDA_KIND_ASYNC = 1,
  GMR_CUDA_KIND_MANAGED = 2,
  GMR_CUDA_KIND_PINNED = 3
} gmr_cuda_kind;

/* Use the device current in the calling thread at create time. */
#define GMR_CURRENT_DEVICE (-1)

typedef struct gmr_cuda_resource_config {
  gmr_cuda_kind kind;
  int device;                       /* device ordinal, or GMR_CURRENT_DEVICE */
  uint64_t release_threshold_bytes; /* async: cudaMemPoolAttrReleaseThreshold */
} gmr_cuda_resource_config;

/* Kind device, current device, pool keeps everything. */
#define GMR_CUDA_RESOURCE_CONFIG_DEFAULT {GMR_CUDA_KIND_DEVICE, GMR_CURRENT_DEVICE, UINT64_MAX}

typedef struct gmr_cuda_resource gmr_cuda_resource;

/**
 * Create a CUDA resource of `config->kind` for `config->device`.
 *
 * Units: release_threshold_bytes in bytes.
 * Ownership: `config` is copied (NULL means GMR_CUDA_RESOURCE_CONFIG_DEFAULT);
 *   the caller destroys *out with gmr_resource_destroy().
 * Thread-safe: yes (creates independent objects).
 * Stream/device: async creates a cudaMemPool_t on the device (cudaMemPoolCreate);
 *   the other kinds make no CUDA call except device queries. Never synchronises.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out is NULL, the kind is unknown, or the device
 *                             ordinal is out of range.
 *   GMR_ERR_UNSUPPORTED       async on a device without memory pools.
 *   GMR_ERR_OUT_OF_MEMORY     the host allocation for the resource failed.
 *   GMR_ERR_CUDA              a CUDA query or cudaMemPoolCreate failed (also:
 *                             no GPU and no simulation).
 * On failure *out is NULL and nothing needs to be destroyed.
 * Source: RMM's cuda_memory_resource, cuda_async_memory_resource,
 *   managed_memory_resource and pinned_host_memory_resource.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_resource_create(const gmr_cuda_resource_config *config,
                                                          gmr_cuda_resource **out);

/** The embedded gmr_resource (never NULL for a non-NULL r). Thread-safe: yes. */
GMR_API gmr_resource *gmr_cuda_resource_as_resource(gmr_cuda_resource *r);

/**
 * The gmr_cuda_resource behind `r`, or NULL if `r` is not one (checked by
 * vtable identity). Thread-safe: yes.
 */
GMR_API gmr_cuda_resource *gmr_cuda_resource_from_resource(gmr_resource *r);

/** The device ordinal the resource belongs to. Thread-safe: yes. */
GMR_API int gmr_cuda_resource_get_device(const gmr_cuda_resource *r);

/** The resource's kind. Thread-safe: yes. */
GMR_API gmr_cuda_kind gmr_cuda_resource_get_kind(const gmr_cuda_resource *r);

/**
 * Number of allocations handed out and not yet given back (what makes destroy
 * return GMR_ERR_BUSY). Thread-safe: yes; may miss calls in flight.
 */
GMR_API size_t gmr_cuda_resource_get_live_count(const gmr_cuda_resource *r);

/** "device", "async", "managed", "pinned", or "unknown". Static string. */
GMR_API const char *gmr_cuda_kind_name(gmr_cuda_kind kind);

/**
 * Parse a kind name as gmr_cuda_kind_name() writes it.
 * Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (NULL argument or unknown name;
 * *out unchanged).
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_kind_from_name(const char *name, gmr_cuda_kind *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CUDA_RESOURCE_H_ */
