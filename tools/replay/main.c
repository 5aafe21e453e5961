/*
 * tools/replay/main.c: the `replay` command. Parses the command line, picks
 * the real GPU or the host simulation, reads the trace once and replays it
 * through each stack asked for, then prints one report.
 *
 * Exit status: 0 when every replay succeeded; 1 when anything failed (a
 * malformed line without --skip-malformed, an unreadable trace, a failed
 * allocation or free, a stack that could not be created or destroyed); 2 for a
 * command-line error (unknown option or stack name).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/stack.h"
#include "tools/replay/calls.h"
#include "tools/replay/locate.h"
#include "tools/replay/measure.h"
#include "tools/replay/numbers.h"
#include "tools/replay/plot.h"
#include "tools/replay/replay.h"
#include "tools/replay/report.h"
#include "tools/replay/stacks.h"
#include "tools/replay/timing.h"
#include "tools/replay/trace.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define MAX_STACKS 16
#define DEFAULT_TRACE "gpt2_train.csv.gz"
#define DEFAULT_STACKS "cuda_device,cuda_async,pool"
#define MESSAGE_BYTES 1024
#define PATH_BYTES 4096
#define TIMER_SAMPLES 1001

typedef struct options {
  const char *trace_path; /* NULL: the bundled default trace */
  /* --stack and --compare values in command-line order; none: DEFAULT_STACKS */
  const char *stack_args[MAX_STACKS];
  bool stack_arg_is_list[MAX_STACKS]; /* --compare: a list to split */
  size_t stack_arg_count;
  bool sim;
  bool skip_malformed;
  bool help;
  bool components;
  replay_options replay; /* capture mode, passes */
  /* --arena-reserve: one size for every stack, or one per stack in order. */
  size_t arena_reserve_bytes[MAX_STACKS];
  size_t arena_reserve_count;
  const char *plot_path; /* --plot, or NULL */
  replay_plot_format plot_format;
  int snapshot_device; /* --snapshot-device, or -1 */
  /* --sim-call-ns: a latency per simulated CUDA call kind, 0 for none. */
  uint64_t sim_call_ns[GMR_CUDA_CALL_COUNT];
  bool has_sim_call_ns;
} options;

