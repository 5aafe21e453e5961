/*
 * stack/component_pool.c: `pool` in specs, gmr_pool_resource (the coalescing,
 * stream-ordered general-purpose pool).
 */
#include <stdint.h>
#include <stdio.h>

#include "gmr/pool_resource.h"
#include "stack/component_stream_ordered.h"
#include "stack/registry.h"
#include "stack/value.h"

enum {
  INITIAL,
  MAX,
  MIN_GROWTH,
  MAX_GROWTH,
  GROWTH_PERCENT,
  GRANULARITY,
  ARENAS,
  RELEASE_ON_GROWTH,
  RECENT_FREES,
  RECENT_FREE_MAX,
  STREAM_OPTIONS, /* component_stream_ordered.h's, from here */
  OPTION_COUNT = STREAM_OPTIONS + GMR__SO_OPTIONS
};

/* The ranges are gmr_pool_resource_create's (gmr/pool_resource.h: at most
 * 64 arenas, 32 recent frees, 1000 percent, a granularity from 256 bytes to
 * 1 TiB); tests/stack_spec_limits_test.cc checks that the pool agrees. */
static const gmr__option_def options[OPTION_COUNT] = {
    [INITIAL] = {GMR__FIELD(gmr_pool_resource_config, initial_pool_bytes),
                 .name = "initial",
                 .type = GMR__OPTION_SIZE,
                 .max_value = GMR_MAX_ALLOCATION_BYTES,
                 .help = "bytes taken from the layer below at create (rounded up to 256)"},
    /* 0 would mean "no maximum" to the pool: the spec says none for that. */
    [MAX] = {GMR__FIELD(gmr_pool_resource_config, maximum_pool_bytes),
             .name = "max",
             .type = GMR__OPTION_SIZE,
             .allow_unlimited = true,
             .unlimited_field = 0,
             .unlimited_name = "none",
             .min_value = 1,
             .help = "most bytes held from the layer below (rounded up to 256); none for no "
                     "maximum"},
    [MIN_GROWTH] = {GMR__FIELD(gmr_pool_resource_config, min_growth_bytes),
                    .name = "min_growth",
                    .type = GMR__OPTION_SIZE,
                    .min_value = 1,
                    .help = "smallest chunk asked for when a request needs less"},
    [MAX_GROWTH] = {GMR__FIELD(gmr_pool_resource_config, max_growth_bytes),
                    .name = "max_growth",
                    .type = GMR__OPTION_SIZE,
                    .min_value = 1,
                    .max_value = GMR_MAX_ALLOCATION_BYTES,
                    .help = "largest chunk asked for when a request needs less"},
    [GROWTH_PERCENT] = {GMR__FIELD(gmr_pool_resource_config, growth_percent),
                        .name = "growth_percent",
                        .type = GMR__OPTION_UINT,
                        .max_value = 1000,
                        .help = "a new chunk is this percentage of what the arena holds"},
    [GRANULARITY] = {GMR__FIELD(gmr_pool_resource_config, chunk_granularity_bytes),
                     .name = "granularity",
                     .type = GMR__OPTION_SIZE,
                     .min_value = GMR_DEFAULT_ALIGNMENT,
                     .max_value = (uint64_t)1 << 40,
                     .power_of_two = true,
                     .help = "chunk sizes are multiples of this"},
    [ARENAS] = {GMR__FIELD(gmr_pool_resource_config, arena_count),
                .name = "arenas",
                .type = GMR__OPTION_UINT,
                .max_value = 64,
                .help = "arenas for threads; 0: one per online CPU (at most 64)"},
    [RELEASE_ON_GROWTH] = {GMR__FIELD(gmr_pool_resource_config, release_on_growth),
                           .name = "release_on_growth",
                           .type = GMR__OPTION_BOOL,
                           .help = "give wholly free chunks back before growing"},
    [RECENT_FREES] = {GMR__FIELD(gmr_pool_resource_config, recent_free_count),
                      .name = "recent_frees",
                      .type = GMR__OPTION_UINT,
                      .max_value = 32,
                      .help = "small frees kept unmerged per stream for same-size reuse"},
    [RECENT_FREE_MAX] = {GMR__FIELD(gmr_pool_resource_config, recent_free_max_bytes),
                         .name = "recent_free_max",
                         .type = GMR__OPTION_SIZE,
                         .help = "largest free kept unmerged"},
    GMR__SO_OPTION_DEFS(STREAM_OPTIONS, gmr_pool_resource_config),
};

