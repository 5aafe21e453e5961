/*
 * adaptors/limiting_adaptor.c: see gmr/limiting_adaptor.h.
 *
 * Hot path while counting (no limit, the default; limiting_internal.h): the
 * upstream's slot called directly (core/forward.h), then the charge added to
 * the calling thread's lane. Enforcing a limit: one compare-and-swap on
 * `used` before the upstream, a peak check after success. No lock either way.
 * An OOM policy is the OOM layer's above (limiting(on_oom=...):
 * adaptors/oom_internal.h); this adaptor only counts its upstream's failures.
 */
#include "gmr/limiting_adaptor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adaptors/limiting_internal.h"
#include "core/events.h"
#include "core/forward.h"
#include "core/resource_type.h"
#include "util/counters.h"
#include "util/fence.h"

/* A thread's lane flushes its counts past these (limiting_internal.h). */
#define LANE_BATCH_BYTES ((int64_t)1 << 20)
#define LANE_BATCH_COUNT 256

static const gmr_resource_vtbl limiting_vtbl;

/* What an allocation of `bytes` is charged: rounded to charge_alignment. */
static size_t charge_of(const gmr_limiting_adaptor *a, size_t bytes) {
  return (bytes + a->charge_mask) & ~a->charge_mask;
}

static ptr_shard *shard_of(gmr_limiting_adaptor *a, const void *ptr) {
  return &a->shards[gmr__u64_map_shard_of(ptr, SHARD_COUNT)];
}

static void emit_limit(gmr_limiting_adaptor *a, gmr_event_kind kind, const gmr_limit_request *rq,
                       size_t value_bytes) {
  if (!gmr__events_enabled(&a->events)) return;
  gmr_event e;
  memset(&e, 0, sizeof e);
  e.kind = kind;
  e.source = &a->base.resource;
  e.policy_name = a->on_limit.name;
  e.bytes = rq->charge_bytes;
  e.stream = rq->stream;
  e.limit_bytes = rq->limit_bytes;
  e.used_bytes = rq->used_bytes;
  e.value_bytes = value_bytes;
  e.scope_stream = rq->scope_stream;
  gmr__event_emit(&a->events, &e);
}

/*
 * Reserve `charge` in `scope`, asking the limit policy when it does not fit.
 * Returns GMR_OK (reserved; *reached is the scope's total with this charge,
 * for the peak once the allocation succeeds) or GMR_ERR_LIMIT_EXCEEDED
 * (nothing reserved).
 */
static gmr_status reserve(gmr_limiting_adaptor *a, const limit_scope *scope, size_t charge,
                          gmr_stream stream, size_t *reached, gmr_failure *failure) {
  size_t used = atomic_load_explicit(scope->used, memory_order_relaxed);
  for (unsigned round = 0;; ++round) {
    size_t limit = atomic_load_explicit(scope->limit, memory_order_relaxed);
    size_t wanted = used + charge;
    if (wanted >= used && wanted <= limit) {
      if (atomic_compare_exchange_weak_explicit(scope->used, &used, wanted, memory_order_relaxed,
                                                memory_order_relaxed)) {
        *reached = wanted;
        return GMR_OK;
      }
      continue; /* `used` was reloaded by the failed exchange */
    }
    gmr_limit_request rq = {charge, used, limit, stream, scope->is_stream};
    size_t new_limit = 0;
    gmr_limit_action action = GMR_LIMIT_ACTION_FAIL;
    if (a->on_limit.decide != NULL && round < MAX_RAISE_ROUNDS) {
      action = a->on_limit.decide(&a->on_limit, &rq, &new_limit);
    }
    if (action == GMR_LIMIT_ACTION_ALLOW) {
      size_t now = atomic_fetch_add_explicit(scope->used, charge, memory_order_relaxed) + charge;
      atomic_fetch_add_explicit(&a->overage_count, 1, memory_order_relaxed);
      size_t over = now > limit ? now - limit : 0;
      gmr__raise_peak(&a->max_overage_bytes, over);
      emit_limit(a, GMR_EVENT_LIMIT_OVERAGE, &rq, over);
      *reached = now;
      return GMR_OK;
    }
    if (action == GMR_LIMIT_ACTION_RAISE && new_limit >= wanted && wanted >= used) {
      /* Raise only from the value the policy saw; if another thread moved
       * the limit meanwhile, judge again against the new value. */
      if (atomic_compare_exchange_strong_explicit(scope->limit, &limit, new_limit,
                                                  memory_order_relaxed, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&a->raise_count, 1, memory_order_relaxed);
        emit_limit(a, GMR_EVENT_LIMIT_RAISED, &rq, new_limit);
      }
      used = atomic_load_explicit(scope->used, memory_order_relaxed);
      continue;
    }
    atomic_fetch_add_explicit(&a->refused_count, 1, memory_order_relaxed);
    emit_limit(a, GMR_EVENT_LIMIT_REFUSED, &rq, 0);
    return gmr__failure_set(failure, GMR_ERR_LIMIT_EXCEEDED,
                            "limiting_adaptor: %zu bytes (charged) would take %zu outstanding "
                            "bytes past the %slimit of %zu bytes (policy %s)",
                            charge, used, scope->is_stream ? "stream's " : "", limit,
                            a->on_limit.name);
  }
}

