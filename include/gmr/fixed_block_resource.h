/*
 * gmr/fixed_block_resource.h: blocks of one size carved from upstream chunks
 * of many blocks (cuCascade's fixed_size_host_memory_resource, RMM's
 * fixed_size_memory_resource).
 *
 * What it does:
 *  - Every block has `block_bytes` bytes (default 1 MiB). Chunks of
 *    `blocks_per_chunk` blocks (default 128) come from the upstream when no
 *    block is free for the request, up to `max_chunk_count` chunks; chunks can
 *    be taken at create (`initial_chunk_count`). When the upstream reports
 *    OUT_OF_MEMORY (or LIMIT_EXCEEDED) for a chunk, smaller chunks (half as
 *    many blocks, down to the blocks the request needs) are tried first.
 *  - A request of up to block_bytes gets one block. A larger request is
 *    forwarded to the upstream unchanged (GMR_FIXED_BLOCK_OVERSIZE_FORWARD, the
 *    default, as RMM does) or refused with GMR_ERR_UNSUPPORTED
 *    (GMR_FIXED_BLOCK_OVERSIZE_REFUSE). gmr_fixed_block_resource_allocate_blocks()
 *    gives a list of blocks for any size (cuCascade's multiple_blocks_allocation),
 *    given back as one.
 *  - Stream-ordered reuse: a block freed on stream S is reusable at once by S.
 *    Another stream T takes it only once S's work up to the free is known done
 *    (an event recorded on S, queried), after T waits for that event
 *    (cudaStreamWaitEvent), or after a device synchronisation. Streams are
 *    treated as in gmr/pool_resource.h ("Streams"): a stream may be destroyed
 *    as soon as the call that named it returns; created streams are known by
 *    handle (a warm pair makes no CUDA call), by cudaStreamGetId only before
 *    a record, a wait or a growth and never while they capture, and with
 *    streams.stream_ids before they take back their own blocks not known
 *    done (a new stream with a dead stream's handle then never reuses its
 *    blocks in stream order); no call breaks a capture in progress; a free
 *    records an event only on demand (another stream asked for S's blocks
 *    since S's last record), for S's first few frees and at growth
 *    (streams.record_at_every_free: at every free, RMM's rule); blocks no
 *    event covers are released by one device
 *    synchronisation when that spares a growth. Order: blocks freed on T,
 *    blocks of streams whose work is done, blocks of a stream still at work
 *    after waiting for it, blocks another shard holds for T, a new chunk.
 *  - record_stream (PyTorch's Tensor.record_stream): at the free of a block
 *    used on other streams, an event is recorded on each; the block is reused
 *    only once they are done, and then first: an allocation on a stream with
 *    such blocks waiting queries their events and puts the done ones back on
 *    top of its free blocks, so its next request gets the same block back
 *    (PyTorch's reuse; a record_stream loop holds no more than one pass). A
 *    record that fails leaves the block waiting for the next device
 *    synchronisation. The recorded streams must live until the free.
 *  - trim gives back every chunk whose blocks are all free (waiting, with
 *    cudaEventSynchronize, for the streams that freed them).
 *  - Works over any upstream: device, pinned or managed cuda_resource, a
 *    host_resource (set streams.stream_ordered = false there: no CUDA call is made).
 *
 * Alignment: blocks are 256-byte aligned (block_bytes is a multiple of 256);
 * a request for more returns GMR_ERR_UNSUPPORTED, unless it is forwarded.
 * Accounting: a block is in use whatever part of it the request uses;
 * get_footprint reports chunks plus forwarded allocations.
 * Capture: while the requesting stream captures a CUDA graph, only blocks
 * freed on that stream are used; otherwise the request fails with
 * GMR_ERR_CAPTURE_UNSAFE (no event, no upstream call).
 *
 * NVTX annotation (config.streams.nvtx_annotate; core/nvtx_mem.h; as the pool does,
 * gmr/pool_resource.h): each chunk is an NVTX sub-allocator heap from the
 * moment the upstream gives it until just before it goes back (trim,
 * destroy); a block handed out by allocate is a region of the bytes asked
 * for, so memcheck reports a kernel writing past them into the rest of the
 * block or into the next block; a block of a gmr_block_list is a region of
 * the whole block_bytes (the list promises block_bytes per block). The region
 * is unregistered when the block is given back, before it can be handed out
 * again. Forwarded (oversize) allocations come straight from the upstream,
 * which the tool sees anyway: they are not annotated. The first heap of the
 * process starts NVTX (it loads the tool NVTX_INJECTION64_PATH names). Off
 * (the default), no NVTX call is made; compiled out with GMR_DISABLE_NVTX.
 *
 * Source: cuCascade's fixed-size pinned host blocks (1 MiB blocks, pools of 128 blocks,
 * expansion when the free list is empty, multiple_blocks_allocation), RMM's
 * fixed_size_memory_resource (forwarding of larger requests) and its
 * stream-ordered free lists.
 *
 * Threads: `shard_count` shards (default one per CPU), each with its own spin
 * lock, chunks and free lists. A stream is served by the home shard of the
 * first thread that used it (threads get homes round-robin), and every thread
 * that uses it later goes there too: threads on streams of their own never
 * share a lock on the fast path, and threads that take turns on one stream
 * share one shard's blocks. A thread remembers the shard it found last for a
 * resource and stream and goes back there without the lookup. A block freed
 * elsewhere goes back to its chunk's
 * shard (found through a read-locked table of chunks). A list's blocks all
 * come from one shard. shard_count = 1 is the single-lock resource.
 *
 * Statuses of gmr_resource_deallocate(), the vocabulary of gmr/resource.h:
 * GMR_ERR_UNKNOWN_POINTER (not a block start nor a forwarded allocation of
 * this resource, or a block never given out), GMR_ERR_DOUBLE_FREE (a block
 * given out before and free now), GMR_ERR_FREE_MISMATCH (bytes or alignment
 * differ from the allocation's, or a block of a list freed on its own),
 * GMR_ERR_CUDA (cudaStreamGetId refused the stream), GMR_ERR_OUT_OF_MEMORY
 * (host memory for a new stream); nothing changes in any case. A failed
 * allocation's record carries the free bytes and the largest free block
 * (one block, or 0). Destroy is as the pool's (gmr/pool_resource.h): it
 * succeeds, or fails with the resource still valid and a retry continuing.
 *
 * Thread-safe: yes (a spin lock and a grow mutex per shard, a read-write lock
 * for the chunk table, a spin lock for forwarded allocations and lists).
 */
