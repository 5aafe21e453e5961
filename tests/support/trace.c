/*
 * tests/support/trace.c: see trace.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "tests/support/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "util/u64_map.h"

static int push(gmr_trace *t, size_t *cap, gmr_trace_event e) {
  if (t->count == *cap) {
    size_t n = *cap == 0 ? 4096 : *cap * 2;
    gmr_trace_event *grown = realloc(t->events, n * sizeof *grown);
    if (grown == NULL) return -1;
    t->events = grown;
    *cap = n;
  }
  t->events[t->count++] = e;
  return 0;
}

static int stream_index(gmr_trace *t, uint64_t value) {
  for (size_t i = 0; i < t->stream_count; ++i) {
    if (t->streams[i] == value) return (int)i;
  }
  if (t->stream_count == GMR_TRACE_MAX_STREAMS) return -1;
  t->streams[t->stream_count] = value;
  return (int)t->stream_count++;
}

int gmr_trace_load(const char *path, gmr_trace *out, char *why) {
  memset(out, 0, sizeof *out);
  gzFile f = gzopen(path, "rb");
  if (f == NULL) {
    snprintf(why, 256, "cannot open trace %s", path);
    return -1;
  }
  gmr__u64_map live = GMR__U64_MAP_INIT; /* addr -> size */
  size_t cap = 0;
  uint64_t live_bytes = 0;
  char line[512];
  int rc = 0;
  bool header = true;
  while (gzgets(f, line, sizeof line) != NULL) {
    if (header) {
      header = false;
      continue;
    }
    char action[32];
    unsigned long long addr = 0, size = 0, stream = 0;
    if (sscanf(line, "%31[^,],%llu,%llu,%llu", action, &addr, &size, &stream) != 4) continue;
    bool is_alloc = strcmp(action, "alloc") == 0;
    bool is_free = strcmp(action, "free_requested") == 0;
    if (!is_alloc && !is_free) continue;
    int s = stream_index(out, stream);
    if (s < 0) {
      snprintf(why, 256, "trace %s has more than %d streams", path, GMR_TRACE_MAX_STREAMS);
      rc = -1;
      break;
    }
    gmr_trace_event e = {addr, size, (uint32_t)s, (uint8_t)(is_free ? 1 : 0)};
    if (is_alloc) {
      if (!gmr__u64_map_put(&live, addr, size)) {
        rc = -1;
        break;
      }
      live_bytes += size;
      if (live_bytes > out->peak_live_bytes) out->peak_live_bytes = live_bytes;
      out->alloc_count++;
    } else {
      uint64_t sz = 0;
      if (!gmr__u64_map_remove(&live, addr, &sz)) {
        out->dropped_free_count++;
        continue;
      }
      e.size = sz;
      live_bytes -= sz;
    }
    if (push(out, &cap, e) != 0) {
      rc = -1;
      break;
    }
  }
  gzclose(f);
  gmr__u64_map_clear(&live);
  if (rc != 0) {
    if (why[0] == '\0') snprintf(why, 256, "out of host memory reading %s", path);
    gmr_trace_free(out);
  }
  return rc;
}

void gmr_trace_free(gmr_trace *trace) {
  free(trace->events);
  memset(trace, 0, sizeof *trace);
}

const char *gmr_trace_path(const char *name, char *buf, size_t bufsize) {
  const char *srcdir = getenv("TEST_SRCDIR");
  if (srcdir != NULL) {
    snprintf(buf, bufsize, "%s/gmr/tools/traces/%s", srcdir, name);
    if (access(buf, R_OK) == 0) return buf;
  }
  snprintf(buf, bufsize, "tools/traces/%s", name);
  if (access(buf, R_OK) == 0) return buf;
  const char *dir = getenv("GMR_TRACE_DIR");
  if (dir != NULL) snprintf(buf, bufsize, "%s/%s", dir, name);
  return buf;
}
