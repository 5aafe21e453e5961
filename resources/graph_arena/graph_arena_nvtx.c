/*
 * resources/graph_arena/graph_arena_nvtx.c (internal): the NVTX regions of blocks
 * (nvtx_annotate only; the rules are in gmr/graph_arena_resource.h).
 */
#include "core/nvtx_mem.h"
#include "resources/graph_arena/graph_arena_internal.h"

/* Describe [addr, addr + bytes), inside a chunk, as a block to the tool. */
void gmr__ga_region_add(gmr_graph_arena_resource *a, uintptr_t addr, size_t bytes) {
  gmr__nvtx_mem_region_register(gmr__ga_chunk_of(a, addr)->nvtx_heap, (void *)addr, bytes);
}

/* Entry `e` goes to a reuse list: later blocks of the capture may be carved
 * anywhere in its range, rounding included, while the graph's earlier nodes
 * still touch it, so its region grows to the whole range. */
void gmr__ga_region_widen(gmr_graph_arena_resource *a, gmr__ga_entry *e) {
  if (!e->region) return;
  gmr__nvtx_mem_region_unregister((void *)e->begin);
  gmr__ga_region_add(a, e->begin, e->end - e->begin);
}
