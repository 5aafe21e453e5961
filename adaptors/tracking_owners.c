/*
 * adaptors/tracking_owners.c: each owner's counters (a stream's, or a
 * thread's), kept per lane (util/lanes.h) so that a thread allocating and
 * freeing on its own stream makes no locked instruction for them.
 *
 * A lane keeps, for the few owners its thread used last, what it added and
 * took since it last flushed into the owner's shared counters, and flushes
 * past a batch or when an owner leaves the lane. The owner's value is its
 * shared counters plus every lane's changes; its high-water marks are raised
 * at each allocation with the level as the calling lane sees it: exact while
 * no other lane holds unflushed changes for the owner (one thread per
 * owner), otherwise off by at most a batch per other lane, as util/lanes.h
 * (whose rule that a lane alone never flushes applies per owner too).
 * Allocation numbers are reserved from the owner in batches, and a batch
 * not used up goes back when its owner leaves the lane if no other lane took
 * numbers meanwhile: one thread numbers an owner's allocations 1, 2, 3...;
 * several threads get numbers that are unique and increasing per thread.
 * A free of another lane's owner (a thread freeing what another allocated),
 * and threads without a lane, use the shared counters directly.
 */
#include <stdint.h>

#include "adaptors/tracking_internal.h"

/* Allocation numbers a lane reserves at a time. */
#define SEQ_BATCH 64u

static int64_t load(const _Atomic int64_t *x) {
  return atomic_load_explicit(x, memory_order_relaxed);
}

static void store(_Atomic int64_t *x, int64_t v) {
  atomic_store_explicit(x, v, memory_order_relaxed);
}

static void add(_Atomic int64_t *x, int64_t v) {
  atomic_fetch_add_explicit(x, v, memory_order_relaxed);
}

void gmr__tracking_owners_init(gmr_tracking_adaptor *a) {
  for (size_t i = 0; i <= a->owner_slots.capacity; ++i) {
    atomic_store_explicit(&a->owners[i].next_seq, 1, memory_order_relaxed);
  }
  for (size_t l = 0; l < GMR__LANE_COUNT; ++l) {
    for (unsigned k = 0; k < GMR__TRACKING_LANE_OWNERS; ++k) {
      atomic_store_explicit(&a->owner_lanes[l].owners[k].slot, SIZE_MAX, memory_order_relaxed);
    }
  }
}

/* Move delta `d`'s changes into its owner's counters; numbers it did not use
 * go back if nobody took numbers after them. */
static void flush(gmr_tracking_adaptor *a, gmr__tracking_owner_delta *d) {
  size_t slot = atomic_load_explicit(&d->slot, memory_order_relaxed);
  if (slot == SIZE_MAX) return;
  gmr__tracking_counters *c = &a->owners[slot];
  add(&c->bytes, load(&d->bytes));
  add(&c->count, load(&d->count));
  add(&c->total_bytes, load(&d->total_bytes));
  add(&c->total_count, load(&d->total_count));
  store(&d->bytes, 0);
  store(&d->count, 0);
  store(&d->total_bytes, 0);
  store(&d->total_count, 0);
  uint64_t end = d->seq_end;
  if (d->seq_next != end) {
    (void)atomic_compare_exchange_strong_explicit(&c->next_seq, &end, d->seq_next,
                                                  memory_order_relaxed, memory_order_relaxed);
  }
  d->seq_next = d->seq_end = 0;
}

/* The lane's delta for owner `slot`, taking the next entry in turn (its
 * owner flushed) when the lane has none. */
static gmr__tracking_owner_delta *delta_taken(gmr_tracking_adaptor *a, size_t lane, size_t slot) {
  gmr__tracking_owner_delta *d = gmr__tracking_owner_delta_of(a, lane, slot);
  if (d != NULL) return d;
  gmr__tracking_owner_lane *l = &a->owner_lanes[lane];
  d = &l->owners[l->victim];
  l->victim = (l->victim + 1) % GMR__TRACKING_LANE_OWNERS;
  flush(a, d);
  atomic_store_explicit(&d->slot, slot, memory_order_relaxed);
  return d;
}

