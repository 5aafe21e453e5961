/*
 * tools/replay/replay.c: the replay engine. See replay.h.
 */
#include "tools/replay/replay.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/device.h"
#include "tools/replay/timing.h"

/* Everything a run owns besides the result's timing arrays. */
typedef struct replay_state {
  gmr_stream *streams;  /* per stream index; NULL for the default stream */
  void **ptrs;          /* per allocation index: the live pointer, NULL otherwise */
  size_t *alloc_event;  /* per allocation index: its ALLOC event */
  bool *capturing;      /* per stream index: a capture of ours is open on it */
  bool *in_session;     /* per stream index: the arena has an explicit session on it */
  replay_options options;
  gmr_graph_arena_resource *arena; /* the stack's graph arena, or NULL */
  /* Kept until the end of the trace, as a program keeps what it replays. */
  gmr_graph *graphs;
  size_t graph_count;
  gmr_graph_memory **memories;
  size_t memory_count;
  /* The graph memory every capture of the trace appends to, as a program that
   * passes one pool to all its captures (LLM servers, one graph per batch size). */
  gmr_graph_memory *shared_memory;
} replay_state;

static void note_failure(replay_result *r, const char *fmt, ...) {
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
    gmr_status st = gmr_stream_destroy(s->streams[i]);
    if (st != GMR_OK) {
      r->cleanup_failure_count++;
      note_failure(r, "destroying the stream of recorded stream %" PRIu64 ": %s",
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
    gmr_status st = gmr_stream_create(&s->streams[i]);
    if (st != GMR_OK) {
      note_failure(r, "gmr_stream_create for recorded stream %" PRIu64 " failed: %s",
                   trace->stream_values[i], gmr_status_name(st));
      return st;
    }
    r->stream_create_count++;
  }
  return GMR_OK;
}

static void replay_alloc(const replay_trace *trace, const replay_event *e, size_t event_index,
                         gmr_resource *top, replay_state *s, replay_result *r) {
  gmr_failure failure;
  void *ptr = NULL;
  uint64_t start = replay_clock_now_ns();
  gmr_status st = gmr_allocate_ex(top, (size_t)e->size_bytes, 0, s->streams[e->stream_index],
                                  &ptr, &failure);
  uint64_t end = replay_clock_now_ns();
  r->alloc_ns[r->alloc_count++] = replay_elapsed_ns(start, end, r->timer_overhead_ns);
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
  note_failure(r, "line %" PRIu64 ": allocate %" PRIu64 " bytes on stream %" PRIu64 ": %s: %s",
               e->line, e->size_bytes, trace->stream_values[e->stream_index],
               gmr_status_name(st), failure_text(&failure));
}

static void replay_free(const replay_trace *trace, const replay_event *e, gmr_resource *top,
                        replay_state *s, replay_result *r) {
  void *ptr = s->ptrs[e->alloc_index];
  if (ptr == NULL) {
    r->skipped_free_count++; /* its allocation failed */
    return;
  }
  uint64_t start = replay_clock_now_ns();
  gmr_status st =
      gmr_deallocate(top, ptr, (size_t)e->size_bytes, 0, s->streams[e->stream_index]);
  uint64_t end = replay_clock_now_ns();
  r->free_ns[r->free_count++] = replay_elapsed_ns(start, end, r->timer_overhead_ns);
  if (st == GMR_OK) {
    s->ptrs[e->alloc_index] = NULL;
    return;
  }
  /* Nothing was released: the pointer stays live and the end of the run
   * tries once more. */
  r->failed_free_count++;
  note_failure(r, "line %" PRIu64 ": deallocate %" PRIu64 " bytes on stream %" PRIu64 ": %s",
               e->line, e->size_bytes, trace->stream_values[e->stream_index],
               gmr_status_name(st));
}

/* capture_begin: grow the arena if asked, open the arena's session, then
 * capture the stream for real. */
static void begin_capture(const replay_trace *trace, const replay_event *e, replay_state *s,
                          replay_result *r) {
  uint32_t i = e->stream_index;
  uint64_t recorded = trace->stream_values[i];
  if (s->streams[i] == NULL) {
    r->capture_failure_count++;
    note_failure(r, "line %" PRIu64 ": capture_begin on recorded stream 0, the default stream, "
                    "which CUDA cannot capture",
                 e->line);
    return;
  }
  if (s->arena != NULL && s->options.arena_reserve_bytes > 0) {
    gmr_status st = gmr_graph_arena_resource_reserve(s->arena, s->options.arena_reserve_bytes);
    if (st != GMR_OK) {
      r->capture_failure_count++;
      note_failure(r,
                   "line %" PRIu64 ": gmr_graph_arena_resource_reserve(%zu) before the capture: %s",
                   e->line, s->options.arena_reserve_bytes, gmr_status_name(st));
    }
  }
  if (s->arena != NULL) {
    gmr_status st = gmr_graph_arena_resource_begin_capture(s->arena, s->streams[i],
                                                           s->shared_memory);
    /* Another stream's capture appends to it now: this one gets its own. */
    if (st == GMR_ERR_BUSY && s->shared_memory != NULL) {
      st = gmr_graph_arena_resource_begin_capture(s->arena, s->streams[i], NULL);
    }
    if (st == GMR_OK) {
      s->in_session[i] = true;
    } else {
      r->capture_failure_count++;
      note_failure(
          r, "line %" PRIu64 ": gmr_graph_arena_resource_begin_capture on stream %" PRIu64 ": %s",
          e->line, recorded, gmr_status_name(st));
    }
  }
  gmr_status st = gmr_stream_begin_capture(s->streams[i]);
  if (st != GMR_OK) {
    r->capture_failure_count++;
    note_failure(r, "line %" PRIu64 ": gmr_stream_begin_capture on stream %" PRIu64 ": %s",
                 e->line, recorded, gmr_status_name(st));
    return;
  }
  s->capturing[i] = true;
  r->capture_count++;
}

/* capture_end (or the end of the trace): end the real capture, which must
 * still be valid, and take the arena's graph memory. Both are kept. */
static void end_capture(const replay_trace *trace, uint32_t i, uint64_t line, replay_state *s,
                        replay_result *r) {
  uint64_t recorded = trace->stream_values[i];
  if (s->capturing[i]) {
    gmr_graph graph = NULL;
    gmr_status st = gmr_stream_end_capture(s->streams[i], &graph);
    s->capturing[i] = false;
    if (st != GMR_OK) {
      r->capture_failure_count++;
      note_failure(r, "line %" PRIu64 ": the capture of stream %" PRIu64 " was broken by a "
                      "capture-unsafe call inside it (gmr_stream_end_capture: %s)",
                   line, recorded, gmr_status_name(st));
    } else {
      s->graphs[s->graph_count++] = graph;
    }
  }
  if (s->in_session[i]) {
    gmr_graph_memory *memory = NULL;
    gmr_status st = gmr_graph_arena_resource_end_capture(s->arena, s->streams[i], &memory);
    s->in_session[i] = false;
    if (st != GMR_OK) {
      r->capture_failure_count++;
      note_failure(
          r, "line %" PRIu64 ": gmr_graph_arena_resource_end_capture on stream %" PRIu64 ": %s",
          line, recorded, gmr_status_name(st));
    } else {
      s->memories[s->memory_count++] = memory;
      if (s->shared_memory == NULL) s->shared_memory = memory;
    }
  }
}

/* The graphs are gone, then the memory they used goes back to the arena. */
static void drop_graphs(replay_state *s, replay_result *r) {
  for (size_t k = 0; k < s->graph_count; ++k) {
    gmr_status st = gmr_graph_destroy(s->graphs[k]);
    if (st != GMR_OK) {
      r->cleanup_failure_count++;
      note_failure(r, "gmr_graph_destroy at the end: %s", gmr_status_name(st));
    }
  }
  s->graph_count = 0;
  for (size_t k = 0; k < s->memory_count; ++k) {
    gmr_status st = gmr_graph_arena_resource_release_graph_memory(s->arena, s->memories[k]);
    if (st != GMR_OK) {
      r->cleanup_failure_count++;
      note_failure(r, "gmr_graph_arena_resource_release_graph_memory at the end: %s",
                   gmr_status_name(st));
    }
  }
  s->memory_count = 0;
}

/* Free what the trace left live, on the stream it was allocated on. */
static void free_live(const replay_trace *trace, gmr_resource *top, replay_state *s,
                      replay_result *r) {
  for (size_t i = 0; i < trace->summary.alloc_count; ++i) {
    if (s->ptrs[i] == NULL) continue;
    const replay_event *a = &trace->events[s->alloc_event[i]];
    r->live_at_end_count++;
    gmr_status st = gmr_deallocate(top, s->ptrs[i], (size_t)a->size_bytes, 0,
                                   s->streams[a->stream_index]);
    if (st != GMR_OK) {
      r->failed_free_count++;
      note_failure(r, "end of run: deallocate %" PRIu64 " bytes allocated at line %" PRIu64
                      ": %s",
                   a->size_bytes, a->line, gmr_status_name(st));
    }
    s->ptrs[i] = NULL;
  }
}

static void synchronize_streams(const replay_trace *trace, replay_state *s, replay_result *r) {
  for (size_t i = 0; i < trace->stream_count; ++i) {
    if (s->streams[i] == NULL) continue;
    gmr_status st = gmr_stream_synchronize(s->streams[i]);
    if (st != GMR_OK) {
      r->cleanup_failure_count++;
      note_failure(r, "synchronising the stream of recorded stream %" PRIu64 ": %s",
                   trace->stream_values[i], gmr_status_name(st));
    }
  }
  /* The default stream, and any work the streams' ordering left behind. */
  gmr_status st = gmr_device_synchronize();
  if (st != GMR_OK) {
    r->cleanup_failure_count++;
    note_failure(r, "gmr_device_synchronize at the end: %s", gmr_status_name(st));
  }
}

static void compute_percentiles(replay_result *r) {
  size_t n = r->alloc_count > r->free_count ? r->alloc_count : r->free_count;
  uint64_t *sorted = malloc((n > 0 ? n : 1) * sizeof *sorted);
  if (sorted == NULL) return; /* the percentiles stay 0; the raw times are kept */
  memcpy(sorted, r->alloc_ns, r->alloc_count * sizeof *sorted);
  replay_sort_u64(sorted, r->alloc_count);
  r->alloc_p50_ns = replay_percentile_u64(sorted, r->alloc_count, 50);
  r->alloc_p99_ns = replay_percentile_u64(sorted, r->alloc_count, 99);
  memcpy(sorted, r->free_ns, r->free_count * sizeof *sorted);
  replay_sort_u64(sorted, r->free_count);
  r->free_p50_ns = replay_percentile_u64(sorted, r->free_count, 50);
  r->free_p99_ns = replay_percentile_u64(sorted, r->free_count, 99);
  free(sorted);
}

static gmr_status run(const replay_trace *trace, gmr_resource *top, uint64_t timer_overhead_ns,
                      const replay_options *options, replay_result *out) {
  memset(out, 0, sizeof *out);
  out->destroy_status = GMR_OK;
  out->footprint_status = GMR_ERR_UNSUPPORTED;
  out->timer_overhead_ns = timer_overhead_ns;
  if (trace == NULL || top == NULL) {
    note_failure(out, "replay_run: NULL trace or resource");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  const size_t alloc_total = trace->summary.alloc_count;
  const size_t free_total = trace->summary.free_count;
  const size_t streams = trace->stream_count > 0 ? trace->stream_count : 1;
  const size_t captures = trace->summary.capture_count > 0 ? trace->summary.capture_count : 1;
  replay_state s;
  memset(&s, 0, sizeof s);
  s.options = *options;
  s.arena =
      options->capture == REPLAY_CAPTURE_REAL ? gmr_graph_arena_resource_find_in_stack(top) : NULL;
  out->has_graph_arena = gmr_graph_arena_resource_find_in_stack(top) != NULL;
  s.streams = calloc(streams, sizeof *s.streams);
  s.ptrs = calloc(alloc_total > 0 ? alloc_total : 1, sizeof *s.ptrs);
  s.alloc_event = calloc(alloc_total > 0 ? alloc_total : 1, sizeof *s.alloc_event);
  s.capturing = calloc(streams, sizeof *s.capturing);
  s.in_session = calloc(streams, sizeof *s.in_session);
  s.graphs = calloc(captures, sizeof *s.graphs);
  s.memories = calloc(captures, sizeof *s.memories);
  out->alloc_ns = calloc(alloc_total > 0 ? alloc_total : 1, sizeof *out->alloc_ns);
  out->free_ns = calloc(free_total > 0 ? free_total : 1, sizeof *out->free_ns);
  if (s.streams == NULL || s.ptrs == NULL || s.alloc_event == NULL || s.capturing == NULL ||
      s.in_session == NULL || s.graphs == NULL || s.memories == NULL || out->alloc_ns == NULL ||
      out->free_ns == NULL) {
    free_state(&s);
    replay_result_free(out);
    note_failure(out, "replay_run: out of host memory for %zu allocations", alloc_total);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr_status st = create_streams(trace, &s, out);
  if (st != GMR_OK) {
    destroy_streams(trace, &s, out);
    free_state(&s);
    replay_result_free(out);
    return st;
  }

  for (size_t i = 0; i < trace->event_count; ++i) {
    const replay_event *e = &trace->events[i];
    switch ((replay_op)e->op) {
      case REPLAY_OP_ALLOC:
        replay_alloc(trace, e, i, top, &s, out);
        break;
      case REPLAY_OP_FREE:
        replay_free(trace, e, top, &s, out);
        break;
      case REPLAY_OP_CAPTURE_BEGIN:
        if (options->capture == REPLAY_CAPTURE_REAL) begin_capture(trace, e, &s, out);
        break;
      case REPLAY_OP_CAPTURE_END:
        if (options->capture == REPLAY_CAPTURE_REAL) {
          end_capture(trace, e->stream_index, e->line, &s, out);
        }
        break;
    }
  }

  /* The peak is read before anything is freed at the end, so the end-of-run
   * frees cannot change what is reported. */
  out->footprint_status = gmr_resource_get_footprint(top, &out->footprint);
  /* A capture the trace left open ends first: nothing may synchronise a
   * capturing stream. */
  for (uint32_t i = 0; i < trace->stream_count; ++i) {
    if (s.capturing[i] || s.in_session[i]) end_capture(trace, i, 0, &s, out);
  }
  free_live(trace, top, &s, out);
  synchronize_streams(trace, &s, out);
  drop_graphs(&s, out);
  if (out->has_graph_arena) {
    out->arena = (gmr_graph_arena_stats)GMR_GRAPH_ARENA_STATS_INIT;
    (void)gmr_graph_arena_resource_get_stats(gmr_graph_arena_resource_find_in_stack(top),
                                             &out->arena);
  }
  destroy_streams(trace, &s, out);
  free_state(&s);
  compute_percentiles(out);
  return GMR_OK;
}

gmr_status replay_run_with(const replay_trace *trace, gmr_resource *top,
                           uint64_t timer_overhead_ns, const replay_options *options,
                           replay_result *out) {
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
  result->destroy_status = status;
  if (status != GMR_OK) {
    note_failure(result, "destroying the stack: %s (%s)", gmr_status_name(status),
                 gmr_status_string(status));
  }
}

size_t replay_result_failure_count(const replay_result *result) {
  if (result == NULL) return 0;
  return result->failed_alloc_count + result->failed_free_count +
         result->cleanup_failure_count + result->capture_failure_count +
         (result->run_status != GMR_OK ? 1u : 0u) +
         (result->destroy_status != GMR_OK ? 1u : 0u);
}

bool replay_result_ok(const replay_result *result) {
  return result != NULL && replay_result_failure_count(result) == 0;
}

void replay_result_free(replay_result *result) {
  if (result == NULL) return;
  free(result->alloc_ns);
  free(result->free_ns);
  result->alloc_ns = NULL;
  result->free_ns = NULL;
}