static void unreserve(const limit_scope *scope, size_t charge) {
  atomic_fetch_sub_explicit(scope->used, charge, memory_order_relaxed);
}

/* Take `charge` off `used` unless it would go below zero. */
static bool try_unreserve(_Atomic size_t *used, size_t charge) {
  size_t cur = atomic_load_explicit(used, memory_order_relaxed);
  while (cur >= charge) {
    if (atomic_compare_exchange_weak_explicit(used, &cur, cur - charge, memory_order_relaxed,
                                              memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

static limit_scope global_scope(gmr_limiting_adaptor *a) {
  limit_scope s = {&a->used_bytes, &a->limit_bytes, &a->peak_bytes, 0};
  return s;
}

static limit_scope stream_scope(gmr_limiting_adaptor *a, size_t slot) {
  stream_counters *c = &a->streams[slot];
  limit_scope s = {&c->used_bytes, &c->limit_bytes, &c->peak_bytes, 1};
  return s;
}

/* How a lane update changes the counting mode's counters. */
typedef enum lane_change { LANE_ALLOCATED, LANE_GREW, LANE_FREED, LANE_FREE_UNDONE } lane_change;

/* Count `charge` in the calling thread's lane, unless the adaptor stopped
 * counting (then nothing is counted and false is returned: the caller uses
 * the enforcing counters). The busy mark, then the flag: the hot side of a
 * Dekker handshake with gmr__limiting_stop_counting(), fenced by
 * util/fence.h (a compiler barrier where membarrier fences the other side;
 * no locked instruction for a lane of its own). */
__attribute__((always_inline)) static inline bool count_in_lane(gmr_limiting_adaptor *a,
                                                                size_t charge,
                                                                lane_change change) {
  size_t lane = gmr__thread_lane();
  _Atomic unsigned *inside = &a->busy[lane].inside;
  /* A lane of its own is marked with one exchange and cleared with a plain
   * store; the lane of threads without one counts them. */
  bool own = lane < GMR__LANE_COUNT;
  bool asymmetric = a->asymmetric_fence; /* read once: the fence below is a compiler barrier */
  if (own) {
    gmr__fence_light_store(inside, 1, asymmetric);
  } else {
    atomic_fetch_add_explicit(inside, 1, memory_order_seq_cst);
  }
  bool counting = gmr__fence_light_load(&a->counting, asymmetric && own);
  if (counting) {
    if (change == LANE_ALLOCATED) {
      gmr__lane_counts_add(&a->counted, lane, (int64_t)charge);
    } else if (change == LANE_GREW) {
      gmr__lane_counts_grow(&a->counted, lane, (int64_t)charge);
    } else {
      gmr__lane_counts_sub(&a->counted, lane, (int64_t)charge, change == LANE_FREE_UNDONE);
    }
  }
  if (own) {
    atomic_store_explicit(inside, 0, memory_order_release);
  } else {
    atomic_fetch_sub_explicit(inside, 1, memory_order_release);
  }
  return counting;
}

static size_t slot_of_stream(gmr_limiting_adaptor *a, gmr_stream stream) {
  return gmr__key_slots_get(&a->stream_slots, (uint64_t)(uintptr_t)stream);
}

/* The upstream's slot, counting a failure for lack of memory in stats.oom. */
static inline gmr_status call_upstream(gmr_limiting_adaptor *a, bool capturing, size_t bytes,
                                       size_t alignment, gmr_stream stream, void **out_ptr,
                                       gmr_failure *failure) {
  gmr_resource *up = a->base.upstream;
  gmr_status st =
      capturing ? gmr__forward_allocate_capturing(up, bytes, alignment, stream, out_ptr, failure)
                : gmr__forward_allocate(up, bytes, alignment, stream, out_ptr, failure);
  gmr__oom_counters_note_failure(&a->oom_counts, st);
  return st;
}

/* A counted request the upstream served after a limit came (the switch ran
 * between the two): it was admitted before the limit. */
static gmr_status admitted_before_limit(gmr_limiting_adaptor *a, size_t charge) {
  gmr__limiting_enforcing(a);
  size_t now = atomic_fetch_add_explicit(&a->used_bytes, charge, memory_order_relaxed) + charge;
  gmr__raise_peak(&a->peak_bytes, now);
  atomic_fetch_add_explicit(&a->allocation_count, 1, memory_order_relaxed);
  return GMR_OK;
}

static gmr_status allocate_charged(gmr_limiting_adaptor *a, bool capturing, size_t bytes,
                                   size_t alignment, gmr_stream stream, void **out_ptr,
                                   gmr_failure *failure) {
  size_t charge = charge_of(a, bytes);
  limit_scope global = global_scope(a);
  if (atomic_load_explicit(&a->counting, memory_order_relaxed)) {
    /* Nothing can refuse: charge after success, in this thread's lane. */
    gmr_status st = call_upstream(a, capturing, bytes, alignment, stream, out_ptr, failure);
    if (st != GMR_OK) {
      atomic_fetch_add_explicit(&a->upstream_failure_count, 1, memory_order_relaxed);
      return st;
    }
    if (!count_in_lane(a, charge, LANE_ALLOCATED)) return admitted_before_limit(a, charge);
    return GMR_OK;
  }
  gmr__limiting_enforcing(a);
  size_t global_reached = 0, stream_reached = 0;
  gmr_status st = reserve(a, &global, charge, stream, &global_reached, failure);
  if (st != GMR_OK) return st;

  size_t slot = 0;
  limit_scope per = {NULL, NULL, NULL, 1};
  if (a->per_stream) {
    slot = slot_of_stream(a, stream);
    per = stream_scope(a, slot);
    st = reserve(a, &per, charge, stream, &stream_reached, failure);
    if (st != GMR_OK) {
      unreserve(&global, charge);
      return st;
    }
  }

  st = call_upstream(a, capturing, bytes, alignment, stream, out_ptr, failure);
  if (st != GMR_OK) {
    /* Nothing was allocated: the charge goes back and the peaks never saw it. */
    if (a->per_stream) unreserve(&per, charge);
    unreserve(&global, charge);
    atomic_fetch_add_explicit(&a->upstream_failure_count, 1, memory_order_relaxed);
    return st;
  }

  if (a->per_stream) {
    ptr_shard *sh = shard_of(a, *out_ptr);
    pthread_mutex_lock(&sh->mutex);
    bool ok = gmr__u64_map_put(&sh->map, (uint64_t)(uintptr_t)*out_ptr, slot);
    pthread_mutex_unlock(&sh->mutex);
    if (!ok) {
      /* No room to remember the stream: give the memory back, undo all. */
      (void)gmr__forward_deallocate(a->base.upstream, *out_ptr, bytes, alignment, stream);
      *out_ptr = NULL;
      unreserve(&per, charge);
      unreserve(&global, charge);
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                              "limiting_adaptor: no host memory for its pointer table");
    }
    gmr__raise_peak(per.peak, stream_reached);
  }
  gmr__raise_peak(global.peak, global_reached);
  atomic_fetch_add_explicit(&a->allocation_count, 1, memory_order_relaxed);
  return GMR_OK;
}

/* An upstream failure on the common path (cold: kept out of its frame). */
__attribute__((cold, noinline)) static gmr_status counted_upstream_failed(
    gmr_limiting_adaptor *a, gmr_status st, size_t bytes, size_t alignment, gmr_stream stream,
    void **out_ptr, gmr_failure *failure) {
  *out_ptr = NULL;
  gmr__failure_record(failure, st, a->base.upstream, bytes, alignment, stream);
  gmr__oom_counters_note_failure(&a->oom_counts, st);
  atomic_fetch_add_explicit(&a->upstream_failure_count, 1, memory_order_relaxed);
  return st;
}

static gmr_status limiting_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                    gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_limiting_adaptor *a = (gmr_limiting_adaptor *)self;
  /* The common case: counting (no limit can refuse). The upstream's slot is
   * called as gmr__forward_allocate() does, with its failure handling in a
   * cold function, so the success path keeps only the adaptor and the
   * charge across the call. */
  if (atomic_load_explicit(&a->counting, memory_order_relaxed)) {
    size_t charge = charge_of(a, bytes);
    gmr_resource *up = a->base.upstream;
    gmr_status st = up->vtbl->allocate(up, bytes, alignment, stream, out_ptr, failure);
    if (st != GMR_OK) {
      return counted_upstream_failed(a, st, bytes, alignment, stream, out_ptr, failure);
    }
    if (count_in_lane(a, charge, LANE_ALLOCATED)) return GMR_OK;
    return admitted_before_limit(a, charge);
  }
  return allocate_charged(a, false, bytes, alignment, stream, out_ptr, failure);
}

static gmr_status limiting_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                              gmr_stream stream, void **out_ptr,
                                              gmr_failure *failure) {
  return allocate_charged((gmr_limiting_adaptor *)self, true, bytes, alignment, stream, out_ptr,
                          failure);
}

/* Growth in place is charged as an allocation of the difference between the
 * charges of the new and the old size, against the same limits (the
 * global one, and with per_stream the limit of the stream the allocation is
 * charged to, whatever `stream` the growth is ordered on), before the
 * upstream is asked; the charge goes back if the upstream cannot grow.
 * Allocation counts do not change. */
static gmr_status limiting_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                                  size_t alignment, gmr_stream stream, gmr_failure *failure) {
  gmr_limiting_adaptor *a = (gmr_limiting_adaptor *)self;
  size_t growth = charge_of(a, new_bytes) - charge_of(a, bytes);
  if (atomic_load_explicit(&a->counting, memory_order_relaxed)) {
    /* Nothing can refuse: count after success, in this thread's lane. */
    gmr_status st =
        gmr__forward_extend(a->base.upstream, ptr, bytes, new_bytes, alignment, stream, failure);
    if (st != GMR_OK || growth == 0) return st;
    if (!count_in_lane(a, growth, LANE_GREW)) {
      gmr__limiting_enforcing(a); /* a limit came meanwhile */
      size_t now = atomic_fetch_add_explicit(&a->used_bytes, growth, memory_order_relaxed) + growth;
      gmr__raise_peak(&a->peak_bytes, now);
    }
    return GMR_OK;
  }
  gmr__limiting_enforcing(a);
  limit_scope global = global_scope(a);
  limit_scope per = {NULL, NULL, NULL, 1};
  if (a->per_stream) {
    ptr_shard *sh = shard_of(a, ptr);
    uint64_t slot = 0;
    pthread_mutex_lock(&sh->mutex);
    bool found = gmr__u64_map_get(&sh->map, (uint64_t)(uintptr_t)ptr, &slot);
    pthread_mutex_unlock(&sh->mutex);
    if (!found) {
      return gmr__failure_set(failure, GMR_ERR_UNKNOWN_POINTER,
                              "limiting_adaptor: cannot extend %p: not a live allocation of this "
                              "adaptor",
                              ptr);
    }
    per = stream_scope(a, (size_t)slot);
  }
  size_t global_reached = 0, stream_reached = 0;
  gmr_status st = GMR_OK;
  if (growth != 0) {
    st = reserve(a, &global, growth, stream, &global_reached, failure);
    if (st != GMR_OK) return st;
    if (a->per_stream) {
      st = reserve(a, &per, growth, stream, &stream_reached, failure);
      if (st != GMR_OK) {
        unreserve(&global, growth);
        return st;
      }
    }
  }
  st = gmr__forward_extend(a->base.upstream, ptr, bytes, new_bytes, alignment, stream, failure);
  if (st != GMR_OK) {
    if (growth != 0) {
      if (a->per_stream) unreserve(&per, growth);
      unreserve(&global, growth);
    }
    return st;
  }
  if (growth != 0) {
    if (a->per_stream) gmr__raise_peak(per.peak, stream_reached);
    gmr__raise_peak(global.peak, global_reached);
  }
  return GMR_OK;
}

