/*
 * core/cuda_sim/sim_faults.c (internal): every simulated call is counted and
 * may fail on demand (gmr_cuda_sim_inject_failure), SQLite faultsim style:
 * skip N calls, then fail M.
 */
#define _POSIX_C_SOURCE 200809L

#include <string.h>
#include <time.h>

#include "core/cuda_sim/sim_internal.h"

_Atomic uint64_t gmr__sim_call_counts[GMR_CUDA_CALL_COUNT];
/* Injected delays per call kind; atomic, so a delayed call reads its own
 * without the mutex it has just released. */
static _Atomic uint64_t call_delays_ns[GMR_CUDA_CALL_COUNT];

static void sleep_ns(uint64_t ns) {
  struct timespec t = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&t, &t) != 0) {
  }
}

_Thread_local int gmr__sim_thread_call = GMR_CUDA_CALL_COUNT;

cudaError_t gmr__sim_enter_call(gmr_cuda_call call) {
  gmr__sim_thread_call = (int)call;
  atomic_fetch_add_explicit(&gmr__sim_call_counts[call], 1, memory_order_relaxed);
  uint64_t delay = atomic_load_explicit(&call_delays_ns[call], memory_order_relaxed);
  if (delay > 0) {
    /* A slow driver call holds no simulated lock: other threads go on. */
    gmr__sim_unlock();
    sleep_ns(delay);
    gmr__sim_lock();
  }
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

gmr_status gmr_cuda_sim_inject_delay(gmr_cuda_call call, uint64_t delay_ns) {
  if ((int)call < 0 || call >= GMR_CUDA_CALL_COUNT) return GMR_ERR_INVALID_ARGUMENT;
  gmr__sim_lock();
  bool enabled = gmr__sim.enabled;
  gmr__sim_unlock();
  if (!enabled) return GMR_ERR_UNSUPPORTED;
  atomic_store_explicit(&call_delays_ns[call], delay_ns, memory_order_relaxed);
  return GMR_OK;
}

void gmr__sim_clear_delays(void) {
  for (int i = 0; i < GMR_CUDA_CALL_COUNT; ++i) {
    atomic_store_explicit(&call_delays_ns[i], 0, memory_order_relaxed);
  }
}

gmr_status gmr_cuda_sim_clear_failures(void) {
  gmr__sim_lock();
  memset(gmr__sim.faults, 0, sizeof gmr__sim.faults);
  gmr__sim_unlock();
  gmr__sim_clear_delays();
  return GMR_OK;
}

uint64_t gmr_cuda_sim_get_call_count(gmr_cuda_call call) {
  if ((int)call < 0 || call >= GMR_CUDA_CALL_COUNT) return 0;
  return atomic_load_explicit(&gmr__sim_call_counts[call], memory_order_relaxed);
}
