/*
 * core/cuda_sim/sim_state.c (internal): the simulated devices' state, its mutex,
 * the table of live handles, each thread's device and capture mode, and the
 * usage counts. See sim_internal.h.
 */
#include <pthread.h>

#include "core/cuda_sim/sim_internal.h"

static pthread_mutex_t sim_mutex = PTHREAD_MUTEX_INITIALIZER;
gmr__sim_state gmr__sim;

static _Thread_local uint64_t thread_epoch;
_Thread_local int gmr__sim_thread_device;
_Thread_local enum cudaStreamCaptureMode gmr__sim_thread_capture_mode =
    cudaStreamCaptureModeGlobal;
static _Atomic uint64_t next_thread_id;
static _Thread_local uint64_t thread_id;

uint64_t gmr__sim_this_thread_id(void) {
  if (thread_id == 0) thread_id = ++next_thread_id;
  return thread_id;
}

void gmr__sim_lock(void) { pthread_mutex_lock(&sim_mutex); }

void gmr__sim_unlock(void) { pthread_mutex_unlock(&sim_mutex); }

int gmr__sim_current_device(void) {
  if (thread_epoch != gmr__sim.epoch) {
    thread_epoch = gmr__sim.epoch;
    gmr__sim_thread_device = 0;
  }
  return gmr__sim_thread_device;
}

bool gmr__sim_is_object(const void *handle, gmr__sim_object_kind kind) {
  uint64_t k = 0;
  return handle != NULL && gmr__u64_map_get(&gmr__sim.objects, (uint64_t)(uintptr_t)handle, &k) &&
         k == (uint64_t)kind;
}

/* gmr__sim_is_object() for a handle a CUDA call received: a dead or foreign handle is
 * counted, because real CUDA would crash or misbehave on it. */
bool gmr__sim_live_object(const void *handle, gmr__sim_object_kind kind) {
  if (gmr__sim_is_object(handle, kind)) return true;
  gmr__sim.stale_handle_count++;
  return false;
}

/* NULL and the runtime's special handles (cudaStreamLegacy, cudaStreamPerThread)
 * are the default stream; anything else must be a live simulated stream. */
bool gmr__sim_stream_is_default(cudaStream_t s) {
  return s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

cudaError_t gmr__sim_lookup_stream(cudaStream_t s, gmr__sim_stream **out) {
  *out = NULL;
  if (gmr__sim_stream_is_default(s)) return cudaSuccess;
  if (!gmr__sim_live_object(s, GMR__SIM_OBJ_STREAM)) return cudaErrorInvalidResourceHandle;
  *out = (gmr__sim_stream *)(void *)s;
  return cudaSuccess;
}

gmr__sim_stream *gmr__sim_stream_by_id(uint64_t id) {
  uint64_t v = 0;
  return gmr__u64_map_get(&gmr__sim.streams_by_id, id, &v) ? (gmr__sim_stream *)(uintptr_t)v
                                                           : NULL;
}

/* CUDA's capture modes (sim_internal.h): whose captures forbid the calling
 * thread a potentially unsafe call depends on the thread's own mode. */
bool gmr__sim_capture_forbids_unsafe_call(void) {
  if (gmr__sim.active_capture_count == 0) return false;
  enum cudaStreamCaptureMode mode = gmr__sim_thread_capture_mode;
  if (mode == cudaStreamCaptureModeRelaxed) return false;
  uint64_t self = gmr__sim_this_thread_id();
  bool forbidden = false;
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&gmr__sim.objects, &cursor, &key, &kind)) {
    if (kind != GMR__SIM_OBJ_STREAM) continue;
    gmr__sim_stream *s = (gmr__sim_stream *)(uintptr_t)key;
    if (s->capture_status == cudaStreamCaptureStatusNone) continue;
    if (s->capture_mode == cudaStreamCaptureModeRelaxed) continue;
    bool own = s->capture_thread == self;
    bool applies = own || (mode == cudaStreamCaptureModeGlobal &&
                           s->capture_mode == cudaStreamCaptureModeGlobal);
    if (!applies) continue;
    forbidden = true;
    if (s->capture_status == cudaStreamCaptureStatusActive) {
      gmr__sim.capture_breaker = gmr__sim_thread_call;
      s->capture_status = cudaStreamCaptureStatusInvalidated;
    }
  }
  return forbidden;
}

bool gmr__sim_capture_conflicts_with_any(void) {
  if (gmr__sim.active_capture_count == 0) return false;
  gmr__sim.capture_breaker = gmr__sim_thread_call;
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&gmr__sim.objects, &cursor, &key, &kind)) {
    if (kind != GMR__SIM_OBJ_STREAM) continue;
    gmr__sim_stream *s = (gmr__sim_stream *)(uintptr_t)key;
    if (s->capture_status == cudaStreamCaptureStatusActive) {
      s->capture_status = cudaStreamCaptureStatusInvalidated;
    }
  }
  return true;
}

