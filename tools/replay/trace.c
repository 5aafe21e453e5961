/*
 * tools/replay/trace.c: parse a PyTorch snapshot CSV or an RMM log into a
 * replay_trace. See trace.h.
 *
 * Every line is checked completely before it changes any state, so a
 * malformed line skipped with skip_malformed leaves no trace behind (no
 * half-registered stream, no pairing).
 */
#include "tools/replay/trace.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/u64_map.h"
#include "tools/replay/line_reader.h"

#define PYTORCH_HEADER "action,addr,size,stream,time_us"
#define RMM_HEADER "Thread,Time,Action,Pointer,Size,Stream"
#define MAX_COLUMNS 6
#define REASON_BYTES 200

typedef struct field {
  const char *text;
  size_t length;
} field;

/* One parsed row, in format-neutral terms. */
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

typedef struct parser {
  replay_trace *trace;
  gmr__u64_map live;    /* address -> index in trace->events of its live ALLOC */
  gmr__u64_map streams; /* recorded stream value -> stream index */
  uint64_t *capture_line; /* per stream index: line of its open capture_begin, 0 = none */
  size_t events_capacity;
  size_t streams_capacity;
  uint64_t live_bytes;
  uint64_t reserved_bytes;
  char reason[REASON_BYTES];
} parser;

typedef enum line_result { LINE_OK, LINE_MALFORMED, LINE_NO_MEMORY } line_result;

static void set_error(char *err, size_t err_bytes, const char *fmt, ...) {
  if (err == NULL || err_bytes == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_bytes, fmt, ap);
  va_end(ap);
}

static line_result malformed(parser *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->reason, sizeof p->reason, fmt, ap);
  va_end(ap);
  return LINE_MALFORMED;
}

/* Copy at most 40 bytes of `text` for a message, with anything unprintable
 * (garbage, NUL) replaced by '?', so a message stays one readable line. */
