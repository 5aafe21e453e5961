/*
 * stream_ordered/stream_event.h (internal): what a stream-ordered sub-allocator knows
 * about the streams memory was freed on: who the stream is, and when memory
 * freed on it may go to another stream.
 *
 * Memory freed on stream S may be used at once by later work on S (stream
 * order). Another stream T may use it only after S's work up to the free is
 * done: an event recorded on S after the free, then queried (complete: the
 * memory is free for anyone) or waited on by T (cudaStreamWaitEvent), or a
 * device synchronisation that began after the free.
 *
 * Two constraints shape the design:
 *  1. A stream the program created may be destroyed as soon as the call that
 *     named it returns (cudaStreamDestroy is legal with work pending), so a
 *     resource records, queries or waits on S only inside a call that names
 *     S. Seen on an H100: recording on a destroyed stream crashes the driver.
 *  2. A new stream may get a destroyed stream's handle (the driver reuses the
 *     address). A key is the handle and, where known, the stream's id
 *     (cudaStreamGetId: unique for the process, never reused). By default a
 *     resource files memory by handle (RMM and PyTorch key their free lists
 *     so), learning the id only before it records on the stream, so that a
 *     record never covers a successor's work instead of the frees it is
 *     meant to cover; with stream_ids it also learns the id before a stream
 *     takes back its own memory not known done, so a successor never gets
 *     it unordered (docs/stream_ordering.md has the argument).
 *     cudaStreamGetId on a capturing stream breaks the capture in every
 *     thread mode (an H100, GPU run 7), so the id is learned only after
 *     cudaStreamGetCaptureInfo (legal during any capture) said the stream
 *     is not capturing; a capturing stream is known by its capture instead.
 *     cudaStreamPerThread is a different stream in every thread and dies
 *     with its thread: it is keyed by thread and device, no CUDA call but
 *     cudaGetDevice, and never recorded on lazily.
 *
 * RMM's pool records an event at every free (at about a microsecond, and
 * cudaEventRecord takes the driver's context lock, so threads that free at
 * the same time serialise in the driver: 16 threads reached 1.66x one thread
 * on an H100). gmr records only when a record can be used:
 *  - on demand (the default): a free records S's event when another stream
 *    has asked for S's free memory since S's last record (demand), during
 *    S's first few frees (a short-lived stream then leaves nothing behind
 *    that only a device synchronisation could release), and when a chunk is
 *    grown on S (its memory is ordered on S). The demand is remembered: S
 *    records at its next call (a free, or an allocation that names S). Until
 *    then S's newest free memory is S's alone, which costs nothing when no
 *    other stream wants it (the common case: each thread on its own stream).
 *    Memory of a stream that died before recording is reached by a device
 *    synchronisation (cudaDeviceSynchronize names no stream), which the
 *    resources make only when that memory would spare them growing.
 *    A stream asked GMR__STREAM_EVENT_PROMOTE_DEMANDS times records at every
 *    free from then on: streams that trade memory all the time.
 *  - in batches (vmm, from a shard's second stream on): a free records when
 *    the stream's fresh frees (those no record covers yet) reach
 *    GMR__STREAM_EVENT_BATCH_FREES or GMR__STREAM_EVENT_BATCH_BYTES, on
 *    demand as above (a demanded stream records once, at its next call,
 *    and goes on batching), for a new stream's first frees, and at growths;
 *    a stream demanded again and again is "hot" for a while and records at
 *    every free (GMR__STREAM_EVENT_HOT_DEMANDS). One record then covers a
 *    batch (XLA's VMM allocator writes one timeline marker per batch of
 *    frees, 64 entries or 64 MiB; RMM users measured the record at every
 *    free as a third to a half of a free, rmm#1995). It needs a resource
 *    that keeps a stream's fresh memory apart from its covered memory
 *    (stream_slots.h, "split" tables): another stream then takes exactly
 *    the covered memory, whose last record it finds complete or waits for,
 *    while the newest frees stay the stream's (docs/stream_ordering.md,
 *    "The recording rule in batches").
 *  - every free (RMM's rule, kept as an option).
 *  - lazily, when the program promises that its streams outlive the resource
 *    (and always for the legacy default stream, which lives as long as the
 *    process): a stream is recorded on only when another stream first needs
 *    its memory (settle), once for all the frees so far.
 *
 * Coverage: `free_seq` counts frees (and growths) filed under the stream;
 * `covered_seq` is free_seq at the last record or device synchronisation.
 * Frees after it are "fresh": not covered by the event. Memory of the stream
 * is free for another stream when nothing is fresh and the event is known
 * complete (query) or waited on; in a split table, its covered memory is
 * once the last record is, whatever is fresh (gmr__stream_event_query_covered).
 *
 * Thread-safe: no; the owning resource holds its lock around every call.
 */
