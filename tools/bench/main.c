/*
 * tools/bench/main.c: the `bench` command. Runs the workloads of workloads.h
 * through each stack asked for, in one process, and prints one table.
 *
 * The first line says whether the run is on a real GPU or on the host
 * simulation of the CUDA layer (no GPU, or --sim). On the simulation the
 * footprint column is exact (the simulation counts bytes as the device would)
 * but the times are those of the simulation, not of a GPU.
 *
 * Exit status: 0 when every run succeeded; 1 when a stack could not be
 * created or destroyed, a call failed or a trace could not be read; 2 for a
 * command-line error.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "tools/bench/bench_stacks.h"
#include "tools/bench/workloads.h"
#include "tools/replay/locate.h"
#include "tools/replay/numbers.h"
#include "tools/replay/replay.h"
#include "tools/replay/timing.h"
#include "tools/replay/trace.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define MAX_ITEMS 32
#define MAX_ROWS 1024
#define DEFAULT_STACKS "pool,fixed_block,cuda_async,cuda_device"
#define DEFAULT_WORKLOADS "random,fixed,threads,traces"
#define DEFAULT_THREADS "1,2,4,8,16"
#define DEFAULT_FIXED_SIZES "64KiB,1MiB"

static const char *const bundled_traces[] = {"gpt2_train.csv.gz", "resnet50_train.csv.gz",
                                             "gpt2_graph_capture.csv.gz", "multistream.csv.gz"};
#define BUNDLED_COUNT (sizeof bundled_traces / sizeof bundled_traces[0])

/* A list separated by ';' or by ',' outside parentheses (so a stack spec
 * such as `pool(arenas=1, initial=1GiB) > cuda` stays one item), split in
 * place. */
typedef struct item_list {
  char storage[1024];
  const char *items[MAX_ITEMS];
  size_t count;
} item_list;

typedef struct options {
  item_list stacks;
  item_list workloads;
  item_list threads;
  item_list fixed_sizes;
  item_list holes;             /* holes: hole counts */
  const char *holes_trace_dir; /* --holes-traces: write the anchors' traces there, run nothing */
  const char *traces[MAX_ITEMS];
  size_t trace_count;
  bench_options bench;
  bool sim;
  bool help;
} options;

static bool split_list(const char *text, item_list *out) {
  memset(out, 0, sizeof *out);
  if (strlen(text) >= sizeof out->storage) return false;
  strcpy(out->storage, text);
  char *cursor = out->storage;
  while (*cursor != '\0') {
    if (out->count == MAX_ITEMS) return false;
    char *end = cursor;
    int depth = 0;
    while (*end != '\0' && !(depth == 0 && (*end == ',' || *end == ';'))) {
      if (*end == '(') depth++;
      if (*end == ')' && depth > 0) depth--;
      end++;
    }
    bool last = *end == '\0';
    *end = '\0';
    while (*cursor == ' ') cursor++;
    if (*cursor == '\0') return false;
    out->items[out->count++] = cursor;
    if (last) break;
    cursor = end + 1;
  }
  return out->count > 0;
}

static bool has_item(const item_list *l, const char *name) {
  for (size_t i = 0; i < l->count; ++i) {
    if (strcmp(l->items[i], name) == 0) return true;
  }
  return false;
}

/* A byte count > 0 with an optional K/M/G/T suffix (powers of 1024); strict:
 * no sign, NaN, exponent or fraction of a byte. */
static bool parse_bytes(const char *text, size_t *out) {
  size_t bytes = 0;
  if (!replay_parse_bytes(text, &bytes, NULL, 0) || bytes == 0) return false;
  *out = bytes;
  return true;
}

