/*
 * tools/replay/replay.h: run a parsed trace through a gmr resource stack and
 * measure it.
 *
 * Events replay in file order on the calling thread. Each distinct recorded
 * stream gets a stream of its own: recorded stream 0 is the default stream
 * (NULL), every other value a stream from gmr_cuda_stream_create(). An allocation
 * that fails is counted and its later free skipped; the replay goes on.
 *
 * Passes: the trace replays pass_count times on the same stack and streams.
 * After each pass, outside any timing, open captures end, whatever the trace
 * left live is freed, the streams and the device are synchronised and the
 * pass's graphs and graph memory are released; the next pass then starts
 * from what the stack kept (a pool's cached chunks: the warm state of a
 * training loop, where pass 1 is a server's cold start).
 *
 * Timing, one of two per run, never both (a clock read costs about as much as
 * a pool's fast path, so per-call timers inside the figure would inflate a
 * mean by tens of percent):
 *  - REPLAY_TIMING_PER_CALL: every allocate and deallocate is timed on its
 *    own (timing.h) for the percentiles, and after every event the stack's
 *    held bytes are read (gmr_resource_get_footprint) for the memory curve,
 *    each pass's peak, and gmr_resource_get_memory_info() at that peak. All
 *    of this is outside the timed brackets.
 *  - REPLAY_TIMING_PASS: nothing per call; the clock is read when the pass
 *    starts and ends (and around capture markers, whose CUDA calls are no
 *    allocator calls), so wall_ns / calls is the mean host time per call.
 * measure.h runs both on two fresh stacks of one spec and joins them.
 *
 * Capture markers (capture_begin / capture_end rows) are honoured by default
 * (REPLAY_CAPTURE_REAL): the mapped stream really captures a CUDA graph
 * (gmr_cuda_stream_begin_capture / gmr_cuda_stream_end_capture, on a GPU and on the
 * simulation alike), so every layer of the stack sees a capturing stream and
 * a capture-unsafe call anywhere in it breaks the capture, which the result
 * counts. When the stack contains a graph_arena_resource, the replay also
 * opens an explicit session on it for the capture (the arena's fast path, and
 * the graph memory handle a program keeps while its graph lives): the real
 * capture is the check, the session the arena's way of being told. Every
 * capture of the trace appends to one graph memory (the first capture's), as
 * a program that passes one pool to all its captures; a capture that begins
 * while another stream's capture appends to it gets a memory of its own. Each graph
 * and its graph memory are kept until the end of the trace, as a program that
 * replays its graph keeps them, then destroyed and released. The recorded
 * default stream cannot be captured: a capture_begin on it is a failure.
 *
 * Thread-safe: replay_run() uses the stack from the calling thread only; run
 * one replay per stack at a time.
 */
#ifndef GMR_TOOLS_REPLAY_REPLAY_H_
#define GMR_TOOLS_REPLAY_REPLAY_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/graph_arena_resource.h"
#include "gmr/resource.h"
#include "gmr/sim/streams.h"
#include "gmr/status.h"
#include "tools/replay/calls.h"
#include "tools/replay/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REPLAY_FAILURE_TEXT_BYTES 320

#define REPLAY_MAX_PASSES 1000

/* What a replay does with the trace's capture_begin / capture_end rows. */
typedef enum replay_capture_mode {
  REPLAY_CAPTURE_REAL = 0, /* capture for real; explicit session on a graph arena */
  REPLAY_CAPTURE_OFF = 1   /* ignore the markers */
} replay_capture_mode;

typedef enum replay_timing {
  REPLAY_TIMING_PER_CALL = 0, /* per-call timers, held bytes after every event */
  REPLAY_TIMING_PASS = 1      /* one wall clock per pass, nothing per call */
} replay_timing;

typedef struct replay_options {
  replay_capture_mode capture;
  /* > 0: before each capture, grow the stack's graph arena (if it has one) to
   * this capacity with gmr_graph_arena_resource_reserve(): memory taken from the layer
   * below just before the capture, as a program sized from an earlier
   * CAPTURE_UNSAFE message would. */
  size_t arena_reserve_bytes;
  size_t pass_count;    /* 1..REPLAY_MAX_PASSES replays of the trace on the stack */
  replay_timing timing;
  /* Optional: called before each pass (0-based index) on the replaying
   * thread, with the run's streams already made (a test reads a counter
   * between passes of one run, its streams the same in every pass). */
  void (*before_pass)(void *context, size_t pass_index);
  void *before_pass_context;
} replay_options;

