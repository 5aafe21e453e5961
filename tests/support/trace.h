/*
 * tests/support/trace.h: reads the bundled real allocation traces
 * (the .csv.gz files in tools/traces, format in tools/traces/README.md) for tests that
 * replay them. Only application requests are kept: `alloc` and
 * `free_requested` rows; a free of an address never allocated in the file
 * (allocated before recording began) is dropped and counted.
 *
 * Thread-safe: yes (no shared state).
 */
#ifndef GMR_TESTS_SUPPORT_TRACE_H_
#define GMR_TESTS_SUPPORT_TRACE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_trace_event {
  uint64_t addr;    /* the recording's address: pairs a free with its alloc */
  uint64_t size;    /* bytes */
  uint32_t stream;  /* index of the recording's stream, 0..stream_count-1 */
  uint8_t is_free;  /* 0: alloc, 1: free_requested */
} gmr_trace_event;

#define GMR_TRACE_MAX_STREAMS 16

typedef struct gmr_trace {
  gmr_trace_event *events;
  size_t count;
  size_t alloc_count;
  size_t dropped_free_count;        /* frees of addresses allocated before recording */
  size_t stream_count;
  uint64_t streams[GMR_TRACE_MAX_STREAMS]; /* the recording's stream values */
  uint64_t peak_live_bytes;         /* high-water mark of the sum of live sizes */
} gmr_trace;

/* Load a gzip'd CSV trace. Returns 0, or -1 with a sentence in `why` (256 bytes). */
int gmr_trace_load(const char *path, gmr_trace *out, char *why);

void gmr_trace_free(gmr_trace *trace);

/* The path of a bundled trace for a test: `$TEST_SRCDIR/gmr/tools/traces/NAME`
 * under Bazel, else `tools/traces/NAME` (relative to the working directory),
 * else `$GMR_TRACE_DIR/NAME`. Writes into buf (bufsize bytes); returns buf. */
const char *gmr_trace_path(const char *name, char *buf, size_t bufsize);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_TRACE_H_ */
