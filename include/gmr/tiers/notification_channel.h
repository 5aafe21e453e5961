/*
 * gmr/tiers/notification_channel.h: a channel on which threads wait until memory is
 * given back somewhere (a reservation released or shrunk, an allocation
 * freed), with a shutdown that wakes every waiter.
 *
 * Model: the channel keeps a generation number that every notify raises. A
 * waiter reads the generation, checks its condition (does my reservation fit
 * now?), and if not, waits for a generation other than the one it read. A
 * notify between the read and the wait is therefore never lost: the wait
 * returns at once. The wait says why it returned (gmr_wait_result): NOTIFIED
 * (the generation moved), IDLE (the timeout passed with no notify; the caller
 * checks again or gives up), SHUTDOWN (the channel is shutting down; stop
 * waiting).
 *
 * A notify costs one atomic increment when nobody waits; with waiters it
 * takes the channel's mutex and wakes them all (they re-check their own
 * condition, so waking too many is harmless).
 *
 * Source: cuCascade's notification_channel, event_notifier and wait_status
 * (IDLE, NOTIFIED, SHUTDOWN); the generation count is gmr's, so that a waiter
 * needs no lock of the notifier's.
 *
 * Thread-safe: yes (internal mutex and condition variable; generation and
 * waiter count are atomics). Create and destroy are not thread-safe with
 * other use of the same channel.
 */
#ifndef GMR_NOTIFICATION_CHANNEL_H_
#define GMR_NOTIFICATION_CHANNEL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A timeout that never passes. */
#define GMR_WAIT_FOREVER UINT64_MAX

/* Why a wait returned. */
typedef enum gmr_wait_result {
  GMR_WAIT_IDLE = 0,     /* the timeout passed and nothing was notified */
  GMR_WAIT_NOTIFIED = 1, /* something was given back since the generation read */
  GMR_WAIT_SHUTDOWN = 2  /* the channel is shutting down */
} gmr_wait_result;

typedef struct gmr_notification_channel gmr_notification_channel;

/**
 * Create a channel at generation 0, not shut down.
 * Ownership: the caller destroys *out with gmr_notification_channel_destroy().
 * Thread-safe: yes (it creates an independent object). Stream/device: no
 *   CUDA call.
 * Source: cuCascade's notification_channel.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (out NULL); GMR_ERR_OUT_OF_MEMORY
 * (host memory, or the mutex/condition variable could not be made).
 * On failure *out is NULL (when out is not NULL).
 */
GMR_API GMR_NODISCARD gmr_status gmr_notification_channel_create(gmr_notification_channel **out);

/**
 * Destroy the channel. NULL is a no-op.
 * Ownership: the channel's memory is freed; the caller's handle dangles.
 * Thread-safe: no (no other thread may use the channel after the call).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    destroyed (or channel was NULL).
 *   GMR_ERR_BUSY              a thread is still inside
 *                             gmr_notification_channel_wait() (shut the
 *                             channel down, let the waiters return, then
 *                             destroy).
 * On failure nothing changed: the channel is still valid.
 */
GMR_API GMR_NODISCARD gmr_status gmr_notification_channel_destroy(
    gmr_notification_channel *channel);

/**
 * The generation now: read it before checking the condition you may wait
 * for. 0 for NULL.
 * Thread-safe: yes (an atomic load). Stream/device: no CUDA call.
 */
GMR_API uint64_t gmr_notification_channel_get_generation(const gmr_notification_channel *channel);

/**
 * Raise the generation and wake every waiter. Call it after the memory was
 * given back (after the bookkeeping the waiters check was updated).
 * Thread-safe: yes; cheap when nobody waits (one atomic increment, one load).
 * Stream/device: no CUDA call; never blocks beyond the channel's mutex
 *   (taken only when someone waits).
 * Source: cuCascade's event_notifier.
 * Returns:
 *   GMR_OK                    notified.
 *   GMR_ERR_INVALID_ARGUMENT  channel is NULL (nothing changed).
 */
