/*
 * adaptors/tracking_report.c: the tracking adaptor's statistics, scopes,
 * leak report and forced destroy. See gmr/tracking_adaptor.h.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "adaptors/tracking_internal.h"
#include "util/thread_home.h"

/* ---- statistics --------------------------------------------------------- */

static bool header_ok(size_t size, uint32_t version, size_t header) {
  return size >= header && version != 0;
}

static size_t owners_seen(const gmr_tracking_adaptor *a) {
  return gmr__key_slots_count(&a->owner_slots);
}

static void fill_stats(const gmr_tracking_adaptor *a, gmr_tracking_adaptor_stats *s) {
  memset(s, 0, sizeof *s);
  gmr__lane_counts_value(&a->all, &s->bytes.current, &s->allocations.current);
  gmr__lane_counts_peak(&a->all, &s->bytes.peak, &s->allocations.peak);
  gmr__lane_counts_total(&a->all, &s->bytes.total, &s->allocations.total);
  /* Every allocation made is live or was freed: no counter of its own on
   * the free path. */
  int64_t freed = s->allocations.total - s->allocations.current;
  s->deallocation_count = freed > 0 ? (uint64_t)freed : 0;
  s->upstream_failure_count = atomic_load_explicit(&a->upstream_failure_count, memory_order_relaxed);
  s->unknown_pointer_count = atomic_load_explicit(&a->unknown_pointer_count, memory_order_relaxed);
  s->double_free_count = atomic_load_explicit(&a->double_free_count, memory_order_relaxed);
  s->size_mismatch_count = atomic_load_explicit(&a->size_mismatch_count, memory_order_relaxed);
  s->stream_mismatch_count = atomic_load_explicit(&a->stream_mismatch_count, memory_order_relaxed);
  s->owner_count = owners_seen(a);
}

/* Copy what the caller's version of the struct has room for. */
static void copy_out(void *out, const void *full, size_t full_size) {
  size_t caller_size = 0;
  uint32_t caller_version = 0;
  memcpy(&caller_size, out, sizeof caller_size);
  memcpy(&caller_version, (const char *)out + offsetof(gmr_tracking_adaptor_stats, version),
         sizeof caller_version);
  memcpy(out, full, caller_size < full_size ? caller_size : full_size);
  memcpy(out, &caller_size, sizeof caller_size);
  memcpy((char *)out + offsetof(gmr_tracking_adaptor_stats, version), &caller_version,
         sizeof caller_version);
}

static const size_t stats_header = offsetof(gmr_tracking_adaptor_stats, version) + sizeof(uint32_t);

