/*
 * stack/component_vmm_pool.c: `vmm_pool` and `vmm` in specs, both
 * gmr_vmm_pool_resource (a pool over CUDA virtual memory that moves physical
 * memory instead of fragmenting). They differ only in the default placement:
 * `vmm_pool` places whole pages (VPMM), `vmm` at 256-byte granularity (fine),
 * the recommended VMM allocator (README, "vmm or pool").
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  PLACEMENT,
  GROWTH_PERCENT,
  REMAP_PERMILLE,
  HANDLE_DIVISOR,
  STREAMS_OUTLIVE,
  SHARDS,
  OPTION_COUNT
};

/* In gmr_vmm_pool_placement order. */
static const char *const placements[] = {"pages", "fine", NULL};

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
                       .help = "pages mapped at create as one free region; at most what "
                               "the device's free memory holds"},
    [SMALL_POOL] = {.name = "small_pool",
                    .type = GMR__OPTION_BOOL,
                    .help = "pages: requests below a page from the small path (256-byte "
                            "rounding) instead of a page each"},
    [PEER_ACCESS] = {.name = "peer_access",
                     .type = GMR__OPTION_STRING,
                     .max_bytes = 64,
                     .help = "devices that may access every page: none, all, or ordinals joined "
                             "by '+' (1+2)"},
    [NCCL_READY] = {.name = "nccl_ready",
                    .type = GMR__OPTION_BOOL,
                    .help = "create pages as ncclMemAlloc does (exportable handles, GPUDirect "
                            "RDMA, recommended granularity)"},
    [PLACEMENT] = {.name = "placement",
                   .type = GMR__OPTION_CHOICE,
                   .choices = placements,
                   .help = "pages: every request whole pages, VPMM's defragmentation (small "
                           "requests from the small path); fine: 256-byte placement over shared "
                           "pages"},
    [GROWTH_PERCENT] = {.name = "growth_percent",
                        .type = GMR__OPTION_UINT,
                        .max_value = 1000,
                        .help = "fine: a growth maps this percentage of what is held at once "
                                "(0: exactly the request)"},
    [REMAP_PERMILLE] = {.name = "remap_permille",
                        .type = GMR__OPTION_STRING,
                        .max_bytes = 16,
                        .help = "fine: move free memory instead of taking more once the pool "
                                "would hold this many thousandths above its peak of live bytes "
                                "(0..10000), or never"},
    [HANDLE_DIVISOR] = {.name = "handle_divisor",
                        .type = GMR__OPTION_UINT,
                        .max_value = UINT32_MAX,
                        .help = "fine: new physical allocations are at most 1/N of what is held, "
                                "so that free memory moves in pieces; 0: one per growth"},
    [STREAMS_OUTLIVE] = {.name = "streams_outlive",
                         .type = GMR__OPTION_BOOL,
                         .help = gmr__help_streams_outlive},
    [SHARDS] = {.name = "shards",
                .type = GMR__OPTION_UINT,
                .max_value = GMR_VMM_POOL_MAX_SHARDS,
                .help = "fine: engines threads are spread over by stream (each its own lock "
                        "and memory); 0: one per CPU, at most 16; 1: one for all threads"},
};

/* remap_permille: "never" or 0..10000. */
static bool parse_remap(const char *text, uint32_t *out) {
  if (strcmp(text, "never") == 0) {
    *out = GMR_VMM_POOL_REMAP_NEVER;
    return true;
  }
  char *end = NULL;
  if (!isdigit((unsigned char)text[0])) return false;
  unsigned long v = strtoul(text, &end, 10);
  if (*end != '\0' || v > 10000) return false;
  *out = (uint32_t)v;
  return true;
}

static bool parse_peers(const char *text, gmr_vmm_pool_resource_config *c) {
  bool all = false;
  size_t count = 0;
  if (!gmr__parse_peer_list(text, &all, c->peers, GMR_VMM_POOL_MAX_PEERS, &count)) return false;
  c->peer_access = all ? GMR_VMM_POOL_PEERS_ALL
                       : count > 0 ? GMR_VMM_POOL_PEERS_LIST : GMR_VMM_POOL_PEERS_NONE;
  c->peer_count = count;
  return true;
}

/* The C default with the component's placement. */
static gmr_vmm_pool_resource_config base_config(gmr_vmm_pool_placement placement) {
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  c.placement = placement;
  return c;
}

static bool describe_with(gmr_vmm_pool_placement placement, size_t option, char *text,
                          size_t text_bytes) {
  const gmr_vmm_pool_resource_config c = base_config(placement);
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
      snprintf(text, text_bytes, "%s", c.peer_access == GMR_VMM_POOL_PEERS_ALL ? "all" : "none");
      return true;
    case NCCL_READY:
      return gmr__describe_bool(c.nccl_ready, text, text_bytes);
    case PLACEMENT:
      snprintf(text, text_bytes, "%s", placements[c.placement]);
      return true;
    case GROWTH_PERCENT:
      snprintf(text, text_bytes, "%u", (unsigned)c.growth_percent);
      return true;
    case REMAP_PERMILLE:
      if (c.remap_permille == GMR_VMM_POOL_REMAP_NEVER) {
        snprintf(text, text_bytes, "never");
      } else {
        snprintf(text, text_bytes, "%u", (unsigned)c.remap_permille);
      }
      return true;
    case HANDLE_DIVISOR:
      snprintf(text, text_bytes, "%u", (unsigned)c.handle_divisor);
      return true;
    case STREAMS_OUTLIVE:
      return gmr__describe_bool(c.streams_outlive_resource, text, text_bytes);
    case SHARDS:
      snprintf(text, text_bytes, "%u", (unsigned)c.shard_count);
      return true;
    default:
      return false;
  }
}

