/*
 * adaptors/log_adaptor.c: RMM-format CSV log of every call. See
 * gmr/log_adaptor.h.
 */
/* syscall(SYS_gettid), localtime_r and clock_gettime are POSIX/Linux, not C11. */
#define _DEFAULT_SOURCE

#include "gmr/log_adaptor.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/adaptor.h"
#include "core/forward.h"
#include "core/resource_type.h"

struct gmr_log_adaptor {
  gmr__adaptor base; /* first: the adaptor is usable as a gmr_resource */
  FILE *file;
  bool owns_file;
  gmr_log_flush flush;
  pthread_mutex_t mutex; /* one row at a time; held across a free's release */
  _Atomic uint64_t row_count;
  _Atomic uint64_t write_error_count;
};

/* Per thread: its id, and the HH:MM:SS text of the last second it logged
 * (localtime_r is the slow part of a row; a second holds many rows). */
static _Thread_local long thread_id = -1;
static _Thread_local time_t cached_second = (time_t)-1;
static _Thread_local char cached_hms[16];

static long current_thread_id(void) {
  if (thread_id < 0) thread_id = (long)syscall(SYS_gettid);
  return thread_id;
}

static const char *hms_of(time_t second) {
  if (second != cached_second) {
    struct tm local;
    if (localtime_r(&second, &local) == NULL) memset(&local, 0, sizeof local);
    snprintf(cached_hms, sizeof cached_hms, "%02d:%02d:%02d", local.tm_hour % 100,
             local.tm_min % 100, local.tm_sec % 100);
    cached_second = second;
  }
  return cached_hms;
}

/* Called with the mutex held, so that row order is the order of effects and
 * the times in the file never go backwards. */
static void write_row_locked(gmr_log_adaptor *a, const char *action, const void *ptr,
                             size_t bytes, gmr_stream stream) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  char row[192];
  int n = snprintf(row, sizeof row, "%ld,%s.%06ld,%s,0x%" PRIxPTR ",%zu,%" PRIxPTR "\n",
                   current_thread_id(), hms_of(now.tv_sec), (long)(now.tv_nsec / 1000), action,
                   (uintptr_t)ptr, bytes, (uintptr_t)stream);
  /* n is below sizeof row: every field has a bounded width. */
  bool ok = n > 0 && (size_t)n < sizeof row && fwrite(row, 1, (size_t)n, a->file) == (size_t)n;
  if (ok && a->flush == GMR_LOG_FLUSH_EVERY_ROW) ok = fflush(a->file) == 0;
  if (ok) {
    atomic_fetch_add_explicit(&a->row_count, 1, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&a->write_error_count, 1, memory_order_relaxed);
  }
}

/* No other thread can be given this memory before we return it, so the row
 * may be written after the upstream call. A request for a capture is logged
 * as an allocation (RMM's format has no other action for it). */
static gmr_status log_allocate_as(gmr_log_adaptor *a, gmr__forward_allocate_fn *forward,
                                  size_t bytes, size_t alignment, gmr_stream stream,
                                  void **out_ptr, gmr_failure *failure) {
  gmr_status st = forward(a->base.upstream, bytes, alignment, stream, out_ptr, failure);
  pthread_mutex_lock(&a->mutex);
  if (st == GMR_OK) {
    write_row_locked(a, "allocate", *out_ptr, bytes, stream);
  } else {
    write_row_locked(a, "allocate failure", NULL, bytes, stream);
  }
  pthread_mutex_unlock(&a->mutex);
  return st;
}

static gmr_status log_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                               gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return log_allocate_as((gmr_log_adaptor *)self, gmr__forward_allocate, bytes, alignment, stream,
                         out_ptr, failure);
}

static gmr_status log_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                         gmr_stream stream, void **out_ptr,
                                         gmr_failure *failure) {
  return log_allocate_as((gmr_log_adaptor *)self, gmr__forward_allocate_capturing, bytes,
                         alignment, stream, out_ptr, failure);
}

/* RMM's format has no action for growth in place, and a new one would stop
 * RMM's replay from reading the file: a successful extend is written as the
 * free of the old size and the allocation of the new size at the same
 * address, which any replay of the format plays back faithfully (the bytes
 * in use go from `bytes` to `new_bytes`). Both rows are written under one
 * hold of the mutex, so no other row falls between them. A failed extend
 * changed nothing and writes no row. */
