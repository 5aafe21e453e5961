/*
 * core/cuda_vmm_real.c (internal): the VMM table of the real CUDA layer
 * (see cuda_vmm.h). Driver entry points come from the runtime
 * (cudaGetDriverEntryPointByVersion) once per process, so gmr links only the
 * static runtime, never libcuda.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/cuda_counts.h"
#include "core/cuda_vmm.h"

/* The ABI every entry point below has had since CUDA 10.2 / 11.0; asking for
 * 12.0 works with any driver gmr supports (CUDA 12 and 13). */
#define ENTRY_POINT_VERSION 12000

typedef CUresult (*get_error_name_fn)(CUresult, const char **);
typedef CUresult (*device_get_fn)(CUdevice *, int);
typedef CUresult (*device_get_attribute_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*get_granularity_fn)(size_t *, const CUmemAllocationProp *,
                                       CUmemAllocationGranularity_flags);
typedef CUresult (*address_reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                                       unsigned long long);
typedef CUresult (*address_free_fn)(CUdeviceptr, size_t);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*set_access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*retain_fn)(CUmemGenericAllocationHandle *, void *);
typedef CUresult (*address_range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);

static struct {
  CUresult status; /* CUDA_SUCCESS once every entry point was found */
  get_error_name_fn get_error_name;
  device_get_fn device_get;
  device_get_attribute_fn device_get_attribute;
  get_granularity_fn get_granularity;
  address_reserve_fn address_reserve;
  address_free_fn address_free;
  create_fn create;
  release_fn release;
  map_fn map;
  unmap_fn unmap;
  set_access_fn set_access;
  retain_fn retain;
  address_range_fn address_range;
} entry;

static pthread_once_t entry_once = PTHREAD_ONCE_INIT;

/* One entry point into the function pointer at `slot` (`slot_bytes` wide);
 * false (and entry.status set) when the driver lacks it. The runtime hands
 * entry points out as void *, which has the representation of a function
 * pointer on every platform CUDA supports; memcpy keeps the types apart. */
static bool load(const char *symbol, void *slot, size_t slot_bytes) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err =
      cudaGetDriverEntryPointByVersion(symbol, &fn, ENTRY_POINT_VERSION, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == NULL ||
      slot_bytes != sizeof fn) {
    /* A runtime error (no driver, no device) says more than "not found". */
    entry.status = err != cudaSuccess ? (CUresult)err : CUDA_ERROR_NOT_FOUND;
    return false;
  }
  memcpy(slot, &fn, sizeof fn);
  return true;
}

static void load_all(void) {
  entry.status = CUDA_SUCCESS;
  (void)(load("cuGetErrorName", &entry.get_error_name, sizeof entry.get_error_name) &&
         load("cuDeviceGet", &entry.device_get, sizeof entry.device_get) &&
         load("cuDeviceGetAttribute", &entry.device_get_attribute,
              sizeof entry.device_get_attribute) &&
         load("cuMemGetAllocationGranularity", &entry.get_granularity,
              sizeof entry.get_granularity) &&
         load("cuMemAddressReserve", &entry.address_reserve, sizeof entry.address_reserve) &&
         load("cuMemAddressFree", &entry.address_free, sizeof entry.address_free) &&
         load("cuMemCreate", &entry.create, sizeof entry.create) &&
         load("cuMemRelease", &entry.release, sizeof entry.release) &&
         load("cuMemMap", &entry.map, sizeof entry.map) &&
         load("cuMemUnmap", &entry.unmap, sizeof entry.unmap) &&
         load("cuMemSetAccess", &entry.set_access, sizeof entry.set_access) &&
         load("cuMemRetainAllocationHandle", &entry.retain, sizeof entry.retain) &&
         load("cuMemGetAddressRange", &entry.address_range, sizeof entry.address_range));
}

static CUresult loaded(void) {
  pthread_once(&entry_once, load_all);
  return entry.status;
}

static CUresult real_init(int device) {
  CUresult st = loaded();
  if (st != CUDA_SUCCESS) return st;
  /* The driver calls act on the current context: make the runtime create
   * the device's primary context (cudaFree(NULL) is the usual way). */
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(&gmr__cuda_real_ops, device, &saved);
  if (err == cudaSuccess) {
    err = cudaFree(NULL);
    gmr__cuda_device_leave(&gmr__cuda_real_ops, saved);
  }
  return (CUresult)err;
}

static CUresult real_device_get_attribute(int *value, CUdevice_attribute attr, int device) {
  CUresult st = loaded();
  CUdevice dev = 0;
  if (st == CUDA_SUCCESS) st = entry.device_get(&dev, device);
  if (st == CUDA_SUCCESS) st = entry.device_get_attribute(value, attr, dev);
  return st;
}

static void fill_prop(CUmemAllocationProp *p, const gmr__vmm_prop *prop) {
  *p = (CUmemAllocationProp){0};
  p->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p->requestedHandleTypes = (CUmemAllocationHandleType)prop->handle_types;
  p->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p->location.id = prop->device;
  p->allocFlags.gpuDirectRDMACapable = prop->gpu_direct_rdma ? 1 : 0;
}

