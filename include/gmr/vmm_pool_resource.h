/*
 * gmr/vmm_pool_resource.h: what gmr's two VMM resources share. Both take
 * device memory through CUDA's virtual memory management (VMM) and fight
 * fragmentation by moving physical memory to new addresses instead of
 * holding more; each has its own type name, header and spec component, over
 * one common handle, gmr_vmm_pool_resource:
 *   vmm        (gmr/vmm_resource.h, "vmm_resource"): 256-byte placement over
 *              pages that whatever is live on them shares; the recommended
 *              one, and the default of the per-device registry, gmr.torch
 *              and gmr.cupy;
 *   vmm_pages  (gmr/vmm_pages_resource.h, "vmm_pages_resource"): VPMM's page
 *              placement, every request whole pages (the seed's design).
 * This header has the config, the statistics, the region list, the dump and
 * the handle's conversions; gmr/vmm_pool_sleep.h (included below) the tags,
 * sleep and wake. Each works on either resource: gmr_resource_find(r,
 * "vmm_pool_resource") and gmr_vmm_pool_resource_from_resource() reach
 * either one ("vmm_pool_resource" names the family, gmr/resource.h).
 *
 * Physical memory and addresses: a pool reserves device virtual addresses
 * (VA) in large chunks (va_chunk_bytes, more chunks on demand) and maps
 * physical memory under them in pages of page_bytes (a multiple of the
 * device's VMM granularity, 2 MiB by default): vmm_pages one physical
 * allocation (cuMemCreate) per page, vmm handles of one or more pages.
 * Physical memory is fungible; only addresses fragment, so free physical
 * memory is unmapped where it is free and mapped where a request goes. It
 * is kept until trim (gmr_resource_trim), sleep or destroy.
 *
 * Capture: allocation and extend are capture-safe (the vtable's
 * allocate_capturing slot, gmr_resource_allocate_capturing(); a plain
 * gmr_resource_allocate() on a capturing stream takes the same path): the
 * calling thread is switched to relaxed capture mode around page mapping
 * and event queries, and no stream-ordered call is made (no event record,
 * no stream wait): a request during a capture uses the capturing stream's
 * and shared free memory, other streams' memory whose recorded work is done
 * (queries), and maps pages (new or moved) in relaxed mode. A free on a
 * capturing stream records nothing: the memory is then reusable only by
 * that stream (recorded at its next free, or at its next allocation that
 * misses, outside a capture), and trim skips it. (On an H100 with driver 580
 * the VMM calls alone keep a global-mode capture valid, but cudaEventQuery
 * invalidates it: relaxed mode is for the queries, and costs two calls per
 * slow path, only during a capture.)
 *
 * Sleep and wake (what inference servers do between workloads: vLLM's
 * sleep mode, torch_memory_saver): tags, gmr_vmm_pool_resource_sleep() and
 * gmr_vmm_pool_resource_wake() give the physical memory of live
 * allocations back while keeping their addresses, and map it again;
 * gmr/vmm_pool_sleep.h (included below) declares them and says what
 * happens to each kind of memory.
 *
 * Peers: peer_access gives other devices read-write access to every mapped
 * page (cuMemSetAccess per mapping; cudaDeviceEnablePeerAccess does not cover
 * VMM memory). NCCL: nccl_ready creates pages the way ncclMemAlloc does
 * (export handle type POSIX file descriptor, plus fabric where the device
 * supports it, retried without fabric if the driver refuses it; GPUDirect
 * RDMA where the device supports it with VMM; the recommended granularity),
 * so NCCL can register (cuMemRetainAllocationHandle) and export the memory.
 * A pool never calls cuMulticast*.
 *
 * Statuses of gmr_resource_allocate(): GMR_ERR_OUT_OF_MEMORY (cuMemCreate said so,
 * with the driver's code in the failure record, or host memory ran out; the
 * record also carries the pool's free bytes; a request, or an extension,
 * above all of the device's memory, cudaMemGetInfo's total at create, is
 * refused so before any call); GMR_ERR_CUDA (any other driver
 * failure, with its CUresult and name); GMR_ERR_UNSUPPORTED (alignment above
 * the page); GMR_ERR_BUSY (asleep); GMR_ERR_CAPTURE_UNSAFE. On any failure
 * the pool's regions, pages and reservations are exactly as before.
 * gmr_resource_deallocate(): GMR_ERR_UNKNOWN_POINTER (not the start of a live
 * allocation), GMR_ERR_DOUBLE_FREE (an allocation start already freed),
 * GMR_ERR_FREE_MISMATCH (bytes or alignment other than those asked for at
 * allocation: the pool keeps both per allocation, so 999 bytes for a
 * 1,000-byte allocation is refused although both round to the same pages or
 * 256-byte units; in vmm_pages a whole-page allocation freed with a small
 * size, or a small block freed with a page or more, too), GMR_ERR_CUDA (a
 * stream record_stream named could be neither recorded on nor waited for; a
 * failed record alone is absorbed: the host waits for that stream instead):
 * nothing is released. A failed record of the freeing stream's own event
 * leaves its frees uncovered (vmm, and vmm_pages' small path), reached by
 * others through a device synchronisation; an address freed long ago (more
 * than twice as many freed addresses as live allocations since) may read as
 * GMR_ERR_UNKNOWN_POINTER rather than GMR_ERR_DOUBLE_FREE. Extend names the
 * allocation the same way (its `bytes` and alignment as asked, or as the
 * last extend set them).
 *
 * Destroy (gmr_resource_destroy): GMR_ERR_BUSY while an allocation is live
 * or asleep; otherwise it synchronises the device, asks the driver again
 * for what it refused before (while it still refuses: GMR_ERR_CUDA, nothing
 * changed), unmaps and releases every page and gives the VA back; a refused
 * driver call stops it with GMR_ERR_CUDA, the pool still valid and what was
 * refused kept (a later destroy continues; see "Refused releases").
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
 * failed allocation): held = the physical memory mapped, and refused ones
 * (above); live, free and the largest free block as each resource's header
 * says. Asleep allocations lie on no memory: they count in neither held nor
 * live (nor do vmm_pages' small blocks, live or free, in a chunk that
 * sleeps), so that live + free <= held.
 *
 * Device: a pool belongs to the device it was created for and makes it
 * current around its CUDA calls. Streams: RMM's semantics (gmr/resource.h);
 * a stream may be destroyed as soon as the call that named it returns
 * (events are recorded, queried or waited on only inside calls that name
 * the stream); a new stream that reuses the handle's address inherits
 * same-stream reuse of the last frees without ordering, as in RMM and
 * PyTorch (docs/stream_ordering.md says when the id is checked).
 *
 * Source: CUDA's driver API (cuda.h, VMM section); ncclMemAlloc (NCCL's
 * src/allocator.cc) for the NCCL-ready properties; vLLM's sleep mode and
 * torch_memory_saver for sleep and wake; each resource's header names its
 * own.
 *
 * Thread-safe: yes (each resource's header says which locks). Create and
 * destroy are not.
 */
