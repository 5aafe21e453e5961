/*
 * gmr/nccl/symmetric_resource.h: a sub-allocator whose placement is a pure
 * function of the sequence of requests, so that ranks that make the same
 * allocations and frees get their blocks at the same offsets: symmetric
 * buffers for collectives.
 *
 * NCCL wants the same offset on every rank in several places: NVLS
 * registration needs the user buffer's offset inside its registration to be
 * equal on every local rank, and symmetric window registration
 * (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC) maps every rank's
 * memory at one stride, so a buffer is found at the same offset in every
 * rank's window. A caching allocator cannot promise that: gmr's pool, like
 * PyTorch's, picks blocks by stream and by which events have completed, so
 * two ranks running the same program place blocks differently.
 *
 * Placement: memory comes from the upstream in regions of region_bytes (a
 * request larger than that gets a region of its own, rounded up), numbered
 * 0, 1, 2 ... in the order they were taken. Requests are rounded up to
 * alignment_bytes; a request takes the front of the first free block, in
 * (region index, offset) order, that holds it; a new region is taken only
 * when none does. Frees coalesce with free neighbours. Nothing else counts:
 * not the stream, not the thread, not whether earlier work has finished.
 * So: identical sequences of allocate (bytes, alignment) and deallocate
 * (which allocation) and trim calls on every rank give every allocation the
 * same (region index, offset) on every rank, as long as the upstream grants
 * the same regions. gmr_symmetric_resource_get_offset() tells the pair.
 * (Requests from several threads at once have no defined order, so the
 * determinism is per sequence, not per thread.)
 *
 * Registration: with `symmetric > chunk_listener > cumem(nccl_ready=true)`
 * every region is one physical allocation, registered once with NCCL
 * (gmr/nccl/nccl.h); the offset of every block inside its registration is then
 * the same on every rank.
 *
 * Streams (without host synchronisation, and without letting completion
 * decide placement): a free records an event on its stream. A free block
 * remembers the streams whose frees it holds; when stream S takes memory
 * from it, S waits on the GPU (cudaStreamWaitEvent) for each of those
 * streams' latest event, other than S's own. Per-stream events are created
 * at a stream's first free, on the current device (which must be the
 * stream's). A stream handle destroyed and reused by a new stream is taken
 * for the old one (RMM's caveat).
 *
 * Capture: allocate and deallocate on a capturing stream return
 * GMR_ERR_CAPTURE_UNSAFE (the event record and stream waits would join the
 * capture). Alignment: at most alignment_bytes (more is GMR_ERR_UNSUPPORTED:
 * raise alignment_bytes, which every rank must then share).
 *
 * Statuses of gmr_resource_allocate(): the upstream's (GMR_ERR_OUT_OF_MEMORY ...),
 * GMR_ERR_OUT_OF_MEMORY also when max_region_count regions are held,
 * GMR_ERR_UNSUPPORTED, GMR_ERR_CAPTURE_UNSAFE, GMR_ERR_CUDA (a stream wait
 * failed). gmr_resource_deallocate(): GMR_ERR_UNKNOWN_POINTER, GMR_ERR_DOUBLE_FREE,
 * GMR_ERR_FREE_MISMATCH (bytes or alignment other than those asked for at
 * allocation: both are kept per allocation, so 999 bytes for a 1,000-byte
 * allocation is refused although both round to one block),
 * GMR_ERR_CAPTURE_UNSAFE, GMR_ERR_CUDA (the event could not be recorded).
 * On failure nothing changed.
 *
 * Trim gives back the wholly free regions at the end of the region list
 * (the last ones), so the numbering stays dense; destroy gives back every
 * region. Both order the upstream's free after the frees' events (the
 * default stream waits for them).
 *
 * Source: NCCL's registration rules (src/transport/nvls.cc: equal offsets
 * for NVLS; src/dev_runtime.cc: window registration), and the
 * "registration_counter" ordering of PyTorch's ProcessGroupNCCL, which
 * registers segments in the same order on every rank for the same reason;
 * first fit with coalescing after Knuth (TAOCP vol. 1, 2.5).
 *
 * Thread-safe: yes (internal mutex; the upstream is called under it).
 * Create and destroy are not.
 */
#ifndef GMR_SYMMETRIC_RESOURCE_H_
#define GMR_SYMMETRIC_RESOURCE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_symmetric_resource gmr_symmetric_resource;

typedef struct gmr_symmetric_resource_config {
  /* Bytes taken from the upstream per region; 0: 256 MiB. A multiple of
   * alignment_bytes. */
  size_t region_bytes;
  /* Every block starts at a multiple of this and sizes round up to it (a
   * power of two, 256 or more); 0: 4096 (NCCL_WIN_REQUIRED_ALIGNMENT). */
  size_t alignment_bytes;
  /* Most regions held at once; 0: no limit. */
  size_t max_region_count;
} gmr_symmetric_resource_config;

/* 256 MiB regions, 4 KiB alignment, no region limit. */
#define GMR_SYMMETRIC_RESOURCE_CONFIG_DEFAULT {0, 0, 0}

