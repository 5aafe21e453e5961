/*
 * resources/pool/pool_resource.c: the coalescing, stream-ordered pool. See
 * gmr/pool_resource.h for the algorithm and pool_internal.h for the data
 * structures; the comments here say why.
 */
#define _POSIX_C_SOURCE 200809L

#include "gmr/pool_resource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/counters.h"
#include "core/failure.h"
#include "core/nvtx_mem.h"
#include "resources/pool/pool_internal.h"
#include "resources/pool/thread_home.h"

#define UNIT GMR__POOL_UNIT
#define SHARED GMR__POOL_SHARED_SLOT
#define HEADERS_PER_SLAB 128u

struct gmr__header_slab {
  gmr__header_slab *next;
  gmr__pool_block headers[HEADERS_PER_SLAB];
};

typedef gmr__pool_arena pool_arena;
typedef gmr__pool_chunk pool_chunk;
typedef gmr__pool_slot pool_slot;

static const gmr_resource_vtbl pool_vtbl;


static unsigned log2_of(size_t power_of_two) {
  return (unsigned)__builtin_ctzll((unsigned long long)power_of_two);
}

/* ---- headers ------------------------------------------------------------ */

/* Make sure `count` headers can be taken without a host allocation, so a
 * split never fails half-way. */
static bool reserve_headers(pool_arena *a, size_t count) {
  while (a->spare_count < count) {
    gmr__header_slab *slab = malloc(sizeof *slab);
    if (slab == NULL) return false;
    slab->next = a->slabs;
    a->slabs = slab;
    for (unsigned i = 0; i < HEADERS_PER_SLAB; ++i) {
      slab->headers[i].free_next = a->spare_headers;
      a->spare_headers = &slab->headers[i];
    }
    a->spare_count += HEADERS_PER_SLAB;
  }
  return true;
}

static gmr__pool_block *header_take(pool_arena *a) {
  gmr__pool_block *b = a->spare_headers;
  a->spare_headers = b->free_next;
  a->spare_count--;
  memset(b, 0, sizeof *b);
  return b;
}

static void header_give(pool_arena *a, gmr__pool_block *b) {
  b->free_next = a->spare_headers;
  a->spare_headers = b;
  a->spare_count++;
}

/* ---- slots -------------------------------------------------------------- */

static pool_slot *slot_new(gmr_stream stream, bool streams_outlive) {
  pool_slot *s = malloc(sizeof *s);
  if (s == NULL) return NULL;
  gmr__stream_event_init(&s->ev, stream, streams_outlive);
  gmr__free_index_init(&s->index);
  s->cache_count = 0;
  return s;
}

/* The slot of `stream` in `a` (>= 1), created on first use; UINT32_MAX if the
 * host allocation for a new slot failed. With stream ordering off every
 * stream uses the shared slot. */
static uint32_t slot_of(pool_arena *a, gmr_stream stream) {
  if (!a->pool->config.stream_ordered) return SHARED;
  if (a->cached_slot != SHARED && a->slots[a->cached_slot]->ev.stream == stream) {
    return a->cached_slot;
  }
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    if (a->slots[i]->ev.stream == stream) {
      a->cached_slot = i;
      return i;
    }
  }
  if (a->slot_count == a->slot_capacity) {
    uint32_t capacity = a->slot_capacity * 2u;
    pool_slot **slots = realloc(a->slots, capacity * sizeof *slots);
    if (slots == NULL) return UINT32_MAX;
    a->slots = slots;
    a->slot_capacity = capacity;
  }
  pool_slot *s = slot_new(stream, a->pool->config.streams_outlive_resource);
  if (s == NULL) return UINT32_MAX;
  a->slots[a->slot_count] = s;
  a->cached_slot = a->slot_count;
  return a->slot_count++;
}

/* Whether a free block filed under slot `si` is free for anyone. */
static bool slot_settled(const pool_arena *a, uint32_t si) {
  return si == SHARED || a->slots[si]->ev.complete;
}

/* ---- free blocks -------------------------------------------------------- */

/* Whether a free neighbour filed under `other` may merge into a block being
 * filed under `si`: same slot, or (for a stream slot) the shared slot, whose
 * blocks are free for anyone and so also for that stream. */
static bool mergeable(uint32_t si, const gmr__pool_block *n) {
  return n != NULL && n->is_free && !n->cached && (n->slot == si || n->slot == SHARED);
}

/* File free block `b` under slot `si`, merged with its mergeable neighbours.
 * Neighbours free under another stream stay apart: that stream's work may
 * still use them. Absorbing a shared neighbour can bring a block of `si`
 * beyond it into reach, hence the loops. */
static void file_free(pool_arena *a, uint32_t si, gmr__pool_block *b) {
  b->request_bytes = 0;
  b->request_alignment_log2 = 0;
  gmr__pool_block *before = b->phys_prev, *after = b->phys_next;
  bool merge_before = mergeable(si, before), merge_after = mergeable(si, after);
  /* Fast paths, the common case: one neighbour, free in this very slot,
   * grows over b in place (no index work unless its size class changes). */
  if (merge_before && !merge_after && before->slot == si && !mergeable(si, before->phys_prev)) {
    size_t old = before->size;
    before->size += b->size;
    before->phys_next = after;
    if (after != NULL) after->phys_prev = before;
    header_give(a, b);
    gmr__free_index_resized(&a->slots[si]->index, before, old);
    return;
  }
  if (merge_after && !merge_before && after->slot == si && !mergeable(si, after->phys_next)) {
    size_t old = after->size;
    after->addr = b->addr;
    after->size += b->size;
    after->phys_prev = before;
    if (before != NULL) {
      before->phys_next = after;
    } else {
      b->chunk->first = after;
    }
    header_give(a, b);
    gmr__free_index_resized(&a->slots[si]->index, after, old);
    return;
  }
  b->is_free = 1;
  b->slot = si;
  gmr__pool_block *prev;
  while (mergeable(si, prev = b->phys_prev)) {
    gmr__free_index_remove(&a->slots[prev->slot]->index, prev);
    prev->size += b->size;
    prev->phys_next = b->phys_next;
    if (b->phys_next != NULL) b->phys_next->phys_prev = prev;
    prev->slot = si;
    header_give(a, b);
    b = prev;
  }
  gmr__pool_block *next;
  while (mergeable(si, next = b->phys_next)) {
    gmr__free_index_remove(&a->slots[next->slot]->index, next);
    b->size += next->size;
    b->phys_next = next->phys_next;
    if (next->phys_next != NULL) next->phys_next->phys_prev = b;
    header_give(a, next);
  }
  gmr__free_index_insert(&a->slots[si]->index, b);
}

