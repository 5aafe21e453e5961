/*
 * tools/replay/line_reader.c: see line_reader.h.
 */
#include "tools/replay/line_reader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define CHUNK_BYTES ((size_t)1 << 16)

struct replay_line_reader {
  gzFile file;
  unsigned char chunk[CHUNK_BYTES]; /* decompressed bytes not yet split */
  size_t chunk_pos;
  size_t chunk_len;
  bool finished; /* EOF or error seen; `failed` tells which */
  bool failed;
  char failure[160];
  uint64_t line_count;
  char line[REPLAY_LINE_MAX_BYTES + 1];
};

gmr_status replay_line_reader_open(const char *path, replay_line_reader **out, char *err,
                                   size_t err_bytes) {
  if (out != NULL) *out = NULL;
  if (path == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  replay_line_reader *r = calloc(1, sizeof *r);
  if (r == NULL) {
    if (err_bytes > 0) snprintf(err, err_bytes, "out of host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  errno = 0;
  r->file = gzopen(path, "rb");
  if (r->file == NULL) {
    if (err_bytes > 0) {
      snprintf(err, err_bytes, "cannot open %s: %s", path,
               errno != 0 ? strerror(errno) : "zlib could not allocate its state");
    }
    free(r);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  /* A larger buffer than zlib's 8 KiB default: fewer read calls. */
  (void)gzbuffer(r->file, 1u << 17);
  *out = r;
  return GMR_OK;
}

/* Refill the chunk. Returns false at the end of the data; then `failed` says
 * whether that end was an error (gzread returns 0, not -1, for a truncated
 * stream, and leaves Z_BUF_ERROR in gzerror). */
static bool refill(replay_line_reader *r) {
  int n = gzread(r->file, r->chunk, (unsigned)CHUNK_BYTES);
  if (n > 0) {
    r->chunk_pos = 0;
    r->chunk_len = (size_t)n;
    return true;
  }
  r->finished = true;
  int errnum = Z_OK;
  const char *message = gzerror(r->file, &errnum);
  if (n < 0 || errnum != Z_OK) {
    r->failed = true;
    if (errnum == Z_BUF_ERROR) {
      snprintf(r->failure, sizeof r->failure, "truncated gzip data (unexpected end of file)");
    } else if (errnum == Z_ERRNO) {
      snprintf(r->failure, sizeof r->failure, "read error: %s", strerror(errno));
    } else {
      snprintf(r->failure, sizeof r->failure, "corrupt gzip data: %s",
               message != NULL ? message : "unknown zlib error");
    }
  }
  return false;
}

replay_line_status replay_line_reader_next(replay_line_reader *r, replay_line *line,
                                           char *err, size_t err_bytes) {
  if (r == NULL || line == NULL) {
    if (err_bytes > 0) snprintf(err, err_bytes, "invalid argument");
    return REPLAY_LINE_ERROR;
  }
  size_t length = 0;
  bool too_long = false;
  bool have_bytes = false;
  for (;;) {
    if (r->chunk_pos == r->chunk_len) {
      if (r->finished || !refill(r)) {
        if (r->failed) {
          if (err_bytes > 0) snprintf(err, err_bytes, "%s", r->failure);
          return REPLAY_LINE_ERROR;
        }
        if (!have_bytes) return REPLAY_LINE_EOF;
        break; /* a last line without '\n' */
      }
    }
    have_bytes = true;
    const unsigned char *start = r->chunk + r->chunk_pos;
    size_t available = r->chunk_len - r->chunk_pos;
    const unsigned char *newline = memchr(start, '\n', available);
    size_t take = newline != NULL ? (size_t)(newline - start) : available;
    size_t room = REPLAY_LINE_MAX_BYTES - length;
    if (take > room) too_long = true;
    size_t copy = take < room ? take : room;
    memcpy(r->line + length, start, copy);
    length += copy;
    r->chunk_pos += take;
    if (newline != NULL) {
      r->chunk_pos += 1; /* the '\n' itself */
      break;
    }
  }
  if (!too_long && length > 0 && r->line[length - 1] == '\r') length--;
  r->line[length] = '\0';
  r->line_count++;
  line->text = r->line;
  line->length_bytes = length;
  line->too_long = too_long;
  line->number = r->line_count;
  return REPLAY_LINE_OK;
}

replay_line_status replay_line_reader_peek_byte(replay_line_reader *r, unsigned char *out,
                                                char *err, size_t err_bytes) {
  if (r == NULL || out == NULL) {
    if (err_bytes > 0) snprintf(err, err_bytes, "invalid argument");
    return REPLAY_LINE_ERROR;
  }
  if (r->chunk_pos == r->chunk_len && (r->finished || !refill(r))) {
    if (!r->failed) return REPLAY_LINE_EOF;
    if (err_bytes > 0) snprintf(err, err_bytes, "%s", r->failure);
    return REPLAY_LINE_ERROR;
  }
  *out = r->chunk[r->chunk_pos];
  return REPLAY_LINE_OK;
}

replay_line_status replay_line_reader_read_all(replay_line_reader *r, size_t max_bytes,
                                               unsigned char **out, size_t *out_bytes,
                                               char *err, size_t err_bytes) {
  if (out != NULL) *out = NULL;
  if (out_bytes != NULL) *out_bytes = 0;
  if (r == NULL || out == NULL || out_bytes == NULL) {
    if (err_bytes > 0) snprintf(err, err_bytes, "invalid argument");
    return REPLAY_LINE_ERROR;
  }
  unsigned char *data = NULL;
  size_t size = 0;
  size_t capacity = 0;
  for (;;) {
    if (r->chunk_pos == r->chunk_len && (r->finished || !refill(r))) break;
    size_t available = r->chunk_len - r->chunk_pos;
    if (available > max_bytes - size) {
      free(data);
      if (err_bytes > 0) {
        snprintf(err, err_bytes, "more than %zu bytes (uncompressed): too large to read whole",
                 max_bytes);
      }
      return REPLAY_LINE_ERROR;
    }
    if (size + available > capacity) {
      size_t grown = capacity == 0 ? CHUNK_BYTES : capacity;
      while (grown < size + available) grown = grown > max_bytes / 2 ? max_bytes : grown * 2;
      unsigned char *bigger = realloc(data, grown);
      if (bigger == NULL) {
        free(data);
        if (err_bytes > 0) snprintf(err, err_bytes, "out of host memory after %zu bytes", size);
        return REPLAY_LINE_ERROR;
      }
      data = bigger;
      capacity = grown;
    }
    memcpy(data + size, r->chunk + r->chunk_pos, available);
    size += available;
    r->chunk_pos = r->chunk_len;
  }
  if (r->failed) {
    free(data);
    if (err_bytes > 0) snprintf(err, err_bytes, "%s", r->failure);
    return REPLAY_LINE_ERROR;
  }
  if (size == 0) {
    free(data);
    return REPLAY_LINE_EOF;
  }
  *out = data;
  *out_bytes = size;
  return REPLAY_LINE_OK;
}

void replay_line_reader_close(replay_line_reader *r) {
  if (r == NULL) return;
  (void)gzclose(r->file);
  free(r);
}
