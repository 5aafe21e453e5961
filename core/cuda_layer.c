/*
 * core/cuda_layer.c (internal): selection of the active CUDA layer, helpers
 * shared by every resource that calls CUDA, and the public device/stream
 * functions of gmr/device.h.
 */
#include "core/cuda_layer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "gmr/device.h"

/* NULL until the layer is chosen: by gmr_cuda_sim_enable/disable, or at the
 * first use from the environment (GMR_CUDA_SIM, core/cuda_sim/sim_env.c). */

/* Without the simulation linked (every production library), nothing in the
 * environment changes the layer: the real runtime is used. The simulation
 * (//:gmr_sim, core/cuda_sim/sim_env.c) links the definition that reads
 * GMR_CUDA_SIM, which takes precedence over this one. */
#if defined(__GNUC__)
__attribute__((weak))
#endif
void gmr__cuda_sim_enable_from_env(void) {}
static _Atomic(const gmr__cuda_ops *) active_ops = NULL;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void choose_from_env(void) {
  gmr__cuda_sim_enable_from_env();
  /* The real runtime unless the environment (or a racing explicit choice)
   * picked something already. */
  const gmr__cuda_ops *expected = NULL;
  atomic_compare_exchange_strong_explicit(&active_ops, &expected, &gmr__cuda_real_ops,
                                          memory_order_acq_rel, memory_order_acquire);
}

const gmr__cuda_ops *gmr__cuda(void) {
  const gmr__cuda_ops *ops = atomic_load_explicit(&active_ops, memory_order_acquire);
  if (ops != NULL) return ops;
  pthread_once(&env_once, choose_from_env);
  return atomic_load_explicit(&active_ops, memory_order_acquire);
}

void gmr__cuda_set_active(const gmr__cuda_ops *ops) {
  atomic_store_explicit(&active_ops, ops, memory_order_release);
}

/* Which call of this thread's last gmr__cuda_device_enter failed, and with
 * what error, until gmr__cuda_fail reports it: every caller reports a failed
 * switch as "cudaSetDevice", and the switch may have failed reading the
 * caller's device first (cuda_layer.h). */
static _Thread_local const char *enter_failed_call;
static _Thread_local cudaError_t enter_failed_err;

static cudaError_t enter_failed(const char *call, cudaError_t err) {
  enter_failed_call = call;
  enter_failed_err = err;
  return err;
}

cudaError_t gmr__cuda_device_enter(const gmr__cuda_ops *ops, int device, int *saved) {
  int current = -1;
  *saved = -1;
  enter_failed_call = NULL;
  cudaError_t err = ops->get_device(&current);
  if (err != cudaSuccess) return enter_failed("cudaGetDevice", err);
  if (current == device) return cudaSuccess;
  err = ops->set_device(device);
  if (err != cudaSuccess) return enter_failed("cudaSetDevice", err);
  *saved = current;
  return cudaSuccess;
}

void gmr__cuda_device_leave(const gmr__cuda_ops *ops, int saved) {
  /* Restoring a device that was current a moment ago cannot fail in practice;
   * there is nothing useful to do if it does. */
  if (saved >= 0) (void)ops->set_device(saved);
}

/* The mode this thread must get back when a leave could not restore it
 * (valid while `unrestored` is set): the next enter starts from it, so the
 * following leave restores the mode the program set, not relaxed. */
static _Thread_local bool unrestored;
static _Thread_local enum cudaStreamCaptureMode unrestored_mode;
static _Atomic uint64_t unrestored_count;

cudaError_t gmr__cuda_capture_relaxed_enter(const gmr__cuda_ops *ops,
                                            enum cudaStreamCaptureMode *saved) {
  enum cudaStreamCaptureMode previous = cudaStreamCaptureModeRelaxed;
  cudaError_t err = ops->thread_exchange_capture_mode(&previous);
  if (err != cudaSuccess) return err;
  /* After a failed restore the thread is in relaxed mode already, and the
   * mode to give back is the one remembered, not the relaxed one seen now. */
  *saved = unrestored ? unrestored_mode : previous;
  return cudaSuccess;
}

