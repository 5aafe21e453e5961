/*
 * stack/component_graph_arena.c: `graph_arena` in specs,
 * gmr_graph_arena_resource (memory for CUDA graph capture).
 */
#include <stdint.h>
#include <stdio.h>

#include "gmr/graph_arena_resource.h"
#include "stack/registry.h"
#include "stack/value.h"

enum { INITIAL, CHUNK, MAX, ALIGNMENT, POLICY, DETECT, UNCAPTURED, NVTX_ANNOTATE, OPTION_COUNT };

/* In the order of the enums of gmr/graph_arena_resource.h. */
static const char *const policies[] = {"monotone", "ordered_reuse", NULL};
static const char *const detections[] = {"auto", "explicit", "hinted", NULL};
static const char *const uncaptured[] = {"arena", "forward", NULL};

/* The ranges are gmr_graph_arena_resource_create's (gmr/graph_arena_resource.h). */
static const gmr__option_def options[OPTION_COUNT] = {
    [INITIAL] = {GMR__FIELD(gmr_graph_arena_resource_config, initial_capacity_bytes),
                 .name = "initial",
                 .type = GMR__OPTION_SIZE,
                 .max_value = GMR_MAX_ALLOCATION_BYTES,
                 .help = "bytes taken from the layer below at create (the fastest capture: no "
                         "growth in it)"},
    [CHUNK] = {GMR__FIELD(gmr_graph_arena_resource_config, chunk_bytes),
               .name = "chunk",
               .type = GMR__OPTION_SIZE,
               .help = "least growth (in capture too, when the layer below can allocate there); "
                       "0: grow only by initial and gmr_graph_arena_resource_reserve() (and take "
                       "nothing from the layer below's free blocks)"},
    [MAX] = {GMR__FIELD(gmr_graph_arena_resource_config, max_capacity_bytes),
             .name = "max",
             .type = GMR__OPTION_SIZE,
             .allow_unlimited = true,
             .unlimited_field = SIZE_MAX,
             .unlimited_name = "none",
             .help = "most bytes in all chunks; none for no limit"},
    /* 2^61: the largest power of two up to GMR_MAX_ALLOCATION_BYTES. */
    [ALIGNMENT] = {GMR__FIELD(gmr_graph_arena_resource_config, alignment),
                   .name = "alignment",
                   .type = GMR__OPTION_SIZE,
                   .min_value = GMR_DEFAULT_ALIGNMENT,
                   .max_value = (uint64_t)1 << 61,
                   .power_of_two = true,
                   .help = "least alignment and size granule of a block"},
    [POLICY] = {GMR__FIELD(gmr_graph_arena_resource_config, capture_policy),
                .name = "policy",
                .type = GMR__OPTION_CHOICE,
                .choices = policies,
                .help = "a free during capture: monotone (bookkeeping, no two blocks of a graph "
                        "overlap) or ordered_reuse (reused later in the capture on its stream, "
                        "PyTorch's private pools)"},
    [DETECT] = {GMR__FIELD(gmr_graph_arena_resource_config, detection),
                .name = "detect",
                .type = GMR__OPTION_CHOICE,
                .choices = detections,
                .help = "auto (explicit sessions, else cudaStreamGetCaptureInfo per request), "
                        "explicit (gmr_graph_arena_resource_begin_capture only; no CUDA call "
                        "per request) or hinted (ask CUDA only while a session or a thread "
                        "hint is up)"},
    [UNCAPTURED] = {GMR__FIELD(gmr_graph_arena_resource_config, uncaptured),
                    .name = "uncaptured",
                    .type = GMR__OPTION_CHOICE,
                    .choices = uncaptured,
                    .help = "requests outside capture: arena (carved, freed at reset/rewind) or "
                            "forward (to the layer below, whose free memory the arena shares: "
                            "the graph pool)"},
    [NVTX_ANNOTATE] = {GMR__FIELD(gmr_graph_arena_resource_config, nvtx_annotate),
                       .name = "nvtx_annotate",
                       .type = GMR__OPTION_BOOL,
                       .help = gmr__help_nvtx_annotate},
};

static const gmr_graph_arena_resource_config defaults = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;

/* The C default, with what the spec gives on top. */
static gmr_graph_arena_resource_config to_config(const gmr__option_value *v) {
  gmr_graph_arena_resource_config c = defaults;
  gmr__options_apply(options, OPTION_COUNT, v, &c);
  return c;
}

/* The arena takes whole granules: initial rounded up to the alignment. */
static size_t aligned_initial(const gmr_graph_arena_resource_config *c) {
  size_t rest = c->initial_capacity_bytes % c->alignment;
  return rest == 0 ? c->initial_capacity_bytes : c->initial_capacity_bytes + (c->alignment - rest);
}

/* Options that contradict each other (each is in range on its own). */
static gmr_status check(const gmr__option_value *v, size_t *blame, char *message,
                        size_t message_bytes) {
  gmr_graph_arena_resource_config c = to_config(v);
  size_t initial = aligned_initial(&c); /* initial and alignment are at most 2^62 and 2^61 */
  if (initial <= c.max_capacity_bytes) return GMR_OK;
  *blame = v[INITIAL].given ? INITIAL : MAX;
  char a[64], b[64], aligned[48], asked[160];
  gmr__describe_size_option(c.initial_capacity_bytes, v[INITIAL].given, a, sizeof a);
  gmr__describe_size_option(c.max_capacity_bytes, v[MAX].given, b, sizeof b);
  if (initial != c.initial_capacity_bytes) {
    gmr__format_size(initial, aligned, sizeof aligned);
    snprintf(asked, sizeof asked, "%s, %s once aligned to option 'alignment'", a, aligned);
  } else {
    snprintf(asked, sizeof asked, "%s", a);
  }
  snprintf(message, message_bytes,
           "graph_arena option 'initial' (%s) is above option 'max' (%s): lower initial or raise "
           "max",
           asked, b);
  return GMR_ERR_INVALID_ARGUMENT;
}

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_graph_arena_resource_config config = to_config(values);
  gmr_graph_arena_resource *a = NULL;
  gmr_status st = gmr_graph_arena_resource_create(upstream, &config, &a);
  if (st != GMR_OK && st != GMR_ERR_INVALID_ARGUMENT && config.initial_capacity_bytes > 0) {
    gmr__describe_initial_bytes_failure(upstream, aligned_initial(&config),
                                        config.initial_capacity_bytes, "initial", message,
                                        message_bytes);
  }
  *out = gmr_graph_arena_resource_as_resource(a);
  return st;
}

const gmr__component gmr__component_graph_arena = {
    .name = "graph_arena",
    .kind = GMR__COMPONENT_ADAPTOR,
    .help = "memory for CUDA graph capture: carved from chunks, kept for the graph until "
            "released; grows during capture only through the layer below's capture-safe "
            "allocation; with uncaptured=forward it takes the layer below's free blocks when a "
            "capture is declared and gives idle chunks back (gmr/graph_arena_resource.h, "
            "docs/graph_pool.md)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .check = check,
    .config_default = &defaults,
};
