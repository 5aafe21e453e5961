/*
 * gmr/graph_arena_resource.h: memory for CUDA graph capture whose addresses
 * stay valid for every replay of the graph.
 *
 * Why: a captured graph bakes raw device pointers into its kernel, memset and
 * copy nodes, and host code does not run again when the graph is replayed.
 * cudaMallocAsync during capture makes graph memory nodes that stop a graph
 * from being relaunched (unless auto-freed) or cloned. cudaMalloc during a
 * capture is refused (cudaErrorStreamCaptureUnsupported) and breaks it when
 * the calling thread is in global or thread-local capture mode (the default);
 * with the thread switched to relaxed mode (cudaThreadExchangeStreamCaptureMode)
 * it succeeds and the capture stays valid, which is how PyTorch's private
 * pools grow during capture (cudaMallocMaybeCapturing). The arena hands out
 * pieces of memory it holds without any CUDA call, grows during a capture only
 * through its upstream's capture-safe slot (gmr_resource_allocate_capturing), and keeps
 * the pieces a graph uses for that graph until the caller releases them (after
 * destroying the graph). Sources: a C# CUDA graph memory pool specification
 * (CUDAGraphMemoryPool: fixed addresses, Reset, block ids), numr's monotone
 * bump arena for graph capture, AdaptiveArrayPools.jl's CUDA checkpoint/rewind
 * design, PyTorch's per-graph private
 * pools (c10/cuda/CUDACachingAllocator.cpp, Note [Interaction with CUDA graph
 * capture]). RMM calls graph support out of scope (rmm #2518).
 *
 * Model
 * -----
 * The arena owns chunks of memory from its upstream: `initial_capacity_bytes`
 * taken at create, more in chunks of at least `chunk_bytes` when a request
 * does not fit (with UNCAPTURED_FORWARD also the upstream's free blocks when
 * a capture starts, see "Outside sessions"), never more than
 * `max_capacity_bytes` in all. Every
 * allocation it serves is carved out of a chunk, at least `alignment` (256)
 * aligned, its size rounded up to a multiple of `alignment`.
 *
 * A capture *session* is open on a stream while that stream captures. Every
 * allocation on that stream during the session is served from the arena's
 * free space and belongs to the session's *graph memory*. The arena itself
 * makes no CUDA call during a session (no cudaMalloc, no event query, no
 * synchronisation, nothing stream-ordered). When the free space cannot serve
 * a request, the arena grows by a chunk through gmr_resource_allocate_capturing() on
 * its upstream (for example `pool > cuda(kind=device)`: free pool memory, or
 * cudaMalloc with the thread in relaxed capture mode): the capture stays
 * valid and the graph keeps the new address. Only when nothing below can
 * allocate during capture (cuda(kind=async), host memory, a resource without
 * the slot), or growth is off (chunk_bytes 0), does the request return
 * GMR_ERR_CAPTURE_UNSAFE, changing nothing and leaving the capture intact;
 * gmr_failure::message then says how much to reserve, e.g.
 *   "graph_arena: capture needs 12.0 MiB more and cuda_resource cannot
 *    allocate during capture: call gmr_graph_arena_resource_reserve(arena,
 *    79691776) before it"
 * The figure is the arena's capacity plus every request of the capture from
 * the first refusal on (an upper bound: a retry from the same state fits;
 * under ORDERED_REUSE far less may do, and gmr_graph_arena_resource_get_graph_memory_info()
 * after a capture that fitted tells what it held). A growth the upstream
 * fails (out of memory, a CUDA error) returns its status and record, changes
 * nothing in the arena, and leaves the capture valid too. Reserving before
 * the capture (initial_capacity_bytes, gmr_graph_arena_resource_reserve)
 * stays the fastest: no upstream call at all inside the capture.
 *
 * Detection
 * ---------
 * Sessions are opened in two ways, which mix freely:
 *  - explicitly: gmr_graph_arena_resource_begin_capture() / gmr_graph_arena_resource_end_capture()
 *    around the capture. The allocation path then makes no CUDA call at all
 *    (a lookup in a small table of streams): this is the fast path.
 *  - automatically: a request on a stream without an explicit session asks
 *    the CUDA layer whether the stream captures (cudaStreamGetCaptureInfo,
 *    which is legal during capture) and opens a session keyed by the capture
 *    id. The arena does not see cudaStreamEndCapture, and never asks CUDA
 *    about a stream outside a request on it (the stream may be gone): an
 *    automatic session ends at gmr_graph_arena_resource_end_capture() (which
 *    gives its graph memory to the caller), or when a later request on the
 *    stream finds it not capturing or capturing with another id. A session
 *    ended that way leaves its graph memory *unclaimed*:
 *    gmr_graph_arena_resource_end_capture() on that stream claims it;
 *    gmr_graph_arena_resource_reset() releases it.
 * When to ask CUDA is the detection mode's choice, and the whole cost of
 * detection outside captures (a driver query is tens to a few hundred ns):
 *  - GMR_GRAPH_ARENA_DETECT_AUTO (the default): on every request (allocate,
 *    and free of a forwarded block) without an explicit session. Safe for a
 *    program that tells the arena nothing.
 *  - GMR_GRAPH_ARENA_DETECT_HINTED: only while a capture may be under way as
 *    far as gmr knows: an explicit session of the arena is open (requests on
 *    other streams ask, since a capture may fork onto them), the calling
 *    thread raised a hint (gmr_graph_arena_resource_thread_hint_enter, for a
 *    framework's capture context that knows the thread but not the stream),
 *    or the stream has an automatic session (to see its capture end).
 *    Otherwise a request costs two atomic loads and goes on as uncaptured:
 *    with UNCAPTURED_FORWARD, straight to the upstream without the arena's
 *    lock. A capture nobody declared is then not seen. tools/replay's
 *    graph_pool uses it (replay declares every capture).
 *  - GMR_GRAPH_ARENA_DETECT_EXPLICIT: never; only explicit sessions.
 *
 * Destroy (gmr_resource_destroy) returns GMR_ERR_BUSY, changing nothing,
 * while a block is live, a session is open (automatic ones included), or a
 * graph memory is not released (unclaimed ones included: reset first);
 * otherwise it gives every chunk back to the upstream.
 *
 * Optional slots (gmr/resource.h): get_memory_info reports held bytes (the
 * chunks), live bytes (blocks not yet deallocated, rounded), free bytes (the
 * free space, which any request may get; bytes kept for graph memories or
 * for a reset are not free), the largest free range and the number of free
 * ranges; with UNCAPTURED_FORWARD the stack's answer is the upstream's, as
 * for the footprint, when the upstream answers. A refusal or a growth the
 * arena itself fails fills the failure record's free figures with the same.
 * record_stream is described under "Bad frees" below.
 * allocate_capturing serves a request its caller makes during a capture as
 * allocate does, with every upstream call made through the upstream's
 * allocate_capturing (and GMR_ERR_CAPTURE_UNSAFE when it has none).
 *
 * A session ends in a graph memory handle (gmr_graph_memory). Nothing carved
 * for it is handed to anyone else until the handle is released with
 * gmr_graph_arena_resource_release_graph_memory(); release it after the graphs that use it
 * are destroyed and their last launch has completed. Blocks still live at
 * release stay allocated until the caller deallocates them. Several graphs may
 * share one graph memory: pass the handle to gmr_graph_arena_resource_begin_capture()
 * (one active session per graph memory at a time). Several streams may
 * capture at the same time, each with its own session.
 *
 * Capture policies (what a free during capture means):
 *  - GMR_GRAPH_ARENA_MONOTONE (default; numr): a block freed, or rewound,
 *    during capture is bookkeeping only; its bytes stay with the graph memory
 *    until release. No two allocations of one graph memory ever overlap, so
 *    graph nodes never alias and graphs sharing a memory may replay in any
 *    order, even concurrently. Costs the sum of all sizes allocated in the
 *    capture.
 *  - GMR_GRAPH_ARENA_ORDERED_REUSE (PyTorch's private pools): a captured
 *    block freed on stream S (during its capture, or after it while its
 *    memory is held) may be handed out again to a later request on S in a
 *    session of the same graph memory: later in the same capture, or in a
 *    later capture appending to the memory. A request is carved best fit
 *    (the smallest range that fits, ties: lowest) from those freed bytes and
 *    the arena's free space together, freed bytes next to free space counting
 *    as one range (not with nvtx_annotate, whose regions may not overlap).
 *    Costs about the peak of live bytes in the capture; several graphs
 *    captured one after another into one memory (an LLM server's graph per
 *    batch size, largest first) cost about the largest one. Safe for one
 *    graph because its nodes run in stream order; graphs sharing a memory
 *    must then be replayed in capture order and never concurrently
 *    (PyTorch's documented rule).
 *
 * Outside sessions (`uncaptured`):
 *  - GMR_GRAPH_ARENA_UNCAPTURED_ARENA (default): requests are carved from the
 *    arena too (growing it if needed: the chunk is taken from the upstream on
 *    the request's stream, so a stream-ordered upstream such as
 *    cuda(kind=async) or a pool orders the new memory on that stream; a piece
 *    of it used on another stream needs that stream ordered after the
 *    requesting one, as for any memory the arena hands out again; the initial
 *    capacity and gmr_graph_arena_resource_reserve() take theirs on the default
 *    stream) and a free is bookkeeping only: the bytes
 *    come back at gmr_graph_arena_resource_reset() or at a rewind (as in the C# graph memory pool
 * spec, numr's arena and AdaptiveArrayPools.jl). A warm-up iteration outside capture therefore
 * sizes the arena; after a reset the same requests get the same addresses inside the capture.
 *  - GMR_GRAPH_ARENA_UNCAPTURED_FORWARD: requests go straight to the upstream
 *    (e.g. a pool); the arena's memory serves captures only, as PyTorch routes
 *    only capturing streams to private pools. This is the graph pool stack's
 *    mode (docs/graph_pool.md). The arena then shares the upstream's memory
 *    instead of adding to it:
 *     - when an explicit session opens (gmr_graph_arena_resource_begin_capture)
 *       with no other session of the arena open, before its stream captures,
 *       the arena takes the upstream's free blocks of at least 2 MiB, largest
 *       first (at most 16; gmr_resource_get_memory_info says which), with
 *       ordinary allocations on that stream: the upstream orders the stream
 *       after their earlier users as for any request, which it could not do
 *       during the capture (a pool gives a capture only what needs no wait).
 *       It never makes the upstream grow: a block whose taking raised the
 *       upstream's footprint goes back at once and nothing more is taken.
 *       Nothing of this is an error; a capture that needs more grows.
 *     - chunks no graph memory uses (wholly free; not initial_capacity_bytes
 *       nor gmr_graph_arena_resource_reserve() ones) go back to the upstream
 *       when a capture ends (gmr_graph_arena_resource_end_capture, deallocated
 *       on its stream) and when a graph memory is released (on the default
 *       stream), if no session of the arena is open then.
 *    Sources: PyTorch's torch.cuda.graph empties the cache before a capture
 *    so that its private pool's cudaMalloc reuses the freed memory; here the
 *    pool's idle memory is handed to the capture without going through the
 *    driver.
 *
 * Reuse and streams: the arena never records or queries events. Memory that
 * comes back to its free space (reset, rewind, release of a graph memory, a
 * free after that release) is handed to the next request on any stream: the
 * caller must make sure that no queued work still uses it (synchronise
 * first), as for any arena (AdaptiveArrayPools.jl's CUDA design, "stream synchronization").
 * In particular, release a graph memory only after every graph that uses it
 * is destroyed (cudaGraphExecDestroy, cudaGraphDestroy) and its last launch
 * has completed (synchronise the launch stream): the arena cannot know, and
 * hands the bytes out at once.
 *
 * Bad frees (deallocate, gmr_graph_arena_resource_return_block): the arena
 * refuses them, changing nothing: GMR_ERR_FREE_MISMATCH for a live block
 * freed with another size or alignment; GMR_ERR_DOUBLE_FREE for the start of
 * a block that was freed already (by the caller, or by a reset or rewind), or
 * an id whose block is gone; GMR_ERR_UNKNOWN_POINTER for any other pointer or
 * id. With UNCAPTURED_FORWARD, a pointer outside the arena's chunks goes to
 * the upstream, which judges it, unless no forwarded block is live: then it
 * cannot be one, and it is GMR_ERR_UNKNOWN_POINTER without asking the
 * upstream (which may keep no books). A free on another stream than the
 * allocation's is accepted (stream-ordered semantics); under ORDERED_REUSE
 * its bytes are reused only on that stream.
 *
 * record_stream (gmr_resource_record_stream; PyTorch's Tensor.record_stream): a block
 * of a graph memory that another stream also uses is not reused while that
 * stream may still run: freed while a session appends to its memory, its
 * bytes wait for that session's end (gmr_graph_arena_resource_end_capture,
 * or the end of an automatic session), when the capture has joined every
 * stream it forked (PyTorch defers such frees to the end of the capture);
 * freed with no session open on its memory, they stay with the memory until
 * it is released (the arena makes no event query that could tell when the
 * other stream is done). Uncaptured blocks of the arena need nothing (their
 * bytes come back at a reset or rewind, after the caller synchronised);
 * forwarded blocks (UNCAPTURED_FORWARD) are the upstream's, whose
 * record_stream is called. A pointer that is no live block of the arena is
 * GMR_ERR_UNKNOWN_POINTER.
 * A capture may end while blocks of its graph memory are live: they stay
 * allocated, their bytes kept for the graph until the memory is released.
 *
 * NVTX annotation (config.nvtx_annotate; core/nvtx_mem.h; the pools do the
 * same, gmr/pool_resource.h). Each chunk is an NVTX sub-allocator heap from
 * the moment the upstream gives it until just before it goes back (trim,
 * destroy). A block carved for a request is a region of the bytes asked for
 * (not the rounding), so memcheck reports a kernel that writes past them. A
 * region lives as long as something may legally touch its bytes, and a
 * captured graph touches its blocks at every replay, long after the host
 * freed them. Hence:
 *  - a block served outside sessions loses its region when it is freed,
 *    unless it is freed on a stream that has an open session of this arena
 *    (the free is part of a capture, whose replays may still touch the
 *    block; with automatic detection the arena knows of the session once the
 *    capture has allocated from it): then the region stays until reset or
 *    rewind gives the bytes back;
 *  - a block carved in a session keeps its region while its graph memory
 *    holds its bytes: a free in the capture (MONOTONE: bookkeeping only), or
 *    after it while the memory is held, unregisters nothing. The regions of
 *    the memory's freed blocks go at gmr_graph_arena_resource_release_graph_memory() (or at
 *    the reset that releases an unclaimed memory); a block still live then
 *    keeps its region until it is freed, when its bytes come back;
 *  - ORDERED_REUSE: a block freed into the memory's reuse list (in the
 *    capture or after it) has its region widened to the whole carved range (rounding
 *    included), and a later block of the capture carved from that list gets
 *    no region of its own: the graph's earlier nodes still touch the old
 *    block at replay, and the new block lies inside regions already
 *    registered (an overflow within them is not caught). When the memory is
 *    released, such a block still live gets its own region.
 *  - rewinds in a session keep regions as frees in the capture do; rewinds
 *    and reset outside sessions unregister the regions of the bytes they give
 *    back.
 * Regions never overlap. Requests forwarded to the upstream
 * (UNCAPTURED_FORWARD) are the upstream's blocks: annotate the pool below for
 * them. Both layers annotated (graph_arena(nvtx_annotate=true) > pool(
 * nvtx_annotate=true)) puts the arena's heaps inside the pool's regions; the
 * NVTX headers do not say how a tool treats such nesting, so check that
 * combination under the sanitizer before relying on it. Off (the default),
 * no NVTX call is made; compiled out with GMR_DISABLE_NVTX. The first heap of
 * the process starts NVTX (it loads the tool NVTX_INJECTION64_PATH names). No heap is reset: a
 * chunk's heap holds regions of several graph memories and of uncaptured blocks, so regions go one
 * by one. NVTX calls are host calls into the tool, not CUDA calls: they do not touch a capture.
 *
 * Thread-safe: yes (one internal lock per arena; no CUDA call and no
 * upstream call is made while it is held, except growth, reserve, trim,
 * destroy and sharing (UNCAPTURED_FORWARD: taking at a session's start,
 * giving back at its end and at release); trim, reserve and sharing never
 * happen while a session is open, growth
 * then goes through the upstream's allocate_capturing: other threads of the
 * arena wait for it, as they do for growth outside captures). The
 * forwarding fast path (UNCAPTURED_FORWARD, no capture possible) takes no
 * lock.
 */
