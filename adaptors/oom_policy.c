/*
 * adaptors/oom_policy.c: the built-in OOM policies. Registered names are a
 * context's (stack/context.c). See gmr/policy.h.
 */
#include <string.h>

#include "adaptors/policy_internal.h"
#include "gmr/policy.h"

/* ---- built-ins ---------------------------------------------------------- */

static gmr_oom_action retry_decide(const gmr_oom_policy *policy, const gmr_failure *failure,
                                   const gmr_oom_services *services) {
  (void)services;
  if (policy->callback == NULL) return GMR_OOM_ACTION_RETRY;
  return policy->callback(policy->callback_ctx, failure) == GMR_OOM_ACTION_RETRY
             ? GMR_OOM_ACTION_RETRY
             : GMR_OOM_ACTION_FAIL;
}

static gmr_oom_action trim_retry_decide(const gmr_oom_policy *policy, const gmr_failure *failure,
                                        const gmr_oom_services *services) {
  (void)policy;
  (void)failure;
  size_t released = 0;
  gmr_status st = services->trim(services, &released);
  /* Retrying is worth it only if the trim gave memory back. */
  return st == GMR_OK && released > 0 ? GMR_OOM_ACTION_RETRY : GMR_OOM_ACTION_FAIL;
}

static gmr_oom_action wait_decide(const gmr_oom_policy *policy, const gmr_failure *failure,
                                  const gmr_oom_services *services) {
  (void)failure;
  int freed = 0;
  gmr_status st = services->wait_for_free(services, policy->wait_timeout_ns, &freed);
  return st == GMR_OK && freed ? GMR_OOM_ACTION_RETRY : GMR_OOM_ACTION_FAIL;
}

/* The built-in names, the one list of them: specs, messages and the listing
 * read it through gmr__oom_policy_builtin_names(). */
enum { BUILTIN_FAIL, BUILTIN_RETRY, BUILTIN_TRIM_RETRY, BUILTIN_WAIT, BUILTIN_COUNT };
static const char *const builtin_names[BUILTIN_COUNT] = {
    [BUILTIN_FAIL] = "fail",
    [BUILTIN_RETRY] = "retry",
    [BUILTIN_TRIM_RETRY] = "trim_retry",
    [BUILTIN_WAIT] = "wait",
};

const char *const *gmr__oom_policy_builtin_names(size_t *count) {
  *count = BUILTIN_COUNT;
  return builtin_names;
}

static gmr_oom_policy base(const char *name) {
  gmr_oom_policy p;
  memset(&p, 0, sizeof p);
  p.version = GMR_OOM_POLICY_VERSION;
  p.name = name;
  return p;
}

static uint32_t cap_attempts(uint32_t n) { return n > GMR_OOM_MAX_ATTEMPTS ? GMR_OOM_MAX_ATTEMPTS : n; }

static gmr_oom_policy make_fail(void) { return base(builtin_names[BUILTIN_FAIL]); }

static gmr_oom_policy make_retry(gmr_oom_callback_fn *callback, void *callback_ctx,
                                 uint32_t max_attempts) {
  gmr_oom_policy p = base(builtin_names[BUILTIN_RETRY]);
  p.decide = retry_decide;
  p.callback = callback;
  p.callback_ctx = callback_ctx;
  p.max_attempts = cap_attempts(max_attempts);
  return p;
}

static gmr_oom_policy make_trim_retry(uint32_t max_attempts) {
  gmr_oom_policy p = base(builtin_names[BUILTIN_TRIM_RETRY]);
  p.decide = trim_retry_decide;
  p.max_attempts = cap_attempts(max_attempts);
  return p;
}

static gmr_oom_policy make_wait(uint64_t timeout_ns, uint32_t max_attempts) {
  gmr_oom_policy p = base(builtin_names[BUILTIN_WAIT]);
  p.decide = wait_decide;
  p.wait_timeout_ns = timeout_ns;
  p.max_attempts = cap_attempts(max_attempts);
  return p;
}

gmr_status gmr_oom_policy_check(const gmr_oom_policy *policy) {
  if (policy == NULL || policy->version < 1u || policy->name == NULL ||
      strlen(policy->name) > GMR_POLICY_NAME_MAX || policy->max_attempts > GMR_OOM_MAX_ATTEMPTS) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

/* ---- built-ins by name ------------------------------------------------ */

bool gmr__oom_policy_builtin(const char *name, gmr_oom_policy *out) {
  size_t i = 0;
  while (i < BUILTIN_COUNT && strcmp(name, builtin_names[i]) != 0) i++;
  switch (i) {
    case BUILTIN_FAIL:
      *out = make_fail();
      return true;
    case BUILTIN_RETRY:
      *out = make_retry(NULL, NULL, GMR_OOM_DEFAULT_ATTEMPTS);
      return true;
    case BUILTIN_TRIM_RETRY:
      *out = make_trim_retry(GMR_OOM_DEFAULT_ATTEMPTS);
      return true;
    case BUILTIN_WAIT:
      *out = make_wait(GMR_OOM_DEFAULT_WAIT_TIMEOUT_NS, GMR_OOM_DEFAULT_ATTEMPTS);
      return true;
    default:
      return false;
  }
}
