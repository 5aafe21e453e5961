/*
 * tools/replay/replay_capture.c: the trace's capture markers, honoured for
 * real (see replay.h): the mapped stream captures a CUDA graph, and a graph
 * arena in the stack gets an explicit session for it.
 */
#include <inttypes.h>
#include <stdio.h>

#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "tools/replay/replay_state.h"

/* capture_begin: grow the arena if asked, open the arena's session, then
 * capture the stream for real. */
void replay__begin_capture(const replay_trace *trace, const replay_event *e, replay_state *s,
                           replay_result *r) {
  uint32_t i = e->stream_index;
  uint64_t recorded = trace->stream_values[i];
  if (s->streams[i] == NULL) {
    r->capture_failure_count++;
    replay__note_failure(r,
                         "%s %" PRIu64
                         ": capture_begin on recorded stream 0, the default stream, "
                         "which CUDA cannot capture",
                         replay_trace_location_word(trace), e->line);
    return;
  }
  if (s->arena != NULL && s->options.arena_reserve_bytes > 0) {
    gmr_status st = gmr_graph_arena_resource_reserve(s->arena, s->options.arena_reserve_bytes);
    if (st != GMR_OK) {
      r->capture_failure_count++;
      replay__note_failure(r, "%s %" PRIu64 ": gmr_graph_arena_resource_reserve(%zu) before the capture: %s",
                           replay_trace_location_word(trace), e->line,
                           s->options.arena_reserve_bytes, gmr_status_name(st));
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
      replay__note_failure(
          r, "%s %" PRIu64 ": gmr_graph_arena_resource_begin_capture on stream %" PRIu64 ": %s",
          replay_trace_location_word(trace), e->line, recorded, gmr_status_name(st));
    }
  }
  gmr_status st = gmr_cuda_stream_begin_capture(s->streams[i]);
  if (st != GMR_OK) {
    r->capture_failure_count++;
    replay__note_failure(r,
                         "%s %" PRIu64 ": gmr_cuda_stream_begin_capture on stream %" PRIu64 ": %s",
                         replay_trace_location_word(trace), e->line, recorded, gmr_status_name(st));
    return;
  }
  s->capturing[i] = true;
  r->capture_count++;
}

/* capture_end (or the end of a pass): end the real capture, which must
 * still be valid, and take the arena's graph memory. Both are kept. */
void replay__end_capture(const replay_trace *trace, uint32_t i, uint64_t line, replay_state *s,
                         replay_result *r) {
  uint64_t recorded = trace->stream_values[i];
  if (s->capturing[i]) {
    gmr_graph graph = NULL;
    gmr_status st = gmr_cuda_stream_end_capture(s->streams[i], &graph);
    s->capturing[i] = false;
    if (st != GMR_OK) {
      r->capture_failure_count++;
      replay__note_failure(r,
                           "%s %" PRIu64 ": the capture of stream %" PRIu64
                           " was broken by a "
                           "capture-unsafe call inside it (gmr_cuda_stream_end_capture: %s)",
                           replay_trace_location_word(trace), line, recorded, gmr_status_name(st));
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
      replay__note_failure(r,
                           "%s %" PRIu64 ": gmr_graph_arena_resource_end_capture on stream %" PRIu64 ": %s",
                           replay_trace_location_word(trace), line, recorded, gmr_status_name(st));
    } else {
      s->memories[s->memory_count++] = memory;
      if (s->shared_memory == NULL) s->shared_memory = memory;
    }
  }
}

/* The graphs are gone, then the memory they used goes back to the arena. */
void replay__drop_graphs(replay_state *s, replay_result *r) {
  for (size_t k = 0; k < s->graph_count; ++k) {
    gmr_status st = gmr_cuda_graph_destroy(s->graphs[k]);
    if (st != GMR_OK) {
      r->cleanup_failure_count++;
      replay__note_failure(r, "gmr_cuda_graph_destroy at the end of the pass: %s",
                           gmr_status_name(st));
    }
  }
  s->graph_count = 0;
  for (size_t k = 0; k < s->memory_count; ++k) {
    gmr_status st = gmr_graph_arena_resource_release_graph_memory(s->arena, s->memories[k]);
    if (st != GMR_OK) {
      r->cleanup_failure_count++;
      replay__note_failure(r, "gmr_graph_arena_resource_release_graph_memory at the end of the pass: %s",
                           gmr_status_name(st));
    }
  }
  s->memory_count = 0;
  s->shared_memory = NULL;
}
