/*
 * util/books.c (internal): see books.h.
 *
 * Room for restores: a take removes its entry at once (so the common free
 * takes the lock once and makes no other atomic update), and a failed
 * release must be able to put it back without allocating. An insert keeps
 * the table at most half full; a restore may fill it up to one empty slot.
 * So a restore needs memory only when more frees of one shard than half its
 * table (64 at least) failed below at the same moment.
 *
 * Biased shards: a shard serves one thread while only that thread has used
 * it (a pool arena's chunks, a thread's own stream), so its operations need
 * no locked instruction: the thread marks `busy` and checks `owner` (the hot
 * side of an asymmetric Dekker handshake, util/fence.h). The first other
 * thread to come, or a reader of every shard (count, collect), ends the
 * bias for good: under the lock it sets `owner` to nobody, fences every
 * thread (membarrier) and waits until `busy` is clear; from then on every
 * thread takes the lock. So each shard pays at most one membarrier in its
 * life. Without membarrier no shard is ever biased.
 */
#include "util/books.h"

#include "util/books_inline.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/fence.h"
#include "util/lanes.h"
#include "util/spin_lock.h"

#define MIN_CAPACITY GMR__BOOKS_MIN_CAPACITY

typedef gmr__books_slot slot;

gmr_status gmr__book_verdict_status(gmr__book_verdict verdict) {
  switch (verdict) {
    case GMR__BOOK_OK:
      return GMR_OK;
    case GMR__BOOK_UNKNOWN_POINTER:
      return GMR_ERR_UNKNOWN_POINTER;
    case GMR__BOOK_DOUBLE_FREE:
      return GMR_ERR_DOUBLE_FREE;
    default:
      return GMR_ERR_FREE_MISMATCH;
  }
}

static size_t round_up_pow2(size_t n) {
  size_t p = 1;
  while (p < n && p <= SIZE_MAX / 2) p <<= 1;
  return p;
}

bool gmr__books_init(gmr__books *b, size_t shard_count, size_t recent_free_count) {
  /* A ring that large could not be allocated, and its byte count would
   * overflow (the fuzzer's recent_frees=8198552921648689606 made it 0). */
  if (recent_free_count > GMR__BOOKS_MAX_RECENT_FREES) {
    b->shards = NULL;
    b->shard_mask = 0;
    return false;
  }
  size_t n = round_up_pow2(shard_count == 0 ? 1 : shard_count);
  b->shards = aligned_alloc(_Alignof(gmr__books_shard), n * sizeof *b->shards);
  if (b->shards == NULL) {
    b->shard_mask = 0;
    return false;
  }
  memset(b->shards, 0, n * sizeof *b->shards);
  size_t ring = recent_free_count == 0 ? 0 : round_up_pow2(recent_free_count);
  for (size_t i = 0; i < n; ++i) {
    gmr__spin_lock init = GMR__SPIN_LOCK_INIT;
    b->shards[i].lock = init;
    atomic_init(&b->shards[i].owner, GMR__BOOKS_OWNER_NONE_YET);
    atomic_init(&b->shards[i].busy, 0u);
    b->shards[i].ring_capacity = ring;
  }
  b->shard_mask = n - 1;
  b->asymmetric = gmr__fence_asymmetric();
  return true;
}

void gmr__books_deinit(gmr__books *b) {
  if (b->shards == NULL) return;
  for (size_t i = 0; i <= b->shard_mask; ++i) {
    free(b->shards[i].slots);
    free(b->shards[i].ring);
  }
  free(b->shards);
  b->shards = NULL;
}

/* ---- entering a shard (see the top of this file) -------------------------- */

bool gmr__books_enter_slow(const gmr__books *b, gmr__books_shard *s) {
  size_t lane = gmr__thread_lane();
  if (b->asymmetric && lane < GMR__LANE_COUNT) {
    size_t none_yet = GMR__BOOKS_OWNER_NONE_YET;
    if (atomic_compare_exchange_strong_explicit(&s->owner, &none_yet, lane + 1,
                                                memory_order_acquire, memory_order_relaxed)) {
      gmr__fence_light_store(&s->busy, 1, true);
      if (atomic_load_explicit(&s->owner, memory_order_relaxed) == lane + 1) return true;
      atomic_store_explicit(&s->busy, 0, memory_order_release); /* ended meanwhile */
    }
  }
  gmr__spin_lock_acquire(&s->lock);
  size_t seen = atomic_load_explicit(&s->owner, memory_order_relaxed);
  if (seen == GMR__BOOKS_OWNER_NONE_YET &&
      atomic_compare_exchange_strong_explicit(&s->owner, &seen, GMR__BOOKS_OWNER_NOBODY,
                                              memory_order_seq_cst, memory_order_relaxed)) {
    return false; /* never biased: nobody to wait for */
  }
  if (seen != GMR__BOOKS_OWNER_NOBODY) { /* biased to a thread (seen: its lane + 1) */
    atomic_store_explicit(&s->owner, GMR__BOOKS_OWNER_NOBODY, memory_order_seq_cst);
    gmr__fence_heavy(b->asymmetric);
    while (atomic_load_explicit(&s->busy, memory_order_acquire) != 0) {
      sched_yield(); /* its owner is inside for one table operation */
    }
  }
  return false;
}