/* Give every free block of slot `from` to slot `to`, merging as they land. */
static void move_all(pool_arena *a, uint32_t from, uint32_t to) {
  gmr__free_index *src = &a->slots[from]->index;
  gmr__pool_block *b;
  while ((b = gmr__free_index_any(src)) != NULL) {
    gmr__free_index_remove(src, b);
    file_free(a, to, b);
  }
}

/* ---- the cache of recent frees ------------------------------------------ */

static void cache_remove_at(pool_slot *s, uint32_t i) {
  memmove(&s->cache[i], &s->cache[i + 1], (s->cache_count - i - 1) * sizeof s->cache[0]);
  s->cache_count--;
}

/* Keep just-freed block `b` of slot `si` unmerged for a same-size request
 * (the pattern of training loops: the same tensors every step): the pair
 * then skips the size index, the split and the merge. The oldest entry goes
 * to the index when the cache is full. */
static void cache_put(pool_arena *a, uint32_t si, gmr__pool_block *b) {
  pool_slot *s = a->slots[si];
  uint32_t capacity = a->pool->config.recent_free_count;
  if (capacity == 0 || b->size > a->pool->config.recent_free_max_bytes) {
    file_free(a, si, b);
    return;
  }
  if (s->cache_count == capacity) {
    gmr__pool_block *oldest = s->cache[0];
    cache_remove_at(s, 0);
    oldest->cached = 0;
    file_free(a, si, oldest);
  }
  b->is_free = 1;
  b->cached = 1;
  b->slot = si;
  b->request_bytes = 0;
  b->request_alignment_log2 = 0;
  s->cache[s->cache_count++] = b;
}

/* The most recent cached block of exactly `size` bytes, taken out of the
 * cache (still marked free), or NULL. */
static gmr__pool_block *cache_take(pool_slot *s, size_t size) {
  for (uint32_t i = s->cache_count; i-- > 0;) {
    gmr__pool_block *b = s->cache[i];
    if (b->size == size) {
      cache_remove_at(s, i);
      b->cached = 0;
      return b;
    }
  }
  return NULL;
}

/* Merge every cached block of the arena into its slot's index. */
static void flush_caches(pool_arena *a) {
  for (uint32_t i = 0; i < a->slot_count; ++i) {
    pool_slot *s = a->slots[i];
    while (s->cache_count > 0) {
      gmr__pool_block *b = s->cache[--s->cache_count];
      b->cached = 0;
      file_free(a, i, b);
    }
  }
}

/* Take free block `b` out of wherever it is filed (its cache or its index). */
static void unfile(pool_arena *a, gmr__pool_block *b) {
  pool_slot *s = a->slots[b->slot];
  if (!b->cached) {
    gmr__free_index_remove(&s->index, b);
    return;
  }
  for (uint32_t i = 0; i < s->cache_count; ++i) {
    if (s->cache[i] == b) {
      cache_remove_at(s, i);
      break;
    }
  }
  b->cached = 0;
}

/* The better of the best fits of slot `si` and the shared slot. */
static gmr__pool_block *find_fit(const pool_arena *a, uint32_t si, size_t need) {
  gmr__pool_block *own = gmr__free_index_find(&a->slots[si]->index, need);
  if (si == SHARED || (own != NULL && own->size == need) ||
      a->slots[SHARED]->index.block_count == 0) {
    return own;
  }
  gmr__pool_block *shared = gmr__free_index_find(&a->slots[SHARED]->index, need);
  if (own == NULL) return shared;
  return shared != NULL && shared->size < own->size ? shared : own;
}

/* Split `b` after its first `size` bytes: b keeps them, and a new header,
 * returned, takes the rest. Pre: a header is reserved, size < b->size. */
static gmr__pool_block *split_after(pool_arena *a, gmr__pool_block *b, size_t size) {
  gmr__pool_block *rest = header_take(a);
  rest->addr = b->addr + size;
  rest->size = b->size - size;
  rest->chunk = b->chunk;
  rest->phys_prev = b;
  rest->phys_next = b->phys_next;
  if (b->phys_next != NULL) b->phys_next->phys_prev = rest;
  b->phys_next = rest;
  b->size = size;
  return rest;
}

/* Take free block `b` for a request of `size` bytes (a multiple of 256)
 * aligned to `alignment`: cut off the padding in front and the rest behind,
 * which stay free in b's slot (they cannot touch another free block of that
 * slot, since those are always merged). b's header keeps the part that stays
 * free where it can, so the index only changes when a size class does.
 * Pre: two headers reserved and `b` large enough. Returns the allocated block. */
static gmr__pool_block *take(pool_arena *a, gmr__pool_block *b, size_t size, size_t alignment) {
  uint32_t si = b->slot;
  gmr__free_index *index = &a->slots[si]->index;
  size_t pad = alignment > UNIT ? gmr__align_up(b->addr, alignment) - b->addr : 0;
  if (pad == 0) {
    if (b->size == size) {
      gmr__free_index_remove(index, b);
      b->is_free = 0;
      return b;
    }
    /* A new header in front of b for the allocation; b keeps the rest. */
    gmr__pool_block *x = header_take(a);
    x->addr = b->addr;
    x->size = size;
    x->chunk = b->chunk;
    x->phys_prev = b->phys_prev;
    x->phys_next = b;
    if (b->phys_prev != NULL) {
      b->phys_prev->phys_next = x;
    } else {
      b->chunk->first = x;
    }
    b->phys_prev = x;
    size_t old = b->size;
    b->addr += size;
    b->size -= size;
    gmr__free_index_resized(index, b, old);
    return x;
  }
  /* b keeps the padding; the allocation and the rest get new headers. */
  size_t old = b->size;
  gmr__pool_block *x = split_after(a, b, pad);
  gmr__free_index_resized(index, b, old);
  if (x->size > size) {
    gmr__pool_block *rest = split_after(a, x, size);
    rest->is_free = 1;
    rest->slot = si;
    gmr__free_index_insert(index, rest);
  }
  return x;
}