#ifndef GMR_STREAM_ORDERED_STREAM_EVENT_H_
#define GMR_STREAM_ORDERED_STREAM_EVENT_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "gmr/resource.h"
#include "gmr/stream_ordered_options.h"

/* When frees on a stream record its event (see the banner). */
typedef enum gmr__stream_events_mode {
  GMR__STREAM_EVENTS_ON_DEMAND = 0,
  GMR__STREAM_EVENTS_EVERY_FREE = 1,
  GMR__STREAM_EVENTS_LAZY = 2,
  /* Stream ordering off (stream_ordered false): a stream is its handle,
   * never asked its id; nothing is recorded. */
  GMR__STREAM_EVENTS_UNORDERED = 3,
  /* Records in batches (see the banner); only for a split table. */
  GMR__STREAM_EVENTS_BATCHED = 4
} gmr__stream_events_mode;

/* The mode of a resource made with options `o`, and whether it asks a
 * stream's id before the stream takes back its own memory not known done
 * (stream_ids: only in the on-demand and every-free modes). */
static inline gmr__stream_events_mode gmr__stream_events_mode_of(
    const gmr_stream_ordered_options *o) {
  return !o->stream_ordered             ? GMR__STREAM_EVENTS_UNORDERED
         : o->streams_outlive_resource ? GMR__STREAM_EVENTS_LAZY
         : o->record_at_every_free     ? GMR__STREAM_EVENTS_EVERY_FREE
                                       : GMR__STREAM_EVENTS_ON_DEMAND;
}
static inline bool gmr__stream_ids_of(const gmr_stream_ordered_options *o) {
  return o->stream_ids && o->stream_ordered && !o->streams_outlive_resource;
}

/* Frees of a new stream that record at once in on-demand mode. */
#define GMR__STREAM_EVENT_EAGER_FREES 4u

/* Demands after which an on-demand stream records at every free: streams
 * that trade memory all the time (four streams passing buffers around) would
 * otherwise make every taker ask, query and wait for a record at the owner's
 * next call (pool on multistream, GPU run 24: 1,050-1,130 ns per call
 * against 670-760 recording at every free); streams that trade now and then
 * (a side stream's warm-up, a capture stream) never get there and keep their
 * frees free of driver calls. */
#define GMR__STREAM_EVENT_PROMOTE_DEMANDS 8u

/* A batch, in batched mode: a free records once the stream's fresh frees
 * reach this many (XLA's VMM allocator: 64 entries per timeline marker)... */
#define GMR__STREAM_EVENT_BATCH_FREES 64u
/* ...or this many bytes (XLA: 64 MiB). */
#define GMR__STREAM_EVENT_BATCH_BYTES (UINT64_C(64) << 20)

/* Batched mode: the GMR__STREAM_EVENT_HOT_DEMANDS-th demand (the count
 * halved at each batch that fills with no demand) makes a stream "hot": it
 * records at every free for GMR__STREAM_EVENT_HOT_FREES frees, renewed
 * whenever another stream takes its memory. Streams that trade memory all
 * the time (four streams passing random-sized buffers around: the bundled
 * multistream trace) then keep the footprint they had with a record per
 * free, where batches would leave the memory another stream needs next
 * fresh (a device synchronisation or a growth per request instead);
 * streams that trade now and then (a warm-up stream before a capture, the
 * default stream at a step's start) stay in batches. */
#define GMR__STREAM_EVENT_HOT_DEMANDS 4u
#define GMR__STREAM_EVENT_HOT_FREES 256u

/* A stream as memory is filed under it: the handle, and an id saying which
 * stream had the handle (gmr__stream_id_is_stream): cudaStreamGetId's for a
 * created stream, one per thread and device for cudaStreamPerThread; for a
 * stream that captured a graph when it was asked, GMR__STREAM_ID_CAPTURE |
 * the capture's id; 0 where not known or not needed (the legacy default
 * stream, any stream in lazy mode). */
typedef struct gmr__stream_key {
  gmr_stream stream;
  uint64_t id;
} gmr__stream_key;

