/*
 * resources/fixed_block_resource.c: blocks of one size from upstream chunks.
 * See gmr/fixed_block_resource.h.
 */
#include "gmr/fixed_block_resource.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/counters.h"
#include "core/cuda_layer.h"
#include "core/failure.h"
#include "core/nvtx_mem.h"
#include "core/spin_lock.h"
#include "core/stats.h"
#include "core/stream_event.h"
#include "core/u64_map.h"

#define UNIT ((size_t)256)

typedef struct fb_chunk fb_chunk;

/* Host-side record of one block (device memory holds no bookkeeping). */
typedef struct fb_block {
  uintptr_t addr;
  size_t request_bytes; /* given out: the bytes asked (lists: block_bytes); 0 while free */
  fb_chunk *chunk;
  uint32_t slot;        /* free: the stream slot whose stack holds it */
  bool in_list;         /* given out through a gmr_block_list */
} fb_block;

struct fb_chunk {
  uintptr_t base;
  void *nvtx_heap; /* config.nvtx_annotate: the chunk's NVTX heap (may be NULL) */
  size_t block_count;
  size_t live_count; /* blocks given out */
  fb_block blocks[];
};

/* The free blocks of one stream, and that stream's event. */
typedef struct fb_slot {
  gmr__stream_event ev;
  fb_block **stack; /* capacity: the resource's stack_capacity */
  size_t count;
} fb_slot;

/* A list as handed out: the public part first. */
typedef struct fb_list {
  gmr_block_list pub;
  fb_block **records;
} fb_list;

struct gmr_fixed_block_resource {
  gmr_resource base; /* first */
  gmr_resource *upstream;
  const gmr__cuda_ops *cuda;
  gmr_fixed_block_resource_config config;
  gmr__spin_lock lock;
  fb_chunk **chunks; /* sorted by base */
  size_t chunk_count;
  size_t chunk_capacity;
  fb_slot **slots;
  uint32_t slot_count;
  uint32_t slot_capacity;
  uint32_t cached_slot;
  size_t stack_capacity; /* >= total_blocks: moving blocks never allocates */
  size_t total_blocks;
  size_t in_use_blocks;
  size_t forwarded_count;
  size_t forwarded_bytes;
  gmr__u64_map lists;     /* live lists (address -> 1) */
  gmr__u64_map forwarded; /* live forwarded allocations (address -> bytes) */
  atomic_size_t held_bytes;
  atomic_size_t peak_held_bytes;
  size_t grow_count;
  size_t release_count;
  gmr__stream_event_counts events;
};

static const gmr_resource_vtbl fixed_block_vtbl;

static void held_add(gmr_fixed_block_resource *r, size_t bytes) {
  size_t now = atomic_fetch_add_explicit(&r->held_bytes, bytes, memory_order_relaxed) + bytes;
  gmr__raise_peak(&r->peak_held_bytes, now);
}

static void held_sub(gmr_fixed_block_resource *r, size_t bytes) {
  atomic_fetch_sub_explicit(&r->held_bytes, bytes, memory_order_relaxed);
}

static size_t chunk_bytes(const gmr_fixed_block_resource *r, const fb_chunk *c) {
  return c->block_count * r->config.block_bytes;
}

/* ---- lookups (lock held) ------------------------------------------------ */

