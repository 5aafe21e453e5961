/*
 * stack/component_cuda.c: `cuda` in specs, gmr_cuda_resource.
 */
#include <stdint.h>

#include "gmr/cuda_resource.h"
#include "stack/registry.h"

enum { KIND, DEVICE, RELEASE_THRESHOLD, OPTION_COUNT };

/* In gmr_cuda_kind order. */
static const char *const kinds[] = {"device", "async", "managed", "pinned", NULL};

static const gmr__option_def options[OPTION_COUNT] = {
    [KIND] = {"kind", GMR__OPTION_CHOICE, "device", false, false, kinds,
              "device (cudaMalloc), async (cudaMallocFromPoolAsync on a pool of its own), "
              "managed (cudaMallocManaged) or pinned (cudaHostAlloc)"},
    [DEVICE] = {"device", GMR__OPTION_DEVICE, "current", false, false, NULL,
                "device ordinal, or current (the calling thread's device at create)"},
    [RELEASE_THRESHOLD] = {"release_threshold", GMR__OPTION_SIZE, "max", false, true, NULL,
                           "async: bytes the pool keeps reserved at synchronisation "
                           "(cudaMemPoolAttrReleaseThreshold); max keeps everything"},
};

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  (void)upstream;
  (void)message;
  (void)message_bytes;
  gmr_cuda_resource_config config = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  config.kind = (gmr_cuda_kind)values[KIND].choice;
  config.device = values[DEVICE].device < 0 ? GMR_CURRENT_DEVICE : values[DEVICE].device;
  config.release_threshold_bytes =
      values[RELEASE_THRESHOLD].unlimited ? UINT64_MAX : (uint64_t)values[RELEASE_THRESHOLD].size;
  gmr_cuda_resource *r = NULL;
  gmr_status st = gmr_cuda_resource_create(&config, &r);
  *out = gmr_cuda_resource_as_resource(r);
  return st;
}

const gmr__component gmr__component_cuda = {
    "cuda", GMR__COMPONENT_RESOURCE, "device memory from the CUDA runtime (gmr/cuda_resource.h)",
    options, OPTION_COUNT, create,
};
