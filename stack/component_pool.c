/*
 * stack/component_pool.c: `pool` in specs, gmr_pool_resource (the coalescing,
 * stream-ordered general-purpose pool).
 */
#include <stdint.h>
#include <stdio.h>

#include "gmr/pool_resource.h"
#include "stack/registry.h"

enum {
  INITIAL,
  MAX,
  MIN_GROWTH,
  MAX_GROWTH,
  GROWTH_PERCENT,
  GRANULARITY,
  ARENAS,
  STREAM_ORDERED,
  RELEASE_ON_GROWTH,
  RECENT_FREES,
  RECENT_FREE_MAX,
  NVTX_ANNOTATE,
  STREAMS_OUTLIVE,
  RECORD_EVERY_FREE,
  OPTION_COUNT
};

/* Defaults are GMR_POOL_RESOURCE_CONFIG_DEFAULT's, written as spec values so
 * that `replay --components` shows them. */
static const gmr__option_def options[OPTION_COUNT] = {
    [INITIAL] = {"initial", GMR__OPTION_SIZE, "0", false, false, NULL,
                 "bytes taken from the layer below at create"},
    [MAX] = {"max", GMR__OPTION_SIZE, "none", false, true, NULL,
             "most bytes held from the layer below; none for no maximum"},
    [MIN_GROWTH] = {"min_growth", GMR__OPTION_SIZE, "48MiB", false, false, NULL,
                    "smallest chunk asked for when a request needs less"},
    [MAX_GROWTH] = {"max_growth", GMR__OPTION_SIZE, "128MiB", false, false, NULL,
                    "largest chunk asked for when a request needs less"},
    [GROWTH_PERCENT] = {"growth_percent", GMR__OPTION_UINT, "12", false, false, NULL,
                        "a new chunk is this percentage of what the arena holds"},
    [GRANULARITY] = {"granularity", GMR__OPTION_SIZE, "2MiB", false, false, NULL,
                     "chunk sizes are multiples of this (power of two >= 256)"},
    [ARENAS] = {"arenas", GMR__OPTION_UINT, "0", false, false, NULL,
                "arenas for threads; 0: one per online CPU (at most 64)"},
    [STREAM_ORDERED] = {"stream_ordered", GMR__OPTION_BOOL, "true", false, false, NULL,
                        "false: ignore streams (host memory, single-stream programs)"},
    [RELEASE_ON_GROWTH] = {"release_on_growth", GMR__OPTION_BOOL, "true", false, false, NULL,
                           "give wholly free chunks back before growing"},
    [RECENT_FREES] = {"recent_frees", GMR__OPTION_UINT, "8", false, false, NULL,
                      "small frees kept unmerged per stream for same-size reuse (0..32)"},
    [RECENT_FREE_MAX] = {"recent_free_max", GMR__OPTION_SIZE, "64KiB", false, false, NULL,
                         "largest free kept unmerged"},
    [NVTX_ANNOTATE] = {"nvtx_annotate", GMR__OPTION_BOOL, "false", false, false, NULL,
                       "describe chunks and blocks to Compute Sanitizer (NVTX memory regions)"},
    [STREAMS_OUTLIVE] = {"streams_outlive", GMR__OPTION_BOOL, "false", false, false, NULL,
                         "the program keeps its streams alive until the stack is destroyed: "
                         "frees record no event (faster on created streams)"},
    [RECORD_EVERY_FREE] = {"record_every_free", GMR__OPTION_BOOL, "false", false, false, NULL,
                           "record an event at every free on a created stream (RMM's rule) "
                           "instead of when another stream asks for the memory"},
};

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_pool_resource_config config = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  config.initial_pool_bytes = values[INITIAL].size;
  config.maximum_pool_bytes = values[MAX].unlimited ? 0 : values[MAX].size;
  config.min_growth_bytes = values[MIN_GROWTH].size;
  config.max_growth_bytes = values[MAX_GROWTH].size;
  config.growth_percent = values[GROWTH_PERCENT].uint > UINT32_MAX
                              ? UINT32_MAX
                              : (uint32_t)values[GROWTH_PERCENT].uint;
  config.chunk_granularity_bytes = values[GRANULARITY].size;
  config.arena_count = values[ARENAS].uint > 64 ? 65u : (uint32_t)values[ARENAS].uint;
  config.stream_ordered = values[STREAM_ORDERED].boolean;
  config.release_on_growth = values[RELEASE_ON_GROWTH].boolean;
  config.recent_free_count =
      values[RECENT_FREES].uint > 33 ? 33u : (uint32_t)values[RECENT_FREES].uint;
  config.recent_free_max_bytes = values[RECENT_FREE_MAX].size;
  config.nvtx_annotate = values[NVTX_ANNOTATE].boolean;
  config.streams_outlive_resource = values[STREAMS_OUTLIVE].boolean;
  config.record_at_every_free = values[RECORD_EVERY_FREE].boolean;
  gmr_pool_resource *p = NULL;
  gmr_status st = gmr_pool_resource_create(upstream, &config, &p);
  if (st == GMR_ERR_INVALID_ARGUMENT) {
    snprintf(message, message_bytes,
             "granularity must be a power of two >= 256, min_growth <= max_growth, "
             "arenas at most 64, recent_frees at most 32");
  }
  *out = gmr_pool_resource_as_resource(p);
  return st;
}

const gmr__component gmr__component_pool = {
    "pool", GMR__COMPONENT_ADAPTOR,
    "coalescing, stream-ordered sub-allocator over chunks of the layer below: best fit, "
    "per-stream free lists with events, arenas for threads (gmr/pool_resource.h)",
    options, OPTION_COUNT, create,
};
