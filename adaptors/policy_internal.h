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

/* [A-Za-z_][A-Za-z0-9_]*, 1..GMR_POLICY_NAME_MAX characters. */
bool gmr__policy_name_is_valid(const char *name);

/* Names the registries may hold at once, per kind. */
#define GMR__POLICY_REGISTRY_CAPACITY 64

/* The names of the built-in policies, in a static array of *count names:
 * the one list that specs, their messages and the component listing use. */
const char *const *gmr__oom_policy_builtin_names(size_t *count);
const char *const *gmr__limit_policy_builtin_names(size_t *count);

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
