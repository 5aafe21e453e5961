/*
 * util/counters.h (internal): lock-free byte counters with a high-water mark,
 * shared by every resource that reports a footprint.
 *
 * Thread-safe: yes (C11 atomics). A reader may see `current` and `peak` from
 * slightly different moments; `peak` is never below any value `current` had.
 */
#ifndef GMR_UTIL_COUNTERS_H_
#define GMR_UTIL_COUNTERS_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/resource.h"

typedef struct gmr__byte_counter {
  _Atomic size_t current_bytes;
  _Atomic size_t peak_bytes;
  _Atomic size_t live_count;
} gmr__byte_counter;

/* Raise the high-water mark `peak` to `now` if it is below (lock-free). */
static inline void gmr__raise_peak(_Atomic size_t *peak, size_t now) {
  size_t seen = atomic_load_explicit(peak, memory_order_relaxed);
  while (now > seen && !atomic_compare_exchange_weak_explicit(peak, &seen, now,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed)) {
  }
}

/* gmr__raise_peak() for the signed counters of the tracking adaptor. */
static inline void gmr__raise_peak_i64(_Atomic int64_t *peak, int64_t now) {
  int64_t seen = atomic_load_explicit(peak, memory_order_relaxed);
  while (now > seen && !atomic_compare_exchange_weak_explicit(peak, &seen, now,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed)) {
  }
}

static inline void gmr__counter_add(gmr__byte_counter *c, size_t bytes) {
  size_t now = atomic_fetch_add_explicit(&c->current_bytes, bytes, memory_order_relaxed) + bytes;
  atomic_fetch_add_explicit(&c->live_count, 1, memory_order_relaxed);
  gmr__raise_peak(&c->peak_bytes, now);
}

static inline void gmr__counter_sub(gmr__byte_counter *c, size_t bytes) {
  atomic_fetch_sub_explicit(&c->current_bytes, bytes, memory_order_relaxed);
  atomic_fetch_sub_explicit(&c->live_count, 1, memory_order_relaxed);
}

/* A leaf's footprint: what it holds now and its high-water mark. */
static inline void gmr__counter_footprint(const gmr__byte_counter *c, gmr_footprint *out) {
  out->held_bytes = atomic_load_explicit(&c->current_bytes, memory_order_relaxed);
  out->peak_held_bytes = atomic_load_explicit(&c->peak_bytes, memory_order_relaxed);
}

#endif /* GMR_UTIL_COUNTERS_H_ */
