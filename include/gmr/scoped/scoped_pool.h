/*
 * gmr/scoped/scoped_pool.h: scoped per-thread pools: every thread gets its own pool
 * per device, lazily, and scopes give back everything allocated inside them
 * at once.
 *
 * Model (AdaptiveArrayPools' task-local pools with checkpoint!/rewind!):
 *  - A registry (gmr_scope_registry) serves pools over one upstream stack per
 *    device (any gmr stack: "pool > cuda(kind=async)", a graph arena, ...).
 *  - gmr_scope_registry_get_pool() returns the calling thread's pool for the
 *    device current in that thread, creating it on first use. A pool is a
 *    gmr_resource (gmr_scoped_pool_as_resource): allocate from it like from
 *    any resource, or stack adaptors on it.
 *  - gmr_scope_enter() opens a scope in the calling thread and returns a
 *    token; gmr_scope_exit(token) gives back every block the thread's pools
 *    handed out since the scope was entered, live or not. Scopes nest. The
 *    same requests in the next iteration get the same addresses (the pool is
 *    a bump arena that rewinds), so code that captures pointers once keeps
 *    seeing them.
 *  - Checkpoints are lazy: entering a scope costs a counter; a pool records
 *    its state (a rewind mark of its graph arena) only when it first
 *    allocates inside a scope deeper than its last mark, so pools a scope
 *    never touches cost nothing at exit, and a pool created inside a scope is
 *    handled like one that existed before (AdaptiveArrayPools' "checkpoint
 *    correction" for pools made in a scope).
 *  - Orphaned checkpoints: exiting scope D while scopes deeper than D are
 *    still open (an early return skipped their exits) closes those too: each
 *    pool rewinds to its oldest mark at depth D or deeper, which is its state
 *    when scope D was entered, and drops every such mark (AdaptiveArrayPools'
 *    orphan cleanup in _rewind_typed_pool!). The count is in the stats.
 *  - Every pool remembers its device and refuses to allocate while another
 *    device is current: GMR_ERR_WRONG_DEVICE with a message that says which
 *    pool to get (AdaptiveArrayPools' per-device pools, device_id).
 *  - gmr_scoped_pool_reset() gives every block back to the pool (memory
 *    kept); gmr_scoped_pool_empty() also gives the pool's memory back to
 *    the upstream (AdaptiveArrayPools' reset! and empty!).
 *  - A thread's pools are emptied and destroyed when the thread exits.
 *
 * Streams: blocks are not stream-ordered. A block given back by a scope exit
 * or a reset is handed out again at once, so work queued on any stream that
 * uses it must be complete (synchronise before leaving the scope; the
 * AdaptiveArrayPools design's "GPU pooling safety rules"). A thread may use
 * its pool on several streams: a scope exit gives back the blocks of every
 * stream. When a request needs a new chunk, the pool takes it from the
 * upstream on the request's stream, so with a stream-ordered upstream such
 * as cuda(kind=async) or a pool the new memory is ordered on the stream that
 * first uses it; a later block of that chunk used on another stream needs
 * that stream ordered after the first (the synchronisation above does it).
 * Not for CUDA graph capture: use graph_arena.
 *
 * Built on graph_arena_resource (gmr/graph_arena_resource.h): each pool is an
 * arena with explicit capture detection (no CUDA call on the allocation
 * path) whose uncaptured requests are carved from the arena, and whose
 * uncaptured checkpoint/rewind marks (gmr_graph_arena_resource_checkpoint_uncaptured,
 * _rewind_uncaptured: every stream's blocks) are the scope marks.
 *
 * Source: AdaptiveArrayPools.jl (CUDA extension design v0.6:
 * get_task_local_cuda_pool, checkpoint!/rewind!/reset!/empty!, orphan cleanup,
 * device_id), on gmr's graph arena.
 *
 * Thread-safe: the registry yes (internal mutex for pool creation and thread
 * exit; lookups are thread-local). A pool allocates, resets and empties only
 * in its own thread (others get GMR_ERR_INVALID_ARGUMENT); any thread may
 * deallocate its blocks. Create and destroy of the registry are not
 * thread-safe with other use.
 */
#ifndef GMR_SCOPED_POOL_H_
#define GMR_SCOPED_POOL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/stack.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_scope_registry_config {
  size_t chunk_bytes;        /* a pool grows by at least this much at a time */
  size_t max_capacity_bytes; /* most one pool holds (SIZE_MAX: no limit); a request
                                that would pass it is GMR_ERR_OUT_OF_MEMORY, its failure
                                record naming the scoped pool and this option */
  size_t alignment;          /* least alignment and size granule: a power of two >= 256 */
} gmr_scope_registry_config;

