/*
 * stack/component_fixed_block.c: `fixed_block` in specs,
 * gmr_fixed_block_resource (blocks of one size carved from upstream chunks).
 */
#include <stdint.h>
#include <stdio.h>

#include "gmr/fixed_block_resource.h"
#include "stack/registry.h"

enum { BLOCK, BLOCKS_PER_CHUNK, MAX_CHUNKS, INITIAL_CHUNKS, OVERSIZE, STREAM_ORDERED,
       NVTX_ANNOTATE, STREAMS_OUTLIVE, SHARDS, RECORD_EVERY_FREE, OPTION_COUNT };

/* In the order of gmr_fixed_block_oversize. */
static const char *const oversize_choices[] = {"forward", "refuse", NULL};

static const gmr__option_def options[OPTION_COUNT] = {
    [BLOCK] = {"block", GMR__OPTION_SIZE, "1MiB", false, false, NULL,
               "bytes per block (a multiple of 256)"},
    [BLOCKS_PER_CHUNK] = {"blocks_per_chunk", GMR__OPTION_UINT, "128", false, false, NULL,
                          "blocks per chunk taken from the layer below"},
    [MAX_CHUNKS] = {"max_chunks", GMR__OPTION_UINT, "0", false, false, NULL,
                    "most chunks held at once; 0: no maximum"},
    [INITIAL_CHUNKS] = {"initial_chunks", GMR__OPTION_UINT, "0", false, false, NULL,
                        "chunks taken at create"},
    [OVERSIZE] = {"oversize", GMR__OPTION_CHOICE, "forward", false, false, oversize_choices,
                  "requests larger than a block: forward (to the layer below) or refuse "
                  "(GMR_ERR_UNSUPPORTED)"},
    [STREAM_ORDERED] = {"stream_ordered", GMR__OPTION_BOOL, "true", false, false, NULL,
                        "false: ignore streams (host memory)"},
    [NVTX_ANNOTATE] = {"nvtx_annotate", GMR__OPTION_BOOL, "false", false, false, NULL,
                       "describe chunks and blocks to Compute Sanitizer (NVTX memory regions)"},
    [STREAMS_OUTLIVE] = {"streams_outlive", GMR__OPTION_BOOL, "false", false, false, NULL,
                         "the program keeps its streams alive until the stack is destroyed: "
                         "frees record no event (faster on created streams)"},
    [SHARDS] = {"shards", GMR__OPTION_UINT, "0", false, false, NULL,
                "shards for threads, each with its own lock; 0: one per online CPU (at most 64)"},
    [RECORD_EVERY_FREE] = {"record_every_free", GMR__OPTION_BOOL, "false", false, false, NULL,
                           "record an event at every free on a created stream (RMM's rule) "
                           "instead of when another stream asks for the block"},
};

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_fixed_block_resource_config config = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  config.block_bytes = values[BLOCK].size;
  config.blocks_per_chunk = (size_t)values[BLOCKS_PER_CHUNK].uint;
  config.max_chunk_count = (size_t)values[MAX_CHUNKS].uint;
  config.initial_chunk_count = (size_t)values[INITIAL_CHUNKS].uint;
  config.oversize = (gmr_fixed_block_oversize)values[OVERSIZE].choice;
  config.stream_ordered = values[STREAM_ORDERED].boolean;
  config.nvtx_annotate = values[NVTX_ANNOTATE].boolean;
  config.streams_outlive_resource = values[STREAMS_OUTLIVE].boolean;
  config.shard_count = values[SHARDS].uint > 64 ? 65u : (uint32_t)values[SHARDS].uint;
  config.record_at_every_free = values[RECORD_EVERY_FREE].boolean;
  gmr_fixed_block_resource *fb = NULL;
  gmr_status st = gmr_fixed_block_resource_create(upstream, &config, &fb);
  if (st == GMR_ERR_INVALID_ARGUMENT) {
    snprintf(message, message_bytes,
             "block must be a positive multiple of 256, blocks_per_chunk > 0, and "
             "initial_chunks at most max_chunks");
  }
  *out = gmr_fixed_block_resource_as_resource(fb);
  return st;
}

const gmr__component gmr__component_fixed_block = {
    "fixed_block", GMR__COMPONENT_ADAPTOR,
    "blocks of one size carved from chunks of the layer below, stream-ordered reuse "
    "(gmr/fixed_block_resource.h)",
    options, OPTION_COUNT, create,
};
