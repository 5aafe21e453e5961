/*
 * tools/replay/timing.c: see timing.h.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */

#include "tools/replay/timing.h"

#include <stdlib.h>
#include <time.h>

uint64_t replay_clock_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

uint64_t replay_clock_overhead_ns(size_t sample_count) {
  enum { MAX_SAMPLES = 4096 };
  uint64_t samples[MAX_SAMPLES];
  if (sample_count == 0) sample_count = 1;
  if (sample_count > MAX_SAMPLES) sample_count = MAX_SAMPLES;
  for (size_t i = 0; i < sample_count; ++i) {
    uint64_t a = replay_clock_now_ns();
    uint64_t b = replay_clock_now_ns();
    samples[i] = b - a;
  }
  replay_sort_u64(samples, sample_count);
  return replay_percentile_u64(samples, sample_count, 50);
}

uint64_t replay_elapsed_ns(uint64_t start_ns, uint64_t end_ns, uint64_t overhead_ns) {
  if (end_ns < start_ns) return 0;
  uint64_t elapsed = end_ns - start_ns;
  return elapsed > overhead_ns ? elapsed - overhead_ns : 0;
}

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a;
  uint64_t y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

void replay_sort_u64(uint64_t *values, size_t count) {
  if (count > 1) qsort(values, count, sizeof *values, compare_u64);
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a;
  double y = *(const double *)b;
  return (x > y) - (x < y);
}

double replay_median_double(double *values, size_t count) {
  if (count == 0) return 0.0;
  qsort(values, count, sizeof *values, compare_double);
  return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2.0;
}

uint64_t replay_percentile_u64(const uint64_t *sorted, size_t count, unsigned percent) {
  if (count == 0) return 0;
  if (percent == 0) percent = 1;
  if (percent > 100) percent = 100;
  /* rank = ceil(percent / 100 * count), computed without floating point. */
  size_t rank = (size_t)(((unsigned long long)count * percent + 99u) / 100u);
  if (rank == 0) rank = 1;
  return sorted[rank - 1];
}
