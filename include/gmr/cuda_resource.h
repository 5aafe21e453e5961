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
 * cudaError_t value is kept in gmr_failure::cuda_error (gmr_resource_allocate_ex).
 *
 * Alignment: CUDA gives 256 bytes; a request for more returns
 * GMR_ERR_UNSUPPORTED.
 *
 * Books: the resource keeps every live allocation (address -> bytes,
 * alignment, in a table split in 16 shards; a few tens of nanoseconds beside
 * a CUDA allocation) and checks each free against them before CUDA sees it.
 * A bad free changes nothing and is refused with gmr's vocabulary
 * (gmr/resource.h): GMR_ERR_UNKNOWN_POINTER (not the start of a live
 * allocation of this resource), GMR_ERR_DOUBLE_FREE (freed already; the last
 * 1,024 frees of each address region are remembered, an older one reads as
 * unknown pointer), GMR_ERR_FREE_MISMATCH (other bytes or alignment than the
 * allocation's). Footprint and live count come from the books. A free that
 * CUDA refuses (GMR_ERR_CUDA) leaves the allocation live in the books.
 *
 * Optional slots:
 *  - allocate_capturing (gmr_resource_allocate_capturing): device, managed and pinned
 *    call cudaMalloc / cudaMallocManaged / cudaHostAlloc with the calling
 *    thread switched to relaxed capture mode and switched back on every path
 *    (PyTorch's cudaMallocMaybeCapturing), so a capture in progress on any
 *    stream stays valid and the graph keeps the address. async takes the
 *    block from its pool on a non-blocking stream of its own (created at
 *    the first such call, destroyed with the resource) and synchronises that
 *    stream, so the graph gets no memory node and any stream may use the
 *    block at once; a failed synchronise gives the block back (GMR_ERR_CUDA).
 *    (Plain allocate on a capturing stream still refuses for the three
 *    other kinds, as described above.)
 *  - record_stream (gmr_resource_record_stream): async remembers the stream with the
 *    allocation; at the free on stream S it records an event on each such
 *    stream (events from a small cache) and makes S wait for it
 *    (cudaStreamWaitEvent) before cudaFreeAsync, so the memory is reused
 *    only after that work. device, managed and pinned free with cudaFree /
 *    cudaFreeHost, which synchronise the device first: every stream's
 *    earlier work is done, so the recording is honoured trivially (only the
 *    pointer is checked). GMR_ERR_UNKNOWN_POINTER for a pointer that is not
 *    live; GMR_ERR_OUT_OF_MEMORY when host memory for the record runs out.
 *    A free whose event record or wait fails returns the CUDA status and
 *    releases nothing.
 *  - trim (gmr_resource_trim): async trims its pool to zero
 *    (cudaMemPoolTrimTo); memory freed with cudaFreeAsync whose stream has
 *    not reached the free yet is not released (synchronise first to release
 *    it too). The other kinds cache nothing.
 *  - get_memory_info: device, managed and pinned answer held = live (the
 *    bytes of live allocations), free 0 (they cache nothing). async answers
 *    GMR_ERR_UNSUPPORTED: its free memory is inside the cudaMemPool_t and
 *    reading it takes CUDA calls, which get_memory_info never makes.
 *
 * Thread-safe: yes (atomics for the counters, spin-locked shards for the
 * books, a mutex for the event cache; the CUDA calls are thread-safe).
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

/**
 * gmr_cuda_resource_create() that also says why it failed, for people:
 * `failure` (may be NULL) receives the status, a message naming what was
 * asked and what exists ("device 99 was asked, but the machine has 1 device
 * (ordinals 0 to 0) ..."; the kind number and the kinds there are; the CUDA
 * call that failed), and cuda_error for a CUDA failure. Its bytes,
 * alignment, stream and where stay 0/NULL (no allocation was involved).
 * Returns, ownership, thread safety and state after failure: as
 * gmr_cuda_resource_create().
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_resource_create_ex(const gmr_cuda_resource_config *config,
                                                             gmr_cuda_resource **out,
                                                             gmr_failure *failure);

/**
 * The gmr_cuda_resource's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `r`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_cuda_resource_as_resource(gmr_cuda_resource *r) {
  return (gmr_resource *)(void *)r;
}

/**
 * The gmr_cuda_resource behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "cuda_resource") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_cuda_resource *gmr_cuda_resource_from_resource(gmr_resource *r) {
  return (gmr_cuda_resource *)gmr_resource_downcast(r, "cuda_resource");
}

/** The device ordinal the resource belongs to. pre: r is not NULL. Thread-safe: yes. */
GMR_API int gmr_cuda_resource_get_device(const gmr_cuda_resource *r);

/** The resource's kind. pre: r is not NULL. Thread-safe: yes. */
GMR_API gmr_cuda_kind gmr_cuda_resource_get_kind(const gmr_cuda_resource *r);

/**
 * Number of allocations handed out and not yet given back (what makes destroy
 * return GMR_ERR_BUSY). pre: r is not NULL. Thread-safe: yes; may miss calls
 * in flight.
 */
GMR_API size_t gmr_cuda_resource_get_live_count(const gmr_cuda_resource *r);

/**
 * "device", "async", "managed", "pinned", or "unknown" for another value.
 * Ownership: static string. Thread-safe: yes. Never fails; no CUDA call.
 */
GMR_API const char *gmr_cuda_kind_name(gmr_cuda_kind kind);

/**
 * Parse a kind name as gmr_cuda_kind_name() writes it.
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (NULL argument or unknown name;
 * on failure *out is unchanged).
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_kind_from_name(const char *name, gmr_cuda_kind *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CUDA_RESOURCE_H_ */
