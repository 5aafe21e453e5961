/*
 * core/u64_map.c (internal): see u64_map.h.
 */
#include "core/u64_map.h"

#include <stdlib.h>

/* Fibonacci hashing: a multiply spreads pointer keys, whose low bits are
 * zero (256-byte alignment), over the table. */
static size_t slot_of(uint64_t key, size_t capacity) {
  uint64_t h = key * UINT64_C(0x9E3779B97F4A7C15);
  h ^= h >> 32;
  return (size_t)h & (capacity - 1);
}

void gmr__u64_map_clear(gmr__u64_map *map) {
  free(map->keys);
  free(map->values);
  free(map->used);
  map->keys = NULL;
  map->values = NULL;
  map->used = NULL;
  map->capacity = 0;
  map->count = 0;
}

static bool rehash(gmr__u64_map *map, size_t new_capacity) {
  uint64_t *keys = malloc(new_capacity * sizeof *keys);
  uint64_t *values = malloc(new_capacity * sizeof *values);
  uint8_t *used = calloc(new_capacity, 1);
  if (keys == NULL || values == NULL || used == NULL) {
    free(keys);
    free(values);
    free(used);
    return false;
  }
  for (size_t i = 0; i < map->capacity; ++i) {
    if (!map->used[i]) continue;
    size_t s = slot_of(map->keys[i], new_capacity);
    while (used[s]) s = (s + 1) & (new_capacity - 1);
    keys[s] = map->keys[i];
    values[s] = map->values[i];
    used[s] = 1;
  }
  free(map->keys);
  free(map->values);
  free(map->used);
  map->keys = keys;
  map->values = values;
  map->used = used;
  map->capacity = new_capacity;
  return true;
}

bool gmr__u64_map_reserve(gmr__u64_map *map, size_t count) {
  /* Keep the load factor at or below 1/2: probes stay short. */
  size_t needed = 16;
  while (needed < count * 2) {
    if (needed > SIZE_MAX / 4) return false;
    needed *= 2;
  }
  if (needed <= map->capacity) return true;
  return rehash(map, needed);
}

static bool find(const gmr__u64_map *map, uint64_t key, size_t *slot) {
  if (map->capacity == 0) return false;
  size_t s = slot_of(key, map->capacity);
  while (map->used[s]) {
    if (map->keys[s] == key) {
      *slot = s;
      return true;
    }
    s = (s + 1) & (map->capacity - 1);
  }
  return false;
}

bool gmr__u64_map_put(gmr__u64_map *map, uint64_t key, uint64_t value) {
  size_t s;
  if (find(map, key, &s)) {
    map->values[s] = value;
    return true;
  }
  if (!gmr__u64_map_reserve(map, map->count + 1)) return false;
  s = slot_of(key, map->capacity);
  while (map->used[s]) s = (s + 1) & (map->capacity - 1);
  map->keys[s] = key;
  map->values[s] = value;
  map->used[s] = 1;
  map->count++;
  return true;
}

bool gmr__u64_map_get(const gmr__u64_map *map, uint64_t key, uint64_t *value) {
  size_t s;
  if (!find(map, key, &s)) return false;
  if (value != NULL) *value = map->values[s];
  return true;
}

bool gmr__u64_map_remove(gmr__u64_map *map, uint64_t key, uint64_t *value) {
  size_t s;
  if (!find(map, key, &s)) return false;
  if (value != NULL) *value = map->values[s];
  /* Backward-shift deletion: move later members of the probe run into the
   * hole when their home slot does not lie between the hole and them. */
  size_t mask = map->capacity - 1;
  size_t hole = s;
  size_t next = (hole + 1) & mask;
  while (map->used[next]) {
    size_t home = slot_of(map->keys[next], map->capacity);
    bool movable = ((next - home) & mask) >= ((next - hole) & mask);
    if (movable) {
      map->keys[hole] = map->keys[next];
      map->values[hole] = map->values[next];
      hole = next;
    }
    next = (next + 1) & mask;
  }
  map->used[hole] = 0;
  map->count--;
  return true;
}

bool gmr__u64_map_next(const gmr__u64_map *map, size_t *cursor, uint64_t *key, uint64_t *value) {
  for (size_t i = *cursor; i < map->capacity; ++i) {
    if (!map->used[i]) continue;
    if (key != NULL) *key = map->keys[i];
    if (value != NULL) *value = map->values[i];
    *cursor = i + 1;
    return true;
  }
  *cursor = map->capacity;
  return false;
}