/* The runtime refuses cudaThreadExchangeStreamCaptureMode only for an invalid
 * mode, and `saved` is one it returned itself: a failure here can only be a
 * transient or sticky error of the call, which changed nothing. Try once
 * more; if the mode is still not back, remember it (the thread's next enter
 * and leave restore it) and count it, so the thread never silently stays in
 * relaxed mode for good. */
void gmr__cuda_capture_relaxed_leave(const gmr__cuda_ops *ops, enum cudaStreamCaptureMode saved) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    enum cudaStreamCaptureMode mode = saved;
    if (ops->thread_exchange_capture_mode(&mode) == cudaSuccess) {
      unrestored = false;
      return;
    }
  }
  unrestored = true;
  unrestored_mode = saved;
  atomic_fetch_add_explicit(&unrestored_count, 1, memory_order_relaxed);
}

uint64_t gmr__cuda_capture_mode_unrestored_count(void) {
  return atomic_load_explicit(&unrestored_count, memory_order_relaxed);
}

bool gmr__cuda_stream_is_capturing(const gmr__cuda_ops *ops, cudaStream_t stream) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (ops->stream_get_capture_info(stream, &status, NULL) != cudaSuccess) return false;
  return status != cudaStreamCaptureStatusNone;
}

gmr_status gmr__status_from_cuda(cudaError_t err) {
  switch (err) {
    case cudaSuccess:
      return GMR_OK;
    case cudaErrorMemoryAllocation:
      return GMR_ERR_OUT_OF_MEMORY;
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
      return GMR_ERR_CAPTURE_UNSAFE;
    default:
      return GMR_ERR_CUDA;
  }
}

const char *gmr__cuda_device_enter_failed_call(cudaError_t err) {
  return enter_failed_call != NULL && enter_failed_err == err ? enter_failed_call
                                                              : "cudaSetDevice";
}

gmr_status gmr__cuda_fail(gmr_failure *failure, const char *call, cudaError_t err) {
  /* A failed device switch: name the call that failed in it. */
  if (enter_failed_call != NULL && enter_failed_err == err && strcmp(call, "cudaSetDevice") == 0) {
    call = enter_failed_call;
  }
  enter_failed_call = NULL;
  if (failure != NULL) {
    failure->cuda_error = (int)err;
    snprintf(failure->message, sizeof failure->message, "%s failed: %s (%d)", call,
             gmr_cuda_error_name((int)err), (int)err);
  }
  return gmr__status_from_cuda(err);
}

/* ---- gmr/device.h -------------------------------------------------------- */

bool gmr_cuda_is_simulated(void) { return gmr__cuda()->simulated; }

const char *gmr_cuda_error_name(int cuda_error) {
  /* cudaGetErrorName is a table lookup in the runtime: no device needed. */
  return cudaGetErrorName((cudaError_t)cuda_error);
}

gmr_status gmr_device_get_count(int *out_count) {
  if (out_count == NULL) return GMR_ERR_INVALID_ARGUMENT;
  int count = 0;
  cudaError_t err = gmr__cuda()->get_device_count(&count);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    *out_count = 0;
    return GMR_OK;
  }
  if (err != cudaSuccess) {
    *out_count = 0;
    return GMR_ERR_CUDA;
  }
  *out_count = count;
  return GMR_OK;
}

gmr_status gmr_device_get_current(int *out_device) {
  if (out_device == NULL) return GMR_ERR_INVALID_ARGUMENT;
  return gmr__status_from_cuda(gmr__cuda()->get_device(out_device));
}

gmr_status gmr_device_set_current(int device) {
  cudaError_t err = gmr__cuda()->set_device(device);
  if (err == cudaErrorInvalidDevice) return GMR_ERR_INVALID_ARGUMENT;
  return gmr__status_from_cuda(err);
}

