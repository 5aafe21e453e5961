/*
 * tools/bench_arena/stack_passes.c: the cold and warm cost of one stack on a
 * trace: the trace replayed PASSES times through the same stack (what a pass
 * leaves live is freed and the device synchronised between passes, by the
 * replay engine), one line per pass with the mean host ns per call (the
 * per-call timings of tools/replay, timer overhead subtracted), p50, failures
 * and the peak held. Written for the graph pool's target (issue 11: warm mean
 * of graph_pool at most 2x pool alone) and for instruction counts: pass 1
 * runs in cold_pass(), later passes in warm_pass(), so
 *   valgrind --tool=callgrind --toggle-collect=warm_pass \
 *     bazel-bin/tools/bench_arena/stack_passes --sim --passes 2 --stack graph_pool TRACE
 * counts the warm pass's instructions alone.
 *
 *   bazel run -c opt //tools/bench_arena:stack_passes -- [--sim] [--passes N]
 *       --stack SPEC|ALIAS [TRACE]   (default TRACE: the bundled gpt2_train)
 * Exit status: 0 every pass ran without failure; 1 a failure; 2 usage error.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "tools/replay/locate.h"
#include "tools/replay/replay.h"
#include "tools/replay/stacks.h"
#include "tools/replay/timing.h"
#include "tools/replay/trace.h"

/* Separate, never-inlined functions so callgrind can count each kind alone. */
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

NOINLINE gmr_status cold_pass(const replay_trace *t, gmr_resource *top, uint64_t overhead,
                              replay_result *r) {
  return replay_run(t, top, overhead, r);
}

NOINLINE gmr_status warm_pass(const replay_trace *t, gmr_resource *top, uint64_t overhead,
                              replay_result *r) {
  return replay_run(t, top, overhead, r);
}

static double mean_ns(const replay_result *r) {
  uint64_t sum = 0;
  for (size_t i = 0; i < r->alloc_count; ++i) sum += r->alloc_ns[i];
  for (size_t i = 0; i < r->free_count; ++i) sum += r->free_ns[i];
  size_t n = r->alloc_count + r->free_count;
  return n == 0 ? 0.0 : (double)sum / (double)n;
}

int main(int argc, char **argv) {
  const char *spec = NULL, *path = NULL;
  long passes = 2;
  bool sim = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--sim") == 0) {
      sim = true;
    } else if (strcmp(argv[i], "--passes") == 0 && i + 1 < argc) {
      char *end = NULL;
      passes = strtol(argv[++i], &end, 10);
      if (*end != '\0' || passes < 1 || passes > 1000) {
        fprintf(stderr, "stack_passes: --passes takes 1..1000\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--stack") == 0 && i + 1 < argc) {
      spec = argv[++i];
    } else if (argv[i][0] != '-' && path == NULL) {
      path = argv[i];
    } else {
      fprintf(stderr, "usage: stack_passes [--sim] [--passes N] --stack SPEC [TRACE]\n");
      return 2;
    }
  }
  if (spec == NULL) {
    fprintf(stderr, "stack_passes: --stack SPEC is required\n");
    return 2;
  }
  int devices = 0;
  if (sim || gmr_device_get_count(&devices) != GMR_OK || devices == 0) {
    if (gmr_cuda_sim_enable(NULL) != GMR_OK) return 1;
    printf("stack_passes: host simulation of CUDA (timings are not GPU timings)\n");
  }
  char found[4096], looked[8192];
  if (path == NULL) {
    if (replay_locate_bundled_trace(argv[0], "gpt2_train.csv.gz", found, sizeof found, looked,
                                    sizeof looked) != GMR_OK) {
      fprintf(stderr, "stack_passes: no trace given and the bundled one is not in %s\n", looked);
      return 2;
    }
    path = found;
  }
  char err[1024];
  replay_trace *trace = NULL;
  if (replay_trace_read(path, NULL, &trace, err, sizeof err) != GMR_OK) {
    fprintf(stderr, "stack_passes: %s\n", err);
    return 1;
  }
  replay_stack *stack = NULL;
  if (replay_stack_create(spec, &stack, err, sizeof err) != GMR_OK) {
    fprintf(stderr, "stack_passes: %s\n", err);
    replay_trace_destroy(trace);
    return 2;
  }
  uint64_t overhead = replay_clock_overhead_ns(1000);
  printf("%s on %s, %zu calls per pass\n", spec, path,
         trace->summary.alloc_count + trace->summary.free_count);
  printf("pass  mean ns/call  alloc p50  free p50  failures  peak held MiB\n");
  int rc = 0;
  for (long p = 1; p <= passes; ++p) {
    replay_result r;
    gmr_status st = p == 1 ? cold_pass(trace, replay_stack_top(stack), overhead, &r)
                           : warm_pass(trace, replay_stack_top(stack), overhead, &r);
    size_t failures = replay_result_failure_count(&r);
    printf("%4ld  %12.1f  %9llu  %8llu  %8zu  %13.1f\n", p, mean_ns(&r),
           (unsigned long long)r.alloc_p50_ns, (unsigned long long)r.free_p50_ns, failures,
           (double)r.footprint.peak_held_bytes / (1024.0 * 1024.0));
    if (st != GMR_OK || failures > 0) {
      fprintf(stderr, "stack_passes: pass %ld: %s\n", p, r.first_failure);
      rc = 1;
    }
    replay_result_free(&r);
  }
  if (replay_stack_destroy(stack) != GMR_OK) rc = 1;
  replay_trace_destroy(trace);
  return rc;
}