/* ---- one shard's table (held) ---------------------------------------------- */

static bool grow(gmr__books_shard *s, size_t capacity) {
  slot *old = s->slots;
  size_t old_capacity = s->capacity;
  slot *fresh = calloc(capacity, sizeof *fresh);
  if (fresh == NULL) return false;
  unsigned log2 = 0;
  while (((size_t)1 << log2) < capacity) log2++;
  s->slots = fresh;
  s->capacity = capacity;
  s->shift = 64u - log2;
  s->count = 0;
  for (size_t i = 0; i < old_capacity; ++i) {
    if (old[i].key != 0) gmr__books_place(s, old[i].key, &old[i].entry);
  }
  free(old);
  return true;
}

void gmr__books_remember_first(gmr__books_shard *s, uintptr_t key) {
  s->ring = malloc(s->ring_capacity * sizeof *s->ring);
  if (s->ring == NULL) return; /* best effort: the next bad free reads as unknown */
  s->ring[0] = key;
  s->ring_head = 1 & (s->ring_capacity - 1);
  s->ring_used = 1;
}

bool gmr__books_insert(gmr__books *b, const void *ptr, const gmr__book_entry *entry) {
  return gmr__books_insert_inline(b, ptr, entry);
}

gmr__book_verdict gmr__books_take(gmr__books *b, const void *ptr, size_t bytes, size_t alignment,
                                  const gmr_stream *stream, gmr__book_entry *out) {
  return gmr__books_take_inline(b, ptr, bytes, alignment, stream, out);
}

gmr__book_verdict gmr__books_not_live(const gmr__books_shard *s, uintptr_t key) {
  for (size_t i = 0; s->ring != NULL && i < s->ring_used; ++i) {
    if (s->ring[i] == key) return GMR__BOOK_DOUBLE_FREE;
  }
  return GMR__BOOK_UNKNOWN_POINTER;
}

bool gmr__books_insert_growing(gmr__books_shard *s, uintptr_t key, const gmr__book_entry *entry) {
  size_t wanted = s->count + 1;
  size_t capacity = s->capacity == 0 ? MIN_CAPACITY : s->capacity;
  while (wanted * 2 > capacity) capacity *= 2;
  if (!grow(s, capacity)) return false;
  gmr__books_place(s, key, entry);
  return true;
}

/* ---- the interface ------------------------------------------------------ */

bool gmr__books_restore(gmr__books *b, const void *ptr, const gmr__book_entry *entry) {
  gmr__books_shard *s = gmr__books_shard_of(b, ptr);
  bool biased = gmr__books_enter(b, s);
  /* Room kept for it (see the top of this file), unless half the table is
   * in failed frees at this moment. */
  bool ok = s->count + 1 < s->capacity || grow(s, s->capacity * 2);
  if (ok) gmr__books_place(s, (uintptr_t)ptr, entry);
  gmr__books_leave(s, biased);
  return ok;
}

gmr_status gmr__books_visit(gmr__books *b, const void *ptr, gmr__books_visit_fn *visit,
                            void *ctx) {
  gmr__books_shard *s = gmr__books_shard_of(b, ptr);
  size_t at = 0;
  gmr_status st = GMR_ERR_UNKNOWN_POINTER;
  bool biased = gmr__books_enter(b, s);
  if (gmr__books_find(s, (uintptr_t)ptr, &at)) st = visit(&s->slots[at].entry, ctx);
  gmr__books_leave(s, biased);
  return st;
}

size_t gmr__books_count(const gmr__books *b) {
  size_t n = 0;
  for (size_t i = 0; i <= b->shard_mask; ++i) {
    gmr__books_shard *s = &b->shards[i];
    bool biased = gmr__books_enter(b, s);
    n += s->count;
    gmr__books_leave(s, biased);
  }
  return n;
}

gmr_status gmr__books_collect(const gmr__books *b, gmr__book_item **items, size_t *count) {
  *items = NULL;
  *count = 0;
  gmr__book_item *all = NULL;
  size_t n = 0, capacity = 0;
  for (size_t i = 0; i <= b->shard_mask; ++i) {
    gmr__books_shard *s = &b->shards[i];
    bool biased = gmr__books_enter(b, s);
    if (n + s->count > capacity) {
      size_t want = (n + s->count) * 2;
      gmr__book_item *grown = realloc(all, want * sizeof *grown);
      if (grown == NULL) {
        gmr__books_leave(s, biased);
        free(all);
        return GMR_ERR_OUT_OF_MEMORY;
      }
      all = grown;
      capacity = want;
    }
    for (size_t j = 0; j < s->capacity; ++j) {
      if (s->slots[j].key == 0) continue;
      all[n].ptr = s->slots[j].key;
      all[n].entry = s->slots[j].entry;
      n++;
    }
    gmr__books_leave(s, biased);
  }
  *items = all;
  *count = n;
  return GMR_OK;
}
