/*
 * tools/replay/trace.h: read an allocation trace into memory.
 *
 * Three formats: a file whose first byte is 0x80 is a pickle; text files are
 * told apart by their header line:
 *  - PyTorch snapshot export (tools/traces/README.md):
 *      action,addr,size,stream,time_us
 *    `alloc` is a request to allocate, `free_requested` a request to free;
 *    `segment_alloc`/`segment_free` (and `segment_map`/`segment_unmap`) tell
 *    what the recording allocator reserved; `capture_begin`/`capture_end`
 *    mark a CUDA graph capture of the row's stream; `free_completed`,
 *    `snapshot` and `oom` need no replay.
 *  - RAPIDS RMM's logging_resource_adaptor CSV:
 *      Thread,Time,Action,Pointer,Size,Stream
 *    actions `allocate`, `free`, and `allocate failure` (not a request:
 *    counted and skipped); pointer and stream in hex, with or without 0x.
 * Files may be gzip-compressed or plain (zlib reads both) and use CRLF or LF.
 *  - PyTorch memory snapshot pickle: `torch.cuda.memory._snapshot()` saved with
 *    `pickle.dump` (or `torch.cuda.memory._dump_snapshot`); its
 *    `device_traces` entries are the rows of the CSV export above, read with
 *    the bounded pickle reader of pickle.h (no Python needed). One device's
 *    trace is replayed: the only one with entries, or the one asked for.
 *    Entries are numbered from 1 where a CSV has line numbers.
 *
 * The whole file is parsed first; frees are paired with their allocation by
 * address (an address may be reused once freed), so a replay needs no lookup
 * by address. Bad input never crashes the reader: it fails with a message
 * "FILE:LINE: reason", or, with skip_malformed, counts and skips the line.
 *
 * Used by tools/replay and tools/bench.
 * Thread-safe: yes for distinct traces; a parsed trace is read-only and may be
 * read from several threads at once.
 */
#ifndef GMR_TOOLS_REPLAY_TRACE_H_
#define GMR_TOOLS_REPLAY_TRACE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum replay_trace_format {
  REPLAY_TRACE_FORMAT_PYTORCH = 0, /* action,addr,size,stream,time_us */
  REPLAY_TRACE_FORMAT_RMM = 1,     /* Thread,Time,Action,Pointer,Size,Stream */
  REPLAY_TRACE_FORMAT_SNAPSHOT = 2 /* PyTorch memory snapshot pickle */
} replay_trace_format;

typedef enum replay_op {
  REPLAY_OP_ALLOC = 0,         /* allocate size_bytes on stream_index */
  REPLAY_OP_FREE = 1,          /* free allocation alloc_index on stream_index */
  REPLAY_OP_CAPTURE_BEGIN = 2, /* stream_index starts a CUDA graph capture */
  REPLAY_OP_CAPTURE_END = 3    /* stream_index ends its capture */
} replay_op;

/* One event to replay, in file order. */
typedef struct replay_event {
  uint64_t size_bytes;  /* ALLOC, FREE: the allocation's size; markers: 0 */
  uint64_t line;        /* 1-based line of the file it came from (snapshots: entry) */
  size_t alloc_index;   /* ALLOC: 0, 1, 2... in file order; FREE: the ALLOC it frees */
  uint32_t stream_index; /* index into replay_trace::stream_values */
  uint8_t op;           /* a replay_op */
} replay_event;

/* What the trace asks for, computed while parsing. */
typedef struct replay_trace_summary {
  size_t request_count;          /* alloc_count + free_count: the calls a replay makes */
  size_t alloc_count;            /* allocation requests */
  size_t free_count;             /* frees paired with an allocation of this file */
  size_t unmatched_free_count;   /* frees of addresses not live in this file: skipped */
  size_t live_at_end_count;      /* allocations the trace never frees */
  size_t alloc_failure_row_count; /* RMM "allocate failure" rows: skipped */
  size_t malformed_count;        /* malformed lines skipped (skip_malformed only) */
  size_t stream_count;           /* distinct recorded streams (== trace->stream_count) */
  uint64_t min_size_bytes;       /* smallest allocation; 0 when there is none */
  uint64_t max_size_bytes;       /* largest allocation; 0 when there is none */
  uint64_t peak_live_bytes;      /* max over time of the sum of live allocation sizes */
  bool has_reserved_reference;   /* the trace has segment rows (PyTorch only) */
  uint64_t reference_peak_reserved_bytes; /* peak of the recording allocator's reserve */
  size_t capture_count;          /* capture_begin markers */
  size_t capture_alloc_count;    /* allocations on a stream while it captures */
  size_t capture_free_count;     /* frees on a stream while it captures */
  uint64_t line_count;           /* lines read, header included (snapshots: entries) */
} replay_trace_summary;

