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
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/cuda_sim.h"
#include "gmr/device.h"
#include "tools/replay/locate.h"
#include "tools/replay/replay.h"
#include "tools/replay/report.h"
#include "tools/replay/stacks.h"
#include "tools/replay/timing.h"
#include "tools/replay/trace.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define MAX_STACKS 16
#define DEFAULT_TRACE "gpt2_train.csv.gz"
#define DEFAULT_STACKS "cuda_device,cuda_async"
#define MESSAGE_BYTES 1024
#define PATH_BYTES 4096
#define TIMER_SAMPLES 1001

typedef struct options {
  const char *trace_path; /* NULL: the bundled default trace */
  const char *stack_list; /* comma-separated; NULL: DEFAULT_STACKS */
  bool sim;
  bool skip_malformed;
  bool help;
} options;

/* The stack names of a --compare list, split in place in `storage`. */
typedef struct stack_list {
  char storage[1024];
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
          "                       gzip or plain; default: the bundled tools/traces/" DEFAULT_TRACE
          "\n"
          "  --stack NAME         replay through one stack\n"
          "  --compare A,B,...    replay through several stacks, one table (default: "
          DEFAULT_STACKS ")\n"
          "  --sim                use the host simulation of CUDA even if a GPU is present\n"
          "  --skip-malformed     count and skip malformed lines instead of failing\n"
          "  --help               this text\n"
          "\n"
          "stacks:");
  for (size_t i = 0; i < replay_stack_known_count(); ++i) {
    fprintf(out, "%s %s", i == 0 ? "" : ",", replay_stack_known_name(i));
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

static bool parse_args(int argc, char **argv, options *opt) {
  memset(opt, 0, sizeof *opt);
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
        if (opt->stack_list != NULL) {
          fprintf(stderr, "gmr replay: give one --stack or one --compare\n");
          return false;
        }
        opt->stack_list = value;
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

/* Split and check the stack names before any work, so a typo costs nothing. */
static bool parse_stacks(const char *list, stack_list *out) {
  memset(out, 0, sizeof *out);
  if (strlen(list) >= sizeof out->storage) {
    fprintf(stderr, "gmr replay: stack list too long\n");
    return false;
  }
  strcpy(out->storage, list);
  char *cursor = out->storage;
  for (;;) {
    char *comma = strchr(cursor, ',');
    if (comma != NULL) *comma = '\0';
    if (out->count == MAX_STACKS) {
      fprintf(stderr, "gmr replay: at most %d stacks per run\n", MAX_STACKS);
      return false;
    }
    char err[MESSAGE_BYTES];
    if (replay_stack_check(cursor, err, sizeof err) != GMR_OK) {
      fprintf(stderr, "gmr replay: %s\n", err);
      return false;
    }
    out->names[out->count++] = cursor;
    if (comma == NULL) break;
    cursor = comma + 1;
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

/* Create, replay, destroy one stack. Returns false if the stack could not be
 * created (then *result holds no memory and the reason was printed). */
static bool replay_one(const replay_trace *trace, const char *name, uint64_t overhead_ns,
                       replay_result *result) {
  char err[MESSAGE_BYTES];
  replay_stack *stack = NULL;
  gmr_status st = replay_stack_create(name, &stack, err, sizeof err);
  if (st != GMR_OK) {
    fprintf(stderr, "gmr replay: %s\n", err);
    memset(result, 0, sizeof *result);
    return false;
  }
  (void)replay_run(trace, replay_stack_top(stack), overhead_ns, result);
  replay_result_set_destroy_status(result, replay_stack_destroy(stack));
  /* A stack that refused to be destroyed stays allocated: the process is
   * about to end, and freeing it under live allocations would be worse. */
  return true;
}

int main(int argc, char **argv) {
  options opt;
  if (!parse_args(argc, argv, &opt)) return EXIT_USAGE;
  if (opt.help) {
    print_usage(stdout);
    return 0;
  }
  stack_list stacks;
  if (!parse_stacks(opt.stack_list != NULL ? opt.stack_list : DEFAULT_STACKS, &stacks)) {
    return EXIT_USAGE;
  }

  char bundled[PATH_BYTES];
  if (opt.trace_path == NULL) {
    char looked[4 * PATH_BYTES];
    if (replay_locate_bundled_trace(argv[0], DEFAULT_TRACE, bundled, sizeof bundled, looked,
                                    sizeof looked) != GMR_OK) {
      fprintf(stderr,
              "gmr replay: the bundled trace " DEFAULT_TRACE " was not found; looked in: %s\n"
              "gmr replay: pass a trace path (see --help)\n",
              looked);
      return EXIT_FAILED;
    }
    opt.trace_path = bundled;
  }

  bool simulated = choose_device(opt.sim);
  fflush(stdout);

  replay_trace_options trace_options = REPLAY_TRACE_OPTIONS_DEFAULT;
  trace_options.skip_malformed = opt.skip_malformed;
  replay_trace *trace = NULL;
  char err[MESSAGE_BYTES];
  if (replay_trace_read(opt.trace_path, &trace_options, &trace, err, sizeof err) != GMR_OK) {
    fprintf(stderr, "gmr replay: %s\n", err);
    return EXIT_FAILED;
  }
  if (simulated) {
    gmr_status st = enable_simulation(trace);
    if (st != GMR_OK) {
      fprintf(stderr, "gmr replay: gmr_cuda_sim_enable failed: %s\n", gmr_status_name(st));
      replay_trace_destroy(trace);
      return EXIT_FAILED;
    }
  }
  replay_report_print_summary(stdout, trace);
  fputc('\n', stdout);

  const uint64_t overhead_ns = replay_clock_overhead_ns(TIMER_SAMPLES);
  replay_result results[MAX_STACKS];
  const char *names[MAX_STACKS];
  size_t done = 0;
  bool failed = false;
  for (size_t i = 0; i < stacks.count; ++i) {
    if (!replay_one(trace, stacks.names[i], overhead_ns, &results[done])) {
      failed = true;
      continue;
    }
    names[done] = stacks.names[i];
    if (!replay_result_ok(&results[done])) failed = true;
    done++;
  }
  if (done > 0) replay_report_print_table(stdout, trace, names, results, done);
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
