/*
 * tests/resource_check_probe.c: see resource_check_probe.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "tests/resource_check_probe.h"

#include "resources/pool/pool_internal.h"
#include "resources/vmm/pages/vmm_pages.h"

void resource_check_probe_skew_pool(gmr_pool_resource *pool, long delta) {
  atomic_fetch_add(&pool->held_bytes, (size_t)delta);
}

void resource_check_probe_skew_vmm_pool(gmr_vmm_pool_resource *pool, long delta) {
  vmm_pages *p = gmr__vmm_pages_of(pool);
  pthread_mutex_lock(&pool->lock);
  p->root_count += (size_t)delta;
  pthread_mutex_unlock(&pool->lock);
}