/* Index of the first chunk whose base is above `addr`. */
static size_t chunk_position(const gmr_fixed_block_resource *r, uintptr_t addr) {
  size_t lo = 0, hi = r->chunk_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->chunks[mid]->base <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/* The record of the block that starts at `addr`, or NULL if no block does. */
static fb_block *block_at(const gmr_fixed_block_resource *r, uintptr_t addr) {
  size_t pos = chunk_position(r, addr);
  if (pos == 0) return NULL;
  fb_chunk *c = r->chunks[pos - 1];
  size_t offset = addr - c->base;
  if (offset >= chunk_bytes(r, c) || offset % r->config.block_bytes != 0) return NULL;
  return &c->blocks[offset / r->config.block_bytes];
}

/* The slot of `stream`, created on first use; UINT32_MAX when out of host
 * memory. With stream ordering off all streams share one slot. */
static uint32_t slot_of(gmr_fixed_block_resource *r, gmr_stream stream) {
  if (!r->config.stream_ordered) stream = NULL;
  if (r->slot_count > 0 && r->slots[r->cached_slot]->ev.key.stream == stream) return r->cached_slot;
  for (uint32_t i = 0; i < r->slot_count; ++i) {
    if (r->slots[i]->ev.key.stream == stream) {
      r->cached_slot = i;
      return i;
    }
  }
  if (r->slot_count == r->slot_capacity) {
    uint32_t capacity = r->slot_capacity == 0 ? 4u : r->slot_capacity * 2u;
    fb_slot **slots = realloc(r->slots, capacity * sizeof *slots);
    if (slots == NULL) return UINT32_MAX;
    r->slots = slots;
    r->slot_capacity = capacity;
  }
  fb_slot *s = calloc(1, sizeof *s);
  if (s == NULL) return UINT32_MAX;
  if (r->stack_capacity > 0) {
    s->stack = malloc(r->stack_capacity * sizeof *s->stack);
    if (s->stack == NULL) {
      free(s);
      return UINT32_MAX;
    }
  }
  gmr__stream_key key = {stream, 0};
  gmr__stream_event_init(&s->ev, key, r->config.streams_outlive_resource ? GMR__STREAM_EVENTS_LAZY : GMR__STREAM_EVENTS_EVERY_FREE);
  r->slots[r->slot_count] = s;
  r->cached_slot = r->slot_count;
  return r->slot_count++;
}

static void push_free(gmr_fixed_block_resource *r, uint32_t si, fb_block *b) {
  fb_slot *s = r->slots[si];
  b->slot = si;
  b->request_bytes = 0;
  b->in_list = false;
  s->stack[s->count++] = b;
}

/* Move every free block of slot `from` onto slot `to`, keeping their order,
 * so the most recently freed block is still the next one handed out. */
static void move_all(gmr_fixed_block_resource *r, uint32_t from, uint32_t to) {
  fb_slot *src = r->slots[from];
  for (size_t i = 0; i < src->count; ++i) push_free(r, to, src->stack[i]);
  src->count = 0;
}

/* ---- growth (lock held) ------------------------------------------------- */

/* Make room for one more chunk of `blocks` blocks in every array, so adding
 * it cannot fail half-way. */
static bool reserve_for_chunk(gmr_fixed_block_resource *r, size_t blocks) {
  if (r->chunk_count == r->chunk_capacity) {
    size_t capacity = r->chunk_capacity == 0 ? 8 : r->chunk_capacity * 2;
    fb_chunk **chunks = realloc(r->chunks, capacity * sizeof *chunks);
    if (chunks == NULL) return false;
    r->chunks = chunks;
    r->chunk_capacity = capacity;
  }
  size_t need = r->total_blocks + blocks;
  if (need <= r->stack_capacity) return true;
  size_t capacity = r->stack_capacity * 2 > need ? r->stack_capacity * 2 : need;
  for (uint32_t i = 0; i < r->slot_count; ++i) {
    fb_block **stack = realloc(r->slots[i]->stack, capacity * sizeof *stack);
    if (stack == NULL) return false; /* the slots grown so far just have spare room */
    r->slots[i]->stack = stack;
  }
  r->stack_capacity = capacity;
  return true;
}

/* Take a chunk of `blocks` blocks from upstream on `stream`; its blocks become
 * free blocks of slot `si`. */
static gmr_status add_chunk(gmr_fixed_block_resource *r, uint32_t si, size_t blocks,
                            gmr_stream stream, gmr_failure *failure) {
  fb_chunk *c = malloc(sizeof *c + blocks * sizeof c->blocks[0]);
  if (c == NULL || !reserve_for_chunk(r, blocks)) {
    free(c);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                     "fixed_block_resource: no host memory for a chunk's records");
  }
  size_t bytes = blocks * r->config.block_bytes;
  void *ptr = NULL;
  gmr_status st = gmr_allocate_ex(r->upstream, bytes, UNIT, stream, &ptr, failure);
  if (st != GMR_OK) {
    free(c);
    return st;
  }
  c->base = (uintptr_t)ptr;
  c->nvtx_heap = NULL;
  if (r->config.nvtx_annotate) {
    c->nvtx_heap = gmr__nvtx_mem_heap_register(ptr, bytes, "fixed_block_resource chunk");
  }
  c->block_count = blocks;
  c->live_count = 0;
  size_t pos = chunk_position(r, c->base);
  memmove(&r->chunks[pos + 1], &r->chunks[pos], (r->chunk_count - pos) * sizeof *r->chunks);
  r->chunks[pos] = c;
  r->chunk_count++;
  r->total_blocks += blocks;
  held_add(r, bytes);
  r->grow_count++;
  /* Pushed last to first, so blocks are handed out in address order. */
  for (size_t i = blocks; i-- > 0;) {
    c->blocks[i].addr = c->base + i * r->config.block_bytes;
    c->blocks[i].chunk = c;
    push_free(r, si, &c->blocks[i]);
  }
  /* Upstream memory is ordered on `stream`, like memory freed there. */
  if (r->config.stream_ordered) gmr__stream_event_mark_freed(r->cuda, &r->slots[si]->ev, false, &r->events);
  return GMR_OK;
}

