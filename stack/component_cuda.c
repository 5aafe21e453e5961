/*
 * stack/component_cuda.c: `cuda` in specs, gmr_cuda_resource.
 */
#include <stdint.h>
#include <stdio.h>

#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "stack/registry.h"
#include "stack/value.h"

enum { KIND, DEVICE, RELEASE_THRESHOLD, OPTION_COUNT };

/* In gmr_cuda_kind order. */
static const char *const kinds[] = {"device", "async", "managed", "pinned", NULL};

static const gmr__option_def options[OPTION_COUNT] = {
    [KIND] = {GMR__FIELD(gmr_cuda_resource_config, kind),
              .name = "kind",
              .type = GMR__OPTION_CHOICE,
              .choices = kinds,
              .help = "device (cudaMalloc), async (cudaMallocFromPoolAsync on a pool of its own), "
                      "managed (cudaMallocManaged) or pinned (cudaHostAlloc)"},
    [DEVICE] = {GMR__FIELD(gmr_cuda_resource_config, device),
                .name = "device",
                .type = GMR__OPTION_DEVICE,
                .help = "device ordinal, or current (the calling thread's device at create)"},
    [RELEASE_THRESHOLD] = {GMR__FIELD(gmr_cuda_resource_config, release_threshold_bytes),
                           .name = "release_threshold",
                           .type = GMR__OPTION_SIZE,
                           .allow_unlimited = true,
                           .unlimited_field = UINT64_MAX,
                           .unlimited_name = "max",
                           .help = "async: bytes the pool keeps reserved at synchronisation "
                                   "(cudaMemPoolAttrReleaseThreshold); max keeps everything"},
};

static const gmr_cuda_resource_config defaults = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;

/* What to change when the resource could not be made (the device ordinal
 * was checked against the count before). */
static void explain(gmr_status st, const gmr_cuda_resource_config *config, char *message,
                    size_t message_bytes) {
  int device = config->device;
  if (device == GMR_CURRENT_DEVICE && gmr_device_get_current(&device) != GMR_OK) device = 0;
  if (st == GMR_ERR_UNSUPPORTED) {
    snprintf(message, message_bytes,
             "kind=async needs CUDA memory pools, which device %d does not support "
             "(cudaDevAttrMemoryPoolsSupported is 0): use kind=device",
             device);
  } else if (st == GMR_ERR_OUT_OF_MEMORY && config->kind == GMR_CUDA_KIND_ASYNC) {
    snprintf(message, message_bytes,
             "out of memory while creating it (kind=async creates a cudaMemPool_t on device %d): "
             "free device memory, or use kind=device",
             device);
  } else if (st == GMR_ERR_CUDA) {
    snprintf(message, message_bytes,
             "a CUDA call failed (cudaGetDeviceCount, cudaGetDevice, or for kind=async "
             "cudaMemPoolCreate): check that a GPU and its driver are there (nvidia-smi)");
  }
}

static gmr_status create(const gmr__option_value *values, gmr_resource *upstream,
                         gmr_resource **out, char *message, size_t message_bytes) {
  (void)upstream;
  gmr_cuda_resource_config config = defaults;
  gmr__options_apply(options, OPTION_COUNT, values, &config);
  gmr_cuda_resource *r = NULL;
  gmr_status st = gmr_cuda_resource_create(&config, &r);
  if (st != GMR_OK) explain(st, &config, message, message_bytes);
  *out = gmr_cuda_resource_as_resource(r);
  return st;
}

const gmr__component gmr__component_cuda = {
    .name = "cuda",
    .kind = GMR__COMPONENT_RESOURCE,
    .help = "device memory from the CUDA runtime (gmr/cuda_resource.h)",
    .options = options,
    .option_count = OPTION_COUNT,
    .create = create,
    .config_default = &defaults,
};