uint64_t gmr__tracking_owner_add_slow(gmr_tracking_adaptor *a, size_t lane, size_t slot,
                                      int64_t bytes) {
  gmr__tracking_counters *c = &a->owners[slot];
  if (lane >= GMR__LANE_COUNT) {
    int64_t now = atomic_fetch_add_explicit(&c->bytes, bytes, memory_order_relaxed) + bytes;
    gmr__raise_peak_i64(&c->peak_bytes, now);
    add(&c->total_bytes, bytes);
    int64_t n = atomic_fetch_add_explicit(&c->count, 1, memory_order_relaxed) + 1;
    gmr__raise_peak_i64(&c->peak_count, n);
    add(&c->total_count, 1);
    return atomic_fetch_add_explicit(&c->next_seq, 1, memory_order_relaxed);
  }
  gmr__tracking_owner_delta *d = delta_taken(a, lane, slot);
  if (d->seq_next == d->seq_end) {
    d->seq_next = atomic_fetch_add_explicit(&c->next_seq, SEQ_BATCH, memory_order_relaxed);
    d->seq_end = d->seq_next + SEQ_BATCH;
  }
  uint64_t seq = d->seq_next++;
  store(&d->total_bytes, load(&d->total_bytes) + bytes);
  store(&d->total_count, load(&d->total_count) + 1);
  bool alone = gmr__lane_alone(&c->lanes_seen, lane);
  int64_t b = load(&d->bytes) + bytes;
  int64_t n = load(&d->count) + 1;
  if ((b > GMR__TRACKING_OWNER_BATCH_BYTES || n > GMR__TRACKING_OWNER_BATCH_COUNT) && !alone) {
    add(&c->bytes, b);
    add(&c->count, n);
    b = 0;
    n = 0;
  }
  store(&d->bytes, b);
  store(&d->count, n);
  gmr__raise_peak_i64(&c->peak_bytes, load(&c->bytes) + b);
  gmr__raise_peak_i64(&c->peak_count, load(&c->count) + n);
  return seq;
}

void gmr__tracking_owner_cancel(gmr_tracking_adaptor *a, size_t lane, size_t slot, int64_t bytes) {
  gmr__tracking_owner_delta *d =
      lane < GMR__LANE_COUNT ? gmr__tracking_owner_delta_of(a, lane, slot) : NULL;
  if (d == NULL) {
    gmr__tracking_counters *c = &a->owners[slot];
    add(&c->bytes, -bytes);
    add(&c->count, -1);
    add(&c->total_bytes, -bytes);
    add(&c->total_count, -1);
    return;
  }
  store(&d->bytes, load(&d->bytes) - bytes);
  store(&d->count, load(&d->count) - 1);
  store(&d->total_bytes, load(&d->total_bytes) - bytes);
  store(&d->total_count, load(&d->total_count) - 1);
}

void gmr__tracking_owner_sub_slow(gmr_tracking_adaptor *a, size_t lane, size_t slot,
                                  int64_t bytes, bool undo) {
  int64_t sign = undo ? 1 : -1;
  gmr__tracking_counters *c = &a->owners[slot];
  gmr__tracking_owner_delta *d =
      lane < GMR__LANE_COUNT ? gmr__tracking_owner_delta_of(a, lane, slot) : NULL;
  if (d == NULL) { /* another lane's owner, or no lane */
    add(&c->bytes, sign * bytes);
    add(&c->count, sign);
    return;
  }
  /* Past the batch: all of the lane's changes go to the owner. */
  add(&c->bytes, load(&d->bytes) + sign * bytes);
  add(&c->count, load(&d->count) + sign);
  store(&d->bytes, 0);
  store(&d->count, 0);
}

void gmr__tracking_owner_grow(gmr_tracking_adaptor *a, size_t lane, size_t slot, int64_t bytes) {
  gmr__tracking_counters *c = &a->owners[slot];
  gmr__tracking_owner_delta *d =
      lane < GMR__LANE_COUNT ? gmr__tracking_owner_delta_of(a, lane, slot) : NULL;
  int64_t pending = d != NULL ? load(&d->bytes) : 0; /* the lane's unflushed bytes */
  int64_t now = atomic_fetch_add_explicit(&c->bytes, bytes, memory_order_relaxed) + bytes;
  gmr__raise_peak_i64(&c->peak_bytes, now + pending);
  add(&c->total_bytes, bytes);
}

void gmr__tracking_owner_read(const gmr_tracking_adaptor *a, size_t slot, gmr_stat_count *bytes,
                              gmr_stat_count *count) {
  const gmr__tracking_counters *c = &a->owners[slot];
  bytes->current = load(&c->bytes);
  bytes->total = load(&c->total_bytes);
  count->current = load(&c->count);
  count->total = load(&c->total_count);
  for (size_t l = 0; l < GMR__LANE_COUNT; ++l) {
    for (unsigned k = 0; k < GMR__TRACKING_LANE_OWNERS; ++k) {
      const gmr__tracking_owner_delta *d = &a->owner_lanes[l].owners[k];
      if (atomic_load_explicit(&d->slot, memory_order_relaxed) != slot) continue;
      bytes->current += load(&d->bytes);
      bytes->total += load(&d->total_bytes);
      count->current += load(&d->count);
      count->total += load(&d->total_count);
    }
  }
  bytes->peak = load(&c->peak_bytes);
  count->peak = load(&c->peak_count);
  /* Never below the level read now. */
  if (bytes->peak < bytes->current) bytes->peak = bytes->current;
  if (count->peak < count->current) count->peak = count->current;
}
