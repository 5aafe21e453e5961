/*
 * stack/component_tracking.c: `tracking` in specs, gmr_tracking_adaptor.
 */
#include <stdio.h>

#include "gmr/tracking_adaptor.h"
#include "stack/registry.h"
#include "util/books.h"

enum { PER, CHECK_STREAM, MAX_OWNERS, RECENT_FREES, OPTION_COUNT };

/* In gmr_tracking_scope order. */
static const char *const scopes[] = {"stream", "thread", NULL};

/* 0 would mean "the default" to the adaptor; a spec leaves the option out
 * for that, so 0 is refused rather than silently replaced. */
static const gmr__option_def options[OPTION_COUNT] = {
    [PER] = {GMR__FIELD(gmr_tracking_adaptor_config, per),
             .name = "per",
             .type = GMR__OPTION_CHOICE,
             .choices = scopes,
             .help = "count per stream (the allocation's) or per thread (the allocating one)"},
    [CHECK_STREAM] = {GMR__FIELD(gmr_tracking_adaptor_config, check_stream),
                      .name = "check_stream",
                      .type = GMR__OPTION_BOOL,
                      .help = "refuse a free on another stream than the allocation's"},
    [MAX_OWNERS] = {GMR__FIELD(gmr_tracking_adaptor_config, max_owners),
                    .name = "max_owners",
                    .type = GMR__OPTION_UINT,
                    .min_value = 1,
                    .help = "streams or threads with counters of their own"},
    [RECENT_FREES] = {GMR__FIELD(gmr_tracking_adaptor_config, recent_free_count),
                      .name = "recent_frees",
                      .type = GMR__OPTION_UINT,
                      .min_value = 1,
                      .max_value = GMR__BOOKS_MAX_RECENT_FREES,
                      .help = "frees remembered to tell a double free from an unknown pointer"},
};

static const gmr_tracking_adaptor_config defaults = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;

/* The C default, with what the spec gives on top. */
static gmr_tracking_adaptor_config to_config(const gmr__option_value *v) {
  gmr_tracking_adaptor_config c = defaults;
  gmr__options_apply(options, OPTION_COUNT, v, &c);
  return c;
}

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_tracking_adaptor_config config = to_config(values);
  gmr_tracking_adaptor *a = NULL;
  gmr_status st = gmr_tracking_adaptor_create(upstream, &config, &a);
  if (st == GMR_ERR_OUT_OF_MEMORY) {
    snprintf(message, message_bytes,
             "out of host memory for the tables of %zu owners (option 'max_owners') and %zu "
             "remembered frees (option 'recent_frees'): lower them",
             config.max_owners, config.recent_free_count);
  }
  *out = gmr_tracking_adaptor_as_resource(a);
  return st;
}

const gmr__component gmr__component_tracking = {
    .name = "tracking",
    .kind = GMR__COMPONENT_ADAPTOR,
    .help = "books of every live allocation, counters per stream or thread, bad frees refused "
            "(gmr/tracking_adaptor.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .config_default = &defaults,
};
