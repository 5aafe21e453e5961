/*
 * adaptors/policy_internal.h (internal): helpers shared by the OOM and limit
 * policy files.
 */
#ifndef GMR_ADAPTORS_POLICY_INTERNAL_H_
#define GMR_ADAPTORS_POLICY_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>

#include "gmr/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The names of the built-in policies, in a static array of *count names:
 * the one list that specs, their messages and the component listing use. */
const char *const *gmr__oom_policy_builtin_names(size_t *count);
const char *const *gmr__limit_policy_builtin_names(size_t *count);

/* The built-in policy `name` with the defaults a spec gets, into *out; false
 * (nothing written) when no built-in has that name. Registered names are a
 * context's (stack/context.c). */
bool gmr__oom_policy_builtin(const char *name, gmr_oom_policy *out);
bool gmr__limit_policy_builtin(const char *name, gmr_limit_policy *out);

/* The built-in decide functions, so checks can recognise them. */
gmr_limit_action gmr__limit_policy_increase_decide(const gmr_limit_policy *policy,
                                                   const gmr_limit_request *request,
                                                   size_t *new_limit_bytes);
gmr_limit_action gmr__limit_policy_increase_total_decide(const gmr_limit_policy *policy,
                                                         const gmr_limit_request *request,
                                                         size_t *new_limit_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_ADAPTORS_POLICY_INTERNAL_H_ */
