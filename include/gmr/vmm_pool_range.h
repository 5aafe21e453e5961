/*
 * gmr/vmm_pool_range.h: reserve now, commit later: a range of device
 * addresses reserved in a VMM pool (gmr/vmm_pool_resource.h: vmm or
 * vmm_pages) whose physical memory is committed and decommitted page by
 * page at the same addresses, for a KV cache sized after the CUDA graphs are
 * captured: reserve the largest cache, commit a little, capture the graphs
 * (they keep the range's addresses), measure what they took, then commit
 * the final size at the same addresses: the graphs stay valid (vLLM's
 * extensible KV cache, vllm#47363, answering vllm#26300; SGLang's
 * post-capture KV sizing does the same).
 *
 * A range is reserved with a page size (its own, or the pool's page), a
 * multiple of the device's VMM granularity. Each committed page is one
 * physical allocation of that size (cuMemCreate), mapped at its page
 * (cuMemMap needs a whole physical allocation at offset 0, and cuMemUnmap
 * unmaps whole mappings): so commit and decommit work on whole pages and
 * never on part of a physical allocation, and decommitting any page gives
 * exactly that page back. Larger pages make fewer driver calls per byte
 * (a commit of 1 GiB in 2 MiB pages is 512 creates and maps) but a coarser
 * granularity; the access of a run of pages committed together is set by
 * one cuMemSetAccess.
 *
 * The range's memory is the pool's but no allocation of the pool's stack:
 * adaptors above the pool (limiting, tracking) and the pool's footprint do
 * not count it; the pool's statistics do (range_* fields of
 * gmr_vmm_pool_resource_stats). Its tag (the pool's default tag when it was
 * reserved, or gmr_vmm_pool_resource_set_tag() on its first address)
 * applies to every committed page: sleep backs them up, keeps or discards
 * them as it does allocations of that tag, and wake maps them again at the
 * same addresses (gmr/vmm_pool_sleep.h). While the pool is asleep a range
 * can be reserved, queried and freed, but not committed or decommitted
 * (GMR_ERR_BUSY), and the pool cannot be destroyed while a range is
 * reserved (GMR_ERR_BUSY).
 *
 * Never unmapped under running work: decommit and free synchronise the
 * device before they unmap (work on any stream that may still use the
 * pages finishes first), as sleep does; a capture refuses that
 * synchronisation (GMR_ERR_CAPTURE_UNSAFE, and the driver invalidates that
 * capture): decommit outside captures. Commit may run during a capture
 * (the thread is switched to relaxed capture mode around its driver calls).
 *
 * Thread-safe: yes: every call takes the pool's mutex (a sleep waits for a
 * commit in progress and the other way round). No work may use a page
 * after its decommit returns, nor before its commit returns.
 * Source: CUDA's driver VMM API (cuMemAddressReserve, cuMemCreate,
 * cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease, cuMemAddressFree);
 * vLLM's extensible KV cache (vllm#47363, vllm#50779).
 */
#ifndef GMR_VMM_POOL_RANGE_H_
#define GMR_VMM_POOL_RANGE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"
/* gmr_vmm_pool_resource (that header includes this one through
 * gmr/vmm_pool_sleep.h at its end). */