/* The stacks asked for, each an alias or a spec, copied into `storage`. */
typedef struct stack_list {
  char storage[8192];
  size_t used;
  const char *names[MAX_STACKS];
  size_t count;
} stack_list;

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: replay [options] [TRACE]\n"
          "Replay an allocation trace through stacks of gmr memory resources and report host\n"
          "time per call and peak memory held.\n"
          "\n"
          "  TRACE, --trace PATH  trace file: PyTorch snapshot CSV (action,addr,size,stream,"
          "time_us)\n"
          "                       or RMM log CSV (Thread,Time,Action,Pointer,Size,Stream),\n"
          "                       or a PyTorch memory snapshot pickle (torch.cuda.memory.\n"
          "                       _snapshot() saved with pickle; read without Python),\n"
          "                       gzip or plain; default: the bundled tools/traces/" DEFAULT_TRACE
          "\n"
          "  --stack SPEC         replay through one stack; repeat to compare several\n"
          "  --compare A;B;...    replay through several stacks, one table; stacks are\n"
          "                       separated by ';' or by ',' outside parentheses\n"
          "                       (default: " DEFAULT_STACKS ")\n"
          "  --components         list the components and options a spec can use\n"
          "  --sim                use the host simulation of CUDA even if a GPU is present\n"
          "  --skip-malformed     count and skip malformed lines instead of failing\n"
          "  --capture MODE       capture_begin/capture_end rows: real (default: the stream\n"
          "                       captures a CUDA graph; a graph arena in the stack gets an\n"
          "                       explicit session, and every capture appends to one graph\n"
          "                       memory) or off (ignore them)\n"
          "  --arena-reserve SIZE[,SIZE...]  before each capture, grow the stack's graph arena\n"
          "                       to SIZE (bytes, or with K/M/G/KiB/MiB/GiB; one size per\n"
          "                       stack of --compare, or one for all); default: none (the\n"
          "                       arena grows inside the capture when the layer below can)\n"
          "  --passes N           replay the trace N times on the same stack (1..%d,\n"
          "                       default 1): pass 1 is the cold start, 2.. warm\n"
          "  --plot FILE          write memory over the replay as FILE.html or FILE.svg\n"
          "                       (self-contained: open it in a browser)\n"
          "  --snapshot-device N  a snapshot pickle with traces of several devices: replay\n"
          "                       device N's\n"
          "  --sim-call-ns LIST   on the simulation, make each listed CUDA call take that much\n"
          "                       longer, as a driver does (the calls of other threads go on\n"
          "                       meanwhile): cuMemCreate=31000,cuMemMap=12000,...; or h200\n"
          "                       for the VMM calls' costs measured on an H200 (BENCHMARKS.md,\n"
          "                       'VMM page costs': create 32.8, map 11.9, set access 70.9,\n"
          "                       unmap 27.3, release 15.5 us), a rough model of a GPU's cold\n"
          "                       pass\n"
          "  --help               this text\n"
          "\n"
          "Per pass the table gives the mean host ns per call (wall clock of the pass over its\n"
          "calls, from a second fresh stack replayed without per-call timers), p50/p99 from\n"
          "per-call timers, failures, the peak held and the fragmentation at that peak.\n"
          "A second table gives per pass the CUDA calls the stack made while the pass's events\n"
          "replayed (from the wall-clock run): create (cuMemCreate), map (cuMemMap), unmap\n"
          "(cuMemUnmap), release (cuMemRelease), access (cuMemSetAccess), reserve\n"
          "(cuMemAddressReserve/Free), malloc (cudaMalloc, cudaMallocFromPoolAsync,\n"
          "cudaMallocManaged, cudaHostAlloc), free (cudaFree, cudaFreeAsync, cudaFreeHost,\n"
          "cudaMemPoolTrimTo), record (cudaEventRecord), query (cudaEventQuery), wait\n"
          "(cudaStreamWaitEvent), sync (cudaDeviceSynchronize, cudaStreamSynchronize,\n"
          "cudaEventSynchronize) and their total; counted by the simulation, or on a GPU by the\n"
          "CUDA layer's counting view (calls of the stack's helper threads included).\n"
          "\n"
          "A stack is a spec, top layer first, '>' meaning \"stacks on\", e.g.\n"
          "  'tracking > limiting(limit=4GiB, on_limit=increase, on_oom=trim_retry) > "
          "cuda(kind=async)'\n"
          "or an alias:",
          REPLAY_MAX_PASSES);
  for (size_t i = 0; i < replay_stack_known_count(); ++i) {
    fprintf(out, "%s %s = %s", i == 0 ? "" : ",", replay_stack_known_name(i),
            replay_stack_known_spec(i));
  }
  fprintf(out,
          "\n\nExit status: 0 all replays succeeded; 1 something failed (malformed or "
          "unreadable trace,\nfailed allocation or free, stack error); 2 command-line error.\n");
}

/* "--name VALUE" or "--name=VALUE". Returns 1 if argv[*i] is the option (and
 * sets *value, advancing *i past a separate value), 0 if it is not, -1 if the
 * value is missing. */
static int option_value(int argc, char **argv, int *i, const char *name, const char **value) {
  size_t n = strlen(name);
  const char *arg = argv[*i];
  if (strncmp(arg, name, n) != 0) return 0;
  if (arg[n] == '=') {
    *value = arg + n + 1;
    return 1;
  }
  if (arg[n] != '\0') return 0;
  if (*i + 1 >= argc) return -1;
  *i += 1;
  *value = argv[*i];
  return 1;
}

/* --sim-call-ns h200 | NAME=NS[,NAME=NS...] with the CUDA functions' names
 * of gmr/sim/cuda_sim.h. */
