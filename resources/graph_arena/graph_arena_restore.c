/*
 * resources/graph_arena/graph_arena_restore.c (internal): allocating a block
 * at a given address of a graph memory, to restore a checkpoint of its blocks
 * (PyTorch's setCheckpointPoolState, which CUDA graph trees call to go back
 * to the allocator state after an earlier node of the tree).
 *
 * The bytes must be free for the memory: bytes it freed (its reuse list,
 * whatever stream they were freed on, or a freed block kept whole) or the
 * arena's free space. A memory's bytes are never handed to another memory
 * before it is released, so a block that was live in the memory when the
 * checkpoint was taken is always free again once every later block of the
 * memory is freed.
 */
#include <string.h>

#include "core/failure.h"
#include "resources/graph_arena/graph_arena_internal.h"

/* A freed block of `m` kept whole at exactly [begin, end) (monotone, or held
 * back by record_stream): its index, or SIZE_MAX. */
static size_t kept_entry(const gmr_graph_memory *m, uintptr_t begin, uintptr_t end) {
  for (size_t i = m->entries.count; i-- > 0;) {
    const gmr__ga_entry *e = &m->entries.items[i];
    if (e->state == GMR__GA_ENTRY_FREED && e->begin == begin && e->end == end) return i;
  }
  return SIZE_MAX;
}

gmr_status gmr_graph_arena_resource_allocate_at(gmr_graph_arena_resource *a, gmr_graph_memory *m,
                                                void *ptr, size_t bytes, gmr_stream stream,
                                                uint64_t *out_id) {
  if (out_id != NULL) *out_id = 0;
  if (a == NULL || m == NULL || ptr == NULL || bytes == 0 || bytes > GMR_MAX_ALLOCATION_BYTES) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  uintptr_t addr = (uintptr_t)ptr;
  if ((addr & (a->cfg.alignment - 1)) != 0) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_carve_request rq;
  rq.bytes = bytes;
  rq.carved_bytes = gmr__align_up(bytes, a->cfg.alignment);
  rq.alignment = a->cfg.alignment;
  rq.requested_alignment = GMR_DEFAULT_ALIGNMENT;
  rq.stream = stream;
  uintptr_t end = addr + rq.carved_bytes;
  gmr__ga_lock(a);
  gmr_status st = GMR_OK;
  gmr__ga_chunk *c = gmr__ga_chunk_of(a, addr);
  if (!gmr__ga_memory_known(a, m) || c == NULL || end > c->base + c->bytes) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (!gmr__ga_ensure((void **)&m->entries.items, &m->entries.capacity,
                             m->entries.count + 1, sizeof *m->entries.items) ||
             !gmr__ga_blocks_reserve(a) || !gmr__extent_set_reserve(&m->reuse, 1) ||
             !gmr__extent_set_reserve(&a->free, 1)) {
    st = GMR_ERR_OUT_OF_MEMORY;
  }
  if (st != GMR_OK) {
    gmr__ga_unlock(a);
    return st;
  }
  size_t kept = kept_entry(m, addr, end);
  bool region = false;
  if (kept != SIZE_MAX) {
    /* The freed block comes back whole: its bytes were the memory's already. */
    m->entries.items[kept].state = GMR__GA_ENTRY_MOVED;
    region = a->cfg.nvtx_annotate && !m->entries.items[kept].region;
    m->entries.items[kept].region = false;
    m->held_bytes -= rq.carved_bytes;
  } else {
    size_t reused = gmr__extent_set_covered_bytes(&m->reuse, c->order, addr, end);
    size_t fresh = gmr__extent_set_covered_bytes(&a->free, c->order, addr, end);
    if (reused + fresh != rq.carved_bytes) {
      gmr__ga_unlock(a);
      return GMR_ERR_BUSY; /* part of it is live, or another memory's */
    }
    (void)gmr__extent_set_take_span(&m->reuse, c->order, addr, end, GMR__EXTENT_ANY_TAG);
    (void)gmr__extent_set_take_span(&a->free, c->order, addr, end, 0);
    m->held_bytes -= reused; /* register_block adds the whole block */
    /* Freed bytes lie inside the widened regions of the blocks they were;
     * fresh ones need a region of their own (a block over both gets none). */
    region = a->cfg.nvtx_annotate && reused == 0;
    if (fresh > 0) gmr__ga_forget_hints(a);
  }
  uint32_t slot = gmr__ga_register_block(a, m, c, addr, c->order, &rq, region);
  if (out_id != NULL) *out_id = gmr__ga_block_id(a, slot);
  gmr__ga_unlock(a);
  return GMR_OK;
}