/* Seconds, finite, in (0, 3600]. */
static bool parse_seconds(const char *text, double *out) {
  return replay_parse_decimal(text, 0.001, 3600.0, out, NULL, 0);
}

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: bench [options]\n"
          "Compare stacks of gmr memory resources on synthetic workloads and real traces, in\n"
          "one process, and print one table.\n"
          "\n"
          "  --stacks A,B,...        stacks to compare (default " DEFAULT_STACKS ")\n"
          "  --workloads W,...       random, fixed, threads, traces, holes (default all but\n"
          "                          holes)\n"
          "  --trace PATH            a trace to replay (repeatable; default the four bundled\n"
          "                          ones in tools/traces)\n"
          "  --threads N,...         thread counts (default " DEFAULT_THREADS ")\n"
          "  --ops N                 call cap of the random and fixed runs (default 200000)\n"
          "  --seconds S             time cap of one random or fixed run (default 3)\n"
          "  --passes N              traces: passes on the same stack; pass 1 gives the cold\n"
          "                          mean, the best of 2..N the warm one (1..%d, default 3)\n"
          "  --thread-seconds S      run time of one threads cell (default 0.5)\n"
          "  --random-max-bytes B    random: largest size (default 1MiB)\n"
          "  --max-live-bytes B      random: live bytes cap (default 1GiB)\n"
          "  --fixed-bytes B,...     fixed: allocation sizes (default " DEFAULT_FIXED_SIZES ")\n"
          "  --thread-max-bytes B    threads: largest size (default 64KiB)\n"
          "  --holes N,...           holes: free holes of 512 B before 1 KiB allocate+free\n"
          "                          pairs (rmm#2507's measurement; default 4096,16384,65536)\n"
          "  --holes-traces DIR      write DIR/holes_N.csv.gz and holes_N_pairs.csv.gz (100000\n"
          "                          pairs) for each N, for other replayers, and exit\n"
          "  --sim                   use the host simulation of CUDA even with a GPU\n"
          "  --quick                 small caps (a smoke run: 2000 calls, 0.05 s per cell)\n"
          "  --help                  this text\n"
          "\n"
          "A stack is a spec, top layer first, e.g. 'pool(arenas=1) > cuda(kind=async)' (list\n"
          "several separated by ';' or by ',' outside parentheses), one of replay's aliases\n"
          "(cuda_device, cuda_async, cuda_managed, host, pool, fixed_block, graph_pool, vmm), or:",
          REPLAY_MAX_PASSES);
  for (size_t i = 0; i < bench_stack_known_count(); ++i) {
    fprintf(out, "%s %s", i == 0 ? "" : ",", bench_stack_known_name(i));
  }
  fprintf(out, "\n\nExit status: 0 success; 1 a run failed; 2 command-line error.\n");
}

/* "--name VALUE" or "--name=VALUE": 1 matched (value set), 0 not this option,
 * -1 value missing. */
static int option_value(int argc, char **argv, int *i, const char *name, const char **value) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0) return 0;
  if (argv[*i][n] == '=') {
    *value = argv[*i] + n + 1;
    return 1;
  }
  if (argv[*i][n] != '\0') return 0;
  if (*i + 1 >= argc) return -1;
  *value = argv[++*i];
  return 1;
}

