/*
 * util/key_slots.c: see key_slots.h. Open addressing with linear probing;
 * an insertion claims an empty slot with a compare-and-swap.
 */
#include "util/key_slots.h"

#include <stdlib.h>

static uint64_t mix(uint64_t x) {
  /* splitmix64's finaliser: pointers and small ids spread over the table. */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

bool gmr__key_slots_init(gmr__key_slots *t, size_t capacity) {
  size_t cap = 8;
  while (cap < capacity && cap < ((size_t)1 << 24)) cap <<= 1;
  t->keys = calloc(cap, sizeof *t->keys);
  t->capacity = t->keys == NULL ? 0 : cap;
  atomic_init(&t->count, 0);
  return t->keys != NULL;
}

void gmr__key_slots_deinit(gmr__key_slots *t) {
  free((void *)t->keys);
  t->keys = NULL;
  t->capacity = 0;
}

/* The slot of `key`; an empty slot met on the way is claimed for it when
 * `insert`, else ends the search (the key is not there). */
static size_t probe(gmr__key_slots *t, uint64_t key, bool insert) {
  if (key == UINT64_MAX || t->capacity == 0) return t->capacity;
  uint64_t stored = key + 1;
  size_t mask = t->capacity - 1;
  size_t i = (size_t)mix(key) & mask;
  for (size_t probes = 0; probes < t->capacity; ++probes, i = (i + 1) & mask) {
    uint64_t k = atomic_load_explicit(&t->keys[i], memory_order_acquire);
    if (k == stored) return i;
    if (k != 0) continue;
    if (!insert) return t->capacity;
    uint64_t expected = 0;
    if (atomic_compare_exchange_strong_explicit(&t->keys[i], &expected, stored,
                                                memory_order_acq_rel, memory_order_acquire)) {
      atomic_fetch_add_explicit(&t->count, 1, memory_order_relaxed);
      return i;
    }
    if (expected == stored) return i; /* another thread inserted the same key */
  }
  return t->capacity;
}

size_t gmr__key_slots_get(gmr__key_slots *t, uint64_t key) { return probe(t, key, true); }

size_t gmr__key_slots_find(const gmr__key_slots *t, uint64_t key) {
  /* Without insert the table is only read. */
  return probe((gmr__key_slots *)(uintptr_t)t, key, false);
}

bool gmr__key_slots_key(const gmr__key_slots *t, size_t slot, uint64_t *key) {
  if (slot >= t->capacity) return false;
  uint64_t k = atomic_load_explicit(&t->keys[slot], memory_order_acquire);
  if (k == 0) return false;
  *key = k - 1;
  return true;
}