/* ---- registry ----------------------------------------------------------- */

static size_t registry_position(const gmr__pool_registry *r, uintptr_t addr) {
  size_t lo = 0, hi = r->count; /* the first item with base > addr */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->items[mid]->base <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static bool registry_reserve_one(gmr__pool_registry *r) {
  pthread_rwlock_wrlock(&r->lock);
  bool ok = true;
  if (r->count == r->capacity) {
    size_t capacity = r->capacity == 0 ? 16 : r->capacity * 2;
    gmr__pool_chunk **items = realloc(r->items, capacity * sizeof *items);
    if (items == NULL) {
      ok = false;
    } else {
      r->items = items;
      r->capacity = capacity;
    }
  }
  pthread_rwlock_unlock(&r->lock);
  return ok;
}

/* Pre: a free place was reserved (or left by a removal). */
static void registry_insert(gmr__pool_registry *r, gmr__pool_chunk *c) {
  pthread_rwlock_wrlock(&r->lock);
  size_t pos = registry_position(r, c->base);
  memmove(&r->items[pos + 1], &r->items[pos], (r->count - pos) * sizeof *r->items);
  r->items[pos] = c;
  r->count++;
  pthread_rwlock_unlock(&r->lock);
}

static void registry_remove(gmr__pool_registry *r, gmr__pool_chunk *c) {
  pthread_rwlock_wrlock(&r->lock);
  size_t pos = registry_position(r, c->base);
  if (pos > 0 && r->items[pos - 1] == c) {
    memmove(&r->items[pos - 1], &r->items[pos], (r->count - pos) * sizeof *r->items);
    r->count--;
  }
  pthread_rwlock_unlock(&r->lock);
}

/* The arena owning the chunk that contains `addr`, or NULL. Arenas live as
 * long as the pool, so the pointer stays valid after the lock is dropped. */
static pool_arena *registry_find_arena(gmr__pool_registry *r, uintptr_t addr) {
  pool_arena *found = NULL;
  pthread_rwlock_rdlock(&r->lock);
  size_t pos = registry_position(r, addr);
  if (pos > 0 && addr - r->items[pos - 1]->base < r->items[pos - 1]->size) {
    found = r->items[pos - 1]->arena;
  }
  pthread_rwlock_unlock(&r->lock);
  return found;
}

/* ---- held bytes --------------------------------------------------------- */

/* Count `bytes` as held before asking upstream, so concurrent growths of
 * several arenas never pass the maximum together. */
static bool held_reserve(gmr_pool_resource *pool, size_t bytes) {
  size_t max = pool->config.maximum_pool_bytes;
  size_t cur = atomic_load_explicit(&pool->held_bytes, memory_order_relaxed);
  for (;;) {
    if (max != 0 && (bytes > max || cur > max - bytes)) return false;
    if (atomic_compare_exchange_weak_explicit(&pool->held_bytes, &cur, cur + bytes,
                                              memory_order_relaxed, memory_order_relaxed)) {
      return true;
    }
  }
}

static void held_release(gmr_pool_resource *pool, size_t bytes) {
  atomic_fetch_sub_explicit(&pool->held_bytes, bytes, memory_order_relaxed);
}

static void held_note_peak(gmr_pool_resource *pool) {
  gmr__raise_peak(&pool->peak_held_bytes,
                  atomic_load_explicit(&pool->held_bytes, memory_order_relaxed));
}

/* ---- chunks ------------------------------------------------------------- */

/* Ask upstream for a chunk of `bytes` on `stream` and add it, as one free
 * block, to slot `si`. The bytes are already counted as held. Pre: lock held. */
static gmr_status add_chunk(pool_arena *a, uint32_t si, size_t bytes, gmr_stream stream,
                            gmr_failure *failure) {
  gmr_pool_resource *pool = a->pool;
  pool_chunk *c = malloc(sizeof *c);
  bool registered = pool->arena_count > 1;
  if (c == NULL || !reserve_headers(a, 1) ||
      (registered && !registry_reserve_one(&pool->registry))) {
    free(c);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                     "pool_resource: no host memory to keep track of a new chunk");
  }
  void *ptr = NULL;
  gmr_status st = gmr_allocate_ex(pool->upstream, bytes, UNIT, stream, &ptr, failure);
  if (st != GMR_OK) {
    free(c);
    atomic_fetch_add_explicit(&pool->upstream_failure_count, 1, memory_order_relaxed);
    return st;
  }
  c->base = (uintptr_t)ptr;
  c->size = bytes;
  c->arena = a;
  c->nvtx_heap = NULL;
  if (pool->config.nvtx_annotate) {
    c->nvtx_heap = gmr__nvtx_mem_heap_register(ptr, bytes, "pool_resource chunk");
  }
  if (registered) registry_insert(&pool->registry, c);
  gmr__pool_block *b = header_take(a);
  b->addr = c->base;
  b->size = bytes;
  b->chunk = c;
  c->first = b;
  c->prev = NULL;
  c->next = a->chunks;
  if (a->chunks != NULL) a->chunks->prev = c;
  a->chunks = c;
  a->chunk_count++;
  a->held_bytes += bytes;
  atomic_fetch_add_explicit(&pool->grow_count, 1, memory_order_relaxed);
  held_note_peak(pool);
  /* Upstream memory is ordered on `stream` (cudaMallocAsync): the new chunk
   * belongs to that stream; others reach it through its event. */
  if (si != SHARED) gmr__stream_event_mark_freed(pool->cuda, &a->slots[si]->ev, &pool->events);
  file_free(a, si, b);
  return GMR_OK;
}

/* Whether chunk `c` is wholly free, and every block of it is free for work
 * ordered after `si` (filed under si, shared, or under a settled stream). */
