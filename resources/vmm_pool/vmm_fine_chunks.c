/*
 * resources/vmm_pool/vmm_fine_chunks.c (internal): chunk mode of the fine
 * placement engine (vmm_fine.h): the small-request path of page placement.
 * Requests below a page are placed at 256-byte granularity in chunks of
 * whole pages that the page pool allocates for the engine (marked internal
 * there, so sleep, tags and the region list see them). A chunk is one arena;
 * nothing merges across chunks.
 */
#include <stdlib.h>

#include "core/failure.h"
#include "resources/vmm_pool/vmm_fine.h"

gmr_status gmr__vmf_chunk_grow(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
                               uint32_t slot, bool capturing, vmf_region **out,
                               gmr_failure *failure) {
  *out = NULL;
  size_t need = alignment > VMF_UNIT ? bytes + alignment - VMF_UNIT : bytes;
  size_t grow = (size_t)((double)e->held_bytes * e->growth_percent / 100.0);
  if (grow < e->min_growth_bytes) grow = e->min_growth_bytes;
  if (grow > e->max_growth_bytes) grow = e->max_growth_bytes;
  size_t chunk = gmr__align_up(need > grow ? need : grow, e->page_bytes);
  vmf_arena *a = calloc(1, sizeof *a);
  vmf_region *r = gmr__vmf_region_new(e);
  if (a == NULL || r == NULL) {
    free(a);
    gmr__vmf_region_put(e, r);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: host memory for the bookkeeping ran out");
  }
  void *ptr = NULL;
  gmr_status st = e->source.allocate(e->source.ctx, chunk, stream, capturing, &ptr, failure);
  if (st != GMR_OK) {
    free(a);
    gmr__vmf_region_put(e, r);
    return st;
  }
  gmr__vmf_arena_start(e, a, (uintptr_t)ptr, chunk, r);
  gmr__vmf_set_state(e, r, VMF_FREE); /* a chunk comes mapped: free at once */
  r->slot = slot;                     /* the page pool ordered the chunk on `stream` */
  /* ... possibly by making `stream` wait for other streams' work on these
   * pages: the chunk is the stream's newest free, which no record the
   * stream made before covers (else a third stream could take it while that
   * work still runs). */
  gmr__stream_event_mark_freed(e->cuda, &gmr__vmf_slot(e, slot)->base.ev, true, &e->events);
  e->held_bytes += chunk;
  if (e->held_bytes > e->peak_held_bytes) e->peak_held_bytes = e->held_bytes;
  *out = r;
  return GMR_OK;
}

gmr_status gmr__vmf_chunk_trim(vmf_engine *e, size_t *released_bytes) {
  gmr_status result = GMR_OK;
  vmf_arena *next = NULL;
  for (vmf_arena *a = e->arenas; a != NULL; a = next) {
    next = a->next;
    vmf_region *r = a->first;
    if (r->next != NULL || r->state != VMF_FREE || r->slot != VMF_SHARED || r->blocked) continue;
    /* Every byte's work is done: any stream orders the page pool's reuse. */
    gmr_status st = e->source.deallocate(e->source.ctx, (void *)a->base, a->bytes, NULL);
    if (st != GMR_OK) {
      result = st;
      continue;
    }
    gmr__vmf_bin_remove(e, r);
    gmr__vmf_set_state(e, r, VMF_HOLE);
    e->hole_bytes -= r->node.bytes;
    e->hole_count--;
    gmr__vmf_region_put(e, r);
    gmr__vmf_arena_unlink(e, a);
    e->held_bytes -= a->bytes;
    *released_bytes += a->bytes;
    free(a);
  }
  return result;
}
