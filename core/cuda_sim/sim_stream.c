/*
 * core/cuda_sim/sim_stream.c (internal): streams, events (completion is
 * simulated per stream by sequence numbers; a held stream never completes),
 * stream capture with CUDA's three capture modes, and graphs.
 *
 * Capture follows CUDA's rules (cuda_runtime_api.h, the programming guide's
 * "prohibited and unhandled operations", and what an H100 did): work enqueued
 * on a capturing stream becomes a node and runs nothing; a record there makes
 * the event a captured event, which may be waited on only inside its capture
 * (a stream that is not capturing joins it: a fork) and never queried or
 * synchronised (after the capture: cudaErrorInvalidValue); a capturing
 * stream may wait only on events of its own capture; synchronising a
 * capturing stream, or the device while any stream captures, and
 * cudaStreamGetId on a capturing stream conflict in every thread mode;
 * potentially unsafe calls follow the thread modes
 * (gmr__sim_capture_forbids_unsafe_call). An invalid call
 * invalidates the captures it concerns. Not simulated: joined streams need
 * not be joined back before the capture ends (they leave it with it).
 */
#include <stdlib.h>
#include <string.h>

#include "core/cuda_sim/sim_internal.h"

cudaError_t gmr__sim_stream_create(cudaStream_t *stream) {
  gmr__sim_lock();
  *stream = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_STREAM_CREATE);
  if (err == cudaSuccess) {
    gmr__sim_stream *s = gmr__sim.recycled_stream; /* the driver reuses addresses too */
    gmr__sim.recycled_stream = NULL;
    if (s != NULL) {
      memset(s, 0, sizeof *s);
    } else {
      s = calloc(1, sizeof *s);
    }
    if (s == NULL || !gmr__sim_add_object(s, GMR__SIM_OBJ_STREAM)) {
      free(s);
      err = cudaErrorMemoryAllocation;
    } else {
      s->id = ++gmr__sim.next_stream_id;
      s->device = gmr__sim_current_device();
      s->capture_status = cudaStreamCaptureStatusNone;
      if (!gmr__u64_map_put(&gmr__sim.streams_by_id, s->id, (uint64_t)(uintptr_t)s)) {
        gmr__sim_remove_object(s);
        free(s);
        err = cudaErrorMemoryAllocation;
      } else {
        *stream = (cudaStream_t)(void *)s;
      }
    }
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_stream_destroy(cudaStream_t stream) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_STREAM_DESTROY);
  if (err == cudaSuccess && !gmr__sim_live_object(stream, GMR__SIM_OBJ_STREAM)) {
    err = cudaErrorInvalidResourceHandle;
  }
  if (err == cudaSuccess) {
    gmr__sim_stream *s = (gmr__sim_stream *)(void *)stream;
    if (s->capture_status != cudaStreamCaptureStatusNone) gmr__sim.active_capture_count--;
    /* A stream held beyond its destroy keeps its pending work pending (CUDA
     * runs it after cudaStreamDestroy returns); otherwise events recorded on
     * it count as complete from now on. A host allocation failure here only
     * makes the simulation less strict. */
    if (s->held && s->held_beyond_destroy && s->completed_seq < s->recorded_seq) {
      (void)gmr__u64_map_put(&gmr__sim.draining, s->id, s->completed_seq);
    }
    gmr__sim_remove_object(s);
    gmr__u64_map_remove(&gmr__sim.streams_by_id, s->id, NULL);
    gmr__sim_clock_clear(&s->clock);
    gmr__sim_frontier_clear(&s->frontier);
    if (gmr__sim.reuse_stream_handles && gmr__sim.recycled_stream == NULL) {
      gmr__sim.recycled_stream = s;
    } else {
      free(s);
    }
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_stream_synchronize(cudaStream_t stream) {
  gmr__sim_lock();
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_STREAM_SYNCHRONIZE);
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  if (err == cudaSuccess && gmr__sim_stream_capturing(s)) {
    gmr__sim_invalidate_capture(s->capture_id); /* its work is not enqueued: nothing to wait for */
    err = cudaErrorStreamCaptureUnsupported;
  }
  if (err == cudaSuccess && gmr__sim_capture_forbids_unsafe_call()) {
    err = cudaErrorStreamCaptureUnsupported;
  }
  if (err == cudaSuccess) {
    if (s == NULL) {
      gmr__sim_complete_all_streams(); /* the legacy default stream waits for all */
    } else {
      gmr__sim_complete_stream(s);
      gmr__sim_clock_finish(&s->clock); /* and for the work it waited on */
      gmr__sim_clock_clear(&s->clock);
    }
    gmr__sim_pools_release_at_sync();
  }
  gmr__sim_unlock();
  return err;
}

