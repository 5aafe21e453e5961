/*
 * tools/replay/replay.c: the replay engine: passes, calls, the clean-up
 * between passes. See replay.h; capture markers are in replay_capture.c.
 */
#include "tools/replay/replay.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "tools/replay/replay_state.h"
#include "tools/replay/timing.h"

void replay__note_failure(replay_result *r, const char *fmt, ...) {
  if (r->first_failure[0] != '\0') return; /* keep the first one */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->first_failure, sizeof r->first_failure, fmt, ap);
  va_end(ap);
}

static const char *failure_text(const gmr_failure *f) {
  return f->message[0] != '\0' ? f->message : gmr_status_string(f->status);
}

static void destroy_streams(const replay_trace *trace, replay_state *s, replay_result *r) {
  if (s->streams == NULL) return;
  for (size_t i = 0; i < trace->stream_count; ++i) {
    if (s->streams[i] == NULL) continue;
    gmr_status st = gmr_cuda_stream_destroy(s->streams[i]);
    if (st != GMR_OK) {
      r->cleanup_failure_count++;
      replay__note_failure(r, "destroying the stream of recorded stream %" PRIu64 ": %s",
                           trace->stream_values[i], gmr_status_name(st));
    }
    s->streams[i] = NULL;
  }
}

static void free_state(replay_state *s) {
  free(s->streams);
  free(s->ptrs);
  free(s->alloc_event);
  free(s->capturing);
  free(s->in_session);
  free(s->graphs);
  free(s->memories);
}

/* A stream of our own for every recorded non-zero stream. */
static gmr_status create_streams(const replay_trace *trace, replay_state *s, replay_result *r) {
  for (size_t i = 0; i < trace->stream_count; ++i) {
    if (trace->stream_values[i] == 0) continue; /* the default stream: NULL */
    gmr_status st = gmr_cuda_stream_create(&s->streams[i]);
    if (st != GMR_OK) {
      replay__note_failure(r, "gmr_cuda_stream_create for recorded stream %" PRIu64 " failed: %s",
                           trace->stream_values[i], gmr_status_name(st));
      return st;
    }
    r->stream_create_count++;
  }
  return GMR_OK;
}

/* ---- one call ------------------------------------------------------------- */

static void replay_alloc(const replay_trace *trace, const replay_event *e, size_t event_index,
                         gmr_resource *top, bool timed, replay_state *s, replay_result *r) {
  gmr_failure failure = GMR_FAILURE_INIT;
  void *ptr = NULL;
  gmr_stream stream = s->streams[e->stream_index];
  gmr_status st;
  if (timed) {
    uint64_t start = replay_clock_now_ns();
    st = gmr_resource_allocate_ex(top, (size_t)e->size_bytes, 0, stream, &ptr, &failure);
    uint64_t end = replay_clock_now_ns();
    r->alloc_ns[r->alloc_count] = replay_elapsed_ns(start, end, r->timer_overhead_ns);
  } else {
    st = gmr_resource_allocate_ex(top, (size_t)e->size_bytes, 0, stream, &ptr, &failure);
  }
  r->alloc_count++;
  s->alloc_event[e->alloc_index] = event_index;
  bool captured = s->capturing[e->stream_index];
  if (captured) r->capture_alloc_count++;
  if (st == GMR_OK) {
    s->ptrs[e->alloc_index] = ptr;
    if (captured) r->capture_alloc_ok_count++;
    return;
  }
  s->ptrs[e->alloc_index] = NULL; /* its free will be skipped */
  r->failed_alloc_count++;
  if (!r->has_alloc_failure) {
    r->has_alloc_failure = true;
    r->first_alloc_failure = failure;
  }
  replay__note_failure(
      r, "%s %" PRIu64 ": allocate %" PRIu64 " bytes on stream %" PRIu64 ": %s: %s",
      replay_trace_location_word(trace), e->line, e->size_bytes,
      trace->stream_values[e->stream_index], gmr_status_name(st), failure_text(&failure));
}

