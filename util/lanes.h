/*
 * util/lanes.h (internal): counters that every thread updates on every call
 * (statistics of an adaptor), kept per thread so that an update writes only
 * a cache line its own thread writes.
 *
 * A shared atomic counter that 16 threads update on every allocation moves
 * its cache line between cores on every update, and caps a stack's calls
 * per second whatever the rest costs. Here each thread owns a lane (one of
 * GMR__LANE_COUNT, given at its first call, given back when it exits) and a
 * counter keeps one slot per lane, written only by that lane's thread with
 * plain loads and stores (no lock prefix). A reader sums the slots.
 *
 * gmr__lane_counts counts bytes and allocations live, with their high-water
 * marks and the totals of what was allocated. A lane keeps what it added or
 * took since it last flushed, and flushes into the shared base when that
 * passes the batch either way, so the shared line is written rarely; a lane
 * that is the only one ever to have touched the counts never flushes (its
 * view is the whole level: no locked instruction even for requests larger
 * than the batch, as a training loop's are). The high-water marks are
 * raised at each allocation with the level as the calling thread sees it
 * (the base plus its own lane): exact while no other lane holds an
 * unflushed change (a program with one thread that allocates and frees);
 * otherwise off by at most those changes, a batch per other lane (a lane
 * that was alone flushes at its first call after another lane joined).
 *
 * Thread-safe: yes; a reader running beside updates may see a sum that mixes
 * moments (an update may count twice or not yet while a lane flushes).
 */
#ifndef GMR_UTIL_LANES_H_
#define GMR_UTIL_LANES_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/counters.h"

#define GMR__LANE_COUNT 64

/* 1 + the calling thread's lane, 0 before its first call (lanes.c). */
extern _Thread_local size_t gmr__lane_plus_one;

size_t gmr__thread_lane_assign(void);

/* The calling thread's lane, in [0, GMR__LANE_COUNT); GMR__LANE_COUNT when
 * every lane was taken at its first call (then the counters take their
 * shared, atomic path for it). */
static inline size_t gmr__thread_lane(void) {
  size_t l = gmr__lane_plus_one;
  return l != 0 ? l - 1 : gmr__thread_lane_assign();
}

typedef struct gmr__lane_slot {
  _Alignas(64) _Atomic int64_t bytes; /* change since the last flush */
  _Atomic int64_t count;
  _Atomic int64_t total_bytes; /* allocated, all time */
  _Atomic int64_t total_count;
} gmr__lane_slot;

typedef struct gmr__lane_counts {
  _Alignas(64) _Atomic int64_t base_bytes; /* flushed changes of every lane */
  _Atomic int64_t base_count;
  _Atomic uint64_t lanes_seen; /* bit l: lane l has touched the counts */
  _Atomic int64_t peak_bytes;
  _Atomic int64_t peak_count;
  _Atomic int64_t shared_total_bytes; /* allocated by threads without a lane */
  _Atomic int64_t shared_total_count;
  int64_t batch_bytes;
  int64_t batch_count;
  gmr__lane_slot lanes[GMR__LANE_COUNT];
} gmr__lane_counts;

/* Zero counts that flush a lane past `batch_bytes` or `batch_count` (> 0).
 * Not thread-safe. */
void gmr__lane_counts_init(gmr__lane_counts *c, int64_t batch_bytes, int64_t batch_count);

static inline int64_t gmr__lane_load(_Atomic int64_t *x) {
  return atomic_load_explicit(x, memory_order_relaxed);
}

static inline void gmr__lane_store(_Atomic int64_t *x, int64_t v) {
  atomic_store_explicit(x, v, memory_order_relaxed);
}

/* Mark `lane` in `lanes_seen` (the lanes that ever touched some counts: a
 * locked instruction at a lane's first touch only) and say whether it is
 * the only one. A lane alone may keep any change unflushed: its view is the
 * whole level. Call it at every update, so a lane that joins is marked at
 * once. */
static inline bool gmr__lane_alone(_Atomic uint64_t *lanes_seen, size_t lane) {
  uint64_t bit = UINT64_C(1) << lane;
  uint64_t seen = atomic_load_explicit(lanes_seen, memory_order_relaxed);
  if ((seen & bit) == 0) {
    seen = atomic_fetch_or_explicit(lanes_seen, bit, memory_order_relaxed) | bit;
  }
  return seen == bit;
}

/* Add a lane's changes to the base and clear them (its thread only). */
static inline void gmr__lane_flush(gmr__lane_counts *c, gmr__lane_slot *s, int64_t bytes,
                                   int64_t count) {
  atomic_fetch_add_explicit(&c->base_bytes, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->base_count, count, memory_order_relaxed);
  gmr__lane_store(&s->bytes, 0);
  gmr__lane_store(&s->count, 0);
}

