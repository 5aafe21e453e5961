/*
 * resources/pool/pool_streams.c (internal): memory freed on other streams:
 * taking it once their events say the work is done, or by making the
 * requesting stream wait for them (steps 2 and 3 of the algorithm in
 * gmr/pool_resource.h), and settling every stream before a trim or destroy.
 */
#define _POSIX_C_SOURCE 200809L

#include "resources/pool/pool_internal.h"


/* ---- other streams ------------------------------------------------------ */

/* Steps 2 and 3 of the algorithm (see the header) for a request of `need`
 * bytes on stream slot `ti`. Pre: lock held, stream ordering on, the
 * requesting stream not capturing. Returns a fitting block or NULL. */
gmr__pool_block *gmr__pool_from_other_streams(gmr__pool_arena *a, uint32_t ti, size_t need) {
  gmr_pool_resource *pool = a->pool;
  const gmr__cuda_ops *cuda = pool->cuda;
  gmr__pool_slot *t = a->slots[ti];
  /* 2: streams whose work is done give their blocks to everyone. */
  bool pending = false;
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    gmr__pool_slot *s = a->slots[i];
    if (i == ti || s->index.block_count == 0) continue;
    if (gmr__stream_event_settle(cuda, &s->ev, &pool->events) != cudaSuccess) continue;
    if (gmr__stream_event_query(cuda, &s->ev, &pool->events)) {
      gmr__pool_move_all(a, i, GMR__POOL_SHARED_SLOT);
    } else {
      pending = true;
    }
  }
  gmr__pool_block *b = gmr__pool_find_fit(a, ti, need);
  if (b != NULL || !pending) return b;
  /* 3: a stream still at work that has a block large enough: wait for it. */
  size_t free_bytes = t->index.bytes + a->slots[GMR__POOL_SHARED_SLOT]->index.bytes;
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    gmr__pool_slot *s = a->slots[i];
    if (i == ti || s->index.block_count == 0 || s->ev.fresh) continue;
    free_bytes += s->index.bytes;
    if (gmr__free_index_find(&s->index, need) == NULL) continue;
    if (gmr__stream_event_wait(cuda, &s->ev, t->ev.stream, &pool->events) != cudaSuccess) continue;
    gmr__pool_move_all(a, i, ti);
    /* Others reach these only through t now. */
    gmr__stream_event_mark_freed(pool->cuda, &t->ev, &pool->events);
    return gmr__pool_find_fit(a, ti, need);
  }
  if (free_bytes < need) return NULL;
  /* No single stream has a block large enough, but together they have the
   * bytes: take them all, so that touching blocks of different streams merge. */
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    gmr__pool_slot *s = a->slots[i];
    if (i == ti || s->index.block_count == 0 || s->ev.fresh) continue;
    if (gmr__stream_event_wait(cuda, &s->ev, t->ev.stream, &pool->events) != cudaSuccess) continue;
    gmr__pool_move_all(a, i, ti);
    gmr__stream_event_mark_freed(pool->cuda, &t->ev, &pool->events);
  }
  return gmr__pool_find_fit(a, ti, need);
}


/* Wait for every stream of the arena that has free blocks, so they are free
 * for anyone. Streams that capture, or whose event fails, stay unsettled.
 * Pre: lock held. */
void gmr__pool_settle_all(gmr__pool_arena *a) {
  gmr_pool_resource *pool = a->pool;
  for (uint32_t i = 1; i < a->slot_count; ++i) {
    gmr__pool_slot *s = a->slots[i];
    if (s->index.block_count == 0 && s->cache_count == 0) continue;
    (void)gmr__stream_event_synchronize(pool->cuda, &s->ev, &pool->events);
  }
}
