/*
 * resources/pool/pool_uses.c (internal): record_stream, PyTorch's
 * Tensor.record_stream with the same meaning: a block is also used on other
 * streams, so its free must not let the memory be reused before the work
 * those streams had queued at the free is done.
 *
 * gmr_resource_record_stream adds the stream to the allocated block's uses (no CUDA
 * call). At the free, an event is recorded on each recorded stream other
 * than the freeing one, and the block waits in its arena's deferred list,
 * merged with nothing, until every event is done (queried on the slow paths,
 * as PyTorch's process_events does at each allocation, or waited for by
 * trim, destroy and device synchronisations). Then it is filed, as a free of
 * the freeing stream, like any other block. Recording at the free touches
 * the recorded streams after the call that named them: they must stay alive
 * until the block is freed (PyTorch's rule). A recorded stream that
 * captures at the free is not recorded on (the record would join the
 * user's graph): when the freeing stream captures in the same capture, the
 * block's free markers are taken instead and the freeing stream may reuse
 * it inside the capture once its next work comes after every marker
 * (stream_ordered/capture_reuse.h: PyTorch's
 * graph_capture_record_stream_reuse); otherwise, and always after the
 * capture, it waits for the next device synchronisation, as does a block
 * whose event cannot be recorded.
 */
#define _POSIX_C_SOURCE 200809L

#include "core/failure.h"
#include "resources/pool/pool_internal.h"

bool gmr__pool_defer_free(gmr__pool_arena *a, uint32_t si, gmr__pool_block *b) {
  /* Captured uses take the capture's free markers, so that the freeing
   * stream may take the block back inside the capture once they are joined. */
  if (!gmr__stream_uses_at_free(&b->uses, gmr__pool_slot_at(a, si)->base.ev.key, true,
                                &a->slots, &a->spare_events)) {
    return false;
  }
  b->is_free = true;
  b->deferred = true;
  b->cached = false;
  b->slot = si;
  b->request_bytes = 0;
  b->request_alignment_log2 = 0;
  b->node.free_prev = NULL;
  b->node.free_next = gmr__pool_block_node(a->deferred);
  if (a->deferred != NULL) a->deferred->node.free_prev = &b->node;
  a->deferred = b;
  a->deferred_count++;
  a->deferred_bytes += b->node.bytes;
  gmr__pool_slot_at(a, si)->deferred_count++;
  return true;
}

/* Take deferred block `b` out of the list. */
static void unlink_deferred(gmr__pool_arena *a, gmr__pool_block *b) {
  gmr__free_node *n = &b->node;
  if (n->free_prev != NULL) {
    n->free_prev->free_next = n->free_next;
  } else {
    a->deferred = gmr__pool_block_of(n->free_next);
  }
  if (n->free_next != NULL) n->free_next->free_prev = n->free_prev;
  n->free_prev = NULL;
  n->free_next = NULL;
  a->deferred_count--;
  a->deferred_bytes -= b->node.bytes;
  gmr__pool_slot_at(a, b->slot)->deferred_count--;
  b->deferred = false;
}

/* Drop deferred block `b` from the list and free its uses, its events given
 * back (a chunk given back in destroy, or a block whose wait is over). */
void gmr__pool_deferred_drop(gmr__pool_arena *a, gmr__pool_block *b) {
  unlink_deferred(a, b);
  gmr__stream_uses_free(&b->uses, &a->slots, &a->spare_events);
}

/* The wait of deferred block `b` is over: file it as a free of its stream. */
static void file_deferred(gmr__pool_arena *a, gmr__pool_block *b) {
  uint32_t si = b->slot;
  gmr__pool_deferred_drop(a, b);
  gmr__pool_file_free(a, si, b);
}

/* Whether deferred block b, freed during a capture, may go back to its
 * stream now: `stream` is that stream and comes after every marker. */
static bool markers_passed(gmr__pool_arena *a, const gmr__pool_block *b, gmr_stream stream) {
  const gmr__stream_uses *u = b->uses;
  if (stream == NULL || u->markers.capture_id == 0) return false;
  if (gmr__pool_slot_at(a, b->slot)->base.ev.key.stream != stream) return false;
  return gmr__capture_markers_precede(a->pool->cuda, &a->capture_walks, &u->markers, stream);
}

bool gmr__pool_process_deferred(gmr__pool_arena *a, gmr_stream stream) {
  bool filed = false;
  gmr__pool_block *next = NULL;
  for (gmr__pool_block *b = a->deferred; b != NULL; b = next) {
    next = gmr__pool_block_of(b->node.free_next);
    const gmr__stream_uses *u = b->uses;
    bool passed = !u->needs_device_sync && markers_passed(a, b, stream);
    if (!gmr__stream_uses_over(b->uses, passed, &a->slots, &a->spare_events)) continue;
    file_deferred(a, b);
    filed = true;
  }
  return filed;
}

void gmr__pool_deferred_synchronized(gmr__pool_arena *a, uint64_t epoch) {
  gmr__pool_block *next = NULL;
  for (gmr__pool_block *b = a->deferred; b != NULL; b = next) {
    next = gmr__pool_block_of(b->node.free_next);
    if (b->uses->epoch < epoch) file_deferred(a, b);
  }
}

/* The arena and live block at `addr`, with the arena's lock held; NULL (no
 * lock held) if `addr` is not a live allocation start. */
static gmr__pool_block *find_live(gmr_pool_resource *pool, uintptr_t addr,
                                  gmr__pool_arena **arena) {
  gmr__pool_arena *a = pool->arenas[0];
  gmr__spin_lock_acquire(&a->lock);
  gmr__pool_block *b = gmr__block_map_find(&a->live, addr);
  if (b == NULL && pool->arena_count > 1) {
    gmr__spin_lock_release(&a->lock);
    a = gmr__pool_registry_find_arena(&pool->registry, addr);
    if (a == NULL) return NULL;
    gmr__spin_lock_acquire(&a->lock);
    b = gmr__block_map_find(&a->live, addr);
  }
  if (b == NULL || b->is_free) { /* free: a cached block */
    gmr__spin_lock_release(&a->lock);
    return NULL;
  }
  *arena = a;
  return b;
}

gmr_status gmr__pool_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  gmr__stream_key key;
  cudaError_t err = gmr__stream_key_of(pool->cuda, pool->events_mode, stream, &key);
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  gmr__pool_arena *a = NULL;
  gmr__pool_block *b = find_live(pool, (uintptr_t)ptr, &a);
  if (b == NULL) return GMR_ERR_UNKNOWN_POINTER;
  /* Without stream ordering every free is anyone's at once: nothing to keep. */
  gmr_status st = GMR_OK;
  if (pool->config.streams.stream_ordered) st = gmr__stream_uses_add(&b->uses, key);
  gmr__spin_lock_release(&a->lock);
  return st;
}