static bool chunk_free_for(const pool_arena *a, const pool_chunk *c, uint32_t si) {
  for (const gmr__pool_block *b = c->first; b != NULL; b = b->phys_next) {
    if (!b->is_free || (b->slot != si && !slot_settled(a, b->slot))) return false;
  }
  return true;
}

/* Forget chunk `c`, already given back upstream. Pre: lock held. */
static void drop_chunk(pool_arena *a, pool_chunk *c) {
  gmr__pool_block *next = NULL;
  for (gmr__pool_block *b = c->first; b != NULL; b = next) {
    next = b->phys_next;
    unfile(a, b);
    header_give(a, b);
  }
  if (c->prev != NULL) c->prev->next = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  if (a->chunks == c) a->chunks = c->next;
  a->chunk_count--;
  a->held_bytes -= c->size;
  atomic_fetch_add_explicit(&a->pool->release_count, 1, memory_order_relaxed);
  free(c);
}

/* Give chunk `c` back upstream, stream-ordered on `stream`. Books first
 * (RMM #2304): once upstream has the memory, another arena may receive the
 * same address and register it. Returns the upstream's status; on failure
 * the chunk stays as it was. Pre: lock held, c wholly free. */
static gmr_status release_chunk(pool_arena *a, pool_chunk *c, gmr_stream stream) {
  gmr_pool_resource *pool = a->pool;
  bool registered = pool->arena_count > 1;
  if (registered) registry_remove(&pool->registry, c);
  held_release(pool, c->size);
  /* The heap goes first for the same reason: whoever gets the range next may
   * register it. The chunk is wholly free, so it has no region to keep. */
  if (pool->config.nvtx_annotate) gmr__nvtx_mem_heap_unregister(c->nvtx_heap);
  gmr_status st = gmr_deallocate(pool->upstream, (void *)c->base, c->size, UNIT, stream);
  if (st != GMR_OK) {
    atomic_fetch_add_explicit(&pool->held_bytes, c->size, memory_order_relaxed);
    if (registered) registry_insert(&pool->registry, c); /* its place is still free */
    if (pool->config.nvtx_annotate) {
      c->nvtx_heap = gmr__nvtx_mem_heap_register((void *)c->base, c->size, "pool_resource chunk");
    }
    return st;
  }
  drop_chunk(a, c);
  return GMR_OK;
}

/* Give back the chunks of `a` that are wholly free for work ordered after
 * slot `si`, freed on si's stream so no synchronisation is needed, until
 * `goal` bytes are given back; with `only_if_enough`, give back nothing
 * unless such chunks add up to `goal`. Returns the bytes given back.
 * Pre: lock held, si is a slot of a stream (or shared when unordered). */
static size_t release_free_for(pool_arena *a, uint32_t si, size_t goal, bool only_if_enough) {
  if (only_if_enough) {
    size_t total = 0;
    for (pool_chunk *c = a->chunks; c != NULL && total < goal; c = c->next) {
      if (chunk_free_for(a, c, si)) total += c->size;
    }
    if (total < goal) return 0;
  }
  size_t released = 0;
  pool_chunk *next = NULL;
  for (pool_chunk *c = a->chunks; c != NULL && released < goal; c = next) {
    next = c->next;
    if (!chunk_free_for(a, c, si)) continue;
    size_t bytes = c->size;
    if (release_chunk(a, c, a->slots[si]->ev.stream) != GMR_OK) break;
    released += bytes;
  }
  return released;
}

/* ---- growth ------------------------------------------------------------- */

/* The chunk size the policy asks for a request that needs `need` bytes. */
static size_t growth_bytes(const gmr_pool_resource *pool, const pool_arena *a, size_t need) {
  const gmr_pool_resource_config *c = &pool->config;
  size_t step = a->held_bytes / 100u * c->growth_percent;
  if (step < c->min_growth_bytes) step = c->min_growth_bytes;
  if (step > c->max_growth_bytes) step = c->max_growth_bytes;
  size_t want = need > step ? need : step;
  size_t g = c->chunk_granularity_bytes;
  if (want <= GMR_MAX_ALLOCATION_BYTES - g) want = gmr__align_up(want, g);
  return want;
}

/* Grow the arena by a chunk that holds at least `need` bytes. Before that,
 * with release_on_growth, wholly free chunks that add up to the new chunk go
 * back upstream, so free memory split over chunks that are each too small
 * does not add to the footprint. While the upstream reports no memory, retry
 * with half the chunk down to exactly the request, then once more after giving
 * back every wholly free chunk. Pre: lock held. */
static gmr_status grow(pool_arena *a, uint32_t si, size_t need, gmr_stream stream,
                       gmr_failure *failure) {
  gmr_pool_resource *pool = a->pool;
  size_t want = growth_bytes(pool, a, need);
  if (pool->config.release_on_growth) (void)release_free_for(a, si, want, true);
  size_t max = pool->config.maximum_pool_bytes;
  bool released_all = false;
  for (;;) {
    if (!held_reserve(pool, want)) {
      size_t held = atomic_load_explicit(&pool->held_bytes, memory_order_relaxed);
      size_t room = held < max ? (max - held) & ~(UNIT - 1) : 0;
      if (room >= need && room < want) {
        want = room; /* what is left below the maximum still serves the request */
        continue;
      }
      if (!released_all) {
        released_all = true;
        if (release_free_for(a, si, SIZE_MAX, false) > 0) continue;
      }
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                       "pool_resource: growing by %zu bytes would pass maximum_pool_bytes "
                       "(%zu bytes; %zu held)",
                       need, max, held);
    }
    gmr_status st = add_chunk(a, si, want, stream, failure);
    if (st == GMR_OK) return GMR_OK;
    held_release(pool, want);
    bool no_memory = st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED;
    if (!no_memory) return st;
    if (want > need) {
      /* Smaller growth, down to exactly the request (RMM tries once). */
      size_t half = gmr__align_up(want / 2, UNIT);
      want = half > need ? half : need;
      continue;
    }
    /* PyTorch frees its cached blocks before it gives up: so do we. */
    if (released_all || release_free_for(a, si, SIZE_MAX, false) == 0) return st;
    released_all = true;
  }
}

