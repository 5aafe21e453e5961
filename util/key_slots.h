/*
 * util/key_slots.h (internal): a fixed-capacity, insert-only, lock-free map
 * from 64-bit keys (a stream, a thread id) to small slot indices.
 *
 * Adaptors that keep counters per stream or per thread put them in an array
 * indexed by slot, so the hot path finds its counters with a hash and a few
 * atomic loads, no lock. Keys are never removed: a stream destroyed and its
 * address reused later shares the old slot. When the table is full, every new
 * key maps to the overflow slot, index `capacity` (callers size their arrays
 * capacity + 1).
 *
 * Thread-safe: yes (atomics).
 */
#ifndef GMR_UTIL_KEY_SLOTS_H_
#define GMR_UTIL_KEY_SLOTS_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr__key_slots {
  _Atomic uint64_t *keys; /* stored as key + 1, so 0 means empty */
  size_t capacity;        /* a power of two */
  _Atomic size_t count;   /* keys inserted */
} gmr__key_slots;

/* Allocate room for `capacity` keys (rounded up to a power of two, at least
 * 8). false if the allocation failed. */
bool gmr__key_slots_init(gmr__key_slots *t, size_t capacity);
void gmr__key_slots_deinit(gmr__key_slots *t);

/* The slot of `key`, inserting it if new; `capacity` when the table is full.
 * Key UINT64_MAX is folded into the overflow slot. */
size_t gmr__key_slots_get(gmr__key_slots *t, uint64_t key);

/* The slot of `key` if present, else `capacity`. */
size_t gmr__key_slots_find(const gmr__key_slots *t, uint64_t key);

/* Number of keys inserted (at most capacity). */
static inline size_t gmr__key_slots_count(const gmr__key_slots *t) {
  return atomic_load_explicit(&t->count, memory_order_relaxed);
}

/* The key stored in `slot` (< capacity); false if the slot is empty. */
bool gmr__key_slots_key(const gmr__key_slots *t, size_t slot, uint64_t *key);

#ifdef __cplusplus
}
#endif

#endif /* GMR_UTIL_KEY_SLOTS_H_ */
