/*
 * nccl/component_symmetric.c: `symmetric` in specs, gmr_symmetric_resource
 * (placement that depends only on the sequence of requests, so every rank
 * gets the same offsets).
 */
#include <stdint.h>
#include <stdio.h>

#include "gmr/nccl/symmetric_resource.h"
#include "stack/registry.h"
#include "stack/value.h"

enum { REGION_SIZE, ALIGNMENT, MAX_REGIONS, OPTION_COUNT };

/* The C config reads 0 as "the default": the spec refuses 0 instead (the
 * ranges below), so a written value always means itself. */
static const gmr__option_def options[OPTION_COUNT] = {
    [REGION_SIZE] = {GMR__FIELD(gmr_symmetric_resource_config, region_bytes),
                     .name = "region_size",
                     .type = GMR__OPTION_SIZE,
                     .min_value = 256,
                     .multiple_of = 256,
                     .help = "bytes taken from the upstream per region (a larger request gets a "
                             "region of its own); a multiple of alignment"},
    [ALIGNMENT] = {GMR__FIELD(gmr_symmetric_resource_config, alignment_bytes),
                   .name = "alignment",
                   .type = GMR__OPTION_SIZE,
                   .power_of_two = true, /* and >= 256: gmr_symmetric_resource_create says so */
                   .help = "every block starts at a multiple of this (a power of two >= 256)"},
    [MAX_REGIONS] = {GMR__FIELD(gmr_symmetric_resource_config, max_region_count),
                     .name = "max_regions",
                     .type = GMR__OPTION_UINT,
                     .help = "most regions held at once; 0: no limit"},
};

/* What the config's zeros stand for (no config_default: its fields say 0). */
static bool describe_default(size_t option, char *text, size_t text_bytes) {
  switch (option) {
    case REGION_SIZE:
      gmr__format_size_value((size_t)256 << 20, text, text_bytes); /* the header's 0 */
      return true;
    case ALIGNMENT:
      gmr__format_size_value(4096, text, text_bytes);
      return true;
    case MAX_REGIONS:
      snprintf(text, text_bytes, "0");
      return true;
    default:
      return false;
  }
}

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  gmr_symmetric_resource_config config = GMR_SYMMETRIC_RESOURCE_CONFIG_DEFAULT;
  gmr__options_apply(options, OPTION_COUNT, values, &config);
  gmr_symmetric_resource *r = NULL;
  gmr_failure failure = GMR_FAILURE_INIT;
  gmr_status st = gmr_symmetric_resource_create(upstream, &config, &r, &failure);
  if (st != GMR_OK) snprintf(message, message_bytes, "%s", failure.message);
  *out = gmr_symmetric_resource_as_resource(r);
  return st;
}

const gmr__component gmr__component_symmetric = {
    .name = "symmetric",
    .kind = GMR__COMPONENT_ADAPTOR,
    .help = "first fit over upstream regions whose placement depends only on the sequence of "
            "requests: the same offsets on every rank (gmr/nccl/symmetric_resource.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .describe_default = describe_default,
};
