/*
 * stream_ordered/stream_event.c (internal): see stream_event.h.
 */
#include "stream_ordered/stream_event.h"

#include <stddef.h>

#include "util/thread_home.h"

static cudaError_t per_thread_stream_id(const gmr__cuda_ops *cuda, uint64_t *id) {
  int device = -1;
  cudaError_t err = cuda->get_device(&device);
  if (err != cudaSuccess) return err;
  /* The thread's serial with the device names its cudaStreamPerThread,
   * which lives as long as the thread. */
  *id = (gmr__thread_serial() << 8 | ((uint64_t)device & 0xffu)) & ~GMR__STREAM_ID_CAPTURE;
  return cudaSuccess;
}

cudaError_t gmr__stream_key_learn(const gmr__cuda_ops *cuda, gmr_stream stream,
                                  gmr__stream_key *out) {
  if (stream == (gmr_stream)cudaStreamPerThread) return per_thread_stream_id(cuda, &out->id);
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long capture_id = 0;
  cudaError_t err = cuda->stream_get_capture_info((cudaStream_t)stream, &status, &capture_id);
  if (err != cudaSuccess) return err;
  if (status != cudaStreamCaptureStatusNone) {
    /* Asking its id would break the capture (GPU run 7). */
    out->id = GMR__STREAM_ID_CAPTURE | (uint64_t)capture_id;
    return cudaSuccess;
  }
  unsigned long long v = 0;
  err = cuda->stream_get_id((cudaStream_t)stream, &v);
  if (err == cudaSuccess) out->id = (uint64_t)v & ~GMR__STREAM_ID_CAPTURE;
  return err;
}

cudaError_t gmr__event_query_relaxed(const gmr__cuda_ops *cuda, cudaEvent_t event) {
  enum cudaStreamCaptureMode saved;
  cudaError_t err = gmr__cuda_capture_relaxed_enter(cuda, &saved);
  if (err != cudaSuccess) return err;
  err = cuda->event_query(event);
  gmr__cuda_capture_relaxed_leave(cuda, saved);
  return err;
}

cudaError_t gmr__event_synchronize_relaxed(const gmr__cuda_ops *cuda, cudaEvent_t event) {
  enum cudaStreamCaptureMode saved;
  cudaError_t err = gmr__cuda_capture_relaxed_enter(cuda, &saved);
  if (err != cudaSuccess) return err;
  err = cuda->event_synchronize(event);
  gmr__cuda_capture_relaxed_leave(cuda, saved);
  return err;
}

static _Thread_local gmr_stream id_hint_stream;
static _Thread_local bool id_hint_needed;

bool gmr__stream_id_hint(gmr_stream stream) {
  return id_hint_needed && id_hint_stream == stream;
}

void gmr__stream_id_hint_set(gmr_stream stream, bool needed) {
  id_hint_stream = stream;
  id_hint_needed = needed;
}

void gmr__stream_event_init(gmr__stream_event *e, gmr__stream_key key,
                            gmr__stream_events_mode mode) {
  e->key = key;
  e->lazy = gmr__stream_handle_is_key(mode, key.stream);
  e->every_free = mode == GMR__STREAM_EVENTS_EVERY_FREE;
  e->batched = mode == GMR__STREAM_EVENTS_BATCHED && !e->lazy;
  e->hot_frees = 0;
  e->eager_left = mode == GMR__STREAM_EVENTS_ON_DEMAND || mode == GMR__STREAM_EVENTS_BATCHED
                      ? GMR__STREAM_EVENT_EAGER_FREES
                      : 0u;
  e->demand = false;
  e->demand_count = 0;
  e->free_seq = 0;
  e->covered_seq = 0;
  e->fresh_bytes = 0;
  e->complete = true;
}

/* Record the event on e's stream, creating it on first use: it then covers
 * every free so far. */
static cudaError_t record(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                          gmr__stream_event_counts *counts) {
  if (e->event == NULL) {
    cudaError_t err = cuda->event_create(&e->event);
    if (err != cudaSuccess) {
      e->event = NULL;
      return err;
    }
  }
  atomic_fetch_add_explicit(&counts->record_count, 1, memory_order_relaxed);
  cudaError_t err = cuda->event_record(e->event, (cudaStream_t)e->key.stream);
  if (err != cudaSuccess) return err;
  e->covered_seq = e->free_seq;
  e->fresh_bytes = 0;
  e->complete = false;
  e->demand = false;
  return cudaSuccess;
}

/* Record inside a call that names the stream, unless it captures
 * (`not_capturing`: known not to). */
static void record_now(const gmr__cuda_ops *cuda, gmr__stream_event *e, bool not_capturing,
                       gmr__stream_event_counts *counts) {
  /* A record on a capturing stream would add a node to the user's graph;
   * the memory then stays with the stream until a call after the capture. */
  if (!not_capturing && gmr__cuda_stream_is_capturing(cuda, (cudaStream_t)e->key.stream)) return;
  (void)record(cuda, e, counts);
}

