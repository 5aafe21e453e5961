/*
 * resources/pool/pool_internal.h (internal): the data structures of
 * pool_resource and the functions its files share:
 *   pool_resource.c  allocate, deallocate, trim, destroy, create, getters
 *   pool_arena.c     block headers, stream slots, arenas
 *   pool_blocks.c    filing free blocks (merging), the cache of recent frees,
 *                    best fit, carving an allocation
 *   pool_growth.c    held bytes, chunks in and out, the growth policy
 *   pool_streams.c   memory freed on other streams (events)
 *   pool_registry.c  chunks by address, for frees from another arena
 *   pool_check.c     the invariant walk
 *   pool_free_index.c, pool_block_map.c, thread_home.c: see their headers.
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
  void *nvtx_heap; /* config.nvtx_annotate: the chunk's NVTX heap (may be NULL) */
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

/* ---- pool_arena.c ---- */
/* Make sure `count` headers can be taken without a host allocation. */
bool gmr__pool_reserve_headers(gmr__pool_arena *a, size_t count);
/* A zeroed header; pre: one is reserved. */
gmr__pool_block *gmr__pool_header_take(gmr__pool_arena *a);
void gmr__pool_header_give(gmr__pool_arena *a, gmr__pool_block *b);
/* The slot of `stream` in `a`, created on first use; UINT32_MAX without host
 * memory; GMR__POOL_SHARED_SLOT with stream ordering off. */
uint32_t gmr__pool_slot_of(gmr__pool_arena *a, gmr_stream stream);
/* Whether a free block filed under slot `si` is free for anyone. */
bool gmr__pool_slot_settled(const gmr__pool_arena *a, uint32_t si);
gmr__pool_arena *gmr__pool_arena_new(gmr_pool_resource *pool);
void gmr__pool_arena_free(const gmr_pool_resource *pool, gmr__pool_arena *a);

/* ---- pool_blocks.c (pre for all: the arena's lock held) ---- */
void gmr__pool_file_free(gmr__pool_arena *a, uint32_t si, gmr__pool_block *b);
void gmr__pool_move_all(gmr__pool_arena *a, uint32_t from, uint32_t to);
void gmr__pool_cache_put(gmr__pool_arena *a, uint32_t si, gmr__pool_block *b);
gmr__pool_block *gmr__pool_cache_take(gmr__pool_slot *s, size_t size);
void gmr__pool_flush_caches(gmr__pool_arena *a);
void gmr__pool_unfile(gmr__pool_arena *a, gmr__pool_block *b);
gmr__pool_block *gmr__pool_find_fit(const gmr__pool_arena *a, uint32_t si, size_t need);
gmr__pool_block *gmr__pool_take(gmr__pool_arena *a, gmr__pool_block *b, size_t size,
                                size_t alignment);

/* ---- pool_registry.c ---- */
bool gmr__pool_registry_reserve_one(gmr__pool_registry *r);
void gmr__pool_registry_insert(gmr__pool_registry *r, gmr__pool_chunk *c);
void gmr__pool_registry_remove(gmr__pool_registry *r, gmr__pool_chunk *c);
gmr__pool_arena *gmr__pool_registry_find_arena(gmr__pool_registry *r, uintptr_t addr);

/* ---- pool_growth.c ---- */
/* Count `bytes` as held if that stays under maximum_pool_bytes. */
bool gmr__pool_held_reserve(gmr_pool_resource *pool, size_t bytes);
void gmr__pool_held_release(gmr_pool_resource *pool, size_t bytes);
gmr_status gmr__pool_add_chunk(gmr__pool_arena *a, uint32_t si, size_t bytes, gmr_stream stream,
                               gmr_failure *failure);
gmr_status gmr__pool_grow(gmr__pool_arena *a, uint32_t si, size_t need, gmr_stream stream,
                          gmr_failure *failure);
gmr_status gmr__pool_release_settled_chunks(gmr__pool_arena *a, size_t *released_bytes);

/* ---- pool_streams.c ---- */
gmr__pool_block *gmr__pool_from_other_streams(gmr__pool_arena *a, uint32_t ti, size_t need);
void gmr__pool_settle_all(gmr__pool_arena *a);

/* ---- pool_check.c ---- */
/* Check every invariant of arena `a` (lock held by the caller); on failure
 * write the reason into err (err_bytes) and return false. pool_check.c. */
bool gmr__pool_check_arena(const gmr__pool_arena *a, uint32_t arena_index, char *err,
                           size_t err_bytes);

#endif /* GMR_RESOURCES_POOL_POOL_INTERNAL_H_ */