/* A counted free the upstream refused: nothing was released, the charge
 * goes back where it now belongs. */
static gmr_status free_undone(gmr_limiting_adaptor *a, size_t charge, gmr_status st) {
  if (!count_in_lane(a, charge, LANE_FREE_UNDONE)) {
    gmr__limiting_enforcing(a);
    atomic_fetch_add_explicit(&a->used_bytes, charge, memory_order_relaxed);
  }
  return st;
}

static gmr_status deallocate_enforcing(gmr_limiting_adaptor *a, void *ptr, size_t bytes,
                                       size_t alignment, gmr_stream stream, size_t charge);

/* Counting mode trusts `bytes` (the books of a tracking adaptor above check
 * frees); the enforcing path when the adaptor stopped counting before the
 * charge came off. */
static gmr_status limiting_deallocate(gmr_resource *self, void *ptr, size_t bytes,
                                      size_t alignment, gmr_stream stream) {
  gmr_limiting_adaptor *a = (gmr_limiting_adaptor *)self;
  size_t charge = charge_of(a, bytes);
  if (atomic_load_explicit(&a->counting, memory_order_relaxed) &&
      count_in_lane(a, charge, LANE_FREED)) {
    gmr_status st = gmr__forward_deallocate(a->base.upstream, ptr, bytes, alignment, stream);
    if (st != GMR_OK) return free_undone(a, charge, st);
    return GMR_OK;
  }
  return deallocate_enforcing(a, ptr, bytes, alignment, stream, charge);
}

