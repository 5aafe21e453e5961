/*
 * stack/component_nvtx_logging.c: `nvtx_logging` in specs,
 * gmr_nvtx_logging_adaptor (NVTX ranges, marks and a counter around every
 * call of the layers below, for Nsight Systems).
 */
#include <stdio.h>

#include "gmr/events.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "stack/registry.h"

enum { DOMAIN_NAME, ENABLED, OPTION_COUNT };

static const gmr__option_def options[OPTION_COUNT] = {
    [DOMAIN_NAME] = {GMR__FIELD(gmr_nvtx_logging_adaptor_config, domain_name),
                     .name = "domain",
                     .type = GMR__OPTION_STRING,
                     .max_bytes = GMR_NVTX_DOMAIN_NAME_MAX_BYTES,
                     .help = "NVTX domain the ranges and marks go to"},
    [ENABLED] = {GMR__FIELD(gmr_nvtx_logging_adaptor_config, enabled),
                 .name = "enabled",
                 .type = GMR__OPTION_BOOL,
                 .help = "emit from the start (gmr_nvtx_logging_adaptor_set_enabled switches it "
                         "later)"},
};

static const gmr_nvtx_logging_adaptor_config defaults = GMR_NVTX_LOGGING_ADAPTOR_CONFIG_DEFAULT;

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_nvtx_logging_adaptor_config config = defaults;
  gmr__options_apply(options, OPTION_COUNT, values, &config); /* the domain is copied */
  gmr_nvtx_logging_adaptor *a = NULL;
  gmr_status st = gmr_nvtx_logging_adaptor_create(upstream, &config, &a);
  if (st == GMR_ERR_BUSY) {
    snprintf(message, message_bytes,
             "cannot listen to policy events: %d other gmr event listeners are registered",
             GMR_EVENT_MAX_LISTENERS);
  }
  *out = gmr_nvtx_logging_adaptor_as_resource(a);
  return st;
}

const gmr__component gmr__component_nvtx_logging = {
    .name = "nvtx_logging",
    .kind = GMR__COMPONENT_ADAPTOR,
    .help = "NVTX ranges around every allocate and free of the layers below, marks for failures "
            "and policy actions, a bytes-in-use counter, for nsys profile --trace=cuda,nvtx "
            "(gmr/nvtx_logging_adaptor.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .config_default = &defaults,
};
