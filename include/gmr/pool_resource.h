/*
 * gmr/pool_resource.h: a coalescing, stream-ordered sub-allocator over chunks
 * taken from an upstream resource: the general-purpose pool.
 *
 * What it does (the algorithm, in the order a request meets it):
 *  - Sizes are rounded up to 256 bytes (the alignment every allocation has);
 *    nothing larger, so the pool adds at most 255 bytes to a request. Every
 *    block, free or allocated, has a host-side header (device memory holds no
 *    allocator data) linked to its address-ordered neighbours in its chunk.
 *  - Free blocks are filed per stream: under the stream they were freed on
 *    (reusable at once by that stream, by others only with ordering), or under
 *    the shared slot once that stream's work is known done (reusable by any
 *    stream). Each has an index of free blocks by size, a two-level segregated
 *    fit (TLSF): a good fit in O(1) whatever the number of free blocks, exact
 *    below 8 KiB and within 3% above, refined by a best-fit scan of at most
 *    32 blocks of the request's own size class. The most recent small frees
 *    of a stream wait unmerged in a short list first (recent_free_count,
 *    recent_free_max_bytes): a request of exactly their size takes one back
 *    without touching the index.
 *  - allocate(stream T) takes, in this order (RMM's pool, without its linear
 *    scans and its event per free):
 *      1. a recent free of T of exactly the size; else the best fit among the
 *         blocks filed under T and the shared blocks (recent frees are merged
 *         first if nothing fits). A fit that would split a block waits for
 *         the next step while memory of another stream may have become free
 *         for anyone (a recorded event not known done, or a record_stream
 *         block): memory freed on another stream whose work is done is taken
 *         before new space is split (PyTorch's order);
 *      2. memory freed on other streams whose work is known to be done (their
 *         events queried, once per record); their blocks become shared;
 *      3. a block of a stream whose work is still pending, after making T wait
 *         for that stream's event (cudaStreamWaitEvent); T takes all of that
 *         stream's free blocks, and if no single stream has a block large
 *         enough but together they have the bytes, all streams' free blocks (so
 *         touching blocks of different streams merge);
 *      4. a block another arena holds for T (or for any stream): no CUDA call;
 *      5. a new chunk from upstream, allocated on T (see Growth).
 *    Steps 2-5 run only when step 1 finds nothing, so a pool that serves one
 *    stream makes no CUDA call at all once its chunks exist (for a created
 *    stream, its id at an allocation that takes back its own memory not yet
 *    known done: see Streams).
 *  - deallocate(stream S) files the block under S, merged at once (or when it
 *    leaves the list of recent frees) with its neighbours that are free under
 *    S or shared (boundary tags: O(1)).
 *  - Growth: a new chunk is max(the request, growth_percent of what the arena
 *    holds, clamped to [min_growth_bytes, max_growth_bytes]), rounded up to
 *    chunk_granularity_bytes, and never past maximum_pool_bytes: a request as
 *    large as the growth step gets a chunk of its own size. Before it, when
 *    free memory of other streams that no event covers would serve (see
 *    Streams), one device synchronisation releases it instead. With
 *    release_on_growth, wholly free chunks that together are as large as the
 *    new chunk go back upstream first (on T, stream-ordered): free memory split
 *    over chunks too small for the request then does not raise the footprint.
 *    When the upstream says OUT_OF_MEMORY (or LIMIT_EXCEEDED), the pool asks
 *    again for exactly what the request needs (a smaller step would still
 *    overshoot a tight upstream, a limit of a few KiB, and leave the next
 *    small request without room), then again after giving back its wholly
 *    free chunks; with several arenas it then uses the other arenas' free
 *    memory, and finally makes them give back their wholly free chunks and
 *    tries once more, before failing. An upstream that can grow an allocation
 *    in place (the extend slot of gmr/resource.h: vmm, vmm_pages) extends a chunk
 *    instead: the chunk whose free tail is largest grows until that tail
 *    holds max(request, growth step), one contiguous free block, no new
 *    chunk (not while annotating for memory checkers, nor during capture);
 *    if it cannot, a new chunk is taken. The upstream is called with the arena's
 *    spin lock released (a grow mutex serialises growth): a thread that
 *    allocates from free memory never waits for another thread's cudaMalloc.
 *  - trim gives back every chunk that is wholly free (after waiting for the
 *    streams that freed memory in it); destroy gives back everything.
 *  Footprint on real traces (peak held / peak live, BENCHMARKS.md): 1.049
 *  gpt2_train, 1.036 resnet50_train, 1.072 gpt2_graph_capture, 1.536
 *  multistream with the defaults. Those numbers move by several percent with
 *  the growth parameters; the defaults were chosen by a sweep over them.
 *
 * Streams (stream_ordered/stream_event.h has the whole argument). A stream the program
 * created may be destroyed as soon as the call that named it returns
 * (cudaStreamDestroy is legal with work pending), and a new stream may get
 * its handle. So, by default:
 *  - the pool records, queries or waits on a stream only inside a call that
 *    names it, never later (seen on an H100: recording on a destroyed stream
 *    crashes the driver);
 *  - a created stream is known by its handle, as in RMM and PyTorch: a
 *    warm alloc/free pair makes no CUDA call. Its id (cudaStreamGetId, unique
 *    for the process, never reused) is asked only before the pool records
 *    on the stream, waits, or grows, after cudaStreamGetCaptureInfo said the
 *    stream is not capturing (cudaStreamGetId on a capturing stream breaks
 *    the capture in every thread mode, relaxed included: seen on an H100); a
 *    capturing stream is known by its capture. Two different ids on one
 *    handle mean the first stream died: its memory is retired and reaches
 *    others only through its event or a device synchronisation. With
 *    streams.stream_ids, the id is also asked before a stream takes back its
 *    own memory not known done, so a new stream that got a destroyed stream's
 *    handle never reuses that memory unordered (for programs that destroy
 *    streams with work pending and create new ones; docs/stream_ordering.md).
 *    cudaStreamPerThread is a different stream in every thread: it is keyed
 *    by thread and device, at the cost of a cudaGetDevice;
 *  - a free records no event, except on demand: when another stream has asked
 *    for S's free memory since S's last record, S records at its next call
 *    (a free, or an allocation); and for S's first few frees (a short-lived
 *    stream then leaves no memory that only a device synchronisation could
 *    release) and at growth. RMM records at every free, and cudaEventRecord
 *    takes the driver's context lock: threads freeing at once serialise
 *    (1.66x for 16 threads over one on an H100).
 *    streams.record_at_every_free keeps RMM's rule.
 *  - memory freed on a stream and never covered by a record (the stream may
 *    be gone) is released by one cudaDeviceSynchronize, made only when it
 *    would spare a growth, and by trim and destroy.
 * With streams.streams_outlive_resource the program promises that its
 * streams live until the pool is destroyed: no stream id is asked and no
 * event recorded at a free; a stream is recorded on when another stream
 * first needs its memory (the legacy default stream is always treated so).
 *
 * record_stream (gmr_resource_record_stream, PyTorch's Tensor.record_stream): the
 * block is also used on another stream. At its free an event is recorded on
 * each such stream, and the block waits, merged with nothing, until they are
 * done (queried on the slow paths, waited for by trim and destroy); then it is
 * filed as a free of the freeing stream. The recorded streams must stay alive
 * until the block is freed (PyTorch's rule). A pool with stream ordering off
 * accepts the call and keeps nothing.
 *
 * Threads (the fast path does not serialise threads on one lock): the pool has
 * `arena_count` arenas, each with its own spin lock, chunks, free indexes and
 * map of allocated blocks. Arenas follow streams: a stream is served by the
 * home arena of the first thread that used it (threads get homes round-robin)
 * and every thread that uses it later goes there too. A thread with a stream
 * of its own never shares a lock or a cache line with other threads on the
 * fast path; threads that take turns on one stream (PyTorch's forward thread
 * and its autograd thread, both on the default stream) share one arena's
 * memory and pay no footprint for arenas; one thread's several streams share
 * its arena. A thread remembers the arena it found last for a pool and
 * stream and goes back there without the lookup (it keeps that arena if
 * another stream later takes the stream's place in the lookup table).
 * Before growing, an arena takes a block another arena holds free
 * for the same stream (no CUDA call). A free goes to the arena that owns the
 * block: the stream's arena (one lookup), otherwise found through a shared,
 * read-locked table of chunks. With stream ordering off, a thread's home
 * arena serves it. With arena_count = 1 all threads share one lock and all
 * memory.
 *
 * Alignment: any power of two up to GMR_POOL_MAX_ALIGNMENT.
 *
 * Statuses of gmr_resource_allocate() on a pool: GMR_ERR_OUT_OF_MEMORY (the upstream
 * had none, after the retries above, or maximum_pool_bytes would be passed, or
 * host memory for the bookkeeping ran out; the message says which);
 * GMR_ERR_CAPTURE_UNSAFE (see Capture); GMR_ERR_UNSUPPORTED (alignment above
 * the maximum); GMR_ERR_CUDA (cudaStreamGetId refused the stream: a destroyed
 * or foreign handle); any other upstream failure as the upstream reported it,
 * with its gmr_failure record. On every failure the record's free_info_known,
 * free_bytes and largest_free_block_bytes describe the pool (unless a deeper
 * resource that keeps free memory filled them), so an OOM policy can tell
 * fragmentation from exhaustion. The pool is unchanged after a failure,
 * except that chunks it gave back on the way stay given back.
 * Statuses of gmr_resource_deallocate(), the vocabulary of gmr/resource.h:
 * GMR_ERR_UNKNOWN_POINTER (not the start of a live allocation of this pool),
 * GMR_ERR_DOUBLE_FREE (this pool freed that address recently and it is not
 * live), GMR_ERR_FREE_MISMATCH (bytes or alignment differ from the
 * allocation's), GMR_ERR_CUDA (cudaStreamGetId refused the stream),
 * GMR_ERR_OUT_OF_MEMORY (host memory for a stream the pool has not seen ran
 * out); in every case nothing changes and the caller keeps the pointer. A free
 * calls CUDA only for the stream's id (see Streams), and to record an event
 * on demand.
 *
 * Stream semantics: RMM's (gmr/resource.h). A pointer may also be freed on a
 * stream other than its allocation stream; it is then reusable by that stream.
 * Capture: gmr_resource_allocate() never calls the upstream or records, queries or
 * waits for events on a stream that is capturing a CUDA graph; a request that
 * free memory of that stream cannot satisfy fails with GMR_ERR_CAPTURE_UNSAFE.
 * The pool's own potentially unsafe calls (cudaStreamGetId, cudaEventQuery,
 * cudaEventSynchronize) are made with the calling thread in relaxed capture
 * mode, so no allocate or deallocate, on the capturing stream or on another
 * stream in any thread, breaks a capture in progress. Not so a device
 * synchronisation (made only when it spares a growth, at trim and destroy):
 * CUDA refuses it in every mode while any stream captures.
 * gmr_resource_allocate_capturing() goes further without breaking the capture: free
 * memory of the stream and shared memory (no CUDA call), blocks other arenas
 * hold for it, then, with the calling thread switched to relaxed capture mode
 * (restored on every path), other streams' memory whose recorded events are
 * done (queries; no record, no wait) and a new chunk through the upstream's
 * allocate_capturing (cudaMalloc in relaxed mode for cuda(kind=device)),
 * filed for any stream; an upstream that cannot (cudaMallocAsync) means
 * GMR_ERR_CAPTURE_UNSAFE, the capture untouched. Memory handed out during a
 * capture is reused normally after it is freed, so blocks used by a graph
 * that is replayed later need a graph_arena_resource instead. Steps 2, 3 and
 * the device synchronisation are calls CUDA forbids while another thread
 * captures in cudaStreamCaptureModeGlobal: capture in thread-local or relaxed
 * mode when other threads use a pool at the same time.
 *
 * NVTX annotation (config.streams.nvtx_annotate; core/nvtx_mem.h): memcheck sees one
 * big cudaMalloc per chunk, so a kernel that writes past the end of a block
 * into the next one (or into the block's rounding) is legal to it. Annotated,
 * the pool registers each chunk as an NVTX sub-allocator heap right after the
 * upstream gave it, each block it hands out as a region of exactly the bytes
 * asked for (not the 256-byte rounding, so an overflow into the padding is
 * caught too), unregisters the region when the block is freed (before it can
 * be merged or handed out again), and unregisters the heap before the chunk
 * goes back upstream (trim, release before growth, destroy). Then
 * `compute-sanitizer --tool memcheck` reports any access outside a live
 * block, and a use after free. With no tool attached the calls cost about
 * 1 ns each; off (the default) the pool makes no NVTX call at all. A region
 * is unregistered when the host calls free, not when the stream reaches the
 * free: if work queued before the free still touches the block when the tool
 * checks it, memcheck may report it (synchronise before such frees in runs
 * under the sanitizer). The first heap of the process starts NVTX (it loads
 * the tool NVTX_INJECTION64_PATH names). Compiled out with GMR_DISABLE_NVTX.
 * Upstream: annotate pools over cuda(kind=device) (cudaMalloc) or managed
 * memory. Compute Sanitizer (CUDA 13.0, driver 580, seen on an H100) rejects
 * heaps over cudaMallocFromPoolAsync memory with a warning ("Call to
 * nvtxMemHeapRegister failed: One or more of the parameters is invalid"), and
 * the blocks are then unchecked.
 *
 * Source: RMM's pool_memory_resource and stream_ordered_memory_resource
 * (per-stream free lists, steal order, growth on the requesting stream),
 * PyTorch's CUDA caching allocator (block headers on the host, split and
 * merge, record_stream, synchronising before giving up, capture-time growth
 * in relaxed mode), TLSF (Masmano et al.) for the size index,
 * jemalloc/mimalloc arenas for the thread sharding.
 *
 * Thread-safe: yes (a spin lock and a grow mutex per arena; statistics read
 * under the spin locks).
 */
