/*
 * gmr/vmm_pool_resource.h: a pool of device memory built on CUDA's virtual
 * memory management (VMM), that fights fragmentation by remapping physical
 * pages to new addresses instead of holding more memory: VPMM's design
 * (placement=pages, the default), and fine placement (placement=fine, the
 * spec component and replay alias `vmm`), described after it.
 *
 * Physical pages are fungible; only virtual addresses fragment. The pool
 * reserves device virtual addresses (VA) in large chunks (va_chunk_bytes,
 * more chunks on demand) and backs them with physical pages of page_bytes
 * (a multiple of the device's VMM granularity, 2 MiB by default), one
 * physical allocation (cuMemCreate) per page, so that any page can be mapped
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
 * (memory the driver refuses to take back is kept: see "Refused releases").
 * With initial_pages > 0 that many pages are mapped at create, as one free
 * region of the default stream.
 *
 * Small requests (below one page) are not rounded up to a page: with
 * small_pool (the default) they take the small path, a fine placement
 * engine (below) whose memory is chunks of whole pages of this pool (marked
 * internal in the region list; a chunk is max(the request, 12% of what the
 * path holds) within 1..16 pages), placed at 256-byte granularity; the path
 * answers bad frees, record_stream and capture like fine placement.
 * Alignment: any power of two up to page_bytes, small requests included.
 *
 * Fine placement (placement=fine): requests are placed at 256-byte
 * granularity, and pages are shared by whatever is live on them, so no
 * request is rounded up to a page and no small path is needed. Regions are
 * live, free (all their pages mapped; filed per stream in a two-level
 * segregated-fit index, O(1)), holes (whole unmapped pages) and asleep.
 * Physical memory comes in handles (one cuMemCreate each), each mapped whole
 * at one place: CUDA 13.0's cuMemMap takes no offset into a handle and
 * cuMemUnmap only unmaps whole mappings, so memory moves by whole handles.
 * allocate(stream T):
 *   1. the best fit among T's free regions and the shared ones (those whose
 *      stream's work is known done): no CUDA call, the whole path once warm;
 *   2. other streams' free memory whose work is done (their events queried;
 *      a default stream's recorded first) becomes shared;
 *   3. a stream whose work is pending and has a fitting region: T waits for
 *      it on the GPU (cudaStreamWaitEvent) and takes its free regions;
 *   4. the run of free regions and holes that needs the fewest pages mapped
 *      (then the tightest, then the lowest address) gets its holes mapped:
 *      with handles moved from wholly free, shared memory (unmapped there,
 *      mapped here: one cuMemUnmap and one cuMemMap each) when holding more
 *      would pass remap_permille thousandths above the peak of live bytes (or
 *      the device
 *      is out of memory), else with new handles (cuMemCreate + cuMemMap, at
 *      most held / handle_divisor each), plus a free tail of growth_percent
 *      of what is held (never past the remap threshold); one cuMemSetAccess
 *      per hole. When the live peak has not grown since memory last moved,
 *      the pool holds up to 1% of that peak more instead of moving again,
 *      and every eighth move made all the same doubles that allowance (at
 *      most 32%), so that a program that repeats settles with no driver
 *      call (four streams trading random-sized buffers: within three
 *      passes of the bundled multistream trace).
 * A free files the region under its stream and merges it with free
 * neighbours of that stream or shared ones (O(1)). A region record_stream
 * named other streams for waits apart until their events, recorded at the
 * free, completed; each allocation first files back those that did (event
 * queries while any wait), so the freeing stream's next request of that
 * size gets the memory back, PyTorch's reuse. On a stream the program
 * created (unless streams_outlive_resource) a free records that stream's
 * event inside the call (the stream may be destroyed after it): at every
 * free while the shard (see "Threads") serves other streams too (RMM's
 * rule); while the stream is alone in its shard only at its first four
 * frees and when another stream asked for its memory (gmr's pool's
 * on-demand rule: a warm pair makes no CUDA call, so threads do not meet in
 * the driver's lock). Memory whose frees no record covers reaches other
 * streams through one cudaDeviceSynchronize, made only when it holds a
 * fitting region that would spare a growth, before a growth (outside a
 * capture) that would pass the remap threshold while streams hold free
 * memory (so that memory the host freed ahead of the GPU can move instead),
 * and at trim. Before a record
 * that covers such frees the stream's id is checked (cudaStreamGetId after
 * cudaStreamGetCaptureInfo, never on a capturing stream): a new stream that
 * got a destroyed stream's handle does not take the destroyed one's memory
 * in stream order. On a default stream the event is recorded only when
 * another stream wants the memory. trim gives back every handle that lies
 * wholly in free memory whose work is done (waiting for it with the host,
 * or with one device synchronisation). On the
 * bundled traces replayed on the simulation the peak held is within 3% of
 * the peak of live bytes, and repeating passes make no driver call (tests in
 * tests/vmm/vmm_pool_stack_test.cc; multistream, whose sixteen random-sized
 * buffers on four streams leave free bytes that no 2 MiB page holds whole,
 * needs about 12% and moves memory every pass).
 * Statistics in fine placement: mapped_bytes is the physical memory held,
 * page_create_count counts cuMemCreate calls (a handle may be many pages),
 * defrag_count the slow paths that moved handles and remapped_page_count the
 * pages they moved; small_live_* and zombie_* stay 0.

 * Growth in place (gmr_resource_extend, the vtable's extend slot): a live allocation
 * of whole pages grows without moving when the addresses after it are a
 * hole (new pages are mapped there) or a free region usable on `stream`
 * (taken, with a GPU-side wait if it is another stream's and pending), or a
 * free region and then a hole. Otherwise GMR_ERR_UNSUPPORTED, or
 * GMR_ERR_OUT_OF_MEMORY when the device has no pages; nothing changes. A
 * sub-allocator over this pool grows its newest chunk so, adding no
 * fragmentation.
 *
 * Capture: allocation and extend are capture-safe (the vtable's
 * allocate_capturing slot, gmr_resource_allocate_capturing(); a plain gmr_resource_allocate()
 * on a capturing stream takes the same path): the calling thread is switched
 * to relaxed capture mode around page mapping and event queries, and no
 * stream-ordered call is made (no event record, no stream wait), so
 * defragmentation during capture harvests only regions of the capturing
 * stream and regions whose events completed. A free on a capturing stream
 * records nothing: the region is then reusable only by that stream, and
 * trim skips it. Small requests and fine placement follow the same rules: a
 * request during a capture uses the capturing stream's and shared free
 * memory, other streams' memory whose recorded work is done (queries), and
 * maps pages (new or moved) in relaxed mode; nothing is recorded or waited
 * for. Capture-time frees are recorded on that stream at its next free, or
 * at its next allocation that misses, outside a capture. (On an H100 with
 * driver 580 the VMM calls alone keep a global-mode capture valid, but
 * cudaEventQuery invalidates it: relaxed mode is for the queries, and costs
 * two calls per slow path, only during a capture.)
 *
 * Sleep and wake (what inference servers do between workloads: vLLM's
 * sleep mode, torch_memory_saver): tags, gmr_vmm_pool_resource_sleep() and
 * gmr_vmm_pool_resource_wake() give the physical memory of live
 * allocations back while keeping their addresses, and map it again, in
 * both placements; gmr/vmm_pool_sleep.h (included below) declares them
 * and says what happens to each kind of memory.
 *
 * Peers: peer_access gives other devices read-write access to every mapped
 * page (cuMemSetAccess per mapping; cudaDeviceEnablePeerAccess does not cover
 * VMM memory). NCCL: nccl_ready creates pages the way ncclMemAlloc does
 * (export handle type POSIX file descriptor, plus fabric where the device
 * supports it, retried without fabric if the driver refuses it; GPUDirect
 * RDMA where the device supports it with VMM; the recommended granularity),
 * so NCCL can register (cuMemRetainAllocationHandle) and export the memory.
 * The pool never calls cuMulticast*.
 *
 * Statuses of gmr_resource_allocate(): GMR_ERR_OUT_OF_MEMORY (cuMemCreate said so,
 * with the driver's code in the failure record, or host memory ran out; the
 * record also carries the pool's free bytes); GMR_ERR_CUDA (any other driver
 * failure, with its CUresult and name); GMR_ERR_UNSUPPORTED (alignment above
 * the page); GMR_ERR_BUSY (asleep); GMR_ERR_CAPTURE_UNSAFE. On any failure
 * the pool's regions, pages and reservations are exactly as before.
 * gmr_resource_deallocate(): GMR_ERR_UNKNOWN_POINTER (not the start of a live
 * allocation), GMR_ERR_DOUBLE_FREE (an allocation start already freed),
 * GMR_ERR_FREE_MISMATCH (bytes or alignment other than those asked for at
 * allocation: the pool keeps both per allocation, so 999 bytes for a
 * 1,000-byte allocation is refused although both round to the same pages or
 * 256-byte units), GMR_ERR_CUDA (a stream record_stream named could be
 * neither recorded on nor waited for; a failed record alone is absorbed, as
 * above): nothing is released. The same for small blocks and fine placement
 * (a whole-page allocation freed with a small size, or a small block freed
 * with a page or more, is GMR_ERR_FREE_MISMATCH; their record_stream events
 * fall back to host waits the same way; a failed record of the freeing
 * stream's own event leaves its frees uncovered, reached by others through
 * a device synchronisation), and an address freed long ago
 * (more than twice as many freed addresses as live allocations since) may
 * read as GMR_ERR_UNKNOWN_POINTER rather than GMR_ERR_DOUBLE_FREE. Extend
 * names the allocation the same way (its `bytes` and alignment as asked, or
 * as the last extend set them). Destroy with live
 * (or asleep) allocations is GMR_ERR_BUSY; destroy synchronises the device
 * first.
 *
 * Refused releases: a physical allocation whose cuMemRelease the driver
 * refuses (at trim, sleep, destroy, or the undo of a failed call) is never
 * forgotten: unmapped, it is kept and still counted as held (footprint,
 * memory info's held_bytes, the statistics' mapped_bytes, with
 * unreleased_bytes and unreleased_handle_count saying how much), and so is
 * a pinned host copy whose cudaFreeHost is refused (at a wake, or at the
 * free of an asleep allocation, which still succeeds: unfreed_host_bytes,
 * unfreed_host_count). Every later trim, sleep, wake and destroy asks the
 * driver again first. gmr_resource_trim(): GMR_ERR_CUDA while the driver
 * still refuses what it kept (then nothing more is given back), or when it
 * refuses a release during the trim (that memory's addresses are a hole,
 * the memory is kept, the trim stops); *released_bytes counts only memory
 * that went back to the device. Sleep and wake that are done all the same
 * say GMR_ERR_CUDA (gmr/vmm_pool_sleep.h). Destroy asks first and, while
 * the driver still refuses, returns GMR_ERR_CUDA having changed nothing; a
 * release (or cudaEventDestroy) refused later in the destroy stops it with
 * GMR_ERR_CUDA, the pool valid, the memory (or event) kept, and a later
 * destroy goes on. Only a destroy that returns GMR_OK has given everything
 * back.
 *
 * Memory info (gmr_resource_get_memory_info, and the failure record of a
 * failed allocation): held = mapped pages, and refused ones (above); live =
 * the live allocations on them (whole pages, and the small path's blocks,
 * 256-byte rounded, in place of its chunks); free = free pages plus the
 * small path's free bytes; largest_free_block_bytes counts every free page,
 * since defragmentation can join them into one block. Fine placement: held
 * = the handles (refused ones too), live = the live allocations, free = free
 * regions, largest = the largest free region. Asleep allocations lie on no
 * memory: in either placement they count in neither held nor live (nor do
 * the small path's blocks, live or free, in a chunk that sleeps), so that
 * live + free <= held.
 *
 * Device: the pool belongs to the device it was created for and makes it
 * current around its CUDA calls. Streams: RMM's semantics (gmr/resource.h);
 * a stream may be destroyed as soon as the call that named it returns
 * (events are recorded, queried or waited on only inside calls that name
 * the stream); a new stream that reuses the handle's address inherits
 * same-stream reuse of the last frees without ordering, as in RMM and
 * PyTorch (docs/stream_ordering.md says when the id is checked).
 *
 * Source: VPMM (openvm's virtual memory pool memory manager: the regions,
 * phases, defragmentation by double mapping, MinUse growth, zombies and the
 * walkthrough its tests reproduce); CUDA's driver API (cuda.h, VMM section);
 * PyTorch's expandable segments (pages mapped under what is live) and
 * record_stream; RMM's pool and gmr's pool_resource (per-stream free lists,
 * lazy events, TLSF); ncclMemAlloc (NCCL's src/allocator.cc) for the
 * NCCL-ready properties; vLLM's sleep mode and torch_memory_saver for sleep
 * and wake.
 *
 * Threads: FINE placement is sharded. It keeps shard_count independent
 * engines (each its own spin lock, VA chunks, physical handles and free
 * lists; created at a shard's first use). A stream is served by the home
 * shard of the first thread that used it, and every thread that uses it
 * later goes there too: threads on streams of their own take no lock
 * another thread takes and write no cache line another thread writes on a
 * warm allocation and free; threads that share a stream (PyTorch's forward
 * and autograd threads) share one shard's memory. A free goes to the shard
 * that owns the pointer, whatever the stream (the stream's shard is asked
 * first). Before a shard grows it takes free memory another shard holds
 * for the same stream or for any stream (no CUDA call); when a growth
 * finds the device out of memory, the other shards serve the request or
 * give back their wholly free memory and the growth is tried once more.
 * Memory of one shard is not remapped into another, so a program whose
 * threads each use streams of their own holds up to a growth per shard
 * more than with one shard (shard_count = 1 for the least footprint). The
 * trim, sleep, wake, statistics and debug functions act on every shard;
 * statistics are the sums (peak_mapped_bytes is the pool's own high-water
 * mark), each shard read under its lock.
 *
 * Thread-safe: yes (internal mutex; the small path and each shard of fine
 * placement have a spin lock, taken before the mutex when both are). Create
 * and destroy are not.
 */
