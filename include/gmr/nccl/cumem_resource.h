/*
 * gmr/nccl/cumem_resource.h: a leaf resource that gives every allocation a
 * physical allocation of its own through CUDA's virtual memory API: the way
 * ncclMemAlloc allocates (NCCL's src/allocator.cc), as a gmr resource.
 *
 * Each allocation of `bytes` is rounded up to the device's VMM granularity
 * and made of exactly one physical allocation: cuMemAddressReserve (aligned
 * to the granularity, or to a larger requested alignment), cuMemCreate,
 * cuMemMap, cuMemSetAccess (read-write for the device and its peers). Its
 * free undoes the four after waiting for the device (cuMemUnmap does not
 * wait for work still using the memory; cudaFree's semantics).
 *
 * Why one physical allocation per allocation: NCCL registers a buffer per
 * physical allocation. NCCL before 2.29 maps on its peers only the
 * allocation (cuMemGetAddressRange extent) that holds the buffer's start,
 * so a registered range over several physical allocations is not usable
 * zero-copy (see gmr/nccl/nccl.h). Put a pool on top for speed
 * (`pool > chunk_listener > cumem(nccl_ready=true)`): each pool chunk is
 * then one physical allocation, registered once, and every sub-allocation
 * lies inside one registration. This is PyTorch's MemPool over ncclMemAlloc
 * in gmr's terms. (gmr_vmm_pool_resource instead makes every page its own
 * physical allocation, which is what lets it remap pages.)
 *
 * nccl_ready asks for what ncclMemAlloc asks for: export handle type POSIX
 * file descriptor, plus fabric where the device supports it (retried
 * without fabric when the driver refuses it: no IMEX channel), GPUDirect
 * RDMA where the device supports it with VMM, and the RECOMMENDED
 * granularity. Never cuMulticast*.
 *
 * Statuses of gmr_resource_allocate(): GMR_ERR_OUT_OF_MEMORY (cuMemCreate or
 * cuMemAddressReserve said so; the driver's code is in the failure record),
 * GMR_ERR_CUDA (another driver failure), GMR_ERR_CAPTURE_UNSAFE (the stream
 * is capturing: the driver calls and the free's wait would break the
 * capture). gmr_resource_deallocate(): GMR_ERR_UNKNOWN_POINTER (not an allocation of
 * this resource), GMR_ERR_DOUBLE_FREE (an allocation already freed; the
 * latest 65,536 freed addresses are remembered, older ones read as unknown),
 * GMR_ERR_FREE_MISMATCH (bytes or alignment other than those asked for at
 * allocation: the resource keeps both per allocation, so 999 bytes for a
 * 1,000-byte allocation is refused even though both round to one granule),
 * GMR_ERR_CAPTURE_UNSAFE, GMR_ERR_CUDA (a refused driver call: the
 * allocation stays mapped and live). On any failure nothing changed.
 *
 * Device: the resource belongs to its device and makes it current around
 * its CUDA calls, restoring the caller's. Streams: allocations are usable at
 * once on any stream (the memory is mapped synchronously); a free waits for
 * the whole device, so the stream argument orders nothing further.
 *
 * Source: ncclMemAlloc / ncclMemFree (NCCL src/allocator.cc) for the
 * properties and the sequence of calls; CUDA's driver API (cuda.h, virtual
 * memory management); RMM's cuda_memory_resource for the leaf's shape.
 *
 * Thread-safe: yes (internal mutex around the table of allocations; the
 * driver calls run outside it). Create and destroy are not.
 */
#ifndef GMR_CUMEM_RESOURCE_H_
#define GMR_CUMEM_RESOURCE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_cumem_resource gmr_cumem_resource;

/* Most peer devices a list may name. */
#define GMR_CUMEM_MAX_PEERS 16

typedef enum gmr_cumem_peer_access {
  GMR_CUMEM_PEERS_NONE = 0, /* only the resource's device */
  GMR_CUMEM_PEERS_ALL = 1,  /* every other device that can access this one (ncclMemAlloc) */
  GMR_CUMEM_PEERS_LIST = 2  /* the devices in peers[0..peer_count) */
} gmr_cumem_peer_access;

typedef struct gmr_cumem_resource_config {
  int device; /* device ordinal, or GMR_CUMEM_CURRENT_DEVICE */
  bool nccl_ready;
  gmr_cumem_peer_access peer_access;
  int peers[GMR_CUMEM_MAX_PEERS];
  size_t peer_count;
} gmr_cumem_resource_config;

