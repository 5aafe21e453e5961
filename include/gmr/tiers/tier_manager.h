/*
 * gmr/tiers/tier_manager.h: the memory reservation manager of a machine's memory
 * tiers (GPU, HOST, DISK): it owns the memory spaces (gmr/tiers/memory_space.h),
 * makes reservations in them by strategy (gmr/tiers/reservation.h), blocks
 * requests that do not fit until memory is given back, and shuts down.
 *
 * Typical use (an out-of-core engine's task):
 *
 *   gmr_reservation_strategy where = gmr_reservation_strategy_tiers(gpu_then_host, 2);
 *   gmr_reservation_id r = 0;
 *   st = gmr_tier_manager_reserve(m, &where, task_bytes, timeout_ns, &r, &failure);
 *   gmr_reservation_bind_stream(m, r, stream, NULL, &failure);
 *   ... gmr_resource_allocate(gmr_memory_space_as_resource(space), ..., stream, &p) ...
 *   gmr_reservation_release(m, r, NULL);
 *
 * and, elsewhere, a mover that polls gmr_memory_space_poll_downgrade() and
 * moves data to a space chosen with gmr_reservation_strategy_downgrade().
 *
 * Waiting: gmr_tier_manager_reserve() blocks while the request fits in no
 * candidate space now but could fit once memory is given back; it wakes on
 * every release, shrink, and free through a space's resource while someone
 * waits (the manager's notification channel), and checks again. It fails at
 * once when the request is larger than any candidate's reservation limit
 * (it would never fit), at the timeout (GMR_ERR_TIMEOUT), and at shutdown
 * (GMR_ERR_SHUTDOWN, also for waiters woken by it).
 *
 * Shutdown (gmr_tier_manager_shutdown): wakes every waiter (reservations and
 * stream pools) with GMR_ERR_SHUTDOWN and refuses new reservations and
 * streams; live reservations stay valid and can still be released, lent
 * streams returned, memory freed. Destroy refuses (GMR_ERR_BUSY, nothing
 * changed) while reservations live, streams are lent, threads wait, or
 * memory allocated through a space is live; otherwise it synchronises and
 * destroys every stream, then every space's allocator stack.
 *
 * Where gmr differs from cuCascade, on purpose:
 *  - A reservation never outlives its manager (cuCascade lets a reservation
 *    handle outlive its manager): see gmr_tier_manager_destroy().
 *  - Reservations' default limit policy is `fail`, not `ignore`: see
 *    gmr_memory_space_config_default().
 *  - Capacities are checked at create: above
 *    GMR_MEMORY_SPACE_MAX_CAPACITY_BYTES, or for GPU above the device's
 *    memory, they are refused (cuCascade takes any value).
 * And where it follows cuCascade: reserve_up_to with nothing available gives
 * a reservation of 0 bytes that can grow; a bound stream's request past both
 * its reservation and the capacity goes to the reservation's policy first.
 *
 * Source: cuCascade's memory_reservation_manager (request_reservation with
 * strategies, waiting on a condition variable until a reservation is
 * released, notification_channel shutdown).
 *
 * Thread-safe: yes (one mutex for the reservation books of all spaces; the
 * allocation path does not take it). Create and destroy are not thread-safe
 * with other use of the manager.
 */
#ifndef GMR_TIER_MANAGER_H_
#define GMR_TIER_MANAGER_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/tiers/memory_space.h"
#include "gmr/tiers/notification_channel.h"
#include "gmr/tiers/reservation.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most spaces one manager holds. */
#define GMR_TIER_MANAGER_MAX_SPACES 64

