/*
 * stack/component_cumem.c: `cumem` in specs, gmr_cumem_resource (one
 * physical VMM allocation per allocation, as ncclMemAlloc).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/cumem_resource.h"
#include "stack/registry.h"

enum { DEVICE, NCCL_READY, PEER_ACCESS, OPTION_COUNT };

static const gmr__option_def options[OPTION_COUNT] = {
    [DEVICE] = {"device", GMR__OPTION_DEVICE, "current", false, false, NULL,
                "device ordinal, or current (the calling thread's device at create)", 0},
    [NCCL_READY] = {"nccl_ready", GMR__OPTION_BOOL, "false", false, false, NULL,
                    "create memory as ncclMemAlloc does (exportable handles, GPUDirect RDMA, "
                    "recommended granularity)",
                    0},
    [PEER_ACCESS] = {"peer_access", GMR__OPTION_STRING, "none", false, false, NULL,
                     "devices that may access the memory: none, all, or ordinals joined by '+' "
                     "(1+2)",
                     64},
};

/* "none", "all", or device ordinals separated by '+' (',' and spaces too,
 * inside quotes): the syntax of vmm_pool's option. */
static bool parse_peers(const char *text, gmr_cumem_resource_config *c) {
  if (strcmp(text, "none") == 0) {
    c->peer_access = GMR_CUMEM_PEERS_NONE;
    return true;
  }
  if (strcmp(text, "all") == 0) {
    c->peer_access = GMR_CUMEM_PEERS_ALL;
    return true;
  }
  c->peer_access = GMR_CUMEM_PEERS_LIST;
  c->peer_count = 0;
  for (const char *s = text; *s != '\0';) {
    while (*s == '+' || *s == ',' || *s == ' ') s++;
    if (*s == '\0') break;
    if (!isdigit((unsigned char)*s) || c->peer_count == GMR_CUMEM_MAX_PEERS) return false;
    char *end = NULL;
    long d = strtol(s, &end, 10);
    if (d > 1024 || (*end != '\0' && *end != '+' && *end != ',' && *end != ' ')) return false;
    c->peers[c->peer_count++] = (int)d;
    s = end;
  }
  return c->peer_count > 0;
}

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  (void)upstream;
  *out = NULL;
  gmr_cumem_resource_config config = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;
  config.device = values[DEVICE].device < 0 ? GMR_CUMEM_CURRENT_DEVICE : values[DEVICE].device;
  config.nccl_ready = values[NCCL_READY].boolean;
  if (!parse_peers(values[PEER_ACCESS].string, &config)) {
    snprintf(message, message_bytes,
             "peer_access: expected none, all, or device ordinals joined by '+' (at most %d), "
             "got '%s'",
             GMR_CUMEM_MAX_PEERS, values[PEER_ACCESS].string);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_cumem_resource *r = NULL;
  gmr_failure failure;
  gmr_status st = gmr_cumem_resource_create(&config, &r, &failure);
  if (st != GMR_OK) snprintf(message, message_bytes, "%s", failure.message);
  *out = gmr_cumem_resource_as_resource(r);
  return st;
}

const gmr__component gmr__component_cumem = {
    "cumem", GMR__COMPONENT_RESOURCE,
    "one CUDA virtual memory allocation (cuMemCreate + map) per request, as ncclMemAlloc; put a "
    "pool on top (gmr/cumem_resource.h)",
    options, OPTION_COUNT, create,
};
