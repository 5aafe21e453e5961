/*
 * tools/bench/workloads.c: see workloads.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "tools/bench/workloads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "tools/bench/bench_stacks.h"
#include "tools/replay/measure.h"
#include "tools/replay/timing.h"

#define FIXED_BATCH_PAIRS 64u
#define THREAD_MAX_LIVE 64u

/* splitmix64: fast, deterministic, good enough for benchmark sizes. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* True with probability 0.73 (RMM's allocation probability). */
static bool coin_73(uint64_t *state) { return next_random(state) % 100u < 73u; }

typedef struct live_block {
  void *ptr;
  size_t bytes;
} live_block;

/* Per-call times, overhead subtracted, for the percentiles. */
typedef struct call_times {
  uint64_t *alloc_ns;
  uint64_t *free_ns;
  size_t alloc_count;
  size_t free_count;
  uint64_t total_ns;
} call_times;

static bool call_times_init(call_times *t, size_t capacity) {
  memset(t, 0, sizeof *t);
  t->alloc_ns = malloc((capacity + 1) * sizeof *t->alloc_ns);
  t->free_ns = malloc((capacity + 1) * sizeof *t->free_ns);
  return t->alloc_ns != NULL && t->free_ns != NULL;
}

static void call_times_free(call_times *t) {
  free(t->alloc_ns);
  free(t->free_ns);
}

/* Fill the row's latency and throughput columns from per-call times. */
static void call_times_report(call_times *t, bench_row *row) {
  replay_sort_u64(t->alloc_ns, t->alloc_count);
  replay_sort_u64(t->free_ns, t->free_count);
  size_t calls = t->alloc_count + t->free_count;
  row->calls = calls;
  row->has_latency = t->alloc_count > 0 && t->free_count > 0;
  row->pair_p50_ns = (double)replay_percentile_u64(t->alloc_ns, t->alloc_count, 50) +
                     (double)replay_percentile_u64(t->free_ns, t->free_count, 50);
  row->pair_p99_ns = (double)replay_percentile_u64(t->alloc_ns, t->alloc_count, 99) +
                     (double)replay_percentile_u64(t->free_ns, t->free_count, 99);
  row->call_mean_ns = calls == 0 ? 0.0 : (double)t->total_ns / (double)calls;
  row->calls_per_second = row->call_mean_ns > 0 ? 1e9 / row->call_mean_ns : 0.0;
}

static void row_init(bench_row *row, const char *workload, const char *stack) {
  memset(row, 0, sizeof *row);
  snprintf(row->workload, sizeof row->workload, "%s", workload);
  snprintf(row->stack, sizeof row->stack, "%s", stack);
  row->threads = 1;
}

static gmr_status open_stack(const char *stack, bench_stack *s, bench_row *row) {
  char err[256];
  gmr_status st = bench_stack_create(stack, s, err, sizeof err);
  if (st != GMR_OK) snprintf(row->error, sizeof row->error, "%s", err);
  return st;
}

/* Record the footprint, then destroy the stack (reporting a failure). */
static gmr_status close_stack(bench_stack *s, bench_row *row) {
  gmr_footprint fp;
  if (gmr_resource_get_footprint(bench_stack_top(s), &fp) == GMR_OK) {
    row->peak_held_bytes = fp.peak_held_bytes;
  }
  if (gmr_resource_get_footprint(bench_stack_leaf(s), &fp) == GMR_OK) {
    row->leaf_peak_bytes = fp.peak_held_bytes;
  }
  gmr_status st = bench_stack_destroy(s);
  if (st != GMR_OK && row->error[0] == '\0') {
    snprintf(row->error, sizeof row->error, "destroying the stack failed: %s", gmr_status_name(st));
  }
  return st;
}

static void note_failure(bench_row *row, const char *what, size_t bytes, gmr_status st) {
  row->failures++;
  if (row->error[0] == '\0') {
    snprintf(row->error, sizeof row->error, "%s of %zu bytes failed: %s", what, bytes,
             gmr_status_name(st));
  }
}

/* ---- random ------------------------------------------------------------- */

