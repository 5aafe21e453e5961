/*
 * core/stream_event.c (internal): see stream_event.h.
 */
#include "core/stream_event.h"

#include <stddef.h>

void gmr__stream_event_init(gmr__stream_event *e, gmr_stream stream, bool streams_outlive) {
  e->stream = stream;
  e->lazy = streams_outlive || gmr__stream_is_default(stream);
  e->event = NULL;
  e->fresh = false;
  e->complete = true;
}

/* Record the event on e->stream, creating it on first use. */
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
  cudaError_t err = cuda->event_record(e->event, (cudaStream_t)e->stream);
  if (err != cudaSuccess) return err;
  e->fresh = false;
  e->complete = false;
  return cudaSuccess;
}

void gmr__stream_event_mark_freed(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                  gmr__stream_event_counts *counts) {
  e->fresh = true;
  e->complete = false;
  if (e->lazy) return;
  /* A record on a capturing stream would add a node to the user's graph;
   * the memory then stays with the stream until a free after the capture. */
  if (gmr__cuda_stream_is_capturing(cuda, (cudaStream_t)e->stream)) return;
  (void)record(cuda, e, counts);
}

cudaError_t gmr__stream_event_settle(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                     gmr__stream_event_counts *counts) {
  if (!e->fresh) return cudaSuccess;
  if (!e->lazy) return cudaErrorNotReady;
  if (gmr__cuda_stream_is_capturing(cuda, (cudaStream_t)e->stream)) {
    return cudaErrorStreamCaptureUnsupported;
  }
  return record(cuda, e, counts);
}

bool gmr__stream_event_query(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                             gmr__stream_event_counts *counts) {
  if (e->complete) return true;
  if (e->fresh || e->event == NULL) return false;
  atomic_fetch_add_explicit(&counts->query_count, 1, memory_order_relaxed);
  if (cuda->event_query(e->event) != cudaSuccess) return false;
  e->complete = true;
  return true;
}

cudaError_t gmr__stream_event_wait(const gmr__cuda_ops *cuda, const gmr__stream_event *e,
                                   gmr_stream waiter, gmr__stream_event_counts *counts) {
  if (e->complete) return cudaSuccess;
  if (e->fresh || e->event == NULL) return cudaErrorNotReady;
  atomic_fetch_add_explicit(&counts->wait_count, 1, memory_order_relaxed);
  return cuda->stream_wait_event((cudaStream_t)waiter, e->event);
}

cudaError_t gmr__stream_event_synchronize(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                          gmr__stream_event_counts *counts) {
  cudaError_t err = gmr__stream_event_settle(cuda, e, counts);
  if (err != cudaSuccess) return err;
  if (e->complete) return cudaSuccess;
  atomic_fetch_add_explicit(&counts->synchronize_count, 1, memory_order_relaxed);
  err = cuda->event_synchronize(e->event);
  if (err != cudaSuccess) return err;
  e->complete = true;
  return cudaSuccess;
}

void gmr__stream_event_deinit(const gmr__cuda_ops *cuda, gmr__stream_event *e) {
  if (e->event != NULL) (void)cuda->event_destroy(e->event);
  e->event = NULL;
}