/* ---- other streams ------------------------------------------------------ */

/* Steps 2 and 3 of the algorithm (see the header) for a request of `need`
 * bytes on stream slot `ti`. Pre: lock held, stream ordering on, the
 * requesting stream not capturing. Returns a fitting block or NULL. */
static gmr__pool_block *from_other_streams(pool_arena *a, uint32_t ti, size_t need) {
  gmr_pool_resource *pool = a->pool;
  const gmr__cuda_ops *cuda = pool->cuda;
  pool_slot *t = a->slots[ti];
  /* 2: streams whose work is done give their blocks to everyone. */
  bool pending = false;
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    pool_slot *s = a->slots[i];
    if (i == ti || s->index.block_count == 0) continue;
    if (gmr__stream_event_settle(cuda, &s->ev, &pool->events) != cudaSuccess) continue;
    if (gmr__stream_event_query(cuda, &s->ev, &pool->events)) {
      move_all(a, i, SHARED);
    } else {
      pending = true;
    }
  }
  gmr__pool_block *b = find_fit(a, ti, need);
  if (b != NULL || !pending) return b;
  /* 3: a stream still at work that has a block large enough: wait for it. */
  size_t free_bytes = t->index.bytes + a->slots[SHARED]->index.bytes;
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    pool_slot *s = a->slots[i];
    if (i == ti || s->index.block_count == 0 || s->ev.fresh) continue;
    free_bytes += s->index.bytes;
    if (gmr__free_index_find(&s->index, need) == NULL) continue;
    if (gmr__stream_event_wait(cuda, &s->ev, t->ev.stream, &pool->events) != cudaSuccess) continue;
    move_all(a, i, ti);
    /* Others reach these only through t now. */
    gmr__stream_event_mark_freed(pool->cuda, &t->ev, &pool->events);
    return find_fit(a, ti, need);
  }
  if (free_bytes < need) return NULL;
  /* No single stream has a block large enough, but together they have the
   * bytes: take them all, so that touching blocks of different streams merge. */
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    pool_slot *s = a->slots[i];
    if (i == ti || s->index.block_count == 0 || s->ev.fresh) continue;
    if (gmr__stream_event_wait(cuda, &s->ev, t->ev.stream, &pool->events) != cudaSuccess) continue;
    move_all(a, i, ti);
    gmr__stream_event_mark_freed(pool->cuda, &t->ev, &pool->events);
  }
  return find_fit(a, ti, need);
}

/* ---- allocation --------------------------------------------------------- */

/* The calling thread's arena of the last pool it used, by pool id (unique
 * for the process, so a new pool at a freed pool's address never matches). */
static _Thread_local uint64_t cached_pool_id;
static _Thread_local pool_arena *cached_arena;
static atomic_uint_fast64_t next_pool_id = 1;

static pool_arena *home_arena(const gmr_pool_resource *pool) {
  if (pool->arena_count == 1) return pool->arenas[0];
  if (cached_pool_id == pool->id) return cached_arena;
  pool_arena *a = pool->arenas[gmr__thread_home() % pool->arena_count];
  cached_pool_id = pool->id;
  cached_arena = a;
  return a;
}

static bool is_capturing(const gmr_pool_resource *pool, gmr_stream stream) {
  return pool->config.stream_ordered &&
         gmr__cuda_stream_is_capturing(pool->cuda, (cudaStream_t)stream);
}

/* Room for what one allocation may need, so nothing fails half-way. */
static gmr_status arena_prepare(pool_arena *a, gmr_stream stream, uint32_t *si,
                                gmr_failure *failure) {
  if (!reserve_headers(a, 2) || !gmr__block_map_reserve_one(&a->live) ||
      (*si = slot_of(a, stream)) == UINT32_MAX) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                     "pool_resource: no host memory for the pool's bookkeeping");
  }
  return GMR_OK;
}

/* Steps 1-3 in arena `a`: no growth. Pre: lock held, arena prepared. */
static gmr__pool_block *find_without_growth(pool_arena *a, uint32_t si, size_t need,
                                            bool may_use_events) {
  gmr__pool_block *b = find_fit(a, si, need);
  if (b == NULL && may_use_events && si != SHARED && a->slot_count > 2) {
    b = from_other_streams(a, si, need);
  }
  return b;
}

/* Book allocated block `b` and give it to the caller. */
static void record_allocation(pool_arena *a, gmr__pool_block *b, size_t bytes, size_t alignment,
                              void **out_ptr) {
  b->is_free = 0;
  b->request_bytes = bytes;
  b->request_alignment_log2 = log2_of(alignment);
  gmr__block_map_insert(&a->live, b);
  a->in_use_bytes += b->size;
  a->requested_bytes += bytes;
  a->in_use_count++;
  /* The bytes asked for, not b->size: a write into the rounding is caught. */
  if (a->pool->config.nvtx_annotate) {
    gmr__nvtx_mem_region_register(b->chunk->nvtx_heap, (void *)b->addr, bytes);
  }
  *out_ptr = (void *)b->addr;
}

static void hand_out(pool_arena *a, gmr__pool_block *b, size_t bytes, size_t size,
                     size_t alignment, void **out_ptr) {
  record_allocation(a, take(a, b, size, alignment), bytes, alignment, out_ptr);
}

static gmr_status release_settled_chunks(pool_arena *a, size_t *released_bytes);

/* After growth failed in `home`: take memory from the other arenas, then give
 * back their wholly free chunks and try to grow once more. Pre: no lock held. */
