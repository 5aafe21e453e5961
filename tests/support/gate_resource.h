/*
 * tests/support/gate_resource.h: an adaptor for tests that forwards to its
 * upstream but refuses the next N deallocations with a chosen status (as a
 * cuda_resource refuses a free during graph capture, or a tracking adaptor a
 * bad free), releasing nothing. The mock resource cannot refuse a free.
 *
 * Thread-safe: yes (atomics).
 */
#ifndef GMR_TESTS_SUPPORT_GATE_RESOURCE_H_
#define GMR_TESTS_SUPPORT_GATE_RESOURCE_H_

#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_gate_resource gmr_gate_resource;

/* Returns NULL if the host allocation failed. */
gmr_gate_resource *gmr_gate_resource_create(gmr_resource *upstream);
gmr_resource *gmr_gate_resource_as_resource(gmr_gate_resource *g);

/* Refuse the next `count` deallocations with `status`. */
void gmr_gate_resource_refuse_frees(gmr_gate_resource *g, unsigned long count, gmr_status status);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_GATE_RESOURCE_H_ */
