/*
 * resources/fixed_block/fixed_block_internal.h (internal): the data of
 * fixed_block_resource and the functions its files share:
 *   fixed_block_resource.c   allocate and deallocate (blocks and forwarded
 *                            requests), record_stream, the vtable
 *   fixed_block_shard.c      the stream slots' operations for their table and
 *                            the reclaim steps (stream_ordered/reclaim.h),
 *                            taking and giving blocks, other shards' blocks,
 *                            blocks waiting for record_stream events,
 *                            settling before trim and destroy
 *   fixed_block_growth.c     chunks: the registry, adding them outside the
 *                            spin lock, giving them back (trim, destroy)
 *   fixed_block_lists.c      gmr_block_list: many blocks as one allocation
 *   fixed_block_lifecycle.c  create (with messages), destroy, statistics,
 *                            get_memory_info, getters
 *
 * The resource has `shard_count` shards (stream_ordered/stream_home.h: a stream is
 * served by the home shard of the first thread that used it). A shard owns
 * chunks; every block of a chunk is given out, on one stack of free blocks
 * of one stream slot of its shard, or in its shard's deferred list. Stacks
 * hold pointers to blocks and have room for every block of the shard, so
 * moving blocks never allocates.
 *
 * Locks: a shard's spin lock guards the shard (tens of nanoseconds, and the
 * rare event calls); its grow mutex serialises growth, trim and device
 * synchronisations, which call the upstream or wait with the spin lock
 * released. The chunk registry (every chunk, by address) has a read-write
 * lock, taken only when a block is not found in the shard a free starts in;
 * `books` (a spin lock) guards the forwarded allocations and the lists.
 * Order: grow mutex, spin lock, `books`, registry; two shards' spin locks
 * are never held at once.
 *
 * Thread-safe: no; the locks above guard everything.
 */
#ifndef GMR_RESOURCES_FIXED_BLOCK_FIXED_BLOCK_INTERNAL_H_
#define GMR_RESOURCES_FIXED_BLOCK_FIXED_BLOCK_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "core/nvtx_mem.h"
#include "stream_ordered/event_cache.h"
#include "stream_ordered/reclaim.h"
#include "util/spin_lock.h"
#include "stream_ordered/stream_event.h"
#include "stream_ordered/stream_home.h"
#include "stream_ordered/stream_slots.h"
#include "stream_ordered/stream_uses.h"
#include "util/u64_map.h"
#include "gmr/fixed_block_resource.h"

#define GMR__FB_UNIT ((size_t)256)
#define GMR__FB_MAX_SHARDS 64u

typedef struct gmr__fb_chunk gmr__fb_chunk;
typedef struct gmr__fb_shard gmr__fb_shard;

/* Host-side record of one block (device memory holds no bookkeeping). */
typedef struct gmr__fb_block {
  uintptr_t addr;
  size_t request_bytes; /* given out: the bytes asked (lists: block_bytes); 0 while free */
  gmr__fb_chunk *chunk;
  uint32_t slot;        /* free: the slot whose stack holds it (or that freed it, deferred) */
  bool in_list;         /* given out through a gmr_block_list */
  bool given_before;    /* given out at least once: a free of it while free is a double free */
  bool deferred;        /* free, waiting for record_stream events, in the deferred list */
  gmr__stream_uses *uses; /* given out: streams recorded on it; deferred: their events */
  struct gmr__fb_block *next_deferred, *prev_deferred;
} gmr__fb_block;

struct gmr__fb_chunk {
  uintptr_t base;
  void *nvtx_heap; /* config.streams.nvtx_annotate: the chunk's NVTX heap (may be NULL) */
  gmr__fb_shard *shard;
  size_t block_count;
  size_t live_count; /* blocks given out */
  gmr__fb_block blocks[];
};

/* The free blocks of one stream, and that stream's event. */
typedef struct gmr__fb_slot {
  gmr__stream_slot base; /* first: its stream's key and event, retired (stream_ordered/stream_slots.h) */
  gmr__fb_block **stack; /* capacity: the shard's stack_capacity */
  size_t count;
  size_t deferred_count;
} gmr__fb_slot;