#ifndef GMR_VMM_POOL_RESOURCE_H_
#define GMR_VMM_POOL_RESOURCE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_vmm_pool_resource gmr_vmm_pool_resource;

/* Most peer devices peer_access may name. */
#define GMR_VMM_POOL_MAX_PEERS 16

/* Most shards of FINE placement (shard_count). */
#define GMR_VMM_POOL_MAX_SHARDS 64

typedef enum gmr_vmm_pool_peer_access {
  GMR_VMM_POOL_PEERS_NONE = 0, /* only the pool's device */
  GMR_VMM_POOL_PEERS_ALL = 1,  /* every other device that can access this one */
  GMR_VMM_POOL_PEERS_LIST = 2  /* the devices in peers[0..peer_count) */
} gmr_vmm_pool_peer_access;

/* Where allocations go in the pool's virtual addresses. */
typedef enum gmr_vmm_pool_placement {
  /* VPMM: every request is whole pages, placed and defragmented as in the
   * banner's phases 0-2; requests below a page take the small path. */
  GMR_VMM_POOL_PLACEMENT_PAGES = 0,
  /* 256-byte placement over shared pages (see "Fine placement" above). */
  GMR_VMM_POOL_PLACEMENT_FINE = 1
} gmr_vmm_pool_placement;

