/*
 * resources/vmm/fine/vmm_fine_shard.c (internal): making one shard of a
 * `vmm` (vmm_fine.h): a placement engine whose source maps handles into VA
 * chunks of its own, with the pool's growth tuning, its first VA chunk and,
 * for shard 0, initial_pages mapped there.
 */
#include <stdint.h>
#include <stdlib.h>

#include "core/failure.h"
#include "resources/vmm/fine/vmm_fine.h"

/* When the live peak has not grown since memory last moved, a request may
 * hold up to this much more (percent of the live peak) instead of moving
 * memory again, so that a repeating program settles without moves. */
#define FINE_STEADY_PERCENT 1u

/* Map the config's initial_pages at the start of e's first VA chunk. */
static gmr_status prefill(vmm_fine *f, vmf_engine *e, gmr_failure *failure) {
  gmr_vmm_pool_resource *p = &f->pool;
  size_t pages = p->config.initial_pages;
  if (pages > GMR_MAX_ALLOCATION_BYTES / p->page_bytes) {
    return gmr__vmm_initial_pages_fail(p, pages, GMR_ERR_OUT_OF_MEMORY, failure);
  }
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  gmr_status st = gmr__vmf_native_prefill(e, pages * p->page_bytes, failure);
  gmr__cuda_device_leave(p->cuda, saved);
  if (st == GMR_ERR_OUT_OF_MEMORY && failure->cuda_error != 0) {
    st = gmr__vmm_initial_pages_fail(p, pages, st, failure); /* the device is too small */
  }
  return st;
}

gmr_status gmr__vmm_fine_shard_new(vmm_fine *f, bool prefill_pages, vmf_engine **out,
                                   gmr_failure *failure) {
  const gmr_vmm_pool_resource_config *c = &f->pool.config;
  *out = NULL;
  vmf_engine *e = gmr__vmf_new(&f->pool, &gmr__vmm_fine_source, f); /* growth reads the pool */
  if (e == NULL) {
    return gmr__vmm_create_fail(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory");
  }
  e->va_chunk_bytes = f->pool.va_chunk_bytes;
  e->growth_percent = c->growth_percent;
  e->remap_permille = c->remap_permille;
  e->handle_divisor = c->handle_divisor;
  e->steady_percent = FINE_STEADY_PERCENT;
  e->max_growth_bytes = SIZE_MAX;
  e->total = &f->total;
  e->default_tag = f->default_tag;
  gmr_status st = gmr__vmf_native_create(e, failure);
  if (st == GMR_OK && prefill_pages && c->initial_pages > 0) st = prefill(f, e, failure);
  if (st != GMR_OK) {
    (void)gmr__vmf_native_destroy(e);
    gmr__vmf_delete(e);
    return st;
  }
  *out = e;
  return GMR_OK;
}