/* A free of more bytes than are outstanding, without a pointer table: a
 * pointer freed before, one never allocated here, or a live one with a
 * wrong size; the books cannot tell which. The upstream can where it keeps
 * books (every gmr resource): its verdict (GMR_ERR_DOUBLE_FREE, ...) is
 * returned, nothing changed anywhere. An upstream without books may take
 * the memory back; no charge here is known to be that memory's, so none is
 * taken off: the count can only stay high, making the limit stricter,
 * never let a request past it. */
static gmr_status bad_free_judged_below(gmr_limiting_adaptor *a, void *ptr, size_t bytes,
                                        size_t alignment, gmr_stream stream) {
  return gmr__forward_deallocate(a->base.upstream, ptr, bytes, alignment, stream);
}

static gmr_status deallocate_enforcing(gmr_limiting_adaptor *a, void *ptr, size_t bytes,
                                       size_t alignment, gmr_stream stream, size_t charge) {
  gmr__limiting_enforcing(a);
  size_t slot = 0;
  ptr_shard *sh = NULL;
  uint64_t key = (uint64_t)(uintptr_t)ptr;

  /* Books first, memory second (RMM #2304): once the upstream has the
   * memory back another thread may get the same address. */
  if (a->per_stream) {
    sh = shard_of(a, ptr);
    uint64_t v = 0;
    pthread_mutex_lock(&sh->mutex);
    bool found = gmr__u64_map_remove(&sh->map, key, &v);
    pthread_mutex_unlock(&sh->mutex);
    if (!found) {
      atomic_fetch_add_explicit(&a->bad_free_count, 1, memory_order_relaxed);
      return GMR_ERR_UNKNOWN_POINTER;
    }
    slot = (size_t)v;
  }
  bool taken = try_unreserve(&a->used_bytes, charge);
  if (taken && a->per_stream && !try_unreserve(&a->streams[slot].used_bytes, charge)) {
    atomic_fetch_add_explicit(&a->used_bytes, charge, memory_order_relaxed);
    taken = false;
  }
  if (!taken) {
    /* More bytes than are outstanding: a bad free. */
    atomic_fetch_add_explicit(&a->bad_free_count, 1, memory_order_relaxed);
    if (a->per_stream) {
      /* Live here (the table has it): the size is wrong. Put the books back. */
      pthread_mutex_lock(&sh->mutex);
      (void)gmr__u64_map_put(&sh->map, key, slot); /* the slot it just left: no growth */
      pthread_mutex_unlock(&sh->mutex);
      return GMR_ERR_FREE_MISMATCH;
    }
    return bad_free_judged_below(a, ptr, bytes, alignment, stream);
  }

  gmr_status st = gmr__forward_deallocate(a->base.upstream, ptr, bytes, alignment, stream);
  if (st != GMR_OK) {
    atomic_fetch_add_explicit(&a->used_bytes, charge, memory_order_relaxed);
    if (a->per_stream) {
      atomic_fetch_add_explicit(&a->streams[slot].used_bytes, charge, memory_order_relaxed);
      pthread_mutex_lock(&sh->mutex);
      (void)gmr__u64_map_put(&sh->map, key, slot);
      pthread_mutex_unlock(&sh->mutex);
    }
    return st;
  }
  atomic_fetch_add_explicit(&a->deallocation_count, 1, memory_order_relaxed);
  return GMR_OK;
}

