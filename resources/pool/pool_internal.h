/*
 * resources/pool/pool_internal.h (internal): the data structures of
 * pool_resource and the functions its files share:
 *   pool_resource.c  allocate and deallocate (the order of the steps), the vtable
 *   pool_lifecycle.c create (with messages), trim, destroy
 *   pool_info.c      statistics, get_memory_info, the failure record's free
 *                    figures, and the verdict on a bad free
 *   pool_arena.c     block headers, slots, arenas
 *   pool_blocks.c    filing free blocks (merging), the cache of recent frees,
 *                    best fit, carving an allocation
 *   pool_growth.c    held bytes, chunks in and out, the growth policy, growing
 *                    outside the arena's spin lock
 *   pool_extend.c    growing a chunk in place (the upstream's extend slot)
 *   pool_streams.c   the stream slots' operations for their table and the
 *                    reclaim steps (stream_ordered/reclaim.h): memory freed
 *                    on other streams, device synchronisation, settling
 *                    before trim and destroy
 *   pool_arenas.c    memory of the other arenas
 *   pool_uses.c      record_stream: blocks used on more streams than one
 *   pool_capture.c   allocate_capturing
 *   pool_registry.c  chunks by address, for frees from another arena
 *   pool_check.c     the invariant walk
 *   pool_block_map.h: see its banner. The free index of a slot is
 *   stream_ordered/free_index.h, its stream slots stream_ordered/stream_slots.h.
 *
 * An arena owns chunks; a chunk is tiled by blocks (pool_block.h) in address
 * order; every free block sits in exactly one slot's free index or cache, or
 * in the arena's deferred list; every allocated block is in exactly one
 * arena's live map, and so is every cached block (marked free): a block that
 * goes round the cache of recent frees and back to an allocation is never
 * taken out of the map and put back. Slot 0 of an arena is the shared slot: blocks whose last
 * user is known to be done, free for any stream (with stream ordering off, it
 * is the only slot). Slots 1.. belong to one stream each (its key: handle and
 * id, stream_ordered/stream_event.h) and hold what was freed on that stream; the
 * arena's table of them (stream_ordered/stream_slots.h) finds a stream's slot.
 *
 * Locks: each arena has a spin lock for its bookkeeping (held for tens of
 * nanoseconds, and around the rare event calls) and a mutex that serialises
 * its growth, trim and device synchronisations, which call CUDA or the
 * upstream for milliseconds with the spin lock released: a thread that
 * allocates from free memory never waits for another's growth. Lock order:
 * grow mutex, then spin lock; never two spin locks at once; the chunk
 * registry's read-write lock may be taken under a spin lock.
 *
 * Thread-safe: no; the locks above guard the arena and everything in it.
 */
#ifndef GMR_RESOURCES_POOL_POOL_INTERNAL_H_
#define GMR_RESOURCES_POOL_POOL_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "core/failure.h"
#include "core/nvtx_mem.h"
#include "stream_ordered/capture_reuse.h"
#include "stream_ordered/event_cache.h"
#include "stream_ordered/free_index.h"
#include "stream_ordered/reclaim.h"
#include "util/spin_lock.h"
#include "util/thread_home.h"
#include "stream_ordered/stream_event.h"
#include "stream_ordered/stream_home.h"
#include "stream_ordered/stream_slots.h"
#include "stream_ordered/stream_uses.h"
#include "gmr/pool_resource.h"
#include "resources/pool/pool_block.h"
#include "resources/pool/pool_block_map.h"

#define GMR__POOL_UNIT ((size_t)256)
#define GMR__POOL_SHARED_SLOT GMR__STREAM_SLOT_SHARED
#define GMR__POOL_MAX_ARENAS 64u
/* Most recently freed blocks a slot can keep unmerged (config.recent_free_count). */
#define GMR__POOL_CACHE_ENTRIES 32u
/* Addresses an arena remembers as freed, to tell a double free from a
 * pointer that was never allocated (the bad-free path only). */
#define GMR__POOL_RECENT_FREED 64u

typedef struct gmr__pool_arena gmr__pool_arena;

typedef struct gmr__pool_chunk {
  uintptr_t base;
  size_t size;
  gmr__pool_arena *arena;
  gmr__pool_block *first; /* the block at `base` */
  void *nvtx_heap;        /* config.streams.nvtx_annotate: the chunk's NVTX heap (may be NULL) */
  struct gmr__pool_chunk *prev, *next; /* the arena's chunk list */
} gmr__pool_chunk;

