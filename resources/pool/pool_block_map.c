/*
 * resources/pool/pool_block_map.c (internal): see pool_block_map.h.
 */
#include "resources/pool/pool_block_map.h"

#include <stdlib.h>

#define MIN_CAPACITY 64u

/* Addresses are 256-byte aligned: drop the zero bits, then multiply by the
 * 64-bit golden ratio and keep the top bits (Fibonacci hashing). */
static inline size_t home(const gmr__block_map *map, uintptr_t addr) {
  return (size_t)(((uint64_t)(addr >> 8) * UINT64_C(0x9E3779B97F4A7C15)) >> map->shift);
}

static void place(gmr__block_map *map, gmr__pool_block *b) {
  size_t i = home(map, b->addr);
  while (map->entries[i].addr != 0) i = (i + 1) & map->mask;
  map->entries[i].addr = b->addr;
  map->entries[i].block = b;
}

bool gmr__block_map_reserve_one(gmr__block_map *map) {
  size_t capacity = map->entries == NULL ? 0 : map->mask + 1;
  if ((map->count + 1) * 2 <= capacity) return true;
  size_t new_capacity = capacity == 0 ? MIN_CAPACITY : capacity * 2;
  gmr__block_map_entry *entries = calloc(new_capacity, sizeof *entries);
  if (entries == NULL) return false;
  gmr__block_map_entry *old = map->entries;
  map->entries = entries;
  map->mask = new_capacity - 1;
  map->shift = 64u - (unsigned)__builtin_ctzll((unsigned long long)new_capacity);
  for (size_t i = 0; i < capacity; ++i) {
    if (old[i].addr != 0) place(map, old[i].block);
  }
  free(old);
  return true;
}

void gmr__block_map_insert(gmr__block_map *map, gmr__pool_block *b) {
  place(map, b);
  map->count++;
}

gmr__pool_block *gmr__block_map_find(const gmr__block_map *map, uintptr_t addr) {
  if (map->entries == NULL || addr == 0) return NULL;
  for (size_t i = home(map, addr);; i = (i + 1) & map->mask) {
    uintptr_t a = map->entries[i].addr;
    if (a == addr) return map->entries[i].block;
    if (a == 0) return NULL;
  }
}

void gmr__block_map_remove(gmr__block_map *map, uintptr_t addr) {
  size_t i = home(map, addr);
  while (map->entries[i].addr != addr) i = (i + 1) & map->mask;
  /* Backward shift: move later entries of the run into the hole when their
   * home position allows, so lookups never need tombstones. */
  size_t hole = i;
  for (size_t j = (i + 1) & map->mask; map->entries[j].addr != 0; j = (j + 1) & map->mask) {
    size_t h = home(map, map->entries[j].addr);
    /* Entry j may move to `hole` if its home is not in (hole, j] cyclically. */
    bool movable = hole <= j ? (h <= hole || h > j) : (h <= hole && h > j);
    if (movable) {
      map->entries[hole] = map->entries[j];
      hole = j;
    }
  }
  map->entries[hole].addr = 0;
  map->entries[hole].block = NULL;
  map->count--;
}

void gmr__block_map_clear(gmr__block_map *map) {
  free(map->entries);
  map->entries = NULL;
  map->mask = 0;
  map->shift = 0;
  map->count = 0;
}
