/*
 * tools/replay/line_reader.h: read a gzip-compressed or plain file through
 * zlib, line by line (text traces) or whole (snapshot pickles).
 *
 * zlib's gzread reads uncompressed files transparently, so one reader serves
 * both. Lines are split here rather than with gzgets, because gzgets cannot
 * tell a NUL byte inside a line from the line's end: binary garbage must be
 * reported, not silently cut short. A truncated or corrupt gzip stream is a
 * read error, never a short but "valid" file.
 *
 * Thread-safe: no; one reader per thread.
 */
#ifndef GMR_TOOLS_REPLAY_LINE_READER_H_
#define GMR_TOOLS_REPLAY_LINE_READER_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest line kept; longer lines are cut here and flagged. */
#define REPLAY_LINE_MAX_BYTES 4096

typedef struct replay_line_reader replay_line_reader;

typedef enum replay_line_status {
  REPLAY_LINE_OK = 0,    /* a line was read */
  REPLAY_LINE_EOF = 1,   /* the file ended cleanly; no line */
  REPLAY_LINE_ERROR = 2  /* the file could not be read further; err says why */
} replay_line_status;

/* One line, valid until the next call on the same reader. */
typedef struct replay_line {
  const char *text;  /* without the '\n' and one trailing '\r'; NUL-terminated */
  size_t length_bytes; /* bytes in text; a NUL byte inside is possible */
  bool too_long;     /* the line exceeded REPLAY_LINE_MAX_BYTES and was cut */
  uint64_t number;   /* 1-based line number */
} replay_line;

/**
 * Open `path` for reading.
 * Ownership: the caller closes *out with replay_line_reader_close().
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL argument, or the file cannot
 * be opened: `err` gets "cannot open PATH: <strerror>"); GMR_ERR_OUT_OF_MEMORY.
 * On failure *out is NULL.
 */
gmr_status replay_line_reader_open(const char *path, replay_line_reader **out, char *err,
                                   size_t err_bytes);

/**
 * Read the next line into *line. A last line without '\n' is still a line.
 * Returns REPLAY_LINE_OK, REPLAY_LINE_EOF, or REPLAY_LINE_ERROR with `err`
 * set ("truncated gzip data (unexpected end of file)", a zlib or system
 * message); after EOF or ERROR every further call returns the same.
 */
replay_line_status replay_line_reader_next(replay_line_reader *reader, replay_line *line,
                                           char *err, size_t err_bytes);

/**
 * The next byte of the (decompressed) file without consuming it: how the
 * trace reader tells a pickle (first byte 0x80) from a text trace.
 * Returns REPLAY_LINE_OK with *out set, REPLAY_LINE_EOF for an empty file, or
 * REPLAY_LINE_ERROR with `err` set.
 */
replay_line_status replay_line_reader_peek_byte(replay_line_reader *reader, unsigned char *out,
                                                char *err, size_t err_bytes);

/**
 * Read everything left in the file into one buffer, at most `max_bytes`.
 * Ownership: on REPLAY_LINE_OK the caller frees *out (free()); otherwise *out
 * is NULL and *out_bytes 0.
 * Returns REPLAY_LINE_OK; REPLAY_LINE_EOF when nothing is left;
 * REPLAY_LINE_ERROR with `err` set (read or gzip error, more than max_bytes,
 * out of host memory).
 */
replay_line_status replay_line_reader_read_all(replay_line_reader *reader, size_t max_bytes,
                                               unsigned char **out, size_t *out_bytes,
                                               char *err, size_t err_bytes);

/** Close the file and free the reader. NULL is a no-op. */
void replay_line_reader_close(replay_line_reader *reader);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_LINE_READER_H_ */
