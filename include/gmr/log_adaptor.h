/*
 * gmr/log_adaptor.h: an adaptor that records every allocate, failed allocate
 * and free of the stack below it as a CSV file in RAPIDS RMM's log format,
 * which tools/replay (and RMM's own replay benchmark) reads back.
 *
 * Format (RMM's logging_resource_adaptor, docs/user_guide/record_replay.md):
 *
 *   Thread,Time,Action,Pointer,Size,Stream
 *   2342727,15:47:02.841961,allocate,0x7f3c2c000000,1048576,0
 *   2342727,15:47:02.841990,allocate failure,0x0,1099511627776,7f3c2c000b40
 *   2342728,15:47:02.842101,free,0x7f3c2c000000,1048576,0
 *
 *   Thread   the OS thread id (gettid) of the caller, decimal;
 *   Time     local wall-clock time HH:MM:SS.microseconds;
 *   Action   "allocate", "allocate failure" or "free";
 *   Pointer  hexadecimal with 0x ("0x0" for a failed allocation);
 *   Size     bytes, decimal, as requested (not rounded);
 *   Stream   the cudaStream_t value in hexadecimal WITHOUT 0x, as RMM writes
 *            it; the default stream is "0". (RMM's own replay parser reads this
 *            column as decimal, so only the default stream survives there;
 *            tools/replay reads it as hexadecimal, so every stream survives.)
 *
 * Order: the file's row order is the order in which the operations took
 * effect. A free row must come before the allocate row of whoever gets the
 * same address next (RMM #2304's lesson), so deallocate holds the log's mutex
 * across the upstream release and writes the row before any other thread can
 * write one. A refused free (the upstream returned a failure and released
 * nothing) writes no row, so every row describes something that happened.
 * The price: frees through one log adaptor are serialised, and a free whose
 * upstream synchronises (cudaFree) holds back the other threads' rows.
 *
 * Durability: with GMR_LOG_FLUSH_EVERY_ROW (the default) each row is handed to
 * the operating system (fflush) before the call returns: a crash of the
 * program loses at most the row being written. GMR_LOG_FLUSH_BUFFERED keeps
 * rows in the stdio buffer until it fills, gmr_log_adaptor_flush() or
 * destroy (a crash may lose the last few KiB). tools/bench_nvtx measures both.
 *
 * Errors while writing (a full disk) never fail an allocation or a free: they
 * are counted (gmr_log_adaptor_get_stats: write_error_count).
 *
 * Optional slots: an allocation for a capture (allocate_capturing, forwarded
 * to the upstream's) is logged as "allocate" or "allocate failure", like any
 * other; record_stream is forwarded and writes no row (the format has no
 * action for it); get_memory_info is answered from below. A successful
 * growth in place (gmr_resource_extend, forwarded to the upstream's extend) is written
 * as two rows under one hold of the lock, "free" of the old size and
 * "allocate" of the new size at the same pointer: the format has no action
 * for growth, and these two replay it faithfully in RMM's replay and in
 * tools/replay. A failed extend writes no row (nothing changed).
 *
 * Thread-safe: yes (internal mutex around each row).
 * Source: RMM logging_resource_adaptor (format), RMM #2304 (order of books and
 *   release), tools/replay (reader).
 */
#ifndef GMR_LOG_ADAPTOR_H_
#define GMR_LOG_ADAPTOR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* FILE can only be named portably through stdio.h; it is the one header
 * outside gmr/ and the three basic ones that a public header includes. */
#include <stdio.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The header line (without the newline) every log starts with. */
#define GMR_LOG_ADAPTOR_HEADER "Thread,Time,Action,Pointer,Size,Stream"

typedef enum gmr_log_flush {
  GMR_LOG_FLUSH_EVERY_ROW = 0, /* fflush after each row (default) */
  GMR_LOG_FLUSH_BUFFERED = 1   /* flush when the stdio buffer fills, on request, at destroy */
} gmr_log_flush;