/* The free blocks of one stream (or of the shared slot) and its event. The
 * most recent frees wait, unmerged, in `cache` (oldest first) until a request
 * of exactly their size takes one back, the cache overflows, or a slow path
 * needs merged free space; every other free block is in `index`. */
typedef struct gmr__pool_slot {
  gmr__stream_slot base; /* first: its stream's key and event, retired (stream_ordered/stream_slots.h) */
  gmr__free_index index;
  size_t deferred_count; /* blocks freed on this stream waiting in the deferred list */
  uint32_t cache_count;
  gmr__pool_block *cache[GMR__POOL_CACHE_ENTRIES];
} gmr__pool_slot;

typedef struct gmr__header_slab gmr__header_slab;

struct gmr__pool_arena {
  gmr__spin_lock lock;
  pthread_mutex_t grow_lock;
  gmr_pool_resource *pool;
  gmr__block_map live;     /* allocated and cached blocks by address */
  gmr__stream_slots slots; /* of gmr__pool_slot; [0] is the shared slot */
  gmr__pool_chunk *chunks;
  size_t chunk_count;
  size_t held_bytes;
  gmr__pool_block *spare_headers; /* recycled headers, linked by node.free_next */
  size_t spare_count;
  gmr__header_slab *slabs;
  size_t in_use_bytes;
  size_t requested_bytes;
  size_t in_use_count;
  /* record_stream: freed blocks waiting for their streams' events; each
   * remembers slots.sync_epoch (device synchronisations begun) at its free. */
  gmr__pool_block *deferred; /* linked by node.free_next / free_prev */
  size_t deferred_count;
  size_t deferred_bytes;
  gmr__event_cache spare_events; /* events for record_stream, reused */
  gmr__capture_walks capture_walks; /* record_stream reuse inside captures */
  uintptr_t recent_freed[GMR__POOL_RECENT_FREED];
  uint32_t recent_freed_next;
};

/* Chunks sorted by base address: finds the arena owning a pointer that a
 * thread of another arena frees. Kept only with more than one arena. */
typedef struct gmr__pool_registry {
  pthread_rwlock_t lock;
  gmr__pool_chunk **items;
  size_t count;
  size_t capacity;
  size_t reserved; /* places promised to chunks not inserted yet: count + reserved <= capacity */
} gmr__pool_registry;

struct gmr_pool_resource {
  gmr_resource base; /* first */
  uint64_t id;       /* unique in the process: keys the threads' last arena (gmr__pool_arena_for) */
  gmr_resource *upstream;
  const gmr__cuda_ops *cuda;
  gmr_pool_resource_config config;
  gmr__stream_events_mode events_mode;
  bool stream_ids; /* config.streams.stream_ids, and not lazy (stream_ordered/stream_event.h) */
  uint32_t arena_count;
  gmr__pool_arena **arenas;
  gmr__stream_home stream_home; /* which arena serves a stream (stream_ordered/stream_home.h) */
  gmr__pool_registry registry;
  atomic_size_t held_bytes;
  atomic_size_t peak_held_bytes;
  atomic_size_t grow_count;
  atomic_size_t upstream_failure_count;
  atomic_size_t release_count;
  atomic_size_t in_place_growth_count;
  gmr__stream_event_counts events;
};

/* One request on its way through the steps of gmr/pool_resource.h. */
typedef struct gmr__pool_request {
  size_t bytes; /* asked for */
  size_t size;  /* rounded up to 256 bytes: the block's size */
  size_t need;  /* size plus room to align it */
  size_t alignment;
  gmr_stream stream;
  gmr__stream_key key;
  bool key_known; /* key.id learned in this call, or none needed (stream_event.h) */
  bool capturing; /* allocate_capturing: no stream-ordered call, relaxed mode */
} gmr__pool_request;

/* Slot `si` of arena `a`. */
static inline gmr__pool_slot *gmr__pool_slot_at(const gmr__pool_arena *a, uint32_t si) {
  return (gmr__pool_slot *)(void *)a->slots.items[si];
}

/* ---- pool_arena.c ---- */
/* Make sure `count` headers can be taken without a host allocation. */
bool gmr__pool_reserve_headers(gmr__pool_arena *a, size_t count);
/* A zeroed header; pre: one is reserved. */
gmr__pool_block *gmr__pool_header_take(gmr__pool_arena *a);
void gmr__pool_header_give(gmr__pool_arena *a, gmr__pool_block *b);
/* The slot of the stream of `key` in `a`, created on first use
 * (stream_ordered/stream_slots.h: a slot of the same handle with another id belonged
 * to a destroyed stream and is retired); UINT32_MAX without host memory;
 * GMR__POOL_SHARED_SLOT with stream ordering off. Pre: lock held. */
