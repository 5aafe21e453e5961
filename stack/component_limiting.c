/*
 * stack/component_limiting.c: `limiting` in specs, gmr_limiting_adaptor.
 * `on_oom=P, oom_attempts=N, wait_timeout_ms=T` is shorthand for
 * `oom(policy=P, attempts=N, wait_timeout_ms=T) > limiting(...)`: with a
 * policy other than fail, create builds both layers (adaptors/oom_internal.h)
 * and returns the OOM layer, and the builder puts both on the stack.
 */
#include <stdio.h>

#include "adaptors/oom_internal.h"
#include "gmr/limiting_adaptor.h"
#include "stack/registry.h"

enum {
  LIMIT,
  ON_LIMIT,
  PADDING,
  CAP,
  ON_OOM,
  OOM_ATTEMPTS,
  WAIT_TIMEOUT_MS,
  PER_STREAM,
  STREAM_LIMIT,
  CHARGE_ALIGNMENT,
  OPTION_COUNT
};

/* The ranges are the policies' (gmr/policy.h: gmr_limit_policy_check and
 * gmr_oom_policy_check) and the adaptor's (gmr/limiting_adaptor.h). */
static const gmr__option_def options[OPTION_COUNT] = {
    [LIMIT] = {GMR__FIELD(gmr_limiting_adaptor_config, limit_bytes),
               .name = "limit",
               .type = GMR__OPTION_SIZE,
               .allow_unlimited = true,
               .unlimited_field = GMR_LIMIT_NONE,
               .unlimited_name = "none",
               .help = "most bytes outstanding (charged in charge_alignment units); none for no "
                       "limit"},
    [ON_LIMIT] = {.name = "on_limit", .type = GMR__OPTION_LIMIT_POLICY, .help = "limit policy"},
    [PADDING] = {.name = "padding",
                 .type = GMR__OPTION_FACTOR,
                 .min_factor = 1.0,
                 .below_factor = 1e6,
                 .help = "increase: the limit grows by padding x the excess over it; "
                         "increase_total: new limit = (used + request) x padding"},
    /* 0 would mean "no cap" to the policy: the spec says none for that. */
    [CAP] = {.name = "cap",
             .type = GMR__OPTION_SIZE,
             .allow_unlimited = true,
             .min_value = 1,
             .help = "increase: never raise the limit past this; none for no cap"},
    [ON_OOM] = {.name = "on_oom",
                .type = GMR__OPTION_OOM_POLICY,
                .help = "OOM policy for failures below the limit: an oom layer above this one"},
    [OOM_ATTEMPTS] = {.name = "oom_attempts",
                      .type = GMR__OPTION_UINT,
                      .max_value = GMR_OOM_MAX_ATTEMPTS,
                      .help = "retries the OOM policy may ask for (a registered policy keeps its "
                              "own unless given)"},
    [WAIT_TIMEOUT_MS] = {.name = "wait_timeout_ms",
                         .type = GMR__OPTION_UINT,
                         .max_value = GMR__WAIT_TIMEOUT_MS_MAX,
                         .help = "wait: how long one wait for a free may block"},
    [PER_STREAM] = {GMR__FIELD(gmr_limiting_adaptor_config, per_stream),
                    .name = "per_stream",
                    .type = GMR__OPTION_BOOL,
                    .help = "also account and limit each stream"},
    [STREAM_LIMIT] = {GMR__FIELD(gmr_limiting_adaptor_config, stream_limit_bytes),
                      .name = "stream_limit",
                      .type = GMR__OPTION_SIZE,
                      .allow_unlimited = true,
                      .unlimited_field = GMR_LIMIT_NONE,
                      .unlimited_name = "none",
                      .help = "per_stream: each stream's limit"},
    [CHARGE_ALIGNMENT] = {GMR__FIELD(gmr_limiting_adaptor_config, charge_alignment),
                          .name = "charge_alignment",
                          .type = GMR__OPTION_SIZE,
                          .min_value = 1,
                          .power_of_two = true,
                          .help = "charges are sizes rounded up to this"},
};

static const gmr_limiting_adaptor_config defaults = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;

/* The C default, with what the spec gives on top: the policy first, then
 * the fields of it that padding and cap set. */
static gmr_limiting_adaptor_config to_config(const gmr__option_value *v) {
  gmr_limiting_adaptor_config c = defaults;
  gmr__options_apply(options, OPTION_COUNT, v, &c);
  if (v[ON_LIMIT].given) c.on_limit = v[ON_LIMIT].limit;
  if (v[PADDING].given) c.on_limit.padding_factor = v[PADDING].factor;
  if (v[CAP].given) c.on_limit.cap_bytes = v[CAP].unlimited ? 0 : v[CAP].size;
  return c;
}

/* Defaults of the policy options: the values the named built-in policies
 * get (gmr/policy.h). */
static bool describe_default(size_t option, char *text, size_t text_bytes) {
  const gmr_oom_policy on_oom = GMR_OOM_POLICY_FAIL_INIT;
  switch (option) {
    case ON_LIMIT:
      snprintf(text, text_bytes, "%s", defaults.on_limit.name);
      return true;
    case PADDING:
      snprintf(text, text_bytes, "%g", GMR_LIMIT_DEFAULT_PADDING_FACTOR);
      return true;
    case CAP:
      snprintf(text, text_bytes, "none"); /* gmr_limit_policy_from_name("increase") has no cap */
      return true;
    case ON_OOM:
      snprintf(text, text_bytes, "%s", on_oom.name);
      return true;
    case OOM_ATTEMPTS:
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

static gmr_status create(const gmr__option_value *v, gmr_resource *upstream, gmr_resource **out,
                         char *message, size_t message_bytes) {
  (void)message;
  (void)message_bytes;
  gmr_limiting_adaptor_config config = to_config(v);
  gmr_oom_policy on_oom = GMR_OOM_POLICY_FAIL_INIT; /* the oom layer's, as component_oom.c */
  if (v[ON_OOM].given) on_oom = v[ON_OOM].oom;
  if (v[OOM_ATTEMPTS].given) on_oom.max_attempts = (uint32_t)v[OOM_ATTEMPTS].uint;
  if (v[WAIT_TIMEOUT_MS].given) on_oom.wait_timeout_ns = v[WAIT_TIMEOUT_MS].uint * 1000000u;
  gmr_limiting_adaptor *a = NULL;
  return gmr__limiting_with_oom_create(upstream, &config, &on_oom, &a, out);
}

const gmr__component gmr__component_limiting = {
    .name = "limiting",
    .kind = GMR__COMPONENT_ADAPTOR,
    .help = "refuses (or per policy allows, raises) requests past a limit; on_oom=P puts "
            "oom(policy=P) above it (gmr/limiting_adaptor.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .config_default = &defaults,
    .describe_default = describe_default,
};