/**
 * Create a manager with one memory space per config, building each space's
 * allocator stack and stream pool.
 *
 * Units: bytes. Ownership: `configs` is copied (the on_oom policies become
 *   the spaces', released at destroy); `upstream` resources of GPU configs
 *   are borrowed and must outlive the manager. The caller destroys *out with
 *   gmr_tier_manager_destroy().
 * Thread-safe: yes (it creates an independent object).
 * Source: cuCascade's memory_reservation_manager and memory_space.
 * Stream/device: builds GPU stacks with the space's device current (a
 *   cuda(kind=async) stack creates a cudaMemPool_t), creates streams, takes
 *   HOST chunks (pinned host memory, cudaHostRegister), reads /sys and
 *   statvfs() for capacities left at 0. Never synchronises.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out NULL, count 0 or above
 *                             GMR_TIER_MANAGER_MAX_SPACES, two configs with
 *                             the same id, an unknown tier, a bad fraction
 *                             (outside (0,1], or stop above trigger), a
 *                             capacity that cannot be detected, a capacity
 *                             that cannot be real (above
 *                             GMR_MEMORY_SPACE_MAX_CAPACITY_BYTES = INT64_MAX
 *                             / 2, SIZE_MAX among them), a GPU capacity above
 *                             the device's total memory (cudaMemGetInfo; no
 *                             override: a space cannot promise memory the
 *                             device does not have), a bad spec or block
 *                             size, a DISK config without mount path, a GPU
 *                             device or NUMA node that does not exist. The
 *                             message names the config, the value and the
 *                             limit it passed.
 *   other                     what building a stack or stream pool returned
 *                             (GMR_ERR_CUDA without a GPU, GMR_ERR_OUT_OF_MEMORY).
 * On failure *out is NULL, everything built on the way is destroyed, the
 * configs' on_oom policies are released (as gmr_oom_adaptor_create does),
 * and `failure` (may be NULL) names the config and the reason.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tier_manager_create(const gmr_memory_space_config *configs,
                                                         size_t count, gmr_tier_manager **out,
                                                         gmr_failure *failure);

/**
 * Destroy the manager, its spaces, their stacks, stream pools and
 * notification channel. NULL is a no-op.
 *
 * Reservations do not outlive their manager: while one lives, destroy
 * refuses with GMR_ERR_BUSY and changes nothing; release every reservation
 * first. cuCascade lets a reservation handle outlive its manager; gmr keeps
 * its rule on purpose: a reservation is an id into the manager's books (no
 * object of its own that could keep the books alive), so after the manager
 * went every call with that id would touch freed memory, and C has no
 * destructor that would release a forgotten reservation. Refusing makes the
 * forgotten release visible where it happens, with the manager intact (its
 * stats' reservation_count says how many live).
 * Ownership: every space, stream and stack the manager made is destroyed;
 *   the borrowed upstreams of GPU configs are not.
 * Thread-safe: no (no other thread may use the manager, its spaces or
 *   their resources during or after the call).
 * Stream/device: synchronises every stream of every pool first (so a CUDA
 *   failure changes nothing), then destroys them; destroying the stacks may
 *   free device and pinned host memory.
 * Returns:
 *   GMR_OK                    destroyed (or manager was NULL).
 *   GMR_ERR_BUSY              reservations live (see above), streams lent,
 *                             threads wait (reserve or a stream pool), or
 *                             allocations are live in a space; the manager's
 *                             stats and the spaces' say which.
 *   GMR_ERR_CUDA, GMR_ERR_CAPTURE_UNSAFE
 *                             a stream could not be synchronised.
 * On failure nothing changed: the manager is still valid and destroy may
 * be tried again.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tier_manager_destroy(gmr_tier_manager *manager);

/**
 * Shut down: wake every waiter (reserve and stream pools) with
 * GMR_ERR_SHUTDOWN and refuse new reservations, grows and streams. Live
 * reservations, lent streams and allocations stay valid. Idempotent.
 * Thread-safe: yes (the point of it: call it from any thread while others
 *   wait). Stream/device: no CUDA call; never blocks.
 * Source: cuCascade's notification_channel shutdown.
 * Returns:
 *   GMR_OK                    shut down (also when it already was).
 *   GMR_ERR_INVALID_ARGUMENT  manager is NULL (nothing changed).
 */
