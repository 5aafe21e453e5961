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
 * (c10/cuda/CUDACachingAllocator.cpp, deferred blocks), or with its opt-in
 * graph_capture_record_stream_reuse until the graph's edges order the uses
 * before the next request; so does the arena, always (the rule is
 * stream_ordered/capture_reuse.h, shared with pool and vmm):
 *  - freed while a session appends to its memory: its bytes wait until the
 *    freeing stream's next work in the capture comes after every use (its
 *    free markers: the other streams have joined back), checked at that
 *    stream's next request in the session (gmr__ga_reuse_joined), or for
 *    the session's end (gmr__ga_settle_deferred), when the capture has
 *    joined every stream it forked;
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
#include <stdlib.h>
#include <string.h>

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
      if (b->stream != stream) {
        b->recorded = true;
        bool known = false;
        for (uint8_t i = 0; i < b->use_count && !known; ++i) known = b->uses[i] == stream;
        if (!known && b->use_count < GMR__GA_USES) {
          b->uses[b->use_count++] = stream;
        } else if (!known) {
          b->uses_overflow = true; /* no markers: waits for the session's end */
        }
      }
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

void gmr__ga_defer_free(gmr_graph_arena_resource *a, gmr_graph_memory *m, const gmr__ga_block *b,
                        size_t entry, gmr_stream stream) {
  if (m->session == NULL) return; /* kept with the memory until it is released */
  /* Without host memory for the note the bytes also stay with the memory:
   * never reused too early. */
  if (!gmr__ga_ensure((void **)&m->deferred, &m->deferred_capacity, m->deferred_count + 1,
                      sizeof *m->deferred)) {
    return;
  }
  gmr__ga_deferred *d = &m->deferred[m->deferred_count++];
  d->entry = entry;
  d->stream = stream;
  memset(&d->markers, 0, sizeof d->markers);
  /* Ordered reuse only: a monotone memory never reuses freed bytes. */
  if (a->cfg.capture_policy == GMR_GRAPH_ARENA_ORDERED_REUSE && !b->uses_overflow) {
    (void)gmr__capture_markers_take(a->cuda, stream, b->uses, b->use_count, &d->markers);
  }
}

/* Entry d's bytes go to m's reuse list, for requests on the stream they were
 * freed on. */
static void reuse_entry(gmr_graph_arena_resource *a, gmr_graph_memory *m,
                        const gmr__ga_deferred *d) {
  gmr__ga_entry *e = &m->entries.items[d->entry];
  /* A rewind may have moved it already. */
  if (e->state != GMR__GA_ENTRY_FREED || !gmr__extent_set_reserve(&m->reuse, 1)) return;
  gmr__extent_set_add(&m->reuse, (gmr__extent){e->begin, e->end, (uintptr_t)d->stream, e->order});
  e->state = GMR__GA_ENTRY_MOVED;
  gmr__ga_region_widen(a, e);
}

void gmr__ga_reuse_joined(gmr_graph_arena_resource *a, gmr_graph_memory *m, gmr_stream stream) {
  for (size_t i = 0; i < m->deferred_count;) {
    gmr__ga_deferred *d = &m->deferred[i];
    if (d->stream != stream || d->markers.capture_id == 0 ||
        !gmr__capture_markers_precede(a->cuda, &a->capture_walks, &d->markers, stream)) {
      ++i;
      continue;
    }
    reuse_entry(a, m, d);
    gmr__capture_markers_release(&d->markers);
    m->deferred[i] = m->deferred[--m->deferred_count];
  }
}

void gmr__ga_settle_deferred(gmr_graph_arena_resource *a, gmr_graph_memory *m) {
  bool reuse = a->cfg.capture_policy == GMR_GRAPH_ARENA_ORDERED_REUSE;
  for (size_t i = 0; i < m->deferred_count; ++i) {
    /* Monotone keeps every freed block. */
    if (reuse) reuse_entry(a, m, &m->deferred[i]);
    gmr__capture_markers_release(&m->deferred[i].markers);
  }
  m->deferred_count = 0;
}

void gmr__ga_deferred_free(gmr_graph_memory *m) {
  for (size_t i = 0; i < m->deferred_count; ++i) {
    gmr__capture_markers_release(&m->deferred[i].markers);
  }
  free(m->deferred);
  m->deferred = NULL;
  m->deferred_count = 0;
}
