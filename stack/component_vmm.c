/*
 * stack/component_vmm.c: `vmm` in specs (gmr/vmm_resource.h), gmr's
 * recommended VMM resource and the default stack: 256-byte placement over
 * shared pages, free memory moved instead of holding more (README, "Which
 * stack"). Its common options are component_vmm_common.h's.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/vmm_resource.h"
#include "stack/component_vmm_common.h"
#include "stack/registry.h"

enum {
  GROWTH_PERCENT = GMR__VMM_COMMON_OPTIONS,
  REMAP_PERMILLE,
  HANDLE_DIVISOR,
  SHARDS,
  HANDLE_FLOOR,
  CREATORS,
  OPTION_COUNT
};

/* The ranges are gmr_vmm_resource_create's (gmr/vmm_resource.h). */
static const gmr__option_def options[OPTION_COUNT] = {
    GMR__VMM_COMMON_OPTION_DEFS,
    [GROWTH_PERCENT] = {GMR__FIELD(gmr_vmm_pool_resource_config, growth_percent),
                        .name = "growth_percent",
                        .type = GMR__OPTION_UINT,
                        .max_value = 1000,
                        .help = "a growth maps this percentage of what is held at once (0: "
                                "exactly the request)"},
    [REMAP_PERMILLE] = {.name = "remap_permille",
                        .type = GMR__OPTION_STRING,
                        .max_bytes = 16,
                        .help = "move free memory instead of taking more once the pool would "
                                "hold this many thousandths above its peak of live bytes "
                                "(0..10000), or never"},
    [HANDLE_DIVISOR] = {GMR__FIELD(gmr_vmm_pool_resource_config, handle_divisor),
                        .name = "handle_divisor",
                        .type = GMR__OPTION_UINT,
                        .max_value = UINT32_MAX,
                        .help = "new physical allocations are at most 1/N of what is held, so "
                                "that free memory moves in pieces; 0: one per growth"},
    [SHARDS] = {GMR__FIELD(gmr_vmm_pool_resource_config, shard_count),
                .name = "shards",
                .type = GMR__OPTION_UINT,
                .max_value = GMR_VMM_POOL_MAX_SHARDS,
                .help = "engines threads are spread over by stream (each its own lock and "
                        "memory); 0: one per CPU, at most 16; 1: one for all threads"},
    [HANDLE_FLOOR] = {GMR__FIELD(gmr_vmm_pool_resource_config, handle_floor_bytes),
                      .name = "handle_floor",
                      .type = GMR__OPTION_SIZE,
                      .help = "new physical allocations are at least this large (rounded up "
                              "to the page; 0: a page): fewer driver calls per growth, coarser "
                              "pieces to move (expandable segments map 20MiB pages)"},
    [CREATORS] = {GMR__FIELD(gmr_vmm_pool_resource_config, creator_thread_count),
                  .name = "creators",
                  .type = GMR__OPTION_UINT,
                  .max_value = GMR_VMM_POOL_MAX_CREATOR_THREADS,
                  .help = "threads that create a growth's physical allocations (cuMemCreate) "
                          "while the allocating thread maps them; 0: none"},
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

static bool describe_default(size_t option, char *text, size_t text_bytes) {
  if (option != REMAP_PERMILLE) return gmr__vmm_describe_common(option, text, text_bytes);
  uint32_t permille = gmr__vmm_config_default.remap_permille;
  if (permille == GMR_VMM_POOL_REMAP_NEVER) {
    snprintf(text, text_bytes, "never");
  } else {
    snprintf(text, text_bytes, "%u", (unsigned)permille);
  }
  return true;
}

static gmr_status create(const gmr__option_value *v, gmr_resource *upstream, gmr_resource **out,
                         char *message, size_t message_bytes) {
  (void)upstream;
  *out = NULL;
  gmr_vmm_pool_resource_config config = gmr__vmm_config_default;
  gmr__options_apply(options, OPTION_COUNT, v, &config);
  if (v[REMAP_PERMILLE].given && !parse_remap(v[REMAP_PERMILLE].string, &config.remap_permille)) {
    snprintf(message, message_bytes,
             "invalid value '%s' for option remap_permille: expected thousandths 0..10000 or "
             "never",
             v[REMAP_PERMILLE].string);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_status st = gmr__vmm_apply_common(v, &config, message, message_bytes);
  if (st != GMR_OK) return st;
  return gmr__vmm_create_from(gmr_vmm_resource_create, &config, out, message, message_bytes);
}

const gmr__component gmr__component_vmm = {
    .name = "vmm",
    .kind = GMR__COMPONENT_RESOURCE,
    .help = "the recommended VMM allocator: 256-byte placement over shared pages, free memory "
            "moved instead of holding more, no driver call once warm, in-place growth, "
            "sleep/wake (gmr/vmm_resource.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .config_default = &gmr__vmm_config_default,
    .describe_default = describe_default,
    .former_names = gmr__vmm_former_names,
};
