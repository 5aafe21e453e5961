/*
 * resources/pool/pool_arena.c (internal): an arena's host-side parts: the
 * headers of its blocks (from slabs, so a split never allocates), what its
 * stream slots hold beyond the table of stream_ordered/stream_slots.h, and the arena
 * itself. See pool_internal.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "resources/pool/pool_internal.h"

#define HEADERS_PER_SLAB 128u

struct gmr__header_slab {
  gmr__header_slab *next;
  gmr__pool_block headers[HEADERS_PER_SLAB];
};

/* ---- headers ------------------------------------------------------------ */

/* Make sure `count` headers can be taken without a host allocation, so a
 * split never fails half-way. */
bool gmr__pool_reserve_headers(gmr__pool_arena *a, size_t count) {
  while (a->spare_count < count) {
    gmr__header_slab *slab = malloc(sizeof *slab);
    if (slab == NULL) return false;
    slab->next = a->slabs;
    a->slabs = slab;
    for (unsigned i = 0; i < HEADERS_PER_SLAB; ++i) {
      slab->headers[i].node.free_next = gmr__pool_block_node(a->spare_headers);
      a->spare_headers = &slab->headers[i];
    }
    a->spare_count += HEADERS_PER_SLAB;
  }
  return true;
}

gmr__pool_block *gmr__pool_header_take(gmr__pool_arena *a) {
  gmr__pool_block *b = a->spare_headers;
  a->spare_headers = gmr__pool_block_of(b->node.free_next);
  a->spare_count--;
  memset(b, 0, sizeof *b);
  return b;
}

void gmr__pool_header_give(gmr__pool_arena *a, gmr__pool_block *b) {
  b->node.free_next = gmr__pool_block_node(a->spare_headers);
  a->spare_headers = b;
  a->spare_count++;
}

/* ---- slots (the table is stream_ordered/stream_slots.h) --------------------------- */

static gmr__stream_slot *slot_create(void *ctx) {
  (void)ctx;
  gmr__pool_slot *s = calloc(1, sizeof *s); /* event NULL: created on first record */
  if (s == NULL) return NULL;
  gmr__free_index_init(&s->index);
  s->pending_query_seq = UINT64_MAX;
  return &s->base;
}

static void slot_destroy(void *ctx, gmr__stream_slot *slot) {
  (void)ctx;
  free(slot);
}

bool gmr__pool_slot_empty(const gmr__pool_slot *s) {
  return s->index.block_count == 0 && s->cache_count == 0 && s->deferred_count == 0;
}

static bool slot_empty(void *ctx, uint32_t si) {
  return gmr__pool_slot_empty(gmr__pool_slot_at((gmr__pool_arena *)ctx, si));
}

/* The table's slot_return: the free blocks (index and cache) of `from` go to
 * `to`; deferred blocks stay with `from`. Pre: lock held. */
static bool slot_move_all(void *ctx, uint32_t from, uint32_t to) {
  gmr__pool_arena *a = ctx;
  const gmr__pool_slot *c = gmr__pool_slot_at(a, from);
  if (c->index.block_count == 0 && c->cache_count == 0) return false;
  gmr__pool_flush_caches(a);
  gmr__pool_move_all(a, from, to);
  return true;
}

/* A slot starts serving a stream: no query found its work pending yet. */
static void slot_started(void *ctx, uint32_t si) {
  gmr__pool_slot_at((gmr__pool_arena *)ctx, si)->pending_query_seq = UINT64_MAX;
}

static const gmr__stream_slots_ops slot_ops = {
    .create = slot_create,
    .destroy = slot_destroy,
    .empty = slot_empty,
    .move_all = slot_move_all,
    .started = slot_started,
};

bool gmr__pool_slot_settled(const gmr__pool_arena *a, uint32_t si) {
  return si == GMR__POOL_SHARED_SLOT ||
         gmr__stream_event_settled(&gmr__pool_slot_at(a, si)->base.ev);
}

/* ---- arenas ------------------------------------------------------------- */

cudaError_t gmr__pool_arena_destroy_events(const gmr_pool_resource *pool, gmr__pool_arena *a) {
  gmr__stream_event_counts *counts = (gmr__stream_event_counts *)&pool->events;
  for (uint32_t i = 0; i < a->slots.count; ++i) {
    cudaError_t err = gmr__stream_event_deinit(pool->cuda, &a->slots.items[i]->ev, counts);
    if (err != cudaSuccess) return err;
  }
  cudaError_t err = gmr__event_cache_clear(&a->spare_events, pool->cuda);
  if (err != cudaSuccess) {
    atomic_fetch_add_explicit(&counts->destroy_failure_count, 1, memory_order_relaxed);
  }
  return err;
}

void gmr__pool_arena_free(gmr__pool_arena *a) {
  if (a == NULL) return;
  gmr__stream_slots_deinit(&a->slots);
  gmr__pool_block *dnext = NULL;
  for (gmr__pool_block *b = a->deferred; b != NULL; b = dnext) {
    dnext = gmr__pool_block_of(b->node.free_next);
    gmr__pool_uses_free(b);
  }
  gmr__pool_chunk *next = NULL;
  for (gmr__pool_chunk *c = a->chunks; c != NULL; c = next) {
    next = c->next;
    free(c);
  }
  gmr__header_slab *slab_next = NULL;
  for (gmr__header_slab *s = a->slabs; s != NULL; s = slab_next) {
    slab_next = s->next;
    free(s);
  }
  gmr__block_map_clear(&a->live);
  free(a->spare_events.events);
  gmr__capture_walks_free(&a->capture_walks);
  pthread_mutex_destroy(&a->grow_lock);
  free(a);
}

/* Arenas are written by different threads: each gets its own cache lines. */
#define CACHE_LINE 64u

gmr__pool_arena *gmr__pool_arena_new(gmr_pool_resource *pool) {
  size_t bytes = (sizeof(gmr__pool_arena) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
  gmr__pool_arena *a = aligned_alloc(CACHE_LINE, bytes);
  if (a == NULL) return NULL;
  memset(a, 0, bytes);
  if (!gmr__stream_slots_init(&a->slots, &slot_ops, a, true, pool->events_mode, pool->stream_ids,
                              GMR__STREAM_SLOTS_REUSE_AT)) {
    free(a);
    return NULL;
  }
  if (pthread_mutex_init(&a->grow_lock, NULL) != 0) {
    gmr__stream_slots_deinit(&a->slots);
    free(a);
    return NULL;
  }
  atomic_init(&a->lock.locked, 0);
  a->pool = pool;
  a->spare_events = (gmr__event_cache)GMR__EVENT_CACHE_INIT(SIZE_MAX);
  return a;
}