GMR_API GMR_NODISCARD gmr_status gmr_tier_manager_shutdown(gmr_tier_manager *manager);

/**
 * The number of spaces (fixed at create); 0 for NULL.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
GMR_API size_t gmr_tier_manager_get_space_count(const gmr_tier_manager *manager);

/**
 * The space at `index` (creation order, 0-based), or NULL when manager is
 * NULL or index is not below the space count. Borrowed: valid until the
 * manager is destroyed.
 * Thread-safe: yes (the spaces are fixed at create). Stream/device: no CUDA
 *   call.
 */
GMR_API gmr_memory_space *gmr_tier_manager_get_space_at(gmr_tier_manager *manager, size_t index);

/**
 * The space with `id` (tier and index), or NULL when manager is NULL or has
 * no such space. Borrowed: valid until the manager is destroyed.
 * Thread-safe: yes (the spaces are fixed at create). Stream/device: no CUDA
 *   call.
 */
GMR_API gmr_memory_space *gmr_tier_manager_get_space(gmr_tier_manager *manager,
                                                     gmr_memory_space_id id);

/**
 * The manager's notification channel: notified whenever reserved or
 * allocated bytes are given back in any space, so a program can wait for
 * room itself (for instance to move data back up a tier). NULL for NULL.
 * Ownership: borrowed: the manager destroys it.
 * Thread-safe: yes (fixed at create; the channel itself is thread-safe).
 * Stream/device: no CUDA call.
 * Source: cuCascade's notification_channel.
 */
GMR_API gmr_notification_channel *gmr_tier_manager_get_notification_channel(
    gmr_tier_manager *manager);