static bool parse_call_ns(const char *value, options *opt) {
  static const struct {
    gmr_cuda_call call;
    uint64_t ns;
  } h200[] = {{GMR_CUDA_CALL_MEM_CREATE, 32800},    {GMR_CUDA_CALL_MEM_MAP, 11900},
              {GMR_CUDA_CALL_MEM_SET_ACCESS, 70900}, {GMR_CUDA_CALL_MEM_UNMAP, 27300},
              {GMR_CUDA_CALL_MEM_RELEASE, 15500}};
  opt->has_sim_call_ns = true;
  if (value != NULL && strcmp(value, "h200") == 0) {
    for (size_t i = 0; i < sizeof h200 / sizeof h200[0]; ++i) {
      opt->sim_call_ns[h200[i].call] = h200[i].ns;
    }
    return true;
  }
  char list[512];
  if (value == NULL || value[0] == '\0' || strlen(value) >= sizeof list) {
    fprintf(stderr, "gmr replay: --sim-call-ns takes h200 or NAME=NS[,NAME=NS...], e.g. "
                    "cuMemCreate=31000,cuMemMap=12000\n");
    return false;
  }
  strcpy(list, value);
  for (char *item = strtok(list, ","); item != NULL; item = strtok(NULL, ",")) {
    char *eq = strchr(item, '=');
    uint64_t ns = 0;
    char why[96] = "a value is needed";
    if (eq != NULL) *eq = '\0';
    int call = 0;
    while (call < GMR_CUDA_CALL_COUNT && strcmp(gmr_cuda_call_name((gmr_cuda_call)call), item) != 0) {
      ++call;
    }
    if (call == GMR_CUDA_CALL_COUNT) {
      fprintf(stderr, "gmr replay: --sim-call-ns: '%s' is no CUDA call of the layer (names as "
                      "cuMemCreate, cudaEventRecord)\n",
              item);
      return false;
    }
    if (eq == NULL || !replay_parse_count(eq + 1, 0, 1000000000, &ns, why, sizeof why)) {
      fprintf(stderr, "gmr replay: --sim-call-ns %s: %s (nanoseconds, 0..1000000000)\n", item,
              why);
      return false;
    }
    opt->sim_call_ns[call] = ns;
  }
  return true;
}

/* --arena-reserve SIZE[,SIZE...]: whole byte counts (no NaN, infinity, sign
 * or fraction of a byte: a double cast to an integer would be undefined). */
static bool parse_sizes(const char *value, options *opt) {
  char sizes[256];
  if (value == NULL || strlen(value) >= sizeof sizes) {
    fprintf(stderr, "gmr replay: --arena-reserve takes sizes such as 600MiB or 572MiB,190MiB\n");
    return false;
  }
  strcpy(sizes, value);
  opt->arena_reserve_count = 0;
  for (char *item = strtok(sizes, ","); item != NULL; item = strtok(NULL, ",")) {
    char why[96];
    if (opt->arena_reserve_count == MAX_STACKS) {
      fprintf(stderr, "gmr replay: --arena-reserve: at most %d sizes\n", MAX_STACKS);
      return false;
    }
    if (!replay_parse_bytes(item, &opt->arena_reserve_bytes[opt->arena_reserve_count++], why,
                            sizeof why)) {
      fprintf(stderr, "gmr replay: --arena-reserve '%s': %s; give sizes such as 600MiB or "
                      "572MiB,190MiB\n",
              item, why);
      return false;
    }
  }
  if (opt->arena_reserve_count == 0) {
    fprintf(stderr, "gmr replay: --arena-reserve takes sizes such as 600MiB or 572MiB,190MiB\n");
    return false;
  }
  return true;
}

