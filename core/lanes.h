/*
 * core/lanes.h (internal): counters that every thread updates on every call
 * (statistics of an adaptor), kept per thread so that an update writes only
 * a cache line its own thread writes.
 *
 * A shared atomic counter that 16 threads update on every allocation moves
 * its cache line between cores on every update, and caps a stack's calls
 * per second whatever the rest costs. Here each thread owns a lane (one of
 * GMR__LANE_COUNT, given at its first call, given back when it exits) and a
 * counter keeps one slot per lane, written only by that lane's thread with a
 * plain store. A reader sums the slots.
 *
 * gmr__lane_level is a level (bytes or allocations live) with its high-water
 * mark and the total of its increases. A lane keeps what it added or took
 * since it last flushed, and flushes into the shared base when that passes
 * `batch` either way, so the shared line is written rarely. The high-water
 * mark is raised at each increase with the level as the calling thread sees
 * it (the base plus its own lane): exact while no other lane holds an
 * unflushed change (a program with one thread that allocates and frees);
 * otherwise off by at most those changes, `batch` per other lane.
 *
 * Thread-safe: yes; a reader running beside updates may see a sum that mixes
 * moments (an update may count twice or not yet while a lane flushes).
 */
#ifndef GMR_CORE_LANES_H_
#define GMR_CORE_LANES_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/counters.h"

#define GMR__LANE_COUNT 64

/* 1 + the calling thread's lane, 0 before its first call (lanes.c). */
extern _Thread_local size_t gmr__lane_plus_one;

size_t gmr__thread_lane_assign(void);

/* The calling thread's lane, in [0, GMR__LANE_COUNT); GMR__LANE_COUNT when
 * every lane was taken at its first call (then callers take their shared,
 * atomic path). */
static inline size_t gmr__thread_lane(void) {
  size_t l = gmr__lane_plus_one;
  return l != 0 ? l - 1 : gmr__thread_lane_assign();
}

typedef struct gmr__lane_slot {
  _Alignas(64) _Atomic int64_t delta; /* change since the last flush */
  _Atomic int64_t total;              /* increases, all time */
} gmr__lane_slot;

typedef struct gmr__lane_level {
  _Alignas(64) _Atomic int64_t base; /* flushed changes of every lane */
  _Atomic int64_t peak;
  _Atomic int64_t shared_total; /* increases of threads without a lane */
  int64_t batch;
  gmr__lane_slot lanes[GMR__LANE_COUNT];
} gmr__lane_level;

/* A level at zero that flushes a lane past `batch` (> 0). Not thread-safe. */
void gmr__lane_level_init(gmr__lane_level *c, int64_t batch);

/* Add `amount` (> 0) to the level in the calling thread's `lane`. */
static inline void gmr__lane_level_add(gmr__lane_level *c, size_t lane, int64_t amount) {
  int64_t seen;
  if (lane >= GMR__LANE_COUNT) {
    atomic_fetch_add_explicit(&c->shared_total, amount, memory_order_relaxed);
    seen = atomic_fetch_add_explicit(&c->base, amount, memory_order_relaxed) + amount;
  } else {
    gmr__lane_slot *s = &c->lanes[lane];
    /* Only this thread writes its slot: a load and a store, no lock prefix. */
    atomic_store_explicit(&s->total, atomic_load_explicit(&s->total, memory_order_relaxed) + amount,
                          memory_order_relaxed);
    int64_t d = atomic_load_explicit(&s->delta, memory_order_relaxed) + amount;
    if (d > c->batch) {
      seen = atomic_fetch_add_explicit(&c->base, d, memory_order_relaxed) + d;
      atomic_store_explicit(&s->delta, 0, memory_order_relaxed);
    } else {
      atomic_store_explicit(&s->delta, d, memory_order_relaxed);
      seen = atomic_load_explicit(&c->base, memory_order_relaxed) + d;
    }
  }
  gmr__raise_peak_i64(&c->peak, seen);
}

/* Take `amount` (> 0) off the level in the calling thread's `lane`. */
static inline void gmr__lane_level_sub(gmr__lane_level *c, size_t lane, int64_t amount) {
  if (lane >= GMR__LANE_COUNT) {
    atomic_fetch_sub_explicit(&c->base, amount, memory_order_relaxed);
    return;
  }
  gmr__lane_slot *s = &c->lanes[lane];
  int64_t d = atomic_load_explicit(&s->delta, memory_order_relaxed) - amount;
  if (d < -c->batch) {
    atomic_fetch_add_explicit(&c->base, d, memory_order_relaxed);
    d = 0;
  }
  atomic_store_explicit(&s->delta, d, memory_order_relaxed);
}

/* Undo a gmr__lane_level_sub (the free it counted did not happen): the
 * level goes back, the total and the high-water mark do not move. */
static inline void gmr__lane_level_unsub(gmr__lane_level *c, size_t lane, int64_t amount) {
  if (lane >= GMR__LANE_COUNT) {
    atomic_fetch_add_explicit(&c->base, amount, memory_order_relaxed);
    return;
  }
  gmr__lane_slot *s = &c->lanes[lane];
  int64_t d = atomic_load_explicit(&s->delta, memory_order_relaxed) + amount;
  if (d > c->batch) {
    atomic_fetch_add_explicit(&c->base, d, memory_order_relaxed);
    d = 0;
  }
  atomic_store_explicit(&s->delta, d, memory_order_relaxed);
}

/* The level now (the base plus every lane). */
int64_t gmr__lane_level_value(const gmr__lane_level *c);

/* The total of every increase. */
int64_t gmr__lane_level_total(const gmr__lane_level *c);

/* The high-water mark (never below the level read now). */
int64_t gmr__lane_level_peak(const gmr__lane_level *c);

/* Move the whole level into the caller's hands and zero it (total and peak
 * stay): returns the level. pre: no thread updates `c` during the call. */
int64_t gmr__lane_level_drain(gmr__lane_level *c);

#endif /* GMR_CORE_LANES_H_ */