gmr_status gmr_device_get_memory_info(size_t *free_bytes, size_t *total_bytes) {
  if (free_bytes == NULL || total_bytes == NULL) return GMR_ERR_INVALID_ARGUMENT;
  return gmr__status_from_cuda(gmr__cuda()->mem_get_info(free_bytes, total_bytes));
}

gmr_status gmr_device_synchronize(void) {
  return gmr__status_from_cuda(gmr__cuda()->device_synchronize());
}

gmr_status gmr__stream_create(gmr_stream *out_stream) {
  if (out_stream == NULL) return GMR_ERR_INVALID_ARGUMENT;
  cudaStream_t stream = NULL;
  cudaError_t err = gmr__cuda()->stream_create(&stream);
  if (err != cudaSuccess) {
    *out_stream = NULL;
    return gmr__status_from_cuda(err);
  }
  *out_stream = stream;
  return GMR_OK;
}

gmr_status gmr__stream_destroy(gmr_stream stream) {
  if (stream == NULL) return GMR_OK;
  return gmr__status_from_cuda(gmr__cuda()->stream_destroy(stream));
}

gmr_status gmr__stream_memcpy_async(void *dst, const void *src, size_t bytes, gmr_stream stream) {
  if (bytes == 0) return GMR_OK;
  if (dst == NULL || src == NULL) return GMR_ERR_INVALID_ARGUMENT;
  return gmr__status_from_cuda(gmr__cuda()->memcpy_async(dst, src, bytes, stream));
}

gmr_status gmr__stream_synchronize(gmr_stream stream) {
  return gmr__status_from_cuda(gmr__cuda()->stream_synchronize(stream));
}

gmr_status gmr_stream_wait_stream(gmr_stream waiter, gmr_stream waited) {
  if (waiter == waited) return GMR_OK;
  const gmr__cuda_ops *cuda = gmr__cuda();
  cudaEvent_t event = NULL;
  cudaError_t err = cuda->event_create(&event);
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  err = cuda->event_record(event, waited);
  if (err == cudaSuccess) err = cuda->stream_wait_event(waiter, event);
  /* Destroying an event with a wait pending on it is legal: the wait stays. */
  (void)cuda->event_destroy(event);
  return gmr__status_from_cuda(err);
}

gmr_status gmr__stream_begin_capture(gmr_stream stream) {
  cudaError_t err = gmr__cuda()->stream_begin_capture(stream, cudaStreamCaptureModeGlobal);
  return err == cudaSuccess ? GMR_OK : GMR_ERR_CUDA;
}

gmr_status gmr__stream_end_capture(gmr_stream stream, gmr_graph *out_graph) {
  if (out_graph == NULL) return GMR_ERR_INVALID_ARGUMENT;
  cudaGraph_t graph = NULL;
  cudaError_t err = gmr__cuda()->stream_end_capture(stream, &graph);
  if (err != cudaSuccess) {
    *out_graph = NULL;
    return GMR_ERR_CUDA;
  }
  *out_graph = graph;
  return GMR_OK;
}

gmr_status gmr__graph_destroy(gmr_graph graph) {
  if (graph == NULL) return GMR_OK;
  return gmr__status_from_cuda(gmr__cuda()->graph_destroy(graph));
}

gmr_status gmr_stream_get_capture_info(gmr_stream stream, bool *out_capturing,
                                       uint64_t *out_capture_id) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaError_t err = gmr__cuda()->stream_get_capture_info(stream, &status, &id);
  bool capturing = err == cudaSuccess && status != cudaStreamCaptureStatusNone;
  if (out_capturing != NULL) *out_capturing = capturing;
  if (out_capture_id != NULL) *out_capture_id = capturing ? (uint64_t)id : 0;
  return err == cudaSuccess ? GMR_OK : GMR_ERR_CUDA;
}
