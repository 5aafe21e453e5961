/*
 * resources/pool/pool_info.c (internal): what the pool says about itself:
 * statistics, get_memory_info, the free figures of a failure record, the
 * verdict on a bad free, the list of its blocks, and the public getters.
 * See gmr/pool_resource.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <string.h>

#include "core/stats.h"
#include "resources/pool/pool_internal.h"

/* Free memory of the pool, all arenas together (each under its lock). */
typedef struct free_figures {
  size_t held_bytes;
  size_t live_bytes;
  size_t free_bytes;
  size_t largest_bytes;
  size_t block_count;
} free_figures;

static void arena_figures(const gmr__pool_arena *a, free_figures *f) {
  f->held_bytes += a->held_bytes;
  f->live_bytes += a->in_use_bytes;
  f->free_bytes += a->held_bytes - a->in_use_bytes;
  for (uint32_t j = 0; j < a->slots.count; ++j) {
    const gmr__pool_slot *slot = gmr__pool_slot_at(a, j);
    f->block_count += slot->index.block_count + slot->cache_count;
    size_t largest = gmr__free_index_largest(&slot->index);
    for (uint32_t k = 0; k < slot->cache_count; ++k) {
      if (slot->cache[k]->node.bytes > largest) largest = slot->cache[k]->node.bytes;
    }
    if (largest > f->largest_bytes) f->largest_bytes = largest;
  }
  f->block_count += a->deferred_count;
  for (const gmr__pool_block *b = a->deferred; b != NULL;
       b = gmr__pool_block_of(b->node.free_next)) {
    if (b->node.bytes > f->largest_bytes) f->largest_bytes = b->node.bytes;
  }
}

static free_figures pool_figures(const gmr_pool_resource *pool) {
  free_figures f;
  memset(&f, 0, sizeof f);
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    gmr__spin_lock_acquire(&a->lock);
    arena_figures(a, &f);
    gmr__spin_lock_release(&a->lock);
  }
  return f;
}

gmr_status gmr__pool_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  free_figures f = pool_figures((const gmr_pool_resource *)self);
  gmr_memory_info m;
  memset(&m, 0, sizeof m);
  m.held_bytes = f.held_bytes;
  m.live_bytes = f.live_bytes;
  m.free_bytes = f.free_bytes;
  m.largest_free_block_bytes = f.largest_bytes;
  m.free_block_count = f.block_count;
  /* The dispatch checked the header; fill what the caller's struct holds. */
  size_t header = offsetof(gmr_memory_info, held_bytes);
  size_t known = out->size < sizeof m ? out->size : sizeof m;
  memcpy((char *)out + header, (const char *)&m + header, known - header);
  return GMR_OK;
}

gmr_status gmr__pool_note_free_info(gmr_pool_resource *pool, gmr_failure *failure,
                                    gmr_status status) {
  if (!failure->free_info_known) {
    free_figures f = pool_figures(pool);
    failure->free_info_known = true;
    failure->free_bytes = f.free_bytes;
    failure->largest_free_block_bytes = f.largest_bytes;
  }
  return status;
}

/* ---- bad frees ------------------------------------------------------------ */

gmr_status gmr__pool_bad_free_verdict(gmr_pool_resource *pool, uintptr_t addr) {
  /* A pointer this pool freed not long ago, not live now: freed twice. The
   * pool cannot tell an older double free from a pointer it never gave out. */
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    bool freed = false;
    gmr__spin_lock_acquire(&a->lock);
    for (uint32_t k = 0; k < GMR__POOL_RECENT_FREED && !freed; ++k) {
      freed = a->recent_freed[k] == addr && addr != 0;
    }
    gmr__spin_lock_release(&a->lock);
    if (freed) return GMR_ERR_DOUBLE_FREE;
  }
  return GMR_ERR_UNKNOWN_POINTER;
}

/* ---- public getters ---------------------------------------------------------- */

uint32_t gmr_pool_resource_get_arena_count(const gmr_pool_resource *pool) {
  return pool == NULL ? 0 : pool->arena_count;
}

gmr_status gmr_pool_resource_get_stats(gmr_pool_resource *pool, gmr_pool_resource_stats *out) {
  if (pool == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_pool_resource_stats s;
  memset(&s, 0, sizeof s);
  free_figures f;
  memset(&f, 0, sizeof f);
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    gmr__spin_lock_acquire(&a->lock);
    arena_figures(a, &f);
    s.chunk_count += a->chunk_count;
    s.in_use_bytes += a->in_use_bytes;
    s.requested_bytes += a->requested_bytes;
    s.in_use_count += a->in_use_count;
    s.stream_count += a->slots.count - 1u;
    s.deferred_block_count += a->deferred_count;
    gmr__spin_lock_release(&a->lock);
  }
  s.free_bytes = f.free_bytes;
  s.free_block_count = f.block_count;
  s.largest_free_block_bytes = f.largest_bytes;
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
  s.event_destroy_failure_count = atomic_load(&pool->events.destroy_failure_count);
  s.device_synchronize_count = atomic_load(&pool->events.device_synchronize_count);
  s.in_place_growth_count = atomic_load(&pool->in_place_growth_count);
  s.initial_pool_bytes = pool->config.initial_pool_bytes;
  s.maximum_pool_bytes = pool->config.maximum_pool_bytes;
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}

gmr_status gmr_pool_resource_get_blocks(gmr_pool_resource *pool, gmr_pool_block_info *out,
                                        size_t capacity, size_t *count) {
  if (pool == NULL || count == NULL || (out == NULL && capacity > 0)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  size_t n = 0;
  for (uint32_t i = 0; i < pool->arena_count; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    gmr__spin_lock_acquire(&a->lock);
    for (const gmr__pool_chunk *c = a->chunks; c != NULL; c = c->next) {
      for (const gmr__pool_block *b = c->first; b != NULL; b = b->phys_next, ++n) {
        if (n >= capacity) continue;
        gmr_pool_block_info *info = &out[n];
        info->chunk = (void *)c->base;
        info->chunk_bytes = c->size;
        info->addr = (void *)b->node.addr;
        info->bytes = b->node.bytes;
        info->requested_bytes = b->is_free ? 0 : b->request_bytes;
        info->state = !b->is_free   ? GMR_POOL_BLOCK_ALLOCATED
                      : b->deferred ? GMR_POOL_BLOCK_DEFERRED
                                    : GMR_POOL_BLOCK_FREE;
        info->arena = i;
      }
    }
    gmr__spin_lock_release(&a->lock);
  }
  *count = n;
  return GMR_OK;
}
