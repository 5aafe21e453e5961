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
 * is unchanged). The check is inline: the map grows rarely. */
static inline bool gmr__block_map_reserve_one(gmr__block_map *map) {
  return gmr__u64_map_has_room(map) || gmr__u64_map_reserve(map, map->count + 1);
}

/* Whether one insertion needs no reservation (the allocation fast path). */
static inline bool gmr__block_map_has_room(const gmr__block_map *map) {
  return gmr__u64_map_has_room(map);
}

/* Insert; pre: reserve_one succeeded since the last insertion (so it cannot
 * fail), and the address is not in the map. */
static inline void gmr__block_map_insert(gmr__block_map *map, gmr__pool_block *b) {
  if (b->node.addr != 0) {
    gmr__u64_map_put_new(map, (uint64_t)b->node.addr, (uint64_t)(uintptr_t)b);
  } else {
    (void)gmr__u64_map_put(map, 0, (uint64_t)(uintptr_t)b);
  }
}

/* A found entry: where it is, for a removal without a second search. */
typedef struct gmr__block_map_hit {
  gmr__pool_block *block; /* NULL: not in the map */
  size_t at;              /* its slot in the map; SIZE_MAX for address 0 */
} gmr__block_map_hit;

/* The block at `addr` (hit.block NULL if none). */
static inline gmr__block_map_hit gmr__block_map_lookup(const gmr__block_map *map, uintptr_t addr) {
  gmr__block_map_hit hit = {NULL, SIZE_MAX};
  if (addr == 0) {
    uint64_t v = 0;
    if (gmr__u64_map_get(map, 0, &v)) hit.block = (gmr__pool_block *)(uintptr_t)v;
    return hit;
  }
  hit.at = gmr__u64_map_find(map, (uint64_t)addr);
  if (hit.at != SIZE_MAX) hit.block = (gmr__pool_block *)(uintptr_t)map->slots[hit.at].value;
  return hit;
}

/* The block at `addr`, or NULL. */
static inline gmr__pool_block *gmr__block_map_find(const gmr__block_map *map, uintptr_t addr) {
  return gmr__block_map_lookup(map, addr).block;
}

/* Remove the entry `hit` found (hit.block not NULL). Its slot is used only
 * if it still holds the block's address: between the lookup and here a
 * free may file a new stream's slot, whose first use can move another
 * slot's cached blocks out of the map and shift the entries after them
 * (backward-shift deletion), so the slot may now hold another block's
 * entry. Keys are unique: a slot with the address is the entry. */
static inline void gmr__block_map_remove_hit(gmr__block_map *map, gmr__block_map_hit hit) {
  uint64_t key = (uint64_t)hit.block->node.addr;
  if (hit.at != SIZE_MAX && hit.at < map->capacity && map->slots[hit.at].key == key) {
    gmr__u64_map_remove_at(map, hit.at);
  } else {
    (void)gmr__u64_map_remove(map, key, NULL);
  }
}

/* Remove the entry of `addr`, which must be present. */
static inline void gmr__block_map_remove(gmr__block_map *map, uintptr_t addr) {
  (void)gmr__u64_map_remove(map, (uint64_t)addr, NULL);
}

/* Free the storage. */
static inline void gmr__block_map_clear(gmr__block_map *map) { gmr__u64_map_clear(map); }

#endif /* GMR_RESOURCES_POOL_POOL_BLOCK_MAP_H_ */