static bool describe_pages(size_t option, char *text, size_t text_bytes) {
  return describe_with(GMR_VMM_POOL_PLACEMENT_PAGES, option, text, text_bytes);
}

static bool describe_fine(size_t option, char *text, size_t text_bytes) {
  return describe_with(GMR_VMM_POOL_PLACEMENT_FINE, option, text, text_bytes);
}

static gmr_status create_with(const gmr__option_value *v, gmr_vmm_pool_placement placement,
                              gmr_resource **out, char *message, size_t message_bytes) {
  gmr_vmm_pool_resource_config config = base_config(placement);
  if (v[DEVICE].given) {
    config.device = v[DEVICE].device < 0 ? GMR_VMM_POOL_CURRENT_DEVICE : v[DEVICE].device;
  }
  if (v[PAGE_SIZE].given) config.page_bytes = v[PAGE_SIZE].size;
  if (v[VA_CHUNK].given) config.va_chunk_bytes = v[VA_CHUNK].size;
  if (v[INITIAL_PAGES].given) {
    config.initial_pages =
        v[INITIAL_PAGES].uint > SIZE_MAX ? SIZE_MAX : (size_t)v[INITIAL_PAGES].uint;
  }
  if (v[SMALL_POOL].given) config.small_pool = v[SMALL_POOL].boolean;
  if (v[NCCL_READY].given) config.nccl_ready = v[NCCL_READY].boolean;
  if (v[PLACEMENT].given) config.placement = (gmr_vmm_pool_placement)v[PLACEMENT].choice;
  if (v[GROWTH_PERCENT].given) config.growth_percent = (uint32_t)v[GROWTH_PERCENT].uint;
  if (v[HANDLE_DIVISOR].given) config.handle_divisor = (uint32_t)v[HANDLE_DIVISOR].uint;
  if (v[STREAMS_OUTLIVE].given) config.streams_outlive_resource = v[STREAMS_OUTLIVE].boolean;
  if (v[SHARDS].given) config.shard_count = (uint32_t)v[SHARDS].uint;
  *out = NULL;
  if (v[REMAP_PERMILLE].given && !parse_remap(v[REMAP_PERMILLE].string, &config.remap_permille)) {
    snprintf(message, message_bytes,
             "invalid value '%s' for option remap_permille: expected thousandths 0..10000 or "
             "never",
             v[REMAP_PERMILLE].string);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (v[PEER_ACCESS].given && !parse_peers(v[PEER_ACCESS].string, &config)) {
    snprintf(message, message_bytes,
             "option peer_access: expected none, all, or device ordinals joined by '+' "
             "(at most %d), got '%s'",
             GMR_VMM_POOL_MAX_PEERS, v[PEER_ACCESS].string);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_vmm_pool_resource *p = NULL;
  gmr_failure failure = GMR_FAILURE_INIT;
  gmr_status st = gmr_vmm_pool_resource_create(&config, &p, &failure);
  if (st != GMR_OK) snprintf(message, message_bytes, "%s", failure.message);
  *out = gmr_vmm_pool_resource_as_resource(p);
  return st;
}

static gmr_status create_pages(const gmr__option_value *values, gmr_resource *upstream,
                               gmr_resource **out, char *message, size_t message_bytes) {
  (void)upstream;
  return create_with(values, GMR_VMM_POOL_PLACEMENT_PAGES, out, message, message_bytes);
}

static gmr_status create_fine(const gmr__option_value *values, gmr_resource *upstream,
                              gmr_resource **out, char *message, size_t message_bytes) {
  (void)upstream;
  return create_with(values, GMR_VMM_POOL_PLACEMENT_FINE, out, message, message_bytes);
}

const gmr__component gmr__component_vmm = {
    .name = "vmm",
    .kind = GMR__COMPONENT_RESOURCE,
    .help = "the recommended VMM allocator: vmm_pool with placement=fine (256-byte placement "
            "over shared pages, free memory moved instead of holding more, no driver call once "
            "warm)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create_fine,
    .describe_default = describe_fine,
};

const gmr__component gmr__component_vmm_pool = {
    .name = "vmm_pool",
    .kind = GMR__COMPONENT_RESOURCE,
    .help = "device memory from CUDA virtual memory: physical memory moved to new addresses "
            "instead of fragmenting (VPMM), 256-byte placement over shared pages "
            "(placement=fine), in-place growth, sleep/wake (gmr/vmm_pool_resource.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create_pages,
    .describe_default = describe_pages,
};
