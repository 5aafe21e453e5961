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

/* A chunk call, lock held. */
static void count_chunk_call(gmr_graph_arena_resource *a) {
  a->chunk_call_count++;
  if (a->session_count > 0) {
    atomic_fetch_add_explicit(&a->upstream_call_during_capture_count, 1, memory_order_relaxed);
  }
}

/* Publish the address range of the chunks for the lock-free test of the free
 * path ("can this pointer be ours?"). Lock held. */
static void publish_range(gmr_graph_arena_resource *a) {
  uintptr_t begin = UINTPTR_MAX, end = 0;
  if (a->chunk_count > 0) {
    begin = a->chunks[0].base;
    end = a->chunks[a->chunk_count - 1].base + a->chunks[a->chunk_count - 1].bytes;
  }
  atomic_store_explicit(&a->chunks_begin, begin, memory_order_relaxed);
  atomic_store_explicit(&a->chunks_end, end, memory_order_relaxed);
}

/* The NVTX heap name of a chunk, for the tool's reports. */
#define CHUNK_NAME "graph_arena_resource chunk"

/* Take a chunk of `bytes` from the upstream for use on `stream` and add it to
 * the free space. Lock held. The caller reserved room in `free`; this
 * reserves room in `chunks` before calling the upstream. */
gmr_status gmr__ga_add_chunk(gmr_graph_arena_resource *a, size_t bytes, uint8_t origin,
                             gmr__ga_growth growth, gmr_stream stream, gmr_failure *failure) {
  const gmr_resource_vtbl *up = a->upstream->vtbl;
  if (growth == GMR__GA_GROW_CAPTURING && (up->version < 2u || up->allocate_capturing == NULL)) {
    /* What the dispatch would answer, without a call to count. */
    snprintf(failure->message, sizeof failure->message,
             "%s cannot allocate while a stream captures a CUDA graph", up->type_name);
    return GMR_ERR_CAPTURE_UNSAFE;
  }
  size_t granules = (bytes >> GMR__GA_GRANULE_SHIFT) + 1;
  uint32_t *block_at = NULL;
  if (!gmr__ga_ensure((void **)&a->chunks, &a->chunk_capacity, a->chunk_count + 1,
                      sizeof *a->chunks)) {
    snprintf(failure->message, sizeof failure->message, "graph_arena: no host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  /* The array may have moved: no session keeps a pointer into it, also when
   * what follows fails (stack_ops_fuzz found a session writing through its
   * old chunk pointer after a failed block table). */
  gmr__ga_forget_hints(a);
  if ((block_at = calloc(granules, sizeof *block_at)) == NULL) {
    /* The table is 1/64 of the chunk: a chunk this large is no device's. */
    snprintf(failure->message, sizeof failure->message,
             "graph_arena: a chunk of %zu bytes needs a block table of %zu bytes of host memory "
             "(4 bytes per 256-byte granule), which could not be had; ask for less",
             bytes, granules * sizeof *block_at);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  void *p = NULL;
  count_chunk_call(a);
  /* Default alignment: a cuda upstream gives 256 and refuses more; larger
   * request alignments are met inside the chunk. */
  gmr_status st;
  if (growth == GMR__GA_GROW_CAPTURING) {
    if (gmr__ga_find_session(a, stream) != NULL) a->chunk_call_in_session_count++;
    st = gmr_resource_allocate_capturing(a->upstream, bytes, 0, stream, &p, failure);
  } else {
    st = gmr_resource_allocate_ex(a->upstream, bytes, 0, stream, &p, failure);
  }
  if (st != GMR_OK) {
    free(block_at);
    return st;
  }
  if (growth == GMR__GA_GROW_CAPTURING) a->capture_growth_count++;
  uintptr_t base = (uintptr_t)p;
  size_t i = a->chunk_count;
  while (i > 0 && a->chunks[i - 1].base > base) {
    a->chunks[i] = a->chunks[i - 1];
    i--;
  }
  uint64_t order = a->next_chunk_order++;
  void *heap = NULL;
  if (a->cfg.nvtx_annotate) heap = gmr__nvtx_mem_heap_register(p, bytes, CHUNK_NAME);
  a->chunks[i] = (gmr__ga_chunk){base, bytes, order, block_at, origin, heap};
  a->chunk_count++;
  a->held_bytes += bytes;
  if (a->held_bytes > a->peak_held_bytes) a->peak_held_bytes = a->held_bytes;
  gmr__extent_set_add(&a->free, (gmr__extent){base, base + bytes, 0, order});
  publish_range(a);
  return GMR_OK;
}

void gmr__ga_describe_free(const gmr_graph_arena_resource *a, size_t *free_bytes,
                           size_t *largest_bytes, size_t *count) {
  size_t largest = 0;
  for (size_t i = 0; i < a->free.count; ++i) {
    size_t n = a->free.items[i].end - a->free.items[i].begin;
    if (n > largest) largest = n;
  }
  *free_bytes = a->free.total_bytes;
  *largest_bytes = largest;
  *count = a->free.count;
}

void gmr__ga_note_free_info(const gmr_graph_arena_resource *a, gmr_failure *failure) {
  size_t count = 0;
  gmr__ga_describe_free(a, &failure->free_bytes, &failure->largest_free_block_bytes, &count);
  failure->free_info_known = true;
}

/* Give chunk `index` back upstream, deallocated on `stream`, if it is wholly
 * free. Lock held. */
gmr_status gmr__ga_release_chunk(gmr_graph_arena_resource *a, size_t index, gmr_stream stream,
                                 bool *released) {
  gmr__ga_chunk c = a->chunks[index];
  *released = false;
  size_t e =
      gmr__extent_set_find_exact(&a->free, (gmr__extent){c.base, c.base + c.bytes, 0, c.order});
  if (e == SIZE_MAX) return GMR_OK;
  count_chunk_call(a);
  /* The heap goes before the memory: whoever gets the range next may
   * register it. A wholly free chunk has no region to keep. */
  if (a->cfg.nvtx_annotate) gmr__nvtx_mem_heap_unregister(c.nvtx_heap);
  gmr_status st = gmr_resource_deallocate(a->upstream, (void *)c.base, c.bytes, 0, stream);
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
  gmr__ga_forget_hints(a);
  publish_range(a);
  *released = true;
  return GMR_OK;
}
