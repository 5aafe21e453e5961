/*
 * core/cuda_sim/sim_device.c (internal): devices and memory: device queries,
 * cudaMalloc/cudaFree, managed and pinned memory, backed by host memory.
 */
/* mmap flags MAP_ANONYMOUS and MAP_NORESERVE are not in strict C11/POSIX. */
#define _DEFAULT_SOURCE

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/cuda_sim/sim_internal.h"

/* Large simulated allocations are mapped with MAP_NORESERVE: pages cost
 * nothing until touched, so a test can "allocate" tens of GiB of device
 * memory on a machine with less RAM, as replays of real traces do. */
#define GMR__SIM_MAP_THRESHOLD_BYTES ((size_t)1 << 20)

static void *host_backing_alloc(size_t bytes, bool *mapped) {
  *mapped = bytes >= GMR__SIM_MAP_THRESHOLD_BYTES;
  if (!*mapped) return aligned_alloc(GMR__SIM_ALIGNMENT, bytes);
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void host_backing_free(void *p, size_t bytes, bool mapped) {
  if (p == NULL) return;
  if (mapped) {
    munmap(p, bytes);
  } else {
    free(p);
  }
}

/* Take `bytes` of simulated memory on `device` (-1: pinned host) and back it
 * with host memory. The rounding to 256 bytes mirrors cudaMalloc's alignment. */
cudaError_t gmr__sim_alloc(void **ptr, size_t bytes, int device, gmr__sim_memory_kind kind,
                           gmr__sim_pool *pool) {
  *ptr = NULL;
  if (bytes == 0) return cudaSuccess; /* cudaMalloc(0) succeeds with NULL */
  if (bytes > gmr__sim.config.device_memory_bytes) return cudaErrorMemoryAllocation;
  size_t rounded = gmr__sim_round_up(bytes);
  if (device >= 0 && kind != GMR__SIM_MEM_POOL &&
      gmr__sim.device[device].used_bytes + rounded > gmr__sim.config.device_memory_bytes) {
    return cudaErrorMemoryAllocation;
  }
  gmr__sim_allocation *a = malloc(sizeof *a);
  bool mapped = false;
  void *mem = host_backing_alloc(rounded, &mapped);
  if (a == NULL || mem == NULL ||
      !gmr__u64_map_put(&gmr__sim.allocations, (uint64_t)(uintptr_t)mem, (uint64_t)(uintptr_t)a)) {
    free(a);
    host_backing_free(mem, rounded, mapped);
    return cudaErrorMemoryAllocation;
  }
  a->bytes = rounded;
  a->mapped = mapped;
  a->device = device;
  a->kind = kind;
  a->pool = pool;
  if (kind == GMR__SIM_MEM_POOL) {
    gmr__sim.device[device].allocation_count++;
  } else {
    gmr__sim_usage_add(gmr__sim_usage_of(device), rounded, 1);
  }
  *ptr = mem;
  return cudaSuccess;
}

cudaError_t gmr__sim_release(void *ptr, bool pinned, bool from_pool) {
  uint64_t v = 0;
  if (!gmr__u64_map_get(&gmr__sim.allocations, (uint64_t)(uintptr_t)ptr, &v)) {
    return cudaErrorInvalidValue;
  }
  gmr__sim_allocation *a = (gmr__sim_allocation *)(uintptr_t)v;
  if ((a->kind == GMR__SIM_MEM_PINNED) != pinned) return cudaErrorInvalidValue;
  if (from_pool && a->kind != GMR__SIM_MEM_POOL) return cudaErrorInvalidValue;
  gmr__u64_map_remove(&gmr__sim.allocations, (uint64_t)(uintptr_t)ptr, NULL);
  if (a->kind == GMR__SIM_MEM_POOL) {
    /* The bytes go back to the pool, which keeps them reserved until trimmed. */
    a->pool->used_bytes -= a->bytes;
    gmr__sim.device[a->device].allocation_count--;
  } else {
    gmr__sim_usage_sub(gmr__sim_usage_of(a->device), a->bytes, 1);
  }
  host_backing_free(ptr, a->bytes, a->mapped);
  free(a);
  return cudaSuccess;
}

cudaError_t gmr__sim_get_device_count(int *count) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_GET_DEVICE_COUNT);
  if (err == cudaSuccess) *count = gmr__sim.config.device_count;
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_get_device(int *device) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_GET_DEVICE);
  if (err == cudaSuccess) *device = gmr__sim_current_device();
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_set_device(int device) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_SET_DEVICE);
  if (err == cudaSuccess) {
    if (device < 0 || device >= gmr__sim.config.device_count) {
      err = cudaErrorInvalidDevice;
    } else {
      (void)gmr__sim_current_device();
      gmr__sim_thread_device = device;
    }
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_device_get_attribute(int *value, enum cudaDeviceAttr attr, int device) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_DEVICE_GET_ATTRIBUTE);
  if (err == cudaSuccess && (device < 0 || device >= gmr__sim.config.device_count)) {
    err = cudaErrorInvalidDevice;
  }
  if (err == cudaSuccess) {
    switch (attr) {
      case cudaDevAttrMemoryPoolsSupported:
        *value = gmr__sim.config.memory_pools_supported ? 1 : 0;
        break;
      case cudaDevAttrManagedMemory:
      case cudaDevAttrConcurrentManagedAccess:
      case cudaDevAttrUnifiedAddressing:
        *value = 1;
        break;
      default:
        *value = 0;
        break;
    }
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_MEM_GET_INFO);
  if (err == cudaSuccess) {
    int d = gmr__sim_current_device();
    *total_bytes = gmr__sim.config.device_memory_bytes;
    *free_bytes = gmr__sim.config.device_memory_bytes - gmr__sim.device[d].used_bytes;
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_device_synchronize(void) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  /* The device encompasses every capturing stream: refused in every mode. */
  if (err == cudaSuccess && gmr__sim_capture_conflicts_with_any()) {
    err = cudaErrorStreamCaptureUnsupported;
  }
  if (err == cudaSuccess) {
    gmr__sim_complete_all_streams();
    gmr__sim_pools_release_at_sync();
  }
  gmr__sim_unlock();
  return err;
}