static bool parse_args(int argc, char **argv, options *opt) {
  memset(opt, 0, sizeof *opt);
  const replay_options replay_defaults = REPLAY_OPTIONS_DEFAULT;
  opt->replay = replay_defaults;
  opt->snapshot_device = -1;
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    const char *value = NULL;
    int r = 0;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      opt->help = true;
      continue;
    }
    if (strcmp(arg, "--sim") == 0) {
      opt->sim = true;
      continue;
    }
    if (strcmp(arg, "--skip-malformed") == 0) {
      opt->skip_malformed = true;
      continue;
    }
    if (strcmp(arg, "--components") == 0) {
      opt->components = true;
      continue;
    }
    r = option_value(argc, argv, &i, "--capture", &value);
    if (r != 0) {
      if (r < 0 || (strcmp(value, "real") != 0 && strcmp(value, "off") != 0)) {
        fprintf(stderr, "gmr replay: --capture takes real or off\n");
        return false;
      }
      opt->replay.capture = strcmp(value, "real") == 0 ? REPLAY_CAPTURE_REAL : REPLAY_CAPTURE_OFF;
      continue;
    }
    r = option_value(argc, argv, &i, "--arena-reserve", &value);
    if (r != 0) {
      if (!parse_sizes(r > 0 ? value : NULL, opt)) return false;
      continue;
    }
    r = option_value(argc, argv, &i, "--passes", &value);
    if (r != 0) {
      uint64_t passes = 0;
      char why[96] = "a value is needed";
      if (r < 0 || !replay_parse_count(value, 1, REPLAY_MAX_PASSES, &passes, why, sizeof why)) {
        fprintf(stderr, "gmr replay: --passes %s: %s (give 1 to %d)\n", r < 0 ? "" : value, why,
                REPLAY_MAX_PASSES);
        return false;
      }
      opt->replay.pass_count = (size_t)passes;
      continue;
    }
    r = option_value(argc, argv, &i, "--snapshot-device", &value);
    if (r != 0) {
      uint64_t device = 0;
      char why[96] = "a value is needed";
      if (r < 0 || !replay_parse_count(value, 0, 1023, &device, why, sizeof why)) {
        fprintf(stderr, "gmr replay: --snapshot-device %s: %s (a device index, 0..1023)\n",
                r < 0 ? "" : value, why);
        return false;
      }
      opt->snapshot_device = (int)device;
      continue;
    }
    r = option_value(argc, argv, &i, "--sim-call-ns", &value);
    if (r != 0) {
      if (!parse_call_ns(r > 0 ? value : NULL, opt)) return false;
      continue;
    }
    r = option_value(argc, argv, &i, "--plot", &value);
    if (r != 0) {
      opt->plot_format = r > 0 ? replay_plot_format_of_path(value) : REPLAY_PLOT_UNKNOWN;
      if (opt->plot_format == REPLAY_PLOT_UNKNOWN) {
        fprintf(stderr, "gmr replay: --plot %s: give a file name ending in .html or .svg\n",
                r > 0 ? value : "");
        return false;
      }
      opt->plot_path = value;
      continue;
    }
    const char *const valued[] = {"--stack", "--compare", "--trace"};
    bool matched = false;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0] && !matched; ++k) {
      r = option_value(argc, argv, &i, valued[k], &value);
      if (r < 0) {
        fprintf(stderr, "gmr replay: %s needs a value\n", valued[k]);
        return false;
      }
      if (r == 0) continue;
      matched = true;
      if (k == 2) {
        if (opt->trace_path != NULL) {
          fprintf(stderr, "gmr replay: more than one trace given\n");
          return false;
        }
        opt->trace_path = value;
      } else {
        if (opt->stack_arg_count == MAX_STACKS) {
          fprintf(stderr, "gmr replay: at most %d stacks per run\n", MAX_STACKS);
          return false;
        }
        opt->stack_args[opt->stack_arg_count] = value;
        opt->stack_arg_is_list[opt->stack_arg_count] = k == 1;
        opt->stack_arg_count++;
      }
    }
    if (matched) continue;
    if (arg[0] == '-' && arg[1] != '\0') {
      fprintf(stderr, "gmr replay: unknown option '%s' (see --help)\n", arg);
      return false;
    }
    if (opt->trace_path != NULL) {
      fprintf(stderr, "gmr replay: more than one trace given ('%s' and '%s')\n",
              opt->trace_path, arg);
      return false;
    }
    opt->trace_path = arg;
  }
  return true;
}