#define REPLAY_OPTIONS_DEFAULT {REPLAY_CAPTURE_REAL, 0, 1, REPLAY_TIMING_PER_CALL, NULL, NULL}

/* One pass of a run. */
typedef struct replay_pass_result {
  size_t alloc_count;   /* allocate calls made */
  size_t free_count;    /* deallocate calls made for the trace's frees */
  size_t failure_count; /* failed calls, captures and clean-ups of this pass */
  size_t live_at_end_count; /* allocations the pass left live, freed after it */
  /* REPLAY_TIMING_PASS: host time of the pass's calls in ns (capture markers
   * excluded) and the calls it covers; mean per call = wall_ns /
   * wall_call_count (replay_pass_mean_ns). 0 without a wall clock. */
  uint64_t wall_ns;
  size_t wall_call_count;
  /* REPLAY_TIMING_PER_CALL: nearest-rank percentiles of the pass, ns. */
  uint64_t alloc_p50_ns, alloc_p99_ns, free_p50_ns, free_p99_ns;
  /* The most bytes the stack held during the pass: REPLAY_TIMING_PER_CALL
   * reads it after every event (and takes the footprint's high-water mark
   * when that rose during the pass, for a peak inside one call);
   * REPLAY_TIMING_PASS gives the high-water mark since the stack was made.
   * has_peak_held false: the stack reports no footprint. */
  bool has_peak_held;
  size_t peak_held_bytes;
  /* REPLAY_TIMING_PER_CALL: the event (index into the trace) after which the
   * held bytes first reached peak_held_bytes, and the stack's
   * gmr_resource_get_memory_info() then. memory_info_status GMR_ERR_UNSUPPORTED:
   * no resource of the stack answers; not GMR_OK: nothing below is valid. */
  size_t peak_event_index;
  gmr_status memory_info_status;
  gmr_memory_info memory_info;
  /* The CUDA calls the stack made while the pass's events replayed, by kind
   * (calls.h: the simulation's counts, or the real layer's counting view);
   * the clean-up after the pass (its frees, synchronisations and graphs) is
   * not included. measure.h reports the wall-clock run's. */
  replay_calls calls;
} replay_pass_result;

typedef struct replay_result {
  /* Calls made for the trace's events (the end-of-run frees not included). */
  size_t alloc_count;         /* allocate calls */
  size_t free_count;          /* deallocate calls */
  /* What went wrong. */
  size_t failed_alloc_count;  /* allocate calls that returned a failure */
  size_t failed_free_count;   /* deallocate calls (trace or end of run) that failed */
  size_t skipped_free_count;  /* frees of failed allocations: not called */
  size_t cleanup_failure_count; /* stream synchronise/destroy failures at the end */
  gmr_status run_status;      /* what replay_run() returned */
  gmr_status destroy_status;  /* set by replay_result_set_destroy_status(); GMR_OK until then */
  /* The first failure of any kind, for people: "line 12: allocate 512 bytes
   * on stream 0: GMR_ERR_OUT_OF_MEMORY: cudaMalloc failed: ...", or "". */
  char first_failure[REPLAY_FAILURE_TEXT_BYTES];
  bool has_alloc_failure;     /* first_alloc_failure is meaningful */
  gmr_failure first_alloc_failure; /* the record of the first failed allocate */
  /* The end of the run. */
  size_t live_at_end_count;   /* allocations live after the last event, freed then */
  size_t stream_create_count; /* streams made with gmr_cuda_stream_create() */
  /* REPLAY_TIMING_PER_CALL: host time per call in ns, timer overhead
   * subtracted, clamped at 0: one entry per call made, in call order, all
   * passes (owned; freed by replay_result_free). NULL otherwise. */
  uint64_t *alloc_ns;         /* alloc_count entries */
  uint64_t *free_ns;          /* free_count entries */
  uint64_t alloc_p50_ns, alloc_p99_ns; /* pass 1's percentiles, 0 if no call */
  uint64_t free_p50_ns, free_p99_ns;
  uint64_t timer_overhead_ns; /* what was subtracted from each measurement */
  /* Per pass (owned; freed by replay_result_free); pass_count entries. */
  replay_pass_result *passes;
  size_t pass_count;
  replay_timing timing;
  /* REPLAY_TIMING_PER_CALL with a footprint: the bytes held after each event,
   * event_count entries per pass, pass after pass (owned). NULL otherwise. */
  size_t *held_bytes;
  size_t held_count;
  /* measure.h: failures of the second (wall-clock) run on its own stack. */
  size_t clock_run_failure_count;
  /* gmr_resource_get_footprint(top) after the last event of the last pass,
   * before any end-of-run free; footprint_status GMR_ERR_UNSUPPORTED: no resource reports one. */
  gmr_status footprint_status;
  gmr_footprint footprint;
  /* The same for the stack's bottom resource (what the device gave; a
   * cudaMemPool keeps what it is given back). */
  gmr_status leaf_footprint_status;
  gmr_footprint leaf_footprint;
  /* Captures (REPLAY_CAPTURE_REAL). */
  size_t capture_count;          /* captures begun */
  size_t capture_failure_count;  /* captures that could not begin, or ended broken */
  size_t capture_alloc_count;    /* allocate calls on a stream while it captured */
  size_t capture_alloc_ok_count; /* of those, the ones that succeeded */
  bool has_graph_arena;          /* the stack has a graph_arena_resource */
  gmr_graph_arena_resource_stats arena; /* its counters after the run (has_graph_arena):
                                  capture_allocation_count = served inside
                                  captures; upstream_call_during_capture_count
                                  counts only capture-safe growths
                                  (capture_growth_count) when the capturing
                                  stream is the only one with traffic */
} replay_result;

