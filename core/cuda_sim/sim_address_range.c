/*
 * core/cuda_sim/sim_address_range.c (internal): cuMemGetAddressRange in the
 * simulation (core/cuda_vmm.h): the cuMemMap mapping that holds an address,
 * or the cudaMalloc / managed / pool allocation that does, as the driver
 * answers; CUDA_ERROR_NOT_FOUND for any other address (never allocated,
 * freed, or reserved but unmapped).
 */
#include <stdint.h>

#include "core/cuda_sim/sim_internal.h"

/* The allocation of gmr__sim.allocations that holds `addr` (device memory of
 * any kind; pinned host memory is not the driver's device memory). A linear
 * walk: the simulation is for correctness, and an allocation's start, the
 * common question, is found at once. */
static bool allocation_extent(uintptr_t addr, uintptr_t *base, size_t *bytes) {
  uint64_t v = 0;
  if (gmr__u64_map_get(&gmr__sim.allocations, (uint64_t)addr, &v)) {
    const gmr__sim_allocation *a = (const gmr__sim_allocation *)(uintptr_t)v;
    if (a->kind == GMR__SIM_MEM_PINNED) return false;
    *base = addr;
    *bytes = a->bytes;
    return true;
  }
  size_t cursor = 0;
  uint64_t key = 0;
  while (gmr__u64_map_next(&gmr__sim.allocations, &cursor, &key, &v)) {
    const gmr__sim_allocation *a = (const gmr__sim_allocation *)(uintptr_t)v;
    if (a->kind != GMR__SIM_MEM_PINNED && addr >= key && addr - key < a->bytes) {
      *base = (uintptr_t)key;
      *bytes = a->bytes;
      return true;
    }
  }
  return false;
}

CUresult gmr__sim_get_address_range(CUdeviceptr *base, size_t *bytes, CUdeviceptr ptr) {
  gmr__sim_lock();
  CUresult st = (CUresult)gmr__sim_enter_call(GMR_CUDA_CALL_MEM_GET_ADDRESS_RANGE);
  uintptr_t b = 0;
  size_t n = 0;
  if (st == CUDA_SUCCESS && (base == NULL || bytes == NULL)) st = CUDA_ERROR_INVALID_VALUE;
  if (st == CUDA_SUCCESS && !gmr__sim_vmm_mapping_extent((uintptr_t)ptr, &b, &n) &&
      !allocation_extent((uintptr_t)ptr, &b, &n)) {
    st = CUDA_ERROR_NOT_FOUND;
  }
  if (st == CUDA_SUCCESS) {
    *base = (CUdeviceptr)b;
    *bytes = n;
  }
  gmr__sim_unlock();
  return st;
}