/* 8 MiB growth, no limit, 256-byte granule. */
#define GMR_SCOPE_REGISTRY_CONFIG_DEFAULT {(size_t)8 << 20, SIZE_MAX, 256u}

typedef struct gmr_scope_registry gmr_scope_registry;
typedef struct gmr_scoped_pool gmr_scoped_pool;

/* An open scope of one thread, as gmr_scope_enter() returned it. */
typedef struct gmr_scope {
  uint32_t depth;  /* 1 for the outermost scope */
  uint64_t serial; /* unique in the registry: a stale token is recognised */
} gmr_scope;

/**
 * Create a registry whose per-thread pools for device d draw from
 * upstreams[d].
 *
 * Units: bytes. Ownership: the upstreams are borrowed and must outlive the
 *   registry (NULL entries: no pools for that device); the array and
 *   `config` (NULL: the default) are copied. Destroy *out with
 *   gmr_scope_registry_destroy().
 * Thread-safe: yes (it creates an independent object).
 * Stream/device: no CUDA call; pools and their memory come at first use.
 * Source: AdaptiveArrayPools' task-local pools (get_task_local_cuda_pool).
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out or upstreams NULL, device_count 0 or above
 *                             64, an upstream that is not a valid resource,
 *                             alignment not a power of two >= 256,
 *                             chunk_bytes 0, or max_capacity_bytes 0.
 *   GMR_ERR_OUT_OF_MEMORY     host memory (or a thread key) for the registry.
 * On failure *out is NULL (when out is not NULL) and nothing needs to be
 * destroyed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scope_registry_create(gmr_resource *const *upstreams,
                                                           size_t device_count,
                                                           const gmr_scope_registry_config *config,
                                                           gmr_scope_registry **out);

/**
 * Create a registry over one stack per device built from `spec`
 * (gmr/stack.h), each with its device current; the registry owns them.
 * Devices past the 64th are not served.
 * Ownership: `spec` and `config` are read during the call; the stacks are
 *   the registry's and go with gmr_scope_registry_destroy().
 * Thread-safe: yes (it creates an independent object; it changes the
 *   calling thread's current device during the call and restores it).
 * Stream/device: builds the stacks (cuda(kind=async) creates a pool per
 *   device); counts devices through the CUDA layer.
 * Returns as gmr_scope_registry_create() (spec NULL is
 * GMR_ERR_INVALID_ARGUMENT), plus GMR_ERR_CUDA when the devices cannot be
 * counted or made current, GMR_ERR_UNSUPPORTED when there is none, and the
 * statuses of gmr_stack_create() with `error` (may be NULL) filled. On
 * failure *out is NULL and nothing stays built.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scope_registry_create_from_spec(
    const char *spec, const gmr_scope_registry_config *config, gmr_scope_registry **out,
    gmr_spec_error *error);

/**
 * Destroy every thread's pools (their memory goes back to the upstreams),
 * then the registry and the stacks it owns. NULL is a no-op.
 * pre: no thread uses the registry or its pools any more. Threads that used
 *   them may still be running or exiting: their exit destructors may run
 *   during or after the destroy (a Python thread's join() returns before
 *   they do); the registry keeps the little memory they need until the last
 *   of them is done.
 * Ownership: the borrowed upstreams of gmr_scope_registry_create() are not
 *   destroyed; the stacks of gmr_scope_registry_create_from_spec() are.
 * Thread-safe: no (with the other calls of the registry).
 * Stream/device: the upstreams' frees (cudaFreeAsync / cudaFree for a cuda
 *   upstream) and the owned stacks' destroy, which may synchronise.
 * Returns:
 *   GMR_OK                    destroyed (or registry was NULL).
 *   GMR_ERR_BUSY              a thread has an open scope, or a pool holds
 *                             live blocks: exit the scopes or reset the
 *                             pools first.
 * On failure nothing changed: the registry is still valid.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scope_registry_destroy(gmr_scope_registry *registry);

/**
 * The calling thread's pool for the device current in this thread, created
 * on first use (AdaptiveArrayPools' get_task_local_cuda_pool).
 * Ownership: the registry's; valid until the thread exits or the registry is
 *   destroyed. Thread-safe: yes (a thread-local lookup; creation takes the
 *   registry's mutex). Stream/device: cudaGetDevice; creating the pool
 *   takes no memory yet.
 * Returns:
 *   GMR_OK                    *out_pool is set.
 *   GMR_ERR_INVALID_ARGUMENT  registry or out_pool is NULL.
 *   GMR_ERR_UNSUPPORTED       the current device is outside the registry, or
 *                             the registry has no upstream for it.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the thread's state or the pool.
 *   GMR_ERR_CUDA              cudaGetDevice failed.
 * On failure *out_pool is NULL (when out_pool is not NULL) and no pool was
 * made.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scope_registry_get_pool(gmr_scope_registry *registry,
                                                             gmr_scoped_pool **out_pool);

/**
 * The calling thread's pool for `device`, whatever device is current,
 * created on first use.
 * Ownership: as gmr_scope_registry_get_pool().
 * Thread-safe: yes (a thread-local lookup; creation takes the registry's
 *   mutex). Stream/device: no CUDA call.
 * Returns as gmr_scope_registry_get_pool(), except that a device outside the
 * registry is GMR_ERR_INVALID_ARGUMENT and GMR_ERR_CUDA never happens.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scope_registry_get_pool_for_device(
    gmr_scope_registry *registry, int device, gmr_scoped_pool **out_pool);

/**
 * Open a scope in the calling thread (AdaptiveArrayPools' checkpoint!, for
 * all the thread's pools at once, lazily).
 * Ownership: *out_scope is a token the caller passes to gmr_scope_exit().
 * Thread-safe: yes (thread-local state). Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out_scope is set.
 *   GMR_ERR_INVALID_ARGUMENT  registry or out_scope is NULL.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the thread's state.
 * On failure no scope was opened and *out_scope is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scope_enter(gmr_scope_registry *registry,
                                                 gmr_scope *out_scope);

/**
 * Close `scope` and every scope opened after it in this thread (orphans),
 * giving back every block the thread's pools handed out since `scope` was
 * entered (AdaptiveArrayPools' rewind!).
 * pre: no queued work still uses those blocks.
 * Units: *out_released_count (may be NULL): live blocks given back (0 on
 *   failure).
 * Thread-safe: yes (the calling thread's pools only). Stream/device: no CUDA
 *   call, no upstream call.
 * Returns:
 *   GMR_OK                    closed.
 *   GMR_ERR_INVALID_ARGUMENT  registry is NULL, or `scope` is not open in this
 *                             thread (exited already, or another thread's).
 *   GMR_ERR_OUT_OF_MEMORY     host memory for a pool's bookkeeping.
 * After GMR_ERR_OUT_OF_MEMORY the scope stays open and the pool that failed
 * is unchanged, but pools of lower device numbers may already be rewound:
 * calling exit again finishes the job.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scope_exit(gmr_scope_registry *registry, gmr_scope scope,
                                                size_t *out_released_count);

/**
 * Depth of the calling thread's innermost open scope (0: none, or registry
 * NULL).
 * Thread-safe: yes (thread-local state). Stream/device: no CUDA call.
 */
