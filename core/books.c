/*
 * core/books.c (internal): see books.h.
 *
 * Room for restores: a take removes its entry at once (so the common free
 * takes the lock once and makes no other atomic update), and a failed
 * release must be able to put it back without allocating. An insert keeps
 * the table at most half full; a restore may fill it up to one empty slot.
 * So a restore needs memory only when more frees of one shard than half its
 * table (64 at least) failed below at the same moment.
 */
#include "core/books.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/spin_lock.h"

#define MIN_CAPACITY 128u
/* 64 MiB regions pick the shard: a pool's chunk (48 to 128 MiB by default)
 * falls in one or two, so a thread allocating from its own arena's chunks
 * uses shards of its own. */
#define REGION_SHIFT 26
#define GOLDEN UINT64_C(0x9E3779B97F4A7C15)

typedef struct slot {
  uintptr_t key; /* 0: empty (NULL is never live) */
  gmr__book_entry entry;
} slot;

struct gmr__books_shard {
  _Alignas(64) gmr__spin_lock lock;
  slot *slots;
  size_t capacity; /* 0 or a power of two >= MIN_CAPACITY */
  unsigned shift;  /* 64 - log2(capacity) */
  size_t count;
  uintptr_t *ring; /* recently freed addresses; allocated at the first free */
  size_t ring_capacity;
  size_t ring_head;
  size_t ring_used;
};

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

static gmr__books_shard *shard_of(const gmr__books *b, const void *ptr) {
  uint64_t region = (uint64_t)(uintptr_t)ptr >> REGION_SHIFT;
  return &b->shards[(size_t)((region * GOLDEN) >> 32) & b->shard_mask];
}

static size_t home_of(const gmr__books_shard *s, uintptr_t key) {
  /* Fibonacci hashing on the address above its 256-byte alignment. */
  return (size_t)((((uint64_t)key >> 8) * GOLDEN) >> s->shift);
}

bool gmr__books_init(gmr__books *b, size_t shard_count, size_t recent_free_count) {
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
    b->shards[i].ring_capacity = ring;
  }
  b->shard_mask = n - 1;
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

/* ---- one shard's table (lock held) ---------------------------------------- */

static bool find(const gmr__books_shard *s, uintptr_t key, size_t *at) {
  if (s->capacity == 0) return false;
  size_t mask = s->capacity - 1;
  for (size_t i = home_of(s, key);; i = (i + 1) & mask) {
    if (s->slots[i].key == key) {
      *at = i;
      return true;
    }
    if (s->slots[i].key == 0) return false;
  }
}

/* Put without growing; the caller made sure an empty slot exists. */
static void place(gmr__books_shard *s, uintptr_t key, const gmr__book_entry *entry) {
  size_t mask = s->capacity - 1;
  size_t i = home_of(s, key);
  while (s->slots[i].key != 0 && s->slots[i].key != key) i = (i + 1) & mask;
  if (s->slots[i].key == 0) s->count++;
  s->slots[i].key = key;
  s->slots[i].entry = *entry;
}

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
    if (old[i].key != 0) place(s, old[i].key, &old[i].entry);
  }
  free(old);
  return true;
}

/* Backward-shift deletion: later members of the probe run move into the
 * hole when their home does not lie between the hole and them. */
static void erase(gmr__books_shard *s, size_t hole) {
  size_t mask = s->capacity - 1;
  for (size_t next = (hole + 1) & mask; s->slots[next].key != 0; next = (next + 1) & mask) {
    size_t home = home_of(s, s->slots[next].key);
    if (((next - home) & mask) >= ((next - hole) & mask)) {
      s->slots[hole] = s->slots[next];
      hole = next;
    }
  }
  s->slots[hole].key = 0;
  s->count--;
}

static void remember_free(gmr__books_shard *s, uintptr_t key) {
  if (s->ring_capacity == 0) return;
  if (s->ring == NULL) {
    s->ring = malloc(s->ring_capacity * sizeof *s->ring);
    if (s->ring == NULL) return; /* best effort: the next bad free reads as unknown */
  }
  s->ring[s->ring_head] = key;
  s->ring_head = (s->ring_head + 1) & (s->ring_capacity - 1);
  if (s->ring_used < s->ring_capacity) s->ring_used++;
}