struct gmr__fb_shard {
  gmr__spin_lock lock;
  pthread_mutex_t grow_lock;
  gmr_fixed_block_resource *r;
  gmr__stream_slots slots; /* of gmr__fb_slot; no shared slot */
  gmr__fb_chunk **chunks; /* sorted by base */
  size_t chunk_count;
  size_t chunk_capacity;
  size_t stack_capacity; /* >= total_blocks: moving blocks never allocates */
  size_t total_blocks;
  size_t in_use_blocks;
  gmr__fb_block *deferred; /* each remembers slots.sync_epoch at its free */
  size_t deferred_count;
  gmr__event_cache spare_events; /* events for record_stream, reused */
};

struct gmr_fixed_block_resource {
  gmr_resource base; /* first */
  uint64_t id;       /* unique in the process: keys the threads' last shard (gmr__fb_shard_for) */
  gmr_resource *upstream;
  const gmr__cuda_ops *cuda;
  gmr_fixed_block_resource_config config;
  unsigned block_shift; /* log2(block_bytes) when a power of two, else 0 (a division) */
  gmr__stream_events_mode events_mode;
  bool stream_ids; /* config.streams.stream_ids, and not lazy (stream_ordered/stream_event.h) */
  uint32_t shard_count;
  gmr__fb_shard **shards;
  gmr__stream_home stream_home;
  /* Every chunk by base address (finds the shard of a block freed elsewhere). */
  pthread_rwlock_t registry_lock;
  gmr__fb_chunk **registry;
  size_t registry_count;
  size_t registry_capacity;
  size_t registry_reserved;
  /* Forwarded (oversize) allocations and lists. */
  gmr__spin_lock books;
  gmr__u64_map lists;     /* live lists (address -> 1) */
  gmr__u64_map forwarded; /* live forwarded allocations (address -> bytes) */
  size_t forwarded_count;
  size_t forwarded_bytes;
  atomic_size_t held_bytes;
  atomic_size_t peak_held_bytes;
  atomic_size_t chunk_count;
  atomic_size_t grow_count;
  atomic_size_t release_count;
  gmr__stream_event_counts events;
};

extern const gmr_resource_vtbl gmr__fb_vtbl;

/* Slot `si` of shard `s`. */
static inline gmr__fb_slot *gmr__fb_slot_at(const gmr__fb_shard *s, uint32_t si) {
  return (gmr__fb_slot *)(void *)s->slots.items[si];
}

/* ---- stream slots (stream_ordered/stream_slots.h; pre: the shard's lock held) ---- */
/* Without stream ordering every stream shares one slot, keyed by no stream. */
static inline gmr__stream_key gmr__fb_effective_key(const gmr__fb_shard *s, gmr__stream_key key) {
  if (s->r->config.streams.stream_ordered) return key;
  gmr__stream_key none = {NULL, 0};
  return none;
}
/* The slot of `key`, created on first use; UINT32_MAX without host memory. */
static inline uint32_t gmr__fb_slot_of(gmr__fb_shard *s, gmr__stream_key key) {
  return gmr__stream_slots_of(&s->slots, gmr__fb_effective_key(s, key));
}
/* The slot of `key` if the shard has one; UINT32_MAX if not. */
static inline uint32_t gmr__fb_find_slot(const gmr__fb_shard *s, gmr__stream_key key) {
  return gmr__stream_slots_find(&s->slots, gmr__fb_effective_key(s, key));
}
/* The slot of the stream that last had handle `stream`, for a call that does
 * not know its stream's id (stream_ordered/stream_event.h); UINT32_MAX if none. */
static inline uint32_t gmr__fb_slot_for_handle(gmr__fb_shard *s, gmr_stream stream) {
  gmr__stream_key key = {stream, 0};
  return gmr__stream_slots_for_handle(&s->slots, gmr__fb_effective_key(s, key).stream);
}

/* ---- fixed_block_shard.c (pre: the shard's lock held unless said) ---- */
/* The shard this thread found last, for which resource and stream handle
 * (fixed_block_shard.c). Only this thread reads or writes it. */
typedef struct gmr__fb_last_shard {
  uint64_t resource_id; /* 0: none */
  gmr_stream stream;
  gmr__fb_shard *shard;
} gmr__fb_last_shard;
extern _Thread_local gmr__fb_last_shard gmr__fb_last;

/* The shard a call naming the stream of `key` starts in. Any shard is
 * correct for any stream (a free finds its block's shard), so the answer a
 * thread found last for the same resource and handle is used again without
 * the hash (gmr__pool_arena_for's rule). Pre: no lock. */
