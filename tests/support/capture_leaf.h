/*
 * tests/support/capture_leaf.h: a leaf resource over the CUDA layer
 * (cudaMalloc / cudaFree, real or simulated) whose vtable has the
 * allocate_capturing slot or not, for tests of resources that grow during a
 * capture through their upstream (gmr_resource_allocate_capturing) without depending
 * on which library resource implements the slot.
 *
 * allocate: a plain cudaMalloc, as a naive upstream makes it (during a
 *   global-mode capture it is refused and invalidates the capture).
 * allocate_capturing (when `can_capture`): the calling thread switched to
 *   relaxed capture mode, cudaMalloc, the mode restored on every path (what
 *   PyTorch's cudaMallocMaybeCapturing does).
 * Type names: "capture_leaf" with the slot, "plain_leaf" without.
 * Alignments above 256 are refused with GMR_ERR_UNSUPPORTED, as cudaMalloc
 * guarantees no more.
 *
 * Thread-safe: yes (atomic counters).
 */
#ifndef GMR_TESTS_SUPPORT_CAPTURE_LEAF_H_
#define GMR_TESTS_SUPPORT_CAPTURE_LEAF_H_

#include <stdbool.h>
#include <stddef.h>

#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_capture_leaf gmr_capture_leaf;

/* NULL if the host allocation failed. Destroy with gmr_resource_destroy
 * (GMR_ERR_BUSY while allocations are live). */
gmr_capture_leaf *gmr_capture_leaf_create(bool can_capture);
/* The same with host memory (aligned_alloc) instead of cudaMalloc: no call
 * that a capture forbids, so threads may allocate from it while another
 * thread captures in global mode; allocate_capturing still switches the
 * thread to relaxed mode and back through the CUDA layer. */
gmr_capture_leaf *gmr_capture_leaf_create_host(bool can_capture);
gmr_resource *gmr_capture_leaf_as_resource(gmr_capture_leaf *leaf);

/* Calls of the allocate / allocate_capturing slots (successful or not). */
unsigned long gmr_capture_leaf_allocate_calls(const gmr_capture_leaf *leaf);
unsigned long gmr_capture_leaf_capturing_calls(const gmr_capture_leaf *leaf);
/* Bytes allocated and not yet freed. */
size_t gmr_capture_leaf_live_bytes(const gmr_capture_leaf *leaf);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_CAPTURE_LEAF_H_ */