GMR_API uint32_t gmr_scope_get_depth(gmr_scope_registry *registry);

/**
 * The pool's resource, for the generic calls (NULL for NULL); borrowed like
 * the pool (gmr_resource_destroy() on it is GMR_ERR_UNSUPPORTED).
 * Allocation statuses beyond the upstream's: GMR_ERR_WRONG_DEVICE (another
 * device is current), GMR_ERR_INVALID_ARGUMENT (another thread's pool),
 * GMR_ERR_OUT_OF_MEMORY (past max_capacity_bytes, or host memory for the
 * bookkeeping). A refusal of the pool itself is recorded as the pool's
 * (failure.where is this resource, the message starts "scoped_pool" and, past
 * the capacity, names gmr_scope_registry_config.max_capacity_bytes), never
 * as the graph arena's it is built on; an upstream's failure keeps the
 * upstream's record. Nothing is allocated on failure (a scope mark the
 * request set stays: it marks the pool as it was).
 * Thread-safe: yes. Stream/device: no CUDA call.
 * A cast (the gmr_scoped_pool starts with its gmr_resource), so no call.
 */
static inline gmr_resource *gmr_scoped_pool_as_resource(gmr_scoped_pool *pool) {
  return (gmr_resource *)(void *)pool;
}

/**
 * The device the pool belongs to (-1 for NULL).
 * Thread-safe: yes (fixed at create). Stream/device: no CUDA call.
 */
GMR_API int gmr_scoped_pool_get_device(const gmr_scoped_pool *pool);