#ifndef GMR_GRAPH_ARENA_RESOURCE_H_
#define GMR_GRAPH_ARENA_RESOURCE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a free during capture means (see the banner). */
typedef enum gmr_graph_arena_policy {
  GMR_GRAPH_ARENA_MONOTONE = 0,
  GMR_GRAPH_ARENA_ORDERED_REUSE = 1
} gmr_graph_arena_policy;

/* How the arena learns that a stream captures (see "Detection" above). */
typedef enum gmr_graph_arena_detection {
  /* Explicit sessions first; otherwise ask CUDA on each request. */
  GMR_GRAPH_ARENA_DETECT_AUTO = 0,
  /* Only explicit sessions: no CUDA call at all on the allocation path. A
   * capture the caller did not declare is served as an uncaptured request. */
  GMR_GRAPH_ARENA_DETECT_EXPLICIT = 1,
  /* Explicit sessions first; ask CUDA only while a capture may be under way
   * as far as gmr knows: an explicit session of the arena is open, the
   * calling thread raised a hint (gmr_graph_arena_resource_thread_hint_enter),
   * or the stream has an automatic session. Otherwise no CUDA call. */
  GMR_GRAPH_ARENA_DETECT_HINTED = 2
} gmr_graph_arena_detection;

/* Where requests outside any session go (see the banner). */
typedef enum gmr_graph_arena_uncaptured {
  GMR_GRAPH_ARENA_UNCAPTURED_ARENA = 0,
  GMR_GRAPH_ARENA_UNCAPTURED_FORWARD = 1
} gmr_graph_arena_uncaptured;

