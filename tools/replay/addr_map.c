/*
 * tools/replay/addr_map.c: see addr_map.h.
 */
#include "tools/replay/addr_map.h"

#include <stdlib.h>

#define FIRST_CAPACITY 64u

/* Addresses are multiples of 512 and stream handles of 16: mix the bits
 * (the finaliser of splitmix64) so they spread over the slots. */
static size_t home_of(uint64_t key, size_t capacity) {
  key ^= key >> 30;
  key *= UINT64_C(0xBF58476D1CE4E5B9);
  key ^= key >> 27;
  key *= UINT64_C(0x94D049BB133111EB);
  key ^= key >> 31;
  return (size_t)key & (capacity - 1);
}

/* The slot holding `key`, or the empty slot where it would go. */
static size_t probe(const replay_addr_map *map, uint64_t key) {
  size_t mask = map->capacity - 1;
  size_t i = home_of(key, map->capacity);
  while (map->slots[i].used && map->slots[i].key != key) i = (i + 1) & mask;
  return i;
}

void replay_addr_map_clear(replay_addr_map *map) {
  free(map->slots);
  map->slots = NULL;
  map->capacity = 0;
  map->count = 0;
}

static bool grow(replay_addr_map *map) {
  size_t capacity = map->capacity == 0 ? FIRST_CAPACITY : map->capacity * 2;
  if (capacity > SIZE_MAX / sizeof(replay_addr_slot)) return false;
  replay_addr_slot *slots = calloc(capacity, sizeof *slots);
  if (slots == NULL) return false;
  replay_addr_map bigger = {slots, capacity, 0};
  for (size_t i = 0; i < map->capacity; ++i) {
    if (!map->slots[i].used) continue;
    bigger.slots[probe(&bigger, map->slots[i].key)] = map->slots[i];
    bigger.count++;
  }
  free(map->slots);
  *map = bigger;
  return true;
}

bool replay_addr_map_put(replay_addr_map *map, uint64_t key, uint64_t value) {
  if (map->capacity > 0) {
    size_t i = probe(map, key);
    if (map->slots[i].used) {
      map->slots[i].value = value;
      return true;
    }
  }
  /* Keep the load at most 1/2: probes stay short. */
  if ((map->count + 1) * 2 > map->capacity && !grow(map)) return false;
  size_t i = probe(map, key);
  map->slots[i].key = key;
  map->slots[i].value = value;
  map->slots[i].used = true;
  map->count++;
  return true;
}

bool replay_addr_map_get(const replay_addr_map *map, uint64_t key, uint64_t *value) {
  if (map->count == 0) return false;
  size_t i = probe(map, key);
  if (!map->slots[i].used) return false;
  if (value != NULL) *value = map->slots[i].value;
  return true;
}

bool replay_addr_map_remove(replay_addr_map *map, uint64_t key) {
  if (map->count == 0) return false;
  size_t mask = map->capacity - 1;
  size_t hole = probe(map, key);
  if (!map->slots[hole].used) return false;
  /* Backward shift: move later entries of the run into the hole when their
   * home does not lie (cyclically) between the hole and their slot. */
  for (size_t next = (hole + 1) & mask; map->slots[next].used; next = (next + 1) & mask) {
    size_t home = home_of(map->slots[next].key, map->capacity);
    bool stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next);
    if (stays) continue;
    map->slots[hole] = map->slots[next];
    hole = next;
  }
  map->slots[hole].used = false;
  map->count--;
  return true;
}
