/*
 * tools/bench/workloads.h: the benchmark's workloads. Each runs on a fresh
 * stack (bench_stacks.h) and fills one row of the report.
 *
 *   random    RMM's random_allocations: allocate with probability 0.73 (sizes
 *             uniform in [1, random_max_bytes]), otherwise free a random live
 *             allocation; allocations that would pass max_live_bytes free
 *             instead. Every call is timed on its own.
 *   fixed     allocate fixed_bytes and free it at once, in a loop (the pool
 *             hit path). Timed in batches of 64 pairs: a single pair is too
 *             short for the clock.
 *   threads   N threads on the same stack, each on its own stream, each doing
 *             the random pattern with sizes up to thread_max_bytes and at most
 *             64 live allocations; aggregate calls per second of wall time.
 *   holes     rmm#2507's measurement (holes.c): N separated free holes of 512 B,
 *             then 1 KiB allocate + free pairs on the same stream, timed in
 *             batches of 64 pairs; bench_holes_write_traces writes the same
 *             program as traces for the anchors' replayers.
 *   trace     replay of a real trace (tools/traces) through tools/replay's
 *             measure.h: every allocate and free in file order on one thread,
 *             one stream per recorded stream, trace_pass_count passes on the
 *             same stack. The mean per call of each pass is its wall time over
 *             its calls, with no per-call timer inside (a second fresh stack
 *             replays the same passes for it); the percentiles come from
 *             per-call timers on the first. Pass 1 is the cold mean (a fresh
 *             stack takes its memory from the driver), the best of passes 2..
 *             the warm mean (a training loop's steady state). Capture markers
 *             are not acted on. The whole trace is replayed: no cap.
 * The other workloads stop at their call cap or after their time cap,
 * whichever comes first (the row says how many calls were made).
 *
 * Thread-safe: run one workload at a time.
 */
#ifndef GMR_TOOLS_BENCH_WORKLOADS_H_
#define GMR_TOOLS_BENCH_WORKLOADS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/status.h"
#include "tools/replay/trace.h"

typedef struct bench_options {
  size_t ops;                /* call cap of the random and fixed workloads */
  double seconds;            /* time cap of one random/fixed/trace run */
  size_t random_max_bytes;   /* random: sizes uniform in [1, this] */
  size_t max_live_bytes;     /* random: live bytes cap */
  size_t fixed_bytes;        /* fixed: the size of every allocation */
  size_t thread_max_bytes;   /* threads: sizes uniform in [1, this] */
  double thread_seconds;     /* threads: run time of one cell */
  uint64_t seed;
  uint64_t timer_overhead_ns; /* subtracted from each timed interval */
  size_t trace_pass_count;    /* trace: passes on the same stack (1..REPLAY_MAX_PASSES) */
} bench_options;

typedef struct bench_row {
  char workload[48];
  char stack[160]; /* the name or spec as given */
  unsigned threads;          /* threads rows: the thread count; else 1 */
  size_t calls;              /* allocate + deallocate calls made */
  size_t failures;           /* calls that returned a failure */
  bool has_latency;          /* pair_* measured */
  double pair_p50_ns;        /* allocate + deallocate, median */
  double pair_p99_ns;        /* allocate + deallocate, 99th percentile */
  double call_mean_ns;       /* mean host time per call; trace rows: the cold mean (pass 1) */
  double warm_mean_ns;       /* trace rows: the best mean of passes 2..; 0: no warm pass */
  double calls_per_second;   /* throughput (all threads) */
  size_t peak_live_bytes;    /* most bytes live at once (requests) */
  size_t peak_held_bytes;    /* the stack's peak footprint (its top reporter; traces: pass 1);
                                0: not reported */
  size_t leaf_peak_bytes;    /* the leaf's peak footprint (device memory reserved; traces: over
                                every pass); 0: none */
  double speedup;            /* threads rows: vs 1 thread of the same stack; else 0 */
  double vs_cuda_async;      /* cuda_async's call_mean_ns / this one's, same workload; 0: n/a */
  char error[256];           /* why the run failed, or "" (or why it does not apply) */
  bool not_applicable;       /* `error` says why the workload does not apply: not a failure */
} bench_row;

gmr_status bench_random(const bench_options *o, const char *stack, bench_row *row);
gmr_status bench_fixed(const bench_options *o, const char *stack, bench_row *row);
gmr_status bench_threads(const bench_options *o, const char *stack, unsigned threads,
                         bench_row *row);
gmr_status bench_trace(const bench_options *o, const replay_trace *trace, const char *label,
                       const char *stack, bench_row *row);
gmr_status bench_holes(const bench_options *o, const char *stack, size_t holes, bench_row *row);
/* DIR/holes_N.csv.gz (the setup alone) and DIR/holes_N_pairs.csv.gz (the
 * setup, then `pairs` pairs): a replayer's time for the pairs is the second's
 * total less the first's. False with a message on a write failure. */
bool bench_holes_write_traces(const char *dir, size_t holes, size_t pairs, char *why,
                              size_t why_bytes);

#endif /* GMR_TOOLS_BENCH_WORKLOADS_H_ */
