/*
 * adaptors/tracking_adaptor.c: the tracking adaptor's vtable, create and
 * destroy. See gmr/tracking_adaptor.h; the state is in tracking_internal.h,
 * statistics, scopes and leak reports in tracking_report.c.
 *
 * An allocation: the upstream's slot (core/forward.h), one insert into the
 * books (a shard no other thread uses is biased to the thread: no lock), the
 * owner's counters and the overall counters, both kept in the calling
 * thread's lane (tracking_owners.c, util/lanes.h: no locked instruction). A
 * free: one take from the books (which checks it), the counters, the
 * upstream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adaptors/tracking_internal.h"
#include "core/resource_type.h"
#include "util/thread_home.h"
#include "util/books_inline.h"
#include "util/counters.h"
#include "core/failure.h"
#include "core/forward.h"

#define SHARD_COUNT 256
#define DEFAULT_RECENT_FREE_COUNT 4096
#define DEFAULT_MAX_OWNERS 256
/* A thread's lane flushes its overall counts past these: the overall peaks
 * are exact for one thread, and within this much per thread for several. */
#define LANE_BATCH_BYTES ((int64_t)1 << 20)
#define LANE_BATCH_COUNT 256

static const gmr_resource_vtbl tracking_vtbl;

static uint64_t owner_key(const gmr_tracking_adaptor *a, gmr_stream stream) {
  return a->per == GMR_TRACKING_PER_THREAD ? gmr__thread_serial() : (uint64_t)(uintptr_t)stream;
}

static _Atomic uint64_t next_adaptor_id = 1;

/* The owner slot this thread used last, per adaptor id: a thread usually
 * allocates on one stream, and slots never move once given. */
static _Thread_local uint64_t cached_adaptor_id;
static _Thread_local uint64_t cached_owner_key;
static _Thread_local size_t cached_owner_slot;

__attribute__((always_inline)) static inline size_t owner_slot(gmr_tracking_adaptor *a,
                                                              gmr_stream stream) {
  uint64_t key = owner_key(a, stream);
  if (cached_adaptor_id == a->id && cached_owner_key == key) return cached_owner_slot;
  size_t slot = gmr__key_slots_get(&a->owner_slots, key);
  cached_adaptor_id = a->id;
  cached_owner_key = key;
  cached_owner_slot = slot;
  return slot;
}

static bool scopes_open(const gmr_tracking_adaptor *a) {
  return atomic_load_explicit(&a->scope_depth, memory_order_relaxed) != 0;
}

/* ---- vtable ------------------------------------------------------------- */

/* The bookkeeping of an allocation the upstream made: the owner's and the
 * overall counters and the books. Inlined into both allocate slots, so the
 * common one is a single frame (a helper with the upstream call inside took
 * seven arguments, which made the compiler split it into two frames). */
__attribute__((always_inline)) static inline gmr_status note_allocation(
    gmr_tracking_adaptor *a, size_t bytes, size_t alignment, gmr_stream stream, void **out_ptr,
    gmr_failure *failure) {
  size_t slot = owner_slot(a, stream);
  size_t lane = gmr__thread_lane();
  uint64_t seq = gmr__tracking_owner_add(a, lane, slot, (int64_t)bytes); /* its number */
  gmr__book_entry entry = {bytes, alignment, stream, seq, NULL, (uint32_t)slot};
  if (!gmr__books_insert_inline(&a->books, *out_ptr, &entry)) {
    /* Without a record the free could not be checked: give the memory back. */
    gmr__tracking_owner_cancel(a, lane, slot, (int64_t)bytes);
    (void)gmr__forward_deallocate(a->base.upstream, *out_ptr, bytes, alignment, stream);
    *out_ptr = NULL;
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "tracking_adaptor: no host memory for its allocation table");
  }
  gmr__lane_counts_add(&a->all, lane, (int64_t)bytes);
  if (scopes_open(a)) gmr__tracking_scope_note(a, (int64_t)bytes, 1, false);
  return GMR_OK;
}

static gmr_status upstream_failed(gmr_tracking_adaptor *a, gmr_status st) {
  atomic_fetch_add_explicit(&a->upstream_failure_count, 1, memory_order_relaxed);
  return st;
}

/* GCC splits a slot with an early return into two functions (partial
 * inlining), each saving the registers again: 13 instructions a call here.
 * noipa stops that; the slot is called only through the vtable, so no
 * inlining into callers is lost (its helpers are always_inline). Clang does
 * not split it and has no noipa. */
#if defined(__GNUC__) && !defined(__clang__)
#define NOT_SPLIT __attribute__((noipa))
#else
#define NOT_SPLIT
#endif

