/*
 * resources/vmm/pages/vmm_pages_chunks.c (internal): where the small path's
 * memory comes from (vmm_pages.h): the placement engine's source
 * (resources/vmm/placement/vmf.h) over chunks of whole pages that this pool
 * allocates for it (marked internal, so sleep, tags and the region list see
 * them). A chunk comes mapped and is one arena, with no page table; nothing
 * merges across chunks. The engine's lock is held here, and the pool's
 * mutex is taken inside (engine lock first, never the reverse).
 */
#include <stdlib.h>

#include "core/failure.h"
#include "resources/vmm/pages/vmm_pages.h"

/* The alignment the path asks its chunks with (they are pages: any will do,
 * but a free must name the one asked). */
#define CHUNK_ALIGNMENT GMR_DEFAULT_ALIGNMENT

/* The source's grow (vmf.h): a new chunk of max(the request, growth_percent
 * of what the path holds) within the engine's least and most growth. */
static gmr_status chunk_grow(vmf_engine *e, size_t bytes, size_t alignment, gmr_stream stream,
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
  gmr_status st = gmr__vmm_allocate_pages_locking(e->source_ctx, chunk, CHUNK_ALIGNMENT, stream,
                                                  capturing, true, &ptr, failure);
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

/* Give back every chunk that is wholly free and shared. */
static gmr_status chunk_trim(vmf_engine *e, size_t *released_bytes, gmr_failure *failure) {
  (void)failure; /* a refused free of a chunk leaves it here: the pool said why */
  gmr_status result = GMR_OK;
  vmf_arena *next = NULL;
  for (vmf_arena *a = e->arenas; a != NULL; a = next) {
    next = a->next;
    vmf_region *r = a->first;
    if (r->next != NULL || r->state != VMF_FREE || r->slot != VMF_SHARED || r->blocked) continue;
    /* Every byte's work is done: any stream orders the page pool's reuse. */
    gmr_status st = gmr__vmm_free_pages_locking(e->source_ctx, (void *)a->base, a->bytes,
                                                CHUNK_ALIGNMENT, NULL, true);
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

/* The source's destroy (vmf.h): every chunk is wholly free and shared by
 * now, so trim gives back all of them. */
static gmr_status chunk_destroy(vmf_engine *e) {
  size_t released = 0;
  gmr_status st = chunk_trim(e, &released, NULL);
  return st == GMR_OK && e->arenas != NULL ? GMR_ERR_INTERNAL : st;
}

const vmf_source gmr__vmm_chunk_source = {
    .grow = chunk_grow,
    .extend = NULL, /* a small block grows over free bytes after it only */
    .trim = chunk_trim,
    .destroy = chunk_destroy,
    .check = NULL,
};