void gmr__sim_invalidate_capture(unsigned long long capture_id) {
  gmr__sim.capture_breaker = gmr__sim_thread_call;
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&gmr__sim.objects, &cursor, &key, &kind)) {
    if (kind != GMR__SIM_OBJ_STREAM) continue;
    gmr__sim_stream *s = (gmr__sim_stream *)(uintptr_t)key;
    if (s->capture_status == cudaStreamCaptureStatusActive && s->capture_id == capture_id) {
      s->capture_status = cudaStreamCaptureStatusInvalidated;
    }
  }
}

bool gmr__sim_capture_in_progress(unsigned long long capture_id) {
  if (capture_id == 0 || gmr__sim.active_capture_count == 0) return false;
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&gmr__sim.objects, &cursor, &key, &kind)) {
    if (kind != GMR__SIM_OBJ_STREAM) continue;
    const gmr__sim_stream *s = (const gmr__sim_stream *)(uintptr_t)key;
    if (s->capture_status != cudaStreamCaptureStatusNone && s->capture_id == capture_id) {
      return true;
    }
  }
  return false;
}

bool gmr__sim_stream_capturing(const gmr__sim_stream *s) {
  return s != NULL && s->capture_status != cudaStreamCaptureStatusNone;
}

gmr__sim_usage *gmr__sim_usage_of(int device) {
  return device < 0 ? &gmr__sim.host : &gmr__sim.device[device];
}

void gmr__sim_usage_add(gmr__sim_usage *u, size_t bytes, long count_delta) {
  u->used_bytes += bytes;
  if (u->used_bytes > u->peak_used_bytes) u->peak_used_bytes = u->used_bytes;
  u->allocation_count = (size_t)((long)u->allocation_count + count_delta);
}

void gmr__sim_usage_sub(gmr__sim_usage *u, size_t bytes, long count_delta) {
  u->used_bytes -= bytes;
  u->allocation_count = (size_t)((long)u->allocation_count - count_delta);
}

size_t gmr__sim_round_up(size_t bytes) {
  return (bytes + GMR__SIM_ALIGNMENT - 1) & ~(GMR__SIM_ALIGNMENT - 1);
}

void gmr__sim_complete_stream(gmr__sim_stream *s) {
  if (s != NULL) s->completed_seq = s->recorded_seq;
}

void gmr__sim_complete_all_streams(void) {
  gmr__u64_map_clear(&gmr__sim.draining); /* their work is done too */
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&gmr__sim.objects, &cursor, &key, &kind)) {
    if (kind == GMR__SIM_OBJ_STREAM) gmr__sim_complete_stream((gmr__sim_stream *)(uintptr_t)key);
  }
}

bool gmr__sim_add_object(void *handle, gmr__sim_object_kind kind) {
  return gmr__u64_map_put(&gmr__sim.objects, (uint64_t)(uintptr_t)handle, (uint64_t)kind);
}

void gmr__sim_remove_object(void *handle) {
  gmr__u64_map_remove(&gmr__sim.objects, (uint64_t)(uintptr_t)handle, NULL);
}

/* Called with the mutex held. */
bool gmr__sim_has_live_objects(void) {
  return gmr__sim.objects.count > 0 || gmr__sim.allocations.count > 0 ||
         gmr__sim.registrations.count > 0 || gmr__sim_vmm_live_count() > 0;
}

/* ---- hooks for the VMM part ---------------------------------------------- */

bool gmr__sim_enabled(void) { return gmr__sim.enabled; }
int gmr__sim_device_count(void) { return gmr__sim.config.device_count; }
size_t gmr__sim_device_capacity_bytes(void) { return gmr__sim.config.device_memory_bytes; }

bool gmr__sim_device_charge(int device, size_t bytes) {
  if (gmr__sim.device[device].used_bytes + bytes > gmr__sim.config.device_memory_bytes) {
    return false;
  }
  gmr__sim_usage_add(&gmr__sim.device[device], bytes, 1);
  return true;
}

void gmr__sim_device_uncharge(int device, size_t bytes) {
  gmr__sim_usage_sub(&gmr__sim.device[device], bytes, 1);
}

cudaError_t gmr__sim_stream_check(cudaStream_t stream, bool *capturing) {
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_lookup_stream(stream, &s);
  *capturing = err == cudaSuccess && gmr__sim_stream_capturing(s);
  return err;
}

void gmr__sim_count_stale_handle(void) { gmr__sim.stale_handle_count++; }
