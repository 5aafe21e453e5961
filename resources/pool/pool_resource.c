/*
 * resources/pool/pool_resource.c: the coalescing, stream-ordered pool: its
 * allocate/deallocate paths, trim, destroy, create and the public getters.
 * See gmr/pool_resource.h for the algorithm and pool_internal.h for the data
 * structures and the other files of the pool; the comments here say why.
 */
#define _POSIX_C_SOURCE 200809L

#include "gmr/pool_resource.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/failure.h"
#include "core/nvtx_mem.h"
#include "core/stats.h"
#include "resources/pool/pool_internal.h"
#include "resources/pool/thread_home.h"

static const gmr_resource_vtbl pool_vtbl;

static unsigned log2_of(size_t power_of_two) {
  return (unsigned)__builtin_ctzll((unsigned long long)power_of_two);
}

/* ---- allocation --------------------------------------------------------- */

/* The calling thread's arena of the last pool it used, by pool id (unique
 * for the process, so a new pool at a freed pool's address never matches). */
static _Thread_local uint64_t cached_pool_id;
static _Thread_local gmr__pool_arena *cached_arena;
static atomic_uint_fast64_t next_pool_id = 1;

static gmr__pool_arena *home_arena(const gmr_pool_resource *pool) {
  if (pool->arena_count == 1) return pool->arenas[0];
  if (cached_pool_id == pool->id) return cached_arena;
  gmr__pool_arena *a = pool->arenas[gmr__thread_home() % pool->arena_count];
  cached_pool_id = pool->id;
  cached_arena = a;
  return a;
}

static bool is_capturing(const gmr_pool_resource *pool, gmr_stream stream) {
  return pool->config.stream_ordered &&
         gmr__cuda_stream_is_capturing(pool->cuda, (cudaStream_t)stream);
}

/* Room for what one allocation may need, so nothing fails half-way. */
static gmr_status arena_prepare(gmr__pool_arena *a, gmr_stream stream, uint32_t *si,
                                gmr_failure *failure) {
  if (!gmr__pool_reserve_headers(a, 2) || !gmr__block_map_reserve_one(&a->live) ||
      (*si = gmr__pool_slot_of(a, stream)) == UINT32_MAX) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                     "pool_resource: no host memory for the pool's bookkeeping");
  }
  return GMR_OK;
}

/* Steps 1-3 in arena `a`: no growth. Pre: lock held, arena prepared. */
static gmr__pool_block *find_without_growth(gmr__pool_arena *a, uint32_t si, size_t need,
                                            bool may_use_events) {
  gmr__pool_block *b = gmr__pool_find_fit(a, si, need);
  if (b == NULL && may_use_events && si != GMR__POOL_SHARED_SLOT && a->slot_count > 2) {
    b = gmr__pool_from_other_streams(a, si, need);
  }
  return b;
}

