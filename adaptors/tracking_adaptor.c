/*
 * adaptors/tracking_adaptor.c: see gmr/tracking_adaptor.h.
 *
 * The table is 16 shards, chosen by pointer bits; each holds a map pointer ->
 * record index, a growable array of records with a free list, and a ring of
 * recently freed pointers (with a map pointer -> times in the ring) that
 * tells a double free from an unknown pointer. The shard mutex covers only
 * these structures; counters are atomics updated outside it.
 */
#include "gmr/tracking_adaptor.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/counters.h"
#include "core/key_slots.h"
#include "core/u64_map.h"

#define SHARD_COUNT 16
#define NO_RECORD UINT32_MAX

typedef struct record {
  uint64_t seq;       /* order of allocation, from 1 */
  size_t bytes;
  size_t alignment;
  gmr_stream stream;
  uint32_t owner_slot;
  uint32_t next_free; /* free list link while unused */
} record;

typedef struct shard {
  pthread_mutex_t mutex;
  gmr__u64_map live;   /* pointer -> record index */
  record *records;
  uint32_t record_capacity;
  uint32_t free_head;  /* first unused record, NO_RECORD if none */
  gmr__u64_map recent; /* pointer -> times it is in the ring */
  uint64_t *ring;      /* recently freed pointers */
  size_t ring_capacity;
  size_t ring_head;    /* next slot to write */
  size_t ring_count;
  char pad[64];
} shard;

typedef struct owner_counters {
  _Atomic int64_t bytes;
  _Atomic int64_t peak_bytes;
  _Atomic int64_t total_bytes;
  _Atomic int64_t count;
  _Atomic int64_t peak_count;
  _Atomic int64_t total_count;
} owner_counters;

typedef struct scope_frame {
  int64_t parent_peak_bytes;
  int64_t parent_peak_count;
  int64_t total_bytes_at_push;
  int64_t total_count_at_push;
} scope_frame;

struct gmr_tracking_adaptor {
  gmr_resource base; /* first */
  gmr_resource *upstream;
  gmr_tracking_scope per;
  bool check_stream;
  shard *shards;
  gmr__key_slots owner_slots;
  owner_counters *owners; /* owner_slots.capacity + 1 */

  char pad[64];
  _Atomic uint64_t next_seq;
  owner_counters all;
  _Atomic int64_t scope_peak_bytes;
  _Atomic int64_t scope_peak_count;
  _Atomic unsigned scope_depth;
  _Atomic uint64_t deallocation_count;
  _Atomic uint64_t upstream_failure_count;
  _Atomic uint64_t unknown_pointer_count;
  _Atomic uint64_t double_free_count;
  _Atomic uint64_t size_mismatch_count;
  _Atomic uint64_t stream_mismatch_count;

  pthread_mutex_t scope_mutex;
  scope_frame scopes[GMR_TRACKING_MAX_SCOPE_DEPTH];
};

static const gmr_resource_vtbl tracking_vtbl;

static _Atomic uint64_t next_thread_id = 1;
static _Thread_local uint64_t thread_id;

uint64_t gmr_tracking_thread_id(void) {
  if (thread_id == 0) thread_id = atomic_fetch_add(&next_thread_id, 1);
  return thread_id;
}

static void counters_add(owner_counters *c, int64_t bytes) {
  int64_t now = atomic_fetch_add_explicit(&c->bytes, bytes, memory_order_relaxed) + bytes;
  gmr__raise_peak_i64(&c->peak_bytes, now);
  atomic_fetch_add_explicit(&c->total_bytes, bytes, memory_order_relaxed);
  int64_t n = atomic_fetch_add_explicit(&c->count, 1, memory_order_relaxed) + 1;
  gmr__raise_peak_i64(&c->peak_count, n);
  atomic_fetch_add_explicit(&c->total_count, 1, memory_order_relaxed);
}

/* Undo the live part of counters_add (a free); totals stay. */
static void counters_sub(owner_counters *c, int64_t bytes) {
  atomic_fetch_sub_explicit(&c->bytes, bytes, memory_order_relaxed);
  atomic_fetch_sub_explicit(&c->count, 1, memory_order_relaxed);
}