/* The id bit of a stream known only by the capture it was in (CUDA's capture
 * ids are unique for the process too; cudaStreamGetId's stay far below). */
#define GMR__STREAM_ID_CAPTURE (UINT64_C(1) << 63)

/* Whether `id` names one stream for certain (not 0, not a capture). */
static inline bool gmr__stream_id_is_stream(uint64_t id) {
  return id != 0 && (id & GMR__STREAM_ID_CAPTURE) == 0;
}

typedef struct gmr__stream_event {
  gmr__stream_key key;
  cudaEvent_t event;    /* created on first use; NULL before */
  uint64_t free_seq;    /* frees and growths filed under the stream */
  uint64_t covered_seq; /* free_seq at the last record or device synchronisation */
  uint64_t fresh_bytes; /* bytes of the frees after covered_seq, as the resource counts them */
  bool complete;        /* the work up to covered_seq is known done */
  bool lazy;            /* the stream may be recorded on after the call that named it */
  bool every_free;      /* record at every free */
  bool batched;         /* record when the fresh frees fill a batch */
  uint32_t hot_frees;   /* batched: frees still recorded at once (others trade with it) */
  bool demand;          /* another stream asked for this stream's free memory */
  uint32_t eager_left;  /* frees still recorded at once (a new stream) */
  uint32_t demand_count; /* times another stream asked (on-demand mode), up to the promotion */
} gmr__stream_event;

/* CUDA calls a resource made for stream ordering, for statistics and the bench. */
typedef struct gmr__stream_event_counts {
  atomic_size_t record_count;
  atomic_size_t query_count;
  atomic_size_t wait_count;
  atomic_size_t synchronize_count;
  atomic_size_t device_synchronize_count; /* cudaDeviceSynchronize */
  atomic_size_t destroy_failure_count;    /* cudaEventDestroy calls that failed */
} gmr__stream_event_counts;

/* True for the streams that live as long as the process and are the same
 * stream in every thread: NULL and cudaStreamLegacy. */
static inline bool gmr__stream_is_process_wide(gmr_stream s) {
  return s == NULL || s == (gmr_stream)cudaStreamLegacy;
}

/*
 * Whether the handle alone is `stream`'s key (id 0, never learned): the
 * legacy default stream, in lazy mode every created stream (they outlive
 * the resource), and every stream without stream ordering.
 * cudaStreamPerThread is a different stream in every thread: never else.
 */
static inline bool gmr__stream_handle_is_key(gmr__stream_events_mode mode, gmr_stream stream) {
  return gmr__stream_is_process_wide(stream) || mode == GMR__STREAM_EVENTS_UNORDERED ||
         (mode == GMR__STREAM_EVENTS_LAZY && stream != (gmr_stream)cudaStreamPerThread);
}

/* Whether a call on `stream` goes on without its id until it needs it
 * (gmr__stream_key_begin): a created stream in the on-demand and every-free
 * modes. */
static inline bool gmr__stream_id_asked_lazily(gmr__stream_events_mode mode, gmr_stream stream) {
  return !gmr__stream_handle_is_key(mode, stream) && stream != (gmr_stream)cudaStreamPerThread;
}

/*
 * The key of `stream` (a created stream, or cudaStreamPerThread) into out->id,
 * without ever breaking a capture. cudaStreamPerThread: one id per thread and
 * device, made up here (it lives as long as its thread): one cudaGetDevice.
 * A created stream: cudaStreamGetCaptureInfo first (legal in every capture
 * mode); a capturing stream gets GMR__STREAM_ID_CAPTURE | its capture's id
 * and is not asked its id (cudaStreamGetId on a capturing stream returns
 * cudaErrorStreamCaptureUnsupported and invalidates the capture, whatever the
 * thread's mode: an H100, GPU run 7); any other gets cudaStreamGetId's id,
 * legal during anyone's capture. Two driver calls (about 150 ns on an H100),
 * no mode switch. Not counted here: a counter shared by every thread would be
 * the one cache line they all write. Returns the CUDA error (a stale handle):
 * the caller must change nothing.
 */
cudaError_t gmr__stream_key_learn(const gmr__cuda_ops *cuda, gmr_stream stream,
                                  gmr__stream_key *out);

/* The key of `stream` for a call that names it: no CUDA call where the
 * handle is the key, gmr__stream_key_learn otherwise. */