#ifndef GMR_VMM_POOL_RESOURCE_H_
#define GMR_VMM_POOL_RESOURCE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"
#include "gmr/stream_ordered_options.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A VMM resource: a vmm (gmr_vmm_resource_create) or a vmm_pages
 * (gmr_vmm_pages_resource_create). */
typedef struct gmr_vmm_pool_resource gmr_vmm_pool_resource;

/* Most peer devices peer_access may name. */
#define GMR_VMM_POOL_MAX_PEERS 16

/* Most shards of vmm (shard_count). */
#define GMR_VMM_POOL_MAX_SHARDS 64

/* Most creator threads of vmm (creator_thread_count). */
#define GMR_VMM_POOL_MAX_CREATOR_THREADS 8

typedef enum gmr_vmm_pool_peer_access {
  GMR_VMM_POOL_PEERS_NONE = 0, /* only the pool's device */
  GMR_VMM_POOL_PEERS_ALL = 1,  /* every other device that can access this one */
  GMR_VMM_POOL_PEERS_LIST = 2  /* the devices in peers[0..peer_count) */
} gmr_vmm_pool_peer_access;

/* remap_permille (vmm): never move free memory to save memory (only when
 * the device is out of it). */
#define GMR_VMM_POOL_REMAP_NEVER UINT32_MAX

