/*
 * tests/support/fake_nccl.h: a test double of NCCL for the simulation: a
 * gmr_nccl_api table (gmr/nccl/nccl.h) whose communicators live on the
 * simulated devices and whose ncclCommRegister / ncclCommDeregister record
 * every call and check what gmr promises NCCL:
 *   - a registered range is device memory the driver knows, inside one
 *     physical allocation (one cuMemGetAddressRange extent: what NCCL before
 *     2.29 can map on its peers), of the communicator's device;
 *   - it is deregistered before its memory goes back to the driver (at
 *     deregistration the range is still mapped to the same physical
 *     allocation; gmr_test_fake_nccl_verify() checks every live one);
 *   - nothing is registered on, deregistered from or asked of a destroyed
 *     communicator, and no communicator is destroyed with registrations.
 * A broken promise is a violation (a sentence, kept until reset); the call
 * also fails as NCCL would (ncclInvalidArgument / ncclInvalidUsage).
 *
 * There is no collective: the table's all_reduce is NULL (the tests of
 * collectives run on GPUs with the real library).
 *
 * Failures can be injected per call kind (gmr_test_fake_nccl_fail).
 * Thread-safe: yes (one mutex). Reset between tests.
 */
#ifndef GMR_TESTS_SUPPORT_FAKE_NCCL_H_
#define GMR_TESTS_SUPPORT_FAKE_NCCL_H_

#include <stddef.h>
#include <stdint.h>

#include "gmr/nccl/nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version the fake reports (NCCL 2.28.3, as on the GPU machines). */
#define GMR_TEST_FAKE_NCCL_VERSION 22803

typedef enum gmr_test_fake_nccl_call {
  GMR_TEST_FAKE_NCCL_REGISTER = 0,
  GMR_TEST_FAKE_NCCL_DEREGISTER,
  GMR_TEST_FAKE_NCCL_INIT,    /* ncclCommInitRank and ncclCommInitAll */
  GMR_TEST_FAKE_NCCL_DESTROY,
  GMR_TEST_FAKE_NCCL_VERSION_CALL,
  GMR_TEST_FAKE_NCCL_CALL_COUNT
} gmr_test_fake_nccl_call;

/* Forget every communicator, registration, count, violation and injected
 * failure; free the fake's memory. */
void gmr_test_fake_nccl_reset(void);

/* The fake's table (static storage); `version` is what ncclGetVersion says. */
const gmr_nccl_api *gmr_test_fake_nccl_api(void);
void gmr_test_fake_nccl_set_version(int version);

/* After `skip_count` more calls of `call` succeed, the next `fail_count`
 * return `result` without doing anything. */
void gmr_test_fake_nccl_fail(gmr_test_fake_nccl_call call, uint64_t skip_count,
                             uint64_t fail_count, gmr_nccl_result result);

typedef struct gmr_test_fake_nccl_counts {
  uint64_t register_count;   /* successful ncclCommRegister calls */
  uint64_t deregister_count; /* successful ncclCommDeregister calls */
  size_t live_registration_count;
  size_t registered_bytes;   /* of the live registrations */
  uint64_t comm_init_count;
  uint64_t comm_destroy_count;
  size_t live_comm_count;
  uint64_t group_count;      /* ncclGroupEnd calls */
  size_t violation_count;
} gmr_test_fake_nccl_counts;

void gmr_test_fake_nccl_get_counts(gmr_test_fake_nccl_counts *out);

/* Forget the violations seen so far (a test that provokes them on purpose). */
void gmr_test_fake_nccl_clear_violations(void);

/* Violation `index` (0 = the first), or NULL past the last. Valid until reset. */
const char *gmr_test_fake_nccl_violation(size_t index);

/* Check that every live registration is still mapped to the physical
 * allocation it had when registered; each one that is not becomes a
 * violation. Returns the number found now. */
size_t gmr_test_fake_nccl_verify(void);

/* Whether [addr, addr + bytes) is exactly one live registration of `comm`. */
int gmr_test_fake_nccl_is_registered(gmr_nccl_comm_handle comm, const void *addr, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_FAKE_NCCL_H_ */