/* A parsed trace. Every field is read-only for users; free with
 * replay_trace_destroy(). */
typedef struct replay_trace {
  char *path;                 /* the path it was read from (owned copy) */
  replay_trace_format format;
  replay_event *events;       /* event_count events: requests and capture markers */
  size_t event_count;
  uint64_t *stream_values;    /* recorded value of each stream index; 0 = default stream */
  size_t stream_count;
  replay_trace_summary summary;
  /* With skip_malformed: "FILE:LINE: reason" of the first skipped line, or "". */
  char first_malformed[512];
  int snapshot_device; /* snapshots: the device whose trace this is; else 0 */
} replay_trace;

typedef struct replay_trace_options {
  bool skip_malformed; /* count and skip malformed lines instead of failing */
  /* Snapshots: the device_traces index to replay; -1: the only device with
   * entries (several is an error that lists them). */
  int snapshot_device;
} replay_trace_options;

/* Strict: the first malformed line fails the read; the snapshot's only device. */
#define REPLAY_TRACE_OPTIONS_DEFAULT {false, -1}

/* The largest snapshot pickle read (uncompressed): 2 GiB. */
#define REPLAY_TRACE_MAX_PICKLE_BYTES ((size_t)1 << 31)

/**
 * Read and parse the trace at `path` (gzip or plain text).
 *
 * What is malformed (text): a wrong column count, a non-numeric or out-of-range
 * number, an unknown action, an allocation of 0 bytes, an allocation at an
 * address that is live, a free whose size differs from its allocation's, a
 * capture_begin on a stream already capturing or a capture_end on one that is
 * not, a NUL byte, a line over 4096 bytes. Blank lines are ignored. A free of
 * an address that is not live is not malformed: it is counted as unmatched
 * and skipped. Snapshots: a pickle that is malformed, truncated, uses an
 * opcode outside the reader's subset (the message names it) or is not a
 * snapshot fails the read whatever the options; an entry that is not a dict,
 * lacks 'action', 'addr', 'size' or 'stream', or has a wrong type there is a
 * malformed line ('oom' entries need no 'addr': PyTorch writes 'device_free'
 * there).
 *
 * Units: sizes in bytes; lines counted from 1 (the header).
 * Ownership: `options` (NULL: REPLAY_TRACE_OPTIONS_DEFAULT) is read during the
 *   call only; the caller frees *out with replay_trace_destroy().
 * Thread-safe: yes (no shared state).
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  path or out is NULL; the file cannot be opened or
 *                             read, is empty, truncated or corrupt (gzip), has
 *                             no known header, a malformed line (strict mode)
 *                             or no allocation at all.
 *   GMR_ERR_OUT_OF_MEMORY     a host allocation failed.
 * On failure *out is NULL, nothing needs to be freed, and `err` (err_bytes
 * bytes, may be NULL/0) holds one line without a newline, e.g.
 * "t.csv:7: free of 512 bytes does not match the allocation of 1024 bytes at line 3".
 * On success `err` is set to "".
 */
gmr_status replay_trace_read(const char *path, const replay_trace_options *options,
                             replay_trace **out, char *err, size_t err_bytes);

/**
 * replay_trace_read() for a snapshot pickle already in memory (`data`,
 * `size` bytes, borrowed; not gzip): what the pickle reader's fuzz target
 * drives. `name` stands for the path in messages and trace->path.
 * Returns, ownership and state after failure: as replay_trace_read().
 */
gmr_status replay_trace_read_pickle(const unsigned char *data, size_t size, const char *name,
                                    const replay_trace_options *options, replay_trace **out,
                                    char *err, size_t err_bytes);

/** Free a trace from replay_trace_read(). NULL is a no-op. */
void replay_trace_destroy(replay_trace *trace);

/** "pytorch", "rmm" or "snapshot" (static string). */
const char *replay_trace_format_name(replay_trace_format format);

/** What a trace's event `line` counts, for messages: "line", or "entry" for a
 * snapshot (static string). */
const char *replay_trace_location_word(const replay_trace *trace);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_TRACE_H_ */