static inline cudaError_t gmr__stream_key_of(const gmr__cuda_ops *cuda,
                                             gmr__stream_events_mode mode, gmr_stream stream,
                                             gmr__stream_key *out) {
  out->stream = stream;
  out->id = 0;
  if (gmr__stream_handle_is_key(mode, stream)) return cudaSuccess;
  return gmr__stream_key_learn(cuda, stream, out);
}

/*
 * The key of `stream` as far as it is known without asking a created
 * stream's id: *known is false (and out->id 0) for a created stream in the
 * on-demand and every-free modes, true otherwise (cudaStreamPerThread costs
 * the cudaGetDevice of gmr__stream_key_learn). Errors as gmr__stream_key_of.
 *
 * Why a call may go on with the id unknown (docs/stream_ordering.md): a
 * slot is keyed by a handle and an id learned inside an earlier call naming
 * that handle. A free filed by handle alone is the slot's stream's, or a
 * later stream's that got the handle after the slot's stream was destroyed:
 * never an earlier one's. A call that then learns the id either finds the
 * slot's id, and then the slot's stream lived from that earlier call to now,
 * owning the handle throughout, so every free filed there was its own; or
 * another id, and the slot belonged to a destroyed stream: it is retired,
 * its memory reached only through its event or a device synchronisation.
 */
static inline cudaError_t gmr__stream_key_begin(const gmr__cuda_ops *cuda,
                                                gmr__stream_events_mode mode, gmr_stream stream,
                                                gmr__stream_key *out, bool *known) {
  out->stream = stream;
  out->id = 0;
  *known = !gmr__stream_id_asked_lazily(mode, stream);
  if (gmr__stream_handle_is_key(mode, stream) || !*known) return cudaSuccess;
  return gmr__stream_key_learn(cuda, stream, out); /* cudaStreamPerThread */
}

/* With stream_ids: a hint per thread, whether the last allocation on
 * `stream` needed the stream's id (so the next one asks for it before taking
 * the lock). */
bool gmr__stream_id_hint(gmr_stream stream);
void gmr__stream_id_hint_set(gmr_stream stream, bool needed);

static inline bool gmr__stream_key_equal(gmr__stream_key a, gmr__stream_key b) {
  return a.stream == b.stream && a.id == b.id;
}

/* What a call on a slot's handle learns about the slot's stream. */
typedef enum gmr__stream_key_match {
  GMR__STREAM_KEY_SAME = 0,  /* the slot's stream: use the slot */
  GMR__STREAM_KEY_ADOPT = 1, /* the slot's stream, its id learned now: the slot takes it */
  GMR__STREAM_KEY_OTHER = 2  /* maybe another stream: retire the slot, use a new one */
} gmr__stream_key_match;

/*
 * The slot keyed `slot` and a call keyed `call`, on the same handle. Two
 * different stream ids: the slot's stream was destroyed (OTHER). Otherwise
 * nothing proves a change of stream: by handle (`ids` false) the slot's
 * stream it is, taking the call's id if that is a stream id the slot lacked
 * (ADOPT); with stream_ids (`ids` true) an id that is not certain on either
 * side (a capture, or not asked) is another stream (OTHER).
 */
static inline gmr__stream_key_match gmr__stream_key_compare(bool ids, gmr__stream_key slot,
                                                            gmr__stream_key call) {
  if (slot.id == call.id) return GMR__STREAM_KEY_SAME;
  bool slot_known = gmr__stream_id_is_stream(slot.id);
  bool call_known = gmr__stream_id_is_stream(call.id);
  if ((slot_known && call_known) || ids) return GMR__STREAM_KEY_OTHER;
  return call_known ? GMR__STREAM_KEY_ADOPT : GMR__STREAM_KEY_SAME;
}

/* Whether two keys of record_stream name the same stream: by handle (a
 * recorded stream lives until the free, PyTorch's rule), by thread for
 * cudaStreamPerThread. */
static inline bool gmr__stream_key_same_stream(gmr__stream_key a, gmr__stream_key b) {
  if (a.stream != b.stream) return false;
  return a.stream != (gmr_stream)cudaStreamPerThread || a.id == b.id;
}

/* An idle state for the stream of `key`: nothing freed, nothing pending. The
 * CUDA event, if e had one, is kept (events are reused, never re-created). */
void gmr__stream_event_init(gmr__stream_event *e, gmr__stream_key key,
                            gmr__stream_events_mode mode);

/* Whether a free block filed under e's stream is free for any stream. */
static inline bool gmr__stream_event_settled(const gmr__stream_event *e) {
  return e->complete && e->free_seq == e->covered_seq;
}

