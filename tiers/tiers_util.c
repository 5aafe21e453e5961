/*
 * tiers/tiers_util.c: see tiers/tiers_util.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "tiers/tiers_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/failure.h"

bool gmr__cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t deadline_ns) {
  if (deadline_ns == UINT64_MAX) {
    pthread_cond_wait(cond, mutex);
    return true;
  }
  if (gmr__monotonic_ns() >= deadline_ns) return false;
  struct timespec ts;
  ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
  ts.tv_nsec = (long)(deadline_ns % 1000000000u);
  int rc = pthread_cond_timedwait(cond, mutex, &ts);
  return rc != ETIMEDOUT;
}

uint64_t gmr__deadline_after(uint64_t timeout_ns) {
  if (timeout_ns == UINT64_MAX) return UINT64_MAX;
  uint64_t now = gmr__monotonic_ns();
  return timeout_ns > UINT64_MAX - 1 - now ? UINT64_MAX - 1 : now + timeout_ns;
}

gmr_status gmr__tier_fail(gmr_failure *failure, gmr_status status, size_t bytes, const char *fmt,
                          ...) {
  if (failure == NULL) return status;
  /* Everything after the header, which is the caller's (gmr/resource.h). */
  memset((char *)failure + GMR__FAILURE_HEADER_BYTES, 0,
         sizeof *failure - GMR__FAILURE_HEADER_BYTES);
  failure->status = status;
  failure->bytes = bytes;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(failure->message, sizeof failure->message, fmt, ap);
  va_end(ap);
  return status;
}
