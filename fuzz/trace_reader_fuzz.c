/*
 * fuzz/trace_reader_fuzz.c: libFuzzer target for tools/replay's trace reader
 * (replay_trace_read: PyTorch snapshot CSV and RMM log, plain and gzip), used
 * read-only through its library.
 *
 * Input: one mode byte, then the file's bytes. Mode bit 0 set: the bytes are
 * written gzip-compressed (so the fuzzer explores CSV content behind zlib);
 * clear: written as they are (plain text, or raw gzip streams, truncated and
 * corrupt ones included). Each file is read twice: strict, and with
 * skip_malformed.
 *
 * Checked besides the sanitizers: a refused file gives no trace and a
 * message; an accepted trace is consistent with itself (every free pairs an
 * earlier allocation of the same size on a known stream, the counts add up,
 * the stream table matches the events). Run it with fuzz/run.sh trace_reader
 * SECONDS.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "tools/replay/trace.h"

/* The same sanitizer options by hand as under fuzz/run.sh: a huge request
 * gets NULL from malloc (the code under test must cope) instead of ending the
 * run. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=1024";
}

static char path[64];

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "trace_reader_fuzz: %s: %s\n", what, detail);
  abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  /* One scratch file per process, rewritten for every input. */
  snprintf(path, sizeof path, "/tmp/gmr-trace-fuzz-%ld.csv", (long)getpid());
  return 0;
}

static bool write_input(const uint8_t *data, size_t size, bool compress) {
  if (compress) {
    gzFile gz = gzopen(path, "wb1");
    if (gz == NULL) return false;
    bool ok = size == 0 || gzwrite(gz, data, (unsigned)size) == (int)size;
    return gzclose(gz) == Z_OK && ok;
  }
  FILE *f = fopen(path, "wb");
  if (f == NULL) return false;
  bool ok = size == 0 || fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

/* The trace agrees with itself. */
static void check_trace(const replay_trace *t) {
  const replay_trace_summary *s = &t->summary;
  if (s->stream_count != t->stream_count) fail("summary", "stream_count differs from the table");
  if (s->request_count != s->alloc_count + s->free_count) fail("summary", "requests != allocs + frees");
  if (s->alloc_count == 0) fail("summary", "a trace without allocations was accepted");
  size_t allocs = 0, frees = 0, captures = 0;
  uint64_t live = 0, peak = 0;
  size_t *alloc_event = calloc(s->alloc_count, sizeof *alloc_event);
  bool *freed = calloc(s->alloc_count, sizeof *freed);
  if (alloc_event == NULL || freed == NULL) fail("harness", "out of memory");
  for (size_t i = 0; i < t->event_count; ++i) {
    const replay_event *e = &t->events[i];
    if (e->stream_index >= t->stream_count) fail("event", "stream index past the table");
    switch (e->op) {
      case REPLAY_OP_ALLOC:
        if (e->alloc_index != allocs) fail("event", "allocations out of order");
        if (e->size_bytes == 0) fail("event", "allocation of 0 bytes");
        if (e->size_bytes < s->min_size_bytes || e->size_bytes > s->max_size_bytes) {
          fail("event", "allocation outside [min, max] of the summary");
        }
        alloc_event[allocs++] = i;
        live += e->size_bytes;
        if (live > peak) peak = live;
        break;
      case REPLAY_OP_FREE: {
        if (e->alloc_index >= allocs) fail("event", "free of a later allocation");
        if (freed[e->alloc_index]) fail("event", "allocation freed twice");
        const replay_event *a = &t->events[alloc_event[e->alloc_index]];
        if (a->size_bytes != e->size_bytes) fail("event", "free size differs from its allocation");
        freed[e->alloc_index] = true;
        live -= e->size_bytes;
        frees++;
        break;
      }
      case REPLAY_OP_CAPTURE_BEGIN:
        captures++;
        break;
      case REPLAY_OP_CAPTURE_END:
        break;
      default:
        fail("event", "unknown op");
    }
  }
  if (allocs != s->alloc_count || frees != s->free_count) fail("summary", "counts differ from events");
  if (captures != s->capture_count) fail("summary", "capture count differs from events");
  if (peak != s->peak_live_bytes) fail("summary", "peak live bytes differ from events");
  size_t live_count = 0;
  for (size_t i = 0; i < allocs; ++i) live_count += !freed[i];
  if (live_count != s->live_at_end_count) fail("summary", "live-at-end count differs");
  free(alloc_event);
  free(freed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  bool compress = (data[0] & 1) != 0;
  if (!write_input(data + 1, size - 1, compress)) return 0;
  for (int skip = 0; skip < 2; ++skip) {
    replay_trace_options options = REPLAY_TRACE_OPTIONS_DEFAULT;
    options.skip_malformed = skip != 0;
    replay_trace *trace = (replay_trace *)0x1;
    char err[512];
    gmr_status st = replay_trace_read(path, &options, &trace, err, sizeof err);
    if (st != GMR_OK) {
      if (trace != NULL) fail("refused file left a trace", err);
      if (err[0] == '\0') fail("refused file without a message", gmr_status_name(st));
      continue;
    }
    if (trace == NULL) fail("accepted file without a trace", "");
    check_trace(trace);
    replay_trace_destroy(trace);
  }
  unlink(path);
  return 0;
}