static inline uint32_t gmr__pool_slot_of(gmr__pool_arena *a, gmr__stream_key key) {
  if (!a->pool->config.streams.stream_ordered) return GMR__POOL_SHARED_SLOT;
  return gmr__stream_slots_of(&a->slots, key);
}
/* The slot of `key` if `a` has one (never creates); UINT32_MAX if not. */
static inline uint32_t gmr__pool_find_slot(const gmr__pool_arena *a, gmr__stream_key key) {
  if (!a->pool->config.streams.stream_ordered) return GMR__POOL_SHARED_SLOT;
  return gmr__stream_slots_find(&a->slots, key);
}
/* The slot of the stream that last had handle `stream` (never creates; for a
 * call that does not know its stream's id, stream_ordered/stream_event.h); UINT32_MAX
 * if none. With stream ordering off, the shared slot. */
static inline uint32_t gmr__pool_slot_for_handle(gmr__pool_arena *a, gmr_stream stream) {
  if (!a->pool->config.streams.stream_ordered) return GMR__POOL_SHARED_SLOT;
  return gmr__stream_slots_for_handle(&a->slots, stream);
}
/* Whether a free block filed under slot `si` is free for anyone. */
bool gmr__pool_slot_settled(const gmr__pool_arena *a, uint32_t si);
/* Whether slot `si` holds no free block at all. */
bool gmr__pool_slot_empty(const gmr__pool_slot *s);
gmr__pool_arena *gmr__pool_arena_new(gmr_pool_resource *pool);
/* Free the arena's host memory (its chunks must be given back already). */
void gmr__pool_arena_free(gmr__pool_arena *a);

/* ---- pool_blocks.c (pre for all: the arena's lock held) ---- */
void gmr__pool_file_free(gmr__pool_arena *a, uint32_t si, gmr__pool_block *b);
void gmr__pool_move_all(gmr__pool_arena *a, uint32_t from, uint32_t to);
/* Make room in slot `si`'s full cache: its oldest entry leaves the live
 * map and is filed. */
void gmr__pool_cache_evict_oldest(gmr__pool_arena *a, uint32_t si);
/* gmr__pool_cache_take past the newest entry. */
gmr__pool_block *gmr__pool_cache_take_older(gmr__pool_slot *s, size_t size);
void gmr__pool_flush_caches(gmr__pool_arena *a);
void gmr__pool_unfile(gmr__pool_arena *a, gmr__pool_block *b);
gmr__pool_block *gmr__pool_find_fit(const gmr__pool_arena *a, uint32_t si, size_t need);
gmr__pool_block *gmr__pool_take(gmr__pool_arena *a, gmr__pool_block *b, size_t size,
                                size_t alignment);

/* ---- pool_resource.c ---- */
extern const gmr_resource_vtbl gmr__pool_vtbl;
/* Room for what one allocation may need in `a`, so nothing fails half-way;
 * *si: the request's slot. Pre: lock held, r->key_known. */
gmr_status gmr__pool_prepare(gmr__pool_arena *a, const gmr__pool_request *r, uint32_t *si,
                             gmr_failure *failure);
/* Take free block `b` of `a` (in a free index) for the request and give it
 * to the caller. Pre: lock held, prepared. */
void gmr__pool_hand_out(gmr__pool_arena *a, gmr__pool_block *b, const gmr__pool_request *r,
                        void **out_ptr);

/* ---- pool_registry.c ---- */
/* Promise a place to one chunk (false without host memory). */
bool gmr__pool_registry_reserve_one(gmr__pool_registry *r);
/* Give a promised place back unused. */
void gmr__pool_registry_unreserve(gmr__pool_registry *r);
/* Insert `c` into a promised place. */
void gmr__pool_registry_insert(gmr__pool_registry *r, gmr__pool_chunk *c);
/* Remove `c`; with `keep_place` its place stays promised (for a chunk that
 * may come back if its upstream free fails). */
void gmr__pool_registry_remove(gmr__pool_registry *r, gmr__pool_chunk *c, bool keep_place);
/* Chunk `c` (extended in place) is now `size` bytes; under the registry's
 * lock when `registered`. Pre: the chunk's arena lock held. */
