/*
 * stack/component_vmm_pool.c: `vmm_pool` in specs, gmr_vmm_pool_resource (a
 * pool over CUDA virtual memory that remaps pages instead of fragmenting).
 */
#include <stdint.h>
#include <stdio.h>

#include "gmr/vmm_pool_resource.h"
#include "stack/registry.h"
#include "stack/value.h"

enum {
  DEVICE,
  PAGE_SIZE,
  VA_CHUNK,
  INITIAL_PAGES,
  SMALL_POOL,
  PEER_ACCESS,
  NCCL_READY,
  OPTION_COUNT
};

/* The ranges are gmr_vmm_pool_resource_create's (gmr/vmm_pool_resource.h). */
static const gmr__option_def options[OPTION_COUNT] = {
    [DEVICE] = {.name = "device",
                .type = GMR__OPTION_DEVICE,
                .help = "device ordinal, or current (the calling thread's device at create)"},
    [PAGE_SIZE] = {.name = "page_size",
                   .type = GMR__OPTION_SIZE,
                   .help = "bytes per physical page, a multiple of the VMM granularity; 0: 2 MiB "
                           "(or the granularity if larger)"},
    [VA_CHUNK] = {.name = "va_chunk",
                  .type = GMR__OPTION_SIZE,
                  .help = "virtual addresses reserved at a time; 0: the device's memory size"},
    [INITIAL_PAGES] = {.name = "initial_pages",
                       .type = GMR__OPTION_UINT,
                       .help = "pages mapped at create as one free region"},
    [SMALL_POOL] = {.name = "small_pool",
                    .type = GMR__OPTION_BOOL,
                    .help = "requests below a page from an internal pool (256-byte rounding) "
                            "instead of a page each"},
    [PEER_ACCESS] = {.name = "peer_access",
                     .type = GMR__OPTION_STRING,
                     .max_bytes = 64,
                     .help = "devices that may access every page: none, all, or ordinals joined "
                             "by '+' (1+2)"},
    [NCCL_READY] = {.name = "nccl_ready",
                    .type = GMR__OPTION_BOOL,
                    .help = "create pages as ncclMemAlloc does (exportable handles, GPUDirect "
                            "RDMA, recommended granularity)"},
};

static bool parse_peers(const char *text, gmr_vmm_pool_resource_config *c) {
  bool all = false;
  size_t count = 0;
  if (!gmr__parse_peer_list(text, &all, c->peers, GMR_VMM_POOL_MAX_PEERS, &count)) return false;
  c->peer_access = all ? GMR_VMM_POOL_PEERS_ALL
                       : count > 0 ? GMR_VMM_POOL_PEERS_LIST : GMR_VMM_POOL_PEERS_NONE;
  c->peer_count = count;
  return true;
}

static bool describe_default(size_t option, char *text, size_t text_bytes) {
  const gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  switch (option) {
    case DEVICE:
      if (c.device == GMR_VMM_POOL_CURRENT_DEVICE) {
        snprintf(text, text_bytes, "current");
      } else {
        snprintf(text, text_bytes, "%d", c.device);
      }
      return true;
    case PAGE_SIZE:
      gmr__format_size_value(c.page_bytes, text, text_bytes);
      return true;
    case VA_CHUNK:
      gmr__format_size_value(c.va_chunk_bytes, text, text_bytes);
      return true;
    case INITIAL_PAGES:
      snprintf(text, text_bytes, "%zu", c.initial_pages);
      return true;
    case SMALL_POOL:
      return gmr__describe_bool(c.small_pool, text, text_bytes);
    case PEER_ACCESS:
      snprintf(text, text_bytes, "%s",
               c.peer_access == GMR_VMM_POOL_PEERS_ALL ? "all" : "none");
      return true;
    case NCCL_READY:
      return gmr__describe_bool(c.nccl_ready, text, text_bytes);
    default:
      return false;
  }
}

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  (void)upstream;
  gmr_vmm_pool_resource_config config = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  const gmr__option_value *v = values;
  if (v[DEVICE].given) {
    config.device = v[DEVICE].device < 0 ? GMR_VMM_POOL_CURRENT_DEVICE : v[DEVICE].device;
  }
  if (v[PAGE_SIZE].given) config.page_bytes = v[PAGE_SIZE].size;
  if (v[VA_CHUNK].given) config.va_chunk_bytes = v[VA_CHUNK].size;
  if (v[INITIAL_PAGES].given) {
    config.initial_pages = v[INITIAL_PAGES].uint > SIZE_MAX ? SIZE_MAX : (size_t)v[INITIAL_PAGES].uint;
  }
  if (v[SMALL_POOL].given) config.small_pool = v[SMALL_POOL].boolean;
  if (v[NCCL_READY].given) config.nccl_ready = v[NCCL_READY].boolean;
  *out = NULL;
  if (v[PEER_ACCESS].given && !parse_peers(v[PEER_ACCESS].string, &config)) {
    snprintf(message, message_bytes,
             "vmm_pool option peer_access: expected none, all, or device ordinals joined by '+' "
             "(at most %d), got '%s'",
             GMR_VMM_POOL_MAX_PEERS, v[PEER_ACCESS].string);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_vmm_pool_resource *p = NULL;
  gmr_failure failure;
  gmr_status st = gmr_vmm_pool_resource_create(&config, &p, &failure);
  if (st != GMR_OK) snprintf(message, message_bytes, "%s", failure.message);
  *out = gmr_vmm_pool_resource_as_resource(p);
  return st;
}

const gmr__component gmr__component_vmm_pool = {
    .name = "vmm_pool",
    .kind = GMR__COMPONENT_RESOURCE,
    .help = "device memory from CUDA virtual memory: pages remapped to new addresses instead of "
            "fragmenting (VPMM), in-place growth, sleep/wake (gmr/vmm_pool_resource.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .describe_default = describe_default,
};
