/*
 * stack/component_symmetric.c: `symmetric` in specs, gmr_symmetric_resource
 * (placement that depends only on the sequence of requests, so every rank
 * gets the same offsets).
 */
#include <stdio.h>

#include "gmr/symmetric_resource.h"
#include "stack/registry.h"

enum { REGION_SIZE, ALIGNMENT, MAX_REGIONS, OPTION_COUNT };

static const gmr__option_def options[OPTION_COUNT] = {
    [REGION_SIZE] = {"region_size", GMR__OPTION_SIZE, "256MiB", false, false, NULL,
                     "bytes taken from the upstream per region (a larger request gets a region "
                     "of its own)",
                     0},
    [ALIGNMENT] = {"alignment", GMR__OPTION_SIZE, "4KiB", false, false, NULL,
                   "every block starts at a multiple of this (a power of two >= 256)", 0},
    [MAX_REGIONS] = {"max_regions", GMR__OPTION_UINT, "0", false, false, NULL,
                     "most regions held at once; 0: no limit", 0},
};

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_symmetric_resource_config config = GMR_SYMMETRIC_RESOURCE_CONFIG_DEFAULT;
  config.region_bytes = values[REGION_SIZE].size;
  config.alignment_bytes = values[ALIGNMENT].size;
  config.max_region_count =
      values[MAX_REGIONS].uint > SIZE_MAX ? SIZE_MAX : (size_t)values[MAX_REGIONS].uint;
  gmr_symmetric_resource *r = NULL;
  gmr_failure failure;
  gmr_status st = gmr_symmetric_resource_create(upstream, &config, &r, &failure);
  if (st != GMR_OK) snprintf(message, message_bytes, "%s", failure.message);
  *out = gmr_symmetric_resource_as_resource(r);
  return st;
}

const gmr__component gmr__component_symmetric = {
    "symmetric", GMR__COMPONENT_ADAPTOR,
    "first fit over upstream regions whose placement depends only on the sequence of requests: "
    "the same offsets on every rank (gmr/symmetric_resource.h)",
    options, OPTION_COUNT, create,
};