/* Copy `len` bytes of `text` as one more stack of `out`. */
static bool add_stack(stack_list *out, const char *text, size_t len) {
  while (len > 0 && (text[0] == ' ' || text[0] == '\t')) {
    text++;
    len--;
  }
  if (out->count == MAX_STACKS) {
    fprintf(stderr, "gmr replay: at most %d stacks per run\n", MAX_STACKS);
    return false;
  }
  if (out->used + len + 1 > sizeof out->storage) {
    fprintf(stderr, "gmr replay: stack list too long\n");
    return false;
  }
  char *copy = out->storage + out->used;
  memcpy(copy, text, len);
  copy[len] = '\0';
  out->used += len + 1;
  out->names[out->count++] = copy;
  return true;
}

/* Split a --compare list at ';' and at ',' outside parentheses and quotes:
 * neither can separate anything inside one spec. */
static bool split_list(stack_list *out, const char *list) {
  int depth = 0;
  bool quoted = false;
  const char *start = list;
  for (const char *c = list;; ++c) {
    if (*c == '\0' || (!quoted && ((*c == ',' && depth == 0) || *c == ';'))) {
      if (!add_stack(out, start, (size_t)(c - start))) return false;
      if (*c == '\0') return true;
      start = c + 1;
    } else if (quoted && *c == '\\' && c[1] != '\0') {
      ++c;
    } else if (*c == '"') {
      quoted = !quoted;
    } else if (!quoted && *c == '(') {
      depth++;
    } else if (!quoted && *c == ')' && depth > 0) {
      depth--;
    }
  }
}

/* Split and check the stacks before any work, so a typo costs nothing. */
static bool parse_stacks(const options *opt, stack_list *out) {
  memset(out, 0, sizeof *out);
  if (opt->stack_arg_count == 0) {
    if (!split_list(out, DEFAULT_STACKS)) return false;
  }
  for (size_t i = 0; i < opt->stack_arg_count; ++i) {
    bool ok = opt->stack_arg_is_list[i]
                  ? split_list(out, opt->stack_args[i])
                  : add_stack(out, opt->stack_args[i], strlen(opt->stack_args[i]));
    if (!ok) return false;
  }
  for (size_t i = 0; i < out->count; ++i) {
    char err[MESSAGE_BYTES];
    if (replay_stack_check(out->names[i], err, sizeof err) != GMR_OK) {
      fprintf(stderr, "gmr replay: %s\n", err);
      return false;
    }
  }
  return true;
}

/* Decide real GPU or simulation and say so on the first line of output. */
static bool choose_device(bool force_sim) {
  if (force_sim) {
    printf("gmr replay: --sim given; replaying on the host simulation of the CUDA layer "
           "(timings are not GPU timings)\n");
    return true;
  }
  int device_count = 0;
  gmr_status st = gmr_device_get_count(&device_count);
  if (st != GMR_OK) {
    printf("gmr replay: querying CUDA devices failed (%s); replaying on the host simulation "
           "of the CUDA layer (timings are not GPU timings)\n",
           gmr_status_name(st));
    return true;
  }
  if (device_count == 0) {
    printf("gmr replay: no CUDA device found; replaying on the host simulation of the CUDA "
           "layer (timings are not GPU timings)\n");
    return true;
  }
  int current = 0;
  if (gmr_device_get_current(&current) != GMR_OK) current = 0;
  printf("gmr replay: replaying on real CUDA: %d device%s found, using device %d\n",
         device_count, device_count == 1 ? "" : "s", current);
  return false;
}

