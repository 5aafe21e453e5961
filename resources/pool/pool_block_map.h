/*
 * resources/pool/pool_block_map.h (internal): the allocated blocks of a
 * pool_resource arena, by address, for deallocate: gmr's one hash map
 * (util/u64_map.h) from a block's address to the block.
 *
 * Thread-safe: no; the arena's lock guards it.
 */
#ifndef GMR_RESOURCES_POOL_POOL_BLOCK_MAP_H_
#define GMR_RESOURCES_POOL_POOL_BLOCK_MAP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/u64_map.h"
#include "resources/pool/pool_block.h"

typedef gmr__u64_map gmr__block_map;

#define GMR__BLOCK_MAP_INIT GMR__U64_MAP_INIT

/* Make room for one more entry; false if the host allocation failed (the map
 * is unchanged). */
static inline bool gmr__block_map_reserve_one(gmr__block_map *map) {
  return gmr__u64_map_reserve(map, map->count + 1);
}

/* Insert; pre: reserve_one succeeded since the last insertion (so it cannot
 * fail), and the address is not in the map. */
static inline void gmr__block_map_insert(gmr__block_map *map, gmr__pool_block *b) {
  (void)gmr__u64_map_put(map, (uint64_t)b->node.addr, (uint64_t)(uintptr_t)b);
}

/* The block at `addr`, or NULL. */
static inline gmr__pool_block *gmr__block_map_find(const gmr__block_map *map, uintptr_t addr) {
  uint64_t v = 0;
  return gmr__u64_map_get(map, (uint64_t)addr, &v) ? (gmr__pool_block *)(uintptr_t)v : NULL;
}

/* Remove the entry of `addr`, which must be present. */
static inline void gmr__block_map_remove(gmr__block_map *map, uintptr_t addr) {
  (void)gmr__u64_map_remove(map, (uint64_t)addr, NULL);
}

/* Free the storage. */
static inline void gmr__block_map_clear(gmr__block_map *map) { gmr__u64_map_clear(map); }

#endif /* GMR_RESOURCES_POOL_POOL_BLOCK_MAP_H_ */
