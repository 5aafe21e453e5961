/*
 * gmr/nccl/chunk_listener_adaptor.h: an adaptor that tells listeners about every
 * block its upstream hands out and every block it gives back, so code that
 * must follow a pool's memory (register it with NCCL, with an RDMA NIC, pin
 * it for a profiler) needs no hook inside the pool.
 *
 * Put it between a sub-allocator and the memory below it:
 *
 *     pool > chunk_listener > cumem(nccl_ready=true)
 *
 * Every allocation that passes through is a chunk of the pool above. After
 * the upstream has handed out a chunk and before the pool sees it, each
 * listener's on_acquired is called; before a chunk goes back upstream (the
 * pool's trim, release before growth, destroy), each listener's
 * on_releasing is. A listener added later is told about every chunk that is
 * live at that moment, in address order, and a listener removed is told
 * that each goes, so a listener always sees acquired/releasing in pairs.
 *
 * Refusals: a listener that returns a status other than GMR_OK from
 * on_acquired refuses the chunk: the listeners that accepted it are told it
 * goes (on_releasing, in reverse order), the chunk goes back upstream and
 * the allocation fails with the listener's status and message. A refusal
 * from on_releasing stops the release: the listeners already told are told
 * on_acquired again, the chunk stays live and deallocate returns the
 * status (nothing was released; a pool keeps the chunk and reports the
 * status from its trim). gmr/nccl/nccl.h uses this to never give memory back to
 * the driver while NCCL still has it registered.
 *
 * In-place growth (the vtable's extend slot) is not offered, so a chunk
 * never changes size: a pool above takes a new chunk instead.
 *
 * Bad frees: a pointer that is not a live chunk is GMR_ERR_UNKNOWN_POINTER
 * (GMR_ERR_DOUBLE_FREE for one freed through this adaptor since it was last
 * handed out), a size or alignment other than the chunk's
 * GMR_ERR_FREE_MISMATCH; nothing is forwarded and no listener is told then
 * (a bad free never deregisters memory from NCCL).
 *
 * Callbacks run with the adaptor's lock held, serialised with each other
 * and with add/remove; they must not call back into this adaptor (they may
 * call anything else). allocate calls the upstream without the lock;
 * deallocate holds it across the upstream's free, so no listener ever sees a
 * chunk come back before it was told it went.
 *
 * Source: RMM's callback_memory_resource (callbacks around allocate and
 * deallocate) and PyTorch's allocator trace hooks, which
 * ProcessGroupNCCL uses to register and deregister caching-allocator
 * segments with NCCL (TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK).
 *
 * Thread-safe: yes (internal mutex). Create and destroy are not.
 */
#ifndef GMR_CHUNK_LISTENER_ADAPTOR_H_
#define GMR_CHUNK_LISTENER_ADAPTOR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_chunk_listener_adaptor gmr_chunk_listener_adaptor;

#define GMR_CHUNK_LISTENER_VERSION 1u

/* Most listeners one adaptor keeps. */
#define GMR_CHUNK_LISTENER_MAX 32

/**
 * What a listener implements. Both functions are required; `ctx` is
 * borrowed and passed back unchanged. `addr`/`bytes` are a whole chunk as
 * the upstream handed it out (bytes as requested of the upstream). A
 * refusal writes a sentence into failure->message (failure is never NULL)
 * and returns its status.
 */
typedef struct gmr_chunk_listener {
  uint32_t version; /* GMR_CHUNK_LISTENER_VERSION */
  gmr_status (*on_acquired)(void *ctx, void *addr, size_t bytes, gmr_failure *failure);
  gmr_status (*on_releasing)(void *ctx, void *addr, size_t bytes, gmr_failure *failure);
  void *ctx;
} gmr_chunk_listener;

/**
 * Create an adaptor over `upstream` that tells its listeners (none yet) of
 * every chunk the upstream hands out through it and every chunk it gives
 * back.
 *
 * Units: bytes. Ownership: `upstream` is borrowed: it must outlive the
 *   adaptor and must not be moved. The caller owns *out and destroys it
 *   with gmr_resource_destroy(), which returns GMR_ERR_BUSY while chunks
 *   are live or listeners are attached (they hold the adaptor), changing
 *   nothing; it never destroys the upstream.
 * Thread-safe: yes (it creates an independent object).
 * Stream/device: no CUDA call.
 * Source: RMM's callback_memory_resource; PyTorch's allocator trace hooks.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  upstream is NULL or has no vtable, or out is NULL.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the adaptor.
 * On failure *out is NULL (when out is not NULL) and nothing needs to be
 * destroyed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_chunk_listener_adaptor_create(
    gmr_resource *upstream, gmr_chunk_listener_adaptor **out);

/**
 * The gmr_chunk_listener_adaptor's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `a`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_chunk_listener_adaptor_as_resource(gmr_chunk_listener_adaptor *a) {
  return (gmr_resource *)(void *)a;
}

/**
 * The gmr_chunk_listener_adaptor behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "chunk_listener_adaptor") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_chunk_listener_adaptor *gmr_chunk_listener_adaptor_from_resource(
    gmr_resource *r) {
  return (gmr_chunk_listener_adaptor *)gmr_resource_downcast(r, "chunk_listener_adaptor");
}

/**
 * Attach `listener` (copied) and call its on_acquired for every live chunk,
 * in address order, before returning; from then on it hears of every chunk.
 *
 * Units: *out_id (may be NULL) receives the id that removes it.
 * Ownership: the listener struct is copied; its ctx is borrowed and must
 *   stay valid until the listener is removed. `failure` may be NULL.
 * Thread-safe: yes (under the adaptor's lock, serialised with allocations,
 *   frees and the other listeners' calls).
 * Stream/device: no CUDA call of its own; the listener's calls may make
 *   some (NCCL registration does).
 * Returns:
 *   GMR_OK                    attached.
 *   GMR_ERR_INVALID_ARGUMENT  a NULL argument, a function missing, version 0.
 *   GMR_ERR_BUSY              GMR_CHUNK_LISTENER_MAX listeners are attached.
 *   GMR_ERR_OUT_OF_MEMORY     host memory.
 *   other                     the listener refused a live chunk (its status
 *                             and message in *failure, which may be NULL).
 * On failure the listener is not attached and was told on_releasing for
 * every chunk it had accepted during the call.
 */