/* Whether frees under e's stream are not covered by a record yet. */
static inline bool gmr__stream_event_fresh(const gmr__stream_event *e) {
  return e->free_seq != e->covered_seq;
}

/*
 * Memory was freed on e's stream (or given to it), inside a call that named
 * that stream: count it, and record the event now if the mode says so (see
 * the banner) and the stream is not capturing (a record would become a node
 * of the user's graph). A failed or skipped record leaves the frees fresh.
 * `force` records whatever the mode (a chunk grown on the stream), except
 * for lazy streams, which are recorded when settled.
 */
void gmr__stream_event_mark_freed(const gmr__cuda_ops *cuda, gmr__stream_event *e, bool force,
                                  gmr__stream_event_counts *counts);

/* gmr__stream_event_mark_freed (not forced) for a free of `bytes`, which
 * count toward the batch of batched mode. `not_capturing`: the caller just
 * learned (gmr__stream_key_learn) that the stream does not capture, so a
 * record asks no cudaStreamGetCaptureInfo again. */
void gmr__stream_event_freed(const gmr__cuda_ops *cuda, gmr__stream_event *e, uint64_t bytes,
                             bool not_capturing, gmr__stream_event_counts *counts);

/* A free that was not offered for a record (its stream's id could not be
 * checked): it stays fresh. */
static inline void gmr__stream_event_freed_unrecorded(gmr__stream_event *e, uint64_t bytes) {
  e->free_seq++;
  e->fresh_bytes += bytes;
}

/*
 * `taker`'s stream was just made to wait (cudaStreamWaitEvent) on another
 * stream's record and took that stream's free memory: from now on it is the
 * taker's newest free, not covered by any record the taker made before the
 * wait. Without this, a third stream that finds the taker's older record
 * complete takes the memory with no order after the donor's work, while the
 * donor may still use it (the defect of rmm#2489). The one rule of every
 * stream-ordered resource's step "wait for another stream" (pool,
 * fixed_block, vmm). Records now if the taker's mode says so; in batched
 * mode it only counts (a split table hands the taker just what it
 * allocates now: a record would cover nothing free).
 */
static inline void gmr__stream_event_took_after_wait(const gmr__cuda_ops *cuda,
                                                     gmr__stream_event *taker,
                                                     gmr__stream_event_counts *counts) {
  if (taker->batched) {
    gmr__stream_event_freed_unrecorded(taker, 0);
  } else {
    gmr__stream_event_mark_freed(cuda, taker, false, counts);
  }
}

/* From now on record at every free (RMM's rule), as an EVERY_FREE init
 * would have; a lazy stream stays lazy. For a resource that turns on
 * recording per free once a second stream shares its memory. */
static inline void gmr__stream_event_record_every_free(gmr__stream_event *e) {
  if (e->lazy) return;
  e->every_free = true;
  e->eager_left = 0;
}

/* From now on record in batches, as a BATCHED init would have (a new
 * stream's first frees still record at once); a lazy stream stays lazy.
 * For a split table that turns batches on once a second stream shares its
 * memory (vmm). */
static inline void gmr__stream_event_record_in_batches(gmr__stream_event *e) {
  if (e->lazy) return;
  e->batched = true;
}

/* Another stream wants this stream's free memory: the stream records at its
 * next call (a free, or an allocation that names it). In on-demand mode the
 * GMR__STREAM_EVENT_PROMOTE_DEMANDS-th such demand makes it record at every
 * free from then on; in batched mode it goes on batching. */
static inline void gmr__stream_event_demand(gmr__stream_event *e) {
  if (!e->demand && !e->every_free && !e->lazy && !e->batched &&
      ++e->demand_count >= GMR__STREAM_EVENT_PROMOTE_DEMANDS) {
    gmr__stream_event_record_every_free(e);
  }
  if (!e->demand && e->batched && ++e->demand_count >= GMR__STREAM_EVENT_HOT_DEMANDS) {
    e->demand_count = 0;
    e->hot_frees = GMR__STREAM_EVENT_HOT_FREES;
  }
  e->demand = true;
}

/* Another stream took this stream's covered memory: a hot stream (see
 * gmr__stream_event_demand) stays hot while others keep taking. */
static inline void gmr__stream_event_taken(gmr__stream_event *e) {
  if (e->hot_frees > 0) e->hot_frees = GMR__STREAM_EVENT_HOT_FREES;
}

