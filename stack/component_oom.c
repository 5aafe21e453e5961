/*
 * stack/component_oom.c: `oom` in specs, gmr_oom_adaptor.
 */
#include "gmr/oom_adaptor.h"
#include "stack/registry.h"

enum { POLICY, ATTEMPTS, WAIT_TIMEOUT_MS, OPTION_COUNT };

static const gmr__option_def options[OPTION_COUNT] = {
    [POLICY] = {"policy", GMR__OPTION_OOM_POLICY, NULL, true, false, NULL,
                "fail, retry, trim_retry, wait, a registered name, or plugin:PATH:SYMBOL"},
    [ATTEMPTS] = {"attempts", GMR__OPTION_UINT, NULL, false, false, NULL,
                  "retries the policy may ask for (default 3, at most 64)"},
    [WAIT_TIMEOUT_MS] = {"wait_timeout_ms", GMR__OPTION_UINT, NULL, false, false, NULL,
                         "wait: how long one wait for a free may block (default 1000)"},
};

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  (void)message;
  (void)message_bytes;
  gmr_oom_policy policy = values[POLICY].oom;
  if (values[ATTEMPTS].given) {
    policy.max_attempts = values[ATTEMPTS].uint > GMR_OOM_MAX_ATTEMPTS
                              ? GMR_OOM_MAX_ATTEMPTS
                              : (uint32_t)values[ATTEMPTS].uint;
  }
  if (values[WAIT_TIMEOUT_MS].given) policy.wait_timeout_ns = values[WAIT_TIMEOUT_MS].uint * 1000000u;
  gmr_oom_adaptor *a = NULL;
  gmr_status st = gmr_oom_adaptor_create(upstream, &policy, &a);
  *out = gmr_oom_adaptor_as_resource(a);
  return st;
}

const gmr__component gmr__component_oom = {
    "oom", GMR__COMPONENT_ADAPTOR,
    "gives any stack an OOM policy: retry, trim_retry, wait (gmr/oom_adaptor.h)", options,
    OPTION_COUNT, create,
};