static bool parse_args(int argc, char **argv, options *o) {
  memset(o, 0, sizeof *o);
  (void)split_list(DEFAULT_STACKS, &o->stacks);
  (void)split_list(DEFAULT_WORKLOADS, &o->workloads);
  (void)split_list(DEFAULT_THREADS, &o->threads);
  (void)split_list("4096,16384,65536", &o->holes);
  (void)split_list(DEFAULT_FIXED_SIZES, &o->fixed_sizes);
  o->bench.ops = 200000;
  o->bench.seconds = 3.0;
  o->bench.random_max_bytes = (size_t)1 << 20;
  o->bench.max_live_bytes = (size_t)1 << 30;
  o->bench.fixed_bytes = (size_t)1 << 20;
  o->bench.thread_max_bytes = (size_t)64 << 10;
  o->bench.thread_seconds = 0.5;
  o->bench.seed = 42;
  o->bench.trace_pass_count = 3;
  for (int i = 1; i < argc; ++i) {
    const char *v = NULL;
    int m;
    if (strcmp(argv[i], "--help") == 0) {
      o->help = true;
    } else if (strcmp(argv[i], "--sim") == 0) {
      o->sim = true;
    } else if (strcmp(argv[i], "--quick") == 0) {
      o->bench.ops = 2000;
      o->bench.seconds = 0.5;
      o->bench.thread_seconds = 0.05;
    } else if ((m = option_value(argc, argv, &i, "--stacks", &v)) != 0) {
      if (m < 0 || !split_list(v, &o->stacks)) return false;
    } else if ((m = option_value(argc, argv, &i, "--workloads", &v)) != 0) {
      if (m < 0 || !split_list(v, &o->workloads)) return false;
    } else if ((m = option_value(argc, argv, &i, "--holes", &v)) != 0) {
      if (m < 0 || !split_list(v, &o->holes)) return false;
    } else if ((m = option_value(argc, argv, &i, "--holes-traces", &v)) != 0) {
      if (m < 0) return false;
      o->holes_trace_dir = v;
    } else if ((m = option_value(argc, argv, &i, "--threads", &v)) != 0) {
      if (m < 0 || !split_list(v, &o->threads)) return false;
    } else if ((m = option_value(argc, argv, &i, "--trace", &v)) != 0) {
      if (m < 0 || o->trace_count == MAX_ITEMS) return false;
      o->traces[o->trace_count++] = v;
    } else if ((m = option_value(argc, argv, &i, "--ops", &v)) != 0) {
      size_t n = 0;
      if (m < 0 || !parse_bytes(v, &n)) return false;
      o->bench.ops = n;
    } else if ((m = option_value(argc, argv, &i, "--passes", &v)) != 0) {
      uint64_t passes = 0;
      char why[96] = "a value is needed";
      if (m < 0 || !replay_parse_count(v, 1, REPLAY_MAX_PASSES, &passes, why, sizeof why)) {
        fprintf(stderr, "bench: --passes %s: %s (give 1 to %d)\n", m < 0 ? "" : v, why,
                REPLAY_MAX_PASSES);
        return false;
      }
      o->bench.trace_pass_count = (size_t)passes;
    } else if ((m = option_value(argc, argv, &i, "--seconds", &v)) != 0) {
      if (m < 0 || !parse_seconds(v, &o->bench.seconds)) return false;
    } else if ((m = option_value(argc, argv, &i, "--thread-seconds", &v)) != 0) {
      if (m < 0 || !parse_seconds(v, &o->bench.thread_seconds)) return false;
    } else if ((m = option_value(argc, argv, &i, "--random-max-bytes", &v)) != 0) {
      if (m < 0 || !parse_bytes(v, &o->bench.random_max_bytes)) return false;
    } else if ((m = option_value(argc, argv, &i, "--max-live-bytes", &v)) != 0) {
      if (m < 0 || !parse_bytes(v, &o->bench.max_live_bytes)) return false;
    } else if ((m = option_value(argc, argv, &i, "--fixed-bytes", &v)) != 0) {
      if (m < 0 || !split_list(v, &o->fixed_sizes)) return false;
    } else if ((m = option_value(argc, argv, &i, "--thread-max-bytes", &v)) != 0) {
      if (m < 0 || !parse_bytes(v, &o->bench.thread_max_bytes)) return false;
    } else {
      fprintf(stderr, "bench: unknown argument '%s'\n", argv[i]);
      return false;
    }
  }
  return true;
}

