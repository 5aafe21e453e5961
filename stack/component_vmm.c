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
#include "stack/value.h"

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
    [GROWTH_PERCENT] = {.name = "growth_percent",
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
    [HANDLE_DIVISOR] = {.name = "handle_divisor",
                        .type = GMR__OPTION_UINT,
                        .max_value = UINT32_MAX,
                        .help = "new physical allocations are at most 1/N of what is held, so "
                                "that free memory moves in pieces; 0: one per growth"},
    [SHARDS] = {.name = "shards",
                .type = GMR__OPTION_UINT,
                .max_value = GMR_VMM_POOL_MAX_SHARDS,
                .help = "engines threads are spread over by stream (each its own lock and "
                        "memory); 0: one per CPU, at most 16; 1: one for all threads"},
    [HANDLE_FLOOR] = {.name = "handle_floor",
                      .type = GMR__OPTION_SIZE,
                      .help = "new physical allocations are at least this large (rounded up "
                              "to the page; 0: a page): fewer driver calls per growth, coarser "
                              "pieces to move (expandable segments map 20MiB pages)"},
    [CREATORS] = {.name = "creators",
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
  const gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  switch (option) {
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
    case SHARDS:
      snprintf(text, text_bytes, "%u", (unsigned)c.shard_count);
      return true;
    case HANDLE_FLOOR:
      gmr__format_size_value(c.handle_floor_bytes, text, text_bytes);
      return true;
    case CREATORS:
      snprintf(text, text_bytes, "%u", (unsigned)c.creator_thread_count);
      return true;
    default:
      return gmr__vmm_describe_common(&c, option, text, text_bytes);
  }
}

static gmr_status create(const gmr__option_value *v, gmr_resource *upstream, gmr_resource **out,
                         char *message, size_t message_bytes) {
  (void)upstream;
  *out = NULL;
  gmr_vmm_pool_resource_config config = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  if (v[GROWTH_PERCENT].given) config.growth_percent = (uint32_t)v[GROWTH_PERCENT].uint;
  if (v[HANDLE_DIVISOR].given) config.handle_divisor = (uint32_t)v[HANDLE_DIVISOR].uint;
  if (v[SHARDS].given) config.shard_count = (uint32_t)v[SHARDS].uint;
  if (v[HANDLE_FLOOR].given) config.handle_floor_bytes = v[HANDLE_FLOOR].size;
  if (v[CREATORS].given) config.creator_thread_count = (uint32_t)v[CREATORS].uint;
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
    .describe_default = describe_default,
    .former_names = gmr__vmm_former_names,
};
