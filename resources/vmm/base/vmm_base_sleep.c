/*
 * resources/vmm/base/vmm_base_sleep.c: the tags, sleep and wake of any VMM
 * resource (gmr/vmm_pool_sleep.h): the arguments checked, the pool's mutex
 * and its sleeping flag kept here, the work done by the resource's
 * operations (vmm_base.h; the sequence itself: vmm_sleep_run.h).
 */
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/base/vmm_base.h"
#include "resources/vmm/base/vmm_ranges.h"
#include "resources/vmm/base/vmm_sleep_run.h"

gmr_status gmr_vmm_pool_resource_set_default_tag(gmr_vmm_pool_resource *pool, uint32_t tag) {
  if (pool == NULL || tag > GMR_VMM_POOL_MAX_TAG) return GMR_ERR_INVALID_ARGUMENT;
  atomic_store_explicit(&pool->default_tag, tag, memory_order_relaxed);
  pool->ops->set_default_tag(pool, tag);
  return GMR_OK;
}

gmr_status gmr_vmm_pool_resource_set_tag(gmr_vmm_pool_resource *pool, void *ptr, uint32_t tag) {
  if (pool == NULL || tag > GMR_VMM_POOL_MAX_TAG) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&pool->lock);
  bool range = gmr__vmm_ranges_set_tag(pool->ranges, (uintptr_t)ptr, tag);
  pthread_mutex_unlock(&pool->lock);
  return range ? GMR_OK : pool->ops->set_tag(pool, ptr, tag);
}

static gmr_status vmm_pool_resource_sleep_impl(gmr_vmm_pool_resource *p,
                                               const gmr_vmm_pool_sleep_options *options,
                                               gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (p == NULL) return gmr__vmm_null_pool(failure, "sleep");
  gmr_vmm_pool_sleep_options o;
  gmr_status st = gmr__vmm_sleep_options_read(options, &o, failure);
  if (st != GMR_OK) return st;
  pthread_mutex_lock(&p->lock);
  if (gmr__vmm_asleep(p)) {
    gmr_vmm_pool_tag_stats s = GMR_VMM_POOL_TAG_STATS_INIT;
    p->ops->tag_stats(p, UINT64_MAX, &s);
    gmr__vmm_ranges_tag_stats(p->ranges, UINT64_MAX, &s);
    pthread_mutex_unlock(&p->lock);
    return gmr__vmm_sleep_busy(failure, s.asleep_count, s.asleep_bytes, s.saved_bytes);
  }
  bool asleep = false;
  st = p->ops->sleep(p, &o, failure, &asleep);
  /* Also after a refused release: the allocations sleep, the memory is kept. */
  if (asleep) atomic_store_explicit(&p->sleeping, true, memory_order_relaxed);
  pthread_mutex_unlock(&p->lock);
  return st;
}

gmr_status gmr_vmm_pool_resource_sleep(gmr_vmm_pool_resource *pool,
                                       const gmr_vmm_pool_sleep_options *options,
                                       gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, vmm_pool_resource_sleep_impl(pool, options, f));
}

static gmr_status vmm_pool_resource_wake_impl(gmr_vmm_pool_resource *p,
                                              const gmr_vmm_pool_wake_options *options,
                                              gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (p == NULL) return gmr__vmm_null_pool(failure, "wake");
  gmr_vmm_pool_wake_options o;
  gmr_status st = gmr__vmm_wake_options_read(options, &o, failure);
  if (st != GMR_OK) return st;
  pthread_mutex_lock(&p->lock);
  if (!gmr__vmm_asleep(p)) {
    pthread_mutex_unlock(&p->lock);
    return gmr__vmm_wake_not_asleep(failure);
  }
  bool still_asleep = true, woken = false;
  st = p->ops->wake(p, &o, failure, &woken, &still_asleep);
  /* Also after a refused cudaFreeHost: woken, the copy kept. Ranges of
   * tags not woken sleep on. */
  if (woken && !still_asleep && !gmr__vmm_ranges_asleep(p->ranges)) {
    atomic_store_explicit(&p->sleeping, false, memory_order_relaxed);
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

gmr_status gmr_vmm_pool_resource_wake(gmr_vmm_pool_resource *pool,
                                      const gmr_vmm_pool_wake_options *options,
                                      gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, vmm_pool_resource_wake_impl(pool, options, f));
}

bool gmr_vmm_pool_resource_is_asleep(gmr_vmm_pool_resource *pool) {
  return pool != NULL && gmr__vmm_asleep(pool);
}

/* The version-1 tag stats struct: every field up to saved_pinned. */
#define TAG_STATS_V1_BYTES (offsetof(gmr_vmm_pool_tag_stats, saved_pinned) + sizeof(bool))

gmr_status gmr_vmm_pool_resource_get_tag_stats(gmr_vmm_pool_resource *pool, uint64_t tag_mask,
                                               gmr_vmm_pool_tag_stats *out) {
  if (pool == NULL || out == NULL || out->size < TAG_STATS_V1_BYTES || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_vmm_pool_tag_stats s = GMR_VMM_POOL_TAG_STATS_INIT;
  pthread_mutex_lock(&pool->lock);
  pool->ops->tag_stats(pool, tag_mask, &s);
  gmr__vmm_ranges_tag_stats(pool->ranges, tag_mask, &s);
  pthread_mutex_unlock(&pool->lock);
  size_t n = out->size < sizeof s ? out->size : sizeof s;
  size_t header = offsetof(gmr_vmm_pool_tag_stats, live_bytes);
  memcpy((char *)out + header, (const char *)&s + header, n - header);
  return GMR_OK;
}
