/*
 * resources/vmm_pool/vmm_pool_small.c: the small path of PAGES placement
 * (gmr/vmm_pool_resource.h): requests below one page are placed at 256-byte
 * granularity by a fine placement engine in chunk mode (vmm_fine.h) whose
 * chunks are whole-page allocations of this pool, marked internal. Its bad
 * frees, record_stream and capture-safe growth are the engine's.
 */
#include <stdlib.h>

#include "core/failure.h"
#include "resources/vmm_pool/vmm_pool_internal.h"

/* Chunks: at least a page, 12% of what the path holds, at most 16 pages
 * (the chunks are this pool's pages: small steps cost little). */
#define SMALL_GROWTH_PERCENT 12u
#define SMALL_MAX_CHUNK_PAGES 16u
/* The alignment the path asks its chunks with (they are pages: any will do,
 * but a free must name the one asked). */
#define CHUNK_ALIGNMENT GMR_DEFAULT_ALIGNMENT

static gmr_status chunk_allocate(void *ctx, size_t bytes, gmr_stream stream, bool capturing,
                                 void **out_ptr, gmr_failure *failure) {
  return gmr__vmm_allocate_pages_locking((gmr_vmm_pool_resource *)ctx, bytes, CHUNK_ALIGNMENT,
                                         stream, capturing, true, out_ptr, failure);
}

static gmr_status chunk_deallocate(void *ctx, void *ptr, size_t bytes, gmr_stream stream) {
  return gmr__vmm_free_pages_locking((gmr_vmm_pool_resource *)ctx, ptr, bytes, CHUNK_ALIGNMENT,
                                     stream, true);
}

vmf_engine *gmr__vmm_small(gmr_vmm_pool_resource *p, bool create) {
  vmf_engine *e = atomic_load_explicit(&p->small, memory_order_acquire);
  if (e != NULL || !create) return e;
  pthread_mutex_lock(&p->lock);
  e = atomic_load_explicit(&p->small, memory_order_acquire);
  if (e == NULL) {
    e = gmr__vmm_engine_new(p);
    if (e != NULL) {
      e->chunked = true;
      e->growth_percent = SMALL_GROWTH_PERCENT;
      e->max_growth_bytes = SMALL_MAX_CHUNK_PAGES * p->page_bytes;
      e->remap_permille = GMR_VMM_POOL_REMAP_NEVER;
      e->source.allocate = chunk_allocate;
      e->source.deallocate = chunk_deallocate;
      e->source.ctx = p;
      if (!gmr__vmf_init(e)) {
        free(e);
        e = NULL;
      } else {
        atomic_store_explicit(&p->small, e, memory_order_release);
      }
    }
  }
  pthread_mutex_unlock(&p->lock);
  return e;
}

gmr_status gmr__vmm_small_allocate(gmr_vmm_pool_resource *p, size_t bytes, size_t alignment,
                                   gmr_stream stream, bool capturing_api, void **out_ptr,
                                   gmr_failure *failure) {
  vmf_engine *e = gmr__vmm_small(p, true);
  if (e == NULL) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: host memory for the small path ran out");
  }
  return gmr__vmf_allocate(e, bytes, alignment, stream, capturing_api, out_ptr, failure);
}

gmr_status gmr__vmm_small_deallocate(gmr_vmm_pool_resource *p, void *ptr, size_t bytes,
                                     size_t alignment, gmr_stream stream) {
  vmf_engine *e = gmr__vmm_small(p, false);
  gmr_status st =
      e == NULL ? GMR_ERR_UNKNOWN_POINTER : gmr__vmf_deallocate(e, ptr, bytes, alignment, stream);
  if (st != GMR_ERR_UNKNOWN_POINTER) return st;
  /* The small path knows no such block: a whole-page allocation freed with
   * a small size is a mismatch; else the page pool says why. */
  pthread_mutex_lock(&p->lock);
  vmm_region *r = gmr__vmm_live_region(p, ptr);
  st = r != NULL && !r->internal ? GMR_ERR_FREE_MISMATCH
       : r != NULL               ? GMR_ERR_UNKNOWN_POINTER /* a chunk is not the caller's */
                                 : gmr__vmm_bad_free(p, ptr);
  pthread_mutex_unlock(&p->lock);
  return st;
}

gmr_status gmr__vmm_small_verdict(gmr_vmm_pool_resource *p, const void *ptr) {
  vmf_engine *e = gmr__vmm_small(p, false);
  if (e == NULL) return GMR_ERR_UNKNOWN_POINTER;
  gmr_status st = gmr__vmf_verdict(e, ptr);
  return st == GMR_OK ? GMR_ERR_FREE_MISMATCH : st;
}

gmr_status gmr__vmm_small_destroy(gmr_vmm_pool_resource *p) {
  vmf_engine *e = gmr__vmm_small(p, false);
  if (e == NULL) return GMR_OK;
  gmr_status st = gmr__vmf_destroy(e);
  if (st != GMR_OK) return st;
  atomic_store_explicit(&p->small, NULL, memory_order_release);
  gmr__vmf_free_host(e);
  free(e);
  return GMR_OK;
}

void gmr__vmm_small_mapped_info(gmr_vmm_pool_resource *p, gmr_memory_info *out,
                                size_t *chunk_bytes) {
  out->held_bytes = out->live_bytes = out->free_bytes = 0;
  out->largest_free_block_bytes = out->free_block_count = 0;
  *chunk_bytes = 0;
  vmf_engine *e = gmr__vmm_small(p, false);
  if (e == NULL) return;
  gmr__vmf_lock(e); /* the engine's lock, then the pool's mutex */
  pthread_mutex_lock(&p->lock);
  for (const vmf_arena *a = e->arenas; a != NULL; a = a->next) {
    const vmm_region *chunk = gmr__vmm_live_region(p, (const void *)a->base);
    if (chunk == NULL || chunk->state != VMM_LIVE) continue; /* asleep: no memory under it */
    *chunk_bytes += chunk->bytes;
    /* A chunk is tiled by its live and free blocks. */
    out->held_bytes += a->bytes;
    out->live_bytes += a->bytes - a->free_bytes;
    out->free_bytes += a->free_bytes;
    for (const vmf_region *r = a->first; r != NULL; r = r->next) {
      if (r->state != VMF_FREE) continue;
      out->free_block_count++;
      /* A block waiting for record_stream events serves nothing now. */
      if (!r->blocked && r->node.bytes > out->largest_free_block_bytes) {
        out->largest_free_block_bytes = r->node.bytes;
      }
    }
  }
  pthread_mutex_unlock(&p->lock);
  gmr__vmf_unlock(e);
}
