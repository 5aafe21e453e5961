/*
 * stack/component_oom.c: `oom` in specs, gmr_oom_adaptor.
 */
#include <stdio.h>

#include "gmr/oom_adaptor.h"
#include "stack/registry.h"

enum { POLICY, ATTEMPTS, WAIT_TIMEOUT_MS, OPTION_COUNT };

/* The ranges are gmr_oom_policy_check's (gmr/policy.h). */
static const gmr__option_def options[OPTION_COUNT] = {
    [POLICY] = {.name = "policy", .type = GMR__OPTION_OOM_POLICY, .required = true},
    [ATTEMPTS] = {.name = "attempts",
                  .type = GMR__OPTION_UINT,
                  .max_value = GMR_OOM_MAX_ATTEMPTS,
                  .help = "retries the policy may ask for (a registered policy keeps its own "
                          "unless given)"},
    [WAIT_TIMEOUT_MS] = {.name = "wait_timeout_ms",
                         .type = GMR__OPTION_UINT,
                         .max_value = GMR__WAIT_TIMEOUT_MS_MAX,
                         .help = "wait: how long one wait for a free may block"},
};

/* Defaults: what the named built-in policies get (gmr/policy.h). */
static bool describe_default(size_t option, char *text, size_t text_bytes) {
  switch (option) {
    case ATTEMPTS:
      snprintf(text, text_bytes, "%u", GMR_OOM_DEFAULT_ATTEMPTS);
      return true;
    case WAIT_TIMEOUT_MS:
      snprintf(text, text_bytes, "%llu",
               (unsigned long long)(GMR_OOM_DEFAULT_WAIT_TIMEOUT_NS / 1000000u));
      return true;
    default:
      return false;
  }
}

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  (void)message;
  (void)message_bytes;
  gmr_oom_policy policy = values[POLICY].oom; /* required */
  if (values[ATTEMPTS].given) policy.max_attempts = (uint32_t)values[ATTEMPTS].uint;
  if (values[WAIT_TIMEOUT_MS].given) {
    policy.wait_timeout_ns = values[WAIT_TIMEOUT_MS].uint * 1000000u; /* range: no overflow */
  }
  gmr_oom_adaptor *a = NULL;
  gmr_status st = gmr_oom_adaptor_create(upstream, &policy, &a);
  *out = gmr_oom_adaptor_as_resource(a);
  return st;
}

const gmr__component gmr__component_oom = {
    .name = "oom",
    .kind = GMR__COMPONENT_ADAPTOR,
    .help = "gives any stack an OOM policy: retry, trim_retry, wait (gmr/oom_adaptor.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .describe_default = describe_default,
};
