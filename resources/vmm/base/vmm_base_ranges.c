/*
 * resources/vmm/base/vmm_base_ranges.c: the reserved ranges' functions of
 * any VMM resource (gmr/vmm_pool_range.h): the arguments checked, the
 * pool's mutex taken, the work done by vmm_ranges.c.
 */
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/base/vmm_base.h"
#include "resources/vmm/base/vmm_ranges.h"
#include "resources/vmm/base/vmm_sleep_run.h"

/* The pool's default tag (gmr_vmm_pool_resource_set_default_tag). */
static uint32_t default_tag(gmr_vmm_pool_resource *p) {
  return atomic_load_explicit(&p->default_tag, memory_order_relaxed);
}

static gmr_status reserve_impl(gmr_vmm_pool_resource *pool, size_t bytes, size_t page_bytes,
                               void **out_base, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out_base != NULL) *out_base = NULL;
  if (pool == NULL) return gmr__vmm_null_pool(failure, "reserve_range");
  if (out_base == NULL || bytes == 0) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "gmr_vmm_pool_resource_reserve_range: %s",
                            out_base == NULL ? "out_base is NULL" : "bytes is 0");
  }
  pthread_mutex_lock(&pool->lock);
  gmr_status st =
      gmr__vmm_ranges_reserve(pool->ranges, bytes, page_bytes, default_tag(pool), out_base,
                              failure);
  pthread_mutex_unlock(&pool->lock);
  return st;
}

gmr_status gmr_vmm_pool_resource_reserve_range(gmr_vmm_pool_resource *pool, size_t bytes,
                                               size_t page_bytes, void **out_base,
                                               gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, reserve_impl(pool, bytes, page_bytes, out_base, f));
}

typedef gmr_status span_fn(gmr__vmm_ranges *g, uintptr_t addr, size_t bytes,
                           gmr_failure *failure);

static gmr_status span_impl(gmr_vmm_pool_resource *pool, const char *verb, span_fn *fn,
                            void *addr, size_t bytes, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (pool == NULL) return gmr__vmm_null_pool(failure, verb);
  pthread_mutex_lock(&pool->lock);
  gmr_status st = fn(pool->ranges, (uintptr_t)addr, bytes, failure);
  pthread_mutex_unlock(&pool->lock);
  return st;
}

gmr_status gmr_vmm_pool_resource_commit(gmr_vmm_pool_resource *pool, void *addr, size_t bytes,
                                        gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f,
                          span_impl(pool, "commit", gmr__vmm_ranges_commit, addr, bytes, f));
}

gmr_status gmr_vmm_pool_resource_decommit(gmr_vmm_pool_resource *pool, void *addr, size_t bytes,
                                          gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f,
                          span_impl(pool, "decommit", gmr__vmm_ranges_decommit, addr, bytes, f));
}

static gmr_status free_impl(gmr_vmm_pool_resource *pool, void *base, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (pool == NULL) return gmr__vmm_null_pool(failure, "free_range");
  pthread_mutex_lock(&pool->lock);
  gmr_status st = gmr__vmm_ranges_free(pool->ranges, (uintptr_t)base, failure);
  pthread_mutex_unlock(&pool->lock);
  return st;
}

gmr_status gmr_vmm_pool_resource_free_range(gmr_vmm_pool_resource *pool, void *base,
                                            gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, free_impl(pool, base, f));
}

/* The version-1 info struct: every field up to saved. */
#define RANGE_INFO_V1_BYTES (offsetof(gmr_vmm_pool_range_info, saved) + sizeof(bool))

gmr_status gmr_vmm_pool_resource_get_range_info(gmr_vmm_pool_resource *pool, const void *addr,
                                                size_t bytes, gmr_vmm_pool_range_info *out) {
  if (pool == NULL || out == NULL || out->size < RANGE_INFO_V1_BYTES || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_vmm_pool_range_info info = GMR_VMM_POOL_RANGE_INFO_INIT;
  pthread_mutex_lock(&pool->lock);
  gmr_status st = gmr__vmm_ranges_info(pool->ranges, (uintptr_t)addr, bytes, &info);
  pthread_mutex_unlock(&pool->lock);
  if (st != GMR_OK) return st;
  size_t n = out->size < sizeof info ? out->size : sizeof info;
  size_t header = offsetof(gmr_vmm_pool_range_info, base);
  memcpy((char *)out + header, (const char *)&info + header, n - header);
  return GMR_OK;
}