/* remap_permille: never move free memory to save memory (only when the
 * device is out of it). */
#define GMR_VMM_POOL_REMAP_NEVER UINT32_MAX

typedef struct gmr_vmm_pool_resource_config {
  /* Device ordinal, or GMR_VMM_POOL_CURRENT_DEVICE (the current one at create). */
  int device;
  /* Bytes per page: a multiple of the VMM granularity (CUDA's minimum, or
   * the recommended one with nccl_ready). 0: 2 MiB, or the granularity if
   * it is larger. */
  size_t page_bytes;
  /* VA reserved per chunk. 0: the device's total memory, rounded up to the
   * page. A request larger than this reserves a chunk of its own size. */
  size_t va_chunk_bytes;
  /* Pages mapped at create as one free region (VPMM's eager pages). */
  size_t initial_pages;
  /* PAGES placement: serve requests below one page from the small path
   * (256-byte placement in chunks of this pool's pages) instead of rounding
   * them up to a page. FINE placement needs no small path (ignored). */
  bool small_pool;
  gmr_vmm_pool_peer_access peer_access;
  int peers[GMR_VMM_POOL_MAX_PEERS]; /* PEERS_LIST: device ordinals */
  size_t peer_count;
  /* Create pages as ncclMemAlloc does (see the banner). */
  bool nccl_ready;
  /* PAGES (VPMM, the default) or FINE. */
  gmr_vmm_pool_placement placement;
  /* FINE: a growth maps this percentage of what the pool holds (at least
   * the request) in one go, the rest as a free tail: fewer, larger growths.
   * Never past the remap threshold. 0: exactly what the request needs. */
  uint32_t growth_percent;
  /* FINE: before holding more than this many thousandths above the peak of
   * live bytes (at most 10000), move free physical memory (whole handles) to
   * where it is needed instead of creating more. GMR_VMM_POOL_REMAP_NEVER:
   * only when the device is out of memory. */
  uint32_t remap_permille;
  /* FINE: new physical allocations (cuMemCreate) are at most 1/handle_divisor
   * of what the pool holds (at least a page), so that free memory can later
   * move in pieces of that size. 0: one allocation per growth. */
  uint32_t handle_divisor;
  /* The program keeps every stream it passes to the pool alive until the pool
   * is destroyed: then a free records nothing (a stream that wants another
   * stream's memory records that stream's event once). false: the stream
   * may be destroyed right after the call; a free on a stream other than
   * the default streams records an event on it inside the call: at once
   * (RMM's rule) in PAGES placement's whole pages, and in FINE placement
   * and the small path when another stream shares the engine, else on
   * demand (see "Fine placement"). */
  bool streams_outlive_resource;
  /* FINE: independent engines that threads are spread over (see
   * "Threads"), at most GMR_VMM_POOL_MAX_SHARDS. 0: one per CPU (at most
   * 16); 1: one engine and one lock for every thread (least footprint). */
  uint32_t shard_count;
} gmr_vmm_pool_resource_config;