#ifndef GMR_POOL_RESOURCE_H_
#define GMR_POOL_RESOURCE_H_

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

typedef struct gmr_pool_resource gmr_pool_resource;

/* The largest alignment the pool honours (1 MiB); a larger one is
 * GMR_ERR_UNSUPPORTED. Alignments above 256 bytes cost up to alignment - 256
 * bytes of padding, which stays free for other requests. */
#define GMR_POOL_MAX_ALIGNMENT ((size_t)1 << 20)

typedef struct gmr_pool_resource_config {
  /* Bytes taken from upstream at create, on the default stream, into the
   * first arena; 0: nothing until the first request. Rounded up to 256
   * bytes (RMM's pool refuses sizes that are not multiples of 256; the pool
   * rounds instead and reports the size it uses in gmr_pool_resource_stats). */
  size_t initial_pool_bytes;
  /* Most bytes the pool holds from upstream at once, all arenas together;
   * 0: no maximum. Rounded up to 256 bytes, as initial_pool_bytes. */
  size_t maximum_pool_bytes;
  /* Smallest and largest chunk the growth policy asks for when a request does
   * not need more; a larger request gets a chunk of its own size. */
  size_t min_growth_bytes;
  size_t max_growth_bytes;
  /* Geometric growth: a new chunk is this percentage of what the arena holds
   * (then clamped as above). 0: always min_growth_bytes. */
  uint32_t growth_percent;
  /* Chunk sizes are rounded up to a multiple of this (a power of two >= 256;
   * 2 MiB matches the device's page size). */
  size_t chunk_granularity_bytes;
  /* Arenas (see the banner); 0: one per online CPU, at most 64. 1..64. */
  uint32_t arena_count;
  /* Before growing, give back wholly free chunks that together are as large
   * as the new chunk (freed on the requesting stream, so cudaFreeAsync needs
   * no synchronisation; a cudaFree upstream synchronises the device). */
  bool release_on_growth;
  /* Each stream keeps its most recent frees of at most recent_free_max_bytes
   * unmerged, up to recent_free_count of them (0..32), for a request of
   * exactly the same size: a loop that frees and allocates the same small
   * buffers then skips the size index, the split and the merge. They are
   * merged when the cache overflows (oldest first) or when a request finds no
   * block, before anything else is tried. Larger blocks are always merged at
   * once: unmerged, they change placement enough to cost footprint (measured:
   * up to +7% peak held on resnet50_train with 16 MiB). 0: merge every free. */
  uint32_t recent_free_count;
  size_t recent_free_max_bytes;
  /* How streams are treated (gmr/stream_ordered_options.h; see "Streams"
   * above): stream_ordered false ignores streams (for host upstreams and
   * single-stream programs: freed memory is reusable by anyone at once, no
   * CUDA call is ever made); nvtx_annotate describes the pool to memory
   * checkers ("NVTX annotation" above); streams_outlive_resource,
   * record_at_every_free and stream_ids choose when events are recorded and
   * stream ids asked. */
  gmr_stream_ordered_options streams;
} gmr_pool_resource_config;

