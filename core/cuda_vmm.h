/*
 * core/cuda_vmm.h (internal): the CUDA driver's virtual memory management
 * (VMM) API, as part of the one CUDA layer.
 *
 * cuMemAddressReserve reserves device virtual addresses, cuMemCreate makes a
 * physical allocation (a handle), cuMemMap puts a handle at a reserved
 * address, cuMemSetAccess makes a mapped range readable and writable by
 * devices (mapping alone gives no access), cuMemUnmap and cuMemRelease undo
 * them, cuMemAddressFree gives the addresses back. One handle may be mapped
 * at two addresses at once: that is what lets a pool move memory to a new
 * address without copying it.
 *
 * The driver API has no static library: the real table (cuda_vmm_real.c)
 * takes its entry points from the runtime at first use
 * (cudaGetDriverEntryPointByVersion), so gmr never links libcuda. The
 * simulation (cuda_sim/sim_vmm.c) emulates the calls on host memory with the
 * driver's rules and error codes, under the simulation's lock, with call
 * counts and injectable failures (gmr/sim/cuda_sim.h).
 *
 * gmr__cuda_vmm(ops) gives the table that goes with a CUDA layer table:
 * a resource keeps both for its whole life. Every slot returns the driver's
 * CUresult (whose numbers match cudaError_t for every code gmr maps), except
 * the runtime call device_can_access_peer (cudaError_t). Copies go through the
 * runtime table (gmr__cuda_ops::memcpy_async).
 * Addresses are CUdeviceptr values; in the simulation they are host
 * addresses.
 *
 * Thread-safe: yes; each slot is as thread-safe as the call it stands for.
 */
#ifndef GMR_CORE_CUDA_VMM_H_
#define GMR_CORE_CUDA_VMM_H_

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif
#include <stddef.h>

#include "core/cuda_layer.h"
#include "core/extension.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What cuMemCreate / cuMemGetAllocationGranularity are asked for: pinned
 * device memory on `device`, with these export handle types requested
 * (CUmemAllocationHandleType bits: POSIX file descriptor, fabric) and the
 * GPUDirect RDMA flag (allocFlags.gpuDirectRDMACapable). */
typedef struct gmr__vmm_prop {
  int device;
  unsigned handle_types;
  bool gpu_direct_rdma;
} gmr__vmm_prop;

typedef struct gmr__cuda_vmm_ops {
  /* Make the driver API usable for `device` from this thread: load the entry
   * points (once per process) and make sure the device's primary context
   * exists. Not a CUDA call of its own: neither counted nor injectable. */
  CUresult (*init)(int device);
  /* cuDeviceGetAttribute on the device with runtime ordinal `device`. */
  CUresult (*device_get_attribute)(int *value, CUdevice_attribute attr, int device);
  /* cuMemGetAllocationGranularity, MINIMUM or RECOMMENDED. */
  CUresult (*get_granularity)(size_t *granularity_bytes, const gmr__vmm_prop *prop,
                              bool recommended);
  /* cuMemAddressReserve with no address hint and no flags. */
  CUresult (*address_reserve)(CUdeviceptr *ptr, size_t bytes, size_t alignment_bytes);
  CUresult (*address_free)(CUdeviceptr ptr, size_t bytes);
  /* cuMemCreate of pinned device memory (flags 0). */
  CUresult (*create)(CUmemGenericAllocationHandle *handle, size_t bytes,
                     const gmr__vmm_prop *prop);
  CUresult (*release)(CUmemGenericAllocationHandle handle);
  /* cuMemMap of `handle` from offset 0 (the only offset CUDA allows). */
  CUresult (*map)(CUdeviceptr ptr, size_t bytes, CUmemGenericAllocationHandle handle);
  CUresult (*unmap)(CUdeviceptr ptr, size_t bytes);
  /* cuMemSetAccess: read-write for each of `devices` (ordinals). */
  CUresult (*set_access)(CUdeviceptr ptr, size_t bytes, const int *devices, size_t device_count);
  /* cuMemRetainAllocationHandle: the handle mapped at `ptr`, with one more
   * reference that a cuMemRelease must drop (NCCL's registration path). */
  CUresult (*retain_allocation_handle)(CUmemGenericAllocationHandle *handle, CUdeviceptr ptr);
  /* cuMemGetAddressRange: the extent [*base, *base + *bytes) of the
   * allocation that holds `ptr`: for VMM memory the one cuMemMap mapping it
   * is in (so a range over several physical allocations answers per
   * allocation), for cudaMalloc memory the whole allocation.
   * CUDA_ERROR_NOT_FOUND for an address the driver has no memory at (never
   * allocated, freed, or reserved but unmapped). NCCL registers buffers per
   * such extent (its src/transport/p2p.cc), so gmr splits what it registers
   * the same way. */
  CUresult (*get_address_range)(CUdeviceptr *base, size_t *bytes, CUdeviceptr ptr);
  /* cudaDeviceCanAccessPeer(can, device, peer). */
  cudaError_t (*device_can_access_peer)(int *can_access, int device, int peer);
  /* cuGetErrorName ("CUDA_ERROR_OUT_OF_MEMORY"); never NULL. */
  const char *(*error_name)(CUresult err);
} gmr__cuda_vmm_ops;

