/*
 * gmr/context.h: the registries a stack spec is resolved in, owned by an
 * object instead of the process.
 *
 * A context holds what a spec can name: the components (libgmr's, and those
 * an optional library registered in it: libgmr_nccl's cumem, symmetric and
 * chunk_listener) and the policy names registered in it
 * (gmr_oom_policy_register, gmr_limit_policy_register; the built-in names
 * are in every context). Two parts of one program that each create a
 * context never see each other's names, and a context destroyed forgets
 * them all.
 *
 * The default context is the process's one: every function without a
 * context argument uses it (gmr_stack_create, gmr_stack_check,
 * gmr_stack_create_from_env, gmr_stack_print_components,
 * gmr_*_policy_from_name), a NULL context argument means it, an optional
 * library registers its components in it when it is loaded, and the
 * per-device resources (gmr/device_resource.h) are built in it: they are
 * the one piece of gmr's state that is global on purpose, for code that has
 * no place to keep a pointer. It exists from the first call that uses it
 * until the process ends and cannot be destroyed.
 *
 * Not in a context: which vtables are gmr's own types (behind
 * gmr_resource_downcast). A type is code, the same in every context, and a
 * resource is downcast without one.
 *
 * Stacks built in a context own everything they use (layers, policy copies,
 * plugins), so they outlive it.
 *
 * Thread-safe: yes; each context guards its registries with its own locks.
 */
#ifndef GMR_CONTEXT_H_
#define GMR_CONTEXT_H_

#include "gmr/config.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_context gmr_context;

/**
 * The process's default context (see the banner): never NULL, the same
 * pointer for the whole process.
 * Ownership: the library's; never destroy it (gmr_context_destroy refuses).
 * Thread-safe: yes. Stream/device: no CUDA call. Never fails.
 * Source: gmr's own (RMM's per-device resources are its only global state,
 *   as the device resources are here).
 */
GMR_API gmr_context *gmr_context_default(void);

/**
 * Create a context that knows libgmr's components and the built-in policy
 * names, and nothing registered: an optional library's components come in
 * when that library registers them in it (gmr_nccl_register for
 * libgmr_nccl); policy names with gmr_oom_policy_register(ctx, ...) and
 * gmr_limit_policy_register(ctx, ...). Build stacks in it with
 * gmr_stack_create_in().
 * Ownership: *out is the caller's (gmr_context_destroy).
 * Thread-safe: yes (an independent object). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (out NULL); GMR_ERR_OUT_OF_MEMORY.
 * On failure *out is NULL (when out is not NULL) and nothing needs destroying.
 */
GMR_API GMR_NODISCARD gmr_status gmr_context_create(gmr_context **out);

/**
 * Destroy a context made by gmr_context_create(): its registrations are
 * forgotten (registered policies' contexts stay their registrants'). Stacks
 * built in it are not affected. NULL is a no-op.
 * Thread-safe: no; nothing else may use `ctx` during or after the call.
 * Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT for the default context (nothing
 * changes).
 */
GMR_API GMR_NODISCARD gmr_status gmr_context_destroy(gmr_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CONTEXT_H_ */