/* Nothing at create, no maximum; chunks of max(request, 12% of the arena)
 * clamped to [48 MiB, 128 MiB] on a 2 MiB granularity; one arena per CPU;
 * stream ordered; free chunks given back before growing; the 8 most recent
 * frees up to 64 KiB kept unmerged per stream; no NVTX annotation; streams
 * may be destroyed after any call; events recorded on demand; streams known
 * by handle. */
#define GMR_POOL_RESOURCE_CONFIG_DEFAULT                                            \
  {0, 0, (size_t)48 << 20, (size_t)128 << 20, 12u, (size_t)2 << 20, 0u, true, 8u, \
   (size_t)64 << 10, GMR_STREAM_ORDERED_OPTIONS_DEFAULT}

/**
 * Create a pool that takes chunks from `upstream`.
 *
 * Units: bytes.
 * Ownership: `upstream` is borrowed: it must outlive the pool and must not be
 *   moved. `config` is copied (NULL: GMR_POOL_RESOURCE_CONFIG_DEFAULT). The
 *   caller destroys *out with gmr_resource_destroy().
 * Thread-safe: yes (creates an independent object).
 * Stream/device: with initial_pool_bytes > 0, allocates that chunk from
 *   upstream on the default stream (which may call cudaMalloc); nothing else.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out is NULL, upstream is not a valid resource,
 *                             chunk_granularity_bytes is not a power of two in
 *                             256 B..1 TiB, min_growth_bytes is 0 or above
 *                             max_growth_bytes, growth_percent > 1000,
 *                             arena_count > 64, recent_free_count > 32, or
 *                             initial_pool_bytes > maximum_pool_bytes (when set);
 *                             gmr_pool_resource_create_ex() says which.
 *   GMR_ERR_OUT_OF_MEMORY     the host allocation for the pool failed, or the
 *                             initial chunk: the upstream's status otherwise
 *                             (any status gmr_resource_allocate() returns).
 * On failure *out is NULL and nothing is left allocated anywhere.
 *
 * Destroy (gmr_resource_destroy): GMR_ERR_BUSY while allocations are live;
 * otherwise it waits for the streams that used freed memory (events, or one
 * device synchronisation for streams that may be gone), destroys its CUDA
 * events and gives every chunk back on the default stream. If a
 * cudaEventDestroy or an upstream free fails, it stops there and returns that
 * failure (GMR_ERR_CUDA, or the upstream's status): the pool is still valid,
 * holding what it has not given back, and a later destroy continues. The
 * failed event destroys are counted in the statistics.
 */
