/*
 * tools/replay/trace_build.c: rows to a replay_trace. See trace_build.h.
 */
#include "tools/replay/trace_build.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void trace_build_set_error(char *err, size_t err_bytes, const char *fmt, ...) {
  if (err == NULL || err_bytes == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_bytes, fmt, ap);
  va_end(ap);
}

line_result trace_build_malformed(trace_builder *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->reason, sizeof b->reason, fmt, ap);
  va_end(ap);
  return LINE_MALFORMED;
}

const char *trace_build_printable(const char *text, size_t length, char *buf, size_t buf_bytes) {
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

bool trace_build_pytorch_action(const char *name, size_t length, row_kind *out) {
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
  for (size_t i = 0; i < sizeof actions / sizeof actions[0]; ++i) {
    if (strlen(actions[i].name) == length && memcmp(name, actions[i].name, length) == 0) {
      *out = actions[i].kind;
      return true;
    }
  }
  return false;
}

static uint64_t add_saturating(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

void trace_build_init(trace_builder *b, replay_trace *trace) {
  memset(b, 0, sizeof *b);
  b->trace = trace;
  const gmr__u64_map empty = GMR__U64_MAP_INIT;
  b->live = empty;
  b->streams = empty;
}

void trace_build_finish(trace_builder *b) {
  replay_trace *t = b->trace;
  t->summary.live_at_end_count = b->live.count;
  t->summary.stream_count = t->stream_count;
  t->summary.request_count = t->summary.alloc_count + t->summary.free_count;
  gmr__u64_map_clear(&b->live);
  gmr__u64_map_clear(&b->streams);
  free(b->capture_line);
  b->capture_line = NULL;
}

static bool push_event(trace_builder *b, const replay_event *e) {
  replay_trace *t = b->trace;
  if (t->event_count == b->events_capacity) {
    size_t capacity = b->events_capacity == 0 ? 1024 : b->events_capacity * 2;
    if (capacity > SIZE_MAX / sizeof *t->events) return false;
    replay_event *grown = realloc(t->events, capacity * sizeof *grown);
    if (grown == NULL) return false;
    t->events = grown;
    b->events_capacity = capacity;
  }
  t->events[t->event_count++] = *e;
  return true;
}

/* The stream index of `value`, or SIZE_MAX if the trace has not used it. */
static size_t find_stream(const trace_builder *b, uint64_t value) {
  uint64_t index = 0;
  return gmr__u64_map_get(&b->streams, value, &index) ? (size_t)index : SIZE_MAX;
}

static bool intern_stream(trace_builder *b, uint64_t value, uint32_t *out_index) {
  size_t found = find_stream(b, value);
  if (found != SIZE_MAX) {
    *out_index = (uint32_t)found;
    return true;
  }
  replay_trace *t = b->trace;
  if (t->stream_count >= UINT32_MAX) return false;
  if (t->stream_count == b->streams_capacity) {
    size_t capacity = b->streams_capacity == 0 ? 8 : b->streams_capacity * 2;
    uint64_t *values = realloc(t->stream_values, capacity * sizeof *values);
    if (values == NULL) return false;
    t->stream_values = values;
    uint64_t *lines = realloc(b->capture_line, capacity * sizeof *lines);
    if (lines == NULL) return false;
    b->capture_line = lines;
    b->streams_capacity = capacity;
  }
  if (!gmr__u64_map_put(&b->streams, value, t->stream_count)) return false;
  t->stream_values[t->stream_count] = value;
  b->capture_line[t->stream_count] = 0;
  *out_index = (uint32_t)t->stream_count;
  t->stream_count++;
  return true;
}

static bool stream_is_capturing(const trace_builder *b, uint64_t value) {
  size_t index = find_stream(b, value);
  return index != SIZE_MAX && b->capture_line[index] != 0;
}

static line_result apply_alloc(trace_builder *b, const row *r, uint64_t line) {
  replay_trace *t = b->trace;
  replay_trace_summary *s = &t->summary;
  if (r->size_bytes == 0) return trace_build_malformed(b, "allocation of 0 bytes");
  uint64_t live_event = 0;
  if (gmr__u64_map_get(&b->live, r->addr, &live_event)) {
    /* The address as the file writes it: hex in RMM logs, decimal otherwise. */
    char addr[32];
    if (t->format == REPLAY_TRACE_FORMAT_RMM) {
      snprintf(addr, sizeof addr, "0x%" PRIx64, r->addr);
    } else {
      snprintf(addr, sizeof addr, "%" PRIu64, r->addr);
    }
    return trace_build_malformed(b,
                                 "allocation at address %s which is already live (allocated "
                                 "at %s %" PRIu64 ")",
                                 addr, replay_trace_location_word(t), t->events[live_event].line);
  }
  bool capturing = stream_is_capturing(b, r->stream);
  replay_event e = {r->size_bytes, line, s->alloc_count, 0, REPLAY_OP_ALLOC};
  if (!intern_stream(b, r->stream, &e.stream_index)) return LINE_NO_MEMORY;
  if (!gmr__u64_map_put(&b->live, r->addr, t->event_count)) return LINE_NO_MEMORY;
  if (!push_event(b, &e)) {
    (void)gmr__u64_map_remove(&b->live, r->addr, NULL);
    return LINE_NO_MEMORY;
  }
  s->alloc_count++;
  if (capturing) s->capture_alloc_count++;
  if (s->alloc_count == 1 || r->size_bytes < s->min_size_bytes) s->min_size_bytes = r->size_bytes;
  if (r->size_bytes > s->max_size_bytes) s->max_size_bytes = r->size_bytes;
  b->live_bytes = add_saturating(b->live_bytes, r->size_bytes);
  if (b->live_bytes > s->peak_live_bytes) s->peak_live_bytes = b->live_bytes;
  return LINE_OK;
}

static line_result apply_free(trace_builder *b, const row *r, uint64_t line) {
  replay_trace *t = b->trace;
  replay_trace_summary *s = &t->summary;
  uint64_t alloc_event = 0;
  if (!gmr__u64_map_get(&b->live, r->addr, &alloc_event)) {
    /* Allocated before recording began (or freed twice): nothing to replay. */
    s->unmatched_free_count++;
    return LINE_OK;
  }
  const replay_event *a = &t->events[alloc_event];
  if (a->size_bytes != r->size_bytes) {
    return trace_build_malformed(b,
                                 "free of %" PRIu64
                                 " bytes does not match the allocation of "
                                 "%" PRIu64 " bytes at %s %" PRIu64,
                                 r->size_bytes, a->size_bytes, replay_trace_location_word(t),
                                 a->line);
  }
  bool capturing = stream_is_capturing(b, r->stream);
  replay_event e = {a->size_bytes, line, a->alloc_index, 0, REPLAY_OP_FREE};
  if (!intern_stream(b, r->stream, &e.stream_index)) return LINE_NO_MEMORY;
  if (!push_event(b, &e)) return LINE_NO_MEMORY;
  (void)gmr__u64_map_remove(&b->live, r->addr, NULL);
  s->free_count++;
  if (capturing) s->capture_free_count++;
  /* The size matched an allocation counted in live_bytes, unless the sum
   * saturated; never wrap below zero. */
  b->live_bytes = b->live_bytes >= e.size_bytes ? b->live_bytes - e.size_bytes : 0;
  return LINE_OK;
}

static line_result apply_capture(trace_builder *b, const row *r, uint64_t line, bool begin) {
  replay_trace *t = b->trace;
  size_t index = find_stream(b, r->stream);
  uint64_t open_line = index == SIZE_MAX ? 0 : b->capture_line[index];
  if (begin && open_line != 0) {
    return trace_build_malformed(b,
                                 "capture_begin on stream %" PRIu64
                                 ", which is already "
                                 "capturing (since %s %" PRIu64 ")",
                                 r->stream, replay_trace_location_word(t), open_line);
  }
  if (!begin && open_line == 0) {
    return trace_build_malformed(b, "capture_end on stream %" PRIu64 ", which is not capturing",
                                 r->stream);
  }
  replay_event e = {0, line, 0, 0, begin ? REPLAY_OP_CAPTURE_BEGIN : REPLAY_OP_CAPTURE_END};
  if (!intern_stream(b, r->stream, &e.stream_index)) return LINE_NO_MEMORY;
  if (!push_event(b, &e)) return LINE_NO_MEMORY;
  b->capture_line[e.stream_index] = begin ? line : 0;
  if (begin) t->summary.capture_count++;
  return LINE_OK;
}

line_result trace_build_apply(trace_builder *b, const row *r, uint64_t line) {
  replay_trace_summary *s = &b->trace->summary;
  switch (r->kind) {
    case ROW_ALLOC:
      return apply_alloc(b, r, line);
    case ROW_FREE:
      return apply_free(b, r, line);
    case ROW_CAPTURE_BEGIN:
      return apply_capture(b, r, line, true);
    case ROW_CAPTURE_END:
      return apply_capture(b, r, line, false);
    case ROW_SEGMENT_ADD:
      s->has_reserved_reference = true;
      b->reserved_bytes = add_saturating(b->reserved_bytes, r->size_bytes);
      if (b->reserved_bytes > s->reference_peak_reserved_bytes) {
        s->reference_peak_reserved_bytes = b->reserved_bytes;
      }
      return LINE_OK;
    case ROW_SEGMENT_REMOVE:
      /* A segment reserved before recording began was never added: clamp at
       * zero rather than wrap. */
      s->has_reserved_reference = true;
      b->reserved_bytes =
          b->reserved_bytes >= r->size_bytes ? b->reserved_bytes - r->size_bytes : 0;
      return LINE_OK;
    case ROW_ALLOC_FAILURE:
      s->alloc_failure_row_count++;
      return LINE_OK;
    case ROW_IGNORED:
      return LINE_OK;
  }
  return LINE_OK;
}