static void free_adaptor(gmr_limiting_adaptor *a) {
  if (a->shards != NULL) {
    for (size_t i = 0; i < SHARD_COUNT; ++i) {
      gmr__u64_map_clear(&a->shards[i].map);
      pthread_mutex_destroy(&a->shards[i].mutex);
    }
    free(a->shards);
  }
  free(a->streams);
  gmr__key_slots_deinit(&a->stream_slots);
  pthread_mutex_destroy(&a->mode_mutex);
  if (a->events.lock != NULL) gmr__event_listeners_deinit(&a->events);
  free(a);
}

static gmr_status limiting_destroy(gmr_resource *self) {
  gmr_limiting_adaptor *a = (gmr_limiting_adaptor *)self;
  if (gmr__limiting_used_bytes(a) != 0) return GMR_ERR_BUSY;
  if (a->on_limit.release != NULL) a->on_limit.release(a->on_limit.ctx);
  free_adaptor(a);
  return GMR_OK;
}

static const gmr_resource_vtbl limiting_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "limiting_adaptor",
    .allocate = limiting_allocate,
    .deallocate = limiting_deallocate,
    .destroy = limiting_destroy,
    .get_upstream = gmr__adaptor_get_upstream,
    .record_stream = gmr__adaptor_record_stream,
    .allocate_capturing = limiting_allocate_capturing,
    .extend = limiting_extend,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type limiting_type = {&limiting_vtbl, NULL};

