/*
 * resources/pool/pool_arena.c (internal): an arena's host-side parts: the
 * headers of its blocks (from slabs, so a split never allocates), its stream
 * slots, and the arena itself. See pool_internal.h.
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
      slab->headers[i].free_next = a->spare_headers;
      a->spare_headers = &slab->headers[i];
    }
    a->spare_count += HEADERS_PER_SLAB;
  }
  return true;
}

gmr__pool_block *gmr__pool_header_take(gmr__pool_arena *a) {
  gmr__pool_block *b = a->spare_headers;
  a->spare_headers = b->free_next;
  a->spare_count--;
  memset(b, 0, sizeof *b);
  return b;
}

void gmr__pool_header_give(gmr__pool_arena *a, gmr__pool_block *b) {
  b->free_next = a->spare_headers;
  a->spare_headers = b;
  a->spare_count++;
}

/* ---- slots -------------------------------------------------------------- */

static gmr__pool_slot *slot_new(gmr_stream stream, bool streams_outlive) {
  gmr__pool_slot *s = malloc(sizeof *s);
  if (s == NULL) return NULL;
  gmr__stream_event_init(&s->ev, stream, streams_outlive);
  gmr__free_index_init(&s->index);
  s->cache_count = 0;
  return s;
}

/* The slot of `stream` in `a` (>= 1), created on first use; UINT32_MAX if the
 * host allocation for a new slot failed. With stream ordering off every
 * stream uses the shared slot. */
uint32_t gmr__pool_slot_of(gmr__pool_arena *a, gmr_stream stream) {
  if (!a->pool->config.stream_ordered) return GMR__POOL_SHARED_SLOT;
  if (a->cached_slot != GMR__POOL_SHARED_SLOT && a->slots[a->cached_slot]->ev.stream == stream) {
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
    gmr__pool_slot **slots = realloc(a->slots, capacity * sizeof *slots);
    if (slots == NULL) return UINT32_MAX;
    a->slots = slots;
    a->slot_capacity = capacity;
  }
  gmr__pool_slot *s = slot_new(stream, a->pool->config.streams_outlive_resource);
  if (s == NULL) return UINT32_MAX;
  a->slots[a->slot_count] = s;
  a->cached_slot = a->slot_count;
  return a->slot_count++;
}

/* Whether a free block filed under slot `si` is free for anyone. */
bool gmr__pool_slot_settled(const gmr__pool_arena *a, uint32_t si) {
  return si == GMR__POOL_SHARED_SLOT || a->slots[si]->ev.complete;
}

void gmr__pool_arena_free(const gmr_pool_resource *pool, gmr__pool_arena *a) {
  if (a == NULL) return;
  for (uint32_t i = 0; i < a->slot_count; ++i) {
    gmr__stream_event_deinit(pool->cuda, &a->slots[i]->ev);
    free(a->slots[i]);
  }
  free(a->slots);
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
  free(a);
}

/* Arenas are written by different threads: each gets its own cache lines. */
#define CACHE_LINE 64u

gmr__pool_arena *gmr__pool_arena_new(gmr_pool_resource *pool) {
  size_t bytes = (sizeof(gmr__pool_arena) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
  gmr__pool_arena *a = aligned_alloc(CACHE_LINE, bytes);
  if (a != NULL) memset(a, 0, bytes);
  gmr__pool_slot **slots = malloc(4 * sizeof *slots);
  gmr__pool_slot *shared = slot_new(NULL, true);
  if (a == NULL || slots == NULL || shared == NULL) {
    free(a);
    free(slots);
    free(shared);
    return NULL;
  }
  atomic_init(&a->lock.locked, 0);
  a->pool = pool;
  a->slots = slots;
  a->slots[GMR__POOL_SHARED_SLOT] = shared;
  a->slot_count = 1;
  a->slot_capacity = 4;
  a->cached_slot = GMR__POOL_SHARED_SLOT;
  return a;
}
