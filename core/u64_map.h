/*
 * core/u64_map.h (internal): a hash map from 64-bit keys to 64-bit values.
 *
 * Open addressing with linear probing and backward-shift deletion, so there
 * are no tombstones and lookups stay short after many removals. Used wherever
 * gmr maps a pointer to its bookkeeping (the simulation, the replay tool,
 * the tracking adaptor). Every key is allowed, 0 included.
 *
 * Thread-safe: no; callers hold their own lock.
 */
#ifndef GMR_CORE_U64_MAP_H_
#define GMR_CORE_U64_MAP_H_

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

typedef struct gmr__u64_map {
  uint64_t *keys;
  uint64_t *values;
  uint8_t *used;       /* 1 where a slot holds an entry */
  size_t capacity;     /* a power of two, or 0 before the first insertion */
  size_t count;
} gmr__u64_map;

/* An empty map; allocates nothing until the first put. */
#define GMR__U64_MAP_INIT {NULL, NULL, NULL, 0, 0}

/* Free the map's storage; the map is empty and usable afterwards. */
void gmr__u64_map_clear(gmr__u64_map *map);

/* Make room for `count` entries without growing. false if allocation failed
 * (the map is unchanged). */
bool gmr__u64_map_reserve(gmr__u64_map *map, size_t count);

/* Insert or replace. false if growing failed (the map is unchanged). */
bool gmr__u64_map_put(gmr__u64_map *map, uint64_t key, uint64_t value);

/* Look up `key`; on success store its value in *value (may be NULL). */
bool gmr__u64_map_get(const gmr__u64_map *map, uint64_t key, uint64_t *value);

/* Remove `key`; on success store its former value in *value (may be NULL). */
bool gmr__u64_map_remove(gmr__u64_map *map, uint64_t key, uint64_t *value);

/* Iterate: start with *cursor = 0; each true return yields one entry. The map
 * must not change during the iteration. */
bool gmr__u64_map_next(const gmr__u64_map *map, size_t *cursor, uint64_t *key, uint64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_U64_MAP_H_ */