static void replay_free(const replay_trace *trace, const replay_event *e, gmr_resource *top,
                        bool timed, replay_state *s, replay_result *r) {
  void *ptr = s->ptrs[e->alloc_index];
  if (ptr == NULL) {
    r->skipped_free_count++; /* its allocation failed */
    return;
  }
  gmr_stream stream = s->streams[e->stream_index];
  gmr_status st;
  if (timed) {
    uint64_t start = replay_clock_now_ns();
    st = gmr_resource_deallocate(top, ptr, (size_t)e->size_bytes, 0, stream);
    uint64_t end = replay_clock_now_ns();
    r->free_ns[r->free_count] = replay_elapsed_ns(start, end, r->timer_overhead_ns);
  } else {
    st = gmr_resource_deallocate(top, ptr, (size_t)e->size_bytes, 0, stream);
  }
  r->free_count++;
  if (st == GMR_OK) {
    s->ptrs[e->alloc_index] = NULL;
    return;
  }
  /* Nothing was released: the pointer stays live and the end of the pass
   * tries once more. */
  r->failed_free_count++;
  replay__note_failure(r, "%s %" PRIu64 ": deallocate %" PRIu64 " bytes on stream %" PRIu64 ": %s",
                       replay_trace_location_word(trace), e->line, e->size_bytes,
                       trace->stream_values[e->stream_index], gmr_status_name(st));
}

/* ---- between passes --------------------------------------------------------- */

/* Free what the trace left live, on the stream it was allocated on. */
static void free_live(const replay_trace *trace, gmr_resource *top, replay_state *s,
                      replay_result *r, replay_pass_result *pass) {
  for (size_t i = 0; i < trace->summary.alloc_count; ++i) {
    if (s->ptrs[i] == NULL) continue;
    const replay_event *a = &trace->events[s->alloc_event[i]];
    r->live_at_end_count++;
    pass->live_at_end_count++;
    gmr_status st = gmr_resource_deallocate(top, s->ptrs[i], (size_t)a->size_bytes, 0,
                                            s->streams[a->stream_index]);
    if (st != GMR_OK) {
      r->failed_free_count++;
      replay__note_failure(
          r, "end of pass: deallocate %" PRIu64 " bytes allocated at %s %" PRIu64 ": %s",
          a->size_bytes, replay_trace_location_word(trace), a->line, gmr_status_name(st));
    }
    s->ptrs[i] = NULL;
  }
}

static void synchronize_streams(const replay_trace *trace, replay_state *s, replay_result *r) {
  for (size_t i = 0; i < trace->stream_count; ++i) {
    if (s->streams[i] == NULL) continue;
    gmr_status st = gmr_cuda_stream_synchronize(s->streams[i]);
    if (st != GMR_OK) {
      r->cleanup_failure_count++;
      replay__note_failure(r, "synchronising the stream of recorded stream %" PRIu64 ": %s",
                           trace->stream_values[i], gmr_status_name(st));
    }
  }
  /* The default stream, and any work the streams' ordering left behind. */
  gmr_status st = gmr_device_synchronize();
  if (st != GMR_OK) {
    r->cleanup_failure_count++;
    replay__note_failure(r, "gmr_device_synchronize at the end of a pass: %s", gmr_status_name(st));
  }
}

/* Nearest-rank percentiles of values[0..count) into *p50, *p99. */
static void percentiles(const uint64_t *values, size_t count, uint64_t *scratch, uint64_t *p50,
                        uint64_t *p99) {
  memcpy(scratch, values, count * sizeof *scratch);
  replay_sort_u64(scratch, count);
  *p50 = replay_percentile_u64(scratch, count, 50);
  *p99 = replay_percentile_u64(scratch, count, 99);
}

static void compute_percentiles(replay_result *r, size_t alloc_total, size_t free_total) {
  if (r->alloc_ns == NULL || r->free_ns == NULL) return;
  size_t n = alloc_total > free_total ? alloc_total : free_total;
  uint64_t *scratch = malloc((n > 0 ? n : 1) * sizeof *scratch);
  if (scratch == NULL) return; /* the percentiles stay 0; the raw times are kept */
  size_t alloc_at = 0, free_at = 0;
  for (size_t k = 0; k < r->pass_count; ++k) {
    replay_pass_result *p = &r->passes[k];
    percentiles(r->alloc_ns + alloc_at, p->alloc_count, scratch, &p->alloc_p50_ns,
                &p->alloc_p99_ns);
    percentiles(r->free_ns + free_at, p->free_count, scratch, &p->free_p50_ns, &p->free_p99_ns);
    alloc_at += p->alloc_count;
    free_at += p->free_count;
  }
  free(scratch);
  if (r->pass_count > 0) {
    r->alloc_p50_ns = r->passes[0].alloc_p50_ns;
    r->alloc_p99_ns = r->passes[0].alloc_p99_ns;
    r->free_p50_ns = r->passes[0].free_p50_ns;
    r->free_p99_ns = r->passes[0].free_p99_ns;
  }
}

