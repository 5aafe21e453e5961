/*
 * tools/replay/trace_csv.c: the text formats, PyTorch's snapshot CSV export
 * and RAPIDS RMM's log, read line by line into rows. See trace.h for what is
 * malformed, trace_build.h for what a row does.
 */
#include "tools/replay/trace_csv.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define PYTORCH_HEADER "action,addr,size,stream,time_us"
#define RMM_HEADER "Thread,Time,Action,Pointer,Size,Stream"
#define MAX_COLUMNS 6

typedef struct field {
  const char *text;
  size_t length;
} field;

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

static line_result number_field(trace_builder *p, field f, const char *name, unsigned base,
                                uint64_t *out) {
  number_result r = parse_number(f, base, out);
  if (r == NUMBER_OK) return LINE_OK;
  char shown[48];
  trace_build_printable(f.text, f.length, shown, sizeof shown);
  if (r == NUMBER_OUT_OF_RANGE) {
    return trace_build_malformed(p, "field '%s' is out of range for 64 bits: \"%s\"", name, shown);
  }
  return trace_build_malformed(p, "field '%s' is not a %s number: \"%s\"", name,
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

static line_result parse_pytorch_row(trace_builder *p, const field *f, row *out) {
  if (!trace_build_pytorch_action(f[0].text, f[0].length, &out->kind)) {
    char shown[48];
    return trace_build_malformed(
        p, "unknown action \"%s\"",
        trace_build_printable(f[0].text, f[0].length, shown, sizeof shown));
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

static line_result parse_rmm_row(trace_builder *p, const field *f, row *out) {
  char shown[48];
  if (field_is(f[2], "allocate")) {
    out->kind = ROW_ALLOC;
  } else if (field_is(f[2], "free")) {
    out->kind = ROW_FREE;
  } else if (field_is(f[2], "allocate failure")) {
    out->kind = ROW_ALLOC_FAILURE;
  } else {
    return trace_build_malformed(
        p, "unknown action \"%s\"",
        trace_build_printable(f[2].text, f[2].length, shown, sizeof shown));
  }
  uint64_t thread = 0;
  line_result r = number_field(p, f[0], "Thread", 10, &thread);
  if (r != LINE_OK) return r;
  if (!is_rmm_time(f[1])) {
    return trace_build_malformed(
        p, "field 'Time' is not a time of day: \"%s\"",
        trace_build_printable(f[1].text, f[1].length, shown, sizeof shown));
  }
  r = number_field(p, f[3], "Pointer", 16, &out->addr);
  if (r == LINE_OK) r = number_field(p, f[4], "Size", 10, &out->size_bytes);
  if (r == LINE_OK) r = number_field(p, f[5], "Stream", 16, &out->stream);
  return r;
}

/* ---- lines --------------------------------------------------------------- */

static line_result parse_line(trace_builder *p, const replay_line *line) {
  if (line->too_long)
    return trace_build_malformed(p, "line longer than %d bytes", REPLAY_LINE_MAX_BYTES);
  if (memchr(line->text, '\0', line->length_bytes) != NULL) {
    return trace_build_malformed(p, "binary data (a NUL byte) in the line");
  }
  size_t expected = p->trace->format == REPLAY_TRACE_FORMAT_RMM ? 6 : 5;
  field fields[MAX_COLUMNS];
  size_t columns = split(line->text, line->length_bytes, fields, MAX_COLUMNS);
  if (columns != expected) {
    return trace_build_malformed(p, "expected %zu columns, found %zu", expected, columns);
  }
  row r = {ROW_IGNORED, 0, 0, 0};
  line_result result = p->trace->format == REPLAY_TRACE_FORMAT_RMM
                           ? parse_rmm_row(p, fields, &r)
                           : parse_pytorch_row(p, fields, &r);
  if (result != LINE_OK) return result;
  return trace_build_apply(p, &r, line->number);
}

/* Identify the format from line 1. Returns false with p->reason set. */
static bool read_header(trace_builder *p, const replay_line *line) {
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
  trace_build_malformed(p,
                        "unknown header \"%s\"; expected \"" PYTORCH_HEADER
                        "\" (PyTorch snapshot CSV) or \"" RMM_HEADER "\" (RMM log)",
                        trace_build_printable(text, length, shown, sizeof shown));
  return false;
}

gmr_status trace_csv_read(trace_builder *p, replay_line_reader *reader, const char *path,
                          const replay_trace_options *options, char *err, size_t err_bytes) {
  replay_trace *t = p->trace;
  replay_line line;
  char read_error[200] = "";
  replay_line_status ls = replay_line_reader_next(reader, &line, read_error, sizeof read_error);
  if (ls == REPLAY_LINE_EOF) {
    trace_build_set_error(err, err_bytes, "%s: empty file (no header line)", path);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (ls == REPLAY_LINE_ERROR) {
    trace_build_set_error(err, err_bytes, "%s: %s", path, read_error);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (!read_header(p, &line)) {
    trace_build_set_error(err, err_bytes, "%s:%" PRIu64 ": %s", path, line.number, p->reason);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  t->summary.line_count = 1;
  for (;;) {
    ls = replay_line_reader_next(reader, &line, read_error, sizeof read_error);
    if (ls == REPLAY_LINE_EOF) break;
    if (ls == REPLAY_LINE_ERROR) {
      trace_build_set_error(err, err_bytes, "%s: %s (after line %" PRIu64 ")", path, read_error,
                            t->summary.line_count);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    t->summary.line_count = line.number;
    if (line.length_bytes == 0 && !line.too_long) continue; /* blank line */
    line_result r = parse_line(p, &line);
    if (r == LINE_NO_MEMORY) {
      trace_build_set_error(err, err_bytes, "%s:%" PRIu64 ": out of host memory", path,
                            line.number);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    if (r == LINE_MALFORMED) {
      if (!options->skip_malformed) {
        trace_build_set_error(err, err_bytes, "%s:%" PRIu64 ": %s", path, line.number, p->reason);
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
    trace_build_set_error(
        err, err_bytes, "%s: no allocations in the trace (%" PRIu64 " lines read%s)", path,
        t->summary.line_count, t->summary.malformed_count > 0 ? ", malformed lines skipped" : "");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}