void gmr__pool_registry_resize(gmr__pool_registry *r, gmr__pool_chunk *c, size_t size,
                               bool registered);
gmr__pool_arena *gmr__pool_registry_find_arena(gmr__pool_registry *r, uintptr_t addr);

/* ---- pool_growth.c ---- */
/* Count `bytes` as held if that stays under maximum_pool_bytes. */
bool gmr__pool_held_reserve(gmr_pool_resource *pool, size_t bytes);
void gmr__pool_held_release(gmr_pool_resource *pool, size_t bytes);
/* Add upstream memory `ptr` of `bytes` (already counted as held) to `a` as
 * a chunk, one free block filed under slot `si`. False without host memory
 * (nothing changed). Pre: lock held. */
bool gmr__pool_add_chunk(gmr__pool_arena *a, uint32_t si, void *ptr, size_t bytes);
/* Grow `a` for the request and hand out a block of the new chunk; the
 * upstream is called with only the arena's grow mutex held. Pre: no lock. */
gmr_status gmr__pool_grow(gmr__pool_arena *a, const gmr__pool_request *r, void **out_ptr,
                          gmr_failure *failure);
/* Give back every chunk of `a` whose blocks are all settled (trim), with
 * only the grow mutex held while the upstream frees. Pre: grow mutex held. */
gmr_status gmr__pool_release_settled_chunks(gmr__pool_arena *a, size_t *released_bytes);
/* Give every chunk of `a` back upstream (destroy): stops at the first
 * upstream failure, which it returns, the chunks not given back kept. */
gmr_status gmr__pool_release_all_chunks(gmr__pool_arena *a);

/* ---- pool_extend.c ---- */
/* Grow a chunk of `a` in place through the upstream's extend slot so that
 * its free tail reaches max(r->need, want), and hand out the request from
 * it. False (nothing changed) when the upstream cannot. Pre: grow mutex
 * held, no spin lock. */
bool gmr__pool_grow_in_place(gmr__pool_arena *a, const gmr__pool_request *r, size_t want,
                             void **out_ptr);

/* ---- pool_streams.c: the reclaim steps (stream_ordered/reclaim.h) over an arena ---- */
/* What an arena's table of slots and the reclaim steps ask of the pool. */
extern const gmr__stream_slots_ops gmr__pool_slot_ops;
/* Steps 2 and 3: memory freed on other streams, then a fit for `need`
 * (NULL if none). Pre: lock held, the requesting stream not capturing. */
gmr__pool_block *gmr__pool_from_other_streams(gmr__pool_arena *a, uint32_t ti, size_t need);
/* Whether other streams' free memory could serve `need` only after a device
 * synchronisation (unrecorded frees of streams that may be gone, deferred
 * blocks). Pre: lock held. */
bool gmr__pool_sync_would_help(const gmr__pool_arena *a, uint32_t ti, size_t need);
/* Wait for every stream of `a` that has free blocks, and for the deferred
 * blocks, so that they are free for anyone; streams that cannot be waited
 * for one by one (unrecorded, or a failed event) through one device
 * synchronisation. Pre: grow mutex held, spin lock not held. */
void gmr__pool_settle_everything(gmr__pool_arena *a);

/* ---- pool_arenas.c ---- */
/* Before growing `home`: a block of another arena that is free for the
 * request's stream with no CUDA call (same stream, or shared). Pre: no lock. */
bool gmr__pool_take_from_other_arenas(gmr_pool_resource *pool, gmr__pool_arena *home,
                                      const gmr__pool_request *r, void **out_ptr);
/* After growth failed in `home`: other arenas' memory of other streams
 * (through events), then their wholly free chunks given back and `home`
 * grown once more. Pre: no lock. */
gmr_status gmr__pool_allocate_elsewhere(gmr_pool_resource *pool, gmr__pool_arena *home,
                                        const gmr__pool_request *r, void **out_ptr,
                                        gmr_failure *failure);

/* ---- pool_uses.c ---- */
/* The deallocate of block `b` (allocated, with uses) on slot `si`: record an
 * event on each recorded stream other than the freeing one and put the block
 * in the deferred list; with no other stream, free the uses and return
 * false (file the block as usual). Pre: lock held. */
bool gmr__pool_defer_free(gmr__pool_arena *a, uint32_t si, gmr__pool_block *b);
/* File the deferred blocks whose events are done (queries) under their
 * slots, and those freed during a capture whose markers come before
 * `stream`'s next captured work (stream_ordered/capture_reuse.h; `stream`
 * NULL: none). Returns whether any was filed. Pre: lock held, no capture in
 * progress or relaxed mode. */
