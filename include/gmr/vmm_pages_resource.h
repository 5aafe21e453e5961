/*
 * gmr/vmm_pages_resource.h: `vmm_pages`, VPMM's page placement over CUDA's
 * virtual memory management: every request is whole pages, and
 * fragmentation is fought by double-mapping free physical pages at new
 * addresses instead of holding more memory (the seed's design, kept as its
 * reference and for its walkthrough). Type name "vmm_pages_resource"; spec
 * component `vmm_pages`. Its handle is the gmr_vmm_pool_resource of every
 * VMM resource (gmr/vmm_pool_resource.h: the config, statistics, regions;
 * gmr/vmm_pool_sleep.h: tags, sleep and wake), which
 * gmr_resource_find(r, "vmm_pool_resource") reaches under adaptors. `vmm`
 * (gmr/vmm_resource.h), 256-byte placement over shared pages, is the
 * recommended one (README, "Which stack").
 *
 * Physical pages are fungible; only virtual addresses fragment. The pool
 * backs the VA it reserves with physical pages of page_bytes, one physical
 * allocation (cuMemCreate) per page, so that any page can be mapped
 * anywhere. Every byte of reserved VA is in exactly one region:
 *   live    an allocation handed out (malloc_regions);
 *   free    mapped pages free for reuse, filed under the stream that freed
 *           them, with a CUDA event recorded there at the free
 *           (free_regions); adjacent free regions of one stream merge;
 *   hole    reserved, unmapped VA (unmapped_regions); adjacent holes merge;
 *   zombie  the old addresses of pages that were remapped elsewhere: still
 *           mapped (double-mapped) until the event that covers their last
 *           use completes, then unmapped and made a hole (zombie_regions);
 *   asleep  a live allocation whose pages were given back by
 *           gmr_vmm_pool_resource_sleep(); its addresses stay reserved.
 *
 * Allocation of `bytes` on stream S (rounded up to whole pages):
 *   phase 0  unmap the zombies whose events completed (they become holes);
 *   phase 1  no synchronisation: the smallest free region of S that fits
 *            (ties: the oldest free first); else the smallest free region of
 *            another stream whose event is known to have completed
 *            (cudaEventQuery), which then belongs to S;
 *   phase 2  defragmentation: take the hole that needs the fewest new bytes
 *            (a free region just before a hole is used in place, so the hole
 *            only adds to it), then fill the hole by double-mapping the pages
 *            of free regions (S's first, then other streams' oldest first;
 *            S waits on the GPU, with cudaStreamWaitEvent, for those whose
 *            events are pending: the host never blocks), taking a whole
 *            region when what it would leave behind is no larger than what
 *            is taken, and map new pages for the shortfall only (MinUse
 *            growth); the harvested old addresses become zombies. If no hole
 *            is large enough, another VA chunk is reserved.
 * A free records an event on its stream, files the region under the stream
 * and merges it with its free neighbours of the same stream; a region
 * record_stream named other streams for stays apart, reused only once their
 * events (recorded at the free) completed. A free whose event cannot be
 * made or recorded (cudaEventCreate, cudaEventRecord or cudaGetDevice
 * fails) waits for that stream on the host (cudaStreamSynchronize) instead,
 * and succeeds: the region is then free for any stream, nothing pending; if
 * even that fails, the region is the freeing stream's alone (stream order),
 * as after a free during a capture, until sleep or destroy synchronise the
 * device. Never a copy, never a host synchronisation on the allocation path
 * (docs/stream_ordering.md, "A free that cannot record"). Physical memory is
 * kept until trim (gmr_resource_trim), sleep or destroy; trim waits for the
 * events of free regions and zombies, unmaps their pages and releases the
 * physical memory to the device (cuMemRelease), so cudaMemGetInfo sees it
 * (memory the driver refuses to take back is kept: gmr/vmm_pool_resource.h,
 * "Refused releases"). With initial_pages > 0 that many pages are mapped at
 * create, as one free region of the default stream.
 *
 * Small requests (below one page) are not rounded up to a page: with
 * small_pool (the default) they take the small path, the 256-byte placement
 * engine that `vmm` is made of, whose memory is chunks of whole pages of
 * this pool (marked internal in the region list; a chunk is max(the
 * request, 12% of what the path holds) within 1..16 pages); the path
 * answers bad frees, record_stream and capture as `vmm` does. Alignment:
 * any power of two up to page_bytes, small requests included.
 *
 * Growth in place (gmr_resource_extend): a live allocation of whole pages
 * grows without moving when the addresses after it are a hole (new pages
 * are mapped there) or a free region usable on `stream` (taken, with a
 * GPU-side wait if it is another stream's and pending), or a free region
 * and then a hole. Otherwise GMR_ERR_UNSUPPORTED (also for a small block),
 * or GMR_ERR_OUT_OF_MEMORY when the device has no pages; nothing changes. A
 * sub-allocator over this pool grows its newest chunk so, adding no
 * fragmentation.
 *
 * Capture: defragmentation during a capture harvests only regions of the
 * capturing stream and regions whose events completed (no stream-ordered
 * call; gmr/vmm_pool_resource.h, "Capture").
 *
 * Statistics (gmr_vmm_pool_resource_get_stats): VPMM's figures, named after
 * its lists in the field comments; small_live_* count the small path's
 * blocks. Memory info: held = mapped pages, and refused ones; live = the
 * live allocations on them (whole pages, and the small path's blocks,
 * 256-byte rounded, in place of its chunks); free = free pages plus the
 * small path's free bytes; largest_free_block_bytes counts every free page,
 * since defragmentation can join them into one block.
 *
 * Source: VPMM (openvm's virtual memory pool memory manager: the regions,
 * phases, defragmentation by double mapping, MinUse growth, zombies and the
 * walkthrough its tests reproduce); CUDA's driver VMM API.
 * Thread-safe: yes (the pool's mutex; the small path has a spin lock, taken
 * before the mutex when both are). Create and destroy are not.
 */