/* A simulated device with room for the trace: max(80 GiB, 2 x peak live). */
static gmr_status enable_simulation(const replay_trace *trace) {
  gmr_cuda_sim_config config = GMR_CUDA_SIM_CONFIG_DEFAULT;
  uint64_t peak = trace->summary.peak_live_bytes;
  uint64_t wanted = peak > UINT64_MAX / 2 ? UINT64_MAX : peak * 2;
  if (wanted > SIZE_MAX) wanted = SIZE_MAX;
  if ((size_t)wanted > config.device_memory_bytes) config.device_memory_bytes = (size_t)wanted;
  return gmr_cuda_sim_enable(&config);
}

/* Measure one stack (measure.h: a per-call-timed run and a wall-clock run,
 * each on a fresh stack). Returns false if the stack could not be created
 * (then *result holds no memory and the reason was printed). */
static bool replay_one(const replay_trace *trace, const char *name, uint64_t overhead_ns,
                       const replay_options *replay_opts, replay_result *result,
                       char *adaptors, size_t adaptors_bytes) {
  char err[MESSAGE_BYTES];
  gmr_status st = replay_measure(trace, name, overhead_ns, replay_opts, result, adaptors,
                                 adaptors_bytes, err, sizeof err);
  if (st != GMR_OK && result->passes == NULL) {
    fprintf(stderr, "gmr replay: %s\n", err[0] != '\0' ? err : result->first_failure);
    replay_result_free(result);
    return false;
  }
  return true;
}

/* Open the plot file before any work, so that a path that cannot be written
 * costs nothing. */
static FILE *open_plot(const options *opt) {
  if (opt->plot_path == NULL) return NULL;
  FILE *f = fopen(opt->plot_path, "w");
  if (f == NULL) {
    fprintf(stderr, "gmr replay: --plot %s: cannot write the file: %s\n", opt->plot_path,
            strerror(errno));
  }
  return f;
}

/* The run ended before there was anything to draw: no empty file stays. */
static void discard_plot(FILE *plot, const options *opt) {
  if (plot == NULL) return;
  fclose(plot);
  (void)remove(opt->plot_path);
}

static bool write_plot(FILE *plot, const options *opt, const replay_trace *trace,
                       const char *const *names, const replay_result *results, size_t count) {
  char err[MESSAGE_BYTES];
  gmr_status st = replay_plot_write(plot, opt->plot_format, trace, names, results, count, err,
                                    sizeof err);
  if (fclose(plot) != 0 && st == GMR_OK) {
    st = GMR_ERR_INTERNAL;
    snprintf(err, sizeof err, "closing the file failed: %s", strerror(errno));
  }
  if (st != GMR_OK) {
    fprintf(stderr, "gmr replay: --plot %s: %s\n", opt->plot_path, err);
    return false;
  }
  printf("\nplot: %s\n", opt->plot_path);
  return true;
}

