/*
 * core/cuda_sim/sim_faults.c (internal): every simulated call is counted and
 * may fail on demand (gmr_cuda_sim_inject_failure), SQLite faultsim style:
 * skip N calls, then fail M.
 */
#include <string.h>

#include "core/cuda_sim/sim_internal.h"

_Atomic uint64_t gmr__sim_call_counts[GMR_CUDA_CALL_COUNT];

/* Count the call and apply an injected failure, if one is due. */
cudaError_t gmr__sim_enter_call(gmr_cuda_call call) {
  atomic_fetch_add_explicit(&gmr__sim_call_counts[call], 1, memory_order_relaxed);
  gmr__sim_fault *f = &gmr__sim.faults[call];
  if (!f->armed) return cudaSuccess;
  if (f->skip_count > 0) {
    f->skip_count--;
    return cudaSuccess;
  }
  if (f->fail_count == 0) {
    f->armed = false;
    return cudaSuccess;
  }
  if (f->fail_count != UINT64_MAX) f->fail_count--;
  return f->error;
}

const char *gmr_cuda_call_name(gmr_cuda_call call) {
  switch (call) {
#define GMR_CUDA_CALL_NAME_(name, fn) \
  case GMR_CUDA_CALL_##name:          \
    return fn;
    GMR_CUDA_CALL_MAP(GMR_CUDA_CALL_NAME_)
#undef GMR_CUDA_CALL_NAME_
    default:
      return "unknown";
  }
}

gmr_status gmr_cuda_sim_inject_failure(gmr_cuda_call call, uint64_t skip_count, uint64_t fail_count,
                                       int cuda_error) {
  if ((int)call < 0 || call >= GMR_CUDA_CALL_COUNT || cuda_error == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr__sim_lock();
  if (!gmr__sim.enabled) {
    gmr__sim_unlock();
    return GMR_ERR_UNSUPPORTED;
  }
  gmr__sim.faults[call].armed = fail_count > 0;
  gmr__sim.faults[call].skip_count = skip_count;
  gmr__sim.faults[call].fail_count = fail_count;
  gmr__sim.faults[call].error = (cudaError_t)cuda_error;
  gmr__sim_unlock();
  return GMR_OK;
}

gmr_status gmr_cuda_sim_clear_failures(void) {
  gmr__sim_lock();
  memset(gmr__sim.faults, 0, sizeof gmr__sim.faults);
  gmr__sim_unlock();
  return GMR_OK;
}

uint64_t gmr_cuda_sim_get_call_count(gmr_cuda_call call) {
  if ((int)call < 0 || call >= GMR_CUDA_CALL_COUNT) return 0;
  return atomic_load_explicit(&gmr__sim_call_counts[call], memory_order_relaxed);
}
