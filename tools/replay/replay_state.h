/*
 * tools/replay/replay_state.h (internal to the replay engine): what a run
 * owns besides its result, shared by replay.c (calls, passes) and
 * replay_capture.c (capture markers).
 *
 * Thread-safe: no; one run per state.
 */
#ifndef GMR_TOOLS_REPLAY_REPLAY_STATE_H_
#define GMR_TOOLS_REPLAY_REPLAY_STATE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/graph_arena_resource.h"
#include "gmr/resource.h"
#include "tools/replay/replay.h"
#include "tools/replay/trace.h"

typedef struct replay_state {
  gmr_stream *streams;  /* per stream index; NULL for the default stream */
  void **ptrs;          /* per allocation index: the live pointer, NULL otherwise */
  size_t *alloc_event;  /* per allocation index: its ALLOC event */
  bool *capturing;      /* per stream index: a capture of ours is open on it */
  bool *in_session;     /* per stream index: the arena has an explicit session on it */
  replay_options options;
  gmr_graph_arena_resource *arena; /* the stack's graph arena, or NULL */
  /* Kept until the end of the pass, as a program keeps what it replays. */
  gmr_graph *graphs;
  size_t graph_count;
  gmr_graph_memory **memories;
  size_t memory_count;
  /* The graph memory every capture of the pass appends to, as a program that
   * passes one pool to all its captures (LLM servers, one graph per batch size). */
  gmr_graph_memory *shared_memory;
} replay_state;

/** Keep the first failure text of a run (printf-style). */
void replay__note_failure(replay_result *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/** capture_begin of event `e`: grow the arena if asked, open the arena's
 * session, then capture the stream for real. Failures are counted in r. */
void replay__begin_capture(const replay_trace *trace, const replay_event *e, replay_state *s,
                           replay_result *r);

/** capture_end on stream index `i` (or the end of a pass: line 0): end the
 * real capture, which must still be valid, and take the arena's graph
 * memory. Both are kept until replay__drop_graphs(). */
void replay__end_capture(const replay_trace *trace, uint32_t i, uint64_t line, replay_state *s,
                         replay_result *r);

/** Destroy the kept graphs, then release their graph memory to the arena. */
void replay__drop_graphs(replay_state *s, replay_result *r);

#endif /* GMR_TOOLS_REPLAY_REPLAY_STATE_H_ */