static const gmr_pool_resource_config defaults = GMR_POOL_RESOURCE_CONFIG_DEFAULT;

/* The C default, with what the spec gives on top (ranges checked: no field loses bits). */
static gmr_pool_resource_config to_config(const gmr__option_value *v) {
  gmr_pool_resource_config c = defaults;
  gmr__options_apply(options, OPTION_COUNT, v, &c);
  return c;
}

/* The pool takes whole units of GMR_DEFAULT_ALIGNMENT bytes: the initial
 * chunk is the initial size rounded up to one. */
static size_t initial_chunk_bytes(size_t initial) {
  size_t rest = initial % GMR_DEFAULT_ALIGNMENT;
  return rest == 0 ? initial : initial + (GMR_DEFAULT_ALIGNMENT - rest); /* initial <= 2^62 */
}

/* "pool option 'a' (x) is above option 'b' (y): lower a or raise b"; x names
 * `a_rounded` too when the pool rounds `a_bytes` up to it. */
static gmr_status above(const gmr__option_value *v, size_t a, size_t a_bytes, size_t a_rounded,
                        size_t b, size_t b_bytes, size_t *blame, char *message,
                        size_t message_bytes) {
  char x[64], y[64], rounded[48], asked[192];
  *blame = v[a].given ? a : b;
  gmr__describe_size_option(a_bytes, v[a].given, x, sizeof x);
  gmr__describe_size_option(b_bytes, v[b].given, y, sizeof y);
  if (a_rounded != a_bytes) {
    gmr__format_size(a_rounded, rounded, sizeof rounded);
    snprintf(asked, sizeof asked, "%s, %s once rounded up to the pool's %zu-byte unit", x,
             rounded, (size_t)GMR_DEFAULT_ALIGNMENT);
  } else {
    snprintf(asked, sizeof asked, "%s", x);
  }
  snprintf(message, message_bytes,
           "pool option '%s' (%s) is above option '%s' (%s): lower %s or raise %s",
           options[a].name, asked, options[b].name, y, options[a].name, options[b].name);
  return GMR_ERR_INVALID_ARGUMENT;
}

/* Options that contradict each other (each is in range on its own). */
static gmr_status check(const gmr__option_value *v, size_t *blame, char *message,
                        size_t message_bytes) {
  gmr_pool_resource_config c = to_config(v);
  if (c.min_growth_bytes > c.max_growth_bytes) {
    return above(v, MIN_GROWTH, c.min_growth_bytes, c.min_growth_bytes, MAX_GROWTH,
                 c.max_growth_bytes, blame, message, message_bytes);
  }
  size_t initial = initial_chunk_bytes(c.initial_pool_bytes);
  if (c.maximum_pool_bytes != 0 && initial > c.maximum_pool_bytes) {
    return above(v, INITIAL, c.initial_pool_bytes, initial, MAX, c.maximum_pool_bytes, blame,
                 message, message_bytes);
  }
  return GMR_OK;
}

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_pool_resource_config config = to_config(values);
  gmr_pool_resource *p = NULL;
  gmr_status st = gmr_pool_resource_create(upstream, &config, &p);
  if (st != GMR_OK && st != GMR_ERR_INVALID_ARGUMENT && config.initial_pool_bytes > 0) {
    gmr__describe_initial_bytes_failure(upstream, initial_chunk_bytes(config.initial_pool_bytes),
                                        config.initial_pool_bytes, "initial", message,
                                        message_bytes);
  }
  *out = gmr_pool_resource_as_resource(p);
  return st;
}

const gmr__component gmr__component_pool = {
    .name = "pool",
    .kind = GMR__COMPONENT_ADAPTOR,
    .help = "coalescing, stream-ordered sub-allocator over chunks of the layer below: best fit, "
            "per-stream free lists with events, arenas for threads (gmr/pool_resource.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .check = check,
    .config_default = &defaults,
};
