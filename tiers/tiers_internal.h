/*
 * tiers/tiers_internal.h (internal): the structures behind the tier manager,
 * its memory spaces and reservations, shared by memory_space.c,
 * reservation.c and tier_manager.c.
 *
 * Locking: the manager's mutex guards every field marked (M): the
 * reservation books of all spaces and the manager's counters. The
 * allocation path (the space resource, the limiting adaptor below it) never
 * takes it, except the limit policy wrapper (reservation.c), which the
 * limiting adaptor calls without holding any lock of its own.
 */
#ifndef GMR_TIERS_TIERS_INTERNAL_H_
#define GMR_TIERS_TIERS_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/adaptor.h"
#include "util/key_slots.h"
#include "util/u64_map.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/tiers/memory_space.h"
#include "gmr/tiers/notification_channel.h"
#include "gmr/tiers/numa_host_resource.h"
#include "gmr/tiers/reservation.h"
#include "gmr/stack.h"
#include "gmr/tiers/stream_pool.h"
#include "gmr/tiers/tier_manager.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr__tier_reservation {
  gmr_reservation_id id;
  gmr_memory_space *space;
  size_t bytes;           /* (M) */
  bool bound;             /* (M) */
  gmr_stream stream;      /* (M) the bound stream */
  size_t baseline_bytes;  /* (M) what the stream held from before the binding (untracked) */
  uint64_t binding;       /* (M) this binding's serial (never reused); 0 when not bound */
  size_t bound_index;     /* (M) position in space->bound */
  gmr_limit_policy on_limit; /* (M) the bound stream's policy */
  uint64_t raise_count;   /* (M) */
  uint64_t overage_count; /* (M) */
  uint64_t refusal_count; /* (M) */
  /* (M) What its policy did at the latest request it was asked about that
   * was refused, for that request's failure message (reservation.c,
   * gmr__reservation_explain_refusal); `noted` until the message is written. */
  bool noted;
  bool noted_at_capacity;   /* the space's capacity refused the request */
  gmr_limit_action noted_action; /* what the policy answered */
  size_t noted_growth_bytes;     /* how much the policy grew it then (0: none) */
  size_t noted_short_bytes;      /* how far the request still passed it */
} gmr__tier_reservation;

struct gmr_memory_space {
  /* First: the space's resource (space_resource.c). Its upstream is the top of
   * the allocator: the OOM layer of on_oom, else the limiting adaptor; NULL
   * for DISK. */
  gmr__adaptor base;
  gmr_tier_manager *manager;
  gmr_memory_space_config config; /* as given, fractions checked */
  size_t capacity_bytes;
  size_t limit_bytes;   /* reservation limit */
  size_t trigger_bytes;
  size_t stop_bytes;

  /* The allocator (GPU and HOST). */
  gmr_stack *stack;                  /* GPU from a spec: owned */
  gmr_resource *stack_top;           /* GPU: the stack or the caller's upstream */
  gmr_numa_host_resource *numa;      /* HOST */
  gmr_fixed_block_resource *blocks;  /* HOST */
  gmr_limiting_adaptor *limiter;     /* GPU and HOST */
  bool oom_policy_owned;             /* config.on_oom given to the allocator */
  gmr_stream_pool *streams;          /* NULL when stream_count is 0 */

  /* Lock-free stream -> slot -> serial of the binding on it (0: none). A
   * serial names one binding: a reservation bound, unbound and bound again
   * gets a new one, so allocations from before are never mistaken for its. */
  gmr__key_slots slots;
  _Atomic uint64_t *bound_ids; /* slots.capacity + 1 entries; the last is never bound */
  /* Live allocations -> (stream slot, binding serial at allocation), so a
   * free knows whether it gives back a binding's bytes or untracked ones
   * (space_resource.c). */
  struct gmr__space_shard *shards;
  size_t charge_mask; /* the limiting adaptor's charge alignment - 1 */

  /* Books (M). */
  size_t reserved_bytes;
  size_t peak_reserved_bytes;
  size_t reservation_count;
  gmr__tier_reservation **bound; /* bound reservations */
  size_t bound_count;
  size_t bound_capacity;
  bool downgrading;
  uint64_t downgrade_start_count;
  uint64_t raise_count;
  uint64_t overage_count;
  uint64_t refusal_count;
  _Atomic uint64_t no_reservation_count;
};