GMR_API GMR_NODISCARD gmr_status gmr_pool_resource_create(gmr_resource *upstream,
                                                          const gmr_pool_resource_config *config,
                                                          gmr_pool_resource **out);

/**
 * gmr_pool_resource_create() that also says why it failed, in words a person
 * can act on, in *failure (may be NULL): for a bad config, the one option that
 * is wrong, its value and its limit; for an initial chunk the upstream
 * refused, the bytes asked, the upstream's status and the option to lower
 * (failure->where and cuda_error as the upstream reported them).
 * Ownership, thread safety, stream/device semantics, Returns and state after
 * failure: as gmr_pool_resource_create(); on success the record's content is
 * unspecified.
 */
GMR_API GMR_NODISCARD gmr_status gmr_pool_resource_create_ex(
    gmr_resource *upstream, const gmr_pool_resource_config *config, gmr_pool_resource **out,
    gmr_failure *failure);

/**
 * The gmr_pool_resource's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `pool`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_pool_resource_as_resource(gmr_pool_resource *pool) {
  return (gmr_resource *)(void *)pool;
}

/**
 * The gmr_pool_resource behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "pool_resource") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_pool_resource *gmr_pool_resource_from_resource(gmr_resource *r) {
  return (gmr_pool_resource *)gmr_resource_downcast(r, "pool_resource");
}

/** The number of arenas (arena_count after resolving 0; 0 for NULL). Thread-safe: yes. */
GMR_API uint32_t gmr_pool_resource_get_arena_count(const gmr_pool_resource *pool);

