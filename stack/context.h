/*
 * stack/context.h (internal): what the spec builder, the listing and the
 * policy lookups read from a context (gmr/context.h).
 *
 * Thread-safe: yes; each call takes the context's lock for its own duration.
 */
#ifndef GMR_STACK_CONTEXT_H_
#define GMR_STACK_CONTEXT_H_

#include <stdbool.h>
#include <stddef.h>

#include "gmr/context.h"
#include "gmr/policy.h"
#include "stack/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `ctx`, or the default context for NULL. */
gmr_context *gmr__context_or_default(gmr_context *ctx);

/* The component named `name` in `ctx`, or NULL. Components are static, so
 * the pointer stays valid after the context is gone. */
const gmr__component *gmr__context_find_component(gmr_context *ctx, const char *name);

/* Up to `max` of the context's components into out[], in name order;
 * returns how many there are in all. */
size_t gmr__context_list_components(gmr_context *ctx, const gmr__component **out, size_t max);

/* Whether the optional library `library` ("libgmr_nccl") registered in `ctx`. */
bool gmr__context_has_library(gmr_context *ctx, const char *library);

/* The refused registrations of optional libraries, as a sentence for an
 * "unknown component" message ("" when none was refused). */
void gmr__context_describe_refusals(gmr_context *ctx, char *text, size_t text_bytes);

/* The policy `name`: a built-in, or one registered in `ctx`, copied into
 * *out (release cleared); false when neither has it (*out unchanged). */
bool gmr__context_find_oom_policy(gmr_context *ctx, const char *name, gmr_oom_policy *out);
bool gmr__context_find_limit_policy(gmr_context *ctx, const char *name, gmr_limit_policy *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STACK_CONTEXT_H_ */