struct gmr_tier_manager {
  pthread_mutex_t mutex;
  gmr_notification_channel *channel;
  gmr_memory_space *spaces[GMR_TIER_MANAGER_MAX_SPACES];
  size_t space_count;
  gmr__u64_map reservations; /* (M) id -> gmr__tier_reservation * */
  uint64_t next_id;          /* (M) the next id to give out */
  uint64_t next_binding;     /* (M) the last binding serial given out */
  bool shut_down;            /* (M) */
  size_t waiter_count;       /* (M) threads waiting in reserve */
  /* Counters (M). */
  uint64_t reserve_count, refused_count, wait_count, wait_ns, max_wait_ns, timeout_count,
      shutdown_count, release_count, reserve_latency_ns, max_reserve_latency_ns,
      immediate_reserve_count, immediate_reserve_latency_ns, max_immediate_reserve_latency_ns;
};

/* ---- memory_space.c ---- */

/* Build a space from a checked config (the manager checked ids). On failure
 * *out is NULL and `failure` says why; the config's on_oom policy has been
 * released (by its OOM layer if it was handed to one). */
gmr_status gmr__space_create(gmr_tier_manager *manager, const gmr_memory_space_config *config,
                             gmr_memory_space **out, gmr_failure *failure);

/* Why the space cannot be destroyed now (live allocations, lent streams,
 * waiters in its stream pool): GMR_ERR_BUSY, or GMR_OK. */
gmr_status gmr__space_check_idle(gmr_memory_space *space);

/* Synchronise every stream of the space's pool. */
gmr_status gmr__space_synchronize_streams(gmr_memory_space *space);

/* Destroy the space (idle and synchronised). */
void gmr__space_destroy(gmr_memory_space *space);

/* The space's books, computed (M held). */
typedef struct gmr__space_usage {
  size_t allocated_bytes;
  size_t reserved_allocated_bytes;
  size_t untracked_bytes;
  size_t over_bytes; /* sum over bound reservations of what passed their size */
  size_t used_bytes;
  size_t available_bytes;
} gmr__space_usage;

void gmr__space_usage_locked(const gmr_memory_space *space, gmr__space_usage *out);

/* Bytes charged to `r` now: allocated on its bound stream since it was
 * bound (0 when not bound). (M held) */
size_t gmr__reservation_allocated_bytes(const gmr__tier_reservation *r);

/* Charged bytes live on `stream` through the space, whatever reservation. */
size_t gmr__stream_held_bytes(const gmr_memory_space *space, gmr_stream stream);

/* ---- space_resource.c ---- */

/* The vtable of every space's resource (the top of its stack). */
extern const gmr_resource_vtbl gmr__space_vtbl;

/* The pointer table of a GPU or HOST space. false when out of host memory. */
bool gmr__space_books_init(gmr_memory_space *space);
void gmr__space_books_deinit(gmr_memory_space *space);

/* ---- reservation.c ---- */

/* The limit policy every space's limiting adaptor runs: it hands a request
 * past a bound stream's limit to that reservation's own policy, and grows
 * the reservation when that policy raises the limit and the space has room. */
gmr_limit_policy gmr__space_limit_policy(gmr_memory_space *space);

/* Find a live or released reservation (M held): GMR_OK with *out set,
 * GMR_ERR_DOUBLE_FREE for a released id, GMR_ERR_INVALID_ARGUMENT for an id
 * never given out. */
gmr_status gmr__reservation_lookup(gmr_tier_manager *m, gmr_reservation_id id,
                                   gmr__tier_reservation **out);

/* End a binding (M held). */
void gmr__reservation_unbind_locked(gmr__tier_reservation *r);

/* A request on `stream` was refused with GMR_ERR_LIMIT_EXCEEDED by the
 * space's limiting adaptor: if the reservation bound to the stream noted
 * what its policy did about that request (the capacity refused it after the
 * policy was asked, or the policy grew it only part of the way), rewrite
 * the failure record to say so and name the space. Takes the manager's
 * mutex. */
void gmr__reservation_explain_refusal(gmr_memory_space *space, gmr_stream stream,
                                      gmr_failure *failure);

/* ---- notification_channel.c ---- */

/* A thread that is about to check a condition it may then wait for registers
 * first, so that frees made meanwhile notify (see tier_manager.c). */
void gmr__notification_channel_watch_begin(gmr_notification_channel *channel);
void gmr__notification_channel_watch_end(gmr_notification_channel *channel);

/* Notify only if a thread watches or waits: the cheap call for the
 * allocation path (a fence and one atomic load when nobody does). */
void gmr__notification_channel_notify_if_watched(gmr_notification_channel *channel);

/* ---- stream_pool.c ---- */

/* Synchronise every stream of the pool (for an all-or-nothing destroy). */
gmr_status gmr__stream_pool_synchronize(gmr_stream_pool *pool);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TIERS_TIERS_INTERNAL_H_ */
