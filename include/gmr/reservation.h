/*
 * gmr/reservation.h: reservations in memory spaces, and the strategies that
 * choose the space.
 *
 * A reservation is a promise of `bytes` in one memory space: while it lives,
 * other reservations cannot take those bytes (gmr/memory_space.h says when a
 * reservation fits). Reservations are made through a tier manager
 * (gmr_tier_manager_reserve and friends, gmr/tier_manager.h) and named by an
 * id that is never reused in the manager's life, so a release of an id
 * already released is recognised (GMR_ERR_DOUBLE_FREE) instead of touching
 * someone else's reservation. Ids are plain integers: easy to keep in any
 * language.
 *
 * Enforcement: a GPU or HOST reservation bound to a stream
 * (gmr_reservation_bind_stream) is charged with every allocation made on that
 * stream through the space's resource; a request past its size goes to the
 * reservation's limit policy: fail (GMR_ERR_LIMIT_EXCEEDED), ignore (allowed,
 * counted as an overage), increase (the reservation grows, if the space has
 * room within its reservation limit) or the user's own policy. The limiting
 * adaptor's per-stream limits do the counting (gmr/limiting_adaptor.h).
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
#include "gmr/memory_space.h"
#include "gmr/policy.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_tier_manager gmr_tier_manager;

/* A reservation's id: never 0, never reused by its manager. */
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

/** Exactly `space`. Thread-safe: yes (pure). */
GMR_API gmr_reservation_strategy gmr_reservation_strategy_space(gmr_memory_space_id space);

/** Any space of `tier`. Thread-safe: yes (pure). */
GMR_API gmr_reservation_strategy gmr_reservation_strategy_tier(gmr_tier tier);

/**
 * Any space of the first `count` tiers of `tiers`, in that order (at most
 * GMR_TIER_COUNT are kept). Thread-safe: yes (pure).
 */
GMR_API gmr_reservation_strategy gmr_reservation_strategy_tiers(const gmr_tier *tiers,
                                                                size_t count);

/**
 * A space of `target` to move data from `source` to. Pass target ==
 * source.tier + 1 for the next slower tier. Thread-safe: yes (pure).
 */
GMR_API gmr_reservation_strategy gmr_reservation_strategy_downgrade(gmr_memory_space_id source,
                                                                    gmr_tier target);

/* ---- reservations ------------------------------------------------------- */

/**
 * Give reservation `id` back; its bytes are available to others at once and
 * every waiter is woken. If it is bound, the binding ends first (allocations
 * still live on its stream become untracked bytes of the space).
 * Ownership: the id is dead afterwards. Thread-safe: yes.
 * Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (manager NULL, or id 0 or never
 * given out by this manager); GMR_ERR_DOUBLE_FREE (already released).
 * `failure` (may be NULL) receives a message on failure. Nothing changes on
 * failure.
 */
GMR_API gmr_status gmr_reservation_release(gmr_tier_manager *manager, gmr_reservation_id id,
                                           gmr_failure *failure);

/**
 * Grow reservation `id` by `bytes`, without waiting: it must fit now (used +
 * bytes <= reservation limit of its space). A bound reservation's stream may
 * allocate the new bytes at once.
 * Thread-safe: yes. No CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL manager, unknown or released
 * id, bytes 0); GMR_ERR_UNSUPPORTED (a DISK
 * reservation: fixed size, as cuCascade's); GMR_ERR_LIMIT_EXCEEDED (does not
 * fit now); GMR_ERR_SHUTDOWN (the manager is shut down). Nothing changes on
 * failure; `failure` (may be NULL) receives a message.
 */
GMR_API gmr_status gmr_reservation_grow(gmr_tier_manager *manager, gmr_reservation_id id,
                                        size_t bytes, gmr_failure *failure);

/**
 * Shrink reservation `id` to `new_bytes` (1 ..its size), giving the rest back
 * (waiters are woken). A bound reservation cannot shrink below what its
 * stream holds now.
 * Thread-safe: yes; an allocation on the bound stream racing the shrink may
 * take its stream past the new size (it is then refused more until frees).
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL manager, unknown or released
 * id, new_bytes 0 or above the size); GMR_ERR_UNSUPPORTED (DISK); GMR_ERR_BUSY (new_bytes below the bytes
 * allocated on the bound stream). Nothing changes on failure.
 */
GMR_API gmr_status gmr_reservation_shrink(gmr_tier_manager *manager, gmr_reservation_id id,
                                          size_t new_bytes, gmr_failure *failure);

/**
 * Bind reservation `id` to `stream`: from now on every allocation on
 * `stream` through its space's resource is charged to the reservation, and
 * requests past it go to `on_limit` (NULL: the space's default policy; the
 * struct is copied, its ctx borrowed, its release never called).
 *
 * Allocations `stream` made before stay untracked (see the banner).
 * Thread-safe: yes; allocations on `stream` racing the bind may be counted
 * on either side of it. Stream/device: no CUDA call; `stream` is only a key.
 * Returns:
 *   GMR_OK
 *   GMR_ERR_INVALID_ARGUMENT  NULL manager, unknown or released id, an
 *                             invalid policy.
 *   GMR_ERR_UNSUPPORTED       a DISK reservation (nothing to allocate).
 *   GMR_ERR_BUSY              the reservation is bound already; the stream is
 *                             bound to another reservation; or the space has
 *                             no stream slot left (max_stream_slots).
 * Nothing changes on failure; `failure` (may be NULL) says which.
 */
GMR_API gmr_status gmr_reservation_bind_stream(gmr_tier_manager *manager, gmr_reservation_id id,
                                               gmr_stream stream, const gmr_limit_policy *on_limit,
                                               gmr_failure *failure);

/**
 * End the binding of reservation `id` (allocations still live on its stream
 * become untracked). Unbinding an unbound reservation is a no-op.
 * Thread-safe: yes. Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL manager,
 * unknown or released id).
 */
GMR_API gmr_status gmr_reservation_unbind_stream(gmr_tier_manager *manager,
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
  uint64_t raise_count;    /* times its limit policy grew it */
  uint64_t overage_count;  /* requests its policy let past it */
  uint64_t refusal_count;  /* requests its policy refused */
  char path[GMR_RESERVATION_PATH_BYTES]; /* DISK: "<mount>/gmr-<pid>-<id>.bin"; else "" */
} gmr_reservation_info;

#define GMR_RESERVATION_INFO_VERSION 1u
#define GMR_RESERVATION_INFO_INIT                                                         \
  {sizeof(gmr_reservation_info), GMR_RESERVATION_INFO_VERSION, 0, {GMR_TIER_GPU, 0}, 0, 0, \
   false, NULL, 0, 0, 0, {0}}

/**
 * Describe reservation `id`. Thread-safe: yes (a snapshot).
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL, bad header, unknown or
 * released id).
 */
GMR_API gmr_status gmr_reservation_get_info(gmr_tier_manager *manager, gmr_reservation_id id,
                                            gmr_reservation_info *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_RESERVATION_H_ */