/* Add chunks until slot `si` has `count` free blocks, with smaller chunks
 * when the upstream has no memory for a full one. */
static gmr_status grow(gmr_fixed_block_resource *r, uint32_t si, size_t count, gmr_stream stream,
                       gmr_failure *failure) {
  size_t blocks = r->config.blocks_per_chunk;
  while (r->slots[si]->count < count) {
    size_t max = r->config.max_chunk_count;
    if (max != 0 && r->chunk_count >= max) {
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                       "fixed_block_resource: all %zu chunks of max_chunk_count are in use", max);
    }
    size_t missing = count - r->slots[si]->count;
    gmr_status st = add_chunk(r, si, blocks, stream, failure);
    if (st == GMR_OK) continue;
    bool no_memory = st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED;
    size_t floor = missing < r->config.blocks_per_chunk ? missing : 1;
    if (!no_memory || blocks <= floor) return st;
    blocks = blocks / 2 > floor ? blocks / 2 : floor;
  }
  return GMR_OK;
}

/* Make slot `si` hold at least `count` free blocks: other streams' blocks
 * first (done, then waited for), then new chunks. */
static gmr_status ensure_free(gmr_fixed_block_resource *r, uint32_t si, size_t count,
                              gmr_stream stream, gmr_failure *failure) {
  fb_slot *t = r->slots[si];
  if (t->count >= count) return GMR_OK;
  if (r->config.stream_ordered) {
    if (gmr__cuda_stream_is_capturing(r->cuda, (cudaStream_t)stream)) {
      return gmr__failure_set(failure, GMR_ERR_CAPTURE_UNSAFE,
                       "fixed_block_resource: not enough free blocks for this stream, and no "
                       "chunk can be added or other stream waited for during a CUDA graph "
                       "capture; allocate before the capture");
    }
    bool pending = false;
    for (uint32_t i = 0; i < r->slot_count; ++i) {
      fb_slot *s = r->slots[i];
      if (i == si || s->count == 0) continue;
      if (gmr__stream_event_settle(r->cuda, &s->ev, &r->events) != cudaSuccess) continue;
      if (gmr__stream_event_query(r->cuda, &s->ev, &r->events)) {
        move_all(r, i, si);
      } else {
        pending = true;
      }
    }
    for (uint32_t i = 0; pending && t->count < count && i < r->slot_count; ++i) {
      fb_slot *s = r->slots[i];
      if (i == si || s->count == 0 || gmr__stream_event_fresh(&s->ev)) continue;
      if (gmr__stream_event_wait(r->cuda, &s->ev, stream, &r->events) != cudaSuccess) continue;
      move_all(r, i, si);
      /* Reachable for others only through t. */
      gmr__stream_event_mark_freed(r->cuda, &t->ev, false, &r->events);
    }
    if (t->count >= count) return GMR_OK;
  }
  return grow(r, si, count, stream, failure);
}