/**
 * Give every block of the pool back to it at once, live or not, and drop
 * its scope marks; the memory stays in the pool (AdaptiveArrayPools'
 * reset!). Scopes stay open (a later exit rewinds nothing of this pool).
 * pre: no queued work uses the pool's blocks.
 * Units: *out_released_count (may be NULL): live blocks given back (0 on
 *   failure).
 * Thread-safe: the pool's own thread only (others get
 *   GMR_ERR_INVALID_ARGUMENT). Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    reset.
 *   GMR_ERR_INVALID_ARGUMENT  pool is NULL, or another thread's pool.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the arena's bookkeeping.
 * On failure nothing changed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scoped_pool_reset(gmr_scoped_pool *pool,
                                                       size_t *out_released_count);

/**
 * gmr_scoped_pool_reset(), then give the pool's memory back to its upstream
 * (AdaptiveArrayPools' empty!, which the design notes does not itself return
 * VRAM; here it does, through the upstream's deallocate).
 * Units: *out_released_bytes (may be NULL): bytes given back upstream.
 * Thread-safe: the pool's own thread only. Stream/device: upstream frees
 *   (cudaFreeAsync / cudaFree for a cuda upstream).
 * Returns as gmr_scoped_pool_reset(), and the upstream's failure status.
 * When the reset fails nothing changed; when an upstream free fails the
 * pool is reset, the chunks given back before it are gone (counted in
 * *out_released_bytes) and the others stay in the pool.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scoped_pool_empty(gmr_scoped_pool *pool,
                                                       size_t *out_released_bytes);

/* Counters of a pool; the caller sets size and version. */
typedef struct gmr_scoped_pool_stats {
  size_t size;
  uint32_t version;
  int device;
  size_t held_bytes;            /* taken from the upstream now */
  size_t peak_held_bytes;
  size_t live_bytes;            /* blocks handed out and not given back (rounded) */
  size_t live_count;
  size_t mark_count;            /* scope marks held now */
  uint64_t allocation_count;
  uint64_t rewind_count;        /* scope exits that rewound this pool */
  uint64_t released_count;      /* live blocks given back by exits, resets, empties */
  uint64_t orphan_mark_count;   /* marks of skipped inner exits, cleaned by an outer one */
  uint64_t reset_count;
  uint64_t empty_count;
  uint64_t wrong_device_count;  /* allocations refused with GMR_ERR_WRONG_DEVICE */
} gmr_scoped_pool_stats;

#define GMR_SCOPED_POOL_STATS_VERSION 1u
#define GMR_SCOPED_POOL_STATS_INIT                                                           \
  {sizeof(gmr_scoped_pool_stats), GMR_SCOPED_POOL_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
   0, 0, 0, 0}

/**
 * Fill *out with the pool's counters (the caller set size and version:
 * GMR_SCOPED_POOL_STATS_INIT; fields past `size` are left alone).
 * Units: bytes, unless a field is named _count.
 * Thread-safe: yes (the arena's figures under its lock, the counters as
 *   atomics: a call in flight on the owner thread may be half counted).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  pool or out is NULL, out->size is smaller than
 *                             the size+version header, or out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scoped_pool_get_stats(gmr_scoped_pool *pool,
                                                           gmr_scoped_pool_stats *out);

/* Counters of a registry; the caller sets size and version. */
typedef struct gmr_scope_registry_stats {
  size_t size;
  uint32_t version;
  size_t device_count;
  size_t thread_count;         /* threads with state in the registry now */
  size_t pool_count;           /* pools alive now */
  uint64_t pools_created;      /* in all */
  uint64_t pools_retired;      /* destroyed at their thread's exit */
  uint64_t orphan_scope_count; /* scopes closed by an outer exit */
} gmr_scope_registry_stats;

#define GMR_SCOPE_REGISTRY_STATS_VERSION 1u
#define GMR_SCOPE_REGISTRY_STATS_INIT \
  {sizeof(gmr_scope_registry_stats), GMR_SCOPE_REGISTRY_STATS_VERSION, 0, 0, 0, 0, 0, 0}

/**
 * Fill *out with the registry's counters (the caller set size and version:
 * GMR_SCOPE_REGISTRY_STATS_INIT; fields past `size` are left alone).
 * Units: counts.
 * Thread-safe: yes (a snapshot under the registry's mutex).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  registry or out is NULL, out->size is smaller
 *                             than the size+version header, or
 *                             out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_scope_registry_get_stats(gmr_scope_registry *registry,
                                                              gmr_scope_registry_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_SCOPED_POOL_H_ */
