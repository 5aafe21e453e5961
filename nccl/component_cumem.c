/*
 * nccl/component_cumem.c: `cumem` in specs, gmr_cumem_resource (one
 * physical VMM allocation per allocation, as ncclMemAlloc).
 */
#include <stdio.h>

#include "gmr/nccl/cumem_resource.h"
#include "stack/registry.h"

enum { DEVICE, NCCL_READY, PEER_ACCESS, OPTION_COUNT };

static const gmr__option_def options[OPTION_COUNT] = {
    [DEVICE] = {GMR__FIELD(gmr_cumem_resource_config, device),
                .name = "device",
                .type = GMR__OPTION_DEVICE,
                .help = "device ordinal, or current (the calling thread's device at create)"},
    [NCCL_READY] = {GMR__FIELD(gmr_cumem_resource_config, nccl_ready),
                    .name = "nccl_ready",
                    .type = GMR__OPTION_BOOL,
                    .help = "create memory as ncclMemAlloc does (exportable handles, GPUDirect "
                            "RDMA, recommended granularity)"},
    [PEER_ACCESS] = {.name = "peer_access",
                     .type = GMR__OPTION_STRING,
                     .max_bytes = 64,
                     .help = "devices that may access the memory: none, all, or ordinals joined "
                             "by '+' (1+2)"},
};

static const gmr_cumem_resource_config defaults = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;

/* peer_access, the one option without a field. */
static bool describe_default(size_t option, char *text, size_t text_bytes) {
  if (option != PEER_ACCESS) return false;
  snprintf(text, text_bytes, "%s", defaults.peer_access == GMR_CUMEM_PEERS_ALL ? "all" : "none");
  return true;
}

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  (void)upstream;
  *out = NULL;
  gmr_cumem_resource_config config = defaults;
  gmr__options_apply(options, OPTION_COUNT, values, &config);
  if (values[PEER_ACCESS].given) {
    bool all = false;
    size_t count = 0;
    if (!gmr__parse_peer_list(values[PEER_ACCESS].string, &all, config.peers,
                              GMR_CUMEM_MAX_PEERS, &count)) {
      snprintf(message, message_bytes,
               "cumem option peer_access: expected none, all, or device ordinals joined by '+' "
               "(at most %d), got '%s'",
               GMR_CUMEM_MAX_PEERS, values[PEER_ACCESS].string);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    config.peer_access = all ? GMR_CUMEM_PEERS_ALL
                             : count > 0 ? GMR_CUMEM_PEERS_LIST : GMR_CUMEM_PEERS_NONE;
    config.peer_count = count;
  }
  gmr_cumem_resource *r = NULL;
  gmr_failure failure = GMR_FAILURE_INIT;
  gmr_status st = gmr_cumem_resource_create(&config, &r, &failure);
  if (st != GMR_OK) snprintf(message, message_bytes, "%s", failure.message);
  *out = gmr_cumem_resource_as_resource(r);
  return st;
}

const gmr__component gmr__component_cumem = {
    .name = "cumem",
    .kind = GMR__COMPONENT_RESOURCE,
    .help = "one CUDA virtual memory allocation (cuMemCreate + map) per request, as "
            "ncclMemAlloc; put a pool on top (gmr/nccl/cumem_resource.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .config_default = &defaults,
    .describe_default = describe_default,
};
