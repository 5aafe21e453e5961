/*
 * tools/replay/stacks.h: build the stack of gmr resources a replay runs on,
 * from a spec given on the command line.
 *
 * A stack is any spec of gmr/stack.h, e.g.
 *   "tracking(per=stream) > limiting(limit=8GiB, on_limit=increase) > cuda(kind=async)",
 * or one of the aliases kept from the first version of the tool:
 *   cuda_device   = cuda(kind=device)   (cudaMalloc / cudaFree)
 *   cuda_async    = cuda(kind=async)    (its own cudaMemPool_t)
 *   cuda_managed  = cuda(kind=managed)  (cudaMallocManaged)
 *   host          = host                (aligned_alloc, no CUDA)
 * A spec that does not parse is an error that says where and why, and lists
 * the aliases: nothing falls back to a default stack.
 *
 * Thread-safe: create/destroy no; a stack's top resource is as thread-safe as
 * its resources say.
 */
#ifndef GMR_TOOLS_REPLAY_STACKS_H_
#define GMR_TOOLS_REPLAY_STACKS_H_

#include <stddef.h>

#include "gmr/resource.h"
#include "gmr/stack.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct replay_stack replay_stack;

/** Number of aliases. */
size_t replay_stack_known_count(void);

/** Alias `index` (< replay_stack_known_count()), else NULL. Static string. */
const char *replay_stack_known_name(size_t index);

/** The spec alias `index` stands for, else NULL. Static string. */
const char *replay_stack_known_spec(size_t index);

/**
 * Check `spec` (an alias or a spec) without creating anything and without a
 * CUDA call (gmr_stack_check), so a command line can be rejected before a
 * long trace is parsed.
 * Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT with `err` (err_bytes, may be
 * NULL/0) set to "stack 'X': spec:1:1: unknown component 'X' (...); aliases:
 * cuda_device, cuda_async, cuda_managed, host".
 */
gmr_status replay_stack_check(const char *spec, char *err, size_t err_bytes);

/**
 * Create the stack `spec` (an alias or a spec) describes.
 *
 * Ownership: the caller destroys *out with replay_stack_destroy(), which
 *   destroys every resource of the stack.
 * Stream/device: the CUDA stacks are created on the current device of the
 *   CUDA layer active now (real or simulated: select it first).
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  NULL spec/out or a malformed spec (err as for
 *                             replay_stack_check).
 *   any status of a layer's create function (GMR_ERR_UNSUPPORTED for
 *   cuda_async without memory pools, GMR_ERR_CUDA without a GPU, ...), with
 *   err naming the stack, the layer and the status.
 * On failure *out is NULL and nothing needs to be destroyed.
 */
gmr_status replay_stack_create(const char *spec, replay_stack **out, char *err,
                               size_t err_bytes);

/** The resource to allocate from (borrowed; valid until destroy). */
gmr_resource *replay_stack_top(replay_stack *stack);

/** The alias or spec the stack was created from, as given (borrowed). */
const char *replay_stack_name(const replay_stack *stack);

/** The gmr_stack behind it (borrowed), to reach its layers. */
gmr_stack *replay_stack_get(replay_stack *stack);

/**
 * One line about what the stack's adaptors did, for the report: for each
 * limiting adaptor its limit, peak, refusals, raises and overages; for each
 * OOM policy its retries, trims and waits; for each tracking adaptor its peak
 * and bad frees. Empty when the stack has none of them.
 * Writes at most out_bytes (NUL included) into `out`. Thread-safe: as reading
 * the adaptors' stats.
 */
void replay_stack_describe(replay_stack *stack, char *out, size_t out_bytes);

/**
 * Destroy the stack's resources, top first, then the stack. NULL is a no-op.
 * Returns GMR_OK; or the first failing resource's status (GMR_ERR_BUSY while
 * allocations are live): the layers above the refusing one are gone, the
 * rest stays valid (gmr_stack_destroy): free what is live and call again.
 */
gmr_status replay_stack_destroy(replay_stack *stack);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_STACKS_H_ */
