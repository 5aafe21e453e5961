/*
 * resources/pool/pool_block_map.h (internal): the allocated blocks of a
 * pool_resource arena, by address, for deallocate.
 *
 * Open addressing with linear probing over one array of {address, block}
 * pairs (one cache line per probe, not three as with separate arrays), load
 * factor at most 1/2, backward-shift deletion (no tombstones). Address 0 marks
 * an empty slot: no block starts at address 0.
 *
 * Thread-safe: no; the arena's lock guards it.
 */
#ifndef GMR_RESOURCES_POOL_POOL_BLOCK_MAP_H_
#define GMR_RESOURCES_POOL_POOL_BLOCK_MAP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resources/pool/pool_block.h"

typedef struct gmr__block_map_entry {
  uintptr_t addr;
  gmr__pool_block *block;
} gmr__block_map_entry;

typedef struct gmr__block_map {
  gmr__block_map_entry *entries;
  size_t mask;  /* capacity - 1; capacity a power of two, 0 entries before first use */
  unsigned shift; /* 64 - log2(capacity) */
  size_t count;
} gmr__block_map;

#define GMR__BLOCK_MAP_INIT {NULL, 0, 0, 0}

/* Make room for one more entry; false if the host allocation failed (the map
 * is unchanged). */
bool gmr__block_map_reserve_one(gmr__block_map *map);

/* Insert; pre: reserve_one succeeded since the last insertion, and addr is not
 * in the map. */
void gmr__block_map_insert(gmr__block_map *map, gmr__pool_block *b);

/* The block at `addr`, or NULL. */
gmr__pool_block *gmr__block_map_find(const gmr__block_map *map, uintptr_t addr);

/* Remove the entry of `addr`, which must be present. */
void gmr__block_map_remove(gmr__block_map *map, uintptr_t addr);

/* Free the storage. */
void gmr__block_map_clear(gmr__block_map *map);

#endif /* GMR_RESOURCES_POOL_POOL_BLOCK_MAP_H_ */
