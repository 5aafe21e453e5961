/*
 * resources/graph_arena/graph_arena_streams.c (internal): record_stream, for
 * blocks used on streams other than the one they were allocated on.
 *
 * A captured block freed during its capture goes to the memory's reuse list
 * at once under ORDERED_REUSE, for later requests on the stream it was freed
 * on: the graph runs that stream's nodes in order, so the reuse is safe. A
 * block another stream of the capture also used (a stream the capture forked)
 * is different: until that stream joins back, its nodes may run after the
 * free. PyTorch's private pools hold such blocks back until the capture ends
 * (c10/cuda/CUDACachingAllocator.cpp, deferred blocks); so does the arena:
 *  - freed while a session appends to its memory: its bytes wait for that
 *    session's end (gmr__ga_settle_deferred), when the capture has joined
 *    every stream it forked;
 *  - freed with no session open (its capture is over, the other use was
 *    outside any capture): the arena cannot know when that use ends (it makes
 *    no event query), so the bytes stay with the memory until it is released.
 * Blocks outside graph memories need nothing: uncaptured blocks of the arena
 * come back only at a reset or rewind (the caller synchronises first), and a
 * block whose memory was released gives its bytes back at its free, to be
 * handed out after the caller synchronised (the release rule). Forwarded
 * blocks are the upstream's: it is asked.
 */
#include <stdatomic.h>

#include "core/forward.h"
#include "resources/graph_arena/graph_arena_internal.h"

gmr_status gmr__ga_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)self;
  uintptr_t addr = (uintptr_t)ptr;
  if (addr >= atomic_load_explicit(&a->chunks_begin, memory_order_relaxed) &&
      addr < atomic_load_explicit(&a->chunks_end, memory_order_relaxed)) {
    gmr__ga_lock(a);
    uint32_t slot = 0;
    if (gmr__ga_lookup_ptr(a, ptr, &slot)) {
      gmr__ga_block *b = &a->blocks[slot];
      if (b->stream != stream) b->recorded = true;
      gmr__ga_unlock(a);
      return GMR_OK;
    }
    bool in_chunk = gmr__ga_chunk_of(a, addr) != NULL;
    gmr__ga_unlock(a);
    if (in_chunk) return GMR_ERR_UNKNOWN_POINTER;
  }
  if (a->cfg.uncaptured != GMR_GRAPH_ARENA_UNCAPTURED_FORWARD) return GMR_ERR_UNKNOWN_POINTER;
  return gmr__forward_record_stream(a->upstream, ptr, stream);
}

void gmr__ga_defer_free(gmr_graph_memory *m, size_t entry, gmr_stream stream) {
  if (m->session == NULL) return; /* kept with the memory until it is released */
  /* Without host memory for the note the bytes also stay with the memory:
   * never reused too early. */
  if (!gmr__ga_ensure((void **)&m->deferred, &m->deferred_capacity, m->deferred_count + 1,
                      sizeof *m->deferred)) {
    return;
  }
  m->deferred[m->deferred_count++] = (gmr__ga_deferred){entry, stream};
}

void gmr__ga_settle_deferred(gmr_graph_arena_resource *a, gmr_graph_memory *m) {
  bool reuse = a->cfg.capture_policy == GMR_GRAPH_ARENA_ORDERED_REUSE;
  for (size_t i = 0; i < m->deferred_count; ++i) {
    gmr__ga_entry *e = &m->entries.items[m->deferred[i].entry];
    /* A rewind may have moved it already; monotone keeps every freed block. */
    if (!reuse || e->state != GMR__GA_ENTRY_FREED || !gmr__extent_set_reserve(&m->reuse, 1)) {
      continue;
    }
    gmr__extent_set_add(&m->reuse, (gmr__extent){e->begin, e->end,
                                                 (uintptr_t)m->deferred[i].stream, e->order});
    e->state = GMR__GA_ENTRY_MOVED;
    gmr__ga_region_widen(a, e);
  }
  m->deferred_count = 0;
}