#ifndef GMR_FIXED_BLOCK_RESOURCE_H_
#define GMR_FIXED_BLOCK_RESOURCE_H_

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

typedef struct gmr_fixed_block_resource gmr_fixed_block_resource;

/* What happens to a single request larger than one block. */
typedef enum gmr_fixed_block_oversize {
  GMR_FIXED_BLOCK_OVERSIZE_FORWARD = 0, /* allocate it from the upstream as asked */
  GMR_FIXED_BLOCK_OVERSIZE_REFUSE = 1   /* GMR_ERR_UNSUPPORTED */
} gmr_fixed_block_oversize;

typedef struct gmr_fixed_block_resource_config {
  size_t block_bytes;         /* bytes per block: a multiple of 256, > 0 */
  size_t blocks_per_chunk;    /* blocks per upstream chunk, > 0 */
  size_t max_chunk_count;     /* most chunks held at once; 0: no maximum */
  size_t initial_chunk_count; /* chunks taken at create (default stream) */
  gmr_fixed_block_oversize oversize;
  /* Shards, each with its own lock, chunks and free lists (see "Threads");
   * 0: one per online CPU, at most 64. 1..64. */
  uint32_t shard_count;
  /* How streams are treated (gmr/stream_ordered_options.h; the same options
   * as gmr/pool_resource.h's): stream_ordered false ignores streams (host
   * upstreams: a freed block is reusable by anyone at once and no CUDA call
   * is ever made); nvtx_annotate describes chunks and blocks to memory
   * checkers ("NVTX annotation" above); streams_outlive_resource,
   * record_at_every_free and stream_ids choose when events are recorded and
   * stream ids asked. */
  gmr_stream_ordered_options streams;
} gmr_fixed_block_resource_config;