GMR_API GMR_NODISCARD gmr_status gmr_notification_channel_notify(gmr_notification_channel *channel);

/**
 * Wait until the generation differs from `seen_generation`, the channel
 * shuts down, or `timeout_ns` nanoseconds pass (GMR_WAIT_FOREVER: no limit;
 * 0: do not block, just report). Spurious wake-ups are absorbed: the call
 * returns IDLE only when the timeout has passed.
 *
 * Units: nanoseconds, measured on CLOCK_MONOTONIC.
 * Ownership: *out_result is the caller's.
 * Thread-safe: yes. Stream/device: no CUDA call; blocks the calling thread
 *   (never the GPU).
 * Source: cuCascade's notification_channel wait and wait_status.
 * Returns:
 *   GMR_OK                    *out_result says why it returned.
 *   GMR_ERR_INVALID_ARGUMENT  channel or out_result is NULL.
 * On failure *out_result is untouched and the call did not wait.
 */
GMR_API GMR_NODISCARD gmr_status gmr_notification_channel_wait(gmr_notification_channel *channel,
                                                               uint64_t seen_generation,
                                                               uint64_t timeout_ns,
                                                               gmr_wait_result *out_result);

/**
 * Shut the channel down: every waiter, now and later, returns
 * GMR_WAIT_SHUTDOWN at once. Idempotent.
 * Thread-safe: yes (call it from any thread while others wait).
 * Stream/device: no CUDA call; never blocks beyond the channel's mutex.
 * Source: cuCascade's notification_channel shutdown.
 * Returns:
 *   GMR_OK                    shut down (also when it already was).
 *   GMR_ERR_INVALID_ARGUMENT  channel is NULL (nothing changed).
 */
GMR_API GMR_NODISCARD gmr_status gmr_notification_channel_shutdown(
    gmr_notification_channel *channel);

/**
 * True once gmr_notification_channel_shutdown() was called; false for NULL.
 * Thread-safe: yes (an atomic load). Stream/device: no CUDA call.
 */
GMR_API bool gmr_notification_channel_is_shut_down(const gmr_notification_channel *channel);

/* Counters of a channel. The caller sets size and version
 * (GMR_NOTIFICATION_CHANNEL_STATS_INIT). */
typedef struct gmr_notification_channel_stats {
  size_t size;                /* sizeof the caller's struct */
  uint32_t version;           /* GMR_NOTIFICATION_CHANNEL_STATS_VERSION of the caller */
  uint64_t generation;        /* notifies so far */
  uint64_t wait_count;        /* calls of wait */
  uint64_t notified_count;    /* waits that ended NOTIFIED */
  uint64_t idle_count;        /* waits that ended IDLE (timeout) */
  uint64_t shutdown_count;    /* waits that ended SHUTDOWN */
  size_t waiter_count;        /* threads inside wait now */
  size_t peak_waiter_count;   /* high-water mark of waiter_count */
} gmr_notification_channel_stats;

#define GMR_NOTIFICATION_CHANNEL_STATS_VERSION 1u
#define GMR_NOTIFICATION_CHANNEL_STATS_INIT                                             \
  {sizeof(gmr_notification_channel_stats), GMR_NOTIFICATION_CHANNEL_STATS_VERSION, 0, 0, \
   0, 0, 0, 0, 0}

/**
 * Fill *out with the channel's counters (the caller set size and version:
 * GMR_NOTIFICATION_CHANNEL_STATS_INIT; fields past `size` are left alone).
 * Units: counts (_count); generation is a count of notifies.
 * Thread-safe: yes; counters are read one by one (atomics), so two of them
 *   may disagree by a call in flight.
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  channel or out is NULL, out->size is smaller
 *                             than the size+version header, or
 *                             out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_notification_channel_get_stats(
    const gmr_notification_channel *channel, gmr_notification_channel_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_NOTIFICATION_CHANNEL_H_ */
