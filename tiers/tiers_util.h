/*
 * tiers/tiers_util.h (internal): small helpers shared by the tier manager,
 * the stream pool and the notification channel: deadlines for condition
 * waits (monotonic time is util/clock.h), failure messages.
 *
 * Thread-safe: yes (pure functions).
 */
#ifndef GMR_TIERS_TIERS_UTIL_H_
#define GMR_TIERS_TIERS_UTIL_H_

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/clock.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Wait on `cond` until `deadline_ns` (CLOCK_MONOTONIC; UINT64_MAX: forever).
 * Returns false when the deadline has passed. */
bool gmr__cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t deadline_ns);

/* now + timeout, saturating at UINT64_MAX (forever). */
uint64_t gmr__deadline_after(uint64_t timeout_ns);

/* Fill an optional failure record (NULL: nothing) with a status, the bytes
 * asked for and a printf-style message. Returns `status`. */
gmr_status gmr__tier_fail(gmr_failure *failure, gmr_status status, size_t bytes, const char *fmt,
                          ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#ifdef __cplusplus
}
#endif

#endif /* GMR_TIERS_TIERS_UTIL_H_ */