static bool check_args(const options *o) {
  char err[512];
  for (size_t i = 0; i < o->stacks.count; ++i) {
    if (bench_stack_check(o->stacks.items[i], err, sizeof err) != GMR_OK) {
      fprintf(stderr, "bench: %s\n", err);
      return false;
    }
  }
  for (size_t i = 0; i < o->workloads.count; ++i) {
    const char *w = o->workloads.items[i];
    if (strcmp(w, "random") != 0 && strcmp(w, "fixed") != 0 && strcmp(w, "threads") != 0 &&
        strcmp(w, "traces") != 0 && strcmp(w, "holes") != 0) {
      fprintf(stderr,
              "bench: unknown workload '%s'; known: random, fixed, threads, traces, holes\n", w);
      return false;
    }
  }
  for (size_t i = 0; i < o->fixed_sizes.count; ++i) {
    size_t bytes = 0;
    if (!parse_bytes(o->fixed_sizes.items[i], &bytes)) {
      fprintf(stderr, "bench: fixed size '%s' is not a byte count\n", o->fixed_sizes.items[i]);
      return false;
    }
  }
  for (size_t i = 0; i < o->threads.count; ++i) {
    char *end = NULL;
    long n = strtol(o->threads.items[i], &end, 10);
    if (*end != '\0' || n < 1 || n > 256) {
      fprintf(stderr, "bench: thread count '%s' is not in 1..256\n", o->threads.items[i]);
      return false;
    }
  }
  return true;
}

/* Real GPU or simulation; the first line of output says which. */
static bool choose_device(bool force_sim) {
  int count = 0;
  gmr_status st = force_sim ? GMR_OK : gmr_device_get_count(&count);
  if (force_sim || st != GMR_OK || count == 0) {
    printf("gmr bench: SIMULATED device (%s): times are host-simulation times, not GPU times; "
           "footprints are exact\n",
           force_sim ? "--sim given" : (st != GMR_OK ? "querying CUDA failed" : "no CUDA device"));
    return true;
  }
  int current = 0;
  if (gmr_device_get_current(&current) != GMR_OK) current = 0;
  size_t free_bytes = 0, total_bytes = 0;
  GMR_IGNORE_STATUS(gmr_device_get_memory_info(&free_bytes, &total_bytes));
  printf("gmr bench: real CUDA device %d of %d (%.1f GiB, %.1f GiB free)\n", current, count,
         (double)total_bytes / (1u << 30), (double)free_bytes / (1u << 30));
  return false;
}

static void format_bytes(size_t bytes, char *out, size_t out_bytes) {
  if (bytes >= ((size_t)1 << 30)) {
    snprintf(out, out_bytes, "%.2fGiB", (double)bytes / (double)((size_t)1 << 30));
  } else {
    snprintf(out, out_bytes, "%.1fMiB", (double)bytes / (double)((size_t)1 << 20));
  }
}

static void print_table(const bench_row *rows, size_t count) {
  printf("%-24s %-18s %9s %9s %9s %9s %9s %9s %7s %8s %9s %10s %10s %s\n", "workload",
         "stack", "calls", "pair_p50", "pair_p99", "ns/call", "warm_ns", "Mcalls/s", "speedup",
         "x_async", "held/live", "peak_held", "leaf_peak", "failures");
  for (size_t i = 0; i < count; ++i) {
    const bench_row *r = &rows[i];
    char p50[16] = "-", p99[16] = "-", speed[16] = "-", vs[16] = "-", ratio[16] = "-",
         held[16] = "-", leaf[16] = "-", warm[16] = "-";
    if (r->warm_mean_ns > 0) snprintf(warm, sizeof warm, "%.1f", r->warm_mean_ns);
    if (r->has_latency) {
      snprintf(p50, sizeof p50, "%.0f", r->pair_p50_ns);
      snprintf(p99, sizeof p99, "%.0f", r->pair_p99_ns);
    }
    if (r->speedup > 0) snprintf(speed, sizeof speed, "%.2f", r->speedup);
    if (r->vs_cuda_async > 0) snprintf(vs, sizeof vs, "%.1f", r->vs_cuda_async);
    if (r->peak_held_bytes > 0 && r->peak_live_bytes > 0) {
      snprintf(ratio, sizeof ratio, "%.3f", (double)r->peak_held_bytes / (double)r->peak_live_bytes);
    }
    if (r->peak_held_bytes > 0) format_bytes(r->peak_held_bytes, held, sizeof held);
    if (r->leaf_peak_bytes > 0) format_bytes(r->leaf_peak_bytes, leaf, sizeof leaf);
    printf("%-24s %-18s %9zu %9s %9s %9.1f %9s %9.2f %7s %8s %9s %10s %10s %zu%s%s\n",
           r->workload, r->stack, r->calls, p50, p99, r->call_mean_ns, warm,
           r->calls_per_second / 1e6, speed, vs, ratio, held, leaf, r->failures,
           r->error[0] ? "  " : "", r->error);
  }
}