static inline gmr__fb_shard *gmr__fb_shard_for(gmr_fixed_block_resource *r, gmr__stream_key key) {
  if (r->shard_count == 1) return r->shards[0];
  if (gmr__fb_last.resource_id == r->id && gmr__fb_last.stream == key.stream) {
    return gmr__fb_last.shard;
  }
  gmr__fb_shard *s;
  if (!r->config.streams.stream_ordered) {
    s = r->shards[gmr__thread_home() % r->shard_count];
  } else {
    s = r->shards[gmr__stream_home_of(&r->stream_home, key, r->shard_count)];
  }
  gmr__fb_last.resource_id = r->id;
  gmr__fb_last.stream = key.stream;
  gmr__fb_last.shard = s;
  return s;
}
static inline void gmr__fb_push_free(gmr__fb_shard *s, uint32_t si, gmr__fb_block *b) {
  gmr__fb_slot *slot = gmr__fb_slot_at(s, si);
  b->slot = si;
  b->request_bytes = 0;
  b->in_list = false;
  slot->stack[slot->count++] = b;
}
/* Take the top free block of slot `si` (not empty) for a request of `bytes`. */
static inline gmr__fb_block *gmr__fb_pop_free(gmr__fb_shard *s, uint32_t si, size_t bytes) {
  gmr__fb_slot *slot = gmr__fb_slot_at(s, si);
  gmr__fb_block *b = slot->stack[--slot->count];
  b->chunk->live_count++;
  s->in_use_blocks++;
  b->request_bytes = bytes;
  b->given_before = true;
  if (s->r->config.streams.nvtx_annotate) {
    gmr__nvtx_mem_region_register(b->chunk->nvtx_heap, (void *)b->addr, bytes);
  }
  return b;
}
/* Record an event on every recorded stream of `b` other than slot `si`'s
 * and put `b` in the deferred list; false (uses freed) when no other stream. */
bool gmr__fb_defer(gmr__fb_shard *s, uint32_t si, gmr__fb_block *b);
/* A block given back on slot `si` (its uses recorded on, or pushed). */
static inline void gmr__fb_give_back(gmr__fb_shard *s, uint32_t si, gmr__fb_block *b) {
  /* Before the block can be handed out again. */
  if (s->r->config.streams.nvtx_annotate) gmr__nvtx_mem_region_unregister((void *)b->addr);
  b->chunk->live_count--;
  s->in_use_blocks--;
  if (b->uses == NULL || !gmr__fb_defer(s, si, b)) gmr__fb_push_free(s, si, b);
}
/* Make slot `si` hold `count` free blocks from other streams of the shard:
 * done (event queried), or waited for by si's stream (the reclaim steps,
 * stream_ordered/reclaim.h). Pre: not capturing, si's key known. */
void gmr__fb_from_other_streams(gmr__fb_shard *s, uint32_t si, size_t count);
/* Deferred blocks whose events are done go back on their stacks. */
void gmr__fb_process_deferred(gmr__fb_shard *s);
/* Whether unrecorded frees of other streams (or deferred blocks) hold a
 * block that only a device synchronisation could release. */
bool gmr__fb_sync_would_help(const gmr__fb_shard *s, uint32_t si);
/* Before trim and destroy: every free block free for anyone (events waited
 * for, or one device synchronisation). Pre: grow mutex held, no spin lock. */
void gmr__fb_settle_everything(gmr__fb_shard *s);
/* A free block of another shard for the stream of `key`, given out; NULL if
 * none. Pre: no lock. */
gmr__fb_block *gmr__fb_take_from_other_shards(gmr_fixed_block_resource *r, gmr__fb_shard *home,
                                              gmr__stream_key key, size_t bytes);
/* Every deferred block back on its stack, its events spare (destroy: the
 * blocks go back upstream anyway). */
void gmr__fb_drop_deferred(gmr__fb_shard *s);
gmr__fb_shard *gmr__fb_shard_new(gmr_fixed_block_resource *r);
void gmr__fb_shard_free(gmr__fb_shard *s);

/* ---- fixed_block_growth.c ---- */
/* Index of the first chunk whose base is above `addr` in a sorted array. */
static inline size_t gmr__fb_position(gmr__fb_chunk *const *chunks, size_t count,
                                      uintptr_t addr) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (chunks[mid]->base <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}
