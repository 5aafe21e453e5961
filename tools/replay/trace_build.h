/*
 * tools/replay/trace_build.h (internal to the trace reader): build a
 * replay_trace from rows in format-neutral terms.
 *
 * The readers of each format (trace_csv.c: PyTorch CSV and RMM logs;
 * trace_snapshot.c: PyTorch snapshot pickles) turn their input into `row`s
 * and hand them to trace_build_apply(), which checks each one completely
 * before it changes any state: a malformed row skipped with skip_malformed
 * leaves nothing behind (no half-registered stream, no pairing).
 *
 * Thread-safe: no; one builder per read.
 */
#ifndef GMR_TOOLS_REPLAY_TRACE_BUILD_H_
#define GMR_TOOLS_REPLAY_TRACE_BUILD_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/status.h"
#include "util/u64_map.h"
#include "tools/replay/trace.h"

#define TRACE_REASON_BYTES 200

/* What a row asks for. */
typedef enum row_kind {
  ROW_ALLOC,
  ROW_FREE,
  ROW_SEGMENT_ADD,    /* segment_alloc, segment_map: the recorder reserved more */
  ROW_SEGMENT_REMOVE, /* segment_free, segment_unmap */
  ROW_CAPTURE_BEGIN,
  ROW_CAPTURE_END,
  ROW_ALLOC_FAILURE, /* RMM "allocate failure" */
  ROW_IGNORED        /* free_completed, snapshot, oom */
} row_kind;

typedef struct row {
  row_kind kind;
  uint64_t addr;
  uint64_t size_bytes;
  uint64_t stream;
} row;

typedef enum line_result { LINE_OK, LINE_MALFORMED, LINE_NO_MEMORY } line_result;

typedef struct trace_builder {
  replay_trace *trace;
  gmr__u64_map live;    /* address -> index in trace->events of its live ALLOC */
  gmr__u64_map streams; /* recorded stream value -> stream index */
  uint64_t *capture_line;  /* per stream index: line of its open capture_begin, 0 = none */
  size_t events_capacity;
  size_t streams_capacity;
  uint64_t live_bytes;
  uint64_t reserved_bytes;
  char reason[TRACE_REASON_BYTES]; /* why the last row was malformed */
} trace_builder;

/** Start building into `trace` (zeroed by the caller, format set). */
void trace_build_init(trace_builder *b, replay_trace *trace);

/** Apply one checked row found at `line` (a line, or an entry number for
 * snapshots). LINE_MALFORMED leaves the reason in b->reason and changes
 * nothing. */
line_result trace_build_apply(trace_builder *b, const row *r, uint64_t line);

/** Fill the summary's end-of-file counts and free the builder's maps. */
void trace_build_finish(trace_builder *b);

/** Set b->reason; returns LINE_MALFORMED. */
line_result trace_build_malformed(trace_builder *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/** The row kind of a PyTorch action name (`length` bytes of `name`); false
 * when the name is unknown. Shared by the CSV and snapshot readers. */
bool trace_build_pytorch_action(const char *name, size_t length, row_kind *out);

/** Copy at most 40 bytes of `text` for a message, anything unprintable as
 * '?' and "..." when cut. Returns buf. */
const char *trace_build_printable(const char *text, size_t length, char *buf, size_t buf_bytes);

/** snprintf into err (err_bytes; NULL/0: nothing). */
void trace_build_set_error(char *err, size_t err_bytes, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif /* GMR_TOOLS_REPLAY_TRACE_BUILD_H_ */
