/*
 * adaptors/limiting_control.c: the limiting adaptor's limits, usage and
 * statistics, and the switch from counting to enforcing. See
 * gmr/limiting_adaptor.h and limiting_internal.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <sched.h>
#include <stddef.h>
#include <string.h>

#include "adaptors/limiting_internal.h"
#include "util/counters.h"
#include "util/fence.h"

void gmr__limiting_stop_counting(gmr_limiting_adaptor *a) {
  if (!atomic_load_explicit(&a->counting, memory_order_acquire)) return;
  pthread_mutex_lock(&a->mode_mutex);
  if (atomic_load_explicit(&a->counting, memory_order_relaxed)) {
    atomic_store_explicit(&a->counting, false, memory_order_seq_cst);
    /* Every thread's busy mark is visible after this (util/fence.h). A
     * thread that marked itself busy before the store may still update its
     * lane; one that marks itself after sees the flag cleared. */
    gmr__fence_heavy(a->asymmetric_fence);
    for (size_t i = 0; i <= GMR__LANE_COUNT; ++i) {
      while (atomic_load_explicit(&a->busy[i].inside, memory_order_seq_cst) != 0) sched_yield();
    }
    int64_t peak = 0, used = 0, live = 0;
    gmr__lane_counts_peak(&a->counted, &peak, NULL);
    gmr__lane_counts_drain(&a->counted, &used, &live);
    atomic_fetch_add_explicit(&a->drained_live, live, memory_order_relaxed);
    size_t now = atomic_fetch_add_explicit(&a->used_bytes, (size_t)used, memory_order_relaxed) +
                 (size_t)used;
    gmr__raise_peak(&a->peak_bytes, now > (size_t)peak ? now : (size_t)peak);
    atomic_store_explicit(&a->enforcing, true, memory_order_release);
  }
  pthread_mutex_unlock(&a->mode_mutex);
}

void gmr__limiting_wait_enforcing(gmr_limiting_adaptor *a) {
  while (!atomic_load_explicit(&a->enforcing, memory_order_acquire)) sched_yield();
}

size_t gmr__limiting_used_bytes(const gmr_limiting_adaptor *a) {
  int64_t counted = 0;
  gmr__lane_counts_value(&a->counted, &counted, NULL);
  return atomic_load_explicit(&a->used_bytes, memory_order_relaxed) + (size_t)counted;
}

gmr__oom_counters *gmr__limiting_oom_counters(gmr_limiting_adaptor *a) { return &a->oom_counts; }

size_t gmr_limiting_adaptor_get_limit(const gmr_limiting_adaptor *a) {
  return atomic_load_explicit(&a->limit_bytes, memory_order_relaxed);
}

gmr_status gmr_limiting_adaptor_set_limit(gmr_limiting_adaptor *a, size_t limit_bytes) {
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  /* A limit that can refuse needs the enforcing counters first. */
  if (limit_bytes != GMR_LIMIT_NONE) gmr__limiting_stop_counting(a);
  atomic_store_explicit(&a->limit_bytes, limit_bytes, memory_order_relaxed);
  return GMR_OK;
}

size_t gmr_limiting_adaptor_get_used_bytes(const gmr_limiting_adaptor *a) {
  return gmr__limiting_used_bytes(a);
}

gmr_status gmr_limiting_adaptor_set_stream_limit(gmr_limiting_adaptor *a, gmr_stream stream,
                                                 size_t limit_bytes) {
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (!a->per_stream) return GMR_ERR_UNSUPPORTED;
  size_t slot = gmr__key_slots_get(&a->stream_slots, (uint64_t)(uintptr_t)stream);
  if (slot == a->stream_slots.capacity) return GMR_ERR_BUSY;
  atomic_store_explicit(&a->streams[slot].limit_bytes, limit_bytes, memory_order_relaxed);
  return GMR_OK;
}

gmr_status gmr_limiting_adaptor_get_stream_usage(const gmr_limiting_adaptor *a, gmr_stream stream,
                                                 size_t *used_bytes, size_t *limit_bytes) {
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (!a->per_stream) return GMR_ERR_UNSUPPORTED;
  size_t slot = gmr__key_slots_find(&a->stream_slots, (uint64_t)(uintptr_t)stream);
  size_t used = 0, limit = a->default_stream_limit_bytes;
  if (slot != a->stream_slots.capacity) {
    used = atomic_load_explicit(&a->streams[slot].used_bytes, memory_order_relaxed);
    limit = atomic_load_explicit(&a->streams[slot].limit_bytes, memory_order_relaxed);
  }
  if (used_bytes != NULL) *used_bytes = used;
  if (limit_bytes != NULL) *limit_bytes = limit;
  return GMR_OK;
}