NOT_SPLIT static gmr_status tracking_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                              gmr_stream stream, void **out_ptr,
                                              gmr_failure *failure) {
  gmr_tracking_adaptor *a = (gmr_tracking_adaptor *)self;
  gmr_resource *up = a->base.upstream;
  gmr_status st = gmr__forward_allocate(up, bytes, alignment, stream, out_ptr, failure);
  if (st != GMR_OK) return upstream_failed(a, st);
  return note_allocation(a, bytes, alignment, stream, out_ptr, failure);
}

static gmr_status tracking_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                              gmr_stream stream, void **out_ptr,
                                              gmr_failure *failure) {
  gmr_tracking_adaptor *a = (gmr_tracking_adaptor *)self;
  gmr_status st =
      gmr__forward_allocate_capturing(a->base.upstream, bytes, alignment, stream, out_ptr, failure);
  if (st != GMR_OK) return upstream_failed(a, st);
  return note_allocation(a, bytes, alignment, stream, out_ptr, failure);
}

gmr_status gmr__tracking_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                    gmr_stream stream) {
  gmr_tracking_adaptor *a = (gmr_tracking_adaptor *)self;
  gmr__book_entry entry;
  /* Books first (RMM #2304): the record goes before the memory does. */
  gmr__book_verdict verdict =
      gmr__books_take_inline(&a->books, ptr, bytes, alignment, a->check_stream ? &stream : NULL,
                             &entry);
  if (verdict != GMR__BOOK_OK) {
    _Atomic uint64_t *counter = verdict == GMR__BOOK_UNKNOWN_POINTER ? &a->unknown_pointer_count
                                : verdict == GMR__BOOK_DOUBLE_FREE   ? &a->double_free_count
                                : verdict == GMR__BOOK_SIZE_MISMATCH ? &a->size_mismatch_count
                                                                     : &a->stream_mismatch_count;
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
    return gmr__book_verdict_status(verdict);
  }
  int64_t freed = (int64_t)entry.bytes;
  size_t lane = gmr__thread_lane();
  gmr__lane_counts_sub(&a->all, lane, freed, false);
  gmr__tracking_owner_sub(a, lane, entry.owner_slot, freed, false);
  bool scoped = scopes_open(a);
  if (scoped) gmr__tracking_scope_note(a, freed, -1, false);

  gmr_status st = gmr__forward_deallocate(a->base.upstream, ptr, bytes, alignment, stream);
  if (st != GMR_OK) {
    /* Nothing was released: the allocation is live again, as it was. */
    (void)gmr__books_restore(&a->books, ptr, &entry); /* see books.h for its one failure */
    gmr__lane_counts_sub(&a->all, lane, freed, true);
    gmr__tracking_owner_sub(a, lane, entry.owner_slot, freed, true);
    if (scoped) gmr__tracking_scope_note(a, freed, -1, true);
    return st;
  }
  return GMR_OK;
}

static gmr_status live_visit(gmr__book_entry *entry, void *ctx) {
  (void)entry;
  (void)ctx;
  return GMR_OK;
}

/* A pointer that is not live here is refused before the upstream sees it. */
static gmr_status tracking_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  gmr_tracking_adaptor *a = (gmr_tracking_adaptor *)self;
  gmr_status st = gmr__books_visit(&a->books, ptr, live_visit, NULL);
  if (st != GMR_OK) return st;
  return gmr__forward_record_stream(a->base.upstream, ptr, stream);
}

/* What an extend checks in the live entry, and then changes. */
typedef struct extend_visit_state {
  size_t bytes;     /* the size the caller says the allocation has */
  size_t alignment; /* as given at allocation */
  size_t new_bytes; /* 0: only check; else the size to record */
  uint32_t owner_slot;
} extend_visit_state;

static gmr_status extend_visit(gmr__book_entry *entry, void *ctx) {
  extend_visit_state *v = ctx;
  if (entry->bytes != v->bytes || entry->alignment != v->alignment) return GMR_ERR_FREE_MISMATCH;
  v->owner_slot = entry->owner_slot;
  if (v->new_bytes != 0) entry->bytes = v->new_bytes;
  return GMR_OK;
}

/* The live entry is checked (a pointer that is not live, or the wrong size
 * or alignment, is refused before the upstream sees it), the upstream grows
 * the allocation, and the entry takes the new size: a later free must give
 * new_bytes. The owner's and the overall bytes (and an open scope's) grow by
 * the difference; allocation counts stay. */