/* Book allocated block `b` and give it to the caller. */
static void record_allocation(gmr__pool_arena *a, gmr__pool_block *b, size_t bytes,
                              size_t alignment, void **out_ptr) {
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

static void hand_out(gmr__pool_arena *a, gmr__pool_block *b, size_t bytes, size_t size,
                     size_t alignment, void **out_ptr) {
  record_allocation(a, gmr__pool_take(a, b, size, alignment), bytes, alignment, out_ptr);
}

/* After growth failed in `home`: take memory from the other arenas, then give
 * back their wholly free chunks and try to grow once more. Pre: no lock held. */
static gmr_status allocate_elsewhere(gmr_pool_resource *pool, gmr__pool_arena *home, size_t bytes,
                                     size_t size, size_t need, size_t alignment,
                                     gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  bool capturing = is_capturing(pool, stream);
  gmr_failure scratch;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    if (a == home) continue;
    gmr__spin_lock_acquire(&a->lock);
    uint32_t si = 0;
    gmr__pool_block *b = NULL;
    if (arena_prepare(a, stream, &si, &scratch) == GMR_OK) {
      gmr__pool_flush_caches(a);
      b = find_without_growth(a, si, need, !capturing);
      if (b != NULL) hand_out(a, b, bytes, size, alignment, out_ptr);
    }
    gmr__spin_lock_release(&a->lock);
    if (b != NULL) return GMR_OK;
  }
  if (capturing) return GMR_ERR_OUT_OF_MEMORY;
  size_t released = 0;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    if (a == home) continue;
    gmr__spin_lock_acquire(&a->lock);
    (void)gmr__pool_release_settled_chunks(a, &released);
    gmr__spin_lock_release(&a->lock);
  }
  if (released == 0) return GMR_ERR_OUT_OF_MEMORY;
  gmr__spin_lock_acquire(&home->lock);
  uint32_t si = 0;
  gmr_status st = arena_prepare(home, stream, &si, failure);
  if (st == GMR_OK) st = gmr__pool_grow(home, si, need, stream, failure);
  if (st == GMR_OK) {
    hand_out(home, gmr__pool_find_fit(home, si, need), bytes, size, alignment, out_ptr);
  }
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
  size_t size = gmr__align_up(bytes, GMR__POOL_UNIT);
  /* Blocks start on 256-byte boundaries, so a larger alignment needs at most
   * alignment - 256 bytes of padding in front. */
  size_t need = alignment > GMR__POOL_UNIT ? size + (alignment - GMR__POOL_UNIT) : size;
  gmr__pool_arena *a = home_arena(pool);
  gmr__spin_lock_acquire(&a->lock);
  uint32_t si = 0;
  gmr_status st = arena_prepare(a, stream, &si, failure);
  gmr__pool_block *b = NULL;
  if (st == GMR_OK) {
    /* Fastest: a block of exactly this size freed on this stream just now. */
    if (alignment <= GMR__POOL_UNIT && (b = gmr__pool_cache_take(a->slots[si], size)) != NULL) {
      record_allocation(a, b, bytes, alignment, out_ptr);
      gmr__spin_lock_release(&a->lock);
      return GMR_OK;
    }
    b = gmr__pool_find_fit(a, si, need);
    if (b == NULL) {
      gmr__pool_flush_caches(a); /* merged, the recent frees may hold a block large enough */
      b = gmr__pool_find_fit(a, si, need);
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
      st = gmr__pool_grow(a, si, need, stream, failure);
      if (st == GMR_OK) b = gmr__pool_find_fit(a, si, need);
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
  gmr__pool_arena *a = home_arena(pool);
  gmr__spin_lock_acquire(&a->lock);
  gmr__pool_block *b = gmr__block_map_find(&a->live, addr);
  if (b == NULL && pool->arena_count > 1) {
    /* Allocated by a thread of another arena. */
    gmr__spin_lock_release(&a->lock);
    a = gmr__pool_registry_find_arena(&pool->registry, addr);
    if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
    gmr__spin_lock_acquire(&a->lock);
    b = gmr__block_map_find(&a->live, addr);
  }
  if (b == NULL || b->request_bytes != bytes ||
      b->request_alignment_log2 != log2_of(alignment)) {
    gmr__spin_lock_release(&a->lock); /* unknown pointer or another size: change nothing */
    return GMR_ERR_INVALID_ARGUMENT;
  }
  uint32_t si = gmr__pool_slot_of(a, stream);
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
  if (si != GMR__POOL_SHARED_SLOT) {
    gmr__stream_event_mark_freed(pool->cuda, &a->slots[si]->ev, &pool->events);
  }
  gmr__pool_cache_put(a, si, b);
  gmr__spin_lock_release(&a->lock);
  return GMR_OK;
}

/* ---- trim, destroy ------------------------------------------------------ */

static gmr_status pool_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  *released_bytes = 0;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    gmr__spin_lock_acquire(&a->lock);
    gmr_status st = gmr__pool_release_settled_chunks(a, released_bytes);
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

/* Free everything host-side; the chunks must have been given back already. */
static void pool_free(gmr_pool_resource *pool) {
  for (uint32_t i = 0; i < pool->arena_count; ++i) gmr__pool_arena_free(pool, pool->arenas[i]);
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
    gmr__pool_arena *a = pool->arenas[i];
    gmr__pool_settle_all(a);
    for (gmr__pool_chunk *c = a->chunks; c != NULL; c = c->next) {
      gmr__pool_held_release(pool, c->size);
      if (pool->config.nvtx_annotate) gmr__nvtx_mem_heap_unregister(c->nvtx_heap);
      gmr_status st =
          gmr_deallocate(pool->upstream, (void *)c->base, c->size, GMR__POOL_UNIT, NULL);
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
  return gmr__is_power_of_two(c->chunk_granularity_bytes) &&
         c->chunk_granularity_bytes >= GMR__POOL_UNIT &&
         c->chunk_granularity_bytes <= ((size_t)1 << 40) && c->min_growth_bytes != 0 &&
         c->min_growth_bytes <= c->max_growth_bytes &&
         c->max_growth_bytes <= GMR_MAX_ALLOCATION_BYTES && c->growth_percent <= 1000u &&
         c->arena_count <= GMR__POOL_MAX_ARENAS &&
         c->recent_free_count <= GMR__POOL_CACHE_ENTRIES &&
         c->initial_pool_bytes <= GMR_MAX_ALLOCATION_BYTES &&
         (c->maximum_pool_bytes == 0 || c->initial_pool_bytes <= c->maximum_pool_bytes);
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
    gmr__pool_arena *a = gmr__pool_arena_new(pool);
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
    gmr__pool_arena *a = pool->arenas[0];
    size_t bytes = gmr__align_up(cfg.initial_pool_bytes, GMR__POOL_UNIT);
    gmr_failure failure;
    memset(&failure, 0, sizeof failure);
    uint32_t si = gmr__pool_slot_of(a, NULL);
    gmr_status st = si == UINT32_MAX ? GMR_ERR_OUT_OF_MEMORY : GMR_OK;
    if (st == GMR_OK && !gmr__pool_held_reserve(pool, bytes)) st = GMR_ERR_INVALID_ARGUMENT;
    if (st == GMR_OK) {
      st = gmr__pool_add_chunk(a, si, bytes, NULL, &failure);
      if (st != GMR_OK) gmr__pool_held_release(pool, bytes);
    }
    if (st != GMR_OK) {
      pool_free(pool);
      return st;
    }
  }
  *out = pool;
  return GMR_OK;
}

gmr_status gmr_pool_resource_create_ex(gmr_resource *upstream,
                                       const gmr_pool_resource_config *config,
                                       gmr_pool_resource **out, gmr_failure *failure) {
  (void)failure;
  return gmr_pool_resource_create(upstream, config, out);
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

gmr_status gmr_pool_resource_get_stats(gmr_pool_resource *pool, gmr_pool_stats *out) {
  if (pool == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_pool_stats s;
  memset(&s, 0, sizeof s);
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    gmr__spin_lock_acquire(&a->lock);
    s.chunk_count += a->chunk_count;
    s.in_use_bytes += a->in_use_bytes;
    s.requested_bytes += a->requested_bytes;
    s.in_use_count += a->in_use_count;
    s.free_bytes += a->held_bytes - a->in_use_bytes;
    s.stream_count += a->slot_count - 1u;
    for (uint32_t j = 0; j < a->slot_count; ++j) {
      const gmr__pool_slot *slot = a->slots[j];
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
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}