bool gmr__pool_process_deferred(gmr__pool_arena *a, gmr_stream stream);
/* After a device synchronisation begun at `epoch`: file every deferred
 * block that was deferred before it. Pre: lock held. */
void gmr__pool_deferred_synchronized(gmr__pool_arena *a, uint64_t epoch);
/* Take deferred block `b` out of the deferred list, its events given back
 * and its uses freed (it is then in no list). Pre: lock held. */
void gmr__pool_deferred_drop(gmr__pool_arena *a, gmr__pool_block *b);
/* gmr_resource_vtbl.record_stream. */
gmr_status gmr__pool_record_stream(gmr_resource *self, void *ptr, gmr_stream stream);

/* ---- pool_capture.c ---- */
/* gmr_resource_vtbl.allocate_capturing. */
gmr_status gmr__pool_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                        gmr_stream stream, void **out_ptr, gmr_failure *failure);

/* ---- pool_resource.c / pool_lifecycle.c / pool_info.c ---- */
/* Learn the request's stream id if it is not known (gmr__stream_key_of:
 * capture-safe). Returns GMR_OK or the failure (nothing changed). */
gmr_status gmr__pool_request_identify(gmr_pool_resource *pool, gmr__pool_request *r,
                                      gmr_failure *failure);
/* Fill the record's free figures with the pool's (unless a deeper resource
 * did). Returns `status`. Pre: no lock held. */
gmr_status gmr__pool_note_free_info(gmr_pool_resource *pool, gmr_failure *failure,
                                    gmr_status status);
/* Why `addr` is not a live allocation of any arena: GMR_ERR_DOUBLE_FREE or
 * GMR_ERR_UNKNOWN_POINTER. Pre: no lock held. */
gmr_status gmr__pool_bad_free_verdict(gmr_pool_resource *pool, uintptr_t addr);
gmr_status gmr__pool_trim(gmr_resource *self, size_t *released_bytes);
gmr_status gmr__pool_destroy(gmr_resource *self);
gmr_status gmr__pool_get_memory_info(const gmr_resource *self, gmr_memory_info *out);

/* ---- pool_check.c ---- */
/* Check every invariant of arena `a` (lock held by the caller); on failure
 * write the reason into err (err_bytes) and return false. pool_check.c. */
bool gmr__pool_check_arena(const gmr__pool_arena *a, uint32_t arena_index, char *err,
                           size_t err_bytes);
/* Every invariant of the pool `self` (each arena under its lock, then the
 * chunk table): GMR_OK, or GMR_ERR_INTERNAL with the reason in err. The
 * pool type's check of its books (core/resource_type.h). */
gmr_status gmr__pool_check_books(gmr_resource *self, char *err, size_t err_bytes);

/* ---- the hot path, inline (every allocate and deallocate runs it) ---- */

/* The arena this thread found last, for which pool and stream handle
 * (pool_resource.c). Only this thread reads or writes it. */
typedef struct gmr__pool_last_arena {
  uint64_t pool_id; /* 0: none */
  gmr_stream stream;
  gmr__pool_arena *arena;
} gmr__pool_last_arena;
extern _Thread_local gmr__pool_last_arena gmr__pool_last;

/* The arena a request on the stream of `key` starts in. Arenas follow
 * streams (stream_ordered/stream_home.h): the threads of one stream share
 * its arena, a thread with a stream of its own has an arena of its own.
 * With stream ordering off, the thread's home arena. Any arena is correct
 * for any stream (a free finds its block's arena), so the answer a thread
 * found last for the same pool and handle is used again without the hash:
 * a thread keeps the arena it started with even if the table's entry is
 * taken over meanwhile. */
static inline gmr__pool_arena *gmr__pool_arena_for(gmr_pool_resource *pool, gmr__stream_key key) {
  if (pool->arena_count == 1) return pool->arenas[0];
  if (gmr__pool_last.pool_id == pool->id && gmr__pool_last.stream == key.stream) {
    return gmr__pool_last.arena;
  }
  gmr__pool_arena *a;
  if (!pool->config.streams.stream_ordered) {
    a = pool->arenas[gmr__thread_home() % pool->arena_count];
  } else {
    a = pool->arenas[gmr__stream_home_of(&pool->stream_home, key, pool->arena_count)];
  }
  gmr__pool_last.pool_id = pool->id;
  gmr__pool_last.stream = key.stream;
  gmr__pool_last.arena = a;
  return a;
}