/**
 * Reserve `bytes` where `strategy` says, waiting up to `timeout_ns` for room.
 *
 * Units: bytes; nanoseconds (GMR_WAIT_FOREVER: no limit; 0: like try_reserve
 *   but counted as a wait that timed out).
 * Ownership: `strategy` is read during the call only; *out_id is the
 *   caller's until gmr_reservation_release().
 * Thread-safe: yes (under the manager's mutex, released while waiting).
 * Stream/device: no CUDA call; may block the calling thread up to
 *   timeout_ns (never the GPU).
 * Source: cuCascade's request_reservation.
 * Returns:
 *   GMR_OK                    *out_id is set.
 *   GMR_ERR_INVALID_ARGUMENT  manager, strategy or out_id NULL; bytes 0; the
 *                             strategy names no space of this manager (an
 *                             unknown space, a tier without spaces, a
 *                             downgrade to a tier that is not slower).
 *   GMR_ERR_LIMIT_EXCEEDED    bytes is above the reservation limit of every
 *                             candidate space: it could never fit.
 *   GMR_ERR_TIMEOUT           it did not fit within timeout_ns.
 *   GMR_ERR_SHUTDOWN          the manager is (or was, while waiting) shut down.
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the bookkeeping.
 * On failure *out_id is 0 and nothing is reserved; `failure` (may be NULL)
 * says what was asked, the limits, and the space(s) tried.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tier_manager_reserve(gmr_tier_manager *manager,
                                                          const gmr_reservation_strategy *strategy,
                                                          size_t bytes, uint64_t timeout_ns,
                                                          gmr_reservation_id *out_id,
                                                          gmr_failure *failure);

/**
 * Reserve `bytes` where `strategy` says if it fits now; never waits
 * (cuCascade's make_reservation_or_null).
 * Units, ownership: as gmr_tier_manager_reserve().
 * Thread-safe: yes (under the manager's mutex).
 * Stream/device: no CUDA call; never blocks beyond the mutex.
 * Returns as gmr_tier_manager_reserve(), with GMR_ERR_LIMIT_EXCEEDED also when
 * it does not fit now (the message says how much is available) and never
 * GMR_ERR_TIMEOUT.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tier_manager_try_reserve(
    gmr_tier_manager *manager, const gmr_reservation_strategy *strategy, size_t bytes,
    gmr_reservation_id *out_id, gmr_failure *failure);

/**
 * Reserve as much as is available now, up to `bytes`, in the first
 * candidate that has all of it, else in the candidate with the most
 * available; never waits (cuCascade's make_reservation_upto).
 *
 * When no candidate has a single byte available, the reservation is made
 * anyway with a size of 0, in the first candidate that is not DISK
 * (cuCascade's behaviour, adopted: gmr used to refuse with
 * GMR_ERR_LIMIT_EXCEEDED). A 0-byte reservation is valid: it can grow later
 * (gmr_reservation_grow, or bound to a stream with an `increase` policy),
 * be bound (every allocation on its stream then goes to its policy) and
 * released. DISK reservations cannot grow, so a DISK candidate never gets
 * one of 0 bytes.
 *
 * Units: bytes; *out_bytes (may be NULL) receives the size reserved
 *   (0..bytes; also 0 on failure: tell them apart by the status).
 * Ownership: as gmr_tier_manager_reserve().
 * Thread-safe: yes (under the manager's mutex).
 * Stream/device: no CUDA call; never blocks beyond the mutex.
 * Returns as gmr_tier_manager_try_reserve(), except that a request above
 * every candidate's limit is not refused (it gets what is available), and
 * GMR_ERR_LIMIT_EXCEEDED means no candidate has a byte available and every
 * candidate is a DISK space. bytes 0 is still GMR_ERR_INVALID_ARGUMENT.
 * On failure *out_id is 0 and nothing is reserved.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tier_manager_reserve_up_to(
    gmr_tier_manager *manager, const gmr_reservation_strategy *strategy, size_t bytes,
    gmr_reservation_id *out_id, size_t *out_bytes, gmr_failure *failure);

/* Counters of a manager; the caller sets size and version. */
typedef struct gmr_tier_manager_stats {
  size_t size;
  uint32_t version;
  size_t space_count;
  size_t reservation_count;       /* live reservations */
  uint64_t reserve_count;         /* successful reservations (all three calls) */
  uint64_t refused_count;         /* LIMIT_EXCEEDED answers */
  uint64_t wait_count;            /* reserve calls that had to wait */
  uint64_t wait_ns;               /* total time they waited */
  uint64_t max_wait_ns;           /* longest single wait */
  uint64_t timeout_count;         /* reserve calls that timed out */
  uint64_t shutdown_count;        /* calls refused or woken by shutdown */
  uint64_t release_count;         /* reservations released */
  uint64_t reserve_latency_ns;    /* total time in successful reserve calls (waits included) */
  uint64_t max_reserve_latency_ns;/* longest successful reserve call */
  size_t waiter_count;            /* threads waiting in reserve now */
  bool shut_down;
  /* ---- version 2 ---- */
  /* Successful reserve calls that found room at once (no wait): what reserving
   * itself costs (the manager's mutex included), apart from waiting for room,
   * which the totals above mix in. */
  uint64_t immediate_reserve_count;
  uint64_t immediate_reserve_latency_ns;     /* their total time */
  uint64_t max_immediate_reserve_latency_ns; /* the longest of them */
} gmr_tier_manager_stats;

#define GMR_TIER_MANAGER_STATS_VERSION 2u
#define GMR_TIER_MANAGER_STATS_INIT                                                           \
  {sizeof(gmr_tier_manager_stats), GMR_TIER_MANAGER_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
   0, 0, 0, 0, false, 0, 0, 0}

/**
 * Fill *out with a snapshot of the manager's counters (the caller set size
 * and version: GMR_TIER_MANAGER_STATS_INIT; fields past `size` are left
 * alone).
 * Units: bytes, nanoseconds (_ns), counts (_count).
 * Thread-safe: yes (a snapshot under the manager's mutex).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  manager or out is NULL, out->size is smaller
 *                             than the size+version header, or
 *                             out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tier_manager_get_stats(gmr_tier_manager *manager,
                                                            gmr_tier_manager_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TIER_MANAGER_H_ */
