/*
 * resources/pool/pool_arena.c (internal): an arena's host-side parts: the
 * headers of its blocks (from slabs, so a split never allocates), its
 * slots' state, and the arena itself. See pool_internal.h.
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

/* ---- slots (the table is stream_ordered/stream_slots.h; its operations are
 * pool_streams.c's) ---------------------------------------------------------------- */

bool gmr__pool_slot_empty(const gmr__pool_slot *s) {
  return s->index.block_count == 0 && s->cache_count == 0 && s->deferred_count == 0;
}

bool gmr__pool_slot_settled(const gmr__pool_arena *a, uint32_t si) {
  return si == GMR__POOL_SHARED_SLOT ||
         gmr__stream_event_settled(&gmr__pool_slot_at(a, si)->base.ev);
}

/* ---- arenas ------------------------------------------------------------- */

void gmr__pool_arena_free(gmr__pool_arena *a) {
  if (a == NULL) return;
  gmr__stream_slots_deinit(&a->slots);
  gmr__pool_block *dnext = NULL;
  for (gmr__pool_block *b = a->deferred; b != NULL; b = dnext) {
    dnext = gmr__pool_block_of(b->node.free_next);
    gmr__stream_uses_free(&b->uses, NULL, NULL);
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
  if (!gmr__stream_slots_init(&a->slots, &gmr__pool_slot_ops, a, true, pool->events_mode,
                              pool->stream_ids, GMR__STREAM_SLOTS_REUSE_AT, pool->cuda,
                              &pool->events)) {
    free(a);
    return NULL;
  }
  if (pthread_mutex_init(&a->grow_lock, NULL) != 0) {
    gmr__stream_slots_deinit(&a->slots);
    free(a);
    return NULL;
  }
  atomic_init(&a->lock.locked, 0);
  a->slots.lock = &a->lock; /* released around the reclaim steps' synchronisations */
  a->pool = pool;
  a->spare_events = (gmr__event_cache)GMR__EVENT_CACHE_INIT(SIZE_MAX);
  return a;
}