#define GMR_VMM_POOL_CURRENT_DEVICE (-1)

/* Current device, 2 MiB pages, VA chunks of the device's size, nothing
 * mapped at create, small requests pooled, no peers, not NCCL-ready, PAGES
 * placement; for FINE: growth 25%, memory moved above 1.5% over the live
 * peak, handles of at most 1/128 of what is held, one shard per CPU (at
 * most 16); streams may be destroyed after a free. */
#define GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT                                                    \
  {GMR_VMM_POOL_CURRENT_DEVICE, 0, 0, 0, true, GMR_VMM_POOL_PEERS_NONE, {0}, 0, false,          \
   GMR_VMM_POOL_PLACEMENT_PAGES, 25u, 15u, 128u, false, 0u}

/**
 * Create a pool of device memory on `config->device` that maps physical
 * pages (or handles) under virtual addresses it reserves, and moves free
 * physical memory to where it is needed instead of holding more (see the
 * banner for both placements).
 *
 * Units: bytes; pages.
 * Ownership: `config` is copied (NULL: the default). The caller owns *out
 *   and destroys it with gmr_resource_destroy(): GMR_ERR_BUSY while an
 *   allocation is live or asleep (small blocks included); otherwise it
 *   synchronises the device, asks the driver again for what it refused
 *   before (while it still refuses: GMR_ERR_CUDA, nothing changed), unmaps
 *   and releases every page and gives the VA back; a refused driver call
 *   stops it with GMR_ERR_CUDA, the pool still valid and what was refused
 *   kept (a later destroy continues; see "Refused releases"). `failure`
 *   (may be NULL)
 *   receives the reason of a failure.
 * Thread-safe: yes (it creates an independent object).
 * Stream/device: queries the device (VMM support, granularity, peers),
 *   reserves the first VA chunk (cuMemAddressReserve) and maps
 *   initial_pages pages (cuMemCreate, cuMemMap, cuMemSetAccess); the
 *   caller's current device is restored. No synchronisation.
 * Source: VPMM (openvm); CUDA's cuda.h VMM API; ncclMemAlloc for
 *   nccl_ready.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out is NULL; the device does not exist;
 *                             page_bytes is not a multiple of the
 *                             granularity; va_chunk_bytes is not a multiple
 *                             of page_bytes; peer_count above
 *                             GMR_VMM_POOL_MAX_PEERS, or a listed peer that
 *                             does not exist or is the pool's device; an
 *                             unknown peer_access or placement;
 *                             growth_percent above 1000 or remap_permille
 *                             above 10000 (and not
 *                             GMR_VMM_POOL_REMAP_NEVER); shard_count above
 *                             GMR_VMM_POOL_MAX_SHARDS. The message
 *                             (failure may be NULL) says which and the
 *                             limit.
 *   GMR_ERR_UNSUPPORTED       the device has no VMM support, or a listed
 *                             peer cannot access it.
 *   GMR_ERR_OUT_OF_MEMORY     host memory, VA, or the initial pages (the
 *                             message names initial_pages, the pages asked
 *                             and how many the device has room for).
 *   GMR_ERR_CUDA              another CUDA failure (code in the record).
 * On failure *out is NULL, and everything the call reserved or mapped is
 * given back.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_create(
    const gmr_vmm_pool_resource_config *config, gmr_vmm_pool_resource **out,
    gmr_failure *failure);

/**
 * The gmr_vmm_pool_resource's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `pool`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_vmm_pool_resource_as_resource(gmr_vmm_pool_resource *pool) {
  return (gmr_resource *)(void *)pool;
}

/**
 * The gmr_vmm_pool_resource behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "vmm_pool_resource") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_vmm_pool_resource *gmr_vmm_pool_resource_from_resource(gmr_resource *r) {
  return (gmr_vmm_pool_resource *)gmr_resource_downcast(r, "vmm_pool_resource");
}

/* ---- observability ---------------------------------------------------- */