static gmr_status allocate_elsewhere(gmr_pool_resource *pool, pool_arena *home, size_t bytes,
                                     size_t size, size_t need, size_t alignment,
                                     gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  bool capturing = is_capturing(pool, stream);
  gmr_failure scratch;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    pool_arena *a = pool->arenas[i];
    if (a == home) continue;
    gmr__spin_lock_acquire(&a->lock);
    uint32_t si = 0;
    gmr__pool_block *b = NULL;
    if (arena_prepare(a, stream, &si, &scratch) == GMR_OK) {
      flush_caches(a);
      b = find_without_growth(a, si, need, !capturing);
      if (b != NULL) hand_out(a, b, bytes, size, alignment, out_ptr);
    }
    gmr__spin_lock_release(&a->lock);
    if (b != NULL) return GMR_OK;
  }
  if (capturing) return GMR_ERR_OUT_OF_MEMORY;
  size_t released = 0;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    pool_arena *a = pool->arenas[i];
    if (a == home) continue;
    gmr__spin_lock_acquire(&a->lock);
    (void)release_settled_chunks(a, &released);
    gmr__spin_lock_release(&a->lock);
  }
  if (released == 0) return GMR_ERR_OUT_OF_MEMORY;
  gmr__spin_lock_acquire(&home->lock);
  uint32_t si = 0;
  gmr_status st = arena_prepare(home, stream, &si, failure);
  if (st == GMR_OK) st = grow(home, si, need, stream, failure);
  if (st == GMR_OK) hand_out(home, find_fit(home, si, need), bytes, size, alignment, out_ptr);
  gmr__spin_lock_release(&home->lock);
  return st;
}

static gmr_status pool_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  if (alignment > GMR_POOL_MAX_ALIGNMENT) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                     "pool_resource: alignment %zu is above the pool's maximum of %zu", alignment,
                     (size_t)GMR_POOL_MAX_ALIGNMENT);
  }
  size_t size = gmr__align_up(bytes, UNIT);
  /* Blocks start on 256-byte boundaries, so a larger alignment needs at most
   * alignment - 256 bytes of padding in front. */
  size_t need = alignment > UNIT ? size + (alignment - UNIT) : size;
  pool_arena *a = home_arena(pool);
  gmr__spin_lock_acquire(&a->lock);
  uint32_t si = 0;
  gmr_status st = arena_prepare(a, stream, &si, failure);
  gmr__pool_block *b = NULL;
  if (st == GMR_OK) {
    /* Fastest: a block of exactly this size freed on this stream just now. */
    if (alignment <= UNIT && (b = cache_take(a->slots[si], size)) != NULL) {
      record_allocation(a, b, bytes, alignment, out_ptr);
      gmr__spin_lock_release(&a->lock);
      return GMR_OK;
    }
    b = find_fit(a, si, need);
    if (b == NULL) {
      flush_caches(a); /* merged, the recent frees may hold a block large enough */
      b = find_fit(a, si, need);
    }
  }
  if (st == GMR_OK && b == NULL) {
    /* Slow path: other streams' memory, then upstream. Neither may touch a
     * stream that is capturing a graph. */
    if (is_capturing(pool, stream)) {
      gmr__spin_lock_release(&a->lock);
      return gmr__failure_set(failure, GMR_ERR_CAPTURE_UNSAFE,
                       "pool_resource: no free block of %zu bytes for this stream, and the pool "
                       "cannot grow or wait for other streams while the stream captures a CUDA "
                       "graph; allocate before the capture or use a graph_arena_resource",
                       need);
    }
    b = find_without_growth(a, si, need, true);
    if (b == NULL) {
      st = grow(a, si, need, stream, failure);
      if (st == GMR_OK) b = find_fit(a, si, need);
    }
  }
  if (b != NULL) hand_out(a, b, bytes, size, alignment, out_ptr);
  gmr__spin_lock_release(&a->lock);
  if (b != NULL) return GMR_OK;
  if ((st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED) && pool->arena_count > 1) {
    gmr_failure first = *failure;
    if (allocate_elsewhere(pool, a, bytes, size, need, alignment, stream, out_ptr, failure) ==
        GMR_OK) {
      return GMR_OK;
    }
    *failure = first; /* the home arena's failure is the one to report */
  }
  return st;
}

static gmr_status pool_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  uintptr_t addr = (uintptr_t)ptr;
  pool_arena *a = home_arena(pool);
  gmr__spin_lock_acquire(&a->lock);
  gmr__pool_block *b = gmr__block_map_find(&a->live, addr);
  if (b == NULL && pool->arena_count > 1) {
    /* Allocated by a thread of another arena. */
    gmr__spin_lock_release(&a->lock);
    a = registry_find_arena(&pool->registry, addr);
    if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
    gmr__spin_lock_acquire(&a->lock);
    b = gmr__block_map_find(&a->live, addr);
  }
  if (b == NULL || b->request_bytes != bytes ||
      b->request_alignment_log2 != log2_of(alignment)) {
    gmr__spin_lock_release(&a->lock); /* unknown pointer or another size: change nothing */
    return GMR_ERR_INVALID_ARGUMENT;
  }
  uint32_t si = slot_of(a, stream);
  if (si == UINT32_MAX) {
    gmr__spin_lock_release(&a->lock);
    return GMR_ERR_OUT_OF_MEMORY; /* no slot for a new stream: the caller keeps ptr */
  }
  gmr__block_map_remove(&a->live, addr);
  /* Before the block can merge or be handed out again. */
  if (pool->config.nvtx_annotate) gmr__nvtx_mem_region_unregister(ptr);
  a->in_use_bytes -= b->size;
  a->requested_bytes -= bytes;
  a->in_use_count--;
  if (si != SHARED) gmr__stream_event_mark_freed(pool->cuda, &a->slots[si]->ev, &pool->events);
  cache_put(a, si, b);
  gmr__spin_lock_release(&a->lock);
  return GMR_OK;
}

/* ---- trim, destroy ------------------------------------------------------ */

/* Wait for every stream of the arena that has free blocks, so they are free
 * for anyone. Streams that capture, or whose event fails, stay unsettled.
 * Pre: lock held. */
static void settle_all(pool_arena *a) {
  gmr_pool_resource *pool = a->pool;
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    pool_slot *s = a->slots[i];
    if (s->index.block_count == 0 && s->cache_count == 0) continue;
    (void)gmr__stream_event_synchronize(pool->cuda, &s->ev, &pool->events);
  }
}

/* Give back every chunk of `a` whose blocks are all free for anyone. The
 * upstream free goes on the default stream: settle_all waited for the
 * streams that used the chunk, and the chunk's own stream may be gone.
 * Pre: lock held. */
