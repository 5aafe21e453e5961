/*
 * util/books_inline.h (internal): the books' layout and their insert and
 * take as inline functions, for the hot paths written in C (the tracking
 * adaptor's allocate and free): a call less, and no saving of registers,
 * for every call of the stack. util/books.h has the interface (and is
 * included by C++ tests, which cannot include this: C11 atomics).
 *
 * Thread-safe: as util/books.h.
 */
#ifndef GMR_UTIL_BOOKS_INLINE_H_
#define GMR_UTIL_BOOKS_INLINE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/books.h"
#include "util/fence.h"
#include "util/lanes.h"
#include "util/spin_lock.h"

/* ---- the layout (books.c has the functions not inlined) ------------------ */

#define GMR__BOOKS_MIN_CAPACITY 128u
/* 64 MiB regions pick the shard: a pool's chunk (48 to 128 MiB by default)
 * falls in one or two, so a thread allocating from its own arena's chunks
 * uses shards of its own. */
#define GMR__BOOKS_REGION_SHIFT 26
#define GMR__BOOKS_GOLDEN UINT64_C(0x9E3779B97F4A7C15)

typedef struct gmr__books_slot {
  uintptr_t key; /* 0: empty (NULL is never live) */
  gmr__book_entry entry;
} gmr__books_slot;

/* A shard's `owner`, besides 1 + a lane: no thread yet, or none any more
 * (another thread came). Neither is 0, the value of a thread with no lane
 * yet, so the hot path compares with gmr__lane_plus_one directly. */
#define GMR__BOOKS_OWNER_NONE_YET (SIZE_MAX - 1)
#define GMR__BOOKS_OWNER_NOBODY SIZE_MAX

struct gmr__books_shard {
  _Alignas(64) gmr__spin_lock lock;
  /* Biased to one thread's lane (1 + the lane) while only that thread has
   * used the shard: it enters by marking `busy`, with no locked
   * instruction (util/fence.h, the hot side). The first other thread makes
   * the shard locked for good (gmr__books_enter_slow). */
  _Atomic size_t owner;
  _Atomic unsigned busy;
  gmr__books_slot *slots;
  size_t capacity; /* 0 or a power of two >= GMR__BOOKS_MIN_CAPACITY */
  unsigned shift;  /* 64 - log2(capacity) */
  size_t count;
  uintptr_t *ring; /* recently freed addresses; allocated at the first free */
  size_t ring_capacity;
  size_t ring_head;
  size_t ring_used;
};

/* ---- one shard's table (its lock held) ---------------------------------- */

static inline gmr__books_shard *gmr__books_shard_of(const gmr__books *b, const void *ptr) {
  uint64_t region = (uint64_t)(uintptr_t)ptr >> GMR__BOOKS_REGION_SHIFT;
  return &b->shards[(size_t)((region * GMR__BOOKS_GOLDEN) >> 32) & b->shard_mask];
}

/* Fibonacci hashing on the address above its 256-byte alignment. */
static inline size_t gmr__books_home(const gmr__books_shard *s, uintptr_t key) {
  return (size_t)((((uint64_t)key >> 8) * GMR__BOOKS_GOLDEN) >> s->shift);
}

static inline bool gmr__books_find(const gmr__books_shard *s, uintptr_t key, size_t *at) {
  if (s->capacity == 0) return false;
  size_t mask = s->capacity - 1;
  for (size_t i = gmr__books_home(s, key);; i = (i + 1) & mask) {
    if (s->slots[i].key == key) {
      *at = i;
      return true;
    }
    if (s->slots[i].key == 0) return false;
  }
}

/* Put without growing; the caller made sure an empty slot exists. */
static inline void gmr__books_place(gmr__books_shard *s, uintptr_t key,
                                    const gmr__book_entry *entry) {
  size_t mask = s->capacity - 1;
  size_t i = gmr__books_home(s, key);
  while (s->slots[i].key != 0 && s->slots[i].key != key) i = (i + 1) & mask;
  if (s->slots[i].key == 0) s->count++;
  s->slots[i].key = key;
  s->slots[i].entry = *entry;
}

/* Backward-shift deletion: later members of the probe run move into the
 * hole when their home does not lie between the hole and them. */