/* Whether the batch is full once a free of `bytes` more is counted. */
static inline bool gmr__stream_event_batch_full(const gmr__stream_event *e, uint64_t bytes) {
  return e->batched && (e->free_seq + 1 - e->covered_seq >= GMR__STREAM_EVENT_BATCH_FREES ||
                        e->fresh_bytes + bytes >= GMR__STREAM_EVENT_BATCH_BYTES);
}

/* Whether gmr__stream_event_mark_freed would record now (a free must then
 * know the stream's id first). */
static inline bool gmr__stream_event_record_due(const gmr__stream_event *e) {
  return !e->lazy && (e->every_free || e->demand || e->eager_left > 0 || e->hot_frees > 0);
}

/* Whether gmr__stream_event_freed of `bytes` would record now. */
static inline bool gmr__stream_event_record_due_for(const gmr__stream_event *e, uint64_t bytes) {
  return gmr__stream_event_record_due(e) || (!e->lazy && gmr__stream_event_batch_full(e, bytes));
}

/* A call that names e's stream (an allocation): record now if another
 * stream asked for its fresh memory. Pre: the stream's id is known. */
void gmr__stream_event_note_call(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                 gmr__stream_event_counts *counts);

/*
 * Make the event cover every free so far, for a stream other than e's:
 * record on a lazy stream if fresh; a fresh non-lazy stream may be dead, so
 * it is asked (demand) to record at its next call and cudaErrorNotReady is
 * returned. cudaErrorStreamCaptureUnsupported (nothing recorded) when e's
 * stream is capturing. cudaSuccess when nothing is fresh.
 */
cudaError_t gmr__stream_event_settle(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                     gmr__stream_event_counts *counts);

/*
 * cudaEventQuery / cudaEventSynchronize with the calling thread in relaxed
 * capture mode and back: both are potentially unsafe calls, which in global
 * mode fail and break any global capture in progress, this thread's or
 * another's (an H100 did so for the query), and a pool may query at any
 * time another thread captures. The resources' events are never recorded on
 * a capturing stream, so relaxed mode makes them legal. Returns the call's
 * error, or the mode switch's.
 */
cudaError_t gmr__event_query_relaxed(const gmr__cuda_ops *cuda, cudaEvent_t event);
cudaError_t gmr__event_synchronize_relaxed(const gmr__cuda_ops *cuda, cudaEvent_t event);

/* True when the work up to the last record is done (cudaEventQuery, relaxed).
 * Pre: nothing fresh (settle first). Any error counts as "not known". */
bool gmr__stream_event_query(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                             gmr__stream_event_counts *counts);

/* Order `waiter` after the last record (cudaStreamWaitEvent). Pre: nothing
 * fresh. Returns the CUDA error. */
cudaError_t gmr__stream_event_wait(const gmr__cuda_ops *cuda, const gmr__stream_event *e,
                                   gmr_stream waiter, gmr__stream_event_counts *counts);

/* For a split table (stream_slots.h), whose covered memory was freed before
 * the last record or device synchronisation whatever was freed since: true
 * when that work is done (complete already, else cudaEventQuery, relaxed;
 * an error counts as "not known"). */
bool gmr__stream_event_query_covered(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                     gmr__stream_event_counts *counts);

/* For a split table: order `waiter` after the last record
 * (cudaStreamWaitEvent; nothing when it is known complete).
 * cudaErrorNotReady when no record was made. */
cudaError_t gmr__stream_event_wait_covered(const gmr__cuda_ops *cuda, const gmr__stream_event *e,
                                           gmr_stream waiter, gmr__stream_event_counts *counts);

/* Settle, then block the host until the record completes
 * (cudaEventSynchronize). Returns the CUDA error; on success e is settled. */
cudaError_t gmr__stream_event_synchronize(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                          gmr__stream_event_counts *counts);

/* A device synchronisation that began when e->free_seq was `seq_at_start`
 * has completed: the work of those frees is done. */
void gmr__stream_event_device_synchronized(gmr__stream_event *e, uint64_t seq_at_start);

/* Destroy the CUDA event, if one was created. On failure the event is kept
 * (a later call tries again), the failure is counted, and the CUDA error is
 * returned. */
cudaError_t gmr__stream_event_deinit(const gmr__cuda_ops *cuda, gmr__stream_event *e,
                                     gmr__stream_event_counts *counts);

#endif /* GMR_STREAM_ORDERED_STREAM_EVENT_H_ */
