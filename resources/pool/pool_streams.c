/*
 * resources/pool/pool_streams.c (internal): memory freed on other streams:
 * taking it once their events say the work is done, or by making the
 * requesting stream wait for them (steps 2 and 3 of the algorithm in
 * gmr/pool_resource.h); completed memory found before new space is split;
 * device synchronisations for memory no event covers; settling every stream
 * before a trim or destroy. stream_ordered/stream_event.h says when events are recorded
 * and why a stream is touched only inside a call that names it.
 */
#define _POSIX_C_SOURCE 200809L

#include "resources/pool/pool_internal.h"

/* ---- other streams ------------------------------------------------------ */

gmr__pool_block *gmr__pool_from_other_streams(gmr__pool_arena *a, uint32_t ti, size_t need) {
  gmr_pool_resource *pool = a->pool;
  const gmr__cuda_ops *cuda = pool->cuda;
  gmr__pool_slot *t = gmr__pool_slot_at(a, ti);
  /* 2: streams whose work is done give their blocks to everyone. */
  bool pending = false;
  for (uint32_t i = 1; i < a->slots.count; ++i) {
    gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    if (i == ti || s->index.block_count == 0) continue;
    /* A fresh stream that may be gone is not recorded on: it is asked to
     * record at its next call (demand) and its newest memory stays its own. */
    if (gmr__stream_event_settle(cuda, &s->base.ev, &pool->events) != cudaSuccess) continue;
    if (gmr__stream_event_query(cuda, &s->base.ev, &pool->events)) {
      gmr__pool_move_all(a, i, GMR__POOL_SHARED_SLOT);
      gmr__stream_event_demand(&s->base.ev); /* its memory is wanted: its next free records */
    } else {
      pending = true;
    }
  }
  gmr__pool_block *b = gmr__pool_find_fit(a, ti, need);
  if (b != NULL || !pending) return b;
  /* 3: a stream still at work that has a block large enough: wait for it. */
  size_t free_bytes = t->index.bytes + gmr__pool_slot_at(a, GMR__POOL_SHARED_SLOT)->index.bytes;
  for (uint32_t i = 1; i < a->slots.count; ++i) {
    gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    if (i == ti || s->index.block_count == 0 || gmr__stream_event_fresh(&s->base.ev)) continue;
    free_bytes += s->index.bytes;
    if (gmr__free_index_find(&s->index, need, GMR__POOL_UNIT) == NULL) continue;
    if (gmr__stream_event_wait(cuda, &s->base.ev, t->base.ev.key.stream, &pool->events) !=
        cudaSuccess) {
      continue;
    }
    gmr__pool_move_all(a, i, ti);
    gmr__stream_event_demand(&s->base.ev);
    gmr__stream_event_took_after_wait(cuda, &t->base.ev, &pool->events);
    return gmr__pool_find_fit(a, ti, need);
  }
  if (free_bytes < need) return NULL;
  /* No single stream has a block large enough, but together they have the
   * bytes: take them all, so that touching blocks of different streams merge. */
  for (uint32_t i = 1; i < a->slots.count; ++i) {
    gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    if (i == ti || s->index.block_count == 0 || gmr__stream_event_fresh(&s->base.ev)) continue;
    if (gmr__stream_event_wait(cuda, &s->base.ev, t->base.ev.key.stream, &pool->events) !=
        cudaSuccess) {
      continue;
    }
    gmr__pool_move_all(a, i, ti);
    gmr__stream_event_demand(&s->base.ev);
    gmr__stream_event_took_after_wait(cuda, &t->base.ev, &pool->events);
  }
  return gmr__pool_find_fit(a, ti, need);
}

/* A slot whose free memory a query could release to everyone. */
static bool completion_unknown(const gmr__pool_slot *s) {
  return s->index.block_count > 0 && !gmr__stream_event_fresh(&s->base.ev) &&
         !s->base.ev.complete && s->base.ev.event != NULL &&
         s->pending_query_seq != s->base.ev.covered_seq;
}

bool gmr__pool_completion_unknown(const gmr__pool_arena *a, uint32_t ti) {
  for (uint32_t i = 1; i < a->slots.count; ++i) {
    if (i != ti && completion_unknown(gmr__pool_slot_at(a, i))) return true;
  }
  return false;
}

bool gmr__pool_collect_completed(gmr__pool_arena *a, uint32_t ti) {
  gmr_pool_resource *pool = a->pool;
  bool moved = false;
  for (uint32_t i = 1; i < a->slots.count; ++i) {
    gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    if (i == ti || !completion_unknown(s)) continue;
    if (gmr__stream_event_query(pool->cuda, &s->base.ev, &pool->events)) {
      gmr__pool_move_all(a, i, GMR__POOL_SHARED_SLOT);
      gmr__stream_event_demand(&s->base.ev);
      moved = true;
    } else {
      s->pending_query_seq = s->base.ev.covered_seq; /* not asked again until it records */
    }
  }
  return moved;
}