/* Take the top free block of slot `si` for a request of `bytes` (the region
 * memory checkers see when annotating). */
static fb_block *pop_free(gmr_fixed_block_resource *r, uint32_t si, size_t bytes) {
  fb_slot *s = r->slots[si];
  fb_block *b = s->stack[--s->count];
  b->chunk->live_count++;
  r->in_use_blocks++;
  b->request_bytes = bytes;
  if (r->config.nvtx_annotate) {
    gmr__nvtx_mem_region_register(b->chunk->nvtx_heap, (void *)b->addr, bytes);
  }
  return b;
}

static void give_back(gmr_fixed_block_resource *r, uint32_t si, fb_block *b) {
  /* Before the block can be handed out again. */
  if (r->config.nvtx_annotate) gmr__nvtx_mem_region_unregister((void *)b->addr);
  b->chunk->live_count--;
  r->in_use_blocks--;
  push_free(r, si, b);
}

/* Give chunk `c` back upstream (its blocks all free); the heap goes first, so
 * whoever gets the range next may register it. */
static gmr_status chunk_to_upstream(gmr_fixed_block_resource *r, fb_chunk *c) {
  if (r->config.nvtx_annotate) gmr__nvtx_mem_heap_unregister(c->nvtx_heap);
  gmr_status st = gmr_deallocate(r->upstream, (void *)c->base, chunk_bytes(r, c), UNIT, NULL);
  if (st != GMR_OK && r->config.nvtx_annotate) {
    /* Still ours (and wholly free): described again. */
    c->nvtx_heap = gmr__nvtx_mem_heap_register((void *)c->base, chunk_bytes(r, c),
                                               "fixed_block_resource chunk");
  }
  return st;
}

/* ---- vtable ------------------------------------------------------------- */

static gmr_status fb_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                              gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_fixed_block_resource *r = (gmr_fixed_block_resource *)self;
  if (bytes > r->config.block_bytes) {
    if (r->config.oversize == GMR_FIXED_BLOCK_OVERSIZE_REFUSE) {
      return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                       "fixed_block_resource: %zu bytes is more than one block (%zu bytes); use "
                       "gmr_fixed_block_resource_allocate_blocks or oversize = FORWARD",
                       bytes, r->config.block_bytes);
    }
    gmr__spin_lock_acquire(&r->lock);
    bool room = gmr__u64_map_reserve(&r->forwarded, r->forwarded.count + 1);
    gmr__spin_lock_release(&r->lock);
    if (!room) {
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                       "fixed_block_resource: no host memory to track a forwarded allocation");
    }
    gmr_status st = gmr_allocate_ex(r->upstream, bytes, alignment, stream, out_ptr, failure);
    if (st != GMR_OK) return st;
    gmr__spin_lock_acquire(&r->lock);
    /* Another thread may have used the room reserved above: reserve again. */
    if (!gmr__u64_map_put(&r->forwarded, (uint64_t)(uintptr_t)*out_ptr, bytes)) {
      gmr__spin_lock_release(&r->lock);
      (void)gmr_deallocate(r->upstream, *out_ptr, bytes, alignment, stream);
      *out_ptr = NULL;
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                       "fixed_block_resource: no host memory to track a forwarded allocation");
    }
    r->forwarded_count++;
    r->forwarded_bytes += bytes;
    gmr__spin_lock_release(&r->lock);
    held_add(r, bytes);
    return GMR_OK;
  }
  if (alignment > UNIT) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                     "fixed_block_resource: blocks are 256-byte aligned; %zu was asked", alignment);
  }
  gmr__spin_lock_acquire(&r->lock);
  uint32_t si = slot_of(r, stream);
  gmr_status st = si == UINT32_MAX ? gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                                               "fixed_block_resource: no host memory for a new "
                                               "stream's free list")
                                   : ensure_free(r, si, 1, stream, failure);
  if (st == GMR_OK) {
    fb_block *b = pop_free(r, si, bytes);
    *out_ptr = (void *)b->addr;
  }
  gmr__spin_lock_release(&r->lock);
  return st;
}