/* A snapshot of the pool, all arenas together (gmr_resource_get_memory_info
 * gives held, live and free bytes, the largest free block and the number of
 * free blocks the same way). The caller sets `size` and
 * `version` (GMR_POOL_RESOURCE_STATS_INIT); the pool fills what both versions know. */
typedef struct gmr_pool_resource_stats {
  size_t size;                     /* sizeof the caller's struct */
  uint32_t version;                /* GMR_POOL_RESOURCE_STATS_VERSION of the caller */
  size_t held_bytes;               /* held from upstream now (all chunks) */
  size_t peak_held_bytes;          /* high-water mark of held_bytes */
  size_t chunk_count;              /* chunks held now */
  size_t in_use_bytes;             /* bytes of allocated blocks (requests rounded up to 256 B) */
  size_t requested_bytes;          /* bytes the live allocations asked for */
  size_t in_use_count;             /* live allocations */
  size_t free_bytes;               /* held_bytes - in_use_bytes */
  size_t free_block_count;         /* free blocks, all streams */
  size_t largest_free_block_bytes; /* the largest free block of any stream */
  size_t stream_count;             /* streams the arenas have seen (per arena, summed) */
  uint32_t arena_count;
  size_t grow_count;               /* chunks taken from upstream so far */
  size_t upstream_failure_count;   /* upstream allocations that failed (retries included) */
  size_t release_count;            /* chunks given back (trim) */
  size_t event_record_count;       /* cudaEventRecord calls made by the pool */
  size_t event_query_count;        /* cudaEventQuery calls */
  size_t stream_wait_count;        /* cudaStreamWaitEvent calls */
  size_t event_synchronize_count;  /* cudaEventSynchronize calls (trim) */
  /* ---- version 2 ---- */
  size_t event_destroy_failure_count; /* cudaEventDestroy calls that failed (events kept) */
  size_t device_synchronize_count;    /* cudaDeviceSynchronize calls */
  size_t deferred_block_count;        /* freed blocks waiting for record_stream events */
  size_t in_place_growth_count;       /* chunks grown in place (the upstream's extend slot) */
  /* ---- version 3 ---- */
  size_t initial_pool_bytes;          /* as used: the config's, rounded up to 256 bytes */
  size_t maximum_pool_bytes;          /* as used (0: no maximum), rounded up to 256 bytes */
} gmr_pool_resource_stats;