/* ---- device synchronisation --------------------------------------------- */

bool gmr__pool_sync_would_help(const gmr__pool_arena *a, uint32_t ti, size_t need) {
  for (uint32_t i = 1; i < a->slots.count; ++i) {
    const gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    if (i == ti || s->base.ev.lazy || !gmr__stream_event_fresh(&s->base.ev)) continue;
    if (gmr__free_index_find(&s->index, need, GMR__POOL_UNIT) != NULL) return true;
  }
  for (const gmr__pool_block *b = a->deferred; b != NULL;
       b = gmr__pool_block_of(b->node.free_next)) {
    if (b->node.bytes >= need) return true;
  }
  return false;
}

cudaError_t gmr__pool_device_synchronize(gmr__pool_arena *a) {
  gmr_pool_resource *pool = a->pool;
  gmr__spin_lock_acquire(&a->lock);
  uint32_t count = a->slots.count;
  for (uint32_t i = 1; i < count; ++i) {
    gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    s->snapshot_key = s->base.ev.key;
    s->snapshot_seq = s->base.ev.free_seq;
  }
  uint64_t epoch = ++a->sync_epoch;
  gmr__spin_lock_release(&a->lock);
  /* Names no stream: legal whatever streams were destroyed. */
  atomic_fetch_add_explicit(&pool->events.device_synchronize_count, 1, memory_order_relaxed);
  cudaError_t err = pool->cuda->device_synchronize();
  if (err != cudaSuccess) return err;
  gmr__spin_lock_acquire(&a->lock);
  for (uint32_t i = 1; i < count && i < a->slots.count; ++i) {
    gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    if (gmr__stream_key_equal(s->base.ev.key, s->snapshot_key)) {
      gmr__stream_event_device_synchronized(&s->base.ev, s->snapshot_seq);
    }
  }
  gmr__pool_deferred_synchronized(a, epoch);
  gmr__spin_lock_release(&a->lock);
  return cudaSuccess;
}

/* ---- settling before trim and destroy ----------------------------------- */

void gmr__pool_settle_everything(gmr__pool_arena *a) {
  gmr_pool_resource *pool = a->pool;
  const gmr__cuda_ops *cuda = pool->cuda;
  gmr__spin_lock_acquire(&a->lock);
  gmr__pool_flush_caches(a);
  (void)gmr__pool_process_deferred(a, NULL);
  bool need_sync = a->deferred_count > 0;
  for (uint32_t i = 1; i < a->slots.count; ++i) {
    gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    s->snapshot_waiting = false;
    if (s->index.block_count == 0 || gmr__stream_event_settled(&s->base.ev)) continue;
    /* Lazy streams are recorded on now; a fresh stream that may be gone can
     * only be waited for through the device. */
    if (gmr__stream_event_settle(cuda, &s->base.ev, &pool->events) != cudaSuccess) {
      need_sync = true;
      continue;
    }
    if (gmr__stream_event_query(cuda, &s->base.ev, &pool->events)) continue;
    s->snapshot_waiting = true;
    s->snapshot_key = s->base.ev.key;
    s->snapshot_seq = s->base.ev.covered_seq;
    s->snapshot_event = s->base.ev.event;
  }
  gmr__spin_lock_release(&a->lock);
  if (need_sync) {
    (void)gmr__pool_device_synchronize(a);
    return;
  }
  /* Each pending record waited for with the spin lock released; applied only
   * if the slot still covers the same frees. */
  for (uint32_t i = 1;; ++i) {
    gmr__spin_lock_acquire(&a->lock);
    if (i >= a->slots.count) {
      gmr__spin_lock_release(&a->lock);
      break;
    }
    gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    bool wait = s->snapshot_waiting;
    cudaEvent_t event = s->snapshot_event;
    gmr__spin_lock_release(&a->lock);
    if (!wait) continue;
    atomic_fetch_add_explicit(&pool->events.synchronize_count, 1, memory_order_relaxed);
    cudaError_t err = gmr__event_synchronize_relaxed(cuda, event);
    gmr__spin_lock_acquire(&a->lock);
    if (err == cudaSuccess && gmr__stream_key_equal(s->base.ev.key, s->snapshot_key) &&
        s->base.ev.covered_seq == s->snapshot_seq) {
      s->base.ev.complete = true;
    }
    s->snapshot_waiting = false;
    gmr__spin_lock_release(&a->lock);
  }
}