/* Fill the request for an allocation (the stream's key as far as known
 * without a CUDA call, gmr__stream_key_begin). Returns GMR_OK or the failure. */
static inline gmr_status gmr__pool_request_init(gmr_pool_resource *pool, size_t bytes,
                                                size_t alignment, gmr_stream stream,
                                                bool capturing, gmr__pool_request *r,
                                                gmr_failure *failure) {
  if (alignment > GMR_POOL_MAX_ALIGNMENT) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                            "pool_resource: alignment %zu is above the pool's maximum of %zu",
                            alignment, (size_t)GMR_POOL_MAX_ALIGNMENT);
  }
  r->bytes = bytes;
  r->size = gmr__align_up(bytes, GMR__POOL_UNIT);
  /* Blocks start on 256-byte boundaries, so a larger alignment needs at most
   * alignment - 256 bytes of padding in front. */
  r->need = alignment > GMR__POOL_UNIT ? r->size + (alignment - GMR__POOL_UNIT) : r->size;
  r->alignment = alignment;
  r->stream = stream;
  r->capturing = capturing;
  /* No CUDA call for a created stream: its id is asked only when needed. */
  cudaError_t err =
      gmr__stream_key_begin(pool->cuda, pool->events_mode, stream, &r->key, &r->key_known);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaStreamGetId", err);
  return GMR_OK;
}

/* Whether just-freed block `b` may wait in a cache (recent_free_count > 0
 * and it is no larger than recent_free_max_bytes). */
static inline bool gmr__pool_cacheable(const gmr__pool_arena *a, const gmr__pool_block *b) {
  const gmr_pool_resource_config *c = &a->pool->config;
  return c->recent_free_count > 0 && b->node.bytes <= c->recent_free_max_bytes;
}

/* Keep just-freed block `b` of slot `si` unmerged for a same-size request
 * (the pattern of training loops: the same tensors every step): the pair
 * then skips the size index, the split and the merge. The oldest entry goes
 * to the index when the cache is full. `b` stays in the live map. Pre: lock
 * held, gmr__pool_cacheable. */
static inline void gmr__pool_cache_put(gmr__pool_arena *a, uint32_t si, gmr__pool_block *b) {
  gmr__pool_slot *s = gmr__pool_slot_at(a, si);
  if (s->cache_count >= a->pool->config.recent_free_count) gmr__pool_cache_evict_oldest(a, si);
  b->is_free = true;
  b->cached = true;
  b->slot = si;
  b->request_bytes = 0;
  b->request_alignment_log2 = 0;
  s->cache[s->cache_count++] = b;
}

/* The most recent cached block of exactly `size` bytes, taken out of the
 * cache (still marked free), or NULL. The newest entry first: a loop that
 * frees and allocates one size finds it there. Pre: lock held. */
static inline gmr__pool_block *gmr__pool_cache_take(gmr__pool_slot *s, size_t size) {
  uint32_t n = s->cache_count;
  if (n == 0) return NULL;
  gmr__pool_block *b = s->cache[n - 1];
  if (b->node.bytes != size) return n > 1 ? gmr__pool_cache_take_older(s, size) : NULL;
  s->cache_count = n - 1;
  b->cached = false;
  return b;
}

/* Give block `b`, of exactly the request's size and in the live map (taken
 * out of a cache, or put in the map by gmr__pool_hand_out), to the caller.
 * Pre: lock held. */
static inline void gmr__pool_hand_out_cached(gmr__pool_arena *a, gmr__pool_block *b,
                                             const gmr__pool_request *r, void **out_ptr) {
  b->is_free = false;
  b->request_bytes = r->bytes;
  b->request_alignment_log2 = (uint32_t)__builtin_ctzll((unsigned long long)r->alignment);
  a->in_use_bytes += b->node.bytes;
  a->requested_bytes += r->bytes;
  a->in_use_count++;
  /* The bytes asked for, not b->node.bytes: a write into the rounding is caught. */
  if (a->pool->config.streams.nvtx_annotate) {
    gmr__nvtx_mem_region_register(b->chunk->nvtx_heap, (void *)b->node.addr, r->bytes);
  }
  *out_ptr = (void *)b->node.addr;
}

#endif /* GMR_RESOURCES_POOL_POOL_INTERNAL_H_ */
