/*
 * gmr/tiers/stream_pool.h: a pool of created CUDA streams of one device, lent to
 * one borrower at a time and returned.
 *
 * The pool creates `stream_count` non-blocking streams (default 16) on its
 * device at create. gmr_stream_pool_acquire() lends one that nobody holds;
 * when all are lent it either waits for a return (GMR_STREAM_ACQUIRE_BLOCK,
 * with a timeout) or creates a new stream that joins the pool
 * (GMR_STREAM_ACQUIRE_GROW, up to `max_stream_count`). A lent stream is the
 * borrower's alone until gmr_stream_pool_release(): work queued on it by the
 * borrower may still run after the return, and the next borrower's work is
 * ordered after it (same stream). Streams are lent most recently returned
 * first, so a small working set stays warm.
 *
 * Shutdown (gmr_stream_pool_shutdown): every thread waiting in acquire
 * returns GMR_ERR_SHUTDOWN, and so does every later acquire; returns are
 * still accepted. Destroy synchronises every stream (its queued work
 * completes) and then destroys it; it refuses (GMR_ERR_BUSY) while a stream
 * is lent or a thread waits.
 *
 * Every CUDA call goes through gmr's CUDA layer (real or simulated, the one
 * active at create), with the pool's device made current around it.
 *
 * Source: cuCascade's exclusive_stream_pool (BLOCK and GROW acquire policies,
 * 16 streams per memory space, borrowed_stream handles).
 *
 * Thread-safe: yes (internal mutex; streams are created under it only by
 * GROW). Create and destroy are not thread-safe with other use of the pool.
 */
#ifndef GMR_STREAM_POOL_H_
#define GMR_STREAM_POOL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What acquire does when every stream is lent. */
typedef enum gmr_stream_acquire_policy {
  GMR_STREAM_ACQUIRE_BLOCK = 0, /* wait for a return (or the timeout, or shutdown) */
  GMR_STREAM_ACQUIRE_GROW = 1   /* create one more stream (up to max_stream_count) */
} gmr_stream_acquire_policy;

/* cuCascade's default number of streams per memory space. */
#define GMR_STREAM_POOL_DEFAULT_COUNT 16u

typedef struct gmr_stream_pool_config {
  int device;              /* device ordinal, or -1 for the current device at create */
  size_t stream_count;     /* streams created at create (0 is allowed: GROW makes them) */
  size_t max_stream_count; /* GROW stops here (then it blocks like BLOCK); 0: no maximum */
} gmr_stream_pool_config;

#define GMR_STREAM_POOL_CONFIG_DEFAULT {-1, GMR_STREAM_POOL_DEFAULT_COUNT, 0u}

typedef struct gmr_stream_pool gmr_stream_pool;

