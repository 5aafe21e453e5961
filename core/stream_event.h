/*
 * core/stream_event.h (internal): the lazily recorded event that orders
 * the reuse, on other streams, of memory freed on one stream.
 *
 * RMM's pool records an event on the freeing stream at every deallocate. A
 * cudaEventRecord costs about a microsecond of host time, ten times the budget
 * of a pooled allocation, so gmr's pools record lazily where they can: a free
 * on the default stream (NULL, cudaStreamLegacy, cudaStreamPerThread) only
 * marks it "fresh" (memory was freed there since its event was last
 * recorded); only when another stream wants that memory does the pool
 * "settle" the stream: record its event once, covering every free so far.
 * The event is then queried (complete: the memory is free for anyone) or
 * waited on (cudaStreamWaitEvent: the memory is free for the waiting stream).
 *
 * A stream the program created may be destroyed as soon as the call that
 * named it returns (cudaStreamDestroy is legal with work pending), so a pool
 * must never touch it later: a free on such a stream records the event at
 * once, inside that call (RMM's rule). Found on an H100: recording or
 * querying a destroyed stream crashes the driver. A program that keeps its
 * streams alive until the resource is destroyed says so in the resource's
 * config (`streams_outlive_resource`) and gets the lazy scheme on every
 * stream.
 *
 * States: idle (nothing pending: complete, not fresh), fresh (frees since the
 * last record), recorded (settled, completion unknown), complete.
 *
 * Thread-safe: no; the owning pool holds its lock around every call.
 */
#ifndef GMR_CORE_STREAM_EVENT_H_
#define GMR_CORE_STREAM_EVENT_H_

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
  bool lazy;         /* `stream` may be recorded on after the call that named it */
} gmr__stream_event;

/* CUDA calls a pool made for stream ordering, for statistics and the bench. */
typedef struct gmr__stream_event_counts {
  atomic_size_t record_count;
  atomic_size_t query_count;
  atomic_size_t wait_count;
  atomic_size_t synchronize_count;
} gmr__stream_event_counts;

/* An idle state for `stream`: nothing freed yet, so nothing pending.
 * `streams_outlive` (the resource's config): the program promises that its
 * streams outlive the resource, so every stream is recorded on lazily, as
 * the default streams always are. */
void gmr__stream_event_init(gmr__stream_event *e, gmr_stream stream, bool streams_outlive);

/* True for the default streams, which live as long as the process: only
 * they may be recorded on lazily. */
static inline bool gmr__stream_is_default(gmr_stream s) {
  return s == NULL || s == (gmr_stream)cudaStreamLegacy || s == (gmr_stream)cudaStreamPerThread;
}

/* Memory was freed on e->stream (or given to it), inside a call that named
 * that stream: its reuse by another stream now needs a new record. A default
 * stream is recorded on later, if ever (settle); any other stream now, while
 * it is known to exist, unless it is capturing (a record would become a node
 * of the user's graph). A skipped or failed record leaves e fresh: the memory
 * then stays with e->stream until its next free (settle never records on a
 * non-default stream). Costs a cudaStreamGetCaptureInfo and a cudaEventRecord
 * per free on a created stream. */
void gmr__stream_event_mark_freed(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                  gmr__stream_event_counts *counts);

/*
 * Make the event cover every free so far: record it on e->stream if fresh
 * (creating it on first use). Refuses (cudaErrorStreamCaptureUnsupported,
 * nothing recorded) when e->stream is capturing, because a record there would
 * become part of the graph; refuses (cudaErrorNotReady) to touch a fresh
 * non-default stream, which may have been destroyed since. Returns the CUDA error, cudaSuccess when nothing
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

#endif /* GMR_CORE_STREAM_EVENT_H_ */