/* The record of the block of `s` that starts at `addr`, or NULL. Pre: lock held. */
static inline gmr__fb_block *gmr__fb_block_in_shard(const gmr__fb_shard *s, uintptr_t addr) {
  size_t pos = gmr__fb_position(s->chunks, s->chunk_count, addr);
  if (pos == 0) return NULL;
  gmr__fb_chunk *c = s->chunks[pos - 1];
  size_t offset = addr - c->base;
  const gmr_fixed_block_resource *r = s->r;
  size_t block = r->config.block_bytes;
  if (offset >= c->block_count * block) return NULL;
  if (r->block_shift != 0) {
    if ((offset & (block - 1)) != 0) return NULL;
    return &c->blocks[offset >> r->block_shift];
  }
  if (offset % block != 0) return NULL;
  return &c->blocks[offset / block];
}
/* gmr__fb_find_block past the first shard: the registry's shard. Pre: no lock. */
gmr__fb_block *gmr__fb_find_block_elsewhere(gmr_fixed_block_resource *r, gmr__fb_shard *first,
                                            uintptr_t addr, gmr__fb_shard **shard);
/* The shard and record of the block that starts at `addr` (its shard's lock
 * held on return); NULL if no block starts there. `first` is tried first.
 * Pre: no lock. */
static inline gmr__fb_block *gmr__fb_find_block(gmr_fixed_block_resource *r,
                                                gmr__fb_shard *first, uintptr_t addr,
                                                gmr__fb_shard **shard) {
  gmr__spin_lock_acquire(&first->lock);
  gmr__fb_block *b = gmr__fb_block_in_shard(first, addr);
  if (b != NULL) {
    *shard = first;
    return b;
  }
  gmr__spin_lock_release(&first->lock);
  return gmr__fb_find_block_elsewhere(r, first, addr, shard);
}
/* Whether `addr` lies inside a chunk of the resource. Pre: no lock. */
bool gmr__fb_in_a_chunk(gmr_fixed_block_resource *r, uintptr_t addr);
/* What a growth takes once the slot `si` of its stream holds the blocks it
 * was grown for, under the same hold of the spin lock (so no other thread
 * takes them first). */
typedef void gmr__fb_take_fn(gmr__fb_shard *s, uint32_t si, void *ctx);

/* Add chunks to shard `s`, taken on `stream`, until the slot of `key` holds
 * `count` free blocks, then call `take` (may be NULL) on them before the
 * spin lock is released; the upstream is called with only the grow mutex
 * held. With `smaller_chunks`, a chunk the upstream refuses (OUT_OF_MEMORY
 * or LIMIT_EXCEEDED) is asked again with half the blocks, down to what is
 * missing. Pre: grow mutex held, no spin lock. */
gmr_status gmr__fb_grow(gmr__fb_shard *s, gmr__stream_key key, size_t count, gmr_stream stream,
                        bool smaller_chunks, gmr__fb_take_fn *take, void *ctx,
                        gmr_failure *failure);
/* Add a chunk of `blocks` blocks at `ptr` to `s`, its blocks free on slot
 * `si`. False without host memory. Pre: lock held. */
bool gmr__fb_add_chunk(gmr__fb_shard *s, uint32_t si, void *ptr, size_t blocks);
/* Give back the chunks of `s` whose blocks are all free and settled (trim);
 * with `all`, every chunk (destroy). Stops at the first upstream failure,
 * which it returns, the chunk kept. Pre: grow mutex held, no spin lock. */
gmr_status gmr__fb_release_chunks(gmr__fb_shard *s, bool all, size_t *released_bytes);
/* Bytes of one chunk of `blocks` blocks. */
size_t gmr__fb_chunk_bytes(const gmr_fixed_block_resource *r, const gmr__fb_chunk *c);

/* ---- fixed_block_resource.c ---- */
/* Fill the record's free figures (unless a deeper resource did). */
gmr_status gmr__fb_note_free_info(gmr_fixed_block_resource *r, gmr_failure *failure,
                                  gmr_status status);
void gmr__fb_held_add(gmr_fixed_block_resource *r, size_t bytes);
void gmr__fb_held_sub(gmr_fixed_block_resource *r, size_t bytes);

/* ---- fixed_block_lifecycle.c ---- */
gmr_status gmr__fb_destroy(gmr_resource *self);
gmr_status gmr__fb_trim(gmr_resource *self, size_t *released_bytes);
gmr_status gmr__fb_get_memory_info(const gmr_resource *self, gmr_memory_info *out);
/* Free blocks of the resource, all shards together. */
void gmr__fb_free_figures(gmr_fixed_block_resource *r, size_t *free_blocks, size_t *blocks,
                          size_t *in_use_blocks);

#endif /* GMR_RESOURCES_FIXED_BLOCK_FIXED_BLOCK_INTERNAL_H_ */
