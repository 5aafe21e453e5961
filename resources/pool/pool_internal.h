/*
 * resources/pool/pool_internal.h (internal): the data structures of
 * pool_resource, shared by its algorithm (pool_resource.c) and its invariant
 * walk (pool_check.c).
 *
 * An arena owns chunks; a chunk is tiled by blocks (pool_block.h) in address
 * order; every free block sits in exactly one slot's free index; every
 * allocated block is in exactly one arena's live map. Slot 0 of an arena is
 * the shared slot: blocks whose last user is known to be done, free for any
 * stream (with stream ordering off, it is the only slot). Slots 1.. belong to
 * one stream each and hold what was freed on that stream.
 *
 * Thread-safe: no; each arena's lock guards the arena and everything in it;
 * the chunk registry has its own read-write lock.
 */
#ifndef GMR_RESOURCES_POOL_POOL_INTERNAL_H_
#define GMR_RESOURCES_POOL_POOL_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "gmr/pool_resource.h"
#include "resources/pool/pool_block.h"
#include "resources/pool/pool_block_map.h"
#include "resources/pool/pool_free_index.h"
#include "core/spin_lock.h"
#include "core/stream_event.h"

#define GMR__POOL_UNIT ((size_t)256)
#define GMR__POOL_SHARED_SLOT 0u
#define GMR__POOL_MAX_ARENAS 64u
/* Most recently freed blocks a slot can keep unmerged (config.recent_free_count). */
#define GMR__POOL_CACHE_ENTRIES 32u

typedef struct gmr__pool_arena gmr__pool_arena;

typedef struct gmr__pool_chunk {
  uintptr_t base;
  size_t size;
  gmr__pool_arena *arena;
  gmr__pool_block *first;                /* the block at `base` */
  void *nvtx_heap;                       /* config.nvtx_annotate: the chunk's NVTX heap (may be NULL) */
  struct gmr__pool_chunk *prev, *next;   /* the arena's chunk list */
} gmr__pool_chunk;

/* The free blocks of one stream (or of the shared slot) and its event. The
 * most recent frees wait, unmerged, in `cache` (oldest first) until a request
 * of exactly their size takes one back, the cache overflows, or a slow path
 * needs merged free space; every other free block is in `index`. */
typedef struct gmr__pool_slot {
  gmr__stream_event ev;
  gmr__free_index index;
  uint32_t cache_count;
  gmr__pool_block *cache[GMR__POOL_CACHE_ENTRIES];
} gmr__pool_slot;

typedef struct gmr__header_slab gmr__header_slab;

struct gmr__pool_arena {
  gmr__spin_lock lock;
  gmr_pool_resource *pool;
  gmr__block_map live; /* allocated blocks by address */
  gmr__pool_slot **slots; /* [0] is the shared slot */
  uint32_t slot_count;
  uint32_t slot_capacity;
  uint32_t cached_slot; /* the slot of the last stream looked up (>= 1) */
  gmr__pool_chunk *chunks;
  size_t chunk_count;
  size_t held_bytes;
  gmr__pool_block *spare_headers; /* recycled headers, linked by free_next */
  size_t spare_count;
  gmr__header_slab *slabs;
  size_t in_use_bytes;
  size_t requested_bytes;
  size_t in_use_count;
};

/* Chunks sorted by base address: finds the arena owning a pointer that a
 * thread of another arena frees. Kept only with more than one arena. */
typedef struct gmr__pool_registry {
  pthread_rwlock_t lock;
  gmr__pool_chunk **items;
  size_t count;
  size_t capacity;
} gmr__pool_registry;

struct gmr_pool_resource {
  gmr_resource base; /* first */
  uint64_t id; /* unique for the process: keys the threads' arena cache */
  gmr_resource *upstream;
  const gmr__cuda_ops *cuda;
  gmr_pool_resource_config config;
  uint32_t arena_count;
  gmr__pool_arena **arenas;
  gmr__pool_registry registry;
  atomic_size_t held_bytes;
  atomic_size_t peak_held_bytes;
  atomic_size_t grow_count;
  atomic_size_t upstream_failure_count;
  atomic_size_t release_count;
  gmr__stream_event_counts events;
};

/* Check every invariant of arena `a` (lock held by the caller); on failure
 * write the reason into err (err_bytes) and return false. pool_check.c. */
bool gmr__pool_check_arena(const gmr__pool_arena *a, uint32_t arena_index, char *err,
                           size_t err_bytes);

#endif /* GMR_RESOURCES_POOL_POOL_INTERNAL_H_ */
