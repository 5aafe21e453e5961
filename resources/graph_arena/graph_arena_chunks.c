/*
 * resources/graph_arena/graph_arena_chunks.c (internal): the chunks an arena holds from
 * its upstream, sorted by address: finding, adding and giving back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/nvtx_mem.h"
#include "resources/graph_arena/graph_arena_internal.h"

/* The chunk holding `addr` (chunks are sorted by address), or NULL. */
gmr__ga_chunk *gmr__ga_chunk_of(gmr_graph_arena_resource *a, uintptr_t addr) {
  if (a->chunk_hint < a->chunk_count) {
    gmr__ga_chunk *c = &a->chunks[a->chunk_hint];
    if (addr >= c->base && addr - c->base < c->bytes) return c;
  }
  size_t lo = 0, hi = a->chunk_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a->chunks[mid].base + a->chunks[mid].bytes <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < a->chunk_count && addr >= a->chunks[lo].base) {
    a->chunk_hint = lo;
    return &a->chunks[lo];
  }
  return NULL;
}

void gmr__ga_count_upstream_call(gmr_graph_arena_resource *a) {
  atomic_fetch_add_explicit(&a->upstream_call_count, 1, memory_order_relaxed);
  if (atomic_load_explicit(&a->open_session_count, memory_order_relaxed) > 0) {
    atomic_fetch_add_explicit(&a->upstream_call_during_capture_count, 1, memory_order_relaxed);
  }
}

/* The NVTX heap name of a chunk, for the tool's reports. */
#define CHUNK_NAME "graph_arena_resource chunk"

/* Take a chunk of `bytes` from the upstream and add it to the free space.
 * Called with the lock held, outside any session. The caller reserved room
 * in `free`; this reserves room in `chunks` before calling the upstream. */
gmr_status gmr__ga_add_chunk(gmr_graph_arena_resource *a, size_t bytes, bool initial,
                             gmr_failure *failure) {
  size_t granules = (bytes >> GMR__GA_GRANULE_SHIFT) + 1;
  uint32_t *block_at = NULL;
  if (!gmr__ga_ensure((void **)&a->chunks, &a->chunk_capacity, a->chunk_count + 1,
                      sizeof *a->chunks) ||
      (block_at = calloc(granules, sizeof *block_at)) == NULL) {
    snprintf(failure->message, sizeof failure->message, "graph_arena: no host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  void *p = NULL;
  gmr__ga_count_upstream_call(a);
  /* Default alignment: a cuda upstream gives 256 and refuses more; larger
   * request alignments are met inside the chunk. */
  gmr_status st = gmr_allocate_ex(a->upstream, bytes, 0, NULL, &p, failure);
  if (st != GMR_OK) {
    free(block_at);
    return st;
  }
  uintptr_t base = (uintptr_t)p;
  size_t i = a->chunk_count;
  while (i > 0 && a->chunks[i - 1].base > base) {
    a->chunks[i] = a->chunks[i - 1];
    i--;
  }
  uint64_t order = a->next_chunk_order++;
  void *heap = NULL;
  if (a->cfg.nvtx_annotate) heap = gmr__nvtx_mem_heap_register(p, bytes, CHUNK_NAME);
  a->chunks[i] = (gmr__ga_chunk){base, bytes, order, block_at, initial, heap};
  a->chunk_count++;
  a->held_bytes += bytes;
  if (a->held_bytes > a->peak_held_bytes) a->peak_held_bytes = a->held_bytes;
  gmr__extent_set_add(&a->free, (gmr__extent){base, base + bytes, 0, order});
  return GMR_OK;
}

/* Give chunk `index` back upstream if it is wholly free. */
gmr_status gmr__ga_release_chunk(gmr_graph_arena_resource *a, size_t index, bool *released) {
  gmr__ga_chunk c = a->chunks[index];
  *released = false;
  size_t e =
      gmr__extent_set_find_exact(&a->free, (gmr__extent){c.base, c.base + c.bytes, 0, c.order});
  if (e == SIZE_MAX) return GMR_OK;
  gmr__ga_count_upstream_call(a);
  /* The heap goes before the memory: whoever gets the range next may
   * register it. A wholly free chunk has no region to keep. */
  if (a->cfg.nvtx_annotate) gmr__nvtx_mem_heap_unregister(c.nvtx_heap);
  gmr_status st = gmr_deallocate(a->upstream, (void *)c.base, c.bytes, 0, NULL);
  if (st != GMR_OK) {
    /* It stays ours, still free, and is described again. */
    if (a->cfg.nvtx_annotate) {
      a->chunks[index].nvtx_heap = gmr__nvtx_mem_heap_register((void *)c.base, c.bytes, CHUNK_NAME);
    }
    return st;
  }
  gmr__extent_set_remove(&a->free, e);
  free(c.block_at);
  memmove(&a->chunks[index], &a->chunks[index + 1], (a->chunk_count - index - 1) * sizeof c);
  a->chunk_count--;
  a->held_bytes -= c.bytes;
  *released = true;
  return GMR_OK;
}
