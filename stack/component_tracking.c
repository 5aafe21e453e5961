/*
 * stack/component_tracking.c: `tracking` in specs, gmr_tracking_adaptor.
 */
#include "gmr/tracking_adaptor.h"
#include "stack/registry.h"

enum { PER, CHECK_STREAM, MAX_OWNERS, RECENT_FREES, OPTION_COUNT };

static const char *const scopes[] = {"stream", "thread", NULL};

static const gmr__option_def options[OPTION_COUNT] = {
    [PER] = {"per", GMR__OPTION_CHOICE, "stream", false, false, scopes,
             "count per stream (the allocation's) or per thread (the allocating one)"},
    [CHECK_STREAM] = {"check_stream", GMR__OPTION_BOOL, "true", false, false, NULL,
                      "refuse a free on another stream than the allocation's"},
    [MAX_OWNERS] = {"max_owners", GMR__OPTION_UINT, "256", false, false, NULL,
                    "streams or threads with counters of their own"},
    [RECENT_FREES] = {"recent_frees", GMR__OPTION_UINT, "4096", false, false, NULL,
                      "frees remembered to tell a double free from an unknown pointer"},
};

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  (void)message;
  (void)message_bytes;
  gmr_tracking_adaptor_config config = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  config.per = values[PER].choice == 1 ? GMR_TRACKING_PER_THREAD : GMR_TRACKING_PER_STREAM;
  config.check_stream = values[CHECK_STREAM].boolean;
  config.max_owners = (size_t)values[MAX_OWNERS].uint;
  config.recent_free_count = (size_t)values[RECENT_FREES].uint;
  gmr_tracking_adaptor *a = NULL;
  gmr_status st = gmr_tracking_adaptor_create(upstream, &config, &a);
  *out = gmr_tracking_adaptor_as_resource(a);
  return st;
}

const gmr__component gmr__component_tracking = {
    "tracking", GMR__COMPONENT_ADAPTOR,
    "books of every live allocation, counters per stream or thread, bad frees refused "
    "(gmr/tracking_adaptor.h)",
    options, OPTION_COUNT, create,
};
