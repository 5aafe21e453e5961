/*
 * stack/component_vmm_pool.c: `vmm_pool` and `vmm` in specs, both
 * gmr_vmm_pool_resource (a pool over CUDA virtual memory that moves physical
 * memory instead of fragmenting). They differ only in the default placement:
 * `vmm_pool` places whole pages (VPMM), `vmm` at 256-byte granularity (fine),
 * the recommended VMM allocator (README, "vmm or pool").
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/vmm_pool_resource.h"
#include "stack/registry.h"

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
  OPTION_COUNT
};

static const char *const placements[] = {"default", "pages", "fine", NULL};

/* Defaults are GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT's, written as spec
 * values so that `replay --components` shows them. */
static const gmr__option_def options[OPTION_COUNT] = {
    [DEVICE] = {"device", GMR__OPTION_DEVICE, "current", false, false, NULL,
                "device ordinal, or current (the calling thread's device at create)", 0},
    [PAGE_SIZE] = {"page_size", GMR__OPTION_SIZE, "0", false, false, NULL,
                   "bytes per physical page, a multiple of the VMM granularity; 0: 2 MiB (or "
                   "the granularity if larger)",
                   0},
    [VA_CHUNK] = {"va_chunk", GMR__OPTION_SIZE, "0", false, false, NULL,
                  "virtual addresses reserved at a time; 0: the device's memory size", 0},
    [INITIAL_PAGES] = {"initial_pages", GMR__OPTION_UINT, "0", false, false, NULL,
                       "pages mapped at create as one free region", 0},
    [SMALL_POOL] = {"small_pool", GMR__OPTION_BOOL, "true", false, false, NULL,
                    "requests below a page from an internal pool (256-byte rounding) instead "
                    "of a page each",
                    0},
    [PEER_ACCESS] = {"peer_access", GMR__OPTION_STRING, "none", false, false, NULL,
                     "devices that may access every page: none, all, or ordinals joined by "
                     "'+' (1+2)",
                     64},
    [NCCL_READY] = {"nccl_ready", GMR__OPTION_BOOL, "false", false, false, NULL,
                    "create pages as ncclMemAlloc does (exportable handles, GPUDirect RDMA, "
                    "recommended granularity)",
                    0},
    [PLACEMENT] = {"placement", GMR__OPTION_CHOICE, "default", false, false, placements,
                   "pages: every request whole pages, VPMM's defragmentation (small requests "
                   "from the small path); fine: 256-byte placement over shared pages; "
                   "default: pages for vmm_pool, fine for vmm",
                   0},
    [GROWTH_PERCENT] = {"growth_percent", GMR__OPTION_UINT, "25", false, false, NULL,
                        "fine: a growth maps this percentage of what is held at once (0..1000; "
                        "0: exactly the request)",
                        0},
    [REMAP_PERMILLE] = {"remap_permille", GMR__OPTION_STRING, "15", false, false, NULL,
                        "fine: move free memory instead of taking more once the pool would hold "
                        "this many thousandths above its peak of live bytes (0..10000), or never",
                        16},
    [HANDLE_DIVISOR] = {"handle_divisor", GMR__OPTION_UINT, "128", false, false, NULL,
                        "fine: new physical allocations are at most 1/N of what is held, so "
                        "that free memory moves in pieces; 0: one per growth",
                        0},
    [STREAMS_OUTLIVE] = {"streams_outlive", GMR__OPTION_BOOL, "false", false, false, NULL,
                         "the program keeps its streams alive until the pool is destroyed: "
                         "frees record no event",
                         0},
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

/* "none", "all", or device ordinals separated by '+' (',' and spaces too,
 * inside quotes). */
static bool parse_peers(const char *text, gmr_vmm_pool_resource_config *c) {
  if (strcmp(text, "none") == 0) {
    c->peer_access = GMR_VMM_POOL_PEERS_NONE;
    return true;
  }
  if (strcmp(text, "all") == 0) {
    c->peer_access = GMR_VMM_POOL_PEERS_ALL;
    return true;
  }
  c->peer_access = GMR_VMM_POOL_PEERS_LIST;
  c->peer_count = 0;
  const char *s = text;
  while (*s != '\0') {
    while (*s == '+' || *s == ',' || *s == ' ') s++;
    if (*s == '\0') break;
    if (!isdigit((unsigned char)*s) || c->peer_count == GMR_VMM_POOL_MAX_PEERS) return false;
    char *end = NULL;
    long d = strtol(s, &end, 10);
    if (d > 1024 || (*end != '\0' && *end != '+' && *end != ',' && *end != ' ')) return false;
    c->peers[c->peer_count++] = (int)d;
    s = end;
  }
  return c->peer_count > 0;
}

static gmr_status create_with(const gmr__option_value *values, gmr_vmm_pool_placement fallback,
                              gmr_resource **out, char *message, size_t message_bytes) {
  gmr_vmm_pool_resource_config config = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  config.device = values[DEVICE].device < 0 ? GMR_VMM_POOL_CURRENT_DEVICE : values[DEVICE].device;
  config.page_bytes = values[PAGE_SIZE].size;
  config.va_chunk_bytes = values[VA_CHUNK].size;
  config.initial_pages = values[INITIAL_PAGES].uint > SIZE_MAX ? SIZE_MAX
                                                                : (size_t)values[INITIAL_PAGES].uint;
  config.small_pool = values[SMALL_POOL].boolean;
  config.nccl_ready = values[NCCL_READY].boolean;
  config.placement = values[PLACEMENT].choice == 1   ? GMR_VMM_POOL_PLACEMENT_PAGES
                     : values[PLACEMENT].choice == 2 ? GMR_VMM_POOL_PLACEMENT_FINE
                                                     : fallback;
  /* Above 1000: 1001, which create refuses with the limit in its message. */
  uint64_t growth = values[GROWTH_PERCENT].uint;
  config.growth_percent = growth > 1000 ? 1001u : (uint32_t)growth;
  config.handle_divisor = values[HANDLE_DIVISOR].uint > UINT32_MAX
                              ? UINT32_MAX
                              : (uint32_t)values[HANDLE_DIVISOR].uint;
  config.streams_outlive_resource = values[STREAMS_OUTLIVE].boolean;
  *out = NULL;
  if (!parse_remap(values[REMAP_PERMILLE].string, &config.remap_permille)) {
    snprintf(message, message_bytes,
             "remap_permille: expected thousandths 0..10000 or never, got '%s'",
             values[REMAP_PERMILLE].string);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (!parse_peers(values[PEER_ACCESS].string, &config)) {
    snprintf(message, message_bytes,
             "peer_access: expected none, all, or device ordinals joined by '+' (at most %d), "
             "got '%s'",
             GMR_VMM_POOL_MAX_PEERS, values[PEER_ACCESS].string);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_vmm_pool_resource *p = NULL;
  gmr_failure failure;
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
    "vmm", GMR__COMPONENT_RESOURCE,
    "the recommended VMM allocator: vmm_pool with placement=fine (256-byte placement over "
    "shared pages, free memory moved instead of holding more, no driver call once warm)",
    options, OPTION_COUNT, create_fine,
};

const gmr__component gmr__component_vmm_pool = {
    "vmm_pool", GMR__COMPONENT_RESOURCE,
    "device memory from CUDA virtual memory: physical memory moved to new addresses instead of "
    "fragmenting (VPMM), 256-byte placement over shared pages (placement=fine), in-place "
    "growth, sleep/wake (gmr/vmm_pool_resource.h)",
    options, OPTION_COUNT, create_pages,
};
