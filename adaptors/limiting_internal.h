/*
 * adaptors/limiting_internal.h (internal): the limiting adaptor's state,
 * shared by limiting_adaptor.c (the vtable: charge, forward, give back;
 * create, destroy) and limiting_control.c (limits, usage and statistics).
 *
 * Two ways of counting. While no limit can refuse anything (no global limit,
 * no per-stream limits: the default), the adaptor is *counting*: charges go
 * to per-thread lanes (util/lanes.h) after the upstream succeeded, so the
 * common path writes no cache line another thread writes. Once a limit is
 * set (at create, or by gmr_limiting_adaptor_set_limit) it is *enforcing*:
 * each charge is reserved with a compare-and-swap on `used_bytes` before the
 * upstream is called, so concurrent requests never jointly pass the limit.
 * The switch happens once and is never undone: gmr__limiting_stop_counting()
 * clears `counting`, waits until no thread is inside a lane update (each
 * marks itself `busy` first and checks `counting` after: the two sides of a
 * Dekker handshake, asymmetric (util/fence.h): the switch pays a membarrier
 * so that the calls pay no fence), then moves the lanes' totals into the
 * enforcing counters and sets `enforcing`. A call that finds
 * `counting` cleared waits for `enforcing` before it uses those counters (a
 * free could otherwise find fewer bytes there than it gives back).
 *
 * Thread-safe: as gmr/limiting_adaptor.h says.
 */
#ifndef GMR_ADAPTORS_LIMITING_INTERNAL_H_
#define GMR_ADAPTORS_LIMITING_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "adaptors/oom_internal.h"
#include "core/adaptor.h"
#include "core/events.h"
#include "util/key_slots.h"
#include "util/lanes.h"
#include "util/u64_map.h"
#include "gmr/limiting_adaptor.h"

#define SHARD_COUNT 16
/* A limit policy that keeps raising by too little cannot loop forever. */
#define MAX_RAISE_ROUNDS 8

typedef struct ptr_shard {
  pthread_mutex_t mutex;
  gmr__u64_map map; /* pointer -> stream slot */
  char pad[64];     /* keep shards' locks on separate cache lines */
} ptr_shard;

typedef struct stream_counters {
  _Atomic size_t used_bytes;
  _Atomic size_t limit_bytes;
  _Atomic size_t peak_bytes;
} stream_counters;

/* One counter pair that a limit applies to: the global one or a stream's. */
typedef struct limit_scope {
  _Atomic size_t *used;
  _Atomic size_t *limit;
  _Atomic size_t *peak;
  int is_stream;
} limit_scope;

/* Whether a lane's thread is inside a lane update (counting mode); for the
 * lane of threads without one of their own, how many are. */
typedef struct busy_count {
  _Alignas(64) _Atomic unsigned inside;
} busy_count;

struct gmr_limiting_adaptor {
  gmr__adaptor base; /* first: the resource and its upstream */
  size_t charge_mask; /* charge_alignment - 1 */
  gmr_limit_policy on_limit;
  gmr__event_listeners events; /* its limit events' listeners */
  /* The upstream's lack-of-memory failures, and what the OOM layer of
   * limiting(on_oom=...) above it did (oom_internal.h): stats.oom. */
  gmr__oom_counters oom_counts;
  _Atomic bool counting;  /* read on every call; cleared once */
  _Atomic bool enforcing; /* the enforcing counters hold everything (set once) */
  bool asymmetric_fence;  /* util/fence.h: membarrier fences the switch's side */

  char pad[64]; /* the counters below change on every call */
  _Atomic size_t used_bytes;
  _Atomic size_t limit_bytes;
  _Atomic size_t peak_bytes;
  _Atomic uint64_t allocation_count;
  _Atomic uint64_t deallocation_count;
  _Atomic uint64_t refused_count;
  _Atomic uint64_t upstream_failure_count;
  _Atomic uint64_t overage_count;
  _Atomic size_t max_overage_bytes;
  _Atomic uint64_t raise_count;
  _Atomic uint64_t bad_free_count;

  /* per-stream mode only */
  bool per_stream;
  size_t default_stream_limit_bytes;
  gmr__key_slots stream_slots;
  stream_counters *streams; /* stream_slots.capacity + 1 (the overflow slot) */
  ptr_shard *shards;        /* SHARD_COUNT */

  /* counting mode only */
  gmr__lane_counts counted; /* charged bytes and allocations live */
  busy_count busy[GMR__LANE_COUNT + 1];
  pthread_mutex_t mode_mutex;     /* one switch at a time */
  _Atomic int64_t drained_live;   /* allocations live when counting ended */
};

/* Switch from counting to enforcing (see the top of this file). Returns at
 * once when the adaptor enforces already. */
void gmr__limiting_stop_counting(gmr_limiting_adaptor *a);

/* Wait until the enforcing counters hold everything: at once, except in the
 * moment of a switch. */
void gmr__limiting_wait_enforcing(gmr_limiting_adaptor *a);

static inline void gmr__limiting_enforcing(gmr_limiting_adaptor *a) {
  if (!atomic_load_explicit(&a->enforcing, memory_order_acquire)) gmr__limiting_wait_enforcing(a);
}

/* Bytes charged now, and allocations made / freed, in both modes. */
size_t gmr__limiting_used_bytes(const gmr_limiting_adaptor *a);


#endif /* GMR_ADAPTORS_LIMITING_INTERNAL_H_ */
