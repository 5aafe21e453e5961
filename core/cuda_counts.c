/*
 * core/cuda_counts.c (internal): the counting view of the real CUDA layer
 * (cuda_counts.h).
 */
#include "core/cuda_counts.h"

#include <stdatomic.h>

static atomic_bool counting = false;
static _Atomic uint64_t real_counts[GMR_CUDA_CALL_COUNT];

void gmr__cuda_count(gmr_cuda_call call) {
  if (atomic_load_explicit(&counting, memory_order_relaxed) && (int)call >= 0 &&
      call < GMR_CUDA_CALL_COUNT) {
    atomic_fetch_add_explicit(&real_counts[call], 1, memory_order_relaxed);
  }
}

void gmr__cuda_counting_set(bool on) {
  atomic_store_explicit(&counting, on, memory_order_relaxed);
}

uint64_t gmr__cuda_real_count(gmr_cuda_call call) {
  if ((int)call < 0 || call >= GMR_CUDA_CALL_COUNT) return 0;
  return atomic_load_explicit(&real_counts[call], memory_order_relaxed);
}

bool gmr__cuda_counted_by_real(gmr_cuda_call call) {
  switch (call) {
    /* What the real tables count (each slot calls gmr__cuda_count): memory
     * taken, mapped and given back, and the calls that order or wait. */
    case GMR_CUDA_CALL_DEVICE_SYNCHRONIZE:
    case GMR_CUDA_CALL_MALLOC:
    case GMR_CUDA_CALL_FREE:
    case GMR_CUDA_CALL_MALLOC_MANAGED:
    case GMR_CUDA_CALL_HOST_ALLOC:
    case GMR_CUDA_CALL_FREE_HOST:
    case GMR_CUDA_CALL_MEM_POOL_TRIM_TO:
    case GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC:
    case GMR_CUDA_CALL_FREE_ASYNC:
    case GMR_CUDA_CALL_STREAM_SYNCHRONIZE:
    case GMR_CUDA_CALL_STREAM_WAIT_EVENT:
    case GMR_CUDA_CALL_EVENT_CREATE:
    case GMR_CUDA_CALL_EVENT_DESTROY:
    case GMR_CUDA_CALL_EVENT_RECORD:
    case GMR_CUDA_CALL_EVENT_QUERY:
    case GMR_CUDA_CALL_EVENT_SYNCHRONIZE:
    case GMR_CUDA_CALL_MEM_ADDRESS_RESERVE:
    case GMR_CUDA_CALL_MEM_ADDRESS_FREE:
    case GMR_CUDA_CALL_MEM_CREATE:
    case GMR_CUDA_CALL_MEM_RELEASE:
    case GMR_CUDA_CALL_MEM_MAP:
    case GMR_CUDA_CALL_MEM_UNMAP:
    case GMR_CUDA_CALL_MEM_SET_ACCESS:
      return true;
    default:
      return false;
  }
}