static gmr_status release_settled_chunks(pool_arena *a, size_t *released_bytes) {
  flush_caches(a);
  settle_all(a);
  pool_chunk *next = NULL;
  for (pool_chunk *c = a->chunks; c != NULL; c = next) {
    next = c->next;
    if (!chunk_free_for(a, c, SHARED)) continue;
    size_t bytes = c->size;
    gmr_status st = release_chunk(a, c, NULL);
    if (st != GMR_OK) return st;
    *released_bytes += bytes;
  }
  return GMR_OK;
}

static gmr_status pool_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  *released_bytes = 0;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    pool_arena *a = pool->arenas[i];
    gmr__spin_lock_acquire(&a->lock);
    gmr_status st = release_settled_chunks(a, released_bytes);
    gmr__spin_lock_release(&a->lock);
    if (st != GMR_OK) return st;
  }
  return GMR_OK;
}

static gmr_status pool_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_pool_resource *pool = (const gmr_pool_resource *)self;
  out->held_bytes = atomic_load_explicit(&pool->held_bytes, memory_order_relaxed);
  out->peak_held_bytes = atomic_load_explicit(&pool->peak_held_bytes, memory_order_relaxed);
  return GMR_OK;
}

static gmr_resource *pool_get_upstream(const gmr_resource *self) {
  return ((const gmr_pool_resource *)self)->upstream;
}

static void arena_free(const gmr_pool_resource *pool, pool_arena *a) {
  if (a == NULL) return;
  for (uint32_t i = 0; i < a->slot_count; ++i) {
    gmr__stream_event_deinit(pool->cuda, &a->slots[i]->ev);
    free(a->slots[i]);
  }
  free(a->slots);
  pool_chunk *next = NULL;
  for (pool_chunk *c = a->chunks; c != NULL; c = next) {
    next = c->next;
    free(c);
  }
  gmr__header_slab *slab_next = NULL;
  for (gmr__header_slab *s = a->slabs; s != NULL; s = slab_next) {
    slab_next = s->next;
    free(s);
  }
  gmr__block_map_clear(&a->live);
  free(a);
}

/* Free everything host-side; the chunks must have been given back already. */
static void pool_free(gmr_pool_resource *pool) {
  for (uint32_t i = 0; i < pool->arena_count; ++i) arena_free(pool, pool->arenas[i]);
  free(pool->arenas);
  free(pool->registry.items);
  pthread_rwlock_destroy(&pool->registry.lock);
  free(pool);
}

static gmr_status pool_destroy(gmr_resource *self) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    if (pool->arenas[i]->in_use_count != 0) return GMR_ERR_BUSY;
  }
  /* Wait for the work that used freed blocks, then give every chunk back. A
   * failed upstream free is reported, but the pool is destroyed anyway: the
   * caller could do nothing better with it. */
  gmr_status result = GMR_OK;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    pool_arena *a = pool->arenas[i];
    settle_all(a);
    for (pool_chunk *c = a->chunks; c != NULL; c = c->next) {
      held_release(pool, c->size);
      if (pool->config.nvtx_annotate) gmr__nvtx_mem_heap_unregister(c->nvtx_heap);
      gmr_status st = gmr_deallocate(pool->upstream, (void *)c->base, c->size, UNIT, NULL);
      if (st != GMR_OK && result == GMR_OK) result = st;
    }
  }
  pool_free(pool);
  return result;
}

static const gmr_resource_vtbl pool_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "pool_resource",
    .allocate = pool_allocate,
    .deallocate = pool_deallocate,
    .destroy = pool_destroy,
    .get_upstream = pool_get_upstream,
    .trim = pool_trim,
    .get_footprint = pool_get_footprint,
};

/* ---- public functions --------------------------------------------------- */

static uint32_t default_arena_count(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) cpus = 1;
  if (cpus > (long)GMR__POOL_MAX_ARENAS) cpus = (long)GMR__POOL_MAX_ARENAS;
  return (uint32_t)cpus;
}


static bool config_valid(const gmr_pool_resource_config *c) {
  return gmr__is_power_of_two(c->chunk_granularity_bytes) && c->chunk_granularity_bytes >= UNIT &&
         c->chunk_granularity_bytes <= ((size_t)1 << 40) && c->min_growth_bytes != 0 &&
         c->min_growth_bytes <= c->max_growth_bytes &&
         c->max_growth_bytes <= GMR_MAX_ALLOCATION_BYTES && c->growth_percent <= 1000u &&
         c->arena_count <= GMR__POOL_MAX_ARENAS && c->recent_free_count <= GMR__POOL_CACHE_ENTRIES &&
         c->initial_pool_bytes <= GMR_MAX_ALLOCATION_BYTES &&
         (c->maximum_pool_bytes == 0 || c->initial_pool_bytes <= c->maximum_pool_bytes);
}

/* Arenas are written by different threads: each gets its own cache lines. */
#define CACHE_LINE 64u

