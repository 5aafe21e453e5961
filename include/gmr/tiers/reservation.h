/*
 * gmr/tiers/reservation.h: reservations in memory spaces, and the strategies that
 * choose the space.
 *
 * A reservation is a promise of `bytes` in one memory space: while it lives,
 * other reservations cannot take those bytes (gmr/tiers/memory_space.h says when a
 * reservation fits). Reservations are made through a tier manager
 * (gmr_tier_manager_reserve and friends, gmr/tiers/tier_manager.h) and named by an
 * id that is never reused in the manager's life, so a release of an id
 * already released is recognised (GMR_ERR_DOUBLE_FREE) instead of touching
 * someone else's reservation. Ids are plain integers: easy to keep in any
 * language.
 *
 * Enforcement: a GPU or HOST reservation bound to a stream
 * (gmr_reservation_bind_stream) is charged with every allocation made on that
 * stream through the space's resource; a request past its size goes to the
 * reservation's limit policy: fail (GMR_ERR_LIMIT_EXCEEDED; the default, see
 * gmr_memory_space_config_default() for why not cuCascade's `ignore`), ignore
 * (allowed, counted as an overage), increase (the reservation grows to the
 * size the policy asks, or as far as the space's reservation limit allows:
 * a growth that falls short of the request is kept, counted as a raise, and
 * the request refused, the message saying by how much it grew) or the
 * user's own policy. The policy is asked before the space's capacity is
 * (cuCascade's order): a request past both its reservation and the capacity
 * first goes to the policy (an `increase` grows the reservation as far as
 * the space allows), then the capacity refuses it. The limiting adaptor's
 * per-stream limits do the counting (gmr/limiting_adaptor.h).
 * A stream is bound to at most one reservation and a reservation to at most
 * one stream. Allocations outlive their reservation: releasing (or
 * unbinding) a reservation whose stream still holds allocations turns them
 * into untracked bytes of the space. A stream may be bound again at any
 * time: what it holds from before stays untracked (the binding's baseline),
 * and freeing it later gives the new reservation no extra room (the space
 * remembers which reservation every live allocation was made under).
 *
 * Strategies (cuCascade's request strategies):
 *   space      that space only;
 *   tier       any space of the tier, the one with the most available first;
 *   tiers      the tiers in the order given (say GPU then HOST), in each the
 *              space with the most available first;
 *   downgrade  a space to move data from `source` to: in the tier given (or
 *              the next slower tier), the source's preferred NUMA node first
 *              (downgrade_numa_node of a GPU space), then the most available.
 *
 * Source: cuCascade's memory_reservation, reserved_arena (device, chunked,
 * disk), reservation limit policies, and request strategies
 * (specific_memory_space, any_memory_space_in_tier(s),
 * any_memory_space_to_downgrade).
 *
 * Thread-safe: yes (the manager's mutex). A reservation may be released from
 * any thread.
 */
#ifndef GMR_RESERVATION_H_
#define GMR_RESERVATION_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/tiers/memory_space.h"
#include "gmr/policy.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_tier_manager gmr_tier_manager;

/* A reservation's id: never 0, never reused by its manager. It names a
 * reservation in the books of the manager that made it and means nothing
 * without that manager: a reservation cannot outlive its manager
 * (gmr_tier_manager_destroy refuses with GMR_ERR_BUSY while one lives;
 * cuCascade's reservation handles may outlive theirs). Release every
 * reservation before destroying the manager. */
typedef uint64_t gmr_reservation_id;

/* ---- strategies --------------------------------------------------------- */

typedef enum gmr_reservation_strategy_kind {
  GMR_RESERVATION_STRATEGY_SPACE = 0,
  GMR_RESERVATION_STRATEGY_TIER = 1,
  GMR_RESERVATION_STRATEGY_TIERS = 2,
  GMR_RESERVATION_STRATEGY_DOWNGRADE = 3
} gmr_reservation_strategy_kind;

/* Where a reservation may go. Build one with the constructors below. */
typedef struct gmr_reservation_strategy {
  gmr_reservation_strategy_kind kind;
  gmr_memory_space_id space;      /* SPACE: the space; DOWNGRADE: the source */
  gmr_tier tiers[GMR_TIER_COUNT]; /* TIER: tiers[0]; TIERS: in order; DOWNGRADE: the target */
  size_t tier_count;              /* TIERS: 1..GMR_TIER_COUNT; DOWNGRADE: 0 = next slower tier */
} gmr_reservation_strategy;

/**
 * A strategy that reserves in exactly `space` (cuCascade's
 * specific_memory_space). The space is looked up when a reservation is
 * made: one the manager lacks is GMR_ERR_INVALID_ARGUMENT there.
 * Ownership: returned by value, no pointer inside.
 * Thread-safe: yes (pure). Stream/device: no CUDA call.
 */
