/*
 * resources/pool/pool_streams.c (internal): an arena's stream slots as the
 * table (stream_ordered/stream_slots.h) and the reclaim steps
 * (stream_ordered/reclaim.h) see them: a slot's free index, moving it, a
 * fit; and the pool's use of those steps (steps 2 and 3 of the algorithm in
 * gmr/pool_resource.h, the device synchronisation before growing, settling
 * before a trim or destroy), which add the arena's deferred blocks.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>

#include "resources/pool/pool_internal.h"

/* ---- the slots' operations ----------------------------------------------- */

static gmr__stream_slot *slot_create(void *ctx) {
  (void)ctx;
  gmr__pool_slot *s = calloc(1, sizeof *s); /* event NULL: created on first record */
  if (s == NULL) return NULL;
  gmr__free_index_init(&s->index);
  return &s->base;
}

static bool slot_empty(void *ctx, uint32_t si) {
  return gmr__pool_slot_empty(gmr__pool_slot_at((gmr__pool_arena *)ctx, si));
}

/* The table's slot_return: the free blocks (index and cache) of `from` go to
 * `to`; deferred blocks stay with `from`. */
static bool slot_move_all(void *ctx, uint32_t from, uint32_t to) {
  gmr__pool_arena *a = ctx;
  const gmr__pool_slot *c = gmr__pool_slot_at(a, from);
  if (c->index.block_count == 0 && c->cache_count == 0) return false;
  gmr__pool_flush_caches(a);
  gmr__pool_move_all(a, from, to);
  return true;
}

/* The reclaim steps move a slot's merged free blocks; its recent frees stay
 * cached for its own stream's same-size requests. */
static bool slot_holds(void *ctx, uint32_t si) {
  return gmr__pool_slot_at((gmr__pool_arena *)ctx, si)->index.block_count > 0;
}

static void slot_take(void *ctx, uint32_t from, uint32_t to) { gmr__pool_move_all(ctx, from, to); }

static bool slot_fits(void *ctx, uint32_t si, const gmr__reclaim_want *want) {
  const gmr__free_index *index = &gmr__pool_slot_at((gmr__pool_arena *)ctx, si)->index;
  return gmr__free_index_find(index, want->amount, GMR__POOL_UNIT) != NULL;
}

static size_t slot_bytes(void *ctx, uint32_t si) {
  return gmr__pool_slot_at((gmr__pool_arena *)ctx, si)->index.bytes;
}

static void arena_synchronized(void *ctx, uint64_t epoch) {
  gmr__pool_deferred_synchronized(ctx, epoch);
}

const gmr__stream_slots_ops gmr__pool_slot_ops = {
    .create = slot_create,
    .empty = slot_empty,
    .move_all = slot_move_all,
    .holds = slot_holds,
    .take = slot_take,
    .fits = slot_fits,
    .amount = slot_bytes,
    .synchronized = arena_synchronized,
};

/* ---- the steps ---------------------------------------------------------- */

gmr__pool_block *gmr__pool_from_other_streams(gmr__pool_arena *a, uint32_t ti, size_t need) {
  gmr__reclaim_want want = {need, GMR__POOL_UNIT};
  /* 2: streams whose work is done give their blocks to everyone. */
  bool pending = gmr__reclaim_collect(&a->slots, ti, NULL, GMR__RECLAIM_SETTLE);
  gmr__pool_block *b = gmr__pool_find_fit(a, ti, need);
  if (b != NULL || !pending) return b;
  /* 3: a stream still at work that has a block large enough: wait for it. */
  if (!gmr__reclaim_wait(&a->slots, ti, &want)) return NULL;
  return gmr__pool_find_fit(a, ti, need);
}

bool gmr__pool_sync_would_help(const gmr__pool_arena *a, uint32_t ti, size_t need) {
  gmr__reclaim_want want = {need, GMR__POOL_UNIT};
  if (gmr__reclaim_sync_would_help(&a->slots, ti, &want)) return true;
  for (const gmr__pool_block *b = a->deferred; b != NULL;
       b = gmr__pool_block_of(b->node.free_next)) {
    if (b->node.bytes >= need) return true;
  }
  return false;
}

void gmr__pool_settle_everything(gmr__pool_arena *a) {
  gmr__spin_lock_acquire(&a->lock);
  gmr__pool_flush_caches(a);
  (void)gmr__pool_process_deferred(a, NULL);
  gmr__reclaim_settle_all(&a->slots, a->deferred_count > 0);
  gmr__spin_lock_release(&a->lock);
}