/* ---- held bytes over the pass (REPLAY_TIMING_PER_CALL) ----------------------- */

/* After event `event_index`: record what the stack holds, and at each new
 * high of the pass, what get_memory_info says then. */
static void sample_held(gmr_resource *top, size_t event_index, replay_result *r,
                        replay_pass_result *pass) {
  gmr_footprint fp;
  if (gmr_resource_get_footprint(top, &fp) != GMR_OK) return;
  if (r->held_bytes != NULL) r->held_bytes[r->held_count++] = fp.held_bytes;
  if (pass->has_peak_held && fp.held_bytes <= pass->peak_held_bytes) return;
  pass->has_peak_held = true;
  pass->peak_held_bytes = fp.held_bytes;
  pass->peak_event_index = event_index;
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  pass->memory_info_status = gmr_resource_get_memory_info(top, &info);
  pass->memory_info = info;
}

/* The footprint's high-water mark now; false without a footprint. */
static bool high_water(gmr_resource *top, size_t *out) {
  gmr_footprint fp;
  if (gmr_resource_get_footprint(top, &fp) != GMR_OK) return false;
  *out = fp.peak_held_bytes;
  return true;
}

/* ---- a pass ------------------------------------------------------------------- */

static size_t failures_so_far(const replay_result *r) {
  return r->failed_alloc_count + r->failed_free_count + r->cleanup_failure_count +
         r->capture_failure_count;
}

static void run_pass(const replay_trace *trace, gmr_resource *top, replay_state *s,
                     replay_result *r, replay_pass_result *pass, bool last) {
  const bool per_call = s->options.timing == REPLAY_TIMING_PER_CALL;
  const bool real_capture = s->options.capture == REPLAY_CAPTURE_REAL;
  const size_t failures_before = failures_so_far(r);
  const size_t allocs_before = r->alloc_count, frees_before = r->free_count;
  size_t high_water_before = 0;
  (void)high_water(top, &high_water_before);
  pass->memory_info_status = GMR_ERR_UNSUPPORTED;

  replay_calls calls_before;
  replay_calls_read(&calls_before);
  uint64_t wall_ns = 0;
  uint64_t segment_start = per_call ? 0 : replay_clock_now_ns();
  for (size_t i = 0; i < trace->event_count; ++i) {
    const replay_event *e = &trace->events[i];
    switch ((replay_op)e->op) {
      case REPLAY_OP_ALLOC:
        replay_alloc(trace, e, i, top, per_call, s, r);
        break;
      case REPLAY_OP_FREE:
        replay_free(trace, e, top, per_call, s, r);
        break;
      case REPLAY_OP_CAPTURE_BEGIN:
      case REPLAY_OP_CAPTURE_END:
        if (!real_capture) break;
        /* Stream capture is no allocator call: keep it out of the wall time. */
        if (!per_call) wall_ns += replay_clock_now_ns() - segment_start;
        if (e->op == REPLAY_OP_CAPTURE_BEGIN) {
          replay__begin_capture(trace, e, s, r);
        } else {
          replay__end_capture(trace, e->stream_index, e->line, s, r);
        }
        if (!per_call) segment_start = replay_clock_now_ns();
        break;
    }
    if (per_call) sample_held(top, i, r, pass);
  }
  if (!per_call) wall_ns += replay_clock_now_ns() - segment_start;
  replay_calls_since(&calls_before, &pass->calls);
  pass->alloc_count = r->alloc_count - allocs_before;
  pass->free_count = r->free_count - frees_before;
  if (!per_call) {
    pass->wall_ns = wall_ns;
    pass->wall_call_count = pass->alloc_count + pass->free_count;
  }

  /* A peak inside one call (grown, then given back before it returned) is
   * only in the high-water mark; a high-water mark from an earlier pass is
   * not this pass's. Without per-call samples the high-water mark is all
   * there is. */
  size_t high_water_after = 0;
  if (high_water(top, &high_water_after)) {
    bool rose = high_water_after > high_water_before &&
                (!pass->has_peak_held || high_water_after > pass->peak_held_bytes);
    if (rose || !per_call) {
      pass->has_peak_held = true;
      pass->peak_held_bytes = high_water_after;
    }
  }
  /* The run's footprint is read before anything is freed at the end, so the
   * end-of-run frees cannot change what is reported. */
  if (last) {
    r->footprint_status = gmr_resource_get_footprint(top, &r->footprint);
    gmr_resource *leaf = top;
    for (gmr_resource *below = gmr_resource_get_upstream(leaf); below != NULL;
         below = gmr_resource_get_upstream(leaf)) {
      leaf = below;
    }
    r->leaf_footprint_status = gmr_resource_get_footprint(leaf, &r->leaf_footprint);
  }
  /* A capture the trace left open ends first: nothing may synchronise a
   * capturing stream. */
  for (uint32_t i = 0; i < trace->stream_count; ++i) {
    if (s->capturing[i] || s->in_session[i]) replay__end_capture(trace, i, 0, s, r);
  }
  free_live(trace, top, s, r, pass);
  synchronize_streams(trace, s, r);
  replay__drop_graphs(s, r);
  pass->failure_count = failures_so_far(r) - failures_before;
}