#include "gmr/vmm_pool_resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Reserve `bytes` of device addresses in the pool as a range of pages of
 * `page_bytes`, none committed; *out_base receives its first address
 * (aligned to the page). The range takes the pool's default tag.
 * Units: bytes (rounded up to a whole page). page_bytes 0: the pool's page
 *   (gmr_vmm_pool_resource_stats.page_bytes); else a power of two and a
 *   multiple of the device's VMM granularity.
 * Ownership: the range is the pool's until gmr_vmm_pool_resource_free_range;
 *   `failure` (may be NULL) receives the reason of a failure.
 * Thread-safe: yes (under the pool's mutex; allowed while asleep).
 * Stream/device: reserves addresses (cuMemAddressReserve) on the pool's
 *   device, made current around the call; no stream-ordered work.
 * Source: cuMemAddressReserve (CUDA's driver API); the reservation of
 *   vLLM's extensible KV cache.
 * Returns:
 *   GMR_OK                    reserved.
 *   GMR_ERR_INVALID_ARGUMENT  pool or out_base is NULL, bytes is 0, or
 *                             page_bytes is not a power of two and a
 *                             multiple of the granularity (the message
 *                             says which).
 *   GMR_ERR_OUT_OF_MEMORY     the driver has no addresses (or the host no
 *                             memory) for the range.
 *   GMR_ERR_CUDA              another driver failure (the message names
 *                             the call).
 * On failure nothing is reserved and *out_base is NULL.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_reserve_range(
    gmr_vmm_pool_resource *pool, size_t bytes, size_t page_bytes, void **out_base,
    gmr_failure *failure);

/**
 * Commit physical memory under every page of [addr, addr + bytes) that is
 * not committed yet: one physical allocation per page, mapped there with
 * read-write access for the pool's device and its peers. Pages committed
 * already stay as they are, contents included (so "commit the final size"
 * is one call over the whole prefix); new pages' contents are undefined.
 * bytes 0 commits nothing.
 * Units: bytes; addr and bytes multiples of the range's page (addr inside a
 *   range of this pool).
 * Ownership: the memory is the range's. `failure` (may be NULL) receives
 *   the reason of a failure.
 * Thread-safe: yes (under the pool's mutex: a sleep called meanwhile waits
 *   for the commit, and sees all of it).
 * Stream/device: creates, maps and gives access (cuMemCreate, cuMemMap,
 *   cuMemSetAccess) on the pool's device, made current, with the thread in
 *   relaxed capture mode (allowed during a capture); no stream-ordered
 *   work: no kernel may touch a page before this call returns.
 * Source: cuMemCreate, cuMemMap, cuMemSetAccess (CUDA's driver API);
 *   extend_kv_cache of vLLM's extensible KV cache.
 * Returns:
 *   GMR_OK                    every page of the span is committed.
 *   GMR_ERR_INVALID_ARGUMENT  pool is NULL; addr or bytes is not a multiple
 *                             of the range's page; the span ends past the
 *                             range (the message gives both ends).
 *   GMR_ERR_UNKNOWN_POINTER   addr is in no range of this pool.
 *   GMR_ERR_BUSY              the pool is asleep: wake it first.
 *   GMR_ERR_OUT_OF_MEMORY     the device has no room for the new pages
 *                             (cuMemCreate; the message says how much was
 *                             asked and how much the range holds), or the
 *                             host none for the books.
 *   GMR_ERR_CAPTURE_UNSAFE    a capture refused a driver call.
 *   GMR_ERR_CUDA              another driver failure (the message names
 *                             the call).
 * On failure nothing changed: every page this call committed is unmapped
 * and released again (a release the driver refuses keeps the memory,
 * counted in range_mapped_bytes, asked again by the next commit, decommit,
 * sleep, wake or free of a range).
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_commit(gmr_vmm_pool_resource *pool,
                                                              void *addr, size_t bytes,
                                                              gmr_failure *failure);

/**
 * Give back the physical memory of every page of [addr, addr + bytes),
 * each of which must be committed; the addresses stay reserved (commit them
 * again later, at the same addresses: the contents are then undefined).
 * The device is synchronised first, so no work still running on any stream
 * uses a page when it is unmapped. bytes 0 decommits nothing.
 * Units: bytes; addr and bytes multiples of the range's page.
 * Ownership: `failure` (may be NULL) receives the reason of a failure.
 * Thread-safe: yes (under the pool's mutex).
 * Stream/device: synchronises the device (cudaDeviceSynchronize), then
 *   unmaps and releases each page (cuMemUnmap, cuMemRelease), the pool's
 *   device current; not during a capture (the synchronisation is refused:
 *   GMR_ERR_CAPTURE_UNSAFE, and the driver invalidates that capture).
 * Source: cuMemUnmap, cuMemRelease (CUDA's driver API); vllm#43020 and
 *   vllm#45615 (unmap only after the work that uses the memory is done).
 * Returns:
 *   GMR_OK                    decommitted.
 *   GMR_ERR_INVALID_ARGUMENT  pool is NULL; addr or bytes not a multiple of
 *                             the page; the span ends past the range; a
 *                             page of the span is not committed (the
 *                             message gives its address).
 *   GMR_ERR_UNKNOWN_POINTER   addr is in no range of this pool.
 *   GMR_ERR_BUSY              the pool is asleep: wake it first.
 *   GMR_ERR_CAPTURE_UNSAFE    a capture refused the synchronisation.
 *   GMR_ERR_CUDA              a driver call failed (the message names it);
 *                             also a cuMemRelease refused after the pages
 *                             were unmapped: then the decommit is done all
 *                             the same (the message says "decommitted all
 *                             the same") and the memory is kept, counted,
 *                             and released by a later call.
 * On failure nothing changed (every page of the span committed and mapped,
 * contents intact), but after "decommitted all the same".
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_decommit(gmr_vmm_pool_resource *pool,
                                                                void *addr, size_t bytes,
                                                                gmr_failure *failure);

#define GMR_VMM_POOL_RANGE_INFO_VERSION 1u

/* What a range holds, in bytes. */
typedef struct gmr_vmm_pool_range_info {
  size_t size;                 /* sizeof as the caller knows it */
  uint32_t version;            /* GMR_VMM_POOL_RANGE_INFO_VERSION as the caller knows it */
  void *base;                  /* the range's first address */
  size_t reserved_bytes;       /* the whole range */
  size_t page_bytes;           /* its page: one physical allocation each */
  size_t committed_bytes;      /* committed pages, awake or asleep */
  size_t span_committed_bytes; /* of those, the ones in the span asked about */
  uint32_t tag;
  bool asleep;                 /* its committed pages sleep (unmapped) */
  bool saved;                  /* asleep with a backup of their contents */
} gmr_vmm_pool_range_info;

#define GMR_VMM_POOL_RANGE_INFO_INIT \
  {sizeof(gmr_vmm_pool_range_info), GMR_VMM_POOL_RANGE_INFO_VERSION, NULL, 0, 0, 0, 0, 0, false, \
   false}

/**
 * Describe the range that holds `addr` and what of [addr, addr + bytes)
 * (clipped to the range; bytes 0: nothing) is committed.
 * Units: bytes. Ownership: *out is the caller's (size and version set:
 *   GMR_VMM_POOL_RANGE_INFO_INIT; fields past `size` are left alone).
 * Thread-safe: yes (a snapshot under the pool's mutex).
 * Stream/device: no CUDA call.
 * Source: what vLLM's extensible KV cache needs to know before it extends
 *   (vllm#50779); gmr's books, no driver query.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  pool or out is NULL, out->size is smaller
 *                             than version 1's struct, or out->version is 0.
 *   GMR_ERR_UNKNOWN_POINTER   addr is in no range of this pool.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_get_range_info(
    gmr_vmm_pool_resource *pool, const void *addr, size_t bytes, gmr_vmm_pool_range_info *out);

/**
 * Free the range whose first address is `base`: decommit every committed
 * page (the device synchronised first), drop the backup of an asleep range,
 * and give the addresses back (cuMemAddressFree).
 * Units: none. Ownership: the range is gone after GMR_OK; `failure` (may be
 *   NULL) receives the reason of a failure.
 * Thread-safe: yes (under the pool's mutex; allowed while asleep).
 * Stream/device: synchronises the device when pages are mapped
 *   (cudaDeviceSynchronize), unmaps and releases them (cuMemUnmap,
 *   cuMemRelease), frees a pinned backup (cudaFreeHost), frees the
 *   addresses (cuMemAddressFree); not during a capture.
 * Source: cuMemAddressFree (CUDA's driver API).
 * Returns:
 *   GMR_OK                    freed.
 *   GMR_ERR_INVALID_ARGUMENT  pool is NULL.
 *   GMR_ERR_UNKNOWN_POINTER   base is not the first address of a range of
 *                             this pool (a second free of it included).
 *   GMR_ERR_CAPTURE_UNSAFE    a capture refused the synchronisation.
 *   GMR_ERR_CUDA              a driver call failed (the message names it),
 *                             or the free is done all the same (below).
 * On failure the range is as it was (a refused unmap maps back what this
 * call unmapped); but a cuMemRelease or cuMemAddressFree refused after the
 * pages were unmapped leaves the range gone all the same (GMR_ERR_CUDA,
 * "freed all the same"): the memory or the addresses the driver refused
 * are kept, counted (range_unreleased_bytes, range_reserved_bytes), and
 * asked again by later commits, decommits, frees, sleeps, wakes and
 * destroy.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_free_range(gmr_vmm_pool_resource *pool,
                                                                  void *base,
                                                                  gmr_failure *failure);

#ifdef __cplusplus
}
#endif

#endif /* GMR_VMM_POOL_RANGE_H_ */
