/*
 * gmr/device_resource.h: the process-wide resource of each device, for code
 * that has no place to keep a resource pointer: framework allocator hooks
 * (PyTorch's CUDAPluggableAllocator passes no context pointer), libraries
 * deep in a call chain, Python through ctypes. RMM's per_device_resource
 * (get_current_device_resource, get_per_device_resource,
 * set_per_device_resource) with the same meaning.
 *
 * Each device's resource is created lazily, at the first request for that
 * device, with that device current, from the first of:
 *   1. the spec given to gmr_device_resource_set_spec();
 *   2. the environment variable GMR_STACK (read at that moment);
 *   3. GMR_DEVICE_RESOURCE_DEFAULT_SPEC ("vmm"), or, on a device whose driver
 *      offers no virtual memory management (the spec's vmm reports
 *      GMR_ERR_UNSUPPORTED), GMR_DEVICE_RESOURCE_FALLBACK_SPEC.
 * The registry puts a thin adaptor (type name "device_guard") on top of each
 * stack it creates: every call that may reach CUDA makes the resource's
 * device current and restores the caller's device afterwards, so a resource
 * used while another device is current still allocates on its own device.
 * Walk below it with gmr_resource_get_upstream() to reach the spec's layers.
 *
 * Lifetime: the stacks the registry created are destroyed at process exit
 * (atexit, in reverse order of creation; a stack that still has live
 * allocations is left as it is, so memory still referenced at exit is never
 * freed under its user), or earlier by gmr_device_resource_release_all().
 * A resource given to gmr_device_resource_set() is borrowed, never destroyed.
 *
 * Thread-safe: yes for the getters and setters (an internal mutex; the getters'
 * fast path is one atomic load). gmr_device_resource_release_all() is not
 * thread-safe with any other use of the registry or its resources.
 */
#ifndef GMR_DEVICE_RESOURCE_H_
#define GMR_DEVICE_RESOURCE_H_

#include <stddef.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/stack.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The stack a device gets when neither a spec was set nor GMR_STACK is: the
 * same default as gmr.torch and gmr.cupy. It held the least of every stack
 * on the bundled traces and is as fast as `pool` once warm
 * (BENCHMARKS.md, "One default"). */
#define GMR_DEVICE_RESOURCE_DEFAULT_SPEC "vmm"

/* The default on a device without virtual memory management. */
#define GMR_DEVICE_RESOURCE_FALLBACK_SPEC "pool > cuda(kind=async)"

/* Devices 0 .. GMR_DEVICE_RESOURCE_MAX_DEVICES - 1 can have a resource. */
#define GMR_DEVICE_RESOURCE_MAX_DEVICES 64

/**
 * The resource of `device`, creating it if it has none yet (see the banner).
 *
 * Units: `device` is a CUDA device ordinal.
 * Ownership: *out is borrowed from the registry: valid until
 *   gmr_device_resource_release_all() or process exit (or, for a resource the
 *   program set, as long as the program keeps it). `error` (may be NULL)
 *   receives the reason when creation fails.
 * Thread-safe: yes; concurrent first requests for one device create one stack.
 * Stream/device: creating calls CUDA with `device` current (e.g.
 *   cudaMemPoolCreate for cuda(kind=async)) and restores the caller's device;
 *   a request that finds the resource makes no CUDA call.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  out is NULL; `device` is negative, at least
 *                             GMR_DEVICE_RESOURCE_MAX_DEVICES, or not a device
 *                             of this machine; or the spec is malformed
 *                             (error->message: "GMR_STACK:1:5: unknown
 *                             component ..." or "spec:...").
 *   other statuses            creating a layer failed (GMR_ERR_CUDA with no
 *                             GPU, GMR_ERR_OUT_OF_MEMORY); error says which.
 * On failure *out is NULL and nothing was created; the next request tries again.
 * Source: RMM's get_per_device_resource (rmm/mr/per_device_resource.hpp).
 */
GMR_API GMR_NODISCARD gmr_status gmr_device_resource_get(int device, gmr_resource **out,
                                                         gmr_spec_error *error);

/**
 * gmr_device_resource_get() for the calling thread's current device
 * (cudaGetDevice). Thread-safe: yes, as gmr_device_resource_get().
 * Returns as gmr_device_resource_get(), and GMR_ERR_CUDA
 * when the current device cannot be read (no driver); then error->message
 * says so. Source: RMM's get_current_device_resource.
 */
GMR_API GMR_NODISCARD gmr_status gmr_device_resource_get_current(gmr_resource **out,
                                                                 gmr_spec_error *error);

/**
 * Make `resource` the resource of `device` from now on; NULL goes back to
 * the registry's own (the stack it created, or a new one at the next
 * request). The previous resource is returned in *out_previous (may be NULL
 * as an argument; receives NULL when the device had none): a stack the
 * registry created stays alive and owned by the registry, so requests that
 * already hold it keep working.
 *
 * Ownership: `resource` is borrowed: it must stay valid while it is the
 *   device's resource and while code that fetched it may still use it; the
 *   registry never destroys it. It should belong to `device` (not checked).
 * Thread-safe: yes; a concurrent get may return the old or the new resource.
 * Stream/device: no CUDA call except reading the device count.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (device out of range as above, or
 * `resource` not NULL and not a valid resource); GMR_ERR_CUDA (the device
 * count cannot be read). On failure nothing changed.
 * Source: RMM's set_per_device_resource.
 */
GMR_API GMR_NODISCARD gmr_status gmr_device_resource_set(int device, gmr_resource *resource,
                                                         gmr_resource **out_previous);

/**
 * Use `spec` for every device resource the registry creates from now on,
 * in place of GMR_STACK and the default; NULL goes back to GMR_STACK / the
 * default. Resources created before keep their spec.
 *
 * Ownership: `spec` is copied. `error` (may be NULL) receives the reason for
 *   a malformed spec.
 * Thread-safe: yes. Stream/device: no CUDA call (the spec is checked with
 *   gmr_stack_check(), which loads and unloads policy plugins it names).
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (malformed spec: error->message
 * says where); GMR_ERR_OUT_OF_MEMORY. On failure the previous spec stays.
 */
GMR_API GMR_NODISCARD gmr_status gmr_device_resource_set_spec(const char *spec,
                                                              gmr_spec_error *error);

/**
 * The spec the resource of `device` was created from, or NULL when the
 * registry created none for it (never asked, or released). Ownership: owned by
 * the registry, valid until that resource is released. Thread-safe: yes.
 */
GMR_API const char *gmr_device_resource_get_spec(int device);

/**
 * Destroy the stacks the registry created, newest first, as process exit
 * does, and forget resources the program set. A device whose stack refuses
 * (GMR_ERR_BUSY: live allocations) keeps a working resource made of the
 * layers that refused and those below them, and the walk goes on with the
 * other devices.
 * Thread-safe: no; no other thread may use the registry or its resources.
 * Stream/device: destroying may synchronise and free device memory.
 * Returns GMR_OK when every stack is gone, else the first failure
 * (GMR_ERR_BUSY) of a stack's destroy.
 */
GMR_API GMR_NODISCARD gmr_status gmr_device_resource_release_all(void);

#ifdef __cplusplus
}
#endif

#endif /* GMR_DEVICE_RESOURCE_H_ */
