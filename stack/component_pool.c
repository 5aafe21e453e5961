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
    [INITIAL] = {.name = "initial",
                 .type = GMR__OPTION_SIZE,
                 .max_value = GMR_MAX_ALLOCATION_BYTES,
                 .help = "bytes taken from the layer below at create (rounded up to 256)"},
    /* 0 would mean "no maximum" to the pool: the spec says none for that. */
    [MAX] = {.name = "max",
             .type = GMR__OPTION_SIZE,
             .allow_unlimited = true,
             .min_value = 1,
             .help = "most bytes held from the layer below (rounded up to 256); none for no "
                     "maximum"},
    [MIN_GROWTH] = {.name = "min_growth",
                    .type = GMR__OPTION_SIZE,
                    .min_value = 1,
                    .help = "smallest chunk asked for when a request needs less"},
    [MAX_GROWTH] = {.name = "max_growth",
                    .type = GMR__OPTION_SIZE,
                    .min_value = 1,
                    .max_value = GMR_MAX_ALLOCATION_BYTES,
                    .help = "largest chunk asked for when a request needs less"},
    [GROWTH_PERCENT] = {.name = "growth_percent",
                        .type = GMR__OPTION_UINT,
                        .max_value = 1000,
                        .help = "a new chunk is this percentage of what the arena holds"},
    [GRANULARITY] = {.name = "granularity",
                     .type = GMR__OPTION_SIZE,
                     .min_value = GMR_DEFAULT_ALIGNMENT,
                     .max_value = (uint64_t)1 << 40,
                     .power_of_two = true,
                     .help = "chunk sizes are multiples of this"},
    [ARENAS] = {.name = "arenas",
                .type = GMR__OPTION_UINT,
                .max_value = 64,
                .help = "arenas for threads; 0: one per online CPU (at most 64)"},
    [RELEASE_ON_GROWTH] = {.name = "release_on_growth",
                           .type = GMR__OPTION_BOOL,
                           .help = "give wholly free chunks back before growing"},
    [RECENT_FREES] = {.name = "recent_frees",
                      .type = GMR__OPTION_UINT,
                      .max_value = 32,
                      .help = "small frees kept unmerged per stream for same-size reuse"},
    [RECENT_FREE_MAX] = {.name = "recent_free_max",
                         .type = GMR__OPTION_SIZE,
                         .help = "largest free kept unmerged"},
    GMR__SO_OPTION_DEFS(STREAM_OPTIONS),
};

/* The C default, with what the spec gives on top (ranges checked: no casts lose bits). */
static gmr_pool_resource_config to_config(const gmr__option_value *v) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  if (v[INITIAL].given) c.initial_pool_bytes = v[INITIAL].size;
  if (v[MAX].given) c.maximum_pool_bytes = v[MAX].unlimited ? 0 : v[MAX].size;
  if (v[MIN_GROWTH].given) c.min_growth_bytes = v[MIN_GROWTH].size;
  if (v[MAX_GROWTH].given) c.max_growth_bytes = v[MAX_GROWTH].size;
  if (v[GROWTH_PERCENT].given) c.growth_percent = (uint32_t)v[GROWTH_PERCENT].uint;
  if (v[GRANULARITY].given) c.chunk_granularity_bytes = v[GRANULARITY].size;
  if (v[ARENAS].given) c.arena_count = (uint32_t)v[ARENAS].uint;
  if (v[RELEASE_ON_GROWTH].given) c.release_on_growth = v[RELEASE_ON_GROWTH].boolean;
  if (v[RECENT_FREES].given) c.recent_free_count = (uint32_t)v[RECENT_FREES].uint;
  if (v[RECENT_FREE_MAX].given) c.recent_free_max_bytes = v[RECENT_FREE_MAX].size;
  gmr__so_options_apply(&v[STREAM_OPTIONS], &c.streams);
  return c;
}

static bool describe_default(size_t option, char *text, size_t text_bytes) {
  const gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  switch (option) {
    case INITIAL:
      gmr__format_size_value(c.initial_pool_bytes, text, text_bytes);
      return true;
    case MAX:
      if (c.maximum_pool_bytes == 0) {
        snprintf(text, text_bytes, "none");
      } else {
        gmr__format_size_value(c.maximum_pool_bytes, text, text_bytes);
      }
      return true;
    case MIN_GROWTH:
      gmr__format_size_value(c.min_growth_bytes, text, text_bytes);
      return true;
    case MAX_GROWTH:
      gmr__format_size_value(c.max_growth_bytes, text, text_bytes);
      return true;
    case GROWTH_PERCENT:
      snprintf(text, text_bytes, "%u", (unsigned)c.growth_percent);
      return true;
    case GRANULARITY:
      gmr__format_size_value(c.chunk_granularity_bytes, text, text_bytes);
      return true;
    case ARENAS:
      snprintf(text, text_bytes, "%u", (unsigned)c.arena_count);
      return true;
    case RELEASE_ON_GROWTH:
      return gmr__describe_bool(c.release_on_growth, text, text_bytes);
    case RECENT_FREES:
      snprintf(text, text_bytes, "%u", (unsigned)c.recent_free_count);
      return true;
    case RECENT_FREE_MAX:
      gmr__format_size_value(c.recent_free_max_bytes, text, text_bytes);
      return true;
    default:
      return gmr__so_option_describe(option - STREAM_OPTIONS, &c.streams, text, text_bytes);
  }
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
    .describe_default = describe_default,
};