/* Put back what counters_sub took (a free the upstream refused). */
static void counters_restore(owner_counters *c, int64_t bytes) {
  atomic_fetch_add_explicit(&c->bytes, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->count, 1, memory_order_relaxed);
}

static shard *shard_of(const gmr_tracking_adaptor *a, const void *ptr) {
  return &a->shards[gmr__u64_map_shard_of(ptr, SHARD_COUNT)];
}

static uint64_t owner_key(const gmr_tracking_adaptor *a, gmr_stream stream) {
  return a->per == GMR_TRACKING_PER_THREAD ? gmr_tracking_thread_id()
                                           : (uint64_t)(uintptr_t)stream;
}

/* ---- shard structures (mutex held) -------------------------------------- */

static uint32_t take_record(shard *s) {
  if (s->free_head == NO_RECORD) {
    uint32_t old = s->record_capacity;
    uint32_t cap = old == 0 ? 64 : old * 2;
    if (cap <= old || cap == NO_RECORD) return NO_RECORD;
    record *grown = realloc(s->records, (size_t)cap * sizeof *grown);
    if (grown == NULL) return NO_RECORD;
    s->records = grown;
    for (uint32_t i = old; i < cap; ++i) grown[i].next_free = i + 1 < cap ? i + 1 : NO_RECORD;
    s->free_head = old;
    s->record_capacity = cap;
  }
  uint32_t i = s->free_head;
  s->free_head = s->records[i].next_free;
  return i;
}

static void give_record(shard *s, uint32_t i) {
  s->records[i].next_free = s->free_head;
  s->free_head = i;
}

static void recent_forget_one(shard *s, uint64_t key) {
  uint64_t times = 0;
  if (!gmr__u64_map_get(&s->recent, key, &times)) return;
  if (times <= 1) {
    gmr__u64_map_remove(&s->recent, key, NULL);
  } else {
    (void)gmr__u64_map_put(&s->recent, key, times - 1); /* existing key: no growth */
  }
}

/* Remember a free; when the map cannot grow, the oldest entry makes room. */
static void recent_add(shard *s, uint64_t key) {
  if (s->ring_capacity == 0) return;
  if (s->ring_count == s->ring_capacity) {
    size_t oldest = (s->ring_head + s->ring_capacity - s->ring_count) % s->ring_capacity;
    recent_forget_one(s, s->ring[oldest]);
    s->ring_count--;
  }
  uint64_t times = 0;
  (void)gmr__u64_map_get(&s->recent, key, &times);
  if (!gmr__u64_map_put(&s->recent, key, times + 1)) return; /* best effort */
  s->ring[s->ring_head] = key;
  s->ring_head = (s->ring_head + 1) % s->ring_capacity;
  s->ring_count++;
}

/* The ring keeps its entry (it ages out); only the membership count drops,
 * so a reused address is not taken for a freed one. */
static void recent_drop_all(shard *s, uint64_t key) {
  if (s->recent.count != 0) gmr__u64_map_remove(&s->recent, key, NULL);
}

/* ---- vtable ------------------------------------------------------------- */

static gmr_status tracking_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                    gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_tracking_adaptor *a = (gmr_tracking_adaptor *)self;
  gmr_status st = gmr_allocate_ex(a->upstream, bytes, alignment, stream, out_ptr, failure);
  if (st != GMR_OK) {
    atomic_fetch_add_explicit(&a->upstream_failure_count, 1, memory_order_relaxed);
    return st;
  }
  uint64_t key = (uint64_t)(uintptr_t)*out_ptr;
  size_t slot = gmr__key_slots_get(&a->owner_slots, owner_key(a, stream));
  uint64_t seq = atomic_fetch_add_explicit(&a->next_seq, 1, memory_order_relaxed) + 1;

  shard *s = shard_of(a, *out_ptr);
  pthread_mutex_lock(&s->mutex);
  uint32_t i = take_record(s);
  bool ok = i != NO_RECORD && gmr__u64_map_put(&s->live, key, i);
  if (ok) {
    record *r = &s->records[i];
    r->seq = seq;
    r->bytes = bytes;
    r->alignment = alignment;
    r->stream = stream;
    r->owner_slot = (uint32_t)slot;
    recent_drop_all(s, key);
  } else if (i != NO_RECORD) {
    give_record(s, i);
  }
  pthread_mutex_unlock(&s->mutex);
  if (!ok) {
    /* Without a record the free could not be checked: give the memory back. */
    (void)gmr_deallocate(a->upstream, *out_ptr, bytes, alignment, stream);
    *out_ptr = NULL;
    snprintf(failure->message, sizeof failure->message,
             "tracking_adaptor: no host memory for its allocation table");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  counters_add(&a->all, (int64_t)bytes);
  counters_add(&a->owners[slot], (int64_t)bytes);
  if (atomic_load_explicit(&a->scope_depth, memory_order_relaxed) != 0) {
    gmr__raise_peak_i64(&a->scope_peak_bytes, atomic_load_explicit(&a->all.bytes, memory_order_relaxed));
    gmr__raise_peak_i64(&a->scope_peak_count, atomic_load_explicit(&a->all.count, memory_order_relaxed));
  }
  return GMR_OK;
}