typedef struct gmr_graph_arena_resource_config {
  size_t initial_capacity_bytes; /* taken from the upstream at create, one chunk; 0: none */
  size_t chunk_bytes;            /* least growth, in capture too (through the upstream's
                                    allocate_capturing); 0: never grow on demand (nor take
                                    the upstream's free blocks, UNCAPTURED_FORWARD) */
  size_t max_capacity_bytes;     /* all chunks together; SIZE_MAX: no limit */
  size_t alignment;              /* least alignment and size granule; power of two >= 256 */
  gmr_graph_arena_policy capture_policy;
  gmr_graph_arena_detection detection;
  gmr_graph_arena_uncaptured uncaptured;
  /* Describe chunks and blocks to memory checkers through the NVTX memory
   * extension (see "NVTX annotation" in the banner). false: no NVTX call. */
  bool nvtx_annotate;
} gmr_graph_arena_resource_config;

/* Nothing pre-allocated, 64 MiB growth, no limit, 256 B, monotone, automatic
 * detection, uncaptured requests served from the arena, no NVTX annotation. */
#define GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT                                                \
  {                                                                                            \
    0, (size_t)64 << 20, SIZE_MAX, 256, GMR_GRAPH_ARENA_MONOTONE, GMR_GRAPH_ARENA_DETECT_AUTO, \
        GMR_GRAPH_ARENA_UNCAPTURED_ARENA, false                                                \
  }

