/*
 * tools/replay/timing.h: host-side timing of single calls, and percentiles
 * of the measured times.
 *
 * Each call is bracketed by two clock_gettime(CLOCK_MONOTONIC) reads; the
 * cost of a read itself (the median of back-to-back pairs, measured once) is
 * subtracted so that a call of a few hundred nanoseconds is not dominated by
 * the timer.
 *
 * Thread-safe: yes (no shared state).
 */
#ifndef GMR_TOOLS_REPLAY_TIMING_H_
#define GMR_TOOLS_REPLAY_TIMING_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Now, in nanoseconds on CLOCK_MONOTONIC (arbitrary origin). */
uint64_t replay_clock_now_ns(void);

/**
 * The timer's own overhead in nanoseconds: the median over `sample_count`
 * (at least 1) back-to-back pairs of replay_clock_now_ns(). Takes about
 * sample_count x 2 timer reads; never fails.
 */
uint64_t replay_clock_overhead_ns(size_t sample_count);

/** `end_ns - start_ns - overhead_ns`, clamped at 0. */
uint64_t replay_elapsed_ns(uint64_t start_ns, uint64_t end_ns, uint64_t overhead_ns);

/** Sort `values` (count entries, may be 0) in ascending order, in place. */
void replay_sort_u64(uint64_t *values, size_t count);

/**
 * The nearest-rank `percent` percentile (1..100) of `sorted` (ascending,
 * count entries): the smallest value with at least percent% of the values at
 * or below it. Returns 0 when count is 0.
 */
uint64_t replay_percentile_u64(const uint64_t *sorted, size_t count, unsigned percent);

/**
 * The median of `count` run times (sorted in place, ascending): the middle
 * value, or the mean of the two middle values for an even count. 0 when
 * count is 0. The benchmarks print it over their repeated runs.
 */
double replay_median_double(double *values, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_TIMING_H_ */
