/*
 * tools/tiers_replay/main.c: the `tiers_replay` command: replay a trace with
 * a GPU reservation smaller than its peak and report what had to be
 * downgraded to pinned host memory (see tiers_replay.h).
 *
 *   tiers_replay [options] [TRACE]     (default: the bundled gpt2_train trace)
 *
 * Exit status: 0 on success, 1 when the replay failed, 2 for a command-line
 * error.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "stack/value.h"
#include "tools/replay/locate.h"
#include "tools/replay/trace.h"
#include "tools/tiers_replay/tiers_replay.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define DEFAULT_TRACE "gpt2_train.csv.gz"
#define PATH_BYTES 4096

static void usage(FILE *out) {
  fprintf(out,
          "usage: tiers_replay [options] [TRACE]\n"
          "Replays TRACE (PyTorch snapshot CSV or RMM log, gzip or plain; default: the bundled\n"
          "gpt2_train trace) under a GPU reservation smaller than its peak, moving the oldest\n"
          "buffers to pinned host memory when the reservation fills, and reports what moved.\n"
          "  --gpu-bytes SIZE     the GPU reservation (e.g. 3GiB); default: --gpu-fraction of the peak\n"
          "  --gpu-fraction F     the reservation as a fraction of the trace's peak (default 0.5)\n"
          "  --stack SPEC         the GPU space's stack (default \"pool > cuda(kind=async)\")\n"
          "  --host-bytes SIZE    the HOST space and reservation (default: the peak + 64 MiB)\n"
          "  --host-block SIZE    HOST block size (default 1MiB)\n"
          "  --trigger F          downgrade when use would pass F x the reservation (default 0.85)\n"
          "  --stop F             ... down to F x the reservation (default 0.65)\n"
          "  --upgrade            move buffers back when use falls below the stop level\n"
          "  --host-prepin        pin the whole HOST space up front (default: chunks of 64\n"
          "                       blocks pinned when first needed, timed as \"host blocks\")\n"
          "  --copy, --no-copy    copy contents when moving (default: on a GPU yes, on the\n"
          "                       simulation no: accounting only)\n"
          "  --sim                use the host simulation of CUDA even if a GPU is present\n"
          "  --help\n");
}

static bool parse_size(const char *opt, const char *text, size_t *out) {
  char why[128];
  if (gmr__parse_size(text, NULL, NULL, NULL, out, why, sizeof why) != GMR_OK) {
    fprintf(stderr, "tiers_replay: %s %s: %s\n", opt, text, why);
    return false;
  }
  return true;
}

static bool parse_fraction(const char *opt, const char *text, double *out) {
  char *end = NULL;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0.0 && v <= 1.0)) {
    fprintf(stderr, "tiers_replay: %s %s: a fraction in (0, 1] is needed\n", opt, text);
    return false;
  }
  *out = v;
  return true;
}

int main(int argc, char **argv) {
  tiers_replay_options o = TIERS_REPLAY_OPTIONS_DEFAULT;
  const char *trace_path = NULL;
  int copy = -1; /* -1: decide by device */
  bool sim = false;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = true;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--upgrade") == 0) {
      o.upgrade = true;
    } else if (strcmp(a, "--host-prepin") == 0) {
      o.host_prepin = true;
    } else if (strcmp(a, "--copy") == 0) {
      copy = 1;
    } else if (strcmp(a, "--no-copy") == 0) {
      copy = 0;
    } else if (strcmp(a, "--sim") == 0) {
      sim = true;
    } else if (a[0] == '-' && a[1] == '-' && v == NULL) {
      fprintf(stderr, "tiers_replay: %s needs a value (or is unknown; see --help)\n", a);
      return EXIT_USAGE;
    } else if (strcmp(a, "--gpu-bytes") == 0) {
      ok = parse_size(a, v, &o.gpu_reservation_bytes);
      ++i;
    } else if (strcmp(a, "--gpu-fraction") == 0) {
      ok = parse_fraction(a, v, &o.gpu_fraction);
      ++i;
    } else if (strcmp(a, "--stack") == 0) {
      o.gpu_stack = v;
      ++i;
    } else if (strcmp(a, "--host-bytes") == 0) {
      ok = parse_size(a, v, &o.host_bytes);
      ++i;
    } else if (strcmp(a, "--host-block") == 0) {
      ok = parse_size(a, v, &o.host_block_bytes);
      ++i;
    } else if (strcmp(a, "--trigger") == 0) {
      ok = parse_fraction(a, v, &o.trigger);
      ++i;
    } else if (strcmp(a, "--stop") == 0) {
      ok = parse_fraction(a, v, &o.stop);
      ++i;
    } else if (a[0] == '-') {
      fprintf(stderr, "tiers_replay: unknown option %s (see --help)\n", a);
      return EXIT_USAGE;
    } else if (trace_path == NULL) {
      trace_path = a;
    } else {
      fprintf(stderr, "tiers_replay: one trace at a time (%s, then %s)\n", trace_path, a);
      return EXIT_USAGE;
    }
    if (!ok) return EXIT_USAGE;
  }
  if (o.stop > o.trigger) {
    fprintf(stderr, "tiers_replay: --stop %.2f is above --trigger %.2f\n", o.stop, o.trigger);
    return EXIT_USAGE;
  }

  static char bundled[PATH_BYTES];
  if (trace_path == NULL) {
    static char looked[4 * PATH_BYTES];
    if (replay_locate_bundled_trace(argv[0], DEFAULT_TRACE, bundled, sizeof bundled, looked,
                                    sizeof looked) != GMR_OK) {
      fprintf(stderr, "tiers_replay: the bundled trace " DEFAULT_TRACE " was not found; looked in: %s\n",
              looked);
      return EXIT_FAILED;
    }
    trace_path = bundled;
  }
  int devices = 0;
  if (!sim && (gmr_device_get_count(&devices) != GMR_OK || devices == 0)) sim = true;
  printf("tiers_replay: %s\n", sim ? "on the host simulation of the CUDA layer (no GPU timings)"
                                   : "on the real GPU, device 0");
  o.copy = copy < 0 ? !sim : copy == 1;

  char err[1024];
  replay_trace *trace = NULL;
  if (replay_trace_read(trace_path, NULL, &trace, err, sizeof err) != GMR_OK) {
    fprintf(stderr, "tiers_replay: %s\n", err);
    return EXIT_FAILED;
  }
  if (sim) {
    gmr_cuda_sim_config sc = GMR_CUDA_SIM_CONFIG_DEFAULT;
    uint64_t twice = trace->summary.peak_live_bytes * 2;
    if (twice > sc.device_memory_bytes) sc.device_memory_bytes = (size_t)twice;
    if (gmr_cuda_sim_enable(&sc) != GMR_OK) {
      fprintf(stderr, "tiers_replay: the simulation could not be enabled\n");
      replay_trace_destroy(trace);
      return EXIT_FAILED;
    }
  }
  tiers_replay_result r;
  gmr_status st = tiers_replay_run(trace, &o, &r, err, sizeof err);
  tiers_replay_print(stdout, trace, &o, &r);
  replay_trace_destroy(trace);
  if (st != GMR_OK) fprintf(stderr, "tiers_replay: %s: %s\n", gmr_status_name(st), err);
  if (sim && gmr_cuda_sim_disable() != GMR_OK && st == GMR_OK) {
    fprintf(stderr, "tiers_replay: simulated CUDA objects were left alive (a leak)\n");
    return EXIT_FAILED;
  }
  return st == GMR_OK ? 0 : EXIT_FAILED;
}