/* How a VMM resource is made. Each create reads the fields its resource
 * uses: those marked vmm or vmm_pages are the one resource's, the others
 * both read. */
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
  /* Pages mapped at create as one free region (VPMM's eager pages; vmm:
   * in its first shard). */
  size_t initial_pages;
  /* vmm_pages: serve requests below one page from the small path (256-byte
   * placement in chunks of this pool's pages) instead of rounding them up to
   * a page. vmm needs no small path. */
  bool small_pool;
  gmr_vmm_pool_peer_access peer_access;
  int peers[GMR_VMM_POOL_MAX_PEERS]; /* PEERS_LIST: device ordinals */
  size_t peer_count;
  /* Create pages as ncclMemAlloc does (see the banner). */
  bool nccl_ready;
  /* vmm: a growth maps this percentage of what the pool holds (at least
   * the request) in one go, the rest as a free tail: fewer, larger growths.
   * Never past the remap threshold. 0: exactly what the request needs. */
  uint32_t growth_percent;
  /* vmm: before holding more than this many thousandths above the peak of
   * live bytes (at most 10000), move free physical memory (whole handles) to
   * where it is needed instead of creating more. GMR_VMM_POOL_REMAP_NEVER:
   * only when the device is out of memory. */
  uint32_t remap_permille;
  /* vmm: new physical allocations (cuMemCreate) are at most 1/handle_divisor
   * of what the pool holds (at least a page), so that free memory can later
   * move in pieces of that size. 0: one allocation per growth. */
  uint32_t handle_divisor;
  /* vmm: independent engines that threads are spread over
   * (gmr/vmm_resource.h, "Threads"), at most GMR_VMM_POOL_MAX_SHARDS. 0: one
   * per CPU (at most 16); 1: one engine and one lock for every thread (least
   * footprint). */
  uint32_t shard_count;
  /* How streams are treated (gmr/stream_ordered_options.h). Both resources
   * read streams_outlive_resource: the program keeps every stream it passes
   * alive until the pool is destroyed, so a free records nothing (a stream
   * that wants another stream's memory records that stream's event once).
   * false: a stream may be destroyed right after the call; a free on a
   * stream other than the default streams records an event on it inside the
   * call: at once (RMM's rule) in vmm_pages' whole pages; in vmm and
   * vmm_pages' small path in batches when another stream shares the engine
   * (64 frees or 64 MiB, when another stream asks, at every free for streams
   * that trade memory all the time), else on demand (gmr/vmm_resource.h).
   * The other fields must keep their defaults
   * (always stream-ordered; no NVTX annotation; streams known by handle, the
   * id asked before each record): create refuses anything else with
   * GMR_ERR_INVALID_ARGUMENT. */
  gmr_stream_ordered_options streams;
  /* vmm: the least size of a new physical allocation (cuMemCreate), in
   * bytes, rounded up to the page; 0: one page. handle_divisor's share of
   * what is held is a page while the pool is small, so that early growths
   * take a handle per page; a floor makes them take fewer, larger ones, as
   * PyTorch's expandable segments map 20 MiB pages for large blocks
   * (large_segment_size_mb). Fewer handles mean fewer cuMemCreate and
   * cuMemMap calls per growth, larger ones coarser pieces to move, so the
   * pool may hold more (gmr/vmm_resource.h, "Growth"). At most
   * GMR_MAX_ALLOCATION_BYTES. */
  size_t handle_floor_bytes;
  /* vmm: threads that create a growth's physical allocations (cuMemCreate)
   * while the allocating thread creates its first one and maps them all
   * (gmr/vmm_resource.h, "Growth"), at most GMR_VMM_POOL_MAX_CREATOR_THREADS.
   * They start at the pool's first growth of several handles and are joined
   * at destroy. 0: the allocating thread creates every handle. */
  uint32_t creator_thread_count;
} gmr_vmm_pool_resource_config;

#define GMR_VMM_POOL_CURRENT_DEVICE (-1)

/* Current device, 2 MiB pages, VA chunks of the device's size, nothing
 * mapped at create, no peers, not NCCL-ready, streams may be destroyed
 * after a free; vmm_pages: small requests pooled; vmm: growth 25%, memory
 * moved above 1.5% over the live peak, handles of at most 1/128 of what is
 * held and at least a page, one shard per CPU (at most 16), no creator
 * threads. */
#define GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT                                                 \
  {GMR_VMM_POOL_CURRENT_DEVICE, 0, 0, 0, true, GMR_VMM_POOL_PEERS_NONE, {0}, 0, false, 25u, \
   15u, 128u, 0u, GMR_STREAM_ORDERED_OPTIONS_DEFAULT, 0u, 0u}

