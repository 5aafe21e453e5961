/*
 * gmr/tiers/numa_host_resource.h: a leaf resource of page-locked (pinned) host
 * memory whose pages are placed on one NUMA node: the upstream of a HOST
 * memory space's fixed-size blocks (gmr/tiers/memory_space.h).
 *
 * Each allocation is its own anonymous mapping (mmap), rounded up to whole
 * pages. Before any page is touched the range is bound to `numa_node` with
 * the mbind system call (MPOL_BIND, made through libc's syscall(); libnuma is
 * not needed); then cudaHostRegister pins it, which faults every page in on
 * that node. The device can read and write it at pinned-memory speed
 * (cudaMemcpyAsync is truly asynchronous). A free unregisters and unmaps.
 *
 * Where NUMA placement is not possible, memory is still handed out, pinned
 * but unplaced, and the stats say so:
 *  - a machine with one NUMA node (or no NUMA support in its kernel: no
 *    /sys/devices/system/node/online) has nothing to place: no mbind call is
 *    made and allocations count as placed;
 *  - mbind can be refused: ENOSYS (no such system call), EPERM (a container's
 *    seccomp profile forbids it; Docker's default allows it only with
 *    CAP_SYS_NICE). The allocation then counts as unplaced and
 *    `last_placement_errno` keeps the error.
 * Node numbers are those of /sys/devices/system/node/nodeN.
 *
 * Stream: a free synchronises the stream it names (the memory is unmapped at
 * once, so no queued copy may still read it); an allocation makes no
 * stream-ordered call. Not for use while a stream captures a CUDA graph
 * (cudaHostRegister is a synchronous CUDA call).
 *
 * Alignment: page size (4 KiB or more); a request for more returns
 * GMR_ERR_UNSUPPORTED.
 *
 * Bad frees: the resource keeps books of its live allocations and refuses a
 * bad free before unmapping anything, in gmr/resource.h's vocabulary
 * (GMR_ERR_UNKNOWN_POINTER, GMR_ERR_DOUBLE_FREE for a recent free,
 * GMR_ERR_FREE_MISMATCH for another size or alignment). A free whose
 * synchronisation or unregistration fails returns that CUDA failure and
 * leaves the allocation live.
 *
 * Source: cuCascade's numa_region_pinned_host_memory_resource (pinned host
 * memory per NUMA node for the HOST tier); mbind(2); cudaHostRegister
 * (cuda_runtime_api.h).
 *
 * Thread-safe: yes (atomics for the counters; mmap, mbind and CUDA calls are
 * thread-safe).
 */
#ifndef GMR_NUMA_HOST_RESOURCE_H_
#define GMR_NUMA_HOST_RESOURCE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_numa_host_resource_config {
  int numa_node; /* the node to place pages on; -1: no placement (first touch decides) */
  bool pin;      /* register with CUDA (cudaHostRegister); false: plain host pages */
} gmr_numa_host_resource_config;

#define GMR_NUMA_HOST_RESOURCE_CONFIG_DEFAULT {-1, true}

typedef struct gmr_numa_host_resource gmr_numa_host_resource;

/**
 * Create a leaf resource of pinned host memory whose pages are placed on
 * `config->numa_node`.
 * Units: none. Ownership: `config` is copied (NULL: the default); the caller
 *   destroys *out with gmr_resource_destroy() (GMR_ERR_BUSY while
 *   allocations are live, changing nothing).
 * Thread-safe: yes (it creates an independent object).
 * Stream/device: no CUDA call; reads /sys. Allocations call
 *   cudaHostRegister later (with pin).
 * Source: cuCascade's numa_region_pinned_host_memory_resource; mbind(2).
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out NULL, or numa_node is below -1 or not an
 *                             online node of this machine (node 0 always
 *                             exists).
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the resource.
 * On failure *out is NULL (when out is not NULL) and nothing needs to be
 * destroyed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_numa_host_resource_create(
    const gmr_numa_host_resource_config *config, gmr_numa_host_resource **out);

/**
 * The gmr_numa_host_resource's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `r`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_numa_host_resource_as_resource(gmr_numa_host_resource *r) {
  return (gmr_resource *)(void *)r;
}

/**
 * The gmr_numa_host_resource behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "numa_host_resource") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_numa_host_resource *gmr_numa_host_resource_from_resource(gmr_resource *r) {
  return (gmr_numa_host_resource *)gmr_resource_downcast(r, "numa_host_resource");
}

/**
 * Number of NUMA nodes online on this machine (1 without NUMA) and the
 * highest node number, read from /sys/devices/system/node/online. Either
 * out pointer may be NULL.
 * Units: counts and node numbers.
 * Thread-safe: yes (reads a file each call). Stream/device: no CUDA call.
 * Returns GMR_OK: it never fails (an unreadable file means one node, 0), so
 * there is no failure state.
 */
GMR_API GMR_NODISCARD gmr_status gmr_numa_host_resource_get_node_count(int *out_count,
                                                                       int *out_max_node);

/**
 * MemTotal of NUMA node `node` in bytes (its
 * /sys/devices/system/node/nodeN/meminfo), or 0 when the machine does not
 * say (no such node, no NUMA support, a negative node).
 * Thread-safe: yes (reads a file each call). Stream/device: no CUDA call.
 */
GMR_API size_t gmr_numa_host_resource_get_node_memory_bytes(int node);

/* Counters; the caller sets size and version. */
typedef struct gmr_numa_host_resource_stats {
  size_t size;
  uint32_t version;
  int numa_node;              /* as configured (-1: none) */
  bool numa_machine;          /* the machine has more than one node online */
  size_t held_bytes;          /* mapped now (whole pages) */
  size_t peak_held_bytes;
  size_t live_count;          /* live allocations */
  uint64_t placed_count;      /* allocations bound to the node (or nothing to place) */
  uint64_t unplaced_count;    /* allocations whose mbind was refused */
  int last_placement_errno;   /* errno of the last refused mbind, 0 if none */
} gmr_numa_host_resource_stats;

#define GMR_NUMA_HOST_RESOURCE_STATS_VERSION 1u
#define GMR_NUMA_HOST_RESOURCE_STATS_INIT                                                    \
  {sizeof(gmr_numa_host_resource_stats), GMR_NUMA_HOST_RESOURCE_STATS_VERSION, 0, false, 0, \
   0, 0, 0, 0, 0}

/**
 * Fill *out with the resource's counters (the caller set size and version:
 * GMR_NUMA_HOST_RESOURCE_STATS_INIT; fields past `size` are left alone).
 * Units: bytes, unless a field is named _count.
 * Thread-safe: yes (atomics read one by one: two counters may disagree by
 *   a call in flight). Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  r or out is NULL, out->size is smaller than
 *                             the size+version header, or out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_numa_host_resource_get_stats(
    const gmr_numa_host_resource *r, gmr_numa_host_resource_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_NUMA_HOST_RESOURCE_H_ */