typedef struct gmr_graph_arena_resource gmr_graph_arena_resource;

/* The memory of one or more captured graphs (a session's result). Opaque;
 * valid from gmr_graph_arena_resource_end_capture() until its last release. */
typedef struct gmr_graph_memory gmr_graph_memory;

/**
 * Create a graph arena over `upstream`, taking `initial_capacity_bytes` from
 * it now.
 *
 * Units: bytes. Ownership: `upstream` is borrowed: it must outlive the arena
 *   and must not be moved; `config` is copied (NULL: the default). The caller
 *   destroys *out with gmr_resource_destroy().
 * Thread-safe: yes (creates an independent object).
 * Stream/device: the initial chunk is one upstream allocation on the default
 *   stream (NULL); with a cuda upstream that is a cudaMalloc. Never call it
 *   during a capture. The CUDA layer active now (real or simulated) is the
 *   one the arena asks about capture for its whole life.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out or upstream is NULL or invalid, alignment is
 *                             not a power of two >= 256, initial capacity above
 *                             the maximum, or an unknown enum value.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the arena, or the upstream had no
 *                             memory for the initial chunk.
 *   other                     what the upstream returned for the initial chunk.
 * On failure *out is NULL and nothing was taken from the upstream.
 * Source: the C# CUDA graph memory pool spec (pre-allocated initial capacity,
 * maximum capacity).
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_create(
    gmr_resource *upstream, const gmr_graph_arena_resource_config *config,
    gmr_graph_arena_resource **out);

/**
 * The gmr_graph_arena_resource's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `arena`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_graph_arena_resource_as_resource(gmr_graph_arena_resource *arena) {
  return (gmr_resource *)(void *)arena;
}

/**
 * The gmr_graph_arena_resource behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "graph_arena_resource") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_graph_arena_resource *gmr_graph_arena_resource_from_resource(gmr_resource *r) {
  return (gmr_graph_arena_resource *)gmr_resource_downcast(r, "graph_arena_resource");
}

/**
 * Grow the arena to at least `capacity_bytes` in all (like a vector's
 * reserve), taking one chunk of the difference from the upstream; nothing if
 * it holds that much already. Use it before a capture with the figure from a
 * CAPTURE_UNSAFE message: a capture that was refused at that capacity fits
 * once the arena has grown to it (from the same state: the refused capture's
 * memory released, the same requests).
 *
 * Units: bytes (the chunk is rounded up to 256). Thread-safe: yes.
 * Stream/device: may call the upstream (a cudaMalloc for a cuda upstream) on
 *   the default stream; refused while any session of this arena is open.
 * Returns:
 *   GMR_OK                    done (nothing taken if the capacity was there).
 *   GMR_ERR_INVALID_ARGUMENT  arena is NULL, or capacity_bytes is 0 or above
 *                             GMR_MAX_ALLOCATION_BYTES.
 *   GMR_ERR_CAPTURE_UNSAFE    a session is open: reserve before capture.
 *   GMR_ERR_OUT_OF_MEMORY     max_capacity_bytes would be exceeded, or the
 *                             upstream or the host has no memory.
 *   other                     what the upstream returned.
 * On failure nothing changed. Source: this library (growth before the
 *   capture keeps every upstream call out of it, the fastest capture, and
 *   the only way when nothing below can allocate during capture);
 *   std::vector::reserve.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_reserve(gmr_graph_arena_resource *arena,
                                                                  size_t capacity_bytes);

/**
 * Open a capture session on `stream` explicitly: from now until
 * gmr_graph_arena_resource_end_capture(), allocations on `stream` are served from the
 * arena without any CUDA call. Call it just before cudaStreamBeginCapture (or
 * gmr_cuda_stream_begin_capture); declaring the session early is harmless.
 *
 * `share` (may be NULL): a graph memory the caller holds; the new session
 * appends to it instead of starting a new one, so several graphs keep one
 * memory (see the policies in the banner). If an automatic session is already
 * open on `stream` and `share` is NULL, it becomes explicit (its allocations
 * so far stay in its memory).
 *
 * Ownership: `share` stays the caller's (its reference count is not changed).
 * Thread-safe: yes.
 * Stream/device: no CUDA call and no upstream call, except with
 *   UNCAPTURED_FORWARD when no other session of the arena is open and the
 *   upstream reports a free block of at least 2 MiB: then one capture query
 *   on `stream` and, if it does not capture yet, the upstream's free blocks
 *   taken through its ordinary allocate on `stream` (see the banner: a pool
 *   may make `stream` wait for other streams, or synchronise, as outside any
 *   capture). Declared after the capture began, nothing is taken.
 * Returns:
 *   GMR_OK                    the session is open.
 *   GMR_ERR_INVALID_ARGUMENT  arena is NULL, stream is NULL (the legacy
 *                             default stream cannot capture), or `share` is
 *                             not a live graph memory of this arena.
 *   GMR_ERR_BUSY              `stream` already has an explicit session, or
 *                             `share` is in use by another open session, or
 *                             `share` was given while an automatic session is
 *                             open on `stream`.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the session.
 * On failure nothing changed (blocks taken from the upstream went back).
 * Taking the upstream's free blocks never fails the call. Source: PyTorch's
 * capture_begin(pool=...) and torch.cuda.graph's empty_cache before it.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_begin_capture(
    gmr_graph_arena_resource *arena, gmr_stream stream, gmr_graph_memory *share);

/**
 * Tell every arena with detection GMR_GRAPH_ARENA_DETECT_HINTED that the
 * calling thread may now make CUDA graph captures it does not declare with
 * gmr_graph_arena_resource_begin_capture() (for example inside a framework's
 * capture context): until the matching leave, requests from this thread on a
 * stream without an explicit session ask CUDA whether the stream captures.
 * Hints nest (a count per thread); they cost nothing to arenas in other modes.
 *
 * Thread-safe: yes (thread-local state); the hint applies to the calling
 * thread only. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT when 2^32 - 1 hints are up
 * (nothing changed).
 * Source: PyTorch's allocator asks CUDA about capture only while a capture it
 * was told of is under way (beginAllocateToPool).
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_thread_hint_enter(void);

/**
 * Take down the calling thread's innermost hint raised by
 * gmr_graph_arena_resource_thread_hint_enter(); with none left, hinted arenas
 * stop asking CUDA about this thread's requests.
 * Thread-safe: yes (thread-local state). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT when no hint is up (nothing
 * changed).
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_thread_hint_leave(void);

/**
 * Close the session on `stream` (explicit or automatic) and give the caller
 * one reference to its graph memory in *out_memory. With no open session on
 * `stream`, claims the most recent unclaimed memory of an automatic session
 * that ended on `stream`. Call it after cudaStreamEndCapture.
 *
 * Ownership: the caller must release the reference with
 *   gmr_graph_arena_resource_release_graph_memory(). A session that appended to a shared
 *   memory gives one more reference to the same memory.
 * Thread-safe: yes.
 * Stream/device: no CUDA call and no upstream call, except with
 *   UNCAPTURED_FORWARD when no session of the arena is left open and a chunk
 *   the arena grew or took is wholly free: then one capture query on `stream`
 *   and, if it no longer captures, those chunks deallocated to the upstream
 *   on `stream` (a failed deallocate keeps the chunk, free, in the arena).
 * Returns:
 *   GMR_OK                    *out_memory is set.
 *   GMR_ERR_INVALID_ARGUMENT  arena or out_memory is NULL, or `stream` has no
 *                             session and no unclaimed memory.
 * On failure *out_memory is NULL (when not NULL) and nothing changed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_end_capture(
    gmr_graph_arena_resource *arena, gmr_stream stream, gmr_graph_memory **out_memory);

/**
 * Drop one reference to `memory`. When the last reference is gone and no
 * session appends to it, its freed blocks go back to the arena's free space
 * (to be handed to anyone); its still-live blocks go back when deallocated.
 *
 * With UNCAPTURED_FORWARD, chunks the arena grew or took that are then
 * wholly free go back to the upstream (deallocated on the default stream)
 * when no session of the arena is open.
 *
 * pre: the graphs that use the memory are destroyed and their last launch
 *   has completed (the arena cannot know).
 * Ownership: `memory` must not be used after its last release.
 * Thread-safe: yes. Stream/device: no CUDA call and no upstream call, but
 *   for the chunks given back with UNCAPTURED_FORWARD (upstream deallocates,
 *   which a cuda upstream makes cudaFree; none while a session is open).
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (arena or memory NULL, memory is not
 * a graph memory of this arena, or no reference is held: an automatic
 * session's unclaimed memory must be claimed first). On failure nothing changed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_release_graph_memory(
    gmr_graph_arena_resource *arena, gmr_graph_memory *memory);

/** What a graph memory holds now. */
typedef struct gmr_graph_memory_info {
  size_t held_bytes;          /* arena bytes kept for it (live blocks, freed blocks) */
  size_t live_bytes;          /* bytes of its blocks not yet deallocated (rounded) */
  size_t live_count;          /* its blocks not yet deallocated */
  uint64_t allocation_count;  /* blocks carved for it, in all its sessions */
  uint64_t session_count;     /* sessions that appended to it */
  uint32_t reference_count;   /* references callers hold */
  bool capturing;             /* a session appends to it now */
} gmr_graph_memory_info;