static gmr_status fb_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                gmr_stream stream) {
  gmr_fixed_block_resource *r = (gmr_fixed_block_resource *)self;
  uintptr_t addr = (uintptr_t)ptr;
  gmr__spin_lock_acquire(&r->lock);
  if (bytes > r->config.block_bytes) {
    uint64_t known = 0;
    if (!gmr__u64_map_get(&r->forwarded, (uint64_t)addr, &known) || known != bytes) {
      gmr__spin_lock_release(&r->lock);
      return GMR_ERR_INVALID_ARGUMENT; /* not forwarded by us, or another size */
    }
    /* Books first: once upstream has it back, another thread may get the same
     * address from upstream and forward it through us. */
    gmr__u64_map_remove(&r->forwarded, (uint64_t)addr, NULL);
    r->forwarded_count--;
    r->forwarded_bytes -= bytes;
    gmr__spin_lock_release(&r->lock);
    gmr_status st = gmr_deallocate(r->upstream, ptr, bytes, alignment, stream);
    gmr__spin_lock_acquire(&r->lock);
    if (st != GMR_OK) {
      /* Not released: it is still ours. Removal left room for it. */
      (void)gmr__u64_map_put(&r->forwarded, (uint64_t)addr, bytes);
      r->forwarded_count++;
      r->forwarded_bytes += bytes;
    }
    gmr__spin_lock_release(&r->lock);
    if (st == GMR_OK) held_sub(r, bytes);
    return st;
  }
  fb_block *b = block_at(r, addr);
  if (b == NULL || b->request_bytes != bytes || b->in_list || alignment > UNIT) {
    gmr__spin_lock_release(&r->lock);
    return GMR_ERR_INVALID_ARGUMENT; /* not a block given out for these bytes: change nothing */
  }
  uint32_t si = slot_of(r, stream);
  if (si == UINT32_MAX) {
    gmr__spin_lock_release(&r->lock);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  give_back(r, si, b);
  if (r->config.stream_ordered) gmr__stream_event_mark_freed(r->cuda, &r->slots[si]->ev, false, &r->events);
  gmr__spin_lock_release(&r->lock);
  return GMR_OK;
}

/* Wait for every stream holding free blocks, so the blocks are free for
 * anyone. Capturing streams and failing events stay unsettled. */
static void settle_all(gmr_fixed_block_resource *r) {
  if (!r->config.stream_ordered) return;
  for (uint32_t i = 0; i < r->slot_count; ++i) {
    if (r->slots[i]->count == 0) continue;
    (void)gmr__stream_event_synchronize(r->cuda, &r->slots[i]->ev, &r->events);
  }
}

static bool chunk_settled(const gmr_fixed_block_resource *r, const fb_chunk *c) {
  if (c->live_count != 0) return false;
  if (!r->config.stream_ordered) return true;
  for (size_t i = 0; i < c->block_count; ++i) {
    if (!gmr__stream_event_settled(&r->slots[c->blocks[i].slot]->ev)) return false;
  }
  return true;
}

/* Drop the free blocks of `c` from every stack. */
static void unstack_chunk(gmr_fixed_block_resource *r, const fb_chunk *c) {
  for (uint32_t i = 0; i < r->slot_count; ++i) {
    fb_slot *s = r->slots[i];
    size_t kept = 0;
    for (size_t j = 0; j < s->count; ++j) {
      if (s->stack[j]->chunk != c) s->stack[kept++] = s->stack[j];
    }
    s->count = kept;
  }
}

static gmr_status fb_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_fixed_block_resource *r = (gmr_fixed_block_resource *)self;
  *released_bytes = 0;
  gmr_status result = GMR_OK;
  gmr__spin_lock_acquire(&r->lock);
  settle_all(r);
  for (size_t pos = 0; pos < r->chunk_count;) {
    fb_chunk *c = r->chunks[pos];
    if (!chunk_settled(r, c)) {
      pos++;
      continue;
    }
    /* Books first: the chunk leaves the table before upstream has it back. */
    size_t bytes = chunk_bytes(r, c);
    memmove(&r->chunks[pos], &r->chunks[pos + 1], (r->chunk_count - pos - 1) * sizeof *r->chunks);
    r->chunk_count--;
    held_sub(r, bytes);
    gmr_status st = chunk_to_upstream(r, c);
    if (st != GMR_OK) {
      memmove(&r->chunks[pos + 1], &r->chunks[pos], (r->chunk_count - pos) * sizeof *r->chunks);
      r->chunks[pos] = c;
      r->chunk_count++;
      held_add(r, bytes);
      result = st;
      break;
    }
    unstack_chunk(r, c);
    r->total_blocks -= c->block_count;
    r->release_count++;
    *released_bytes += bytes;
    free(c);
  }
  gmr__spin_lock_release(&r->lock);
  return result;
}