/* The capture rules of cudaStreamWaitEvent(s, e). A capturing stream may
 * wait only on an event recorded in its own capture (a dependency inside the
 * graph); an event of another capture would merge two graphs, one recorded
 * outside any capture would cross the capture's boundary: both invalid. A
 * stream that is not capturing and waits on an event of a capture in
 * progress joins that capture. */
static cudaError_t wait_in_capture(gmr__sim_stream *s, const gmr__sim_event *e) {
  bool captured = e->capture_id != 0;
  if (gmr__sim_stream_capturing(s)) {
    if (captured && e->capture_id == s->capture_id) {
      /* A dependency inside the graph: the event's nodes come before s's next. */
      (void)gmr__sim_frontier_union(&s->frontier, &e->frontier);
      return cudaSuccess;
    }
    gmr__sim_invalidate_capture(s->capture_id);
    if (captured) {
      gmr__sim_invalidate_capture(e->capture_id);
      return cudaErrorStreamCaptureMerge;
    }
    return cudaErrorStreamCaptureIsolation;
  }
  if (!captured) return cudaSuccess;
  if (!gmr__sim_capture_in_progress(e->capture_id)) return cudaErrorCapturedEvent;
  if (s == NULL) { /* the legacy stream cannot join a capture */
    gmr__sim_invalidate_capture(e->capture_id);
    return cudaErrorStreamCaptureImplicit;
  }
  /* A fork: s takes part in the capture from now on, as its origin does. */
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&gmr__sim.objects, &cursor, &key, &kind)) {
    if (kind != GMR__SIM_OBJ_STREAM) continue;
    const gmr__sim_stream *o = (const gmr__sim_stream *)(uintptr_t)key;
    if (!o->capture_origin || o->capture_id != e->capture_id) continue;
    s->capture_status = o->capture_status;
    s->capture_id = o->capture_id;
    s->capture_mode = o->capture_mode;
    s->capture_thread = o->capture_thread;
    s->capture_origin = false;
    gmr__sim.active_capture_count++;
    (void)gmr__sim_frontier_copy(&s->frontier, &e->frontier);
    return cudaSuccess;
  }
  return cudaErrorCapturedEvent; /* its origin is gone */
}

