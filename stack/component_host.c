/*
 * stack/component_host.c: `host` in specs, gmr_host_resource (no options).
 */
#include "gmr/host_resource.h"
#include "stack/registry.h"

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  (void)values;
  (void)upstream;
  (void)message;
  (void)message_bytes;
  gmr_host_resource *r = NULL;
  gmr_status st = gmr_host_resource_create(&r);
  *out = gmr_host_resource_as_resource(r);
  return st;
}

const gmr__component gmr__component_host = {
    .name = "host",
    .kind = GMR__COMPONENT_RESOURCE,
    .help = "pageable host memory (aligned_alloc); no CUDA",
    .options = NULL,
    .option_count = 0,
    .create = create,
};
