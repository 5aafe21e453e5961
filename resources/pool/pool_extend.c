/*
 * resources/pool/pool_extend.c (internal): growing a chunk in place. When
 * the upstream can extend a live allocation (the extend slot of
 * gmr/resource.h: vmm and vmm_pages map pages after it), the pool grows a
 * chunk whose last block is free instead of taking a new chunk: the new
 * bytes merge with that free tail, so the free space is contiguous and a
 * request larger than any free block may fit without a second chunk
 * (PyTorch's expandable segments do the same). If the upstream cannot, a new
 * chunk is taken as before. Not used while annotating for memory checkers
 * (an NVTX heap cannot grow) nor during capture (allocate_capturing grows
 * through its own slot).
 */
#define _POSIX_C_SOURCE 200809L

#include "util/counters.h"
#include "core/failure.h"
#include "resources/pool/pool_internal.h"

/* The last block of chunk `c`. */
static gmr__pool_block *last_block(gmr__pool_chunk *c) {
  gmr__pool_block *b = c->first;
  while (b->phys_next != NULL) b = b->phys_next;
  return b;
}

/* The free bytes at the end of `c` that a block filed under `si` merges with. */
static size_t free_tail(const gmr__pool_chunk *c, uint32_t si) {
  const gmr__pool_block *b = last_block((gmr__pool_chunk *)c);
  bool mergeable = b->is_free && !b->cached && !b->deferred &&
                   (b->slot == si || b->slot == GMR__POOL_SHARED_SLOT);
  return mergeable ? b->node.bytes : 0;
}

bool gmr__pool_grow_in_place(gmr__pool_arena *a, const gmr__pool_request *r, size_t want,
                             void **out_ptr) {
  gmr_pool_resource *pool = a->pool;
  const gmr_resource_vtbl *v = pool->upstream->vtbl;
  if (r->capturing || pool->config.streams.nvtx_annotate || v->version < 3u || v->extend == NULL) {
    return false;
  }
  gmr_failure scratch = GMR_FAILURE_INIT;
  gmr__spin_lock_acquire(&a->lock);
  uint32_t si = 0;
  if (a->chunks == NULL || gmr__pool_prepare(a, r, &si, &scratch) != GMR_OK ||
      !gmr__pool_reserve_headers(a, 3)) {
    gmr__spin_lock_release(&a->lock);
    return false;
  }
  /* The chunk with the largest free tail for this stream, else the newest. */
  gmr__pool_chunk *c = a->chunks;
  size_t tail = free_tail(c, si);
  for (gmr__pool_chunk *x = c->next; x != NULL; x = x->next) {
    size_t t = free_tail(x, si);
    if (t > tail) {
      c = x;
      tail = t;
    }
  }
  size_t target = r->need > want ? r->need : want;
  size_t add =
      gmr__align_up(target - (tail < target ? tail : 0), pool->config.chunk_granularity_bytes);
  uintptr_t base = c->base;
  size_t old = c->size;
  gmr__pool_block *nb = gmr__pool_header_take(a); /* kept for the new bytes */
  gmr__spin_lock_release(&a->lock);
  if (add == 0 || !gmr__pool_held_reserve(pool, add)) {
    gmr__spin_lock_acquire(&a->lock);
    gmr__pool_header_give(a, nb);
    gmr__spin_lock_release(&a->lock);
    return false;
  }
  /* The grow mutex is held: no chunk of this arena goes back meanwhile. */
  gmr_status st = gmr_resource_extend(pool->upstream, (void *)base, old, old + add, GMR__POOL_UNIT,
                                      r->stream, &scratch);
  gmr__spin_lock_acquire(&a->lock);
  if (st != GMR_OK) {
    gmr__pool_header_give(a, nb);
    gmr__spin_lock_release(&a->lock);
    gmr__pool_held_release(pool, add);
    return false;
  }
  gmr__pool_registry_resize(&pool->registry, c, old + add, pool->arena_count > 1);
  a->held_bytes += add;
  atomic_fetch_add_explicit(&pool->in_place_growth_count, 1, memory_order_relaxed);
  gmr__raise_peak(&pool->peak_held_bytes,
                  atomic_load_explicit(&pool->held_bytes, memory_order_relaxed));
  gmr__pool_block *last = last_block(c);
  nb->node.addr = base + old;
  nb->node.bytes = add;
  nb->chunk = c;
  nb->phys_prev = last;
  nb->phys_next = NULL;
  last->phys_next = nb;
  /* Room for the hand-out again: other threads used the arena meanwhile. If
   * the host has none, the new bytes stay free in the chunk. */
  bool ready = gmr__pool_prepare(a, r, &si, &scratch) == GMR_OK;
  if (ready) {
    gmr__pool_file_free(a, si, nb); /* merged with the free tail */
    if (si != GMR__POOL_SHARED_SLOT) {
      /* Ordered on the stream the upstream extended on, as a new chunk is. */
      gmr__stream_event_mark_freed(pool->cuda, &gmr__pool_slot_at(a, si)->base.ev, true,
                                   &pool->events);
    }
    gmr__pool_hand_out(a, gmr__pool_find_fit(a, si, r->need), r, out_ptr);
  } else {
    uint32_t home = gmr__pool_find_slot(a, r->key); /* the stream's, if it has one */
    gmr__pool_file_free(a, home == UINT32_MAX ? GMR__POOL_SHARED_SLOT : home, nb);
  }
  gmr__spin_lock_release(&a->lock);
  return ready;
}