static gmr_status log_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                             size_t alignment, gmr_stream stream, gmr_failure *failure) {
  gmr_log_adaptor *a = (gmr_log_adaptor *)self;
  gmr_status st =
      gmr__forward_extend(a->base.upstream, ptr, bytes, new_bytes, alignment, stream, failure);
  if (st != GMR_OK) return st;
  pthread_mutex_lock(&a->mutex);
  write_row_locked(a, "free", ptr, bytes, stream);
  write_row_locked(a, "allocate", ptr, new_bytes, stream);
  pthread_mutex_unlock(&a->mutex);
  return GMR_OK;
}

static gmr_status log_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                 gmr_stream stream) {
  gmr_log_adaptor *a = (gmr_log_adaptor *)self;
  /* Held across the release: a thread that gets `ptr` next from the upstream
   * writes its allocate row only after this free row. */
  pthread_mutex_lock(&a->mutex);
  gmr_status st = gmr__forward_deallocate(a->base.upstream, ptr, bytes, alignment, stream);
  if (st == GMR_OK) write_row_locked(a, "free", ptr, bytes, stream);
  pthread_mutex_unlock(&a->mutex);
  return st;
}

static void flush_locked(gmr_log_adaptor *a) {
  if (fflush(a->file) != 0) {
    atomic_fetch_add_explicit(&a->write_error_count, 1, memory_order_relaxed);
  }
}

static gmr_status log_destroy(gmr_resource *self) {
  gmr_log_adaptor *a = (gmr_log_adaptor *)self;
  pthread_mutex_lock(&a->mutex);
  flush_locked(a);
  pthread_mutex_unlock(&a->mutex);
  if (a->owns_file) fclose(a->file);
  pthread_mutex_destroy(&a->mutex);
  free(a);
  return GMR_OK;
}

static const gmr_resource_vtbl log_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "log_adaptor",
    .allocate = log_allocate,
    .deallocate = log_deallocate,
    .destroy = log_destroy,
    .get_upstream = gmr__adaptor_get_upstream,
    /* record_stream changes no allocation: no row (RMM's format has none for it). */
    .record_stream = gmr__adaptor_record_stream,
    .allocate_capturing = log_allocate_capturing,
    .extend = log_extend,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type log_type = {&log_vtbl, NULL};

gmr_status gmr_log_adaptor_create(gmr_resource *upstream, const gmr_log_adaptor_config *config,
                                  gmr_log_adaptor **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (config == NULL || gmr__resource_check_vtbl(upstream) != GMR_OK) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if ((config->path == NULL) == (config->file == NULL)) return GMR_ERR_INVALID_ARGUMENT;
  if (config->flush != GMR_LOG_FLUSH_EVERY_ROW && config->flush != GMR_LOG_FLUSH_BUFFERED) {
    return GMR_ERR_INVALID_ARGUMENT;
  }

  gmr_log_adaptor *a = calloc(1, sizeof *a);
  if (a == NULL) return GMR_ERR_OUT_OF_MEMORY;
  if (pthread_mutex_init(&a->mutex, NULL) != 0) {
    free(a);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr__adaptor_init(&a->base, &log_vtbl, upstream);
  gmr__resource_type_register(&log_type);
  a->flush = config->flush;
  if (config->path != NULL) {
    a->file = fopen(config->path, "w");
    if (a->file == NULL) {
      pthread_mutex_destroy(&a->mutex);
      free(a);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    a->owns_file = true;
  } else {
    a->file = config->file;
  }
  if (fputs(GMR_LOG_ADAPTOR_HEADER "\n", a->file) == EOF || fflush(a->file) != 0) {
    atomic_fetch_add_explicit(&a->write_error_count, 1, memory_order_relaxed);
  }
  *out = a;
  return GMR_OK;
}

gmr_status gmr_log_adaptor_flush(gmr_log_adaptor *a) {
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&a->mutex);
  flush_locked(a);
  pthread_mutex_unlock(&a->mutex);
  return GMR_OK;
}

gmr_status gmr_log_adaptor_get_stats(const gmr_log_adaptor *a, gmr_log_adaptor_stats *out) {
  const size_t header = offsetof(gmr_log_adaptor_stats, version) + sizeof out->version;
  if (a == NULL || out == NULL || out->size < header || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_log_adaptor_stats s;
  memset(&s, 0, sizeof s);
  s.row_count = atomic_load_explicit(&a->row_count, memory_order_relaxed);
  s.write_error_count = atomic_load_explicit(&a->write_error_count, memory_order_relaxed);
  /* The header stays the caller's; nothing past out->size is written. */
  size_t n = out->size < sizeof s ? out->size : sizeof s;
  if (n > header) memcpy((char *)out + header, (const char *)&s + header, n - header);
  return GMR_OK;
}