#define GMR_POOL_RESOURCE_STATS_VERSION 3u
/* Every field spelled out: C++ warns about partial initialisers. */
#define GMR_POOL_RESOURCE_STATS_INIT                                                               \
  {sizeof(gmr_pool_resource_stats), GMR_POOL_RESOURCE_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/**
 * Fill *out with the pool's statistics.
 * Thread-safe: yes; takes each arena's lock in turn, so the snapshot is
 *   consistent per arena, not across arenas while other threads work.
 * Stream/device: no CUDA call.
 * Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (a NULL argument, or out->size
 * smaller than the size+version header, or out->version 0; *out unchanged).
 */
GMR_API GMR_NODISCARD gmr_status gmr_pool_resource_get_stats(gmr_pool_resource *pool,
                                                             gmr_pool_resource_stats *out);

/* What a block of a chunk is, as gmr_pool_resource_get_blocks() lists it. */
typedef enum gmr_pool_block_state {
  GMR_POOL_BLOCK_ALLOCATED = 0, /* handed out and not freed */
  GMR_POOL_BLOCK_FREE = 1,      /* free: the arena may hand it out (on its stream's terms) */
  GMR_POOL_BLOCK_DEFERRED = 2   /* freed, waiting for the events of the streams recorded on
                                   it (gmr_resource_record_stream) before it is free */
} gmr_pool_block_state;

/* One block of one chunk. */
typedef struct gmr_pool_block_info {
  void *chunk;               /* base address of the chunk the block is in */
  size_t chunk_bytes;        /* the chunk's size */
  void *addr;                /* the block's address (256-byte aligned) */
  size_t bytes;              /* the block's size (a multiple of 256) */
  size_t requested_bytes;    /* ALLOCATED: the bytes asked for (<= bytes); else 0 */
  gmr_pool_block_state state;
  uint32_t arena;            /* index of the arena that holds the chunk */
} gmr_pool_block_info;

/**
 * List every block of every chunk the pool holds: arena by arena, chunk by
 * chunk, the blocks of a chunk in address order (they tile it exactly), up
 * to `capacity` of them into `out` (may be NULL with capacity 0), and their
 * number into *count (call with capacity 0 to size the array; blocks made
 * or merged between two calls change it). O(blocks); for debugging and
 * memory snapshots (gmr.torch.snapshot() draws PyTorch's segments from it).
 * Ownership: `out` is the caller's; the addresses stay the pool's.
 * Thread-safe: yes; each arena is listed under its lock, in turn, so the
 *   list is consistent per arena, not across arenas while other threads
 *   allocate.
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *count is set (also when capacity was too
 *                             small: the first `capacity` blocks are in out).
 *   GMR_ERR_INVALID_ARGUMENT  pool or count is NULL, or out is NULL with
 *                             capacity > 0.
 * On failure *count and out are unchanged.
 * Source: PyTorch's CUDACachingAllocator snapshot() (segments tiled by
 *   blocks); gmr_vmm_pool_resource_get_regions() for the VMM pool.
 */
GMR_API GMR_NODISCARD gmr_status gmr_pool_resource_get_blocks(gmr_pool_resource *pool,
                                                              gmr_pool_block_info *out,
                                                              size_t capacity, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* GMR_POOL_RESOURCE_H_ */