/* gmr_limiting_adaptor_stats as version 1 laid it out: the OOM counters
 * without the header gmr_oom_counts has since version 2. */
typedef struct limiting_stats_v1 {
  size_t size;
  uint32_t version;
  size_t limit_bytes;
  size_t used_bytes;
  size_t peak_used_bytes;
  uint64_t allocation_count;
  uint64_t deallocation_count;
  uint64_t refused_count;
  uint64_t upstream_failure_count;
  uint64_t overage_count;
  size_t max_overage_bytes;
  uint64_t raise_count;
  uint64_t bad_free_count;
  struct {
    uint64_t failure_count, retry_count, recovered_count, gave_up_count, reentrant_count,
        trim_count, trimmed_bytes, wait_count, wait_timeout_count;
  } oom;
} limiting_stats_v1;

_Static_assert(offsetof(limiting_stats_v1, oom) == offsetof(gmr_limiting_adaptor_stats, oom),
               "version 2 changed only the OOM counters");
_Static_assert(sizeof(((limiting_stats_v1 *)0)->oom) ==
                   sizeof(gmr_oom_counts) - offsetof(gmr_oom_counts, failure_count),
               "the OOM counters of version 1 are those of gmr_oom_counts version 1");

/* Copy `bytes` of `src` into the caller's stats, at most out->size and never
 * the header (the caller's size and version stay). */
static void copy_out(gmr_limiting_adaptor_stats *out, const void *src, size_t bytes) {
  const size_t header = offsetof(gmr_limiting_adaptor_stats, version) + sizeof out->version;
  size_t n = out->size < bytes ? out->size : bytes;
  if (n > header) memcpy((char *)out + header, (const char *)src + header, n - header);
}

gmr_status gmr_limiting_adaptor_get_stats(const gmr_limiting_adaptor *a,
                                          gmr_limiting_adaptor_stats *out) {
  size_t header = offsetof(gmr_limiting_adaptor_stats, version) + sizeof out->version;
  if (a == NULL || out == NULL || out->size < header || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_limiting_adaptor_stats s;
  memset(&s, 0, sizeof s);
  s.limit_bytes = atomic_load_explicit(&a->limit_bytes, memory_order_relaxed);
  s.used_bytes = gmr__limiting_used_bytes(a);
  /* Both modes' counts: what the lanes counted plus what the enforcing
   * counters counted (after a switch, the lanes hold only what came before). */
  int64_t lane_peak = 0, lane_allocations = 0, lane_live = 0;
  gmr__lane_counts_peak(&a->counted, &lane_peak, NULL);
  gmr__lane_counts_total(&a->counted, NULL, &lane_allocations);
  gmr__lane_counts_value(&a->counted, NULL, &lane_live);
  size_t peak = atomic_load_explicit(&a->peak_bytes, memory_order_relaxed);
  s.peak_used_bytes = peak > (size_t)lane_peak ? peak : (size_t)lane_peak;
  int64_t lane_frees =
      lane_allocations - lane_live - atomic_load_explicit(&a->drained_live, memory_order_relaxed);
  s.allocation_count =
      atomic_load_explicit(&a->allocation_count, memory_order_relaxed) + (uint64_t)lane_allocations;
  s.deallocation_count = atomic_load_explicit(&a->deallocation_count, memory_order_relaxed) +
                         (uint64_t)(lane_frees > 0 ? lane_frees : 0);
  s.refused_count = atomic_load_explicit(&a->refused_count, memory_order_relaxed);
  s.upstream_failure_count = atomic_load_explicit(&a->upstream_failure_count, memory_order_relaxed);
  s.overage_count = atomic_load_explicit(&a->overage_count, memory_order_relaxed);
  s.max_overage_bytes = atomic_load_explicit(&a->max_overage_bytes, memory_order_relaxed);
  s.raise_count = atomic_load_explicit(&a->raise_count, memory_order_relaxed);
  s.bad_free_count = atomic_load_explicit(&a->bad_free_count, memory_order_relaxed);
  gmr__oom_counters_read(&a->oom_counts, &s.oom);
  if (out->version < 2u) {
    /* A caller of version 1 (built against 0.1): `oom` without its header. */
    limiting_stats_v1 v1;
    memcpy(&v1, &s, offsetof(limiting_stats_v1, oom));
    memcpy(&v1.oom, (const char *)&s.oom + offsetof(gmr_oom_counts, failure_count), sizeof v1.oom);
    copy_out(out, &v1, sizeof v1);
  } else {
    copy_out(out, &s, sizeof s);
  }
  return GMR_OK;
}