/**
 * Replay `trace` through the stack whose top resource is `top`.
 *
 * Units: timer_overhead_ns in ns (from replay_clock_overhead_ns(); 0 subtracts
 *   nothing).
 * Ownership: `trace` and `top` are borrowed; *out is overwritten (not freed
 *   first) and must be released with replay_result_free().
 * Stream/device: creates (and destroys) one stream per recorded non-zero
 *   stream on the current device of the active CUDA layer; synchronises them
 *   and the device after every pass. Leaves nothing allocated from `top`, so
 *   the stack can be destroyed afterwards (unless a free failed).
 * Returns:
 *   GMR_OK                    the replay ran to its end. Failed calls are
 *                             counted in *out: check replay_result_ok().
 *   GMR_ERR_INVALID_ARGUMENT  a NULL argument (then *out is untouched if
 *                             NULL), or options->pass_count outside
 *                             1..REPLAY_MAX_PASSES (nothing was replayed).
 *   GMR_ERR_OUT_OF_MEMORY     host memory for the bookkeeping ran out.
 *   a stream creation status  a stream could not be created; nothing was
 *                             replayed and the streams made so far are gone.
 * After a failure status, out->first_failure says what happened and out owns
 * no memory (replay_result_free() is still safe).
 */
gmr_status replay_run(const replay_trace *trace, gmr_resource *top, uint64_t timer_overhead_ns,
                      replay_result *out);

/**
 * replay_run() with `options` (NULL: REPLAY_OPTIONS_DEFAULT, which is what
 * replay_run() uses). Captures that cannot begin or end broken are counted
 * in capture_failure_count and make the result fail.
 * Returns, ownership, state after failure: as replay_run().
 */
gmr_status replay_run_with(const replay_trace *trace, gmr_resource *top,
                           uint64_t timer_overhead_ns, const replay_options *options,
                           replay_result *out);

/**
 * Record how destroying the stack went after the replay; anything but GMR_OK
 * (GMR_ERR_BUSY: the stack still counts live allocations) makes the result
 * fail, and becomes its first failure if there was none. Called once per
 * stack (measure.h destroys two): the first failure status is kept.
 */
void replay_result_set_destroy_status(replay_result *result, gmr_status status);

/** True when the replay ran, every call succeeded and the stack was destroyed cleanly. */
bool replay_result_ok(const replay_result *result);

/** Total of the failure counters, plus one for a failed run and one for a
 * failed destroy (0 when ok). */
size_t replay_result_failure_count(const replay_result *result);

/** Mean host ns per call of a pass timed by the wall clock (wall_ns /
 * wall_call_count); 0 when it was not, or made no call. */
double replay_pass_mean_ns(const replay_pass_result *pass);

/** Fragmentation at the pass's peak: 1 - largest free block / free bytes,
 * in [0, 1]; 0 when nothing is free. false (nothing set) when the stack did
 * not answer get_memory_info. */
bool replay_pass_fragmentation(const replay_pass_result *pass, double *out);

/** Free the timing, pass and held arrays; the counters stay readable. NULL is
 * a no-op. */
void replay_result_free(replay_result *result);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_REPLAY_H_ */
