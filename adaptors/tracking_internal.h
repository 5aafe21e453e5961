/*
 * adaptors/tracking_internal.h (internal): the tracking adaptor's state,
 * shared by its two files: tracking_adaptor.c (the vtable: allocate, free,
 * record_stream, create, destroy) and tracking_report.c (statistics, scopes,
 * the leak report, forced destroy).
 *
 * The books of live allocations are util/books.h (split by address region,
 * spin-locked shards, biased to their one thread while they have one).
 * Each owner's counters are atomics on a cache line of their own; the
 * overall counters are per-thread lanes (util/lanes.h). So a thread that
 * allocates on a stream of its own, from memory of its own, writes no cache
 * line another thread writes. Scopes are counted under a
 * mutex, and only while one is open.
 *
 * Thread-safe: as gmr/tracking_adaptor.h says.
 */
#ifndef GMR_ADAPTORS_TRACKING_INTERNAL_H_
#define GMR_ADAPTORS_TRACKING_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/adaptor.h"
#include "util/books.h"
#include "util/counters.h"
#include "util/key_slots.h"
#include "util/lanes.h"
#include "gmr/tracking_adaptor.h"

/* current / peak / total of bytes and of allocations, one cache line: what
 * the owner's lanes flushed (tracking_owners.c); `next_seq` numbers its
 * allocations, handed to lanes in batches. */
typedef struct gmr__tracking_counters {
  _Alignas(64) _Atomic int64_t bytes;
  _Atomic int64_t peak_bytes;
  _Atomic int64_t total_bytes;
  _Atomic int64_t count;
  _Atomic int64_t peak_count;
  _Atomic int64_t total_count;
  _Atomic uint64_t next_seq;
  _Atomic uint64_t lanes_seen; /* util/lanes.h: a lane alone never flushes */
} gmr__tracking_counters;

/* Owners a lane keeps changes for at once (a thread on a few streams). */
#define GMR__TRACKING_LANE_OWNERS 4

/* One owner's changes made in one lane and not yet added to its counters,
 * and the allocation numbers the lane reserved on it: [seq_next, seq_end).
 * `slot` and the changes are read by any thread (statistics); the numbers
 * only by the lane's thread. */
typedef struct gmr__tracking_owner_delta {
  _Atomic size_t slot; /* the owner's slot; SIZE_MAX: none */
  _Atomic int64_t bytes;
  _Atomic int64_t count;
  _Atomic int64_t total_bytes;
  _Atomic int64_t total_count;
  uint64_t seq_next;
  uint64_t seq_end;
} gmr__tracking_owner_delta;

typedef struct gmr__tracking_owner_lane {
  _Alignas(64) gmr__tracking_owner_delta owners[GMR__TRACKING_LANE_OWNERS];
  unsigned victim; /* the entry a new owner takes next (round robin) */
} gmr__tracking_owner_lane;

/* What a scope counted, as RMM's statistics_resource_adaptor counter: value
 * (may go below zero: frees of memory allocated before the scope), peak of
 * value, total allocated. */
typedef struct gmr__scope_count {
  int64_t value;
  int64_t peak;
  int64_t total;
} gmr__scope_count;

typedef struct gmr__scope_frame {
  gmr__scope_count bytes;
  gmr__scope_count allocations;
} gmr__scope_frame;

struct gmr_tracking_adaptor {
  gmr__adaptor base; /* first: the resource and its upstream */
  gmr_tracking_scope per;
  bool check_stream;
  uint64_t id; /* unique in the process: keys the per-thread owner cache */
  gmr__books books;
  gmr__key_slots owner_slots;
  gmr__tracking_counters *owners; /* owner_slots.capacity + 1 */
  gmr__tracking_owner_lane *owner_lanes; /* GMR__LANE_COUNT */
  _Atomic unsigned scope_depth;   /* read on every call; written by push/pop only */

  gmr__lane_counts all; /* overall bytes and allocations: per-thread lanes */

  _Alignas(64) _Atomic uint64_t upstream_failure_count; /* the rare counters */
  _Atomic uint64_t unknown_pointer_count;
  _Atomic uint64_t double_free_count;
  _Atomic uint64_t size_mismatch_count;
  _Atomic uint64_t stream_mismatch_count;

  pthread_mutex_t scope_mutex; /* guards scopes[] and changes of scope_depth */
  gmr__scope_frame scopes[GMR_TRACKING_MAX_SCOPE_DEPTH];
};

/* ---- tracking_owners.c: each owner's counters, kept per lane ---- */

/* Flush an owner's changes in a lane past these. */
#define GMR__TRACKING_OWNER_BATCH_BYTES ((int64_t)1 << 20)
#define GMR__TRACKING_OWNER_BATCH_COUNT 256

/* Lanes with no owner yet; counters numbering from 1. */
void gmr__tracking_owners_init(gmr_tracking_adaptor *a);
/* The slow paths of gmr__tracking_owner_add / _sub (tracking_owners.h):
 * no lane, an owner new to the lane, a batch of numbers used up, a flush. */
uint64_t gmr__tracking_owner_add_slow(gmr_tracking_adaptor *a, size_t lane, size_t slot,
                                      int64_t bytes);
void gmr__tracking_owner_sub_slow(gmr_tracking_adaptor *a, size_t lane, size_t slot,
                                  int64_t bytes, bool undo);
/* Take back an allocation counted by gmr__tracking_owner_add that did not
 * happen (its number is not reused). */