/**
 * Describe `memory`. Thread-safe: yes (a snapshot). No CUDA call.
 * Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (a NULL argument, or `memory`
 * is not a graph memory of this arena); on failure *out is zeroed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_get_graph_memory_info(
    gmr_graph_arena_resource *arena, const gmr_graph_memory *memory, gmr_graph_memory_info *out);

/** Counters of one arena. The caller sets `size` and `version`
 * (GMR_GRAPH_ARENA_RESOURCE_STATS_INIT); the arena fills what both versions know. */
typedef struct gmr_graph_arena_resource_stats {
  size_t size;            /* sizeof the caller's struct */
  uint32_t version;       /* GMR_GRAPH_ARENA_RESOURCE_STATS_VERSION of the caller */
  size_t held_bytes;      /* all chunks held from the upstream now */
  size_t peak_held_bytes; /* high-water mark of held_bytes */
  size_t chunk_count;
  size_t in_use_bytes;          /* carved and not back in the free space (live, freed
                                   but kept, held by graph memories) */
  size_t peak_in_use_bytes;
  size_t live_bytes;            /* blocks not yet deallocated (rounded sizes) */
  size_t peak_live_bytes;
  size_t live_count;
  uint64_t allocation_count;          /* blocks carved from the arena */
  uint64_t capture_allocation_count;  /* of those, inside sessions */
  uint64_t capture_refusal_count;     /* CAPTURE_UNSAFE answers */
  size_t capture_shortfall_bytes;     /* largest "needs N more" figure given */
  uint64_t forwarded_allocation_count;/* requests given to the upstream (FORWARD) */
  size_t forwarded_live_count;        /* of those, not yet deallocated */
  uint64_t upstream_call_count;       /* every upstream allocate/deallocate */
  uint64_t upstream_call_during_capture_count; /* of those, made while a session of
                                             this arena was open (growth through
                                             allocate_capturing; FORWARD: other
                                             streams' requests) */
  uint64_t upstream_call_in_session_count;     /* made for a stream in a session: only
                                             growth through allocate_capturing */
  size_t open_session_count;
  size_t graph_memory_count;          /* not yet released (unclaimed included) */
  /* ---- version 2 ---- */
  uint64_t capture_growth_count;      /* chunks taken through the upstream's
                                         allocate_capturing (growth while a
                                         capture of this arena was open) */
  /* ---- version 3: sharing the upstream (UNCAPTURED_FORWARD) ---- */
  uint64_t adopted_chunk_count;       /* free blocks of the upstream taken as
                                         chunks when a capture started */
  size_t adopted_bytes;               /* their bytes, in all */
  uint64_t returned_chunk_count;      /* wholly free chunks given back when a
                                         capture ended or a memory was released */
  size_t returned_bytes;              /* their bytes, in all */
} gmr_graph_arena_resource_stats;

