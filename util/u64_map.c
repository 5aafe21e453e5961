/*
 * util/u64_map.c (internal): see u64_map.h.
 */
#include "util/u64_map.h"

#include <stdlib.h>

#define MIN_CAPACITY 16u

static inline size_t home(const gmr__u64_map *map, uint64_t key) {
  return gmr__u64_map_home(map, key);
}

void gmr__u64_map_clear(gmr__u64_map *map) {
  free(map->slots);
  map->slots = NULL;
  map->capacity = 0;
  map->shift = 0;
  map->count = 0;
  map->zero_used = false;
  map->zero_value = 0;
}

static void place(gmr__u64_map *map, uint64_t key, uint64_t value) {
  size_t mask = map->capacity - 1;
  size_t s = home(map, key);
  while (map->slots[s].key != 0) s = (s + 1) & mask;
  map->slots[s].key = key;
  map->slots[s].value = value;
}

static bool rehash(gmr__u64_map *map, size_t new_capacity) {
  gmr__u64_map_slot *slots = calloc(new_capacity, sizeof *slots);
  if (slots == NULL) return false;
  gmr__u64_map_slot *old = map->slots;
  size_t old_capacity = map->capacity;
  map->slots = slots;
  map->capacity = new_capacity;
  map->shift = 64u - (unsigned)__builtin_ctzll((unsigned long long)new_capacity);
  for (size_t i = 0; i < old_capacity; ++i) {
    if (old[i].key != 0) place(map, old[i].key, old[i].value);
  }
  free(old);
  return true;
}

bool gmr__u64_map_reserve(gmr__u64_map *map, size_t count) {
  /* Keep the load factor at or below 1/2: probes stay short. */
  size_t needed = MIN_CAPACITY;
  while (needed < count * 2) {
    if (needed > SIZE_MAX / 4) return false;
    needed *= 2;
  }
  if (needed <= map->capacity) return true;
  return rehash(map, needed);
}

static bool find(const gmr__u64_map *map, uint64_t key, size_t *slot) {
  *slot = gmr__u64_map_find(map, key);
  return *slot != SIZE_MAX;
}

bool gmr__u64_map_put(gmr__u64_map *map, uint64_t key, uint64_t value) {
  if (key == 0) {
    if (!map->zero_used) map->count++;
    map->zero_used = true;
    map->zero_value = value;
    return true;
  }
  size_t s;
  if (find(map, key, &s)) {
    map->slots[s].value = value;
    return true;
  }
  if (!gmr__u64_map_reserve(map, map->count + 1)) return false;
  place(map, key, value);
  map->count++;
  return true;
}

bool gmr__u64_map_get(const gmr__u64_map *map, uint64_t key, uint64_t *value) {
  if (key == 0) {
    if (map->zero_used && value != NULL) *value = map->zero_value;
    return map->zero_used;
  }
  size_t s;
  if (!find(map, key, &s)) return false;
  if (value != NULL) *value = map->slots[s].value;
  return true;
}

bool gmr__u64_map_remove(gmr__u64_map *map, uint64_t key, uint64_t *value) {
  if (key == 0) {
    if (!map->zero_used) return false;
    if (value != NULL) *value = map->zero_value;
    map->zero_used = false;
    map->count--;
    return true;
  }
  size_t s;
  if (!find(map, key, &s)) return false;
  if (value != NULL) *value = map->slots[s].value;
  gmr__u64_map_remove_at(map, s);
  return true;
}

bool gmr__u64_map_next(const gmr__u64_map *map, size_t *cursor, uint64_t *key, uint64_t *value) {
  /* Cursor 0 is key 0's entry; slot i is cursor i + 1. */
  if (*cursor == 0) {
    *cursor = 1;
    if (map->zero_used) {
      if (key != NULL) *key = 0;
      if (value != NULL) *value = map->zero_value;
      return true;
    }
  }
  for (size_t i = *cursor - 1; i < map->capacity; ++i) {
    if (map->slots[i].key == 0) continue;
    if (key != NULL) *key = map->slots[i].key;
    if (value != NULL) *value = map->slots[i].value;
    *cursor = i + 2;
    return true;
  }
  *cursor = map->capacity + 1;
  return false;
}