static bool freed_recently(const gmr__books_shard *s, uintptr_t key) {
  for (size_t i = 0; s->ring != NULL && i < s->ring_used; ++i) {
    if (s->ring[i] == key) return true;
  }
  return false;
}

/* ---- the interface ------------------------------------------------------ */

bool gmr__books_insert(gmr__books *b, const void *ptr, const gmr__book_entry *entry) {
  gmr__books_shard *s = shard_of(b, ptr);
  bool ok = true;
  gmr__spin_lock_acquire(&s->lock);
  size_t wanted = s->count + 1;
  if (wanted * 2 > s->capacity) {
    size_t capacity = s->capacity == 0 ? MIN_CAPACITY : s->capacity;
    while (wanted * 2 > capacity) capacity *= 2;
    ok = grow(s, capacity);
  }
  if (ok) place(s, (uintptr_t)ptr, entry);
  gmr__spin_lock_release(&s->lock);
  return ok;
}

gmr__book_verdict gmr__books_take(gmr__books *b, const void *ptr, size_t bytes, size_t alignment,
                                  const gmr_stream *stream, gmr__book_entry *out) {
  gmr__books_shard *s = shard_of(b, ptr);
  uintptr_t key = (uintptr_t)ptr;
  gmr__book_verdict verdict = GMR__BOOK_OK;
  size_t at = 0;
  gmr__spin_lock_acquire(&s->lock);
  if (!find(s, key, &at)) {
    verdict = freed_recently(s, key) ? GMR__BOOK_DOUBLE_FREE : GMR__BOOK_UNKNOWN_POINTER;
  } else {
    const gmr__book_entry *e = &s->slots[at].entry;
    *out = *e;
    if (e->bytes != bytes || e->alignment != alignment) {
      verdict = GMR__BOOK_SIZE_MISMATCH;
    } else if (stream != NULL && e->stream != *stream) {
      verdict = GMR__BOOK_STREAM_MISMATCH;
    } else {
      erase(s, at);
      remember_free(s, key);
    }
  }
  gmr__spin_lock_release(&s->lock);
  return verdict;
}

bool gmr__books_restore(gmr__books *b, const void *ptr, const gmr__book_entry *entry) {
  gmr__books_shard *s = shard_of(b, ptr);
  gmr__spin_lock_acquire(&s->lock);
  /* Room kept for it (see the top of this file), unless half the table is
   * in failed frees at this moment. */
  bool ok = s->count + 1 < s->capacity || grow(s, s->capacity * 2);
  if (ok) place(s, (uintptr_t)ptr, entry);
  gmr__spin_lock_release(&s->lock);
  return ok;
}

gmr_status gmr__books_visit(gmr__books *b, const void *ptr, gmr__books_visit_fn *visit,
                            void *ctx) {
  gmr__books_shard *s = shard_of(b, ptr);
  size_t at = 0;
  gmr_status st = GMR_ERR_UNKNOWN_POINTER;
  gmr__spin_lock_acquire(&s->lock);
  if (find(s, (uintptr_t)ptr, &at)) st = visit(&s->slots[at].entry, ctx);
  gmr__spin_lock_release(&s->lock);
  return st;
}

size_t gmr__books_count(const gmr__books *b) {
  size_t n = 0;
  for (size_t i = 0; i <= b->shard_mask; ++i) {
    gmr__books_shard *s = &b->shards[i];
    gmr__spin_lock_acquire(&s->lock);
    n += s->count;
    gmr__spin_lock_release(&s->lock);
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
    gmr__spin_lock_acquire(&s->lock);
    if (n + s->count > capacity) {
      size_t want = (n + s->count) * 2;
      gmr__book_item *grown = realloc(all, want * sizeof *grown);
      if (grown == NULL) {
        gmr__spin_lock_release(&s->lock);
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
    gmr__spin_lock_release(&s->lock);
  }
  *items = all;
  *count = n;
  return GMR_OK;
}
