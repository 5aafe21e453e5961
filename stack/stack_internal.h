/*
 * stack/stack_internal.h (internal): the body of gmr_stack, shared by the
 * owning chain (stack.c) and the spec builder (build.c).
 */
#ifndef GMR_STACK_STACK_INTERNAL_H_
#define GMR_STACK_STACK_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>

#include "gmr/policy.h"
#include "gmr/resource.h"
#include "gmr/stack.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gmr_stack {
  gmr_resource **layers; /* bottom first */
  size_t count;
  size_t capacity;
  gmr_policy_plugin **plugins;
  size_t plugin_count;
  char *spec; /* NULL for a stack built by hand */
};

/* Put `layer` on top without checks. Returns GMR_OK or GMR_ERR_OUT_OF_MEMORY
 * (the stack unchanged). */
gmr_status gmr__stack_append(gmr_stack *stack, gmr_resource *layer);

/* gmr_stack_create_from_env(), also saying in *from_env (may be NULL) whether
 * the spec came from GMR_STACK: the per-device registry falls back only
 * from its own default, never from a spec the user set. */
gmr_status gmr__stack_create_from_env(const char *fallback_spec, gmr_stack **out,
                                      gmr_spec_error *error, bool *from_env);

/* Unload plugins, last loaded first. */
void gmr__stack_unload_plugins(gmr_policy_plugin **plugins, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STACK_STACK_INTERNAL_H_ */