cudaError_t gmr__sim_stream_wait_event(cudaStream_t stream, cudaEvent_t event) {
  gmr__sim_lock();
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_STREAM_WAIT_EVENT);
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  if (err == cudaSuccess && !gmr__sim_live_object(event, GMR__SIM_OBJ_EVENT)) {
    err = cudaErrorInvalidResourceHandle;
  }
  if (err == cudaSuccess) err = wait_in_capture(s, (const gmr__sim_event *)(void *)event);
  if (err == cudaSuccess && s != NULL) {
    s->wait_count++;
    /* Ordered after the event's work from now on (a host allocation failure
     * only makes the simulation less strict). */
    (void)gmr__sim_clock_merge(&s->clock, &((const gmr__sim_event *)(void *)event)->clock);
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_stream_get_capture_info(cudaStream_t stream,
                                             enum cudaStreamCaptureStatus *status,
                                             unsigned long long *capture_id) {
  gmr__sim_lock();
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  if (err == cudaSuccess) {
    *status = s == NULL ? cudaStreamCaptureStatusNone : s->capture_status;
    if (capture_id != NULL) *capture_id = gmr__sim_stream_capturing(s) ? s->capture_id : 0;
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_stream_begin_capture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  gmr__sim_lock();
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_STREAM_BEGIN_CAPTURE);
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  /* The legacy default stream cannot be captured. */
  if (err == cudaSuccess && s == NULL) err = cudaErrorStreamCaptureUnsupported;
  if (err == cudaSuccess && gmr__sim_stream_capturing(s)) err = cudaErrorIllegalState;
  if (err == cudaSuccess) {
    s->capture_mode = mode;
    s->capture_thread = gmr__sim_this_thread_id();
    s->capture_status = cudaStreamCaptureStatusActive;
    s->capture_origin = true;
    s->capture_id = ++gmr__sim.next_capture_id;
    s->frontier.count = 0;
    gmr__sim.active_capture_count++;
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_thread_exchange_capture_mode(enum cudaStreamCaptureMode *mode) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_THREAD_EXCHANGE_CAPTURE_MODE);
  if (err == cudaSuccess && mode == NULL) err = cudaErrorInvalidValue;
  if (err == cudaSuccess && *mode != cudaStreamCaptureModeGlobal &&
      *mode != cudaStreamCaptureModeThreadLocal && *mode != cudaStreamCaptureModeRelaxed) {
    err = cudaErrorInvalidValue;
  }
  if (err == cudaSuccess) {
    enum cudaStreamCaptureMode previous = gmr__sim_thread_capture_mode;
    gmr__sim_thread_capture_mode = *mode;
    *mode = previous;
  }
  gmr__sim_unlock();
  return err;
}

int gmr_cuda_sim_get_thread_capture_mode(void) { return (int)gmr__sim_thread_capture_mode; }

/* The streams that joined capture `capture_id` leave it with its origin. */
static void end_forks(unsigned long long capture_id) {
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&gmr__sim.objects, &cursor, &key, &kind)) {
    if (kind != GMR__SIM_OBJ_STREAM) continue;
    gmr__sim_stream *s = (gmr__sim_stream *)(uintptr_t)key;
    if (s->capture_origin || s->capture_id != capture_id ||
        s->capture_status == cudaStreamCaptureStatusNone) {
      continue;
    }
    s->capture_status = cudaStreamCaptureStatusNone;
    s->capture_id = 0;
    s->frontier.count = 0;
    gmr__sim.active_capture_count--;
  }
}