#define GMR_VMM_POOL_RESOURCE_STATS_VERSION 2u

/* A snapshot, in bytes unless named _count. Version 1 ends at wake_count; a
 * caller built against it (size and version 1) gets those fields only. */
typedef struct gmr_vmm_pool_resource_stats {
  size_t size;      /* sizeof as the caller knows it */
  uint32_t version; /* GMR_VMM_POOL_RESOURCE_STATS_VERSION as the caller knows it */
  size_t page_bytes;
  size_t granularity_bytes;
  size_t mapped_bytes;       /* physical memory held: mapped pages (VPMM: active_pages *
                              * page) and unreleased_bytes */
  size_t peak_mapped_bytes;  /* high-water mark of mapped_bytes */
  size_t reserved_bytes;     /* VA reserved (VPMM: roots * va_size) */
  size_t va_chunk_count;
  size_t live_bytes;         /* live allocations of whole pages (VPMM: malloc_regions) */
  size_t live_count;
  size_t small_live_bytes;   /* small requests live in the internal pool (256-byte rounded) */
  size_t small_live_count;
  size_t free_bytes;         /* reusable mapped pages (free_regions) */
  size_t free_region_count;
  size_t hole_bytes;         /* unmapped reserved VA (unmapped_regions) */
  size_t hole_count;
  size_t zombie_bytes;       /* remapped, awaiting unmap (zombie_regions) */
  size_t zombie_count;
  size_t asleep_bytes;       /* live allocations without pages (sleep) */
  size_t asleep_count;
  size_t saved_bytes;        /* pinned host copies held for asleep allocations */
  uint64_t page_create_count;  /* cuMemCreate calls that succeeded */
  uint64_t page_release_count; /* physical pages released */
  uint64_t map_count;          /* cuMemMap calls that succeeded */
  uint64_t unmap_count;        /* cuMemUnmap calls that succeeded */
  uint64_t defrag_count;       /* phase-2 runs that remapped free pages */
  uint64_t remapped_page_count; /* pages double-mapped by defragmentation */
  uint64_t extend_count;       /* successful in-place growths */
  uint64_t event_record_count;
  uint64_t event_query_count;
  uint64_t stream_wait_count;
  uint64_t event_synchronize_count;
  uint64_t sleep_count;
  uint64_t wake_count;
  /* ---- end of version 1 ---- */
  /* What the driver refused to give back, kept by the pool (never
   * forgotten) and asked for again first at the next trim, sleep, wake and
   * destroy: */
  size_t unreleased_bytes;        /* physical memory cuMemRelease refused: unmapped, still
                                   * held (in mapped_bytes and the footprint) */
  size_t unreleased_handle_count; /* its physical allocations (pages; FINE: handles) */
  size_t unfreed_host_bytes;      /* pinned host copies cudaFreeHost refused (not in
                                   * saved_bytes: their allocations woke or were freed) */
  size_t unfreed_host_count;
  /* ---- end of version 2 ---- */
} gmr_vmm_pool_resource_stats;