gmr_status gmr_tracking_adaptor_get_stats(const gmr_tracking_adaptor *a,
                                          gmr_tracking_adaptor_stats *out) {
  if (a == NULL || out == NULL || !header_ok(out->size, out->version, stats_header)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_tracking_adaptor_stats s;
  fill_stats(a, &s);
  copy_out(out, &s, sizeof s);
  return GMR_OK;
}

gmr_status gmr_tracking_adaptor_get_owner_stats(const gmr_tracking_adaptor *a, uint64_t owner,
                                                gmr_tracking_adaptor_owner_stats *out) {
  if (a == NULL || out == NULL || !header_ok(out->size, out->version, stats_header)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (owner == GMR_TRACKING_OWNER_CALLING_THREAD && a->per == GMR_TRACKING_PER_THREAD) {
    owner = gmr__thread_serial();
  }
  gmr_tracking_adaptor_owner_stats s;
  memset(&s, 0, sizeof s);
  s.owner = owner;
  size_t slot = gmr__key_slots_find(&a->owner_slots, owner);
  gmr_status st = GMR_OK;
  if (slot == a->owner_slots.capacity && owners_seen(a) < a->owner_slots.capacity) {
    st = GMR_ERR_INVALID_ARGUMENT; /* never seen (the table has room, so not folded) */
  } else {
    gmr__tracking_owner_read(a, slot, &s.bytes, &s.allocations);
  }
  copy_out(out, &s, sizeof s);
  return st;
}

gmr_status gmr_tracking_adaptor_list_owners(const gmr_tracking_adaptor *a, uint64_t *owners,
                                            size_t capacity, size_t *count) {
  if (a == NULL || count == NULL || (owners == NULL && capacity > 0)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  size_t n = 0;
  for (size_t i = 0; i < a->owner_slots.capacity; ++i) {
    uint64_t key = 0;
    if (!gmr__key_slots_key(&a->owner_slots, i, &key)) continue;
    if (n < capacity) owners[n] = key;
    n++;
  }
  *count = n;
  return GMR_OK;
}

/* ---- scopes (RMM's push_counters / pop_counters) ------------------------ */

static void scope_count_add(gmr__scope_count *c, int64_t delta, bool undo) {
  c->value += delta;
  if (undo) return; /* a free the upstream refused: value back, nothing new */
  if (delta > 0) c->total += delta;
  if (c->value > c->peak) c->peak = c->value;
}

void gmr__tracking_scope_note(gmr_tracking_adaptor *a, int64_t bytes, int sign, bool undo) {
  pthread_mutex_lock(&a->scope_mutex);
  unsigned depth = atomic_load_explicit(&a->scope_depth, memory_order_relaxed);
  if (depth > 0) {
    gmr__scope_frame *f = &a->scopes[depth - 1];
    int direction = undo ? -sign : sign;
    scope_count_add(&f->bytes, direction * bytes, undo);
    scope_count_add(&f->allocations, direction, undo);
  }
  pthread_mutex_unlock(&a->scope_mutex);
}

void gmr__tracking_scope_grow(gmr_tracking_adaptor *a, int64_t bytes) {
  pthread_mutex_lock(&a->scope_mutex);
  unsigned depth = atomic_load_explicit(&a->scope_depth, memory_order_relaxed);
  if (depth > 0) scope_count_add(&a->scopes[depth - 1].bytes, bytes, false);
  pthread_mutex_unlock(&a->scope_mutex);
}

gmr_status gmr_tracking_adaptor_push_scope(gmr_tracking_adaptor *a) {
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr_status st = GMR_OK;
  pthread_mutex_lock(&a->scope_mutex);
  unsigned depth = atomic_load(&a->scope_depth);
  if (depth == GMR_TRACKING_MAX_SCOPE_DEPTH) {
    st = GMR_ERR_BUSY;
  } else {
    memset(&a->scopes[depth], 0, sizeof a->scopes[depth]);
    atomic_store(&a->scope_depth, depth + 1);
  }
  pthread_mutex_unlock(&a->scope_mutex);
  return st;
}

/* What a closed scope adds to the one around it (RMM's
 * add_counters_from_tracked_sub_block): its peak counts from where the outer
 * value stood. */
static void merge_into(gmr__scope_count *outer, const gmr__scope_count *inner) {
  if (outer->value + inner->peak > outer->peak) outer->peak = outer->value + inner->peak;
  outer->value += inner->value;
  outer->total += inner->total;
}

static void report_count(gmr_stat_count *out, const gmr__scope_count *c) {
  out->current = c->value;
  out->peak = c->peak;
  out->total = c->total;
}

gmr_status gmr_tracking_adaptor_pop_scope(gmr_tracking_adaptor *a,
                                          gmr_tracking_adaptor_stats *out) {
  if (a == NULL || (out != NULL && !header_ok(out->size, out->version, stats_header))) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_tracking_adaptor_stats s;
  gmr_status st = GMR_OK;
  pthread_mutex_lock(&a->scope_mutex);
  unsigned depth = atomic_load(&a->scope_depth);
  if (depth == 0) {
    st = GMR_ERR_UNSUPPORTED;
  } else {
    const gmr__scope_frame *f = &a->scopes[depth - 1];
    fill_stats(a, &s);
    report_count(&s.bytes, &f->bytes);
    report_count(&s.allocations, &f->allocations);
    if (depth > 1) {
      merge_into(&a->scopes[depth - 2].bytes, &f->bytes);
      merge_into(&a->scopes[depth - 2].allocations, &f->allocations);
    }
    atomic_store(&a->scope_depth, depth - 1);
  }
  pthread_mutex_unlock(&a->scope_mutex);
  if (st == GMR_OK && out != NULL) copy_out(out, &s, sizeof s);
  return st;
}

/* ---- live allocations --------------------------------------------------- */

static uint64_t owner_of(const gmr_tracking_adaptor *a, const gmr__book_entry *e) {
  uint64_t key = 0;
  if (!gmr__key_slots_key(&a->owner_slots, e->owner_slot, &key)) return UINT64_MAX;
  return key;
}

/* A live allocation with its owner's key, for sorting. */
typedef struct owned_item {
  uint64_t owner;
  gmr__book_item item;
} owned_item;

static int by_owner_then_seq(const void *x, const void *y) {
  const owned_item *a = x, *b = y;
  if (a->owner != b->owner) return a->owner < b->owner ? -1 : 1;
  return a->item.entry.seq < b->item.entry.seq ? -1 : a->item.entry.seq > b->item.entry.seq;
}

/* Every live allocation, owner by owner (smallest key first), oldest first
 * (allocation numbers count per owner, so no call shares a counter across
 * threads). *items is NULL when there is none. */
static gmr_status collect(const gmr_tracking_adaptor *a, gmr__book_item **items, size_t *count) {
  gmr_status st = gmr__books_collect(&a->books, items, count);
  if (st != GMR_OK || *count < 2) return st;
  owned_item *sorted = malloc(*count * sizeof *sorted);
  if (sorted == NULL) {
    free(*items);
    *items = NULL;
    *count = 0;
    return GMR_ERR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < *count; ++i) {
    sorted[i].owner = owner_of(a, &(*items)[i].entry);
    sorted[i].item = (*items)[i];
  }
  qsort(sorted, *count, sizeof *sorted, by_owner_then_seq);
  for (size_t i = 0; i < *count; ++i) (*items)[i] = sorted[i].item;
  free(sorted);
  return GMR_OK;
}

gmr_status gmr_tracking_adaptor_report_leaks(const gmr_tracking_adaptor *a, FILE *out,
                                             size_t *out_count) {
  if (out_count != NULL) *out_count = 0;
  if (a == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__book_item *all = NULL;
  size_t n = 0;
  gmr_status st = collect(a, &all, &n);
  if (st != GMR_OK) return st;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += all[i].entry.bytes;
  fprintf(out, "gmr tracking_adaptor: %zu live allocation%s, %zu bytes\n", n, n == 1 ? "" : "s",
          total);
  for (size_t i = 0; i < n; ++i) {
    const gmr__book_entry *e = &all[i].entry;
    fprintf(out,
            "  #%" PRIu64 " ptr=0x%" PRIx64 " bytes=%zu alignment=%zu stream=0x%" PRIx64
            " owner=0x%" PRIx64 "\n",
            e->seq, (uint64_t)all[i].ptr, e->bytes, e->alignment, (uint64_t)(uintptr_t)e->stream,
            owner_of(a, e));
  }
  fflush(out);
  free(all);
  if (out_count != NULL) *out_count = n;
  return GMR_OK;
}

gmr_status gmr_tracking_adaptor_destroy_force(gmr_tracking_adaptor *a, FILE *report) {
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (report != NULL) GMR_IGNORE_STATUS(gmr_tracking_adaptor_report_leaks(a, report, NULL));
  gmr__book_item *all = NULL;
  size_t n = 0;
  gmr_status st = collect(a, &all, &n);
  if (st != GMR_OK) return st;
  for (size_t i = 0; i < n && st == GMR_OK; ++i) {
    /* Through our own deallocate, so the books stay right if one fails. */
    st = gmr__tracking_deallocate(&a->base.resource, (void *)all[i].ptr, all[i].entry.bytes,
                                  all[i].entry.alignment, all[i].entry.stream);
  }
  free(all);
  if (st != GMR_OK) return st;
  return gmr__tracking_destroy(&a->base.resource);
}