GMR_API gmr_reservation_strategy gmr_reservation_strategy_space(gmr_memory_space_id space);

/**
 * A strategy that reserves in any space of `tier`, the one with the most
 * available first (cuCascade's any_memory_space_in_tier).
 * Ownership: returned by value. Thread-safe: yes (pure). Stream/device: no
 * CUDA call.
 */
GMR_API gmr_reservation_strategy gmr_reservation_strategy_tier(gmr_tier tier);

/**
 * A strategy that reserves in any space of the first `count` tiers of
 * `tiers`, tier by tier in that order (cuCascade's
 * any_memory_space_in_tiers). At most GMR_TIER_COUNT are kept; NULL tiers
 * or count 0 make an empty list, which a reservation refuses with
 * GMR_ERR_INVALID_ARGUMENT.
 * Ownership: `tiers` is copied; the result is returned by value.
 * Thread-safe: yes (pure). Stream/device: no CUDA call.
 */
GMR_API gmr_reservation_strategy gmr_reservation_strategy_tiers(const gmr_tier *tiers,
                                                                size_t count);

/**
 * A strategy that reserves in a space of `target` to move data from
 * `source` to (cuCascade's any_memory_space_to_downgrade): a GPU source's
 * preferred NUMA node first, then the space with the most available. Pass
 * target == source.tier + 1 for the next slower tier; a target that is not
 * slower is refused when a reservation is made.
 * Ownership: returned by value. Thread-safe: yes (pure). Stream/device: no
 * CUDA call.
 */
GMR_API gmr_reservation_strategy gmr_reservation_strategy_downgrade(gmr_memory_space_id source,
                                                                    gmr_tier target);

/* ---- reservations ------------------------------------------------------- */

/**
 * Give reservation `id` back; its bytes are available to others at once and
 * every waiter is woken. If it is bound, the binding ends first (allocations
 * still live on its stream become untracked bytes of the space).
 * Units: an id from gmr_tier_manager_reserve() and friends.
 * Ownership: the id is dead afterwards (never reused by the manager).
 * Thread-safe: yes (under the manager's mutex; from any thread).
 * Stream/device: no CUDA call; never blocks beyond the mutex.
 * Source: cuCascade's memory_reservation release (its destructor).
 * Returns:
 *   GMR_OK                    released.
 *   GMR_ERR_INVALID_ARGUMENT  manager is NULL, or id is 0 or was never given
 *                             out by this manager.
 *   GMR_ERR_DOUBLE_FREE       id was released already.
 * On failure nothing changed; `failure` (may be NULL) receives a message.
 */
GMR_API GMR_NODISCARD gmr_status gmr_reservation_release(gmr_tier_manager *manager,
                                                         gmr_reservation_id id,
                                                         gmr_failure *failure);

/**
 * Grow reservation `id` by `bytes`, without waiting: it must fit now (used +
 * bytes <= reservation limit of its space). A bound reservation's stream may
 * allocate the new bytes at once. A reservation of 0 bytes
 * (gmr_tier_manager_reserve_up_to when nothing was available) grows like
 * any other.
 * Units: bytes.
 * Thread-safe: yes (under the manager's mutex).
 * Stream/device: no CUDA call; never blocks beyond the mutex.
 * Source: cuCascade's reservation grow (reserved_arena).
 * Returns:
 *   GMR_OK                    grown.
 *   GMR_ERR_INVALID_ARGUMENT  manager is NULL, id unknown or released, or
 *                             bytes is 0.
 *   GMR_ERR_UNSUPPORTED       a DISK reservation (fixed size, as cuCascade's).
 *   GMR_ERR_LIMIT_EXCEEDED    it does not fit now (the message says what is
 *                             available), or the size would overflow.
 *   GMR_ERR_SHUTDOWN          the manager is shut down.
 * On failure nothing changed; `failure` (may be NULL) receives a message.
 */
GMR_API GMR_NODISCARD gmr_status gmr_reservation_grow(gmr_tier_manager *manager,
                                                      gmr_reservation_id id, size_t bytes,
                                                      gmr_failure *failure);

/**
 * Shrink reservation `id` to `new_bytes` (1 ..its size), giving the rest back
 * (waiters are woken). A reservation of 0 bytes cannot shrink (release it). A bound reservation cannot shrink below what its
 * stream holds now. Allowed after shutdown (it only gives back).
 * Units: bytes.
 * Thread-safe: yes (under the manager's mutex); an allocation on the bound
 *   stream racing the shrink may take its stream past the new size (it is
 *   then refused more until frees).
 * Stream/device: no CUDA call; never blocks beyond the mutex.
 * Returns:
 *   GMR_OK                    shrunk (new_bytes equal to the size: no change).
 *   GMR_ERR_INVALID_ARGUMENT  manager is NULL, id unknown or released, or
 *                             new_bytes is 0 or above the size.
 *   GMR_ERR_UNSUPPORTED       a DISK reservation (fixed size).
 *   GMR_ERR_BUSY              new_bytes is below the bytes allocated on the
 *                             bound stream (free them first).
 * On failure nothing changed; `failure` (may be NULL) receives a message.
 */