/* ---- a run ---------------------------------------------------------------------- */

static bool allocate_arrays(const replay_trace *trace, replay_state *s, replay_result *out,
                            gmr_resource *top) {
  const size_t passes = s->options.pass_count;
  const size_t alloc_total = trace->summary.alloc_count;
  const size_t streams = trace->stream_count > 0 ? trace->stream_count : 1;
  const size_t captures = trace->summary.capture_count > 0 ? trace->summary.capture_count : 1;
  const bool per_call = s->options.timing == REPLAY_TIMING_PER_CALL;
  s->streams = calloc(streams, sizeof *s->streams);
  s->ptrs = calloc(alloc_total > 0 ? alloc_total : 1, sizeof *s->ptrs);
  s->alloc_event = calloc(alloc_total > 0 ? alloc_total : 1, sizeof *s->alloc_event);
  s->capturing = calloc(streams, sizeof *s->capturing);
  s->in_session = calloc(streams, sizeof *s->in_session);
  s->graphs = calloc(captures, sizeof *s->graphs);
  s->memories = calloc(captures, sizeof *s->memories);
  out->passes = calloc(passes, sizeof *out->passes);
  bool ok = s->streams != NULL && s->ptrs != NULL && s->alloc_event != NULL &&
            s->capturing != NULL && s->in_session != NULL && s->graphs != NULL &&
            s->memories != NULL && out->passes != NULL;
  if (ok && per_call) {
    /* passes <= REPLAY_MAX_PASSES and counts come from an array in memory:
     * the products cannot overflow a size_t on a 64-bit host; check anyway. */
    size_t calls =
        alloc_total > trace->summary.free_count ? alloc_total : trace->summary.free_count;
    if (calls > SIZE_MAX / sizeof(uint64_t) / passes ||
        trace->event_count > SIZE_MAX / sizeof(size_t) / passes) {
      return false;
    }
    out->alloc_ns = malloc((alloc_total * passes + 1) * sizeof *out->alloc_ns);
    out->free_ns = malloc((trace->summary.free_count * passes + 1) * sizeof *out->free_ns);
    gmr_footprint fp;
    if (gmr_resource_get_footprint(top, &fp) == GMR_OK) {
      out->held_bytes = malloc((trace->event_count * passes + 1) * sizeof *out->held_bytes);
      ok = out->held_bytes != NULL;
    }
    ok = ok && out->alloc_ns != NULL && out->free_ns != NULL;
  }
  return ok;
}

