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
#include "gmr/stack.h"
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
  replay_options replay; /* capture mode */
  /* --arena-reserve: one size for every stack, or one per stack in order. */
  size_t arena_reserve_bytes[MAX_STACKS];
  size_t arena_reserve_count;
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
          "  --help               this text\n"
          "\n"
          "A stack is a spec, top layer first, '>' meaning \"stacks on\", e.g.\n"
          "  'tracking > limiting(limit=4GiB, on_limit=increase, on_oom=trim_retry) > "
          "cuda(kind=async)'\n"
          "or an alias:");
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

/* "600MiB", "1.5G", "4096": bytes with an optional binary unit. */
static bool parse_size(const char *text, size_t *out) {
  char *end = NULL;
  double v = strtod(text, &end);
  if (end == text || v < 0) return false;
  double unit = 1;
  if (*end == 'K' || *end == 'k') {
    unit = 1024.0;
  } else if (*end == 'M' || *end == 'm') {
    unit = 1024.0 * 1024.0;
  } else if (*end == 'G' || *end == 'g') {
    unit = 1024.0 * 1024.0 * 1024.0;
  }
  if (unit > 1) {
    end++;
    if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0) end += strlen(end);
  } else if (strcmp(end, "B") == 0) {
    end++;
  }
  if (*end != '\0' || v * unit >= (double)SIZE_MAX) return false;
  *out = (size_t)(v * unit);
  return true;
}

static bool parse_args(int argc, char **argv, options *opt) {
  memset(opt, 0, sizeof *opt);
  const replay_options replay_defaults = REPLAY_OPTIONS_DEFAULT;
  opt->replay = replay_defaults;
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
      char sizes[256];
      bool ok = r > 0 && strlen(value) < sizeof sizes;
      if (ok) strcpy(sizes, value);
      for (char *item = ok ? strtok(sizes, ",") : NULL; ok && item != NULL;
           item = strtok(NULL, ",")) {
        ok = opt->arena_reserve_count < MAX_STACKS &&
             parse_size(item, &opt->arena_reserve_bytes[opt->arena_reserve_count++]);
      }
      if (!ok || opt->arena_reserve_count == 0) {
        fprintf(stderr, "gmr replay: --arena-reserve takes sizes such as 600MiB or "
                        "572MiB,190MiB\n");
        return false;
      }
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

/* Create, replay, destroy one stack. Returns false if the stack could not be
 * created (then *result holds no memory and the reason was printed). */
static bool replay_one(const replay_trace *trace, const char *name, uint64_t overhead_ns,
                       const replay_options *replay_opts, replay_result *result,
                       char *adaptors, size_t adaptors_bytes) {
  char err[MESSAGE_BYTES];
  replay_stack *stack = NULL;
  gmr_status st = replay_stack_create(name, &stack, err, sizeof err);
  if (st != GMR_OK) {
    fprintf(stderr, "gmr replay: %s\n", err);
    memset(result, 0, sizeof *result);
    return false;
  }
  (void)replay_run_with(trace, replay_stack_top(stack), overhead_ns, replay_opts, result);
  replay_stack_describe(stack, adaptors, adaptors_bytes);
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
  if (opt.components) {
    (void)gmr_stack_print_components(stdout);
    return 0;
  }
  static stack_list stacks;
  if (!parse_stacks(&opt, &stacks)) return EXIT_USAGE;
  if (opt.arena_reserve_count > 1 && opt.arena_reserve_count != stacks.count) {
    fprintf(stderr, "gmr replay: --arena-reserve gives %zu sizes for %zu stacks\n",
            opt.arena_reserve_count, stacks.count);
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
  if (done > 0) replay_report_print_table(stdout, trace, names, results, done);
  /* What the adaptors and policies did, one line per stack that has any. */
  bool any_adaptor = false;
  for (size_t i = 0; i < done; ++i) {
    if (adaptors[i][0] == '\0') continue;
    if (!any_adaptor) printf("\nadaptors:\n");
    any_adaptor = true;
    printf("%s: %s\n", names[i], adaptors[i]);
  }
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
