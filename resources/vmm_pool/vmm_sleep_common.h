/*
 * resources/vmm_pool/vmm_sleep_common.h (internal): what sleep and wake do
 * the same way in both placements of gmr_vmm_pool_resource
 * (vmm_pool_sleep.c, vmm_fine_sleep.c): the first step of sleep, and the
 * contents sleep saves to pinned host memory and wake copies back.
 *
 * Every copy runs on the default stream and is waited for with
 * cudaStreamSynchronize before the call returns (the pages go right after
 * a save; a woken allocation is used right after a restore).
 *
 * Thread-safe: the functions touch only the caller's array; the caller
 * holds its pool's or engine's lock.
 */
#ifndef GMR_RESOURCES_VMM_POOL_VMM_SLEEP_COMMON_H_
#define GMR_RESOURCES_VMM_POOL_VMM_SLEEP_COMMON_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "gmr/vmm_pool_resource.h"

/* Sleep's first step: make `device` current (*saved_device keeps the
 * caller's for gmr__cuda_device_leave(); *entered says whether it was
 * made current) and wait for all its work (cudaDeviceSynchronize). */
gmr_status gmr__vmm_sleep_synchronize(const gmr__cuda_ops *cuda, int device, int *saved_device,
                                      bool *entered, gmr_failure *failure);

/* One allocation's contents. bytes == 0: nothing to copy for it. */
typedef struct gmr__vmm_copy {
  uintptr_t addr; /* device address */
  size_t bytes;
  void *host; /* the pinned host copy, or NULL */
} gmr__vmm_copy;

/* Whether sleep's options select an allocation of `tag` to be saved. */
bool gmr__vmm_sleep_saves(const gmr_vmm_pool_sleep_options *o, uint32_t tag);

/* Copy every copies[i] with bytes > 0 to new pinned host memory (.host).
 * On failure every host copy is freed again (all .host NULL). */
gmr_status gmr__vmm_copies_save(const gmr__cuda_ops *cuda, gmr__vmm_copy *copies, size_t count,
                                gmr_failure *failure);

/* Copy every copies[i] with a host copy back to its device address. The
 * host copies stay (the caller frees them once it keeps the result). */
gmr_status gmr__vmm_copies_restore(const gmr__cuda_ops *cuda, const gmr__vmm_copy *copies,
                                   size_t count, gmr_failure *failure);

/* Free every host copy (all .host NULL afterwards). */
void gmr__vmm_copies_drop(const gmr__cuda_ops *cuda, gmr__vmm_copy *copies, size_t count);

#endif /* GMR_RESOURCES_VMM_POOL_VMM_SLEEP_COMMON_H_ */