/* One allocation of `bytes`, in the calling thread's `lane`. */
__attribute__((always_inline)) static inline void gmr__lane_counts_add(gmr__lane_counts *c,
                                                                       size_t lane,
                                                                       int64_t bytes) {
  if (lane >= GMR__LANE_COUNT) {
    atomic_fetch_add_explicit(&c->shared_total_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->shared_total_count, 1, memory_order_relaxed);
    gmr__raise_peak_i64(&c->peak_bytes,
                        atomic_fetch_add_explicit(&c->base_bytes, bytes, memory_order_relaxed) +
                            bytes);
    gmr__raise_peak_i64(&c->peak_count,
                        atomic_fetch_add_explicit(&c->base_count, 1, memory_order_relaxed) + 1);
    return;
  }
  gmr__lane_slot *s = &c->lanes[lane];
  gmr__lane_store(&s->total_bytes, gmr__lane_load(&s->total_bytes) + bytes);
  gmr__lane_store(&s->total_count, gmr__lane_load(&s->total_count) + 1);
  bool alone = gmr__lane_alone(&c->lanes_seen, lane);
  int64_t b = gmr__lane_load(&s->bytes) + bytes;
  int64_t n = gmr__lane_load(&s->count) + 1;
  if (!alone && (b > c->batch_bytes || n > c->batch_count)) {
    gmr__lane_flush(c, s, b, n);
    b = 0;
    n = 0;
  } else {
    gmr__lane_store(&s->bytes, b);
    gmr__lane_store(&s->count, n);
  }
  gmr__raise_peak_i64(&c->peak_bytes, gmr__lane_load(&c->base_bytes) + b);
  gmr__raise_peak_i64(&c->peak_count, gmr__lane_load(&c->base_count) + n);
}

/* A live allocation grew in place by `bytes` (gmr_resource_extend): the level, the
 * total of bytes allocated and the high-water mark of bytes move; the count
 * of allocations does not. */
static inline void gmr__lane_counts_grow(gmr__lane_counts *c, size_t lane, int64_t bytes) {
  if (lane >= GMR__LANE_COUNT) {
    atomic_fetch_add_explicit(&c->shared_total_bytes, bytes, memory_order_relaxed);
    gmr__raise_peak_i64(&c->peak_bytes,
                        atomic_fetch_add_explicit(&c->base_bytes, bytes, memory_order_relaxed) +
                            bytes);
    return;
  }
  gmr__lane_slot *s = &c->lanes[lane];
  gmr__lane_store(&s->total_bytes, gmr__lane_load(&s->total_bytes) + bytes);
  int64_t b = gmr__lane_load(&s->bytes) + bytes;
  int64_t n = gmr__lane_load(&s->count);
  if (b > c->batch_bytes) {
    gmr__lane_flush(c, s, b, n);
    b = 0;
  } else {
    gmr__lane_store(&s->bytes, b);
  }
  gmr__raise_peak_i64(&c->peak_bytes, gmr__lane_load(&c->base_bytes) + b);
}

/* One free of `bytes` (`undo` false), or the undoing of one whose release
 * failed (`undo` true: the level goes back; totals and peaks do not move). */
static inline void gmr__lane_counts_sub(gmr__lane_counts *c, size_t lane, int64_t bytes,
                                        bool undo) {
  int64_t sign = undo ? 1 : -1;
  if (lane >= GMR__LANE_COUNT) {
    atomic_fetch_add_explicit(&c->base_bytes, sign * bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->base_count, sign, memory_order_relaxed);
    return;
  }
  gmr__lane_slot *s = &c->lanes[lane];
  bool alone = gmr__lane_alone(&c->lanes_seen, lane);
  int64_t b = gmr__lane_load(&s->bytes) + sign * bytes;
  int64_t n = gmr__lane_load(&s->count) + sign;
  if (!alone && (b < -c->batch_bytes || n < -c->batch_count || b > c->batch_bytes ||
                 n > c->batch_count)) {
    gmr__lane_flush(c, s, b, n);
  } else {
    gmr__lane_store(&s->bytes, b);
    gmr__lane_store(&s->count, n);
  }
}

/* Bytes and allocations live now (the base plus every lane). */
void gmr__lane_counts_value(const gmr__lane_counts *c, int64_t *bytes, int64_t *count);

/* Bytes and allocations allocated, all time. */
void gmr__lane_counts_total(const gmr__lane_counts *c, int64_t *bytes, int64_t *count);

/* The high-water marks (never below the level read now). */
void gmr__lane_counts_peak(const gmr__lane_counts *c, int64_t *bytes, int64_t *count);

/* Zero the live level (totals and peaks stay) and return what it was.
 * pre: no thread updates `c` during the call or touches it afterwards
 * without an ordering (a lock, a join) after it. */
void gmr__lane_counts_drain(gmr__lane_counts *c, int64_t *bytes, int64_t *count);

#endif /* GMR_UTIL_LANES_H_ */