static void release_policy(const gmr_limiting_adaptor_config *cfg) {
  if (cfg->on_limit.release != NULL) cfg->on_limit.release(cfg->on_limit.ctx);
}

gmr_status gmr_limiting_adaptor_create(gmr_resource *upstream,
                                       const gmr_limiting_adaptor_config *config,
                                       gmr_limiting_adaptor **out) {
  if (out != NULL) *out = NULL;
  gmr_limiting_adaptor_config cfg = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (gmr_limit_policy_check(&cfg.on_limit) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  /* From here on the policy is ours: every failure releases it. */
  size_t align = cfg.charge_alignment == 0 ? GMR_DEFAULT_ALIGNMENT : cfg.charge_alignment;
  if (out == NULL || gmr__resource_check_vtbl(upstream) != GMR_OK || (align & (align - 1)) != 0) {
    release_policy(&cfg);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  /* Aligned: the lanes and busy marks are a cache line each. */
  size_t size = (sizeof(gmr_limiting_adaptor) + 63) & ~(size_t)63;
  gmr_limiting_adaptor *a = aligned_alloc(64, size);
  if (a != NULL) memset(a, 0, size);
  if (a == NULL || pthread_mutex_init(&a->mode_mutex, NULL) != 0) {
    free(a);
    release_policy(&cfg);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr__lane_counts_init(&a->counted, LANE_BATCH_BYTES, LANE_BATCH_COUNT);
  /* Nothing can refuse a request: count in per-thread lanes until a limit comes. */
  bool counting = cfg.limit_bytes == GMR_LIMIT_NONE && !cfg.per_stream;
  atomic_init(&a->counting, counting);
  atomic_init(&a->enforcing, !counting);
  a->asymmetric_fence = gmr__fence_asymmetric();
  gmr__adaptor_init(&a->base, &limiting_vtbl, upstream);
  gmr__resource_type_register(&limiting_type);
  a->charge_mask = align - 1;
  a->on_limit = cfg.on_limit;
  atomic_init(&a->limit_bytes, cfg.limit_bytes);
  a->per_stream = cfg.per_stream;
  a->default_stream_limit_bytes = cfg.stream_limit_bytes;
  if (cfg.per_stream) {
    size_t max_streams = cfg.max_streams == 0 ? 64 : cfg.max_streams;
    bool ok = gmr__key_slots_init(&a->stream_slots, max_streams);
    if (ok) a->streams = calloc(a->stream_slots.capacity + 1, sizeof *a->streams);
    if (ok && a->streams != NULL) a->shards = calloc(SHARD_COUNT, sizeof *a->shards);
    if (a->shards == NULL) {
      free_adaptor(a);
      release_policy(&cfg);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i <= a->stream_slots.capacity; ++i) {
      atomic_init(&a->streams[i].limit_bytes, cfg.stream_limit_bytes);
    }
    for (size_t i = 0; i < SHARD_COUNT; ++i) {
      pthread_mutex_init(&a->shards[i].mutex, NULL);
      gmr__u64_map init = GMR__U64_MAP_INIT;
      a->shards[i].map = init;
    }
  }
  if (!gmr__event_listeners_init(&a->events)) {
    free_adaptor(a);
    release_policy(&cfg);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  *out = a;
  return GMR_OK;
}

gmr__event_listeners *gmr__limiting_events(gmr_resource *r) {
  /* The vtable itself: this file owns it (no need for the table of types). */
  return r != NULL && r->vtbl == &limiting_vtbl ? &((gmr_limiting_adaptor *)(void *)r)->events
                                                : NULL;
}

