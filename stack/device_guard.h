/*
 * stack/device_guard.h (internal): the adaptor the per-device registry puts on
 * top of each device's stack. Every call that may reach CUDA through the
 * layers below (allocate, deallocate, record_stream, allocate_capturing)
 * makes the resource's device current for its duration and restores the
 * caller's device after it, so a device's resource can be used from a thread
 * whose current device is another one (PyTorch's alloc_fn gets the device as
 * an argument; RMM's torch shim sets it around each call for the same reason,
 * rapidsai/rmm#1405). Footprint and memory info make no CUDA call and are
 * left to the upstream; trim is walked layer by layer by its dispatch, and
 * the layer that gives memory to CUDA (cuda_resource) makes its own device
 * current.
 *
 * Thread-safe: yes (no state but the upstream pointer, changed only by the
 * registry under its lock while no other thread may use the guard).
 */
#ifndef GMR_STACK_DEVICE_GUARD_H_
#define GMR_STACK_DEVICE_GUARD_H_

#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr__device_guard gmr__device_guard;

/* A guard for `device` over `upstream` (borrowed). GMR_OK, or
 * GMR_ERR_INVALID_ARGUMENT / GMR_ERR_OUT_OF_MEMORY with *out NULL. */
gmr_status gmr__device_guard_create(gmr_resource *upstream, int device, gmr__device_guard **out);

gmr_resource *gmr__device_guard_as_resource(gmr__device_guard *guard);

/* The guard behind `r`, or NULL if `r` is not one. */
gmr__device_guard *gmr__device_guard_from_resource(gmr_resource *r);

/* Point the guard at another upstream (the registry does this when a
 * teardown left only the lower part of a stack). */
void gmr__device_guard_set_upstream(gmr__device_guard *guard, gmr_resource *upstream);

int gmr__device_guard_get_device(const gmr__device_guard *guard);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STACK_DEVICE_GUARD_H_ */
