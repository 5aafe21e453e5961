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
#include "stack/value.h"

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
    [LIMIT] = {.name = "limit",
               .type = GMR__OPTION_SIZE,
               .allow_unlimited = true,
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
    [PER_STREAM] = {.name = "per_stream",
                    .type = GMR__OPTION_BOOL,
                    .help = "also account and limit each stream"},
    [STREAM_LIMIT] = {.name = "stream_limit",
                      .type = GMR__OPTION_SIZE,
                      .allow_unlimited = true,
                      .help = "per_stream: each stream's limit"},
    [CHARGE_ALIGNMENT] = {.name = "charge_alignment",
                          .type = GMR__OPTION_SIZE,
                          .min_value = 1,
                          .power_of_two = true,
                          .help = "charges are sizes rounded up to this"},
};

/* The C default, with what the spec gives on top. */
static gmr_limiting_adaptor_config to_config(const gmr__option_value *v) {
  gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  if (v[LIMIT].given) c.limit_bytes = v[LIMIT].unlimited ? GMR_LIMIT_NONE : v[LIMIT].size;
  if (v[ON_LIMIT].given) c.on_limit = v[ON_LIMIT].limit;
  if (v[PADDING].given) c.on_limit.padding_factor = v[PADDING].factor;
  if (v[CAP].given) c.on_limit.cap_bytes = v[CAP].unlimited ? 0 : v[CAP].size;
  if (v[PER_STREAM].given) c.per_stream = v[PER_STREAM].boolean;
  if (v[STREAM_LIMIT].given) {
    c.stream_limit_bytes = v[STREAM_LIMIT].unlimited ? GMR_LIMIT_NONE : v[STREAM_LIMIT].size;
  }
  if (v[CHARGE_ALIGNMENT].given) c.charge_alignment = v[CHARGE_ALIGNMENT].size;
  return c;
}

static void size_or_none(size_t bytes, char *text, size_t text_bytes) {
  if (bytes == GMR_LIMIT_NONE) {
    snprintf(text, text_bytes, "none");
  } else {
    gmr__format_size_value(bytes, text, text_bytes);
  }
}

/* Defaults: the config's, and for the policy options the values the named
 * built-in policies get (gmr/policy.h). */
static bool describe_default(size_t option, char *text, size_t text_bytes) {
  const gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  const gmr_oom_policy on_oom = GMR_OOM_POLICY_FAIL_INIT;
  switch (option) {
    case LIMIT:
      size_or_none(c.limit_bytes, text, text_bytes);
      return true;
    case ON_LIMIT:
      snprintf(text, text_bytes, "%s", c.on_limit.name);
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
    case PER_STREAM:
      return gmr__describe_bool(c.per_stream, text, text_bytes);
    case STREAM_LIMIT:
      size_or_none(c.stream_limit_bytes, text, text_bytes);
      return true;
    case CHARGE_ALIGNMENT:
      gmr__format_size_value(c.charge_alignment, text, text_bytes);
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
    .describe_default = describe_default,
};
