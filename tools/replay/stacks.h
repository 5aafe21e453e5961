/*
 * tools/replay/stacks.h: build the stack of gmr resources a replay runs on,
 * from a name given on the command line.
 *
 * Today a stack is one leaf resource, named:
 *   cuda_device   cuda_resource, kind device  (cudaMalloc / cudaFree)
 *   cuda_async    cuda_resource, kind async   (its own cudaMemPool_t)
 *   cuda_managed  cuda_resource, kind managed (cudaMallocManaged)
 *   host          host_resource               (aligned_alloc, no CUDA)
 * A later version replaces the names with a spec grammar
 * ("tracking(per=stream) > limiting(limit=8GiB) > cuda(kind=async)"); callers
 * only see a spec string in and a top resource out, so they will not change.
 * An unknown name is an error that lists the known ones: nothing falls back to
 * a default stack.
 *
 * Thread-safe: create/destroy no; a stack's top resource is as thread-safe as
 * its resources say.
 */
#ifndef GMR_TOOLS_REPLAY_STACKS_H_
#define GMR_TOOLS_REPLAY_STACKS_H_

#include <stddef.h>

#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct replay_stack replay_stack;

/** Number of known stack names. */
size_t replay_stack_known_count(void);

/** Known stack name `index` (< replay_stack_known_count()), else NULL. Static string. */
const char *replay_stack_known_name(size_t index);

/**
 * Check `spec` without creating anything (no CUDA call), so a command line
 * can be rejected before a long trace is parsed.
 * Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT with `err` (err_bytes, may be
 * NULL/0) set to "unknown stack 'X'; known stacks: ...".
 */
gmr_status replay_stack_check(const char *spec, char *err, size_t err_bytes);

/**
 * Create the stack `spec` names.
 *
 * Ownership: the caller destroys *out with replay_stack_destroy(), which
 *   destroys every resource of the stack.
 * Stream/device: the CUDA stacks are created on the current device of the
 *   CUDA layer active now (real or simulated: select it first).
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  NULL spec/out or an unknown name (err lists the
 *                             known names).
 *   any status of the resource's create function (GMR_ERR_UNSUPPORTED for
 *   cuda_async without memory pools, GMR_ERR_CUDA without a GPU, ...), with
 *   err naming the stack and the status.
 * On failure *out is NULL and nothing needs to be destroyed.
 */
gmr_status replay_stack_create(const char *spec, replay_stack **out, char *err,
                               size_t err_bytes);

/** The resource to allocate from (borrowed; valid until destroy). */
gmr_resource *replay_stack_top(replay_stack *stack);

/** The spec the stack was created from (borrowed). */
const char *replay_stack_name(const replay_stack *stack);

/**
 * Destroy the stack's resources, top first, then the stack. NULL is a no-op.
 * Returns GMR_OK; or the first failing resource's status (GMR_ERR_BUSY while
 * allocations are live), in which case nothing is freed and the stack stays
 * valid: free what is live and call again.
 */
gmr_status replay_stack_destroy(replay_stack *stack);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_STACKS_H_ */
