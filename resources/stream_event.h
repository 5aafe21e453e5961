/*
 * resources/stream_event.h (internal): the lazily recorded event that orders
 * the reuse, on other streams, of memory freed on one stream.
 *
 * RMM's pool records an event on the freeing stream at every deallocate. A
 * cudaEventRecord costs about a microsecond of host time, ten times the budget
 * of a pooled allocation, so gmr's pools record nothing on the fast path: a
 * free on stream S only marks S "fresh" (memory was freed on S since its event
 * was last recorded). Only when another stream wants S's free memory does the
 * pool "settle" S: record S's event once, covering every free so far. The
 * event is then queried (complete: the memory is free for anyone) or waited on
 * (cudaStreamWaitEvent: the memory is free for the waiting stream).
 *
 * States: idle (nothing pending: complete, not fresh), fresh (frees since the
 * last record), recorded (settled, completion unknown), complete.
 *
 * Thread-safe: no; the owning pool holds its lock around every call.
 */
#ifndef GMR_RESOURCES_STREAM_EVENT_H_
#define GMR_RESOURCES_STREAM_EVENT_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "gmr/resource.h"

typedef struct gmr__stream_event {
  gmr_stream stream;
  cudaEvent_t event; /* created on first use; NULL before */
  bool fresh;        /* memory freed on `stream` since the last record */
  bool complete;     /* everything freed on `stream` so far is known to be done */
} gmr__stream_event;

/* CUDA calls a pool made for stream ordering, for statistics and the bench. */
typedef struct gmr__stream_event_counts {
  atomic_size_t record_count;
  atomic_size_t query_count;
  atomic_size_t wait_count;
  atomic_size_t synchronize_count;
} gmr__stream_event_counts;

/* An idle state for `stream`: nothing freed yet, so nothing pending. */
void gmr__stream_event_init(gmr__stream_event *e, gmr_stream stream);

/* Memory was freed on e->stream (or given to it): its reuse by another stream
 * now needs a new record. */
static inline void gmr__stream_event_mark_freed(gmr__stream_event *e) {
  e->fresh = true;
  e->complete = false;
}

/*
 * Make the event cover every free so far: record it on e->stream if fresh
 * (creating it on first use). Refuses (cudaErrorStreamCaptureUnsupported,
 * nothing recorded) when e->stream is capturing, because a record there would
 * become part of the graph. Returns the CUDA error, cudaSuccess when nothing
 * was needed or the record succeeded.
 */
cudaError_t gmr__stream_event_settle(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                     gmr__stream_event_counts *counts);

/* True when everything freed on e->stream up to the last record is done
 * (cudaEventQuery). Pre: e is not fresh (settle first). Any error counts as
 * "not known to be complete". */
bool gmr__stream_event_query(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                             gmr__stream_event_counts *counts);

/* Order `waiter` after the last record (cudaStreamWaitEvent). Pre: e is not
 * fresh. Returns the CUDA error. */
cudaError_t gmr__stream_event_wait(const gmr__cuda_ops *cuda, const gmr__stream_event *e,
                                   gmr_stream waiter, gmr__stream_event_counts *counts);

/* Settle, then block the host until the record completes
 * (cudaEventSynchronize). Returns the CUDA error; on success e is complete. */
cudaError_t gmr__stream_event_synchronize(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                          gmr__stream_event_counts *counts);

/* Destroy the CUDA event, if one was created. */
void gmr__stream_event_deinit(const gmr__cuda_ops *cuda, gmr__stream_event *e);

#endif /* GMR_RESOURCES_STREAM_EVENT_H_ */
