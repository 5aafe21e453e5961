/*
 * adaptors/tracking_internal.h (internal): the tracking adaptor's state,
 * shared by its two files: tracking_adaptor.c (the vtable: allocate, free,
 * record_stream, create, destroy) and tracking_report.c (statistics, scopes,
 * the leak report, forced destroy).
 *
 * The books of live allocations are core/books.h (split by address region,
 * spin-locked shards). Each owner's counters are atomics on a cache line of
 * their own; the overall counters are per-thread lanes (core/lanes.h). So a
 * thread that allocates on a stream of its own, from memory of its own,
 * writes no cache line another thread writes. Scopes are counted under a
 * mutex, and only while one is open.
 *
 * Thread-safe: as gmr/tracking_adaptor.h says.
 */
#ifndef GMR_ADAPTORS_TRACKING_INTERNAL_H_
#define GMR_ADAPTORS_TRACKING_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/books.h"
#include "core/key_slots.h"
#include "core/lanes.h"
#include "gmr/tracking_adaptor.h"

/* current / peak / total of bytes and of allocations, one cache line. */
typedef struct gmr__tracking_counters {
  _Alignas(64) _Atomic int64_t bytes;
  _Atomic int64_t peak_bytes;
  _Atomic int64_t total_bytes;
  _Atomic int64_t count;
  _Atomic int64_t peak_count;
  _Atomic int64_t total_count;
} gmr__tracking_counters;

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
  gmr_resource base; /* first */
  gmr_resource *upstream;
  gmr_tracking_scope per;
  bool check_stream;
  uint64_t id; /* unique in the process: keys the per-thread owner cache */
  gmr__books books;
  gmr__key_slots owner_slots;
  gmr__tracking_counters *owners; /* owner_slots.capacity + 1 */
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
