/*
 * tests/resource_check_probe.h: breaks (and mends) the books of a pool or a
 * vmm pool on purpose, so a test can see gmr_resource_check() notice. Behind
 * plain functions: the pools' internal headers are C11 (atomics).
 */
#ifndef GMR_TESTS_RESOURCE_CHECK_PROBE_H_
#define GMR_TESTS_RESOURCE_CHECK_PROBE_H_

#include "gmr/pool_resource.h"
#include "gmr/vmm_pool_resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Add `delta` to the bytes the pool says it holds (its arenas do not). */
void resource_check_probe_skew_pool(gmr_pool_resource *pool, long delta);

/* Add `delta` to the VA chunk count of a vmm_pages. */
void resource_check_probe_skew_vmm_pool(gmr_vmm_pool_resource *pool, long delta);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_RESOURCE_CHECK_PROBE_H_ */
