/*
 * util/u64_map.h (internal): a hash map from 64-bit keys to 64-bit values.
 *
 * Open addressing with linear probing over one array of {key, value} slots
 * (one cache line per probe), Fibonacci hashing (a multiply, the top bits:
 * pointer keys whose low bits are zero spread well), load factor at most
 * 1/2, and backward-shift deletion, so there are no tombstones and lookups
 * stay short after many removals. gmr's one hash map from a 64-bit key:
 * the pool's blocks by address, the simulation, the replay tool's trace
 * reader, the tracking adaptor's owners. Every key is allowed, 0 included.
 * (The books of live allocations, util/books.h, keep a whole entry beside
 * each key instead: a table of their own.)
 *
 * Thread-safe: no; callers hold their own lock.
 */
#ifndef GMR_UTIL_U64_MAP_H_
#define GMR_UTIL_U64_MAP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which of `shard_count` maps (a power of two) keeps the pointer `ptr`, for
 * adaptors that shard their pointer maps to spread lock contention. Bits 8
 * and up: allocations are at least 256-byte aligned, so the low bits say
 * nothing. */
static inline size_t gmr__u64_map_shard_of(const void *ptr, size_t shard_count) {
  uint64_t k = (uint64_t)(uintptr_t)ptr;
  k = (k >> 8) ^ (k >> 20);
  return (size_t)(k & (shard_count - 1));
}

/* One slot: the key beside its value (one cache line per probe). Key 0
 * marks an empty slot; the entry of key 0 itself is kept on the side. */
typedef struct gmr__u64_map_slot {
  uint64_t key;
  uint64_t value;
} gmr__u64_map_slot;

typedef struct gmr__u64_map {
  gmr__u64_map_slot *slots; /* capacity slots, NULL before the first insertion */
  size_t capacity;          /* a power of two, or 0 */
  unsigned shift;           /* 64 - log2(capacity): the hash keeps the top bits */
  size_t count;             /* entries, key 0 included */
  bool zero_used;           /* key 0 is in the map ... */
  uint64_t zero_value;      /* ... with this value */
} gmr__u64_map;

/* An empty map; allocates nothing until the first put. */
#define GMR__U64_MAP_INIT {NULL, 0, 0, 0, false, 0}

/* Free the map's storage; the map is empty and usable afterwards. */
void gmr__u64_map_clear(gmr__u64_map *map);

/* Make room for `count` entries, so that puts of new keys up to that count
 * cannot fail. false if allocation failed (the map is unchanged). */
bool gmr__u64_map_reserve(gmr__u64_map *map, size_t count);

/* Insert or replace. false if growing failed (the map is unchanged). */
bool gmr__u64_map_put(gmr__u64_map *map, uint64_t key, uint64_t value);

/* Look up `key`; on success store its value in *value (may be NULL). */
bool gmr__u64_map_get(const gmr__u64_map *map, uint64_t key, uint64_t *value);

/* Remove `key`; on success store its former value in *value (may be NULL). */
bool gmr__u64_map_remove(gmr__u64_map *map, uint64_t key, uint64_t *value);

/* ---- inline forms of the hot operations (a pool's live map: one lookup
 * and one insert or removal per call, without a call into u64_map.c) ---- */

/* Fibonacci hashing: multiply by 2^64 / golden ratio, keep the top bits. */
static inline size_t gmr__u64_map_home(const gmr__u64_map *map, uint64_t key) {
  return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> map->shift);
}

/* Whether one more key can be put without growing (gmr__u64_map_reserve's
 * rule: load factor at most 1/2; the capacity is 0 or at least 16). */
static inline bool gmr__u64_map_has_room(const gmr__u64_map *map) {
  return (map->count + 1) * 2 <= map->capacity;
}

/* Put `key` (not 0, not in the map). Pre: gmr__u64_map_has_room. */
static inline void gmr__u64_map_put_new(gmr__u64_map *map, uint64_t key, uint64_t value) {
  size_t mask = map->capacity - 1;
  size_t s = gmr__u64_map_home(map, key);
  while (map->slots[s].key != 0) s = (s + 1) & mask;
  map->slots[s].key = key;
  map->slots[s].value = value;
  map->count++;
}

/* The slot index of `key` (not 0), or SIZE_MAX if it is not in the map. */
static inline size_t gmr__u64_map_find(const gmr__u64_map *map, uint64_t key) {
  if (map->capacity == 0) return SIZE_MAX;
  size_t mask = map->capacity - 1;
  for (size_t s = gmr__u64_map_home(map, key);; s = (s + 1) & mask) {
    uint64_t k = map->slots[s].key;
    if (k == key) return s;
    if (k == 0) return SIZE_MAX;
  }
}

/* Remove the entry in slot `s` (from gmr__u64_map_find). Backward-shift
 * deletion: later members of the probe run move into the hole when their
 * home slot does not lie between the hole and them. */
static inline void gmr__u64_map_remove_at(gmr__u64_map *map, size_t s) {
  size_t mask = map->capacity - 1;
  size_t hole = s;
  for (size_t next = (hole + 1) & mask; map->slots[next].key != 0; next = (next + 1) & mask) {
    size_t h = gmr__u64_map_home(map, map->slots[next].key);
    if (((next - h) & mask) >= ((next - hole) & mask)) {
      map->slots[hole] = map->slots[next];
      hole = next;
    }
  }
  map->slots[hole].key = 0;
  map->slots[hole].value = 0;
  map->count--;
}

/* Iterate: start with *cursor = 0; each true return yields one entry. The map
 * must not change during the iteration. */
bool gmr__u64_map_next(const gmr__u64_map *map, size_t *cursor, uint64_t *key, uint64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* GMR_UTIL_U64_MAP_H_ */
