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

static gmr__pool_slot *slot_new(gmr__stream_key key, gmr__stream_events_mode mode) {
  gmr__pool_slot *s = calloc(1, sizeof *s); /* event NULL: created on first record */
  if (s == NULL) return NULL;
  gmr__stream_event_init(&s->ev, key, mode);
  gmr__free_index_init(&s->index);
  s->pending_query_seq = UINT64_MAX;
  return s;
}

/* Give empty slot `s` to the stream of `key`; its CUDA event is kept for reuse. */
static void slot_reuse(gmr__pool_slot *s, gmr__stream_key key, gmr__stream_events_mode mode) {
  gmr__stream_event_init(&s->ev, key, mode);
  s->pending_query_seq = UINT64_MAX;
  s->retired = false;
}

bool gmr__pool_slot_empty(const gmr__pool_slot *s) {
  return s->index.block_count == 0 && s->cache_count == 0 && s->deferred_count == 0;
}

uint32_t gmr__pool_find_slot(const gmr__pool_arena *a, gmr__stream_key key) {
  if (!a->pool->config.stream_ordered) return GMR__POOL_SHARED_SLOT;
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    const gmr__pool_slot *s = a->slots[i];
    if (!s->retired && gmr__stream_key_equal(s->ev.key, key)) return i;
  }
  return UINT32_MAX;
}

uint32_t gmr__pool_slot_for_handle(gmr__pool_arena *a, gmr_stream stream) {
  if (!a->pool->config.stream_ordered) return GMR__POOL_SHARED_SLOT;
  const gmr__pool_slot *cached = a->slots[a->cached_slot];
  if (a->cached_slot != GMR__POOL_SHARED_SLOT && !cached->retired &&
      cached->ev.key.stream == stream) {
    return a->cached_slot;
  }
  /* One slot at most per handle is not retired (gmr__pool_slot_of). */
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    const gmr__pool_slot *s = a->slots[i];
    if (!s->retired && s->ev.key.stream == stream) {
      a->cached_slot = i;
      return i;
    }
  }
  return UINT32_MAX;
}

/* The stream of `key` lived from the call that keyed retired slot `back`
 * until now (stream ids are never reused, a stream's life is one interval),
 * owning the handle throughout: slot `cur`, keyed meanwhile by a capture of
 * that handle, was its too. Its memory goes back to `back`, which serves the
 * stream again; `cur` is left empty (retired, reusable), or retired with its
 * deferred blocks. Pre: lock held. */
static uint32_t slot_return(gmr__pool_arena *a, uint32_t back, uint32_t cur) {
  gmr__pool_slot *b = a->slots[back];
  b->retired = false;
  if (cur != UINT32_MAX) {
    gmr__pool_slot *c = a->slots[cur];
    if (c->index.block_count > 0 || c->cache_count > 0) {
      gmr__pool_flush_caches(a);
      gmr__pool_move_all(a, cur, back);
      b->ev.free_seq++; /* not covered by back's event */
    }
    c->retired = true;
  }
  a->cached_slot = back;
  return back;
}