/* 1 MiB blocks, chunks of 128 blocks, no maximum, nothing at create, larger
 * requests forwarded, stream ordered, no NVTX annotation, streams may be
 * destroyed after any call, one shard per CPU, events recorded on demand,
 * streams known by handle. */
#define GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT                       \
  {(size_t)1 << 20, 128u, 0u, 0u, GMR_FIXED_BLOCK_OVERSIZE_FORWARD, 0u, \
   GMR_STREAM_ORDERED_OPTIONS_DEFAULT}

/**
 * Create a fixed-block resource over `upstream`.
 *
 * Units: bytes, blocks, chunks.
 * Ownership: `upstream` is borrowed: it must outlive the resource and must not
 *   be moved. `config` is copied (NULL: the default). The caller destroys *out
 *   with gmr_resource_destroy(), which returns GMR_ERR_BUSY while blocks or
 *   forwarded allocations are live.
 * Thread-safe: yes (creates an independent object).
 * Stream/device: allocates initial_chunk_count chunks from upstream on the
 *   default stream (which may call cudaMalloc); nothing else.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out is NULL, upstream is not a valid resource,
 *                             block_bytes is 0 or not a multiple of 256,
 *                             blocks_per_chunk is 0, a chunk would exceed
 *                             GMR_MAX_ALLOCATION_BYTES, the oversize value is
 *                             unknown, initial_chunk_count > max_chunk_count
 *                             (when set), or shard_count > 64;
 *                             gmr_fixed_block_resource_create_ex() says which.
 *   GMR_ERR_OUT_OF_MEMORY     host allocation failed, or the upstream's status
 *                             for an initial chunk (any gmr_resource_allocate() status).
 * On failure *out is NULL and every initial chunk was given back.
 */
GMR_API GMR_NODISCARD gmr_status gmr_fixed_block_resource_create(
    gmr_resource *upstream, const gmr_fixed_block_resource_config *config,
    gmr_fixed_block_resource **out);

/**
 * gmr_fixed_block_resource_create() that also says why it failed, in words a
 * person can act on, in *failure (may be NULL): for a bad config, the one
 * option that is wrong, its value and its limit; for initial chunks the
 * upstream refused, the bytes of a chunk, how many were asked, the
 * upstream's status and the option to lower.
 * Ownership, thread safety, stream/device semantics, Returns and state after
 * failure: as gmr_fixed_block_resource_create(); on success the record's
 * content is unspecified.
 */
GMR_API GMR_NODISCARD gmr_status gmr_fixed_block_resource_create_ex(
    gmr_resource *upstream, const gmr_fixed_block_resource_config *config,
    gmr_fixed_block_resource **out, gmr_failure *failure);

/**
 * The gmr_fixed_block_resource's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `r`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_fixed_block_resource_as_resource(gmr_fixed_block_resource *r) {
  return (gmr_resource *)(void *)r;
}

/**
 * The gmr_fixed_block_resource behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "fixed_block_resource") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_fixed_block_resource *gmr_fixed_block_resource_from_resource(gmr_resource *r) {
  return (gmr_fixed_block_resource *)gmr_resource_downcast(r, "fixed_block_resource");
}

/** The block size in bytes (0 for NULL). Thread-safe: yes. */
GMR_API size_t gmr_fixed_block_resource_get_block_bytes(const gmr_fixed_block_resource *r);

/*
 * Blocks given out together by gmr_fixed_block_resource_allocate_blocks().
 * Read-only for the caller; owned by the resource until given back.
 */
typedef struct gmr_block_list {
  size_t block_count; /* ceil(requested_bytes / block_bytes) */
  size_t block_bytes; /* bytes of each block */
  size_t requested_bytes;
  void **blocks;      /* block_count device pointers, in no particular order */
} gmr_block_list;