static gmr_status tracking_deallocate(gmr_resource *self, void *ptr, size_t bytes,
                                      size_t alignment, gmr_stream stream) {
  gmr_tracking_adaptor *a = (gmr_tracking_adaptor *)self;
  uint64_t key = (uint64_t)(uintptr_t)ptr;
  shard *s = shard_of(a, ptr);
  gmr_status verdict = GMR_OK;
  _Atomic uint64_t *bad_counter = NULL;
  record saved;
  memset(&saved, 0, sizeof saved);
  uint32_t index = NO_RECORD;

  pthread_mutex_lock(&s->mutex);
  uint64_t v = 0;
  if (!gmr__u64_map_get(&s->live, key, &v)) {
    bool freed_before = s->recent.count != 0 && gmr__u64_map_get(&s->recent, key, NULL);
    verdict = freed_before ? GMR_ERR_DOUBLE_FREE : GMR_ERR_UNKNOWN_POINTER;
    bad_counter = freed_before ? &a->double_free_count : &a->unknown_pointer_count;
  } else {
    index = (uint32_t)v;
    saved = s->records[index];
    if (saved.bytes != bytes || saved.alignment != alignment) {
      verdict = GMR_ERR_FREE_MISMATCH;
      bad_counter = &a->size_mismatch_count;
    } else if (a->check_stream && saved.stream != stream) {
      verdict = GMR_ERR_FREE_MISMATCH;
      bad_counter = &a->stream_mismatch_count;
    } else {
      /* Books first (RMM #2304): the record goes before the memory does. */
      gmr__u64_map_remove(&s->live, key, NULL);
      give_record(s, index);
      recent_add(s, key);
    }
  }
  pthread_mutex_unlock(&s->mutex);
  if (verdict != GMR_OK) {
    atomic_fetch_add_explicit(bad_counter, 1, memory_order_relaxed);
    return verdict;
  }
  counters_sub(&a->all, (int64_t)bytes);
  counters_sub(&a->owners[saved.owner_slot], (int64_t)bytes);

  gmr_status st = gmr_deallocate(a->upstream, ptr, bytes, alignment, stream);
  if (st != GMR_OK) {
    /* Nothing was released: the allocation is live again, as it was. */
    pthread_mutex_lock(&s->mutex);
    uint32_t i = take_record(s); /* the record just given back: no growth */
    if (i != NO_RECORD && gmr__u64_map_put(&s->live, key, i)) {
      s->records[i] = saved;
      recent_drop_all(s, key);
    }
    pthread_mutex_unlock(&s->mutex);
    counters_restore(&a->all, (int64_t)bytes);
    counters_restore(&a->owners[saved.owner_slot], (int64_t)bytes);
    return st;
  }
  atomic_fetch_add_explicit(&a->deallocation_count, 1, memory_order_relaxed);
  return GMR_OK;
}

static void free_adaptor(gmr_tracking_adaptor *a) {
  if (a->shards != NULL) {
    for (size_t i = 0; i < SHARD_COUNT; ++i) {
      shard *s = &a->shards[i];
      gmr__u64_map_clear(&s->live);
      gmr__u64_map_clear(&s->recent);
      free(s->records);
      free(s->ring);
      pthread_mutex_destroy(&s->mutex);
    }
    free(a->shards);
  }
  free(a->owners);
  gmr__key_slots_deinit(&a->owner_slots);
  pthread_mutex_destroy(&a->scope_mutex);
  free(a);
}