uint32_t gmr__pool_slot_of(gmr__pool_arena *a, gmr__stream_key key) {
  gmr_pool_resource *pool = a->pool;
  if (!pool->config.stream_ordered) return GMR__POOL_SHARED_SLOT;
  gmr__pool_slot *cached = a->slots[a->cached_slot];
  if (a->cached_slot != GMR__POOL_SHARED_SLOT && !cached->retired &&
      gmr__stream_key_equal(cached->ev.key, key)) {
    return a->cached_slot;
  }
  /* The handle's slot (one at most is not retired), and a retired one of
   * exactly this stream (it was retired for a capture key: stream_ids). */
  uint32_t cur = UINT32_MAX, back = UINT32_MAX;
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    const gmr__pool_slot *s = a->slots[i];
    if (s->ev.key.stream != key.stream) continue;
    if (!s->retired) {
      cur = i;
    } else if (gmr__stream_id_is_stream(key.id) && s->ev.key.id == key.id) {
      back = i;
    }
  }
  if (cur != UINT32_MAX) {
    gmr__pool_slot *s = a->slots[cur];
    switch (gmr__stream_key_compare(pool->stream_ids, s->ev.key, key)) {
      case GMR__STREAM_KEY_SAME:
        a->cached_slot = cur;
        return cur;
      case GMR__STREAM_KEY_ADOPT:
        s->ev.key.id = key.id;
        a->cached_slot = cur;
        return cur;
      case GMR__STREAM_KEY_OTHER:
        break;
    }
    if (back != UINT32_MAX && !gmr__stream_id_is_stream(s->ev.key.id)) {
      return slot_return(a, back, cur);
    }
    /* Another stream had the handle (or, with stream_ids, may have had it).
     * What that stream freed is not the caller's to reuse in stream order:
     * its slot is retired (its blocks go to others only through its event
     * or a device synchronisation); an empty one simply changes hands. */
    if (gmr__pool_slot_empty(s)) {
      slot_reuse(s, key, pool->events_mode);
      a->cached_slot = cur;
      return cur;
    }
    s->retired = true;
  } else if (back != UINT32_MAX) {
    return slot_return(a, back, UINT32_MAX);
  }
  /* A slot nobody needs any more: one of a destroyed stream, or, once there
   * are many, any empty one (its stream gets a new slot if it comes back). */
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    gmr__pool_slot *s = a->slots[i];
    if (gmr__pool_slot_empty(s) && (s->retired || a->slot_count >= GMR__POOL_SLOT_REUSE_AT)) {
      slot_reuse(s, key, pool->events_mode);
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
  gmr__pool_slot *s = slot_new(key, pool->events_mode);
  if (s == NULL) return UINT32_MAX;
  a->slots[a->slot_count] = s;
  a->cached_slot = a->slot_count;
  return a->slot_count++;
}

bool gmr__pool_slot_settled(const gmr__pool_arena *a, uint32_t si) {
  return si == GMR__POOL_SHARED_SLOT || gmr__stream_event_settled(&a->slots[si]->ev);
}

/* ---- arenas ------------------------------------------------------------- */

cudaError_t gmr__pool_arena_destroy_events(const gmr_pool_resource *pool, gmr__pool_arena *a) {
  gmr__stream_event_counts *counts = (gmr__stream_event_counts *)&pool->events;
  for (uint32_t i = 0; i < a->slot_count; ++i) {
    cudaError_t err = gmr__stream_event_deinit(pool->cuda, &a->slots[i]->ev, counts);
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
  for (uint32_t i = 0; i < a->slot_count; ++i) free(a->slots[i]);
  free(a->slots);
  gmr__pool_block *dnext = NULL;
  for (gmr__pool_block *b = a->deferred; b != NULL; b = dnext) {
    dnext = b->free_next;
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
  pthread_mutex_destroy(&a->grow_lock);
  free(a);
}

/* Arenas are written by different threads: each gets its own cache lines. */
#define CACHE_LINE 64u

gmr__pool_arena *gmr__pool_arena_new(gmr_pool_resource *pool) {
  size_t bytes = (sizeof(gmr__pool_arena) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
  gmr__pool_arena *a = aligned_alloc(CACHE_LINE, bytes);
  if (a != NULL) memset(a, 0, bytes);
  gmr__pool_slot **slots = malloc(4 * sizeof *slots);
  gmr__stream_key none = {NULL, 0};
  gmr__pool_slot *shared = slot_new(none, GMR__STREAM_EVENTS_LAZY);
  if (a == NULL || slots == NULL || shared == NULL ||
      pthread_mutex_init(&a->grow_lock, NULL) != 0) {
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
  a->spare_events = (gmr__event_cache)GMR__EVENT_CACHE_INIT(SIZE_MAX);
  return a;
}