cudaError_t gmr__sim_stream_end_capture(cudaStream_t stream, cudaGraph_t *graph) {
  gmr__sim_lock();
  *graph = NULL;
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_STREAM_END_CAPTURE);
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  if (err == cudaSuccess && !gmr__sim_stream_capturing(s)) err = cudaErrorIllegalState;
  if (err == cudaSuccess && !s->capture_origin) err = cudaErrorStreamCaptureUnmatched;
  if (err == cudaSuccess && s->capture_mode != cudaStreamCaptureModeRelaxed &&
      s->capture_thread != gmr__sim_this_thread_id()) {
    err = cudaErrorStreamCaptureWrongThread;
  }
  if (err == cudaSuccess) {
    bool invalidated = s->capture_status == cudaStreamCaptureStatusInvalidated;
    end_forks(s->capture_id);
    s->capture_status = cudaStreamCaptureStatusNone;
    s->capture_origin = false;
    s->frontier.count = 0;
    gmr__sim.active_capture_count--;
    if (invalidated) {
      err = cudaErrorStreamCaptureInvalidated;
    } else {
      gmr__sim_graph *g = calloc(1, sizeof *g);
      if (g == NULL || !gmr__sim_add_object(g, GMR__SIM_OBJ_GRAPH)) {
        free(g);
        err = cudaErrorMemoryAllocation;
      } else {
        g->capture_id = s->capture_id;
        *graph = (cudaGraph_t)(void *)g;
      }
    }
    s->capture_id = 0;
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_graph_destroy(cudaGraph_t graph) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_GRAPH_DESTROY);
  if (err == cudaSuccess && !gmr__sim_live_object(graph, GMR__SIM_OBJ_GRAPH)) {
    err = cudaErrorInvalidValue;
  }
  if (err == cudaSuccess) {
    gmr__sim_remove_object(graph);
    free(graph);
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_event_create(cudaEvent_t *event) {
  gmr__sim_lock();
  *event = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_EVENT_CREATE);
  if (err == cudaSuccess) {
    gmr__sim_event *e = calloc(1, sizeof *e);
    if (e == NULL || !gmr__sim_add_object(e, GMR__SIM_OBJ_EVENT)) {
      free(e);
      err = cudaErrorMemoryAllocation;
    } else {
      *event = (cudaEvent_t)(void *)e;
    }
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_event_destroy(cudaEvent_t event) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_EVENT_DESTROY);
  if (err == cudaSuccess && !gmr__sim_live_object(event, GMR__SIM_OBJ_EVENT)) {
    err = cudaErrorInvalidResourceHandle;
  }
  if (err == cudaSuccess) {
    gmr__sim_remove_object(event);
    gmr__sim_clock_clear(&((gmr__sim_event *)(void *)event)->clock);
    gmr__sim_frontier_clear(&((gmr__sim_event *)(void *)event)->frontier);
    free(event);
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_event_record(cudaEvent_t event, cudaStream_t stream) {
  gmr__sim_lock();
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_EVENT_RECORD);
  if (err == cudaSuccess && !gmr__sim_live_object(event, GMR__SIM_OBJ_EVENT)) {
    err = cudaErrorInvalidResourceHandle;
  }
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  if (err == cudaSuccess) {
    gmr__sim_event *e = (gmr__sim_event *)(void *)event;
    e->recorded = true;
    e->capture_id = 0;
    e->clock.count = 0;
    if (s != NULL) {
      /* In a capture: a node of the graph, no work of the stream now (legal
       * in every mode); its clock orders the capture's streams. */
      if (gmr__sim_stream_capturing(s)) e->capture_id = s->capture_id;
      if (!gmr__sim_clock_snapshot(s, &e->clock)) err = cudaErrorMemoryAllocation;
      e->frontier.count = 0;
      if (e->capture_id != 0 && !gmr__sim_frontier_copy(&e->frontier, &s->frontier)) {
        err = cudaErrorMemoryAllocation;
      }
    }
  }
  gmr__sim_unlock();
  return err;
}

/* Done when the stream's work up to the record and all it waited on is. */
static bool event_complete(const gmr__sim_event *e) { return gmr__sim_clock_complete(&e->clock); }

/* Querying or synchronising an event last recorded in a capture conflicts
 * with the capture in every thread mode while it is in progress (the event
 * stands for no work). Once the capture has ended, an H100 answered the
 * query with cudaErrorInvalidValue (GPU run 7); the simulation answers a
 * synchronisation the same way. */
static cudaError_t refuse_captured(cudaEvent_t event) {
  const gmr__sim_event *e = (const gmr__sim_event *)(void *)event;
  if (e->capture_id == 0) return cudaSuccess;
  if (!gmr__sim_capture_in_progress(e->capture_id)) return cudaErrorInvalidValue;
  gmr__sim_invalidate_capture(e->capture_id);
  return cudaErrorCapturedEvent;
}

cudaError_t gmr__sim_event_query(cudaEvent_t event) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_EVENT_QUERY);
  if (err == cudaSuccess && !gmr__sim_live_object(event, GMR__SIM_OBJ_EVENT)) {
    err = cudaErrorInvalidResourceHandle;
  }
  if (err == cudaSuccess && gmr__sim_capture_forbids_unsafe_call()) {
    err = cudaErrorStreamCaptureUnsupported;
  }
  if (err == cudaSuccess) err = refuse_captured(event);
  if (err == cudaSuccess && !event_complete((const gmr__sim_event *)(void *)event)) {
    err = cudaErrorNotReady;
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_event_synchronize(cudaEvent_t event) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_EVENT_SYNCHRONIZE);
  if (err == cudaSuccess && !gmr__sim_live_object(event, GMR__SIM_OBJ_EVENT)) {
    err = cudaErrorInvalidResourceHandle;
  }
  if (err == cudaSuccess && gmr__sim_capture_forbids_unsafe_call()) {
    err = cudaErrorStreamCaptureUnsupported;
  }
  if (err == cudaSuccess) err = refuse_captured(event);
  if (err == cudaSuccess) {
    /* Waiting "finishes" the simulated work up to the event, and the work
     * it was ordered after. */
    gmr__sim_clock_finish(&((const gmr__sim_event *)(void *)event)->clock);
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_memset_async(void *ptr, int value, size_t bytes, cudaStream_t stream) {
  gmr__sim_lock();
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_MEMSET_ASYNC);
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  /* During capture the memset becomes a graph node and runs at replay. */
  if (err == cudaSuccess && !gmr__sim_stream_capturing(s) && bytes > 0) memset(ptr, value, bytes);
  if (err == cudaSuccess && !gmr__sim_capture_add_node(s)) err = cudaErrorMemoryAllocation;
  if (err == cudaSuccess) gmr__sim_uses_record(s, ptr, bytes, NULL, 0);
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_memcpy_async(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  gmr__sim_lock();
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_MEMCPY_ASYNC);
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  if (err == cudaSuccess && bytes > 0 && (dst == NULL || src == NULL)) err = cudaErrorInvalidValue;
  /* Simulated memory is host memory, so the copy is a memmove; during capture
   * it becomes a graph node and runs at replay. */
  if (err == cudaSuccess && !gmr__sim_stream_capturing(s) && bytes > 0) memmove(dst, src, bytes);
  if (err == cudaSuccess && !gmr__sim_capture_add_node(s)) err = cudaErrorMemoryAllocation;
  if (err == cudaSuccess) gmr__sim_uses_record(s, dst, bytes, src, bytes);
  gmr__sim_unlock();
  return err;
}