GMR_API GMR_NODISCARD gmr_status gmr_reservation_shrink(gmr_tier_manager *manager,
                                                        gmr_reservation_id id, size_t new_bytes,
                                                        gmr_failure *failure);

/**
 * Bind reservation `id` to `stream`: from now on every allocation on
 * `stream` through its space's resource is charged to the reservation, and
 * requests past it go to `on_limit` (NULL: the space's default policy).
 *
 * Allocations `stream` made before stay untracked (see the banner).
 * Ownership: `on_limit` is copied, its ctx borrowed (it must outlive the
 *   binding), its release never called.
 * Thread-safe: yes (under the manager's mutex); allocations on `stream`
 *   racing the bind may be counted on either side of it.
 * Stream/device: no CUDA call; `stream` is only a key.
 * Source: cuCascade's per_stream_reservation and
 *   reservation_aware_resource_adaptor.
 * Returns:
 *   GMR_OK                    bound.
 *   GMR_ERR_INVALID_ARGUMENT  NULL manager, unknown or released id, an
 *                             invalid policy.
 *   GMR_ERR_UNSUPPORTED       a DISK reservation (nothing to allocate).
 *   GMR_ERR_BUSY              the reservation is bound already; the stream is
 *                             bound to another reservation; or the space has
 *                             no stream slot left (max_stream_slots).
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the binding.
 * Nothing changes on failure; `failure` (may be NULL) says which.
 */
GMR_API GMR_NODISCARD gmr_status gmr_reservation_bind_stream(gmr_tier_manager *manager,
                                                             gmr_reservation_id id,
                                                             gmr_stream stream,
                                                             const gmr_limit_policy *on_limit,
                                                             gmr_failure *failure);

/**
 * End the binding of reservation `id` (allocations still live on its stream
 * become untracked bytes of the space; the reservation keeps its size).
 * Unbinding an unbound reservation is a no-op.
 * Thread-safe: yes (under the manager's mutex).
 * Stream/device: no CUDA call; never blocks beyond the mutex.
 * Returns:
 *   GMR_OK                    unbound (or was not bound).
 *   GMR_ERR_INVALID_ARGUMENT  manager is NULL, or id unknown or released.
 * On failure nothing changed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_reservation_unbind_stream(gmr_tier_manager *manager,
                                                               gmr_reservation_id id);

/* Longest DISK reservation path, terminating NUL included. */
#define GMR_RESERVATION_PATH_BYTES 320

/* What a reservation is now; the caller sets size and version. */
typedef struct gmr_reservation_info {
  size_t size;
  uint32_t version;
  gmr_reservation_id id;
  gmr_memory_space_id space;
  size_t bytes;            /* its size now */
  size_t allocated_bytes;  /* charged to it now (on its bound stream) */
  bool bound;
  gmr_stream stream;       /* the bound stream (NULL when not bound) */
  uint64_t raise_count;    /* times its limit policy grew it (part of the way included) */
  uint64_t overage_count;  /* requests its policy let past it */
  uint64_t refusal_count;  /* requests its policy refused (or grew it too little for) */
  char path[GMR_RESERVATION_PATH_BYTES]; /* DISK: "<mount>/gmr-<pid>-<id>.bin"; else "" */
} gmr_reservation_info;

#define GMR_RESERVATION_INFO_VERSION 1u
#define GMR_RESERVATION_INFO_INIT                                                         \
  {sizeof(gmr_reservation_info), GMR_RESERVATION_INFO_VERSION, 0, {GMR_TIER_GPU, 0}, 0, 0, \
   false, NULL, 0, 0, 0, {0}}

/**
 * Fill *out with what reservation `id` is now (the caller set size and
 * version: GMR_RESERVATION_INFO_INIT; fields past `size` are left alone).
 * Units: bytes, unless a field is named _count.
 * Thread-safe: yes (a snapshot under the manager's mutex; allocations in
 *   flight on the bound stream may not be counted).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  manager or out is NULL, out->size is smaller
 *                             than the size+version header, out->version is
 *                             0, or id is unknown or released.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_reservation_get_info(gmr_tier_manager *manager,
                                                          gmr_reservation_id id,
                                                          gmr_reservation_info *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_RESERVATION_H_ */