static gmr_status tracking_destroy(gmr_resource *self) {
  gmr_tracking_adaptor *a = (gmr_tracking_adaptor *)self;
  if (atomic_load(&a->all.count) != 0) return GMR_ERR_BUSY;
  free_adaptor(a);
  return GMR_OK;
}

static gmr_resource *tracking_get_upstream(const gmr_resource *self) {
  return ((const gmr_tracking_adaptor *)self)->upstream;
}

static const gmr_resource_vtbl tracking_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "tracking_adaptor",
    .allocate = tracking_allocate,
    .deallocate = tracking_deallocate,
    .destroy = tracking_destroy,
    .get_upstream = tracking_get_upstream,
    .trim = NULL,
    .get_footprint = NULL,
};

gmr_status gmr_tracking_adaptor_create(gmr_resource *upstream,
                                       const gmr_tracking_adaptor_config *config,
                                       gmr_tracking_adaptor **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  gmr_tracking_adaptor_config cfg = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (gmr_resource_check(upstream) != GMR_OK ||
      (cfg.per != GMR_TRACKING_PER_STREAM && cfg.per != GMR_TRACKING_PER_THREAD)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  size_t max_owners = cfg.max_owners == 0 ? 256 : cfg.max_owners;
  size_t recent = cfg.recent_free_count == 0 ? 4096 : cfg.recent_free_count;
  size_t ring_per_shard = (recent + SHARD_COUNT - 1) / SHARD_COUNT;

  gmr_tracking_adaptor *a = calloc(1, sizeof *a);
  if (a == NULL) return GMR_ERR_OUT_OF_MEMORY;
  pthread_mutex_init(&a->scope_mutex, NULL);
  a->base.vtbl = &tracking_vtbl;
  a->upstream = upstream;
  a->per = cfg.per;
  a->check_stream = cfg.check_stream;
  if (gmr__key_slots_init(&a->owner_slots, max_owners)) a->owners = calloc(a->owner_slots.capacity + 1, sizeof *a->owners);
  if (a->owners != NULL) a->shards = calloc(SHARD_COUNT, sizeof *a->shards);
  if (a->shards == NULL) {
    free_adaptor(a);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < SHARD_COUNT; ++i) {
    shard *s = &a->shards[i];
    pthread_mutex_init(&s->mutex, NULL);
    gmr__u64_map init = GMR__U64_MAP_INIT;
    s->live = init;
    s->recent = init;
    s->free_head = NO_RECORD;
  }
  for (size_t i = 0; i < SHARD_COUNT; ++i) {
    shard *s = &a->shards[i];
    s->ring = calloc(ring_per_shard, sizeof *s->ring);
    if (s->ring == NULL) {
      free_adaptor(a);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    s->ring_capacity = ring_per_shard;
  }
  *out = a;
  return GMR_OK;
}

gmr_resource *gmr_tracking_adaptor_as_resource(gmr_tracking_adaptor *a) {
  return a == NULL ? NULL : &a->base;
}

gmr_tracking_adaptor *gmr_tracking_adaptor_from_resource(gmr_resource *r) {
  return (r != NULL && r->vtbl == &tracking_vtbl) ? (gmr_tracking_adaptor *)r : NULL;
}

/* ---- statistics --------------------------------------------------------- */

static bool header_ok(size_t size, uint32_t version, size_t header) {
  return size >= header && version != 0;
}

static void read_counts(const owner_counters *c, gmr_stat_count *bytes, gmr_stat_count *count) {
  bytes->current = atomic_load_explicit(&c->bytes, memory_order_relaxed);
  bytes->peak = atomic_load_explicit(&c->peak_bytes, memory_order_relaxed);
  bytes->total = atomic_load_explicit(&c->total_bytes, memory_order_relaxed);
  count->current = atomic_load_explicit(&c->count, memory_order_relaxed);
  count->peak = atomic_load_explicit(&c->peak_count, memory_order_relaxed);
  count->total = atomic_load_explicit(&c->total_count, memory_order_relaxed);
}

static size_t owners_seen(const gmr_tracking_adaptor *a) {
  return gmr__key_slots_count(&a->owner_slots);
}

static void fill_stats(const gmr_tracking_adaptor *a, gmr_tracking_stats *s) {
  memset(s, 0, sizeof *s);
  read_counts(&a->all, &s->bytes, &s->allocations);
  s->deallocation_count = atomic_load_explicit(&a->deallocation_count, memory_order_relaxed);
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
  memcpy(&caller_version, (const char *)out + offsetof(gmr_tracking_stats, version),
         sizeof caller_version);
  memcpy(out, full, caller_size < full_size ? caller_size : full_size);
  memcpy(out, &caller_size, sizeof caller_size);
  memcpy((char *)out + offsetof(gmr_tracking_stats, version), &caller_version,
         sizeof caller_version);
}

static const size_t stats_header = offsetof(gmr_tracking_stats, version) + sizeof(uint32_t);

gmr_status gmr_tracking_adaptor_get_stats(const gmr_tracking_adaptor *a, gmr_tracking_stats *out) {
  if (a == NULL || out == NULL || !header_ok(out->size, out->version, stats_header)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_tracking_stats s;
  fill_stats(a, &s);
  copy_out(out, &s, sizeof s);
  return GMR_OK;
}

gmr_status gmr_tracking_adaptor_get_owner_stats(const gmr_tracking_adaptor *a, uint64_t owner,
                                                gmr_tracking_owner_stats *out) {
  if (a == NULL || out == NULL || !header_ok(out->size, out->version, stats_header)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_tracking_owner_stats s;
  memset(&s, 0, sizeof s);
  s.owner = owner;
  size_t slot = gmr__key_slots_find(&a->owner_slots, owner);
  gmr_status st = GMR_OK;
  if (slot == a->owner_slots.capacity && owners_seen(a) < a->owner_slots.capacity) {
    st = GMR_ERR_INVALID_ARGUMENT; /* never seen (the table has room, so not folded) */
  } else {
    read_counts(&a->owners[slot], &s.bytes, &s.allocations);
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

gmr_status gmr_tracking_adaptor_push_scope(gmr_tracking_adaptor *a) {
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr_status st = GMR_OK;
  pthread_mutex_lock(&a->scope_mutex);
  unsigned depth = atomic_load(&a->scope_depth);
  if (depth == GMR_TRACKING_MAX_SCOPE_DEPTH) {
    st = GMR_ERR_BUSY;
  } else {
    scope_frame *f = &a->scopes[depth];
    f->parent_peak_bytes = atomic_load(&a->scope_peak_bytes);
    f->parent_peak_count = atomic_load(&a->scope_peak_count);
    f->total_bytes_at_push = atomic_load(&a->all.total_bytes);
    f->total_count_at_push = atomic_load(&a->all.total_count);
    atomic_store(&a->scope_peak_bytes, atomic_load(&a->all.bytes));
    atomic_store(&a->scope_peak_count, atomic_load(&a->all.count));
    atomic_store(&a->scope_depth, depth + 1);
  }
  pthread_mutex_unlock(&a->scope_mutex);
  return st;
}

gmr_status gmr_tracking_adaptor_pop_scope(gmr_tracking_adaptor *a, gmr_tracking_stats *out) {
  if (a == NULL || (out != NULL && !header_ok(out->size, out->version, stats_header))) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_tracking_stats s;
  gmr_status st = GMR_OK;
  pthread_mutex_lock(&a->scope_mutex);
  unsigned depth = atomic_load(&a->scope_depth);
  if (depth == 0) {
    st = GMR_ERR_UNSUPPORTED;
  } else {
    const scope_frame *f = &a->scopes[depth - 1];
    fill_stats(a, &s);
    int64_t peak_bytes = atomic_load(&a->scope_peak_bytes);
    int64_t peak_count = atomic_load(&a->scope_peak_count);
    /* Concurrent allocations may have raised current past the recorded peak. */
    if (s.bytes.current > peak_bytes) peak_bytes = s.bytes.current;
    if (s.allocations.current > peak_count) peak_count = s.allocations.current;
    s.bytes.peak = peak_bytes;
    s.allocations.peak = peak_count;
    s.bytes.total -= f->total_bytes_at_push;
    s.allocations.total -= f->total_count_at_push;
    /* The parent's peak covers the child's. */
    atomic_store(&a->scope_peak_bytes,
                 f->parent_peak_bytes > peak_bytes ? f->parent_peak_bytes : peak_bytes);
    atomic_store(&a->scope_peak_count,
                 f->parent_peak_count > peak_count ? f->parent_peak_count : peak_count);
    atomic_store(&a->scope_depth, depth - 1);
  }
  pthread_mutex_unlock(&a->scope_mutex);
  if (st == GMR_OK && out != NULL) copy_out(out, &s, sizeof s);
  return st;
}

/* ---- live allocations --------------------------------------------------- */

typedef struct live_entry {
  uint64_t ptr;
  record rec;
} live_entry;

static int by_seq(const void *x, const void *y) {
  uint64_t a = ((const live_entry *)x)->rec.seq, b = ((const live_entry *)y)->rec.seq;
  return a < b ? -1 : a > b;
}

/* Copy every live allocation, oldest first. *out is NULL when there is none. */
static gmr_status collect(const gmr_tracking_adaptor *a, live_entry **out, size_t *count) {
  *out = NULL;
  *count = 0;
  size_t n = 0, cap = 0;
  live_entry *all = NULL;
  for (size_t i = 0; i < SHARD_COUNT; ++i) {
    shard *s = &a->shards[i];
    pthread_mutex_lock(&s->mutex);
    if (n + s->live.count > cap) {
      size_t want = (n + s->live.count) * 2;
      live_entry *grown = realloc(all, want * sizeof *grown);
      if (grown == NULL) {
        pthread_mutex_unlock(&s->mutex);
        free(all);
        return GMR_ERR_OUT_OF_MEMORY;
      }
      all = grown;
      cap = want;
    }
    size_t cursor = 0;
    uint64_t key = 0, idx = 0;
    while (gmr__u64_map_next(&s->live, &cursor, &key, &idx)) {
      all[n].ptr = key;
      all[n].rec = s->records[idx];
      n++;
    }
    pthread_mutex_unlock(&s->mutex);
  }
  if (n > 1) qsort(all, n, sizeof *all, by_seq);
  *out = all;
  *count = n;
  return GMR_OK;
}

static uint64_t owner_of(const gmr_tracking_adaptor *a, const record *r) {
  uint64_t key = 0;
  if (!gmr__key_slots_key(&a->owner_slots, r->owner_slot, &key)) return UINT64_MAX;
  return key;
}

gmr_status gmr_tracking_adaptor_report_leaks(const gmr_tracking_adaptor *a, FILE *out,
                                             size_t *out_count) {
  if (out_count != NULL) *out_count = 0;
  if (a == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  live_entry *all = NULL;
  size_t n = 0;
  gmr_status st = collect(a, &all, &n);
  if (st != GMR_OK) return st;
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += all[i].rec.bytes;
  fprintf(out, "gmr tracking_adaptor: %zu live allocation%s, %zu bytes\n", n, n == 1 ? "" : "s",
          total);
  for (size_t i = 0; i < n; ++i) {
    const record *r = &all[i].rec;
    fprintf(out,
            "  #%" PRIu64 " ptr=0x%" PRIx64 " bytes=%zu alignment=%zu stream=0x%" PRIx64
            " owner=0x%" PRIx64 "\n",
            r->seq, all[i].ptr, r->bytes, r->alignment, (uint64_t)(uintptr_t)r->stream,
            owner_of(a, r));
  }
  fflush(out);
  free(all);
  if (out_count != NULL) *out_count = n;
  return GMR_OK;
}

gmr_status gmr_tracking_adaptor_destroy_force(gmr_tracking_adaptor *a, FILE *report) {
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (report != NULL) (void)gmr_tracking_adaptor_report_leaks(a, report, NULL);
  live_entry *all = NULL;
  size_t n = 0;
  gmr_status st = collect(a, &all, &n);
  if (st != GMR_OK) return st;
  for (size_t i = 0; i < n && st == GMR_OK; ++i) {
    /* Through our own deallocate, so the books stay right if one fails. */
    st = tracking_deallocate(&a->base, (void *)(uintptr_t)all[i].ptr, all[i].rec.bytes,
                             all[i].rec.alignment, all[i].rec.stream);
  }
  free(all);
  if (st != GMR_OK) return st;
  return tracking_destroy(&a->base);
}