void gmr__tracking_owner_cancel(gmr_tracking_adaptor *a, size_t lane, size_t slot, int64_t bytes);
/* A live allocation of owner `slot` grew in place by `bytes` (extend): its
 * bytes, peak and total grow; counts stay. */
void gmr__tracking_owner_grow(gmr_tracking_adaptor *a, size_t lane, size_t slot, int64_t bytes);

/* Owner `slot`'s counters: flushed plus every lane's changes (a reader
 * beside updates may see a sum that mixes moments). */
void gmr__tracking_owner_read(const gmr_tracking_adaptor *a, size_t slot, gmr_stat_count *bytes,
                              gmr_stat_count *count);

/* The calling lane's changes for owner `slot`, or NULL (pre: lane < GMR__LANE_COUNT). */
static inline gmr__tracking_owner_delta *gmr__tracking_owner_delta_of(gmr_tracking_adaptor *a,
                                                                      size_t lane, size_t slot) {
  gmr__tracking_owner_lane *l = &a->owner_lanes[lane];
  for (unsigned k = 0; k < GMR__TRACKING_LANE_OWNERS; ++k) {
    if (atomic_load_explicit(&l->owners[k].slot, memory_order_relaxed) == slot) {
      return &l->owners[k];
    }
  }
  return NULL;
}

/* An allocation of `bytes` by owner `slot`, in the calling thread's `lane`:
 * returns its number on the owner (from 1, never repeated). The common case
 * (the lane has the owner and numbers left, no flush due) writes only the
 * lane's line. */
__attribute__((always_inline)) static inline uint64_t gmr__tracking_owner_add(
    gmr_tracking_adaptor *a, size_t lane, size_t slot, int64_t bytes) {
  gmr__tracking_owner_delta *d =
      lane < GMR__LANE_COUNT ? gmr__tracking_owner_delta_of(a, lane, slot) : NULL;
  if (d == NULL || d->seq_next == d->seq_end) {
    return gmr__tracking_owner_add_slow(a, lane, slot, bytes);
  }
  gmr__tracking_counters *c = &a->owners[slot];
  bool alone = gmr__lane_alone(&c->lanes_seen, lane);
  int64_t b = atomic_load_explicit(&d->bytes, memory_order_relaxed) + bytes;
  int64_t n = atomic_load_explicit(&d->count, memory_order_relaxed) + 1;
  if (!alone && (b > GMR__TRACKING_OWNER_BATCH_BYTES || n > GMR__TRACKING_OWNER_BATCH_COUNT)) {
    return gmr__tracking_owner_add_slow(a, lane, slot, bytes);
  }
  atomic_store_explicit(&d->bytes, b, memory_order_relaxed);
  atomic_store_explicit(&d->count, n, memory_order_relaxed);
  atomic_store_explicit(&d->total_bytes,
                        atomic_load_explicit(&d->total_bytes, memory_order_relaxed) + bytes,
                        memory_order_relaxed);
  atomic_store_explicit(&d->total_count,
                        atomic_load_explicit(&d->total_count, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  gmr__raise_peak_i64(&c->peak_bytes, atomic_load_explicit(&c->bytes, memory_order_relaxed) + b);
  gmr__raise_peak_i64(&c->peak_count, atomic_load_explicit(&c->count, memory_order_relaxed) + n);
  return d->seq_next++;
}

/* A free of `bytes` of owner `slot` (`undo` false), or its undoing when the
 * upstream refused it (`undo` true); totals and peaks do not move. */
static inline void gmr__tracking_owner_sub(gmr_tracking_adaptor *a, size_t lane, size_t slot,
                                           int64_t bytes, bool undo) {
  gmr__tracking_owner_delta *d =
      lane < GMR__LANE_COUNT ? gmr__tracking_owner_delta_of(a, lane, slot) : NULL;
  int64_t sign = undo ? 1 : -1;
  if (d != NULL) {
    bool alone = gmr__lane_alone(&a->owners[slot].lanes_seen, lane);
    int64_t b = atomic_load_explicit(&d->bytes, memory_order_relaxed) + sign * bytes;
    int64_t n = atomic_load_explicit(&d->count, memory_order_relaxed) + sign;
    if (alone ||
        (b >= -GMR__TRACKING_OWNER_BATCH_BYTES && n >= -GMR__TRACKING_OWNER_BATCH_COUNT)) {
      atomic_store_explicit(&d->bytes, b, memory_order_relaxed);
      atomic_store_explicit(&d->count, n, memory_order_relaxed);
      return;
    }
  }
  gmr__tracking_owner_sub_slow(a, lane, slot, bytes, undo);
}

/* Count `bytes` (and one allocation, `sign` +1) or their free (`sign` -1) in
 * the open scopes' innermost frame. Takes scope_mutex; call only when
 * scope_depth is not 0. A free that is undone calls it with `undo` set: the
 * value goes back, the peak and total do not move. */
void gmr__tracking_scope_note(gmr_tracking_adaptor *a, int64_t bytes, int sign, bool undo);

/* A live allocation grew by `bytes` in place: the innermost open scope's
 * bytes move, its allocations do not. Takes scope_mutex; call only when
 * scope_depth is not 0. */
void gmr__tracking_scope_grow(gmr_tracking_adaptor *a, int64_t bytes);

/* The deallocate slot, which forced destroy also uses. */
gmr_status gmr__tracking_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                    gmr_stream stream);

/* The destroy slot (GMR_ERR_BUSY with live allocations). */
gmr_status gmr__tracking_destroy(gmr_resource *self);

#endif /* GMR_ADAPTORS_TRACKING_INTERNAL_H_ */