static pool_arena *arena_new(gmr_pool_resource *pool) {
  size_t bytes = (sizeof(pool_arena) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
  pool_arena *a = aligned_alloc(CACHE_LINE, bytes);
  if (a != NULL) memset(a, 0, bytes);
  pool_slot **slots = malloc(4 * sizeof *slots);
  pool_slot *shared = slot_new(NULL, true);
  if (a == NULL || slots == NULL || shared == NULL) {
    free(a);
    free(slots);
    free(shared);
    return NULL;
  }
  atomic_init(&a->lock.locked, 0);
  a->pool = pool;
  a->slots = slots;
  a->slots[SHARED] = shared;
  a->slot_count = 1;
  a->slot_capacity = 4;
  a->cached_slot = SHARED;
  return a;
}

gmr_status gmr_pool_resource_create(gmr_resource *upstream, const gmr_pool_resource_config *config,
                                    gmr_pool_resource **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (gmr_resource_check(upstream) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  gmr_pool_resource_config cfg = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (!config_valid(&cfg)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_pool_resource *pool = calloc(1, sizeof *pool);
  if (pool == NULL) return GMR_ERR_OUT_OF_MEMORY;
  pool->base.vtbl = &pool_vtbl;
  pool->id = atomic_fetch_add_explicit(&next_pool_id, 1, memory_order_relaxed);
  pool->upstream = upstream;
  pool->cuda = gmr__cuda();
  pool->config = cfg;
  if (pthread_rwlock_init(&pool->registry.lock, NULL) != 0) {
    free(pool);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  uint32_t arenas = cfg.arena_count == 0 ? default_arena_count() : cfg.arena_count;
  pool->arenas = calloc(arenas, sizeof *pool->arenas);
  if (pool->arenas == NULL) {
    pool_free(pool);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  for (; pool->arena_count < arenas; pool->arena_count++) {
    pool_arena *a = arena_new(pool);
    if (a == NULL) {
      pool_free(pool);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    pool->arenas[pool->arena_count] = a;
  }
  if (cfg.initial_pool_bytes > 0) {
    /* The first chunk is taken on the default stream and is free for any
     * stream once that stream's work up to now is done: file it as the
     * default stream's. */
    pool_arena *a = pool->arenas[0];
    size_t bytes = gmr__align_up(cfg.initial_pool_bytes, UNIT);
    gmr_failure failure;
    memset(&failure, 0, sizeof failure);
    uint32_t si = slot_of(a, NULL);
    gmr_status st = si == UINT32_MAX ? GMR_ERR_OUT_OF_MEMORY : GMR_OK;
    if (st == GMR_OK && !held_reserve(pool, bytes)) st = GMR_ERR_INVALID_ARGUMENT;
    if (st == GMR_OK) {
      st = add_chunk(a, si, bytes, NULL, &failure);
      if (st != GMR_OK) held_release(pool, bytes);
    }
    if (st != GMR_OK) {
      pool_free(pool);
      return st;
    }
  }
  *out = pool;
  return GMR_OK;
}

gmr_resource *gmr_pool_resource_as_resource(gmr_pool_resource *pool) {
  return pool == NULL ? NULL : &pool->base;
}

gmr_pool_resource *gmr_pool_resource_from_resource(gmr_resource *r) {
  return (r != NULL && r->vtbl == &pool_vtbl) ? (gmr_pool_resource *)r : NULL;
}

gmr_resource *gmr_pool_resource_get_upstream(const gmr_pool_resource *pool) {
  return pool == NULL ? NULL : pool->upstream;
}

uint32_t gmr_pool_resource_get_arena_count(const gmr_pool_resource *pool) {
  return pool == NULL ? 0 : pool->arena_count;
}

gmr_status gmr_pool_resource_get_stats(gmr_pool_resource *pool, gmr_pool_resource_stats *out) {
  if (pool == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr_pool_resource_stats s;
  memset(&s, 0, sizeof s);
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    pool_arena *a = pool->arenas[i];
    gmr__spin_lock_acquire(&a->lock);
    s.chunk_count += a->chunk_count;
    s.in_use_bytes += a->in_use_bytes;
    s.requested_bytes += a->requested_bytes;
    s.in_use_count += a->in_use_count;
    s.free_bytes += a->held_bytes - a->in_use_bytes;
    s.stream_count += a->slot_count - 1u;
    for (uint32_t j = 0; j < a->slot_count; ++j) {
      const pool_slot *slot = a->slots[j];
      s.free_block_count += slot->index.block_count + slot->cache_count;
      size_t largest = gmr__free_index_largest(&slot->index);
      for (uint32_t k = 0; k < slot->cache_count; ++k) {
        if (slot->cache[k]->size > largest) largest = slot->cache[k]->size;
      }
      if (largest > s.largest_free_block_bytes) s.largest_free_block_bytes = largest;
    }
    gmr__spin_lock_release(&a->lock);
  }
  s.held_bytes = atomic_load(&pool->held_bytes);
  s.peak_held_bytes = atomic_load(&pool->peak_held_bytes);
  s.arena_count = pool->arena_count;
  s.grow_count = atomic_load(&pool->grow_count);
  s.upstream_failure_count = atomic_load(&pool->upstream_failure_count);
  s.release_count = atomic_load(&pool->release_count);
  s.event_record_count = atomic_load(&pool->events.record_count);
  s.event_query_count = atomic_load(&pool->events.query_count);
  s.stream_wait_count = atomic_load(&pool->events.wait_count);
  s.event_synchronize_count = atomic_load(&pool->events.synchronize_count);
  *out = s;
  return GMR_OK;
}

gmr_status gmr_pool_resource_check_invariants(gmr_pool_resource *pool, char *err, size_t err_bytes) {
  if (err != NULL && err_bytes > 0) err[0] = '\0';
  if (pool == NULL) return GMR_ERR_INVALID_ARGUMENT;
  bool ok = true;
  size_t held = 0, chunks = 0;
  for (uint32_t i = 0; i < pool->arena_count && ok; ++i) {
    pool_arena *a = pool->arenas[i];
    gmr__spin_lock_acquire(&a->lock);
    ok = gmr__pool_check_arena(a, i, err, err_bytes);
    held += a->held_bytes;
    chunks += a->chunk_count;
    gmr__spin_lock_release(&a->lock);
  }
  if (ok && held != atomic_load(&pool->held_bytes)) {
    if (err != NULL) {
      snprintf(err, err_bytes, "the arenas hold %zu bytes, the pool counts %zu", held,
               atomic_load(&pool->held_bytes));
    }
    ok = false;
  }
  if (ok && pool->arena_count > 1) {
    pthread_rwlock_rdlock(&pool->registry.lock);
    if (pool->registry.count != chunks) {
      if (err != NULL) {
        snprintf(err, err_bytes, "%zu chunks, but %zu in the chunk table", chunks,
                 pool->registry.count);
      }
      ok = false;
    }
    for (size_t i = 1; ok && i < pool->registry.count; ++i) {
      const gmr__pool_chunk *p = pool->registry.items[i - 1], *c = pool->registry.items[i];
      if (p->base + p->size > c->base) {
        if (err != NULL) snprintf(err, err_bytes, "chunks %#zx and %#zx overlap", (size_t)p->base, (size_t)c->base);
        ok = false;
      }
    }
    pthread_rwlock_unlock(&pool->registry.lock);
  }
  return ok ? GMR_OK : GMR_ERR_INTERNAL;
}