extern const gmr__cuda_vmm_ops gmr__cuda_vmm_real_ops;
extern const gmr__cuda_vmm_ops gmr__cuda_vmm_sim_ops;

/* The VMM table that goes with the CUDA layer table `ops` (real or simulated). */
static inline const gmr__cuda_vmm_ops *gmr__cuda_vmm(const gmr__cuda_ops *ops) {
  return ops->vmm;
}

/* CUDA_ERROR_OUT_OF_MEMORY -> GMR_ERR_OUT_OF_MEMORY, stream-capture errors ->
 * GMR_ERR_CAPTURE_UNSAFE, CUDA_SUCCESS -> GMR_OK, anything else -> GMR_ERR_CUDA. */
gmr_status gmr__status_from_cu(CUresult err);

/* Record a failed driver call in `failure` (cuda_error = the CUresult, a
 * message naming `call`, the error's name and code, and `detail` when not
 * NULL). Returns the mapped status. `failure` may be NULL. */
GMR_EXTENSION_API
gmr_status gmr__cu_fail(const gmr__cuda_vmm_ops *vmm, gmr_failure *failure, const char *call,
                        CUresult err, const char *detail);

/* Ask for what ncclMemAlloc asks for (NCCL src/allocator.cc) on
 * prop->device: export handle type POSIX file descriptor, plus fabric where
 * the device supports it, and GPUDirect RDMA where the device supports it
 * with VMM. Two cuDeviceGetAttribute calls. */
GMR_EXTENSION_API
void gmr__vmm_prop_for_nccl(const gmr__cuda_vmm_ops *vmm, gmr__vmm_prop *prop);

#ifndef __cplusplus
/* cuMemCreate of `bytes` with *prop, without fabric handles once
 * *fabric_refused is set. A driver that refuses fabric handles
 * (CUDA_ERROR_NOT_PERMITTED or NOT_SUPPORTED without an IMEX channel, as
 * NCCL sees it) is asked again without them and *fabric_refused is set, so
 * every later call that shares the flag asks without them (NCCL's retry).
 * *prop is only read; the flag is the one thing written (relaxed atomics):
 * any thread, no lock. Returns the driver's result. Declared for C only
 * (C11 atomics). */
GMR_EXTENSION_API
CUresult gmr__vmm_create_or_drop_fabric(const gmr__cuda_vmm_ops *vmm,
                                        CUmemGenericAllocationHandle *handle, size_t bytes,
                                        const gmr__vmm_prop *prop, atomic_bool *fabric_refused);
#endif

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_CUDA_VMM_H_ */
