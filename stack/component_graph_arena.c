/*
 * stack/component_graph_arena.c: `graph_arena` in specs,
 * gmr_graph_arena_resource (memory for CUDA graph capture).
 */
#include <stdint.h>
#include <stdio.h>

#include "gmr/graph_arena_resource.h"
#include "stack/registry.h"

enum { INITIAL, CHUNK, MAX, ALIGNMENT, POLICY, DETECT, UNCAPTURED, NVTX_ANNOTATE, OPTION_COUNT };

/* In the order of the enums of gmr/graph_arena_resource.h. */
static const char *const policies[] = {"monotone", "ordered_reuse", NULL};
static const char *const detections[] = {"auto", "explicit", "hinted", NULL};
static const char *const uncaptured[] = {"arena", "forward", NULL};

static const gmr__option_def options[OPTION_COUNT] = {
    [INITIAL] = {"initial", GMR__OPTION_SIZE, "0", false, false, NULL,
                 "bytes taken from the layer below at create (the fastest capture: no growth in it)"},
    [CHUNK] = {"chunk", GMR__OPTION_SIZE, "64MiB", false, false, NULL,
               "least growth (in capture too, when the layer below can allocate there); 0: grow "
               "only by initial and gmr_graph_arena_resource_reserve() (and take nothing from "
               "the layer below's free blocks)"},
    [MAX] = {"max", GMR__OPTION_SIZE, "none", false, true, NULL,
             "most bytes in all chunks; none for no limit"},
    [ALIGNMENT] = {"alignment", GMR__OPTION_SIZE, "256", false, false, NULL,
                   "least alignment and size granule of a block (power of two >= 256)"},
    [POLICY] = {"policy", GMR__OPTION_CHOICE, "monotone", false, false, policies,
                "a free during capture: monotone (bookkeeping, no two blocks of a graph "
                "overlap) or ordered_reuse (reused later in the capture on its stream, "
                "PyTorch's private pools)"},
    [DETECT] = {"detect", GMR__OPTION_CHOICE, "auto", false, false, detections,
                "auto (explicit sessions, else cudaStreamGetCaptureInfo per request), "
                "explicit (gmr_graph_arena_resource_begin_capture only; no CUDA call per request) "
                "or hinted (ask CUDA only while a session or a thread hint is up)"},
    [UNCAPTURED] = {"uncaptured", GMR__OPTION_CHOICE, "arena", false, false, uncaptured,
                    "requests outside capture: arena (carved, freed at reset/rewind) or "
                    "forward (to the layer below, whose free memory the arena shares: the graph "
                    "pool)"},
    [NVTX_ANNOTATE] = {"nvtx_annotate", GMR__OPTION_BOOL, "false", false, false, NULL,
                       "describe chunks and blocks to Compute Sanitizer (NVTX memory regions)"},
};

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_graph_arena_resource_config config = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
  config.initial_capacity_bytes = values[INITIAL].size;
  config.chunk_bytes = values[CHUNK].size;
  config.max_capacity_bytes = values[MAX].unlimited ? SIZE_MAX : values[MAX].size;
  config.alignment = values[ALIGNMENT].size;
  config.capture_policy = (gmr_graph_arena_policy)values[POLICY].choice;
  config.detection = (gmr_graph_arena_detection)values[DETECT].choice;
  config.uncaptured = (gmr_graph_arena_uncaptured)values[UNCAPTURED].choice;
  config.nvtx_annotate = values[NVTX_ANNOTATE].boolean;
  gmr_graph_arena_resource *a = NULL;
  gmr_status st = gmr_graph_arena_resource_create(upstream, &config, &a);
  if (st == GMR_ERR_INVALID_ARGUMENT) {
    snprintf(message, message_bytes,
             "alignment must be a power of two >= 256 and initial at most max");
  }
  *out = gmr_graph_arena_resource_as_resource(a);
  return st;
}

const gmr__component gmr__component_graph_arena = {
    "graph_arena", GMR__COMPONENT_ADAPTOR,
    "memory for CUDA graph capture: carved from chunks, kept for the graph until released; "
    "grows during capture only through the layer below's capture-safe allocation; with "
    "uncaptured=forward it takes the layer below's free blocks when a capture is declared and "
    "gives idle chunks back (gmr/graph_arena_resource.h, docs/graph_pool.md)",
    options, OPTION_COUNT, create,
};