/* Ids of the streams the runtime provides; created streams count from 1. */
#define LEGACY_STREAM_ID (UINT64_C(1) << 62)
#define PER_THREAD_STREAM_ID_BASE (UINT64_C(1) << 63)

cudaError_t gmr__sim_stream_get_id(cudaStream_t stream, unsigned long long *id) {
  gmr__sim_lock();
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_STREAM_GET_ID);
  if (err == cudaSuccess && id == NULL) err = cudaErrorInvalidValue;
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  /* Seen on an H100 (driver 580, GPU run 7): on the capturing stream,
   * cudaStreamGetId (and the driver's cuStreamGetId) returns
   * cudaErrorStreamCaptureUnsupported and invalidates the capture in every
   * thread mode, relaxed included; on any other stream it is legal during a
   * capture, from any thread in any mode. */
  if (err == cudaSuccess && gmr__sim_stream_capturing(s)) {
    gmr__sim_invalidate_capture(s->capture_id);
    err = cudaErrorStreamCaptureUnsupported;
  }
  if (err == cudaSuccess) {
    if (s != NULL) {
      *id = s->id;
    } else if (stream == cudaStreamPerThread) {
      /* Each thread's own per-thread default stream: one id per thread. */
      *id = PER_THREAD_STREAM_ID_BASE | gmr__sim_this_thread_id();
    } else {
      *id = LEGACY_STREAM_ID;
    }
  }
  gmr__sim_unlock();
  return err;
}
