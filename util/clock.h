/*
 * util/clock.h (internal): monotonic time for the parts of gmr that wait (the
 * OOM policy `wait`, the tier manager, stream pools, notification channels).
 *
 * Thread-safe: yes.
 */
#ifndef GMR_UTIL_CLOCK_H_
#define GMR_UTIL_CLOCK_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nanoseconds on CLOCK_MONOTONIC (arbitrary origin). */
uint64_t gmr__monotonic_ns(void);

/* Initialise a condition variable that measures timeouts on CLOCK_MONOTONIC
 * (so a change of the wall clock cannot cut a wait short or stretch it).
 * false: it could not be made (nothing to destroy). */
bool gmr__cond_init_monotonic(pthread_cond_t *cond);

#ifdef __cplusplus
}
#endif

#endif /* GMR_UTIL_CLOCK_H_ */