static const char *printable(const char *text, size_t length, char *buf, size_t buf_bytes) {
  size_t limit = 40;
  size_t n = 0;
  for (size_t i = 0; i < length && i < limit && n + 1 < buf_bytes; ++i) {
    unsigned char c = (unsigned char)text[i];
    buf[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  buf[n] = '\0';
  if (length > limit && n + 4 < buf_bytes) strcat(buf, "...");
  return buf;
}

static uint64_t add_saturating(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- numbers ------------------------------------------------------------- */

typedef enum number_result { NUMBER_OK, NUMBER_INVALID, NUMBER_OUT_OF_RANGE } number_result;

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Parse the whole field as an unsigned number in `base` (10 or 16; base 16
 * accepts an optional 0x). No sign, no spaces: a trace writer never emits
 * them, so anything else is a sign of a damaged file. */
static number_result parse_number(field f, unsigned base, uint64_t *out) {
  const char *s = f.text;
  size_t n = f.length;
  if (base == 16 && n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s += 2;
    n -= 2;
  }
  if (n == 0) return NUMBER_INVALID;
  uint64_t value = 0;
  bool overflow = false;
  for (size_t i = 0; i < n; ++i) {
    int d = base == 16 ? hex_digit(s[i]) : (s[i] >= '0' && s[i] <= '9' ? s[i] - '0' : -1);
    if (d < 0) return NUMBER_INVALID;
    if (value > (UINT64_MAX - (uint64_t)d) / base) overflow = true;
    value = value * base + (uint64_t)d;
  }
  if (overflow) return NUMBER_OUT_OF_RANGE;
  *out = value;
  return NUMBER_OK;
}

static line_result number_field(parser *p, field f, const char *name, unsigned base,
                                uint64_t *out) {
  number_result r = parse_number(f, base, out);
  if (r == NUMBER_OK) return LINE_OK;
  char shown[48];
  printable(f.text, f.length, shown, sizeof shown);
  if (r == NUMBER_OUT_OF_RANGE) {
    return malformed(p, "field '%s' is out of range for 64 bits: \"%s\"", name, shown);
  }
  return malformed(p, "field '%s' is not a %s number: \"%s\"", name,
                   base == 16 ? "hexadecimal" : "decimal", shown);
}

static bool field_is(field f, const char *word) {
  size_t n = strlen(word);
  return f.length == n && memcmp(f.text, word, n) == 0;
}

/* ---- rows ---------------------------------------------------------------- */

static size_t split(const char *text, size_t length, field *fields, size_t max_fields) {
  size_t count = 0;
  size_t start = 0;
  for (size_t i = 0; i <= length; ++i) {
    if (i == length || text[i] == ',') {
      if (count < max_fields) {
        fields[count].text = text + start;
        fields[count].length = i - start;
      }
      count++;
      start = i + 1;
    }
  }
  return count; /* may exceed max_fields: the caller reports the real count */
}

static line_result parse_pytorch_row(parser *p, const field *f, row *out) {
  static const struct {
    const char *name;
    row_kind kind;
  } actions[] = {
      {"alloc", ROW_ALLOC},
      {"free_requested", ROW_FREE},
      {"free_completed", ROW_IGNORED},
      {"segment_alloc", ROW_SEGMENT_ADD},
      {"segment_free", ROW_SEGMENT_REMOVE},
      {"segment_map", ROW_SEGMENT_ADD},
      {"segment_unmap", ROW_SEGMENT_REMOVE},
      {"capture_begin", ROW_CAPTURE_BEGIN},
      {"capture_end", ROW_CAPTURE_END},
      {"snapshot", ROW_IGNORED},
      {"oom", ROW_IGNORED},
  };
  bool known = false;
  for (size_t i = 0; i < sizeof actions / sizeof actions[0]; ++i) {
    if (field_is(f[0], actions[i].name)) {
      out->kind = actions[i].kind;
      known = true;
      break;
    }
  }
  if (!known) {
    char shown[48];
    return malformed(p, "unknown action \"%s\"", printable(f[0].text, f[0].length, shown,
                                                           sizeof shown));
  }
  uint64_t time_us = 0;
  line_result r = number_field(p, f[1], "addr", 10, &out->addr);
  if (r == LINE_OK) r = number_field(p, f[2], "size", 10, &out->size_bytes);
  if (r == LINE_OK) r = number_field(p, f[3], "stream", 10, &out->stream);
  if (r == LINE_OK) r = number_field(p, f[4], "time_us", 10, &time_us);
  return r;
}

/* RMM writes the time as HH:MM:SS.ffffff; accept digits, ':' and '.'. */
static bool is_rmm_time(field f) {
  if (f.length == 0) return false;
  for (size_t i = 0; i < f.length; ++i) {
    char c = f.text[i];
    if (!((c >= '0' && c <= '9') || c == ':' || c == '.')) return false;
  }
  return true;
}

static line_result parse_rmm_row(parser *p, const field *f, row *out) {
  char shown[48];
  if (field_is(f[2], "allocate")) {
    out->kind = ROW_ALLOC;
  } else if (field_is(f[2], "free")) {
    out->kind = ROW_FREE;
  } else if (field_is(f[2], "allocate failure")) {
    out->kind = ROW_ALLOC_FAILURE;
  } else {
    return malformed(p, "unknown action \"%s\"", printable(f[2].text, f[2].length, shown,
                                                           sizeof shown));
  }
  uint64_t thread = 0;
  line_result r = number_field(p, f[0], "Thread", 10, &thread);
  if (r != LINE_OK) return r;
  if (!is_rmm_time(f[1])) {
    return malformed(p, "field 'Time' is not a time of day: \"%s\"",
                     printable(f[1].text, f[1].length, shown, sizeof shown));
  }
  r = number_field(p, f[3], "Pointer", 16, &out->addr);
  if (r == LINE_OK) r = number_field(p, f[4], "Size", 10, &out->size_bytes);
  if (r == LINE_OK) r = number_field(p, f[5], "Stream", 16, &out->stream);
  return r;
}

/* ---- state changes (only after a row passed every check) ----------------- */

static bool push_event(parser *p, const replay_event *e) {
  replay_trace *t = p->trace;
  if (t->event_count == p->events_capacity) {
    size_t capacity = p->events_capacity == 0 ? 1024 : p->events_capacity * 2;
    if (capacity > SIZE_MAX / sizeof *t->events) return false;
    replay_event *grown = realloc(t->events, capacity * sizeof *grown);
    if (grown == NULL) return false;
    t->events = grown;
    p->events_capacity = capacity;
  }
  t->events[t->event_count++] = *e;
  return true;
}

/* The stream index of `value`, or SIZE_MAX if the trace has not used it. */
static size_t find_stream(const parser *p, uint64_t value) {
  uint64_t index = 0;
  return gmr__u64_map_get(&p->streams, value, &index) ? (size_t)index : SIZE_MAX;
}

static bool intern_stream(parser *p, uint64_t value, uint32_t *out_index) {
  size_t found = find_stream(p, value);
  if (found != SIZE_MAX) {
    *out_index = (uint32_t)found;
    return true;
  }
  replay_trace *t = p->trace;
  if (t->stream_count >= UINT32_MAX) return false;
  if (t->stream_count == p->streams_capacity) {
    size_t capacity = p->streams_capacity == 0 ? 8 : p->streams_capacity * 2;
    uint64_t *values = realloc(t->stream_values, capacity * sizeof *values);
    if (values == NULL) return false;
    t->stream_values = values;
    uint64_t *lines = realloc(p->capture_line, capacity * sizeof *lines);
    if (lines == NULL) return false;
    p->capture_line = lines;
    p->streams_capacity = capacity;
  }
  if (!gmr__u64_map_put(&p->streams, value, t->stream_count)) return false;
  t->stream_values[t->stream_count] = value;
  p->capture_line[t->stream_count] = 0;
  *out_index = (uint32_t)t->stream_count;
  t->stream_count++;
  return true;
}

static bool stream_is_capturing(const parser *p, uint64_t value) {
  size_t index = find_stream(p, value);
  return index != SIZE_MAX && p->capture_line[index] != 0;
}

static line_result apply_alloc(parser *p, const row *r, uint64_t line) {
  replay_trace *t = p->trace;
  replay_trace_summary *s = &t->summary;
  if (r->size_bytes == 0) return malformed(p, "allocation of 0 bytes");
  uint64_t live_event = 0;
  if (gmr__u64_map_get(&p->live, r->addr, &live_event)) {
    /* The address as the file writes it: hex in RMM logs, decimal in PyTorch's. */
    char addr[32];
    if (t->format == REPLAY_TRACE_FORMAT_RMM) {
      snprintf(addr, sizeof addr, "0x%" PRIx64, r->addr);
    } else {
      snprintf(addr, sizeof addr, "%" PRIu64, r->addr);
    }
    return malformed(p, "allocation at address %s which is already live (allocated at line %" PRIu64
                        ")",
                     addr, t->events[live_event].line);
  }
  bool capturing = stream_is_capturing(p, r->stream);
  replay_event e = {r->size_bytes, line, s->alloc_count, 0, REPLAY_OP_ALLOC};
  if (!intern_stream(p, r->stream, &e.stream_index)) return LINE_NO_MEMORY;
  if (!gmr__u64_map_put(&p->live, r->addr, t->event_count)) return LINE_NO_MEMORY;
  if (!push_event(p, &e)) {
    gmr__u64_map_remove(&p->live, r->addr, NULL);
    return LINE_NO_MEMORY;
  }
  s->alloc_count++;
  if (capturing) s->capture_alloc_count++;
  if (s->alloc_count == 1 || r->size_bytes < s->min_size_bytes) s->min_size_bytes = r->size_bytes;
  if (r->size_bytes > s->max_size_bytes) s->max_size_bytes = r->size_bytes;
  p->live_bytes = add_saturating(p->live_bytes, r->size_bytes);
  if (p->live_bytes > s->peak_live_bytes) s->peak_live_bytes = p->live_bytes;
  return LINE_OK;
}

static line_result apply_free(parser *p, const row *r, uint64_t line) {
  replay_trace *t = p->trace;
  replay_trace_summary *s = &t->summary;
  uint64_t alloc_event = 0;
  if (!gmr__u64_map_get(&p->live, r->addr, &alloc_event)) {
    /* Allocated before recording began (or freed twice): nothing to replay. */
    s->unmatched_free_count++;
    return LINE_OK;
  }
  const replay_event *a = &t->events[alloc_event];
  if (a->size_bytes != r->size_bytes) {
    return malformed(p, "free of %" PRIu64 " bytes does not match the allocation of %" PRIu64
                        " bytes at line %" PRIu64,
                     r->size_bytes, a->size_bytes, a->line);
  }
  bool capturing = stream_is_capturing(p, r->stream);
  replay_event e = {a->size_bytes, line, a->alloc_index, 0, REPLAY_OP_FREE};
  if (!intern_stream(p, r->stream, &e.stream_index)) return LINE_NO_MEMORY;
  if (!push_event(p, &e)) return LINE_NO_MEMORY;
  gmr__u64_map_remove(&p->live, r->addr, NULL);
  s->free_count++;
  if (capturing) s->capture_free_count++;
  /* The size matched an allocation counted in live_bytes, unless the sum
   * saturated; never wrap below zero. */
  p->live_bytes = p->live_bytes >= e.size_bytes ? p->live_bytes - e.size_bytes : 0;
  return LINE_OK;
}

static line_result apply_capture(parser *p, const row *r, uint64_t line, bool begin) {
  replay_trace *t = p->trace;
  size_t index = find_stream(p, r->stream);
  uint64_t open_line = index == SIZE_MAX ? 0 : p->capture_line[index];
  if (begin && open_line != 0) {
    return malformed(p, "capture_begin on stream %" PRIu64 ", which is already capturing "
                        "(since line %" PRIu64 ")",
                     r->stream, open_line);
  }
  if (!begin && open_line == 0) {
    return malformed(p, "capture_end on stream %" PRIu64 ", which is not capturing", r->stream);
  }
  replay_event e = {0, line, 0, 0, begin ? REPLAY_OP_CAPTURE_BEGIN : REPLAY_OP_CAPTURE_END};
  if (!intern_stream(p, r->stream, &e.stream_index)) return LINE_NO_MEMORY;
  if (!push_event(p, &e)) return LINE_NO_MEMORY;
  p->capture_line[e.stream_index] = begin ? line : 0;
  if (begin) t->summary.capture_count++;
  return LINE_OK;
}

static line_result apply_row(parser *p, const row *r, uint64_t line) {
  replay_trace_summary *s = &p->trace->summary;
  switch (r->kind) {
    case ROW_ALLOC:
      return apply_alloc(p, r, line);
    case ROW_FREE:
      return apply_free(p, r, line);
    case ROW_CAPTURE_BEGIN:
      return apply_capture(p, r, line, true);
    case ROW_CAPTURE_END:
      return apply_capture(p, r, line, false);
    case ROW_SEGMENT_ADD:
      s->has_reserved_reference = true;
      p->reserved_bytes = add_saturating(p->reserved_bytes, r->size_bytes);
      if (p->reserved_bytes > s->reference_peak_reserved_bytes) {
        s->reference_peak_reserved_bytes = p->reserved_bytes;
      }
      return LINE_OK;
    case ROW_SEGMENT_REMOVE:
      /* A segment reserved before recording began was never added: clamp at
       * zero rather than wrap. */
      s->has_reserved_reference = true;
      p->reserved_bytes = p->reserved_bytes >= r->size_bytes ? p->reserved_bytes - r->size_bytes
                                                             : 0;
      return LINE_OK;
    case ROW_ALLOC_FAILURE:
      s->alloc_failure_row_count++;
      return LINE_OK;
    case ROW_IGNORED:
      return LINE_OK;
  }
  return LINE_OK;
}

static line_result parse_line(parser *p, const replay_line *line) {
  if (line->too_long) return malformed(p, "line longer than %d bytes", REPLAY_LINE_MAX_BYTES);
  if (memchr(line->text, '\0', line->length_bytes) != NULL) {
    return malformed(p, "binary data (a NUL byte) in the line");
  }
  size_t expected = p->trace->format == REPLAY_TRACE_FORMAT_RMM ? 6 : 5;
  field fields[MAX_COLUMNS];
  size_t columns = split(line->text, line->length_bytes, fields, MAX_COLUMNS);
  if (columns != expected) {
    return malformed(p, "expected %zu columns, found %zu", expected, columns);
  }
  row r = {ROW_IGNORED, 0, 0, 0};
  line_result result = p->trace->format == REPLAY_TRACE_FORMAT_RMM
                           ? parse_rmm_row(p, fields, &r)
                           : parse_pytorch_row(p, fields, &r);
  if (result != LINE_OK) return result;
  return apply_row(p, &r, line->number);
}

/* Identify the format from line 1. Returns false with p->reason set. */
static bool read_header(parser *p, const replay_line *line) {
  const char *text = line->text;
  size_t length = line->length_bytes;
  /* A UTF-8 byte order mark, as spreadsheet programs write it. */
  if (length >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
    text += 3;
    length -= 3;
  }
  field header = {text, length}; /* a cut, too long line never equals a header */
  if (field_is(header, PYTORCH_HEADER)) {
    p->trace->format = REPLAY_TRACE_FORMAT_PYTORCH;
    return true;
  }
  if (field_is(header, RMM_HEADER)) {
    p->trace->format = REPLAY_TRACE_FORMAT_RMM;
    return true;
  }
  char shown[48];
  malformed(p, "unknown header \"%s\"; expected \"" PYTORCH_HEADER
               "\" (PyTorch snapshot CSV) or \"" RMM_HEADER "\" (RMM log)",
            printable(text, length, shown, sizeof shown));
  return false;
}

static char *copy_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (copy != NULL) memcpy(copy, s, n);
  return copy;
}

/* Read every line; returns the status and leaves the message in err. */
static gmr_status parse_file(parser *p, replay_line_reader *reader, const char *path,
                             const replay_trace_options *options, char *err, size_t err_bytes) {
  replay_trace *t = p->trace;
  replay_line line;
  char read_error[200] = "";
  replay_line_status ls = replay_line_reader_next(reader, &line, read_error, sizeof read_error);
  if (ls == REPLAY_LINE_EOF) {
    set_error(err, err_bytes, "%s: empty file (no header line)", path);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (ls == REPLAY_LINE_ERROR) {
    set_error(err, err_bytes, "%s: %s", path, read_error);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (!read_header(p, &line)) {
    set_error(err, err_bytes, "%s:%" PRIu64 ": %s", path, line.number, p->reason);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  t->summary.line_count = 1;
  for (;;) {
    ls = replay_line_reader_next(reader, &line, read_error, sizeof read_error);
    if (ls == REPLAY_LINE_EOF) break;
    if (ls == REPLAY_LINE_ERROR) {
      set_error(err, err_bytes, "%s: %s (after line %" PRIu64 ")", path, read_error,
                t->summary.line_count);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    t->summary.line_count = line.number;
    if (line.length_bytes == 0 && !line.too_long) continue; /* blank line */
    line_result r = parse_line(p, &line);
    if (r == LINE_NO_MEMORY) {
      set_error(err, err_bytes, "%s:%" PRIu64 ": out of host memory", path, line.number);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    if (r == LINE_MALFORMED) {
      if (!options->skip_malformed) {
        set_error(err, err_bytes, "%s:%" PRIu64 ": %s", path, line.number, p->reason);
        return GMR_ERR_INVALID_ARGUMENT;
      }
      if (t->summary.malformed_count == 0) {
        snprintf(t->first_malformed, sizeof t->first_malformed, "%s:%" PRIu64 ": %s", path,
                 line.number, p->reason);
      }
      t->summary.malformed_count++;
    }
  }
  if (t->summary.alloc_count == 0) {
    set_error(err, err_bytes, "%s: no allocations in the trace (%" PRIu64 " lines read%s)", path,
              t->summary.line_count,
              t->summary.malformed_count > 0 ? ", malformed lines skipped" : "");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

gmr_status replay_trace_read(const char *path, const replay_trace_options *options,
                             replay_trace **out, char *err, size_t err_bytes) {
  set_error(err, err_bytes, "%s", "");
  if (out != NULL) *out = NULL;
  if (path == NULL || out == NULL) {
    set_error(err, err_bytes, "invalid argument (NULL path or out)");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  replay_trace_options defaults = REPLAY_TRACE_OPTIONS_DEFAULT;
  if (options == NULL) options = &defaults;

  replay_trace *t = calloc(1, sizeof *t);
  char *path_copy = copy_string(path);
  if (t == NULL || path_copy == NULL) {
    free(t);
    free(path_copy);
    set_error(err, err_bytes, "%s: out of host memory", path);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  t->path = path_copy;

  replay_line_reader *reader = NULL;
  gmr_status st = replay_line_reader_open(path, &reader, err, err_bytes);
  if (st != GMR_OK) {
    replay_trace_destroy(t);
    return st;
  }
  parser p;
  memset(&p, 0, sizeof p);
  p.trace = t;
  gmr__u64_map live = GMR__U64_MAP_INIT;
  gmr__u64_map streams = GMR__U64_MAP_INIT;
  p.live = live;
  p.streams = streams;

  st = parse_file(&p, reader, path, options, err, err_bytes);
  replay_line_reader_close(reader);
  t->summary.live_at_end_count = p.live.count;
  t->summary.stream_count = t->stream_count;
  t->summary.request_count = t->summary.alloc_count + t->summary.free_count;
  gmr__u64_map_clear(&p.live);
  gmr__u64_map_clear(&p.streams);
  free(p.capture_line);
  if (st != GMR_OK) {
    replay_trace_destroy(t);
    return st;
  }
  *out = t;
  return GMR_OK;
}

void replay_trace_destroy(replay_trace *trace) {
  if (trace == NULL) return;
  free(trace->path);
  free(trace->events);
  free(trace->stream_values);
  free(trace);
}

const char *replay_trace_format_name(replay_trace_format format) {
  return format == REPLAY_TRACE_FORMAT_RMM ? "rmm" : "pytorch";
}