static void mark(const gmr__cuda_ops *cuda, gmr__stream_event *e, bool force, uint64_t bytes,
                 bool not_capturing, gmr__stream_event_counts *counts) {
  bool full = gmr__stream_event_batch_full(e, bytes);
  gmr__stream_event_freed_unrecorded(e, bytes);
  if (e->lazy) return;
  bool hot = e->hot_frees > 0;
  if (hot) e->hot_frees--;
  /* A batch that filled with nobody asking: the demands so far fade. */
  if (full && !hot && !e->demand) e->demand_count /= 2;
  bool now = force || e->every_free || e->demand || full || hot;
  if (!force && e->eager_left > 0) { /* a new stream's first frees */
    e->eager_left--;
    now = true;
  }
  if (now) record_now(cuda, e, not_capturing, counts);
}

void gmr__stream_event_mark_freed(const gmr__cuda_ops *cuda, gmr__stream_event *e, bool force,
                                  gmr__stream_event_counts *counts) {
  mark(cuda, e, force, 0, false, counts);
}

void gmr__stream_event_freed(const gmr__cuda_ops *cuda, gmr__stream_event *e, uint64_t bytes,
                             bool not_capturing, gmr__stream_event_counts *counts) {
  mark(cuda, e, false, bytes, not_capturing, counts);
}

void gmr__stream_event_note_call(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                 gmr__stream_event_counts *counts) {
  if (e->demand && !e->lazy && gmr__stream_event_fresh(e)) record_now(cuda, e, false, counts);
}

cudaError_t gmr__stream_event_settle(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                     gmr__stream_event_counts *counts) {
  if (!gmr__stream_event_fresh(e)) return cudaSuccess;
  if (!e->lazy) {
    gmr__stream_event_demand(e); /* it records at its next call, while it surely exists */
    return cudaErrorNotReady;
  }
  if (gmr__cuda_stream_is_capturing(cuda, (cudaStream_t)e->key.stream)) {
    return cudaErrorStreamCaptureUnsupported;
  }
  return record(cuda, e, counts);
}

bool gmr__stream_event_query(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                             gmr__stream_event_counts *counts) {
  return !gmr__stream_event_fresh(e) && gmr__stream_event_query_covered(cuda, e, counts);
}

cudaError_t gmr__stream_event_wait(const gmr__cuda_ops *cuda, const gmr__stream_event *e,
                                   gmr_stream waiter, gmr__stream_event_counts *counts) {
  if (gmr__stream_event_fresh(e)) return cudaErrorNotReady;
  return gmr__stream_event_wait_covered(cuda, e, waiter, counts);
}

bool gmr__stream_event_query_covered(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                     gmr__stream_event_counts *counts) {
  if (e->complete) return true;
  if (e->event == NULL) return false;
  atomic_fetch_add_explicit(&counts->query_count, 1, memory_order_relaxed);
  if (gmr__event_query_relaxed(cuda, e->event) != cudaSuccess) return false;
  e->complete = true;
  return true;
}

cudaError_t gmr__stream_event_wait_covered(const gmr__cuda_ops *cuda, const gmr__stream_event *e,
                                           gmr_stream waiter, gmr__stream_event_counts *counts) {
  if (e->complete) return cudaSuccess;
  if (e->event == NULL) return cudaErrorNotReady;
  atomic_fetch_add_explicit(&counts->wait_count, 1, memory_order_relaxed);
  return cuda->stream_wait_event((cudaStream_t)waiter, e->event);
}

cudaError_t gmr__stream_event_synchronize(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                          gmr__stream_event_counts *counts) {
  cudaError_t err = gmr__stream_event_settle(cuda, e, counts);
  if (err != cudaSuccess) return err;
  if (e->complete) return cudaSuccess;
  if (e->event == NULL) return cudaErrorNotReady;
  atomic_fetch_add_explicit(&counts->synchronize_count, 1, memory_order_relaxed);
  err = gmr__event_synchronize_relaxed(cuda, e->event);
  if (err != cudaSuccess) return err;
  e->complete = true;
  return cudaSuccess;
}

void gmr__stream_event_device_synchronized(gmr__stream_event *e, uint64_t seq_at_start) {
  if (seq_at_start < e->covered_seq) {
    /* Recorded again during the synchronisation: that record is not known done. */
    return;
  }
  e->covered_seq = seq_at_start;
  e->complete = true;
  if (seq_at_start == e->free_seq) {
    e->fresh_bytes = 0;
    if (e->batched) e->demand = false; /* what was asked for is anyone's now */
  }
}

cudaError_t gmr__stream_event_deinit(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                     gmr__stream_event_counts *counts) {
  if (e->event == NULL) return cudaSuccess;
  cudaError_t err = cuda->event_destroy(e->event);
  if (err != cudaSuccess) {
    atomic_fetch_add_explicit(&counts->destroy_failure_count, 1, memory_order_relaxed);
    return err;
  }
  e->event = NULL;
  return cudaSuccess;
}