static gmr_status fb_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_fixed_block_resource *r = (const gmr_fixed_block_resource *)self;
  out->held_bytes = atomic_load_explicit(&r->held_bytes, memory_order_relaxed);
  out->peak_held_bytes = atomic_load_explicit(&r->peak_held_bytes, memory_order_relaxed);
  return GMR_OK;
}

static gmr_resource *fb_get_upstream(const gmr_resource *self) {
  return ((const gmr_fixed_block_resource *)self)->upstream;
}

static void fb_free(gmr_fixed_block_resource *r) {
  for (uint32_t i = 0; i < r->slot_count; ++i) {
    (void)gmr__stream_event_deinit(r->cuda, &r->slots[i]->ev, &r->events);
    free(r->slots[i]->stack);
    free(r->slots[i]);
  }
  free(r->slots);
  for (size_t i = 0; i < r->chunk_count; ++i) free(r->chunks[i]);
  free(r->chunks);
  gmr__u64_map_clear(&r->lists);
  gmr__u64_map_clear(&r->forwarded);
  free(r);
}

static gmr_status fb_destroy(gmr_resource *self) {
  gmr_fixed_block_resource *r = (gmr_fixed_block_resource *)self;
  if (r->in_use_blocks != 0 || r->forwarded_count != 0 || r->lists.count != 0) return GMR_ERR_BUSY;
  settle_all(r);
  /* A failed upstream free is reported; the resource is destroyed anyway. */
  gmr_status result = GMR_OK;
  for (size_t i = 0; i < r->chunk_count; ++i) {
    held_sub(r, chunk_bytes(r, r->chunks[i]));
    gmr_status st = chunk_to_upstream(r, r->chunks[i]);
    if (st != GMR_OK && result == GMR_OK) result = st;
  }
  fb_free(r);
  return result;
}

static const gmr_resource_vtbl fixed_block_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "fixed_block_resource",
    .allocate = fb_allocate,
    .deallocate = fb_deallocate,
    .destroy = fb_destroy,
    .get_upstream = fb_get_upstream,
    .trim = fb_trim,
    .get_footprint = fb_get_footprint,
};

