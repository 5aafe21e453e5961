/*
 * core/cuda_sim/cuda_sim.c (internal): the control functions of
 * gmr/sim/cuda_sim.h: switching the simulation on and off, and what tests read
 * from it (usage, stale handles, waits). The simulation itself is in the
 * other files of this folder (see sim_internal.h).
 */
#include <stdlib.h>
#include <string.h>

#include "core/cuda_sim/sim_internal.h"

gmr_status gmr_cuda_sim_enable(const gmr_cuda_sim_config *config) {
  gmr_cuda_sim_config cfg = GMR_CUDA_SIM_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (cfg.device_count < 1 || cfg.device_count > GMR__SIM_MAX_DEVICES ||
      cfg.device_memory_bytes == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr__sim_lock();
  if (gmr__sim.enabled && gmr__sim_has_live_objects()) {
    gmr__sim_unlock();
    return GMR_ERR_BUSY;
  }
  uint64_t epoch = gmr__sim.epoch + 1;
  uint64_t next_stream_id = gmr__sim.next_stream_id;
  unsigned long long next_capture_id = gmr__sim.next_capture_id;
  gmr__u64_map_clear(&gmr__sim.objects);
  gmr__u64_map_clear(&gmr__sim.allocations);
  gmr__u64_map_clear(&gmr__sim.registrations);
  gmr__sim_vmm_reset();
  gmr__u64_map_clear(&gmr__sim.draining);
  gmr__u64_map_clear(&gmr__sim.streams_by_id);
  gmr__sim_marks_clear();
  gmr__sim_uses_clear();
  gmr__sim_nodes_clear();
  free(gmr__sim.recycled_stream);
  memset(&gmr__sim, 0, sizeof gmr__sim);
  gmr__sim.enabled = true;
  gmr__sim.config = cfg;
  gmr__sim.epoch = epoch;
  /* Ids stay unique across enables: an event from an earlier run can never
   * match a new stream. */
  gmr__sim.next_stream_id = next_stream_id;
  gmr__sim.next_capture_id = next_capture_id;
  gmr__sim.capture_breaker = GMR_CUDA_CALL_COUNT;
  for (int i = 0; i < GMR_CUDA_CALL_COUNT; ++i) atomic_store(&gmr__sim_call_counts[i], 0);
  gmr__sim_unlock();
  gmr__sim_clear_delays();
  gmr__cuda_set_active(&gmr__cuda_sim_ops);
  return GMR_OK;
}

gmr_status gmr_cuda_sim_disable(void) {
  gmr__sim_lock();
  if (!gmr__sim.enabled) {
    gmr__sim_unlock();
    gmr__cuda_set_active(&gmr__cuda_real_ops);
    return GMR_OK;
  }
  if (gmr__sim_has_live_objects()) {
    gmr__sim_unlock();
    return GMR_ERR_BUSY;
  }
  gmr__sim.enabled = false;
  gmr__sim_marks_clear();
  gmr__sim_uses_clear();
  gmr__sim_nodes_clear();
  free(gmr__sim.recycled_stream);
  gmr__sim.recycled_stream = NULL;
  gmr__sim_unlock();
  gmr__cuda_set_active(&gmr__cuda_real_ops);
  return GMR_OK;
}

static gmr_status copy_usage(const gmr__sim_usage *u, gmr_cuda_sim_usage *out) {
  out->used_bytes = u->used_bytes;
  out->peak_used_bytes = u->peak_used_bytes;
  out->allocation_count = u->allocation_count;
  out->capacity_bytes = gmr__sim.config.device_memory_bytes;
  return GMR_OK;
}

gmr_status gmr_cuda_sim_get_device_usage(int device, gmr_cuda_sim_usage *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__sim_lock();
  gmr_status st;
  if (!gmr__sim.enabled) {
    st = GMR_ERR_UNSUPPORTED;
  } else if (device < 0 || device >= gmr__sim.config.device_count) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else {
    st = copy_usage(&gmr__sim.device[device], out);
  }
  gmr__sim_unlock();
  return st;
}

gmr_status gmr_cuda_sim_get_host_usage(gmr_cuda_sim_usage *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__sim_lock();
  gmr_status st = gmr__sim.enabled ? copy_usage(&gmr__sim.host, out) : GMR_ERR_UNSUPPORTED;
  gmr__sim_unlock();
  return st;
}

static gmr_status hold_stream(gmr_stream stream, bool hold, bool beyond_destroy) {
  gmr__sim_lock();
  gmr_status st = GMR_OK;
  if (!gmr__sim.enabled) {
    st = GMR_ERR_UNSUPPORTED;
  } else if (gmr__sim_stream_is_default((cudaStream_t)stream) ||
             !gmr__sim_is_object((const void *)stream, GMR__SIM_OBJ_STREAM)) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else {
    gmr__sim_stream *s = (gmr__sim_stream *)(void *)stream;
    s->held = hold;
    s->held_beyond_destroy = hold && beyond_destroy;
    if (!hold) gmr__sim_complete_stream(s);
  }
  gmr__sim_unlock();
  return st;
}

gmr_status gmr_cuda_sim_reuse_stream_handles(bool reuse) {
  gmr__sim_lock();
  gmr_status st = gmr__sim.enabled ? GMR_OK : GMR_ERR_UNSUPPORTED;
  if (st == GMR_OK) {
    gmr__sim.reuse_stream_handles = reuse;
    if (!reuse) {
      free(gmr__sim.recycled_stream);
      gmr__sim.recycled_stream = NULL;
    }
  }
  gmr__sim_unlock();
  return st;
}

gmr_status gmr_cuda_sim_stream_hold(gmr_stream stream, bool hold) {
  return hold_stream(stream, hold, false);
}

gmr_status gmr_cuda_sim_stream_hold_beyond_destroy(gmr_stream stream) {
  return hold_stream(stream, true, true);
}

uint64_t gmr_cuda_sim_get_stale_handle_count(void) {
  gmr__sim_lock();
  uint64_t n = gmr__sim.enabled ? gmr__sim.stale_handle_count : 0;
  gmr__sim_unlock();
  return n;
}

gmr_cuda_call gmr_cuda_sim_get_capture_breaker(void) {
  gmr__sim_lock();
  int call = gmr__sim.enabled ? gmr__sim.capture_breaker : GMR_CUDA_CALL_COUNT;
  gmr__sim_unlock();
  return (gmr_cuda_call)call;
}

uint64_t gmr_cuda_sim_get_stream_wait_count(gmr_stream stream) {
  gmr__sim_lock();
  uint64_t n = 0;
  if (gmr__sim.enabled && gmr__sim_is_object((const void *)stream, GMR__SIM_OBJ_STREAM)) {
    n = ((const gmr__sim_stream *)(const void *)stream)->wait_count;
  }
  gmr__sim_unlock();
  return n;
}