#define GMR_CUMEM_CURRENT_DEVICE (-1)

/* Current device, not NCCL-ready, no peers. */
#define GMR_CUMEM_RESOURCE_CONFIG_DEFAULT \
  {GMR_CUMEM_CURRENT_DEVICE, false, GMR_CUMEM_PEERS_NONE, {0}, 0}

/**
 * Create a leaf resource that gives each allocation one physical allocation
 * of its own on `config->device` (ncclMemAlloc's way), with the access and
 * export properties the config asks for.
 *
 * Units: bytes. Ownership: `config` is copied (NULL: the default); the
 *   caller owns *out and destroys it with gmr_resource_destroy(), which
 *   returns GMR_ERR_BUSY while an allocation is live and otherwise frees
 *   host memory only (every allocation's device memory went back at its
 *   free). `failure` (may be NULL) receives the reason of a failure.
 * Thread-safe: yes (it creates an independent object).
 * Stream/device: queries the device through the driver (cuInit, VMM
 *   support, handle types, GPUDirect RDMA, granularity, peer access);
 *   allocates no device memory and synchronises nothing.
 * Source: ncclMemAlloc (NCCL src/allocator.cc); CUDA's cuda.h virtual
 *   memory management API.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out is NULL; the device does not exist; an
 *                             unknown peer_access, peer_count above
 *                             GMR_CUMEM_MAX_PEERS, or a listed peer that does
 *                             not exist or is the resource's device.
 *   GMR_ERR_UNSUPPORTED       the device has no VMM support, or a listed peer
 *                             cannot access it.
 *   GMR_ERR_OUT_OF_MEMORY     host memory.
 *   GMR_ERR_CUDA              a device query failed (also: no GPU).
 * On failure *out is NULL and nothing needs to be destroyed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cumem_resource_create(const gmr_cumem_resource_config *config,
                                                           gmr_cumem_resource **out,
                                                           gmr_failure *failure);

/**
 * The gmr_cumem_resource's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `r`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_cumem_resource_as_resource(gmr_cumem_resource *r) {
  return (gmr_resource *)(void *)r;
}

/**
 * The gmr_cumem_resource behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "cumem_resource") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_cumem_resource *gmr_cumem_resource_from_resource(gmr_resource *r) {
  return (gmr_cumem_resource *)gmr_resource_downcast(r, "cumem_resource");
}

#define GMR_CUMEM_RESOURCE_STATS_VERSION 1u

/* A snapshot, in bytes unless named _count. */
typedef struct gmr_cumem_resource_stats {
  size_t size;      /* sizeof as the caller knows it */
  uint32_t version; /* GMR_CUMEM_RESOURCE_STATS_VERSION as the caller knows it */
  int device;
  size_t granularity_bytes;   /* what sizes round up to */
  unsigned handle_types;      /* CUmemAllocationHandleType bits asked of cuMemCreate now */
  bool gpu_direct_rdma;       /* allocFlags.gpuDirectRDMACapable */
  size_t access_device_count; /* the device and its peers */
  size_t live_count;
  size_t live_bytes;          /* rounded sizes of live allocations */
  size_t peak_live_bytes;
  uint64_t create_count;      /* physical allocations made (cuMemCreate) */
  uint64_t release_count;     /* physical allocations given back (cuMemRelease) */
} gmr_cumem_resource_stats;

#define GMR_CUMEM_RESOURCE_STATS_INIT                                                              \
  {sizeof(gmr_cumem_resource_stats), GMR_CUMEM_RESOURCE_STATS_VERSION, 0, 0, 0, false, 0, 0, 0, 0, \
   0, 0}

/**
 * Fill *out with a snapshot of the resource's statistics (the caller set
 * size and version: GMR_CUMEM_RESOURCE_STATS_INIT; fields past `size` are left
 * alone).
 * Units: bytes, unless a field is named _count.
 * Ownership: *out is the caller's; nothing is kept.
 * Thread-safe: yes (a snapshot under the lock; frees in flight on other
 *   threads may not be counted yet).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  r or out is NULL, out->size is smaller than
 *                             the size+version header, or out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cumem_resource_get_stats(gmr_cumem_resource *r,
                                                              gmr_cumem_resource_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CUMEM_RESOURCE_H_ */