/* Create: gmr_vmm_resource_create() (gmr/vmm_resource.h) or
 * gmr_vmm_pages_resource_create() (gmr/vmm_pages_resource.h). Both refuse
 * (GMR_ERR_INVALID_ARGUMENT, the message saying which field and its limit):
 * a device that does not exist; page_bytes not a power of two and a
 * multiple of the granularity; va_chunk_bytes not a multiple of
 * page_bytes; peer_count above GMR_VMM_POOL_MAX_PEERS, an unknown
 * peer_access, or a listed peer that does not exist or is the pool's
 * device; a field of `streams` but streams_outlive_resource away from its
 * default. */

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
 * The gmr_vmm_pool_resource behind `r` (a vmm or a vmm_pages), or NULL if
 * `r` is NULL or not one: gmr_resource_downcast(r, "vmm_pool_resource")
 * (the vtable's identity decides); borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_vmm_pool_resource *gmr_vmm_pool_resource_from_resource(gmr_resource *r) {
  return (gmr_vmm_pool_resource *)gmr_resource_downcast(r, "vmm_pool_resource");
}

/* ---- observability ---------------------------------------------------- */

#define GMR_VMM_POOL_RESOURCE_STATS_VERSION 3u

/* A snapshot, in bytes unless named _count. Version 1 ends at wake_count,
 * version 2 at unfreed_host_count; a caller built against an older version
 * (its size and version) gets that version's fields only. */
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
  size_t small_live_bytes;   /* vmm_pages: small requests live in the small path (256-byte
                              * rounded) */
  size_t small_live_count;
  size_t free_bytes;         /* reusable mapped pages (free_regions) */
  size_t free_region_count;
  size_t hole_bytes;         /* unmapped reserved VA (unmapped_regions) */
  size_t hole_count;
  size_t zombie_bytes;       /* vmm_pages: remapped, awaiting unmap (zombie_regions) */
  size_t zombie_count;
  size_t asleep_bytes;       /* live allocations without pages (sleep) */
  size_t asleep_count;
  size_t saved_bytes;        /* backups (host copies, pinned or pageable) held for asleep
                              * allocations */
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
  size_t unreleased_handle_count; /* its physical allocations (pages; vmm: handles) */
  size_t unfreed_host_bytes;      /* pinned host copies cudaFreeHost refused (not in
                                   * saved_bytes: their allocations woke or were freed) */
  size_t unfreed_host_count;
  /* ---- end of version 2 ---- */
  /* Host memory of sleep (gmr/vmm_pool_sleep.h, "Host memory"): */
  size_t host_pinned_bytes;   /* pinned host memory the pool holds: the staging ring, pinned
                               * backups (asleep or kept) and unfreed_host_bytes */
  size_t host_pageable_bytes; /* pageable host memory it holds: pageable backups (asleep or
                               * kept) */
  size_t staging_bytes;       /* the staging ring (in host_pinned_bytes) */
  size_t kept_backup_bytes;   /* backups kept for the next sleep (keep_backup), either kind */
  /* Reserved ranges (gmr/vmm_pool_range.h), not in the figures above: */
  size_t range_count;
  size_t range_reserved_bytes;
  size_t range_committed_bytes; /* committed pages, awake or asleep */
  size_t range_mapped_bytes;    /* physical memory the ranges hold now: awake committed pages
                                 * and what cuMemRelease refused of theirs */
  size_t range_unreleased_bytes; /* of range_mapped_bytes, what cuMemRelease refused (unmapped,
                                  * kept, asked again by later range calls, sleep and wake) */
  /* ---- end of version 3 ---- */
} gmr_vmm_pool_resource_stats;

#define GMR_VMM_POOL_RESOURCE_STATS_INIT                                                           \
  {sizeof(gmr_vmm_pool_resource_stats), GMR_VMM_POOL_RESOURCE_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0,  \
   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,    \
   0, 0, 0, 0, 0, 0, 0}

/**
 * Fill *out with a snapshot of the pool's statistics (the caller set size
 * and version: GMR_VMM_POOL_RESOURCE_STATS_INIT; fields past `size` are
 * left alone, so a caller built against version 1 gets version 1's fields:
 * mapped_bytes then counts unreleased memory without naming it).
 * Units: bytes, unless a field is named _count. Ownership: *out is the
 *   caller's.
 * Thread-safe: yes (vmm_pages: a consistent snapshot under the pool's
 *   lock, the small path's counters read just before it under its own lock,
 *   so they may miss a call in flight; vmm: each shard under its lock, one
 *   after another).
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
  bool internal;           /* LIVE/ASLEEP: a chunk of vmm_pages' small path */
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
