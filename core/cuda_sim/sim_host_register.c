/*
 * core/cuda_sim/sim_host_register.c: cudaHostRegister / cudaHostUnregister
 * (pinning memory the caller allocated), as the simulation keeps them.
 */
#include <stdint.h>

#include "core/cuda_sim/sim_internal.h"

/* cudaHostRegister refuses a range that overlaps one already registered. */
static bool registration_overlaps(uintptr_t begin, size_t bytes) {
  size_t cursor = 0;
  uint64_t key = 0, len = 0;
  while (gmr__u64_map_next(&gmr__sim.registrations, &cursor, &key, &len)) {
    if (begin < key + len && key < begin + bytes) return true;
  }
  return false;
}

cudaError_t gmr__sim_host_register(void *ptr, size_t bytes) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_HOST_REGISTER);
  if (err == cudaSuccess && gmr__sim_capture_forbids_unsafe_call()) {
    err = cudaErrorStreamCaptureUnsupported;
  }
  if (err == cudaSuccess && (ptr == NULL || bytes == 0)) err = cudaErrorInvalidValue;
  if (err == cudaSuccess && registration_overlaps((uintptr_t)ptr, bytes)) {
    err = cudaErrorHostMemoryAlreadyRegistered;
  }
  if (err == cudaSuccess &&
      !gmr__u64_map_put(&gmr__sim.registrations, (uint64_t)(uintptr_t)ptr, (uint64_t)bytes)) {
    err = cudaErrorMemoryAllocation;
  }
  if (err == cudaSuccess) gmr__sim_usage_add(&gmr__sim.host, bytes, 1); /* pinned from now on */
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_host_unregister(void *ptr) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_HOST_UNREGISTER);
  if (err == cudaSuccess && gmr__sim_capture_forbids_unsafe_call()) {
    err = cudaErrorStreamCaptureUnsupported;
  }
  uint64_t bytes = 0;
  if (err == cudaSuccess &&
      !gmr__u64_map_remove(&gmr__sim.registrations, (uint64_t)(uintptr_t)ptr, &bytes)) {
    err = cudaErrorHostMemoryNotRegistered;
  }
  if (err == cudaSuccess) gmr__sim_usage_sub(&gmr__sim.host, (size_t)bytes, 1);
  gmr__sim_unlock();
  return err;
}
