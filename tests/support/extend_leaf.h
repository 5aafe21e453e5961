/*
 * tests/support/extend_leaf.h: a leaf resource whose last allocation can
 * grow in place (the version-3 extend slot of gmr/resource.h, as vmm_pages
 * has it), for tests of the layers that use or forward extend.
 *
 * It is a bump arena over one host buffer: allocations are carved in order,
 * rounded to 256 bytes; freeing the topmost one gives its bytes back to the
 * bump. extend grows an allocation when nothing was carved after it and the
 * buffer has room (else GMR_ERR_UNSUPPORTED, or GMR_ERR_OUT_OF_MEMORY when
 * the buffer is full), or fails with a status the test planned. It keeps
 * books of its live allocations (pointer -> size rounded to 256), so bad
 * frees and bad extends are named (GMR_ERR_UNKNOWN_POINTER,
 * GMR_ERR_FREE_MISMATCH).
 *
 * Thread-safe: yes (one mutex); destroy only when nothing is live (else
 * GMR_ERR_BUSY).
 */
#ifndef GMR_TESTS_SUPPORT_EXTEND_LEAF_H_
#define GMR_TESTS_SUPPORT_EXTEND_LEAF_H_

#include <stddef.h>
#include <stdint.h>

#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_extend_leaf gmr_extend_leaf;

/* A leaf over `capacity_bytes` of host memory, at most `max_live_count`
 * live allocations. NULL when the host allocation failed. Destroy it with
 * gmr_resource_destroy(). */
gmr_extend_leaf *gmr_extend_leaf_create(size_t capacity_bytes, size_t max_live_count);
gmr_resource *gmr_extend_leaf_as_resource(gmr_extend_leaf *leaf);

/* Make every extend fail with `status` (GMR_OK: grow when possible again). */
void gmr_extend_leaf_refuse_extend(gmr_extend_leaf *leaf, gmr_status status);

/* Where the buffer starts. */
uintptr_t gmr_extend_leaf_base(const gmr_extend_leaf *leaf);

/* Allocations and successful extends made so far. */
unsigned long gmr_extend_leaf_allocate_count(const gmr_extend_leaf *leaf);
unsigned long gmr_extend_leaf_extend_count(const gmr_extend_leaf *leaf);

/* Live allocations now; the rounded size recorded for `ptr` (0: not live). */
size_t gmr_extend_leaf_live_count(const gmr_extend_leaf *leaf);
size_t gmr_extend_leaf_size_of(const gmr_extend_leaf *leaf, const void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_EXTEND_LEAF_H_ */
