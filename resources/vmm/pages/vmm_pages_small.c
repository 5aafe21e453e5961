/*
 * resources/vmm/pages/vmm_pages_small.c (internal): the small path of
 * vmm_pages (gmr/vmm_pages_resource.h): requests below one page are placed
 * at 256-byte granularity by a placement engine
 * (resources/vmm/placement/vmf.h) whose source is chunks of whole pages of
 * this pool (vmm_pages_chunks.c). Its bad frees, record_stream and
 * capture-safe growth are the engine's.
 */
#include <stdlib.h>

#include "core/failure.h"
#include "resources/vmm/pages/vmm_pages.h"

/* Chunks: at least a page, 12% of what the path holds, at most 16 pages
 * (the chunks are this pool's pages: small steps cost little). */
#define SMALL_GROWTH_PERCENT 12u
#define SMALL_MAX_CHUNK_PAGES 16u

vmf_engine *gmr__vmm_small(vmm_pages *p, bool create) {
  vmf_engine *e = atomic_load_explicit(&p->small, memory_order_acquire);
  if (e != NULL || !create) return e;
  pthread_mutex_lock(&p->pool.lock);
  e = atomic_load_explicit(&p->small, memory_order_acquire);
  if (e == NULL) {
    e = gmr__vmf_new(&p->pool, &gmr__vmm_chunk_source, p);
    if (e != NULL) {
      e->growth_percent = SMALL_GROWTH_PERCENT;
      e->max_growth_bytes = SMALL_MAX_CHUNK_PAGES * p->pool.page_bytes;
      e->remap_permille = GMR_VMM_POOL_REMAP_NEVER;
      atomic_store_explicit(&p->small, e, memory_order_release);
    }
  }
  pthread_mutex_unlock(&p->pool.lock);
  return e;
}

gmr_status gmr__vmm_small_allocate(vmm_pages *p, size_t bytes, size_t alignment,
                                   gmr_stream stream, bool capturing_api, void **out_ptr,
                                   gmr_failure *failure) {
  vmf_engine *e = gmr__vmm_small(p, true);
  if (e == NULL) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "vmm_pool: host memory for the small path ran out");
  }
  return gmr__vmf_allocate(e, bytes, alignment, stream, capturing_api, out_ptr, failure);
}

gmr_status gmr__vmm_small_deallocate(vmm_pages *p, void *ptr, size_t bytes,
                                     size_t alignment, gmr_stream stream) {
  vmf_engine *e = gmr__vmm_small(p, false);
  gmr_status st =
      e == NULL ? GMR_ERR_UNKNOWN_POINTER : gmr__vmf_deallocate(e, ptr, bytes, alignment, stream);
  if (st != GMR_ERR_UNKNOWN_POINTER) return st;
  /* The small path knows no such block: a whole-page allocation freed with
   * a small size is a mismatch; else the page pool says why. */
  pthread_mutex_lock(&p->pool.lock);
  vmm_region *r = gmr__vmm_live_region(p, ptr);
  st = r != NULL && !r->internal ? GMR_ERR_FREE_MISMATCH
       : r != NULL               ? GMR_ERR_UNKNOWN_POINTER /* a chunk is not the caller's */
                                 : gmr__vmm_bad_free(p, ptr);
  pthread_mutex_unlock(&p->pool.lock);
  return st;
}

gmr_status gmr__vmm_small_verdict(vmm_pages *p, const void *ptr) {
  vmf_engine *e = gmr__vmm_small(p, false);
  if (e == NULL) return GMR_ERR_UNKNOWN_POINTER;
  gmr_status st = gmr__vmf_verdict(e, ptr);
  return st == GMR_OK ? GMR_ERR_FREE_MISMATCH : st;
}

gmr_status gmr__vmm_small_record_stream(vmm_pages *p, void *ptr, gmr_stream stream) {
  vmf_engine *e = gmr__vmm_small(p, false);
  if (e == NULL) return GMR_ERR_UNKNOWN_POINTER;
  gmr__vmf_lock(e);
  bool owned = gmr__vmf_owns(e, ptr);
  gmr__vmf_unlock(e);
  return owned ? gmr__vmf_record_stream(e, ptr, stream) : GMR_ERR_UNKNOWN_POINTER;
}

bool gmr__vmm_small_busy(vmm_pages *p) {
  vmf_engine *e = gmr__vmm_small(p, false);
  if (e == NULL) return false;
  gmr__vmf_lock(e);
  bool busy = e->live_count > 0;
  gmr__vmf_unlock(e);
  return busy;
}

gmr_status gmr__vmm_small_destroy(vmm_pages *p) {
  vmf_engine *e = gmr__vmm_small(p, false);
  if (e == NULL) return GMR_OK;
  gmr_status st = gmr__vmf_destroy(e);
  if (st != GMR_OK) return st;
  atomic_store_explicit(&p->small, NULL, memory_order_release);
  gmr__vmf_delete(e);
  return GMR_OK;
}

void gmr__vmm_small_mapped_info(vmm_pages *p, gmr_memory_info *out,
                                size_t *chunk_bytes) {
  out->held_bytes = out->live_bytes = out->free_bytes = 0;
  out->largest_free_block_bytes = out->free_block_count = 0;
  *chunk_bytes = 0;
  vmf_engine *e = gmr__vmm_small(p, false);
  if (e == NULL) return;
  gmr__vmf_lock(e); /* the engine's lock, then the pool's mutex */
  pthread_mutex_lock(&p->pool.lock);
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
  pthread_mutex_unlock(&p->pool.lock);
  gmr__vmf_unlock(e);
}