gmr_status bench_random(const bench_options *o, const char *stack, bench_row *row) {
  char label[48];
  snprintf(label, sizeof label, "random(<=%zuKiB)", o->random_max_bytes >> 10);
  row_init(row, label, stack);
  bench_stack s;
  gmr_status st = open_stack(stack, &s, row);
  if (st != GMR_OK) return st;
  gmr_resource *r = bench_stack_top(&s);
  live_block *live = malloc((o->ops + 1) * sizeof *live);
  call_times t = {NULL, NULL, 0, 0, 0};
  if (live == NULL || !call_times_init(&t, o->ops)) {
    free(live);
    call_times_free(&t);
    (void)bench_stack_destroy(&s);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  size_t live_count = 0, live_bytes = 0;
  uint64_t rng = o->seed;
  uint64_t deadline = replay_clock_now_ns() + (uint64_t)(o->seconds * 1e9);
  for (size_t i = 0; i < o->ops; ++i) {
    if ((i & 255u) == 0 && replay_clock_now_ns() > deadline) break;
    size_t bytes = 1 + (size_t)(next_random(&rng) % o->random_max_bytes);
    bool allocate = live_count == 0 || (coin_73(&rng) && live_bytes + bytes <= o->max_live_bytes);
    if (allocate) {
      void *p = NULL;
      uint64_t a = replay_clock_now_ns();
      gmr_status rs = gmr_resource_allocate(r, bytes, 0, NULL, &p);
      uint64_t b = replay_clock_now_ns();
      uint64_t ns = replay_elapsed_ns(a, b, o->timer_overhead_ns);
      t.alloc_ns[t.alloc_count++] = ns;
      t.total_ns += ns;
      if (rs != GMR_OK) {
        note_failure(row, "allocate", bytes, rs);
        continue;
      }
      live[live_count].ptr = p;
      live[live_count].bytes = bytes;
      live_count++;
      live_bytes += bytes;
      if (live_bytes > row->peak_live_bytes) row->peak_live_bytes = live_bytes;
    } else {
      size_t k = (size_t)(next_random(&rng) % live_count);
      uint64_t a = replay_clock_now_ns();
      gmr_status rs = gmr_resource_deallocate(r, live[k].ptr, live[k].bytes, 0, NULL);
      uint64_t b = replay_clock_now_ns();
      uint64_t ns = replay_elapsed_ns(a, b, o->timer_overhead_ns);
      t.free_ns[t.free_count++] = ns;
      t.total_ns += ns;
      if (rs != GMR_OK) note_failure(row, "deallocate", live[k].bytes, rs);
      live_bytes -= live[k].bytes;
      live[k] = live[--live_count];
    }
  }
  call_times_report(&t, row);
  gmr_footprint fp;
  if (gmr_resource_get_footprint(r, &fp) == GMR_OK) row->peak_held_bytes = fp.peak_held_bytes;
  for (size_t k = 0; k < live_count; ++k) {
    GMR_IGNORE_STATUS(gmr_resource_deallocate(r, live[k].ptr, live[k].bytes, 0, NULL));
  }
  free(live);
  call_times_free(&t);
  return close_stack(&s, row);
}

/* ---- fixed -------------------------------------------------------------- */

gmr_status bench_fixed(const bench_options *o, const char *stack, bench_row *row) {
  char label[48];
  snprintf(label, sizeof label, "fixed(%zuKiB)", o->fixed_bytes >> 10);
  row_init(row, label, stack);
  bench_stack s;
  gmr_status st = open_stack(stack, &s, row);
  if (st != GMR_OK) return st;
  gmr_resource *r = bench_stack_top(&s);
  size_t batches = o->ops / (2u * FIXED_BATCH_PAIRS) + 1u;
  uint64_t *batch_ns = malloc(batches * sizeof *batch_ns);
  if (batch_ns == NULL) {
    (void)bench_stack_destroy(&s);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  /* One pair first, untimed: it may grow the stack from upstream. */
  void *warm = NULL;
  if (gmr_resource_allocate(r, o->fixed_bytes, 0, NULL, &warm) == GMR_OK) {
    GMR_IGNORE_STATUS(gmr_resource_deallocate(r, warm, o->fixed_bytes, 0, NULL));
  }
  size_t done = 0;
  uint64_t total = 0;
  uint64_t deadline = replay_clock_now_ns() + (uint64_t)(o->seconds * 1e9);
  for (; done < batches; ++done) {
    uint64_t a = replay_clock_now_ns();
    if (a > deadline) break;
    for (unsigned i = 0; i < FIXED_BATCH_PAIRS; ++i) {
      void *p = NULL;
      gmr_status rs = gmr_resource_allocate(r, o->fixed_bytes, 0, NULL, &p);
      if (rs != GMR_OK) {
        note_failure(row, "allocate", o->fixed_bytes, rs);
        continue;
      }
      rs = gmr_resource_deallocate(r, p, o->fixed_bytes, 0, NULL);
      if (rs != GMR_OK) note_failure(row, "deallocate", o->fixed_bytes, rs);
    }
    uint64_t b = replay_clock_now_ns();
    batch_ns[done] = replay_elapsed_ns(a, b, o->timer_overhead_ns);
    total += batch_ns[done];
  }
  replay_sort_u64(batch_ns, done);
  row->calls = done * FIXED_BATCH_PAIRS * 2u;
  row->has_latency = done > 0;
  row->pair_p50_ns = (double)replay_percentile_u64(batch_ns, done, 50) / FIXED_BATCH_PAIRS;
  row->pair_p99_ns = (double)replay_percentile_u64(batch_ns, done, 99) / FIXED_BATCH_PAIRS;
  row->call_mean_ns = row->calls == 0 ? 0.0 : (double)total / (double)row->calls;
  row->calls_per_second = row->call_mean_ns > 0 ? 1e9 / row->call_mean_ns : 0.0;
  /* No held/live ratio: one live allocation against a whole chunk says nothing. */
  free(batch_ns);
  return close_stack(&s, row);
}

/* ---- threads ------------------------------------------------------------ */

/* One thread's job. Each on cache lines of its own, and the counts kept in
 * locals until the end: a count stored at every call beside the next job's
 * (80-byte jobs packed in one array) made neighbouring threads write one
 * line, which understated the speedup on a many-core host. */
typedef struct thread_job {
  _Alignas(64) gmr_resource *r;
  gmr_stream stream;
  uint64_t seed;
  size_t max_bytes;
  uint64_t run_ns;
  atomic_uint *ready;
  atomic_bool *go;
  size_t calls;
  size_t failures;
  uint64_t elapsed_ns;
} thread_job;

static void *thread_main(void *arg) {
  thread_job *j = arg;
  live_block live[THREAD_MAX_LIVE];
  size_t live_count = 0;
  size_t calls = 0, failures = 0;
  uint64_t rng = j->seed;
  atomic_fetch_add(j->ready, 1u);
  while (!atomic_load(j->go)) {
  }
  uint64_t start = replay_clock_now_ns();
  uint64_t deadline = start + j->run_ns;
  for (size_t i = 0;; ++i) {
    if ((i & 255u) == 0 && replay_clock_now_ns() > deadline) break;
    if (live_count == 0 || (live_count < THREAD_MAX_LIVE && coin_73(&rng))) {
      size_t bytes = 1 + (size_t)(next_random(&rng) % j->max_bytes);
      void *p = NULL;
      if (gmr_resource_allocate(j->r, bytes, 0, j->stream, &p) != GMR_OK) {
        failures++;
      } else {
        live[live_count].ptr = p;
        live[live_count].bytes = bytes;
        live_count++;
      }
    } else {
      size_t k = (size_t)(next_random(&rng) % live_count);
      if (gmr_resource_deallocate(j->r, live[k].ptr, live[k].bytes, 0, j->stream) != GMR_OK)
        failures++;
      live[k] = live[--live_count];
    }
    calls++;
  }
  j->elapsed_ns = replay_clock_now_ns() - start;
  j->calls = calls;
  j->failures = failures;
  for (size_t k = 0; k < live_count; ++k) {
    if (gmr_resource_deallocate(j->r, live[k].ptr, live[k].bytes, 0, j->stream) != GMR_OK)
      j->failures++;
  }
  return NULL;
}

gmr_status bench_threads(const bench_options *o, const char *stack, unsigned threads,
                         bench_row *row) {
  char label[48];
  snprintf(label, sizeof label, "threads=%u(<=%zuKiB)", threads, o->thread_max_bytes >> 10);
  row_init(row, label, stack);
  row->threads = threads;
  bench_stack s;
  gmr_status st = open_stack(stack, &s, row);
  if (st != GMR_OK) return st;
  thread_job *jobs = aligned_alloc(_Alignof(thread_job), threads * sizeof *jobs);
  if (jobs != NULL) memset(jobs, 0, threads * sizeof *jobs);
  pthread_t *ids = calloc(threads, sizeof *ids);
  if (jobs == NULL || ids == NULL) {
    free(jobs);
    free(ids);
    (void)bench_stack_destroy(&s);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  atomic_uint ready;
  atomic_bool go;
  atomic_init(&ready, 0u);
  atomic_init(&go, false);
  unsigned started = 0;
  for (unsigned i = 0; i < threads; ++i) {
    jobs[i].r = bench_stack_top(&s);
    jobs[i].seed = o->seed + i * UINT64_C(7919);
    jobs[i].max_bytes = o->thread_max_bytes;
    jobs[i].run_ns = (uint64_t)(o->thread_seconds * 1e9);
    jobs[i].ready = &ready;
    jobs[i].go = &go;
    st = gmr_cuda_stream_create(&jobs[i].stream);
    if (st != GMR_OK) {
      snprintf(row->error, sizeof row->error, "creating a stream failed: %s", gmr_status_name(st));
      break;
    }
    if (pthread_create(&ids[i], NULL, thread_main, &jobs[i]) != 0) {
      snprintf(row->error, sizeof row->error, "creating thread %u failed", i);
      st = GMR_ERR_INTERNAL;
      GMR_IGNORE_STATUS(gmr_cuda_stream_destroy(jobs[i].stream));
      break;
    }
    started++;
  }
  while (atomic_load(&ready) < started) {
  }
  atomic_store(&go, true);
  uint64_t slowest = 0;
  for (unsigned i = 0; i < started; ++i) {
    pthread_join(ids[i], NULL);
    row->calls += jobs[i].calls;
    row->failures += jobs[i].failures;
    if (jobs[i].elapsed_ns > slowest) slowest = jobs[i].elapsed_ns;
  }
  if (row->failures > 0 && row->error[0] == '\0') {
    snprintf(row->error, sizeof row->error, "%zu calls failed", row->failures);
  }
  row->calls_per_second = slowest == 0 ? 0.0 : (double)row->calls * 1e9 / (double)slowest;
  row->call_mean_ns =
      row->calls == 0 ? 0.0 : (double)slowest * (double)started / (double)row->calls;
  gmr_status cs = close_stack(&s, row);
  for (unsigned i = 0; i < started; ++i) {
    GMR_IGNORE_STATUS(gmr_cuda_stream_synchronize(jobs[i].stream));
    GMR_IGNORE_STATUS(gmr_cuda_stream_destroy(jobs[i].stream));
  }
  free(jobs);
  free(ids);
  return st != GMR_OK ? st : cs;
}

/* ---- trace -------------------------------------------------------------- */

gmr_status bench_trace(const bench_options *o, const replay_trace *trace, const char *label,
                       const char *stack, bench_row *row) {
  row_init(row, label, stack);
  replay_options options = REPLAY_OPTIONS_DEFAULT;
  options.capture = REPLAY_CAPTURE_OFF;
  options.pass_count = o->trace_pass_count > 0 ? o->trace_pass_count : 1;
  replay_result r;
  char err[256];
  gmr_status st = replay_measure(trace, bench_stack_resolve(stack), o->timer_overhead_ns, &options,
                                 &r, NULL, 0, err, sizeof err);
  if (st != GMR_OK) {
    snprintf(row->error, sizeof row->error, "%.*s", (int)sizeof row->error - 1,
             err[0] != '\0' ? err : r.first_failure);
    replay_result_free(&r);
    return st;
  }
  const replay_pass_result *cold = &r.passes[0];
  row->calls = cold->alloc_count + cold->free_count;
  row->has_latency = cold->alloc_count > 0 && cold->free_count > 0;
  row->pair_p50_ns = (double)cold->alloc_p50_ns + (double)cold->free_p50_ns;
  row->pair_p99_ns = (double)cold->alloc_p99_ns + (double)cold->free_p99_ns;
  row->call_mean_ns = replay_pass_mean_ns(cold);
  row->calls_per_second = row->call_mean_ns > 0 ? 1e9 / row->call_mean_ns : 0.0;
  for (size_t k = 1; k < r.pass_count; ++k) {
    double mean = replay_pass_mean_ns(&r.passes[k]);
    if (mean > 0 && (row->warm_mean_ns == 0 || mean < row->warm_mean_ns)) row->warm_mean_ns = mean;
  }
  row->peak_live_bytes = (size_t)trace->summary.peak_live_bytes;
  /* The footprint of the cold pass, as the mean; the leaf's high-water mark
   * covers every pass (a pool may take more in a warm pass). */
  if (cold->has_peak_held) row->peak_held_bytes = cold->peak_held_bytes;
  if (r.leaf_footprint_status == GMR_OK) row->leaf_peak_bytes = r.leaf_footprint.peak_held_bytes;
  row->failures = replay_result_failure_count(&r);
  if (row->failures > 0) {
    snprintf(row->error, sizeof row->error, "%.*s", (int)sizeof row->error - 1, r.first_failure);
  }
  replay_result_free(&r);
  return GMR_OK;
}