/**
 * Create a pool and its `stream_count` streams on `device`.
 * Units: counts. Ownership: `config` is copied (NULL: the default); the caller
 *   destroys *out with gmr_stream_pool_destroy(); the streams stay the pool's.
 * Thread-safe: yes (it creates an independent object).
 * Source: cuCascade's exclusive_stream_pool.
 * Stream/device: stream_count cudaStreamCreateWithFlags(cudaStreamNonBlocking)
 *   calls with `device` current (restored afterwards). No synchronisation.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out NULL, device out of range, or
 *                             max_stream_count below stream_count (when set).
 *   GMR_ERR_OUT_OF_MEMORY     host memory, or CUDA could not create a stream.
 *   GMR_ERR_CUDA              another CUDA failure (no GPU and no simulation).
 * On failure *out is NULL and every stream created on the way is destroyed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stream_pool_create(const gmr_stream_pool_config *config,
                                                        gmr_stream_pool **out);

/**
 * Synchronise and destroy every stream, then the pool. NULL is a no-op.
 * Ownership: every stream of the pool is destroyed; a handle the caller
 *   kept is dangling afterwards.
 * Thread-safe: no (no other thread may use the pool during or after it).
 * Stream/device: cudaStreamSynchronize for every stream first, then
 *   cudaStreamDestroy for each, with the pool's device current.
 * Returns:
 *   GMR_OK                    destroyed (or pool was NULL).
 *   GMR_ERR_BUSY              a stream is lent or a thread waits in acquire.
 *   GMR_ERR_CUDA, GMR_ERR_CAPTURE_UNSAFE
 *                             a synchronisation failed.
 * On failure nothing was destroyed: the pool is still valid and destroy
 * may be tried again.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stream_pool_destroy(gmr_stream_pool *pool);

/**
 * Lend a stream to the caller, who must give it back with
 * gmr_stream_pool_release() and must not destroy it (cuCascade's
 * acquire_stream).
 *
 * Ownership: *out_stream is lent: the caller's alone until released.
 * Units: timeout_ns in nanoseconds (GMR_WAIT_FOREVER of
 *   gmr/tiers/notification_channel.h: no limit; 0: do not wait); it applies to BLOCK,
 *   and to GROW once max_stream_count is reached.
 * Thread-safe: yes. Stream/device: GROW may create a stream (a CUDA call with
 *   the pool's device current); BLOCK never calls CUDA.
 * Returns:
 *   GMR_OK                    *out_stream is a stream nobody else holds.
 *   GMR_ERR_INVALID_ARGUMENT  pool or out_stream NULL, unknown policy.
 *   GMR_ERR_TIMEOUT           all streams stayed lent for timeout_ns.
 *   GMR_ERR_SHUTDOWN          the pool is shut down (also when it shut down
 *                             while the caller waited).
 *   GMR_ERR_OUT_OF_MEMORY, GMR_ERR_CUDA  GROW could not create a stream.
 * On failure *out_stream is NULL (when not NULL) and nothing was lent.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stream_pool_acquire(gmr_stream_pool *pool,
                                                         gmr_stream_acquire_policy policy,
                                                         uint64_t timeout_ns,
                                                         gmr_stream *out_stream);

/**
 * Give back a stream lent by gmr_stream_pool_acquire(); work queued on it
 * keeps running. Wakes one waiter. Accepted after shutdown too.
 * Ownership: the stream is the pool's again; the caller must not use it.
 * Thread-safe: yes (any thread may return it). Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    returned.
 *   GMR_ERR_INVALID_ARGUMENT  pool is NULL, or `stream` is not a stream of
 *                             this pool.
 *   GMR_ERR_DOUBLE_FREE       a stream of this pool that is not lent now
 *                             (returned twice).
 * On failure nothing changed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stream_pool_release(gmr_stream_pool *pool, gmr_stream stream);

/**
 * Refuse further acquires and wake every waiter with GMR_ERR_SHUTDOWN;
 * lent streams stay lent and may still be returned. Idempotent.
 * Thread-safe: yes (call it from any thread while others wait).
 * Stream/device: no CUDA call; never blocks beyond the pool's mutex.
 * Returns:
 *   GMR_OK                    shut down (also when it already was).
 *   GMR_ERR_INVALID_ARGUMENT  pool is NULL (nothing changed).
 */
GMR_API GMR_NODISCARD gmr_status gmr_stream_pool_shutdown(gmr_stream_pool *pool);

/**
 * The pool's device ordinal (resolved at create); -1 for NULL.
 * Thread-safe: yes (fixed at create). Stream/device: no CUDA call.
 */
GMR_API int gmr_stream_pool_get_device(const gmr_stream_pool *pool);

/* Counters of a stream pool; the caller sets size and version. */
typedef struct gmr_stream_pool_stats {
  size_t size;
  uint32_t version;
  size_t stream_count;      /* streams the pool holds (lent or not) */
  size_t lent_count;        /* lent now */
  size_t peak_lent_count;   /* high-water mark of lent_count */
  size_t waiter_count;      /* threads waiting in acquire now */
  uint64_t acquire_count;   /* successful acquires */
  uint64_t wait_count;      /* acquires that had to wait */
  uint64_t grow_count;      /* streams created by GROW */
  uint64_t timeout_count;   /* acquires that ended in GMR_ERR_TIMEOUT */
  uint64_t shutdown_count;  /* acquires refused or woken by shutdown */
  uint64_t wait_ns;         /* total time spent waiting in acquire */
} gmr_stream_pool_stats;

#define GMR_STREAM_POOL_STATS_VERSION 1u
#define GMR_STREAM_POOL_STATS_INIT \
  {sizeof(gmr_stream_pool_stats), GMR_STREAM_POOL_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/**
 * Fill *out with a snapshot of the pool's counters (the caller set size and
 * version: GMR_STREAM_POOL_STATS_INIT; fields past `size` are left alone).
 * Units: counts (_count), nanoseconds (_ns).
 * Thread-safe: yes (a snapshot under the pool's mutex).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  pool or out is NULL, out->size is smaller than
 *                             the size+version header, or out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stream_pool_get_stats(gmr_stream_pool *pool,
                                                           gmr_stream_pool_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STREAM_POOL_H_ */