/* ---- public functions --------------------------------------------------- */

gmr_status gmr_fixed_block_resource_create(gmr_resource *upstream,
                                           const gmr_fixed_block_resource_config *config,
                                           gmr_fixed_block_resource **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (gmr_resource_check(upstream) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  gmr_fixed_block_resource_config cfg = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (cfg.block_bytes == 0 || cfg.block_bytes % UNIT != 0 || cfg.blocks_per_chunk == 0 ||
      cfg.block_bytes > GMR_MAX_ALLOCATION_BYTES / cfg.blocks_per_chunk ||
      ((int)cfg.oversize != GMR_FIXED_BLOCK_OVERSIZE_FORWARD &&
       (int)cfg.oversize != GMR_FIXED_BLOCK_OVERSIZE_REFUSE) ||
      (cfg.max_chunk_count != 0 && cfg.initial_chunk_count > cfg.max_chunk_count)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_fixed_block_resource *r = calloc(1, sizeof *r);
  if (r == NULL) return GMR_ERR_OUT_OF_MEMORY;
  r->base.vtbl = &fixed_block_vtbl;
  r->upstream = upstream;
  r->cuda = gmr__cuda();
  r->config = cfg;
  atomic_init(&r->lock.locked, 0);
  gmr__u64_map empty = GMR__U64_MAP_INIT;
  r->lists = empty;
  r->forwarded = empty;
  if (cfg.initial_chunk_count > 0) {
    uint32_t si = slot_of(r, NULL);
    gmr_status st = si == UINT32_MAX ? GMR_ERR_OUT_OF_MEMORY : GMR_OK;
    gmr_failure failure;
    memset(&failure, 0, sizeof failure);
    for (size_t i = 0; st == GMR_OK && i < cfg.initial_chunk_count; ++i) {
      st = add_chunk(r, si, cfg.blocks_per_chunk, NULL, &failure);
    }
    if (st != GMR_OK) {
      for (size_t i = 0; i < r->chunk_count; ++i) (void)chunk_to_upstream(r, r->chunks[i]);
      fb_free(r);
      return st;
    }
  }
  *out = r;
  return GMR_OK;
}

gmr_status gmr_fixed_block_resource_create_ex(gmr_resource *upstream,
                                              const gmr_fixed_block_resource_config *config,
                                              gmr_fixed_block_resource **out,
                                              gmr_failure *failure) {
  (void)failure;
  return gmr_fixed_block_resource_create(upstream, config, out);
}

gmr_resource *gmr_fixed_block_resource_as_resource(gmr_fixed_block_resource *r) {
  return r == NULL ? NULL : &r->base;
}

gmr_fixed_block_resource *gmr_fixed_block_resource_from_resource(gmr_resource *r) {
  return (r != NULL && r->vtbl == &fixed_block_vtbl) ? (gmr_fixed_block_resource *)r : NULL;
}

size_t gmr_fixed_block_resource_get_block_bytes(const gmr_fixed_block_resource *r) {
  return r == NULL ? 0 : r->config.block_bytes;
}

gmr_status gmr_fixed_block_resource_allocate_blocks(gmr_fixed_block_resource *r, size_t bytes,
                                                    gmr_stream stream, gmr_block_list **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (r == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (bytes == 0) return GMR_OK;
  if (bytes > GMR_MAX_ALLOCATION_BYTES) return GMR_ERR_OUT_OF_MEMORY;
  size_t count = bytes / r->config.block_bytes + (bytes % r->config.block_bytes != 0);
  fb_list *list = malloc(sizeof *list);
  void **blocks = malloc(count * sizeof *blocks);
  fb_block **records = malloc(count * sizeof *records);
  if (list == NULL || blocks == NULL || records == NULL) {
    free(list);
    free(blocks);
    free(records);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  list->pub.block_count = count;
  list->pub.block_bytes = r->config.block_bytes;
  list->pub.requested_bytes = bytes;
  list->pub.blocks = blocks;
  list->records = records;
  gmr_failure failure;
  memset(&failure, 0, sizeof failure);
  gmr__spin_lock_acquire(&r->lock);
  uint32_t si = slot_of(r, stream);
  gmr_status st = si == UINT32_MAX ? GMR_ERR_OUT_OF_MEMORY : GMR_OK;
  if (st == GMR_OK && !gmr__u64_map_reserve(&r->lists, r->lists.count + 1)) {
    st = GMR_ERR_OUT_OF_MEMORY;
  }
  if (st == GMR_OK) st = ensure_free(r, si, count, stream, &failure);
  if (st == GMR_OK) {
    for (size_t i = 0; i < count; ++i) {
      fb_block *b = pop_free(r, si, r->config.block_bytes);
      b->in_list = true;
      records[i] = b;
      blocks[i] = (void *)b->addr;
    }
    (void)gmr__u64_map_put(&r->lists, (uint64_t)(uintptr_t)list, 1); /* room reserved */
  }
  gmr__spin_lock_release(&r->lock);
  if (st != GMR_OK) {
    free(list);
    free(blocks);
    free(records);
    return st;
  }
  *out = &list->pub;
  return GMR_OK;
}

gmr_status gmr_fixed_block_resource_deallocate_blocks(gmr_fixed_block_resource *r,
                                                      gmr_block_list *list, gmr_stream stream) {
  if (r == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (list == NULL) return GMR_OK;
  fb_list *l = (fb_list *)list; /* the public part is its first member */
  gmr__spin_lock_acquire(&r->lock);
  if (!gmr__u64_map_get(&r->lists, (uint64_t)(uintptr_t)list, NULL)) {
    gmr__spin_lock_release(&r->lock);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  uint32_t si = slot_of(r, stream);
  if (si == UINT32_MAX) {
    gmr__spin_lock_release(&r->lock);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr__u64_map_remove(&r->lists, (uint64_t)(uintptr_t)list, NULL);
  for (size_t i = 0; i < l->pub.block_count; ++i) give_back(r, si, l->records[i]);
  if (r->config.stream_ordered) gmr__stream_event_mark_freed(r->cuda, &r->slots[si]->ev, false, &r->events);
  gmr__spin_lock_release(&r->lock);
  free(l->pub.blocks);
  free(l->records);
  free(l);
  return GMR_OK;
}

gmr_status gmr_fixed_block_resource_get_stats(gmr_fixed_block_resource *r,
                                              gmr_fixed_block_stats *out) {
  if (r == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_fixed_block_stats s;
  memset(&s, 0, sizeof s);
  gmr__spin_lock_acquire(&r->lock);
  s.block_bytes = r->config.block_bytes;
  s.chunk_count = r->chunk_count;
  s.block_count = r->total_blocks;
  s.in_use_block_count = r->in_use_blocks;
  for (uint32_t i = 0; i < r->slot_count; ++i) s.free_block_count += r->slots[i]->count;
  s.forwarded_count = r->forwarded_count;
  s.forwarded_bytes = r->forwarded_bytes;
  s.stream_count = r->slot_count;
  s.grow_count = r->grow_count;
  s.release_count = r->release_count;
  gmr__spin_lock_release(&r->lock);
  s.held_bytes = atomic_load(&r->held_bytes);
  s.peak_held_bytes = atomic_load(&r->peak_held_bytes);
  s.event_record_count = atomic_load(&r->events.record_count);
  s.event_query_count = atomic_load(&r->events.query_count);
  s.stream_wait_count = atomic_load(&r->events.wait_count);
  s.event_synchronize_count = atomic_load(&r->events.synchronize_count);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}