typedef struct gmr_log_adaptor_config {
  const char *path;   /* file to create (or truncate); copied. NULL: use `file` */
  FILE *file;         /* used when path is NULL: borrowed, never closed */
  gmr_log_flush flush;
} gmr_log_adaptor_config;

/* No destination yet (set path or file), flush every row. */
#define GMR_LOG_ADAPTOR_CONFIG_DEFAULT {NULL, NULL, GMR_LOG_FLUSH_EVERY_ROW}

typedef struct gmr_log_adaptor gmr_log_adaptor;

/**
 * Create an adaptor that forwards to `upstream` and writes one row per
 * allocate, failed allocate and free, starting with the header line.
 *
 * Units: sizes in bytes.
 * Ownership: `upstream` is borrowed: it must outlive the adaptor and must not
 *   be moved. `config` is copied. A file opened from `config->path` belongs to
 *   the adaptor (closed at destroy); `config->file` is borrowed and must stay
 *   open until destroy.
 * Thread-safe: yes (creates an independent object).
 * Stream/device: no CUDA call. Writes the header (and flushes it).
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  upstream, config or out is NULL; upstream has no
 *                             vtable with the required slots; both or neither of path and
 *                             file are set; flush is not a gmr_log_flush; or the
 *                             file cannot be opened for writing (errno says why).
 *   GMR_ERR_OUT_OF_MEMORY     the host allocation for the adaptor failed.
 * On failure *out is NULL (when out is not NULL), no file is left open, and
 *   nothing needs destroying (a path may have been created empty).
 */
GMR_API GMR_NODISCARD gmr_status gmr_log_adaptor_create(gmr_resource *upstream,
                                                        const gmr_log_adaptor_config *config,
                                                        gmr_log_adaptor **out);

/**
 * The gmr_log_adaptor's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `a`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_log_adaptor_as_resource(gmr_log_adaptor *a) {
  return (gmr_resource *)(void *)a;
}

/**
 * The gmr_log_adaptor behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "log_adaptor") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_log_adaptor *gmr_log_adaptor_from_resource(gmr_resource *r) {
  return (gmr_log_adaptor *)gmr_resource_downcast(r, "log_adaptor");
}

/**
 * Hand buffered rows to the operating system (fflush).
 * Thread-safe: yes. Stream/device: none.
 * Returns GMR_OK (a failure to write is counted, not returned: see
 * gmr_log_adaptor_get_stats), or GMR_ERR_INVALID_ARGUMENT for NULL.
 */
GMR_API GMR_NODISCARD gmr_status gmr_log_adaptor_flush(gmr_log_adaptor *a);

/* Counters of a log adaptor. The caller sets `size` and `version`
 * (GMR_LOG_ADAPTOR_STATS_INIT); the adaptor fills what both versions know. */
typedef struct gmr_log_adaptor_stats {
  size_t size;                /* sizeof the caller's struct */
  uint32_t version;           /* GMR_LOG_ADAPTOR_STATS_VERSION of the caller */
  uint64_t row_count;         /* rows written so far, the header not included */
  uint64_t write_error_count; /* rows (or flushes) the C library failed to write (a full disk) */
} gmr_log_adaptor_stats;

#define GMR_LOG_ADAPTOR_STATS_VERSION 1u
#define GMR_LOG_ADAPTOR_STATS_INIT \
  {sizeof(gmr_log_adaptor_stats), GMR_LOG_ADAPTOR_STATS_VERSION, 0, 0}

/**
 * Snapshot the counters into `*out` (size and version set by the caller);
 * fields past out->size are not written.
 * Thread-safe: yes; a row being written may be missed. Stream/device: no
 *   CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (a or out NULL, out->size smaller
 * than the header, or out->version 0; on failure *out is unchanged).
 */
GMR_API GMR_NODISCARD gmr_status gmr_log_adaptor_get_stats(const gmr_log_adaptor *a,
                                                           gmr_log_adaptor_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_LOG_ADAPTOR_H_ */
