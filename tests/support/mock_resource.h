/*
 * tests/support/mock_resource.h: a resource written in plain C for tests.
 *
 * Without an upstream it is a leaf backed by host memory; with one it is an
 * adaptor that forwards. It counts every call (called_*: the slot ran,
 * did_*: it succeeded) and fails on demand (try_*: SQLite faultsim's
 * nDelay/nRepeat): after `fail_skip` more allocations succeed, the next
 * `fail_count` fail with `fail_status` (and `fail_cuda_error` in the record).
 *
 * Thread-safe: yes (atomics for counters; the failure plan is set before use).
 */
#ifndef GMR_TESTS_SUPPORT_MOCK_RESOURCE_H_
#define GMR_TESTS_SUPPORT_MOCK_RESOURCE_H_

#include <stddef.h>

#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_mock_resource gmr_mock_resource;

/* upstream may be NULL (leaf). Returns NULL if the host allocation failed. */
gmr_mock_resource *gmr_mock_resource_create(gmr_resource *upstream);
gmr_resource *gmr_mock_resource_as_resource(gmr_mock_resource *m);

/* Plan failures: skip `skip` allocations, then fail `count` with `status`. */
void gmr_mock_resource_try_fail(gmr_mock_resource *m, unsigned long skip, unsigned long count,
                                gmr_status status, int cuda_error);

unsigned long gmr_mock_resource_called_allocate(const gmr_mock_resource *m);
unsigned long gmr_mock_resource_did_allocate(const gmr_mock_resource *m);
unsigned long gmr_mock_resource_called_deallocate(const gmr_mock_resource *m);
unsigned long gmr_mock_resource_called_trim(const gmr_mock_resource *m);
size_t gmr_mock_resource_live_bytes(const gmr_mock_resource *m);

/* Bytes the next trim reports as released (default 0). */
void gmr_mock_resource_set_trim_release(gmr_mock_resource *m, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_MOCK_RESOURCE_H_ */