static cudaError_t sim_malloc_kind(gmr_cuda_call call, void **ptr, size_t bytes,
                                   gmr__sim_memory_kind kind) {
  gmr__sim_lock();
  *ptr = NULL;
  cudaError_t err = gmr__sim_enter_call(call);
  if (err == cudaSuccess && gmr__sim_capture_forbids_unsafe_call()) {
    err = cudaErrorStreamCaptureUnsupported;
  }
  if (err == cudaSuccess) {
    err = gmr__sim_alloc(ptr, bytes, kind == GMR__SIM_MEM_PINNED ? -1 : gmr__sim_current_device(),
                         kind, NULL);
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_malloc(void **ptr, size_t bytes) {
  return sim_malloc_kind(GMR_CUDA_CALL_MALLOC, ptr, bytes, GMR__SIM_MEM_DEVICE);
}

cudaError_t gmr__sim_malloc_managed(void **ptr, size_t bytes) {
  return sim_malloc_kind(GMR_CUDA_CALL_MALLOC_MANAGED, ptr, bytes, GMR__SIM_MEM_MANAGED);
}

cudaError_t gmr__sim_host_alloc(void **ptr, size_t bytes) {
  return sim_malloc_kind(GMR_CUDA_CALL_HOST_ALLOC, ptr, bytes, GMR__SIM_MEM_PINNED);
}

static cudaError_t sim_free_kind(gmr_cuda_call call, void *ptr, bool pinned) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(call);
  if (err == cudaSuccess && gmr__sim_capture_forbids_unsafe_call()) {
    err = cudaErrorStreamCaptureUnsupported;
  }
  if (err == cudaSuccess && ptr != NULL) {
    /* cudaFree synchronises the device first. */
    if (!pinned) gmr__sim_complete_all_streams();
    err = gmr__sim_release(ptr, pinned, false);
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_free(void *ptr) { return sim_free_kind(GMR_CUDA_CALL_FREE, ptr, false); }

cudaError_t gmr__sim_free_host(void *ptr) {
  return sim_free_kind(GMR_CUDA_CALL_FREE_HOST, ptr, true);
}