int main(int argc, char **argv) {
  options opt;
  if (!parse_args(argc, argv, &opt)) return EXIT_USAGE;
  if (opt.help) {
    print_usage(stdout);
    return 0;
  }
  if (opt.components) {
    GMR_IGNORE_STATUS(gmr_stack_print_components(stdout));
    return 0;
  }
  static stack_list stacks;
  if (!parse_stacks(&opt, &stacks)) return EXIT_USAGE;
  if (opt.arena_reserve_count > 1 && opt.arena_reserve_count != stacks.count) {
    fprintf(stderr, "gmr replay: --arena-reserve gives %zu sizes for %zu stacks\n",
            opt.arena_reserve_count, stacks.count);
    return EXIT_USAGE;
  }
  FILE *plot = open_plot(&opt);
  if (opt.plot_path != NULL && plot == NULL) return EXIT_USAGE;

  char bundled[PATH_BYTES];
  if (opt.trace_path == NULL) {
    char looked[4 * PATH_BYTES];
    if (replay_locate_bundled_trace(argv[0], DEFAULT_TRACE, bundled, sizeof bundled, looked,
                                    sizeof looked) != GMR_OK) {
      fprintf(stderr,
              "gmr replay: the bundled trace " DEFAULT_TRACE " was not found; looked in: %s\n"
              "gmr replay: pass a trace path (see --help)\n",
              looked);
      discard_plot(plot, &opt);
      return EXIT_FAILED;
    }
    opt.trace_path = bundled;
  }

  bool simulated = choose_device(opt.sim);
  fflush(stdout);

  replay_trace_options trace_options = REPLAY_TRACE_OPTIONS_DEFAULT;
  trace_options.skip_malformed = opt.skip_malformed;
  trace_options.snapshot_device = opt.snapshot_device;
  replay_trace *trace = NULL;
  char err[MESSAGE_BYTES];
  if (replay_trace_read(opt.trace_path, &trace_options, &trace, err, sizeof err) != GMR_OK) {
    fprintf(stderr, "gmr replay: %s\n", err);
    discard_plot(plot, &opt);
    return EXIT_FAILED;
  }
  if (opt.has_sim_call_ns && !simulated) {
    fprintf(stderr, "gmr replay: --sim-call-ns is for the simulation (add --sim)\n");
    replay_trace_destroy(trace);
    discard_plot(plot, &opt);
    return EXIT_USAGE;
  }
  if (simulated) {
    gmr_status st = enable_simulation(trace);
#if defined(__linux__)
    /* Sleep as long as asked, not the default 50 us of timer slack more (the
     * threads the stacks start inherit it). */
    if (opt.has_sim_call_ns) (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
    for (int call = 0; st == GMR_OK && call < GMR_CUDA_CALL_COUNT; ++call) {
      if (opt.sim_call_ns[call] > 0) {
        st = gmr_cuda_sim_inject_delay((gmr_cuda_call)call, opt.sim_call_ns[call]);
      }
    }
    if (st != GMR_OK) {
      fprintf(stderr, "gmr replay: setting up the simulation failed: %s\n", gmr_status_name(st));
      replay_trace_destroy(trace);
      discard_plot(plot, &opt);
      return EXIT_FAILED;
    }
  }
  replay_report_print_summary(stdout, trace);
  fputc('\n', stdout);

  replay_calls_start(); /* the real layer counts from here on; the simulation always does */
  const uint64_t overhead_ns = replay_clock_overhead_ns(TIMER_SAMPLES);
  replay_result results[MAX_STACKS];
  const char *names[MAX_STACKS];
  static char adaptors[MAX_STACKS][MESSAGE_BYTES];
  size_t done = 0;
  bool failed = false;
  for (size_t i = 0; i < stacks.count; ++i) {
    replay_options replay_opts = opt.replay;
    if (opt.arena_reserve_count > 0) {
      replay_opts.arena_reserve_bytes =
          opt.arena_reserve_bytes[opt.arena_reserve_count == 1 ? 0 : i];
    }
    if (!replay_one(trace, stacks.names[i], overhead_ns, &replay_opts, &results[done],
                    adaptors[done], sizeof adaptors[done])) {
      failed = true;
      continue;
    }
    names[done] = stacks.names[i];
    if (!replay_result_ok(&results[done])) failed = true;
    done++;
  }
  if (done > 0) {
    replay_report_print_table(stdout, trace, names, results, done);
    replay_report_print_calls(stdout, names, results, done, simulated);
  }
  /* What the adaptors and policies did, one line per stack that has any. */
  bool any_adaptor = false;
  for (size_t i = 0; i < done; ++i) {
    if (adaptors[i][0] == '\0') continue;
    if (!any_adaptor) printf("\nadaptors:\n");
    any_adaptor = true;
    printf("%s: %s\n", names[i], adaptors[i]);
  }
  if (plot != NULL && !write_plot(plot, &opt, trace, names, results, done)) failed = true;
  for (size_t i = 0; i < done; ++i) replay_result_free(&results[i]);
  replay_trace_destroy(trace);

  if (simulated && gmr_cuda_sim_disable() != GMR_OK && !failed) {
    /* Every stack reported success, yet simulated memory is still live. */
    fprintf(stderr, "gmr replay: simulated CUDA objects were left alive (a leak in the "
                    "replay)\n");
    failed = true;
  }
  return failed ? EXIT_FAILED : 0;
}