static CUresult real_get_granularity(size_t *granularity_bytes, const gmr__vmm_prop *prop,
                                     bool recommended) {
  CUresult st = loaded();
  if (st != CUDA_SUCCESS) return st;
  CUmemAllocationProp p;
  fill_prop(&p, prop);
  return entry.get_granularity(granularity_bytes, &p,
                               recommended ? CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
                                           : CU_MEM_ALLOC_GRANULARITY_MINIMUM);
}

static CUresult real_address_reserve(CUdeviceptr *ptr, size_t bytes, size_t alignment_bytes) {
  gmr__cuda_count(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE);
  CUresult st = loaded();
  return st != CUDA_SUCCESS ? st : entry.address_reserve(ptr, bytes, alignment_bytes, 0, 0);
}

static CUresult real_address_free(CUdeviceptr ptr, size_t bytes) {
  gmr__cuda_count(GMR_CUDA_CALL_MEM_ADDRESS_FREE);
  CUresult st = loaded();
  return st != CUDA_SUCCESS ? st : entry.address_free(ptr, bytes);
}

static CUresult real_create(CUmemGenericAllocationHandle *handle, size_t bytes,
                            const gmr__vmm_prop *prop) {
  gmr__cuda_count(GMR_CUDA_CALL_MEM_CREATE);
  CUresult st = loaded();
  if (st != CUDA_SUCCESS) return st;
  CUmemAllocationProp p;
  fill_prop(&p, prop);
  return entry.create(handle, bytes, &p, 0);
}

static CUresult real_release(CUmemGenericAllocationHandle handle) {
  gmr__cuda_count(GMR_CUDA_CALL_MEM_RELEASE);
  CUresult st = loaded();
  return st != CUDA_SUCCESS ? st : entry.release(handle);
}

static CUresult real_map(CUdeviceptr ptr, size_t bytes, CUmemGenericAllocationHandle handle) {
  gmr__cuda_count(GMR_CUDA_CALL_MEM_MAP);
  CUresult st = loaded();
  return st != CUDA_SUCCESS ? st : entry.map(ptr, bytes, 0, handle, 0);
}

static CUresult real_unmap(CUdeviceptr ptr, size_t bytes) {
  gmr__cuda_count(GMR_CUDA_CALL_MEM_UNMAP);
  CUresult st = loaded();
  return st != CUDA_SUCCESS ? st : entry.unmap(ptr, bytes);
}

/* More devices than any machine gmr runs on; set_access is refused past it. */
#define MAX_ACCESS_DEVICES 64

static CUresult real_set_access(CUdeviceptr ptr, size_t bytes, const int *devices,
                                size_t device_count) {
  gmr__cuda_count(GMR_CUDA_CALL_MEM_SET_ACCESS);
  CUresult st = loaded();
  if (st != CUDA_SUCCESS) return st;
  if (device_count == 0 || device_count > MAX_ACCESS_DEVICES) return CUDA_ERROR_INVALID_VALUE;
  CUmemAccessDesc desc[MAX_ACCESS_DEVICES];
  for (size_t i = 0; i < device_count; ++i) {
    desc[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc[i].location.id = devices[i];
    desc[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  return entry.set_access(ptr, bytes, desc, device_count);
}

static CUresult real_retain_allocation_handle(CUmemGenericAllocationHandle *handle,
                                              CUdeviceptr ptr) {
  CUresult st = loaded();
  return st != CUDA_SUCCESS ? st : entry.retain(handle, (void *)(uintptr_t)ptr);
}

static CUresult real_get_address_range(CUdeviceptr *base, size_t *bytes, CUdeviceptr ptr) {
  CUresult st = loaded();
  return st != CUDA_SUCCESS ? st : entry.address_range(base, bytes, ptr);
}

static cudaError_t real_device_can_access_peer(int *can_access, int device, int peer) {
  return cudaDeviceCanAccessPeer(can_access, device, peer);
}

static const char *real_error_name(CUresult err) {
  const char *name = NULL;
  if (loaded() != CUDA_SUCCESS || entry.get_error_name(err, &name) != CUDA_SUCCESS ||
      name == NULL) {
    /* The runtime's names cover the same numbers for every code gmr sees. */
    return cudaGetErrorName((cudaError_t)err);
  }
  return name;
}

const gmr__cuda_vmm_ops gmr__cuda_vmm_real_ops = {
    .init = real_init,
    .device_get_attribute = real_device_get_attribute,
    .get_granularity = real_get_granularity,
    .address_reserve = real_address_reserve,
    .address_free = real_address_free,
    .create = real_create,
    .release = real_release,
    .map = real_map,
    .unmap = real_unmap,
    .set_access = real_set_access,
    .retain_allocation_handle = real_retain_allocation_handle,
    .get_address_range = real_get_address_range,
    .device_can_access_peer = real_device_can_access_peer,
    .error_name = real_error_name,
};