#define GMR_GRAPH_ARENA_RESOURCE_STATS_VERSION 3u
/* Every field spelled out: C++ warns about partial initialisers. */
#define GMR_GRAPH_ARENA_RESOURCE_STATS_INIT                                                        \
  {sizeof(gmr_graph_arena_resource_stats), GMR_GRAPH_ARENA_RESOURCE_STATS_VERSION, 0, 0, 0, 0, 0,  \
   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/**
 * Read the arena's counters. Thread-safe: yes (a consistent snapshot under the
 * arena's lock; forwarded counters may miss requests in flight). No CUDA call.
 * Returns GMR_OK or GMR_ERR_INVALID_ARGUMENT (a NULL argument, or out->size
 * smaller than the size+version header, or out->version 0; *out unchanged).
 */
GMR_API GMR_NODISCARD gmr_status gmr_graph_arena_resource_get_stats(
    gmr_graph_arena_resource *arena, gmr_graph_arena_resource_stats *out);

/** The configuration the arena was created with (sizes rounded as used).
 * pre: arena is not NULL. Thread-safe: yes. */
GMR_API gmr_graph_arena_resource_config
gmr_graph_arena_resource_get_config(const gmr_graph_arena_resource *arena);

/**
 * "monotone", "ordered_reuse", or "unknown" for another value.
 * Ownership: static string. Thread-safe: yes. Never fails; no CUDA call.
 */
GMR_API const char *gmr_graph_arena_resource_policy_name(gmr_graph_arena_policy policy);

/**
 * Parse "monotone" or "ordered_reuse" into a capture policy.
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (NULL argument or unknown
 * name; on failure *out is unchanged).
 */
GMR_API GMR_NODISCARD gmr_status
gmr_graph_arena_resource_policy_from_name(const char *name, gmr_graph_arena_policy *out);

#ifdef __cplusplus
}
#endif

/* Block ids, reset, checkpoints and rewinds: declared there, included here
 * so that this header still gives the arena's whole API. */
#include "gmr/graph_arena_blocks.h"

#endif /* GMR_GRAPH_ARENA_RESOURCE_H_ */