static gmr_status run(const replay_trace *trace, gmr_resource *top, uint64_t timer_overhead_ns,
                      const replay_options *options, replay_result *out) {
  memset(out, 0, sizeof *out);
  out->destroy_status = GMR_OK;
  out->footprint_status = GMR_ERR_UNSUPPORTED;
  out->leaf_footprint_status = GMR_ERR_UNSUPPORTED;
  out->timer_overhead_ns = timer_overhead_ns;
  out->timing = options->timing;
  if (trace == NULL || top == NULL) {
    replay__note_failure(out, "replay_run: NULL trace or resource");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (options->pass_count < 1 || options->pass_count > REPLAY_MAX_PASSES) {
    replay__note_failure(out, "replay_run: %zu passes asked; give 1 to %d", options->pass_count,
                         REPLAY_MAX_PASSES);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  replay_state s;
  memset(&s, 0, sizeof s);
  s.options = *options;
  s.arena =
      options->capture == REPLAY_CAPTURE_REAL
          ? gmr_graph_arena_resource_from_resource(gmr_resource_find(top, "graph_arena_resource"))
          : NULL;
  out->has_graph_arena = gmr_graph_arena_resource_from_resource(
                             gmr_resource_find(top, "graph_arena_resource")) != NULL;
  if (!allocate_arrays(trace, &s, out, top)) {
    free_state(&s);
    replay_result_free(out);
    replay__note_failure(out, "replay_run: out of host memory for %zu allocations x %zu passes",
                         trace->summary.alloc_count, options->pass_count);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  out->pass_count = options->pass_count;
  gmr_status st = create_streams(trace, &s, out);
  if (st != GMR_OK) {
    destroy_streams(trace, &s, out);
    free_state(&s);
    replay_result_free(out);
    return st;
  }
  for (size_t k = 0; k < options->pass_count; ++k) {
    if (options->before_pass != NULL) options->before_pass(options->before_pass_context, k);
    run_pass(trace, top, &s, out, &out->passes[k], k + 1 == options->pass_count);
  }
  if (out->has_graph_arena) {
    out->arena = (gmr_graph_arena_resource_stats)GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
    GMR_IGNORE_STATUS(gmr_graph_arena_resource_get_stats(
        gmr_graph_arena_resource_from_resource(gmr_resource_find(top, "graph_arena_resource")),
        &out->arena));
  }
  destroy_streams(trace, &s, out);
  free_state(&s);
  compute_percentiles(out, out->alloc_count, out->free_count);
  return GMR_OK;
}

gmr_status replay_run_with(const replay_trace *trace, gmr_resource *top, uint64_t timer_overhead_ns,
                           const replay_options *options, replay_result *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  const replay_options defaults = REPLAY_OPTIONS_DEFAULT;
  gmr_status st = run(trace, top, timer_overhead_ns, options != NULL ? options : &defaults, out);
  out->run_status = st;
  return st;
}

gmr_status replay_run(const replay_trace *trace, gmr_resource *top, uint64_t timer_overhead_ns,
                      replay_result *out) {
  return replay_run_with(trace, top, timer_overhead_ns, NULL, out);
}

void replay_result_set_destroy_status(replay_result *result, gmr_status status) {
  if (result == NULL) return;
  if (result->destroy_status == GMR_OK) result->destroy_status = status;
  if (status != GMR_OK) {
    replay__note_failure(result, "destroying the stack: %s (%s)", gmr_status_name(status),
                         gmr_status_string(status));
  }
}

size_t replay_result_failure_count(const replay_result *result) {
  if (result == NULL) return 0;
  return failures_so_far(result) + result->clock_run_failure_count +
         (result->run_status != GMR_OK ? 1u : 0u) + (result->destroy_status != GMR_OK ? 1u : 0u);
}

bool replay_result_ok(const replay_result *result) {
  return result != NULL && replay_result_failure_count(result) == 0;
}

double replay_pass_mean_ns(const replay_pass_result *pass) {
  return pass->wall_call_count == 0 ? 0.0
                                    : (double)pass->wall_ns / (double)pass->wall_call_count;
}

bool replay_pass_fragmentation(const replay_pass_result *pass, double *out) {
  if (pass->memory_info_status != GMR_OK) return false;
  const gmr_memory_info *m = &pass->memory_info;
  if (m->free_bytes == 0) {
    *out = 0.0;
  } else {
    size_t largest =
        m->largest_free_block_bytes < m->free_bytes ? m->largest_free_block_bytes : m->free_bytes;
    *out = 1.0 - (double)largest / (double)m->free_bytes;
  }
  return true;
}

void replay_result_free(replay_result *result) {
  if (result == NULL) return;
  free(result->alloc_ns);
  free(result->free_ns);
  free(result->passes);
  free(result->held_bytes);
  result->alloc_ns = NULL;
  result->free_ns = NULL;
  result->passes = NULL;
  result->held_bytes = NULL;
}