/**
 * Create a resource over `upstream` that places every request by first fit
 * over numbered regions, so that the same sequence of requests gives the
 * same (region, offset) on every rank.
 *
 * Units: bytes. Ownership: `upstream` is borrowed: it must outlive the
 *   resource and must not be moved; `config` is copied (NULL: the default).
 *   The caller owns *out and destroys it with gmr_resource_destroy():
 *   GMR_ERR_BUSY while allocations are live; otherwise every region goes
 *   back to the upstream after the default stream waited for the frees'
 *   events, and a refused upstream free stops destroy with that status and
 *   the resource still valid (a later destroy continues).
 * Thread-safe: yes (it creates an independent object).
 * Stream/device: no CUDA call; memory is taken at the first request.
 * Source: NCCL's registration rules (NVLS, symmetric windows); PyTorch's
 *   ProcessGroupNCCL registration order (see the banner).
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  upstream invalid, out NULL, alignment_bytes not
 *                             a power of two of 256 or more, region_bytes not
 *                             a multiple of it or above GMR_MAX_ALLOCATION_BYTES
 *                             (`failure`, which may be NULL, says which).
 *   GMR_ERR_OUT_OF_MEMORY     host memory.
 * On failure *out is NULL (when out is not NULL) and nothing needs to be
 * destroyed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_symmetric_resource_create(
    gmr_resource *upstream, const gmr_symmetric_resource_config *config,
    gmr_symmetric_resource **out, gmr_failure *failure);

/**
 * The gmr_symmetric_resource's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `r`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_symmetric_resource_as_resource(gmr_symmetric_resource *r) {
  return (gmr_resource *)(void *)r;
}

/**
 * The gmr_symmetric_resource behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "symmetric_resource") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_symmetric_resource *gmr_symmetric_resource_from_resource(gmr_resource *r) {
  return (gmr_symmetric_resource *)gmr_resource_downcast(r, "symmetric_resource");
}

/**
 * Where the live allocation starting at `ptr` lies: its region's number
 * (0 = the first region taken) and its offset in bytes from the region's
 * start; the same pair on every rank that made the same requests.
 * Units: offset in bytes. Ownership: the outputs are the caller's.
 * Thread-safe: yes (under the resource's lock). Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *region_index and *offset_bytes are set.
 *   GMR_ERR_INVALID_ARGUMENT  r, region_index or offset_bytes is NULL.
 *   GMR_ERR_UNKNOWN_POINTER   ptr is not the start of a live allocation
 *                             (never allocated here, inside a block, or freed).
 * On failure the outputs are unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_symmetric_resource_get_offset(gmr_symmetric_resource *r,
                                                                   const void *ptr,
                                                                   size_t *region_index,
                                                                   size_t *offset_bytes);

/**
 * The start address and size of region `region_index` (0 = the first region
 * taken from the upstream), e.g. to register it with NCCL.
 * Units: bytes. Ownership: the region stays the resource's; *base is valid
 *   until trim or destroy gives the region back.
 * Thread-safe: yes (under the resource's lock). Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *base and *bytes are set.
 *   GMR_ERR_INVALID_ARGUMENT  r, base or bytes is NULL, or region_index is
 *                             not below the number of regions held.
 * On failure the outputs are unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_symmetric_resource_get_region(gmr_symmetric_resource *r,
                                                                   size_t region_index,
                                                                   void **base, size_t *bytes);

#define GMR_SYMMETRIC_RESOURCE_STATS_VERSION 1u

typedef struct gmr_symmetric_resource_stats {
  size_t size;      /* sizeof as the caller knows it */
  uint32_t version; /* GMR_SYMMETRIC_RESOURCE_STATS_VERSION */
  size_t region_count;
  size_t held_bytes;        /* regions */
  size_t peak_held_bytes;
  size_t live_bytes;        /* rounded sizes of live allocations */
  size_t live_count;
  size_t free_block_count;
  size_t largest_free_block_bytes;
  uint64_t event_record_count;
  uint64_t stream_wait_count;
} gmr_symmetric_resource_stats;

#define GMR_SYMMETRIC_RESOURCE_STATS_INIT                                                          \
  {sizeof(gmr_symmetric_resource_stats), GMR_SYMMETRIC_RESOURCE_STATS_VERSION, 0, 0, 0, 0, 0, 0,   \
   0, 0, 0}

/**
 * Fill *out with a snapshot of the resource's statistics (the caller set
 * size and version: GMR_SYMMETRIC_RESOURCE_STATS_INIT; fields past `size` are
 * left alone).
 * Units: bytes, unless a field is named _count. Ownership: *out is the
 *   caller's. O(blocks): the free blocks are counted by a walk.
 * Thread-safe: yes (a snapshot under the resource's lock).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  r or out is NULL, out->size is smaller than
 *                             the size+version header, or out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_symmetric_resource_get_stats(
    gmr_symmetric_resource *r, gmr_symmetric_resource_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_SYMMETRIC_RESOURCE_H_ */