static gmr_status tracking_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                                  size_t alignment, gmr_stream stream, gmr_failure *failure) {
  gmr_tracking_adaptor *a = (gmr_tracking_adaptor *)self;
  extend_visit_state v = {bytes, alignment, 0, 0};
  gmr_status st = gmr__books_visit(&a->books, ptr, extend_visit, &v);
  if (st != GMR_OK) {
    return gmr__failure_set(failure, st,
                            "tracking_adaptor: cannot extend %p from %zu bytes: %s", ptr, bytes,
                            st == GMR_ERR_FREE_MISMATCH
                                ? "it is live with another size or alignment"
                                : "it is not a live allocation of this adaptor");
  }
  st = gmr__forward_extend(a->base.upstream, ptr, bytes, new_bytes, alignment, stream, failure);
  if (st != GMR_OK) {
    atomic_fetch_add_explicit(&a->upstream_failure_count, 1, memory_order_relaxed);
    return st;
  }
  /* pre (gmr/tracking_adaptor.h): no free of `ptr` runs during its extend,
   * so the entry is still there. */
  v.new_bytes = new_bytes;
  (void)gmr__books_visit(&a->books, ptr, extend_visit, &v);
  int64_t added = (int64_t)(new_bytes - bytes);
  gmr__tracking_owner_grow(a, gmr__thread_lane(), v.owner_slot, added);
  gmr__lane_counts_grow(&a->all, gmr__thread_lane(), added);
  if (scopes_open(a)) gmr__tracking_scope_grow(a, added);
  return GMR_OK;
}

static void free_adaptor(gmr_tracking_adaptor *a) {
  gmr__books_deinit(&a->books);
  free(a->owners);
  free(a->owner_lanes);
  gmr__key_slots_deinit(&a->owner_slots);
  pthread_mutex_destroy(&a->scope_mutex);
  free(a);
}

gmr_status gmr__tracking_destroy(gmr_resource *self) {
  gmr_tracking_adaptor *a = (gmr_tracking_adaptor *)self;
  int64_t live = 0;
  gmr__lane_counts_value(&a->all, NULL, &live);
  if (live != 0) return GMR_ERR_BUSY;
  free_adaptor(a);
  return GMR_OK;
}

static const gmr_resource_vtbl tracking_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "tracking_adaptor",
    .allocate = tracking_allocate,
    .deallocate = gmr__tracking_deallocate,
    .destroy = gmr__tracking_destroy,
    .get_upstream = gmr__adaptor_get_upstream,
    .record_stream = tracking_record_stream,
    .allocate_capturing = tracking_allocate_capturing,
    .extend = tracking_extend,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type tracking_type = {&tracking_vtbl, NULL};

/* Zeroed memory aligned for the cache-line counters inside. */
static void *zalloc_aligned(size_t bytes) {
  size_t rounded = (bytes + 63) & ~(size_t)63;
  void *p = aligned_alloc(64, rounded);
  if (p != NULL) memset(p, 0, rounded);
  return p;
}

gmr_status gmr_tracking_adaptor_create(gmr_resource *upstream,
                                       const gmr_tracking_adaptor_config *config,
                                       gmr_tracking_adaptor **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  gmr_tracking_adaptor_config cfg = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (gmr__resource_check_vtbl(upstream) != GMR_OK ||
      (cfg.per != GMR_TRACKING_PER_STREAM && cfg.per != GMR_TRACKING_PER_THREAD)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  size_t max_owners = cfg.max_owners == 0 ? DEFAULT_MAX_OWNERS : cfg.max_owners;
  size_t recent = cfg.recent_free_count == 0 ? DEFAULT_RECENT_FREE_COUNT : cfg.recent_free_count;

  gmr_tracking_adaptor *a = zalloc_aligned(sizeof *a);
  if (a == NULL) return GMR_ERR_OUT_OF_MEMORY;
  if (pthread_mutex_init(&a->scope_mutex, NULL) != 0) {
    free(a);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr__adaptor_init(&a->base, &tracking_vtbl, upstream);
  gmr__resource_type_register(&tracking_type);
  a->per = cfg.per;
  a->check_stream = cfg.check_stream;
  a->id = atomic_fetch_add_explicit(&next_adaptor_id, 1, memory_order_relaxed);
  gmr__lane_counts_init(&a->all, LANE_BATCH_BYTES, LANE_BATCH_COUNT);
  bool ok = gmr__key_slots_init(&a->owner_slots, max_owners);
  if (ok) {
    a->owners = zalloc_aligned((a->owner_slots.capacity + 1) * sizeof *a->owners);
    a->owner_lanes = zalloc_aligned(GMR__LANE_COUNT * sizeof *a->owner_lanes);
    ok = a->owners != NULL && a->owner_lanes != NULL;
  }
  if (ok) gmr__tracking_owners_init(a);
  if (ok) ok = gmr__books_init(&a->books, SHARD_COUNT, recent);
  if (!ok) {
    free_adaptor(a);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  *out = a;
  return GMR_OK;
}