#ifndef GMR_VMM_PAGES_RESOURCE_H_
#define GMR_VMM_PAGES_RESOURCE_H_

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"
#include "gmr/vmm_pool_resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Create a `vmm_pages` pool of device memory on `config->device` (see the
 * banner): it reserves virtual addresses, maps whole pages under each
 * request and moves free pages to where they are needed instead of holding
 * more. It reads the fields of the config that every VMM resource reads and
 * small_pool (growth_percent, remap_permille, handle_divisor,
 * shard_count, handle_floor_bytes and creator_thread_count are vmm's and
 * are ignored).
 *
 * Units: bytes; pages.
 * Ownership: `config` is copied (NULL: GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT).
 *   The caller owns *out and destroys it with gmr_resource_destroy()
 *   (gmr/vmm_pool_resource.h, "Destroy"; small blocks count as live).
 *   `failure` (may be NULL) receives the reason of a failure.
 * Thread-safe: yes (it creates an independent object).
 * Stream/device: queries the device (VMM support, granularity, peers, its
 *   total memory: cudaMemGetInfo),
 *   reserves the first VA chunk (cuMemAddressReserve) and maps
 *   initial_pages pages (cuMemCreate, cuMemMap, cuMemSetAccess); the
 *   caller's current device is restored. No synchronisation.
 * Source: VPMM (openvm); CUDA's cuda.h VMM API; ncclMemAlloc for
 *   nccl_ready.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out is NULL; a field of the config out of its
 *                             range (gmr/vmm_pool_resource.h, "Create"). The
 *                             message (failure may be NULL) says which and
 *                             the limit.
 *   GMR_ERR_UNSUPPORTED       the device has no VMM support, or a listed
 *                             peer cannot access it.
 *   GMR_ERR_OUT_OF_MEMORY     host memory, VA, or the initial pages (the
 *                             message names initial_pages, the pages asked
 *                             and how many the device has room for).
 *   GMR_ERR_CUDA              another CUDA failure (code in the record).
 * On failure *out is NULL, and everything the call reserved or mapped is
 * given back.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pages_resource_create(
    const gmr_vmm_pool_resource_config *config, gmr_vmm_pool_resource **out,
    gmr_failure *failure);

#ifdef __cplusplus
}
#endif

#endif /* GMR_VMM_PAGES_RESOURCE_H_ */
