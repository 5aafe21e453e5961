/*
 * tools/replay/trace.c: read a trace file into a replay_trace. See trace.h.
 *
 * The first decompressed byte picks the reader: 0x80 (pickle's PROTO) is a
 * snapshot pickle (trace_snapshot.c), anything else a text trace
 * (trace_csv.c). Both build through trace_build.c.
 */
#include "tools/replay/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/replay/line_reader.h"
#include "tools/replay/trace_build.h"
#include "tools/replay/trace_csv.h"
#include "tools/replay/trace_snapshot.h"

#define PICKLE_PROTO_BYTE 0x80

static char *copy_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (copy != NULL) memcpy(copy, s, n);
  return copy;
}

/* A fresh trace named `path`, or NULL (err set) when host memory ran out. */
static replay_trace *new_trace(const char *path, char *err, size_t err_bytes) {
  replay_trace *t = calloc(1, sizeof *t);
  char *path_copy = copy_string(path);
  if (t == NULL || path_copy == NULL) {
    free(t);
    free(path_copy);
    trace_build_set_error(err, err_bytes, "%s: out of host memory", path);
    return NULL;
  }
  t->path = path_copy;
  return t;
}

/* Run one reader over a fresh builder; on failure the trace is destroyed. */
static gmr_status finish(trace_builder *b, gmr_status st, replay_trace **out) {
  trace_build_finish(b);
  if (st != GMR_OK) {
    replay_trace_destroy(b->trace);
    return st;
  }
  *out = b->trace;
  return GMR_OK;
}

/* The whole (decompressed) file as a snapshot pickle. */
static gmr_status read_pickle_file(trace_builder *b, replay_line_reader *reader, const char *path,
                                   const replay_trace_options *options, char *err,
                                   size_t err_bytes) {
  unsigned char *data = NULL;
  size_t size = 0;
  char reason[200] = "";
  replay_line_status ls = replay_line_reader_read_all(reader, REPLAY_TRACE_MAX_PICKLE_BYTES, &data,
                                                      &size, reason, sizeof reason);
  if (ls != REPLAY_LINE_OK) {
    trace_build_set_error(err, err_bytes, "%s: %s", path,
                          ls == REPLAY_LINE_EOF ? "empty file" : reason);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_status st = trace_snapshot_read(b, data, size, path, options, err, err_bytes);
  free(data);
  return st;
}

gmr_status replay_trace_read(const char *path, const replay_trace_options *options,
                             replay_trace **out, char *err, size_t err_bytes) {
  trace_build_set_error(err, err_bytes, "%s", "");
  if (out != NULL) *out = NULL;
  if (path == NULL || out == NULL) {
    trace_build_set_error(err, err_bytes, "invalid argument (NULL path or out)");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  const replay_trace_options defaults = REPLAY_TRACE_OPTIONS_DEFAULT;
  if (options == NULL) options = &defaults;

  replay_trace *t = new_trace(path, err, err_bytes);
  if (t == NULL) return GMR_ERR_OUT_OF_MEMORY;
  replay_line_reader *reader = NULL;
  gmr_status st = replay_line_reader_open(path, &reader, err, err_bytes);
  if (st != GMR_OK) {
    replay_trace_destroy(t);
    return st;
  }
  trace_builder b;
  trace_build_init(&b, t);
  unsigned char first = 0;
  char reason[200] = "";
  replay_line_status ls = replay_line_reader_peek_byte(reader, &first, reason, sizeof reason);
  if (ls == REPLAY_LINE_EOF) {
    trace_build_set_error(err, err_bytes, "%s: empty file (no header line)", path);
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (ls == REPLAY_LINE_ERROR) {
    trace_build_set_error(err, err_bytes, "%s: %s", path, reason);
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (first == PICKLE_PROTO_BYTE) {
    st = read_pickle_file(&b, reader, path, options, err, err_bytes);
  } else {
    st = trace_csv_read(&b, reader, path, options, err, err_bytes);
  }
  replay_line_reader_close(reader);
  return finish(&b, st, out);
}

gmr_status replay_trace_read_pickle(const unsigned char *data, size_t size, const char *name,
                                    const replay_trace_options *options, replay_trace **out,
                                    char *err, size_t err_bytes) {
  trace_build_set_error(err, err_bytes, "%s", "");
  if (out != NULL) *out = NULL;
  if (data == NULL || name == NULL || out == NULL) {
    trace_build_set_error(err, err_bytes, "invalid argument (NULL data, name or out)");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  const replay_trace_options defaults = REPLAY_TRACE_OPTIONS_DEFAULT;
  if (options == NULL) options = &defaults;
  replay_trace *t = new_trace(name, err, err_bytes);
  if (t == NULL) return GMR_ERR_OUT_OF_MEMORY;
  trace_builder b;
  trace_build_init(&b, t);
  gmr_status st = trace_snapshot_read(&b, data, size, name, options, err, err_bytes);
  return finish(&b, st, out);
}

void replay_trace_destroy(replay_trace *trace) {
  if (trace == NULL) return;
  free(trace->path);
  free(trace->events);
  free(trace->stream_values);
  free(trace);
}

const char *replay_trace_format_name(replay_trace_format format) {
  switch (format) {
    case REPLAY_TRACE_FORMAT_RMM:
      return "rmm";
    case REPLAY_TRACE_FORMAT_SNAPSHOT:
      return "snapshot";
    case REPLAY_TRACE_FORMAT_PYTORCH:
      break;
  }
  return "pytorch";
}

const char *replay_trace_location_word(const replay_trace *trace) {
  return trace != NULL && trace->format == REPLAY_TRACE_FORMAT_SNAPSHOT ? "entry" : "line";
}
