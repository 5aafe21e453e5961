/*
 * resources/pool/pool_growth.c (internal): the bytes a pool holds from its
 * upstream: the held-bytes budget under maximum_pool_bytes, adding and
 * giving back chunks, and the growth policy. See gmr/pool_resource.h for the
 * policy and pool_internal.h for the data.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>

#include "core/counters.h"
#include "core/failure.h"
#include "core/nvtx_mem.h"
#include "resources/pool/pool_internal.h"


/* ---- held bytes --------------------------------------------------------- */

/* Count `bytes` as held before asking upstream, so concurrent growths of
 * several arenas never pass the maximum together. */
bool gmr__pool_held_reserve(gmr_pool_resource *pool, size_t bytes) {
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

void gmr__pool_held_release(gmr_pool_resource *pool, size_t bytes) {
  atomic_fetch_sub_explicit(&pool->held_bytes, bytes, memory_order_relaxed);
}

static void held_note_peak(gmr_pool_resource *pool) {
  gmr__raise_peak(&pool->peak_held_bytes,
                  atomic_load_explicit(&pool->held_bytes, memory_order_relaxed));
}

/* ---- chunks ------------------------------------------------------------- */

/* Ask upstream for a chunk of `bytes` on `stream` and add it, as one free
 * block, to slot `si`. The bytes are already counted as held. Pre: lock held. */
gmr_status gmr__pool_add_chunk(gmr__pool_arena *a, uint32_t si, size_t bytes, gmr_stream stream,
                               gmr_failure *failure) {
  gmr_pool_resource *pool = a->pool;
  gmr__pool_chunk *c = malloc(sizeof *c);
  bool registered = pool->arena_count > 1;
  if (c == NULL || !gmr__pool_reserve_headers(a, 1) ||
      (registered && !gmr__pool_registry_reserve_one(&pool->registry))) {
    free(c);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                     "pool_resource: no host memory to keep track of a new chunk");
  }
  void *ptr = NULL;
  gmr_status st = gmr_allocate_ex(pool->upstream, bytes, GMR__POOL_UNIT, stream, &ptr, failure);
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
  if (registered) gmr__pool_registry_insert(&pool->registry, c);
  gmr__pool_block *b = gmr__pool_header_take(a);
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
  if (si != GMR__POOL_SHARED_SLOT) {
    gmr__stream_event_mark_freed(pool->cuda, &a->slots[si]->ev, &pool->events);
  }
  gmr__pool_file_free(a, si, b);
  return GMR_OK;
}

/* Whether chunk `c` is wholly free, and every block of it is free for work
 * ordered after `si` (filed under si, shared, or under a settled stream). */
static bool chunk_free_for(const gmr__pool_arena *a, const gmr__pool_chunk *c, uint32_t si) {
  for (const gmr__pool_block *b = c->first; b != NULL; b = b->phys_next) {
    if (!b->is_free || (b->slot != si && !gmr__pool_slot_settled(a, b->slot))) return false;
  }
  return true;
}

/* Forget chunk `c`, already given back upstream. Pre: lock held. */
static void drop_chunk(gmr__pool_arena *a, gmr__pool_chunk *c) {
  gmr__pool_block *next = NULL;
  for (gmr__pool_block *b = c->first; b != NULL; b = next) {
    next = b->phys_next;
    gmr__pool_unfile(a, b);
    gmr__pool_header_give(a, b);
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
static gmr_status release_chunk(gmr__pool_arena *a, gmr__pool_chunk *c, gmr_stream stream) {
  gmr_pool_resource *pool = a->pool;
  bool registered = pool->arena_count > 1;
  if (registered) gmr__pool_registry_remove(&pool->registry, c);
  gmr__pool_held_release(pool, c->size);
  /* The heap goes first for the same reason: whoever gets the range next may
   * register it. The chunk is wholly free, so it has no region to keep. */
  if (pool->config.nvtx_annotate) gmr__nvtx_mem_heap_unregister(c->nvtx_heap);
  gmr_status st = gmr_deallocate(pool->upstream, (void *)c->base, c->size, GMR__POOL_UNIT, stream);
  if (st != GMR_OK) {
    atomic_fetch_add_explicit(&pool->held_bytes, c->size, memory_order_relaxed);
    if (registered) gmr__pool_registry_insert(&pool->registry, c); /* its place is still free */
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
static size_t release_free_for(gmr__pool_arena *a, uint32_t si, size_t goal, bool only_if_enough) {
  if (only_if_enough) {
    size_t total = 0;
    for (gmr__pool_chunk *c = a->chunks; c != NULL && total < goal; c = c->next) {
      if (chunk_free_for(a, c, si)) total += c->size;
    }
    if (total < goal) return 0;
  }
  size_t released = 0;
  gmr__pool_chunk *next = NULL;
  for (gmr__pool_chunk *c = a->chunks; c != NULL && released < goal; c = next) {
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
static size_t growth_bytes(const gmr_pool_resource *pool, const gmr__pool_arena *a, size_t need) {
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
gmr_status gmr__pool_grow(gmr__pool_arena *a, uint32_t si, size_t need, gmr_stream stream,
                          gmr_failure *failure) {
  gmr_pool_resource *pool = a->pool;
  size_t want = growth_bytes(pool, a, need);
  if (pool->config.release_on_growth) (void)release_free_for(a, si, want, true);
  size_t max = pool->config.maximum_pool_bytes;
  bool released_all = false;
  for (;;) {
    if (!gmr__pool_held_reserve(pool, want)) {
      size_t held = atomic_load_explicit(&pool->held_bytes, memory_order_relaxed);
      size_t room = held < max ? (max - held) & ~(GMR__POOL_UNIT - 1) : 0;
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
    gmr_status st = gmr__pool_add_chunk(a, si, want, stream, failure);
    if (st == GMR_OK) return GMR_OK;
    gmr__pool_held_release(pool, want);
    bool no_memory = st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED;
    if (!no_memory) return st;
    if (want > need) {
      /* Smaller growth, down to exactly the request (RMM tries once). */
      size_t half = gmr__align_up(want / 2, GMR__POOL_UNIT);
      want = half > need ? half : need;
      continue;
    }
    /* PyTorch frees its cached blocks before it gives up: so do we. */
    if (released_all || release_free_for(a, si, SIZE_MAX, false) == 0) return st;
    released_all = true;
  }
}

/* Give back every chunk of `a` whose blocks are all free for anyone. The
 * upstream free goes on the default stream: settle_all waited for the
 * streams that used the chunk, and the chunk's own stream may be gone.
 * Pre: lock held. */
gmr_status gmr__pool_release_settled_chunks(gmr__pool_arena *a, size_t *released_bytes) {
  gmr__pool_flush_caches(a);
  gmr__pool_settle_all(a);
  gmr__pool_chunk *next = NULL;
  for (gmr__pool_chunk *c = a->chunks; c != NULL; c = next) {
    next = c->next;
    if (!chunk_free_for(a, c, GMR__POOL_SHARED_SLOT)) continue;
    size_t bytes = c->size;
    gmr_status st = release_chunk(a, c, NULL);
    if (st != GMR_OK) return st;
    *released_bytes += bytes;
  }
  return GMR_OK;
}