/* speedup (threads rows, vs 1 thread of the same stack) and x_async (same
 * workload, cuda_async's time per call over this stack's). */
static void fill_ratios(bench_row *rows, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    bench_row *r = &rows[i];
    for (size_t j = 0; j < count; ++j) {
      const bench_row *o = &rows[j];
      bool thread_row = strncmp(r->workload, "threads=", 8) == 0;
      if (thread_row && strncmp(o->workload, "threads=1(", 10) == 0 &&
          strcmp(o->stack, r->stack) == 0 && o->calls_per_second > 0) {
        r->speedup = r->calls_per_second / o->calls_per_second;
      }
      if (strcmp(o->workload, r->workload) == 0 && strcmp(o->stack, "cuda_async") == 0 &&
          r->call_mean_ns > 0 && o->call_mean_ns > 0) {
        r->vs_cuda_async = o->call_mean_ns / r->call_mean_ns;
      }
    }
  }
}

int main(int argc, char **argv) {
  options o;
  if (!parse_args(argc, argv, &o)) {
    print_usage(stderr);
    return EXIT_USAGE;
  }
  if (o.help) {
    print_usage(stdout);
    return 0;
  }
  if (!check_args(&o)) return EXIT_USAGE;
  if (o.holes_trace_dir != NULL) {
    for (size_t h = 0; h < o.holes.count; ++h) {
      char why[256];
      size_t count = (size_t)strtoull(o.holes.items[h], NULL, 10);
      if (!bench_holes_write_traces(o.holes_trace_dir, count, 100000, why, sizeof why)) {
        fprintf(stderr, "bench: %s\n", why);
        return EXIT_FAILED;
      }
    }
    return 0;
  }

  int failed = 0;
  /* Read the traces first: a bad path fails before anything runs. */
  replay_trace *traces[MAX_ITEMS] = {NULL};
  char labels[MAX_ITEMS][48];
  size_t trace_count = 0;
  if (has_item(&o.workloads, "traces")) {
    size_t wanted = o.trace_count > 0 ? o.trace_count : BUNDLED_COUNT;
    for (size_t i = 0; i < wanted; ++i) {
      char path[4096], looked[4096], err[512];
      const char *p = o.trace_count > 0 ? o.traces[i] : NULL;
      if (p == NULL) {
        if (replay_locate_bundled_trace(argv[0], bundled_traces[i], path, sizeof path, looked,
                                        sizeof looked) != GMR_OK) {
          fprintf(stderr, "bench: bundled trace %s not found (looked in %s)\n", bundled_traces[i],
                  looked);
          failed = 1;
          continue;
        }
        p = path;
      }
      if (replay_trace_read(p, NULL, &traces[trace_count], err, sizeof err) != GMR_OK) {
        fprintf(stderr, "bench: %s\n", err);
        failed = 1;
        continue;
      }
      const char *base = strrchr(p, '/');
      base = base == NULL ? p : base + 1;
      snprintf(labels[trace_count], sizeof labels[trace_count], "trace:%.*s",
               (int)(strcspn(base, ".")), base);
      trace_count++;
    }
  }

  if (choose_device(o.sim)) {
    gmr_cuda_sim_config config = GMR_CUDA_SIM_CONFIG_DEFAULT;
    if (gmr_cuda_sim_enable(&config) != GMR_OK) {
      fprintf(stderr, "bench: enabling the simulation failed\n");
      return EXIT_FAILED;
    }
  }
  o.bench.timer_overhead_ns = replay_clock_overhead_ns(1001);
  printf("caps: %zu calls or %.2f s per random/fixed run, %.2f s per threads cell; traces: "
         "%zu passes of the whole trace; timer overhead %llu ns subtracted\n",
         o.bench.ops, o.bench.seconds, o.bench.thread_seconds, o.bench.trace_pass_count,
         (unsigned long long)o.bench.timer_overhead_ns);
  fflush(stdout);

  static bench_row rows[MAX_ROWS];
  size_t n = 0;
  for (size_t w = 0; w < o.workloads.count; ++w) {
    const char *wl = o.workloads.items[w];
    for (size_t s = 0; s < o.stacks.count; ++s) {
      const char *stack = o.stacks.items[s];
      gmr_status st = GMR_OK;
      if (strcmp(wl, "random") == 0 && n < MAX_ROWS) {
        st = bench_random(&o.bench, stack, &rows[n++]);
      } else if (strcmp(wl, "fixed") == 0) {
        for (size_t f = 0; f < o.fixed_sizes.count && n < MAX_ROWS; ++f) {
          (void)parse_bytes(o.fixed_sizes.items[f], &o.bench.fixed_bytes); /* checked above */
          gmr_status fs = bench_fixed(&o.bench, stack, &rows[n++]);
          if (fs != GMR_OK || rows[n - 1].failures > 0) st = fs != GMR_OK ? fs : GMR_ERR_INTERNAL;
        }
      } else if (strcmp(wl, "holes") == 0) {
        for (size_t h = 0; h < o.holes.count && n < MAX_ROWS; ++h) {
          size_t count = (size_t)strtoull(o.holes.items[h], NULL, 10);
          gmr_status hs = bench_holes(&o.bench, stack, count, &rows[n++]);
          if (hs != GMR_OK) st = hs;
        }
      } else if (strcmp(wl, "threads") == 0) {
        for (size_t t = 0; t < o.threads.count && n < MAX_ROWS; ++t) {
          gmr_status ts = bench_threads(&o.bench, stack, (unsigned)atoi(o.threads.items[t]), &rows[n++]);
          if (ts != GMR_OK) st = ts;
        }
      }
      if (st != GMR_OK || (n > 0 && rows[n - 1].failures > 0)) failed = 1;
    }
    if (strcmp(wl, "traces") == 0) {
      for (size_t t = 0; t < trace_count; ++t) {
        for (size_t s = 0; s < o.stacks.count && n < MAX_ROWS; ++s) {
          gmr_status st = bench_trace(&o.bench, traces[t], labels[t], o.stacks.items[s], &rows[n++]);
          if (st != GMR_OK || rows[n - 1].failures > 0) failed = 1;
        }
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (rows[i].error[0] != '\0' && !rows[i].not_applicable) failed = 1;
  }
  fill_ratios(rows, n);
  print_table(rows, n);
  printf("pair_p50/p99: ns for one allocate + one deallocate (per-call percentiles summed; "
         "fixed: per pair, in batches of 64;\n  traces: pass 1)\n"
         "ns/call: mean host time per call; traces: the cold mean, pass 1 on a fresh stack (wall "
         "clock of the pass over\n  its calls, no per-call timer inside); warm_ns: the best "
         "mean of passes 2..%zu on the same stack\n",
         o.bench.trace_pass_count);
  printf(
         "x_async: cuda_async's ns/call over this stack's in the same workload; speedup: threads "
         "throughput over 1 thread\n"
         "held/live: the stack's peak footprint (what its top pool holds from below; traces: in "
         "pass 1) over the peak\nof live request bytes; leaf_peak: what the bottom resource "
         "reserved from the device at its peak (traces: over\nall passes; a cudaMemPool keeps "
         "what it is given back); trace capture markers are not acted on\n");
  for (size_t t = 0; t < trace_count; ++t) replay_trace_destroy(traces[t]);
  if (gmr_cuda_is_simulated() && gmr_cuda_sim_disable() != GMR_OK) {
    fprintf(stderr, "bench: simulated CUDA objects were left alive\n");
    failed = 1;
  }
  return failed ? EXIT_FAILED : 0;
}
