/*
 * tools/replay/addr_map.h: the trace reader's map from a 64-bit key (a
 * recorded address or stream value) to a 64-bit value (an event or stream
 * index).
 *
 * The tools use only gmr's public headers, so the reader keeps this small map
 * of its own instead of the library's internal one. Open addressing with
 * linear probing; a removal shifts the following entries back (no
 * tombstones), so lookups stay short in a trace that frees and reuses
 * addresses millions of times. Every key is allowed, 0 included.
 *
 * Thread-safe: no (one reader owns its maps).
 */
#ifndef GMR_TOOLS_REPLAY_ADDR_MAP_H_
#define GMR_TOOLS_REPLAY_ADDR_MAP_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct replay_addr_slot {
  uint64_t key;
  uint64_t value;
  bool used;
} replay_addr_slot;

typedef struct replay_addr_map {
  replay_addr_slot *slots; /* capacity slots, NULL before the first put */
  size_t capacity;         /* 0 or a power of two */
  size_t count;            /* entries held */
} replay_addr_map;

/* An empty map; nothing is allocated until the first put. */
#define REPLAY_ADDR_MAP_INIT {NULL, 0, 0}

/** Free the storage; the map is empty and usable again. */
void replay_addr_map_clear(replay_addr_map *map);

/** Insert `key` or replace its value. false when growing failed (the map is
 * unchanged). */
bool replay_addr_map_put(replay_addr_map *map, uint64_t key, uint64_t value);

/** Look `key` up; on success store its value in *value (may be NULL). */
bool replay_addr_map_get(const replay_addr_map *map, uint64_t key, uint64_t *value);

/** Remove `key`; false when it was not there. */
bool replay_addr_map_remove(replay_addr_map *map, uint64_t key);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_ADDR_MAP_H_ */
