/*
 * stack/component_fixed_block.c: `fixed_block` in specs,
 * gmr_fixed_block_resource (blocks of one size carved from upstream chunks).
 */
#include <stdint.h>
#include <stdio.h>

#include "gmr/fixed_block_resource.h"
#include "stack/component_stream_ordered.h"
#include "stack/registry.h"
#include "stack/value.h"

enum {
  BLOCK,
  BLOCKS_PER_CHUNK,
  MAX_CHUNKS,
  INITIAL_CHUNKS,
  OVERSIZE,
  SHARDS,
  STREAM_OPTIONS, /* component_stream_ordered.h's, from here */
  OPTION_COUNT = STREAM_OPTIONS + GMR__SO_OPTIONS
};

/* In the order of gmr_fixed_block_oversize. */
static const char *const oversize_choices[] = {"forward", "refuse", NULL};

/* The ranges are gmr_fixed_block_resource_create's (gmr/fixed_block_resource.h). */
static const gmr__option_def options[OPTION_COUNT] = {
    [BLOCK] = {GMR__FIELD(gmr_fixed_block_resource_config, block_bytes),
               .name = "block",
               .type = GMR__OPTION_SIZE,
               .min_value = GMR_DEFAULT_ALIGNMENT,
               .multiple_of = GMR_DEFAULT_ALIGNMENT,
               .help = "bytes per block"},
    [BLOCKS_PER_CHUNK] = {GMR__FIELD(gmr_fixed_block_resource_config, blocks_per_chunk),
                          .name = "blocks_per_chunk",
                          .type = GMR__OPTION_UINT,
                          .min_value = 1,
                          .help = "blocks per chunk taken from the layer below"},
    [MAX_CHUNKS] = {GMR__FIELD(gmr_fixed_block_resource_config, max_chunk_count),
                    .name = "max_chunks",
                    .type = GMR__OPTION_UINT,
                    .help = "most chunks held at once; 0: no maximum"},
    [INITIAL_CHUNKS] = {GMR__FIELD(gmr_fixed_block_resource_config, initial_chunk_count),
                        .name = "initial_chunks",
                        .type = GMR__OPTION_UINT,
                        .help = "chunks taken at create"},
    [OVERSIZE] = {GMR__FIELD(gmr_fixed_block_resource_config, oversize),
                  .name = "oversize",
                  .type = GMR__OPTION_CHOICE,
                  .choices = oversize_choices,
                  .help = "requests larger than a block: forward (to the layer below) or refuse "
                          "(GMR_ERR_UNSUPPORTED)"},
    [SHARDS] = {GMR__FIELD(gmr_fixed_block_resource_config, shard_count),
                .name = "shards",
                .type = GMR__OPTION_UINT,
                .max_value = 64,
                .help = "shards for threads, each with its own lock; 0: one per online CPU "
                        "(at most 64)"},
    GMR__SO_OPTION_DEFS(STREAM_OPTIONS, gmr_fixed_block_resource_config),
};

static const gmr_fixed_block_resource_config defaults = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;

/* The C default, with what the spec gives on top. */
static gmr_fixed_block_resource_config to_config(const gmr__option_value *v) {
  gmr_fixed_block_resource_config c = defaults;
  gmr__options_apply(options, OPTION_COUNT, v, &c);
  return c;
}

/* Options that contradict each other (each is in range on its own). */
static gmr_status check(const gmr__option_value *v, size_t *blame, char *message,
                        size_t message_bytes) {
  gmr_fixed_block_resource_config c = to_config(v);
  char a[64], b[64];
  if (c.max_chunk_count != 0 && c.initial_chunk_count > c.max_chunk_count) {
    *blame = v[INITIAL_CHUNKS].given ? INITIAL_CHUNKS : MAX_CHUNKS;
    gmr__describe_uint_option(c.initial_chunk_count, v[INITIAL_CHUNKS].given, a, sizeof a);
    gmr__describe_uint_option(c.max_chunk_count, v[MAX_CHUNKS].given, b, sizeof b);
    snprintf(message, message_bytes,
             "fixed_block option 'initial_chunks' (%s) is above option 'max_chunks' (%s): lower "
             "initial_chunks or raise max_chunks",
             a, b);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (c.block_bytes > GMR_MAX_ALLOCATION_BYTES / c.blocks_per_chunk) {
    *blame = v[BLOCK].given ? BLOCK : BLOCKS_PER_CHUNK;
    gmr__describe_size_option(c.block_bytes, v[BLOCK].given, a, sizeof a);
    gmr__describe_uint_option(c.blocks_per_chunk, v[BLOCKS_PER_CHUNK].given, b, sizeof b);
    snprintf(message, message_bytes,
             "fixed_block option 'block' (%s) times option 'blocks_per_chunk' (%s) is past the "
             "largest allocation (%zu bytes): lower either",
             a, b, (size_t)GMR_MAX_ALLOCATION_BYTES);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_fixed_block_resource_config config = to_config(values);
  gmr_fixed_block_resource *fb = NULL;
  gmr_status st = gmr_fixed_block_resource_create(upstream, &config, &fb);
  if (st != GMR_OK && st != GMR_ERR_INVALID_ARGUMENT && config.initial_chunk_count > 0) {
    char block[48], what[192];
    gmr__format_size(config.block_bytes, block, sizeof block);
    snprintf(what, sizeof what,
             "the %zu chunks of option 'initial_chunks' (%zu bytes each: block %s times "
             "blocks_per_chunk %zu)",
             config.initial_chunk_count, config.block_bytes * config.blocks_per_chunk, block,
             config.blocks_per_chunk);
    gmr__describe_initial_failure(upstream, what, "initial_chunks", message, message_bytes);
  }
  *out = gmr_fixed_block_resource_as_resource(fb);
  return st;
}

const gmr__component gmr__component_fixed_block = {
    .name = "fixed_block",
    .kind = GMR__COMPONENT_ADAPTOR,
    .help = "blocks of one size carved from chunks of the layer below, stream-ordered reuse "
            "(gmr/fixed_block_resource.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .check = check,
    .config_default = &defaults,
};