/**
 * Allocate ceil(bytes / block_bytes) blocks for use on `stream` and return
 * them as one list (cuCascade's allocate_multiple_blocks). All or nothing.
 *
 * Units: bytes.
 * Ownership: *out belongs to the resource; give it back with
 *   gmr_fixed_block_resource_deallocate_blocks() (never free() it).
 * Thread-safe: yes.
 * Stream/device: as gmr_resource_allocate() on this resource (may grow by chunks).
 * Returns:
 *   GMR_OK                    *out is set (NULL when bytes == 0).
 *   GMR_ERR_INVALID_ARGUMENT  r or out is NULL.
 *   GMR_ERR_OUT_OF_MEMORY     not enough blocks and no chunk could be added
 *                             (upstream out of memory or max_chunk_count), or
 *                             host memory for the list ran out; also for a
 *                             size past GMR_MAX_ALLOCATION_BYTES.
 *   GMR_ERR_CAPTURE_UNSAFE, GMR_ERR_CUDA, other upstream statuses: as allocate.
 * After failure *out is NULL and no block is taken (chunks added on the way
 * stay in the resource, free).
 */
GMR_API GMR_NODISCARD gmr_status gmr_fixed_block_resource_allocate_blocks(
    gmr_fixed_block_resource *r, size_t bytes, gmr_stream stream, gmr_block_list **out);

/**
 * Give back every block of `list`, stream-ordered on `stream`, and free the
 * list. NULL `list` is a no-op returning GMR_OK.
 * Thread-safe: yes. Stream/device: cudaStreamGetId for a created stream, and
 * an event record when another stream asked for this stream's blocks.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (r is NULL); GMR_ERR_UNKNOWN_POINTER
 * (`list` was not given out by this resource or was given back already;
 * nothing changes); GMR_ERR_CUDA (cudaStreamGetId refused the stream);
 * GMR_ERR_OUT_OF_MEMORY (host memory for a new stream's free list ran out;
 * nothing changes, the caller still owns the list).
 */
GMR_API GMR_NODISCARD gmr_status gmr_fixed_block_resource_deallocate_blocks(
    gmr_fixed_block_resource *r, gmr_block_list *list, gmr_stream stream);

/* A snapshot of the resource. The caller sets `size` and `version`
 * (GMR_FIXED_BLOCK_RESOURCE_STATS_INIT); the resource fills what both versions know. */
typedef struct gmr_fixed_block_resource_stats {
  size_t size;      /* sizeof the caller's struct */
  uint32_t version; /* GMR_FIXED_BLOCK_RESOURCE_STATS_VERSION of the caller */
  size_t block_bytes;
  size_t chunk_count;            /* chunks held now */
  size_t block_count;            /* blocks in those chunks */
  size_t in_use_block_count;     /* blocks given out (lists included) */
  size_t free_block_count;       /* blocks free, all streams */
  size_t held_bytes;             /* chunks + forwarded allocations */
  size_t peak_held_bytes;        /* high-water mark of held_bytes */
  size_t forwarded_count;        /* live forwarded (oversize) allocations */
  size_t forwarded_bytes;
  size_t stream_count;           /* streams seen */
  size_t grow_count;             /* chunks taken from upstream so far */
  size_t release_count;          /* chunks given back so far */
  size_t event_record_count;     /* CUDA calls made for stream ordering */
  size_t event_query_count;
  size_t stream_wait_count;
  size_t event_synchronize_count;
  /* ---- version 2 ---- */
  size_t event_destroy_failure_count; /* cudaEventDestroy calls that failed (events kept) */
  size_t device_synchronize_count;    /* cudaDeviceSynchronize calls */
  size_t deferred_block_count;        /* freed blocks waiting for record_stream events */
  uint32_t shard_count;
} gmr_fixed_block_resource_stats;

#define GMR_FIXED_BLOCK_RESOURCE_STATS_VERSION 2u
/* Every field spelled out: C++ warns about partial initialisers. */
#define GMR_FIXED_BLOCK_RESOURCE_STATS_INIT                                                        \
  {sizeof(gmr_fixed_block_resource_stats), GMR_FIXED_BLOCK_RESOURCE_STATS_VERSION, 0, 0, 0, 0, 0,  \
   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/**
 * Fill *out with a snapshot (taken under the lock).
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (a NULL argument, or out->size
 * smaller than the size+version header, or out->version 0; *out unchanged).
 */
GMR_API GMR_NODISCARD gmr_status gmr_fixed_block_resource_get_stats(
    gmr_fixed_block_resource *r, gmr_fixed_block_resource_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_FIXED_BLOCK_RESOURCE_H_ */
