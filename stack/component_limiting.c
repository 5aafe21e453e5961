/*
 * stack/component_limiting.c: `limiting` in specs, gmr_limiting_adaptor.
 */
#include <stdio.h>

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

static const gmr__option_def options[OPTION_COUNT] = {
    [LIMIT] = {"limit", GMR__OPTION_SIZE, "none", false, true, NULL,
               "most bytes outstanding (charged in 256-byte units); none for no limit"},
    [ON_LIMIT] = {"on_limit", GMR__OPTION_LIMIT_POLICY, "fail", false, false, NULL,
                  "limit policy: fail, ignore, increase, increase_total, a registered "
                  "name, or plugin:PATH:SYMBOL"},
    [PADDING] = {"padding", GMR__OPTION_FACTOR, NULL, false, false, NULL,
                 "increase: the limit grows by padding x the excess over it; "
                 "increase_total: new limit = (used + request) x padding (default 1.25)"},
    [CAP] = {"cap", GMR__OPTION_SIZE, NULL, false, true, NULL,
             "increase: never raise the limit past this (default none)"},
    [ON_OOM] = {"on_oom", GMR__OPTION_OOM_POLICY, "fail", false, false, NULL,
                "OOM policy: fail, retry, trim_retry, wait, a registered name, or "
                "plugin:PATH:SYMBOL"},
    [OOM_ATTEMPTS] = {"oom_attempts", GMR__OPTION_UINT, NULL, false, false, NULL,
                      "retries the OOM policy may ask for (default 3, at most 64)"},
    [WAIT_TIMEOUT_MS] = {"wait_timeout_ms", GMR__OPTION_UINT, NULL, false, false, NULL,
                         "wait: how long one wait for a free may block (default 1000)"},
    [PER_STREAM] = {"per_stream", GMR__OPTION_BOOL, "false", false, false, NULL,
                    "also account and limit each stream"},
    [STREAM_LIMIT] = {"stream_limit", GMR__OPTION_SIZE, "none", false, true, NULL,
                      "per_stream: each stream's limit"},
    [CHARGE_ALIGNMENT] = {"charge_alignment", GMR__OPTION_SIZE, "256", false, false, NULL,
                          "charges are sizes rounded up to this power of two"},
};

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_limiting_adaptor_config config = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  config.limit_bytes = values[LIMIT].size;
  config.on_limit = values[ON_LIMIT].limit;
  if (values[PADDING].given) config.on_limit.padding_factor = values[PADDING].factor;
  if (values[CAP].given) config.on_limit.cap_bytes = values[CAP].unlimited ? 0 : values[CAP].size;
  config.on_oom = values[ON_OOM].oom;
  if (values[OOM_ATTEMPTS].given) {
    config.on_oom.max_attempts = values[OOM_ATTEMPTS].uint > GMR_OOM_MAX_ATTEMPTS
                                     ? GMR_OOM_MAX_ATTEMPTS
                                     : (uint32_t)values[OOM_ATTEMPTS].uint;
  }
  if (values[WAIT_TIMEOUT_MS].given) {
    config.on_oom.wait_timeout_ns = values[WAIT_TIMEOUT_MS].uint * 1000000u;
  }
  config.per_stream = values[PER_STREAM].boolean;
  config.stream_limit_bytes = values[STREAM_LIMIT].size;
  config.charge_alignment = values[CHARGE_ALIGNMENT].size;
  if ((config.charge_alignment & (config.charge_alignment - 1)) != 0 ||
      config.charge_alignment == 0) {
    snprintf(message, message_bytes, "charge_alignment %zu is not a power of two",
             config.charge_alignment);
  }
  gmr_limiting_adaptor *a = NULL;
  gmr_status st = gmr_limiting_adaptor_create(upstream, &config, &a);
  *out = gmr_limiting_adaptor_as_resource(a);
  return st;
}

const gmr__component gmr__component_limiting = {
    "limiting", GMR__COMPONENT_ADAPTOR,
    "refuses (or per policy allows, raises) requests past a limit; optional OOM policy "
    "(gmr/limiting_adaptor.h)",
    options, OPTION_COUNT, create,
};