#define GMR_VMM_POOL_RESOURCE_STATS_INIT                                                           \
  {sizeof(gmr_vmm_pool_resource_stats), GMR_VMM_POOL_RESOURCE_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0,  \
   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/**
 * Fill *out with a snapshot of the pool's statistics (the caller set size
 * and version: GMR_VMM_POOL_RESOURCE_STATS_INIT; fields past `size` are
 * left alone, so a caller built against version 1 gets version 1's fields:
 * mapped_bytes then counts unreleased memory without naming it).
 * Units: bytes, unless a field is named _count. Ownership: *out is the
 *   caller's.
 * Thread-safe: yes (a consistent snapshot under the pool's lock; the small
 *   path's counters are read just before it, under its own lock, so they
 *   may miss a call in flight).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  pool or out is NULL, out->size is smaller
 *                             than version 1's struct, or out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_get_stats(
    gmr_vmm_pool_resource *pool, gmr_vmm_pool_resource_stats *out);

typedef enum gmr_vmm_pool_region_kind {
  GMR_VMM_POOL_REGION_HOLE = 0,
  GMR_VMM_POOL_REGION_FREE = 1,
  GMR_VMM_POOL_REGION_LIVE = 2,
  GMR_VMM_POOL_REGION_ZOMBIE = 3,
  GMR_VMM_POOL_REGION_ASLEEP = 4
} gmr_vmm_pool_region_kind;

/* One region, as gmr_vmm_pool_resource_get_regions() lists them. */
typedef struct gmr_vmm_pool_region {
  void *addr;
  size_t bytes;
  gmr_vmm_pool_region_kind kind;
  gmr_stream stream;       /* FREE: the stream it is filed under; LIVE: the allocating stream */
  bool pending;            /* FREE/ZOMBIE: its event is not known to have completed */
  bool internal;           /* LIVE/ASLEEP: a chunk of the internal small pool */
  uint32_t tag;            /* LIVE/ASLEEP */
  size_t va_chunk_index;   /* which VA chunk (0 = the first reserved) */
} gmr_vmm_pool_region;

/**
 * List every region in ascending address order (VA chunks in the order they
 * were reserved): up to `capacity` into `out` (may be NULL with capacity 0),
 * and the total number into *count. `pending` is what the pool knows, not a
 * fresh query. O(regions); for tests and debugging.
 * Ownership: `out` is the caller's; the addresses stay the pool's.
 * Thread-safe: yes (a snapshot under the pool's lock).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *count is set (also when capacity was too
 *                             small: the first `capacity` are in out).
 *   GMR_ERR_INVALID_ARGUMENT  pool or count is NULL, or out is NULL with
 *                             capacity > 0.
 * On failure *count and out are unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_get_regions(
    gmr_vmm_pool_resource *pool, gmr_vmm_pool_region *out, size_t capacity, size_t *count);

/**
 * Write the statistics above and every region in ascending address order as
 * text into `buf` (buf_bytes, NUL-terminated, truncated when too small), for
 * debugging. *needed_bytes (may be NULL) receives the size the whole text
 * needs, NUL included.
 * Units: bytes. Ownership: `buf` is the caller's.
 * Thread-safe: yes (the statistics and the regions are two snapshots, each
 *   under the pool's lock). Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    the text (or its first buf_bytes - 1 bytes) is
 *                             in buf.
 *   GMR_ERR_INVALID_ARGUMENT  pool is NULL, or buf is NULL with buf_bytes > 0.
 * On failure buf and *needed_bytes are unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_vmm_pool_resource_dump(gmr_vmm_pool_resource *pool,
                                                            char *buf, size_t buf_bytes,
                                                            size_t *needed_bytes);

#ifdef __cplusplus
}
#endif

/* Tags, sleep and wake (declared there; included here so that code written
 * before they moved compiles unchanged). */
#include "gmr/vmm_pool_sleep.h"

#endif /* GMR_VMM_POOL_RESOURCE_H_ */