GMR_API GMR_NODISCARD gmr_status gmr_chunk_listener_adaptor_add_listener(
    gmr_chunk_listener_adaptor *a, const gmr_chunk_listener *listener, uint32_t *out_id,
    gmr_failure *failure);

/**
 * Detach the listener `id`, calling its on_releasing for every live chunk
 * first (address order), so that it sees acquired/releasing in pairs.
 * Ownership: the listener's ctx is no longer used once GMR_OK is returned.
 *   `failure` (may be NULL) receives the reason of a failure.
 * Thread-safe: yes (under the adaptor's lock).
 * Stream/device: no CUDA call of its own; the listener's calls may make
 *   some (NCCL deregistration does).
 * Returns:
 *   GMR_OK                    detached.
 *   GMR_ERR_INVALID_ARGUMENT  a is NULL, or no listener has that id.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the list of chunks.
 *   other                     the listener refused to let a chunk go (its
 *                             status and message in *failure).
 * On failure the listener stays attached; after a refusal it was told
 * on_acquired again for the chunks it had already released in this call.
 */
GMR_API GMR_NODISCARD gmr_status gmr_chunk_listener_adaptor_remove_listener(
    gmr_chunk_listener_adaptor *a, uint32_t id, gmr_failure *failure);

/* One live chunk. */
typedef struct gmr_chunk {
  void *addr;
  size_t bytes;
} gmr_chunk;

/**
 * List the live chunks in address order: up to `capacity` into `out` (may
 * be NULL with capacity 0) and the total number into *count.
 * Units: chunk sizes in bytes, as asked of the upstream. Ownership: `out`
 *   is the caller's; the chunks stay the adaptor's (a snapshot: they may be
 *   given back once the call returns).
 * Thread-safe: yes (a snapshot under the adaptor's lock).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *count is set (also when capacity was too
 *                             small: the first `capacity` are in out).
 *   GMR_ERR_INVALID_ARGUMENT  a or count is NULL, or out is NULL with
 *                             capacity > 0.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for sorting the list.
 * On failure *count and out are unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_chunk_listener_adaptor_get_chunks(
    gmr_chunk_listener_adaptor *a, gmr_chunk *out, size_t capacity, size_t *count);

#define GMR_CHUNK_LISTENER_ADAPTOR_STATS_VERSION 1u

typedef struct gmr_chunk_listener_adaptor_stats {
  size_t size;      /* sizeof as the caller knows it */
  uint32_t version; /* GMR_CHUNK_LISTENER_ADAPTOR_STATS_VERSION */
  size_t chunk_count;            /* live chunks */
  size_t chunk_bytes;            /* their bytes */
  size_t listener_count;
  uint64_t acquired_count;       /* chunks handed out (accepted by every listener) */
  uint64_t released_count;       /* chunks given back upstream */
  uint64_t refused_acquire_count; /* allocations a listener refused */
  uint64_t refused_release_count; /* deallocations a listener refused */
} gmr_chunk_listener_adaptor_stats;

#define GMR_CHUNK_LISTENER_ADAPTOR_STATS_INIT                                                      \
  {sizeof(gmr_chunk_listener_adaptor_stats), GMR_CHUNK_LISTENER_ADAPTOR_STATS_VERSION, 0, 0, 0, 0, \
   0, 0, 0}

/**
 * Fill *out with a snapshot of the adaptor's counters (the caller set size
 * and version: GMR_CHUNK_LISTENER_ADAPTOR_STATS_INIT; fields past `size` are left
 * alone).
 * Units: bytes, unless a field is named _count. Ownership: *out is the
 *   caller's.
 * Thread-safe: yes (a snapshot under the adaptor's lock).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  a or out is NULL, out->size is smaller than
 *                             the size+version header, or out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_chunk_listener_adaptor_get_stats(
    gmr_chunk_listener_adaptor *a, gmr_chunk_listener_adaptor_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CHUNK_LISTENER_ADAPTOR_H_ */