static inline void gmr__books_erase(gmr__books_shard *s, size_t hole) {
  size_t mask = s->capacity - 1;
  for (size_t next = (hole + 1) & mask; s->slots[next].key != 0; next = (next + 1) & mask) {
    size_t home = gmr__books_home(s, s->slots[next].key);
    if (((next - home) & mask) >= ((next - hole) & mask)) {
      s->slots[hole] = s->slots[next];
      hole = next;
    }
  }
  s->slots[hole].key = 0;
  s->count--;
}

/* ---- entering a shard ---------------------------------------------------- */

/* Enter shard `s` when it is not (or no longer) biased to the calling
 * thread (books.c): claim it if no thread has used it yet, else end its
 * bias (once in its life: a membarrier, then a wait until its owner is out)
 * and take its lock. Returns true when the shard was claimed (biased to the
 * caller), false when its lock is held. */
bool gmr__books_enter_slow(const gmr__books *b, gmr__books_shard *s);

/* Hold `s` for one table operation: as the thread it is biased to (true;
 * no locked instruction) or by its lock (false). */
static inline bool gmr__books_enter(const gmr__books *b, gmr__books_shard *s) {
  /* Only a shard of a process with membarrier is ever biased (see
   * gmr__books_enter_slow), so this needs no check of b->asymmetric. */
  size_t mine = gmr__lane_plus_one;
  if (atomic_load_explicit(&s->owner, memory_order_relaxed) == mine) {
    gmr__fence_light_store(&s->busy, 1, true);
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) == mine) return true;
    atomic_store_explicit(&s->busy, 0, memory_order_release);
  }
  return gmr__books_enter_slow(b, s);
}

static inline void gmr__books_leave(gmr__books_shard *s, bool biased) {
  if (biased) {
    atomic_store_explicit(&s->busy, 0, memory_order_release);
  } else {
    gmr__spin_lock_release(&s->lock);
  }
}

/* The slow paths of insert and take (books.c): a table that must grow
 * first (false: no host memory, nothing changed), the ring's first use, the
 * verdict on a pointer that is not live. */
bool gmr__books_insert_growing(gmr__books_shard *s, uintptr_t key, const gmr__book_entry *entry);
void gmr__books_remember_first(gmr__books_shard *s, uintptr_t key);
gmr__book_verdict gmr__books_not_live(const gmr__books_shard *s, uintptr_t key);

/* gmr__books_insert, inline. */
__attribute__((always_inline)) static inline bool gmr__books_insert_inline(
    gmr__books *b, const void *ptr, const gmr__book_entry *entry) {
  gmr__books_shard *s = gmr__books_shard_of(b, ptr);
  bool ok = true;
  bool biased = gmr__books_enter(b, s);
  if ((s->count + 1) * 2 > s->capacity) { /* kept at most half full */
    ok = gmr__books_insert_growing(s, (uintptr_t)ptr, entry);
  } else {
    gmr__books_place(s, (uintptr_t)ptr, entry);
  }
  gmr__books_leave(s, biased);
  return ok;
}

/* gmr__books_take, inline. */
__attribute__((always_inline)) static inline gmr__book_verdict gmr__books_take_inline(
    gmr__books *b, const void *ptr, size_t bytes, size_t alignment, const gmr_stream *stream,
    gmr__book_entry *out) {
  gmr__books_shard *s = gmr__books_shard_of(b, ptr);
  uintptr_t key = (uintptr_t)ptr;
  gmr__book_verdict verdict = GMR__BOOK_OK;
  size_t at = 0;
  bool biased = gmr__books_enter(b, s);
  if (!gmr__books_find(s, key, &at)) {
    verdict = gmr__books_not_live(s, key);
  } else {
    const gmr__book_entry *e = &s->slots[at].entry;
    *out = *e;
    if (e->bytes != bytes || e->alignment != alignment) {
      verdict = GMR__BOOK_SIZE_MISMATCH;
    } else if (stream != NULL && e->stream != *stream) {
      verdict = GMR__BOOK_STREAM_MISMATCH;
    } else {
      gmr__books_erase(s, at);
      if (s->ring != NULL) { /* remembered, to tell a double free from an unknown pointer */
        s->ring[s->ring_head] = key;
        s->ring_head = (s->ring_head + 1) & (s->ring_capacity - 1);
        if (s->ring_used < s->ring_capacity) s->ring_used++;
      } else if (s->ring_capacity != 0) {
        gmr__books_remember_first(s, key);
      }
    }
  }
  gmr__books_leave(s, biased);
  return verdict;
}

#endif /* GMR_UTIL_BOOKS_INLINE_H_ */
