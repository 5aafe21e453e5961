/*
 * tools/bench_arena/bench_arena.c: host time of one allocation (and one free)
 * from a graph_arena_resource while the stream captures a CUDA graph.
 *
 * Each round: declare a session on the stream (explicit mode) or not
 * (automatic mode: the arena asks CUDA per call), start a real capture with
 * gmr_cuda_stream_begin_capture, time N allocations back to back (one clock read
 * before, one after: the loop's own cost is in the figure, the timer's is
 * not), then time N frees the same way, end the capture (it must still be
 * valid), end the session, release the memory. Sizes cycle through a fixed
 * list of 64 sizes from 256 B to 64 KiB so the allocator does real carving.
 * The figure is the median over rounds of (loop time / N).
 *
 * Prints one line per mode and policy; with --max-ns X, exits 1 when the
 * explicit-session allocation median is above X (the target is 20 ns).
 *
 *   bazel run -c opt //tools/bench_arena -- [--allocs N] [--rounds R] [--sim]
 *                                           [--max-ns X]
 * Exit status: 0 ok; 1 a call failed, the capture broke, or --max-ns was
 * exceeded; 2 command-line error.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/sim/streams.h"
#include "tools/replay/numbers.h"
#include "tools/replay/timing.h"

#define SIZE_COUNT 64

typedef struct options {
  size_t allocs;
  size_t rounds;
  bool sim;
  double max_ns; /* 0: no check */
} options;

typedef struct result {
  double alloc_ns; /* median over rounds, per call */
  double free_ns;
  double alloc_min_ns;
} result;

static bool check(gmr_status st, const char *what) {
  if (st == GMR_OK) return true;
  fprintf(stderr, "bench_arena: %s failed: %s\n", what, gmr_status_name(st));
  return false;
}

/* One mode: explicit sessions or automatic detection, under `policy`. */
static bool run_mode(gmr_resource *upstream, const options *o, gmr_graph_arena_policy policy,
                     gmr_graph_arena_detection detection, const size_t *sizes, void **ptrs,
                     result *out) {
  size_t need = 0;
  for (size_t i = 0; i < o->allocs; ++i) need += (sizes[i % SIZE_COUNT] + 255) / 256 * 256;
  gmr_graph_arena_resource_config config = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
  config.initial_capacity_bytes = need;
  config.capture_policy = policy;
  config.detection = detection;
  gmr_graph_arena_resource *arena = NULL;
  if (!check(gmr_graph_arena_resource_create(upstream, &config, &arena), "create arena")) {
    return false;
  }
  gmr_resource *r = gmr_graph_arena_resource_as_resource(arena);
  gmr_stream stream = NULL;
  if (!check(gmr_cuda_stream_create(&stream), "gmr_cuda_stream_create")) return false;
  double *alloc_ns = calloc(o->rounds, sizeof *alloc_ns);
  double *free_ns = calloc(o->rounds, sizeof *free_ns);
  bool ok = alloc_ns != NULL && free_ns != NULL;
  bool explicit_session = detection == GMR_GRAPH_ARENA_DETECT_EXPLICIT;
  for (size_t round = 0; ok && round < o->rounds; ++round) {
    if (explicit_session) {
      ok = check(gmr_graph_arena_resource_begin_capture(arena, stream, NULL), "begin");
    }
    ok = ok && check(gmr_cuda_stream_begin_capture(stream), "gmr_cuda_stream_begin_capture");
    if (!ok) break;
    size_t made = 0;
    uint64_t t0 = replay_clock_now_ns();
    for (; made < o->allocs; ++made) {
      if (gmr_resource_allocate(r, sizes[made % SIZE_COUNT], 0, stream, &ptrs[made]) != GMR_OK)
        break;
    }
    uint64_t t1 = replay_clock_now_ns();
    if (made < o->allocs) {
      fprintf(stderr, "bench_arena: allocation %zu in the capture failed\n", made);
      ok = false;
    }
    for (size_t i = 0; i < made; ++i) {
      if (gmr_resource_deallocate(r, ptrs[i], sizes[i % SIZE_COUNT], 0, stream) != GMR_OK)
        ok = false;
    }
    uint64_t t2 = replay_clock_now_ns();
    gmr_graph graph = NULL;
    ok = check(gmr_cuda_stream_end_capture(stream, &graph), "capture (it must stay valid)") && ok;
    GMR_IGNORE_STATUS(gmr_cuda_graph_destroy(graph));
    gmr_graph_memory *memory = NULL;
    ok = check(gmr_graph_arena_resource_end_capture(arena, stream, &memory), "end session") && ok;
    ok =
        check(gmr_graph_arena_resource_release_graph_memory(arena, memory), "release memory") && ok;
    alloc_ns[round] = (double)(t1 - t0) / (double)o->allocs;
    free_ns[round] = (double)(t2 - t1) / (double)o->allocs;
  }
  gmr_graph_arena_resource_stats stats = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
  if (ok && gmr_graph_arena_resource_get_stats(arena, &stats) == GMR_OK &&
      (stats.upstream_call_during_capture_count != 0 || stats.chunk_count != 1)) {
    fprintf(stderr, "bench_arena: the arena called its upstream during capture\n");
    ok = false;
  }
  if (ok) {
    double min = alloc_ns[0];
    for (size_t i = 1; i < o->rounds; ++i) min = alloc_ns[i] < min ? alloc_ns[i] : min;
    out->alloc_min_ns = min;
    out->alloc_ns = replay_median_double(alloc_ns, o->rounds);
    out->free_ns = replay_median_double(free_ns, o->rounds);
  }
  free(alloc_ns);
  free(free_ns);
  ok = check(gmr_resource_destroy(r), "destroy arena") && ok;
  GMR_IGNORE_STATUS(gmr_cuda_stream_destroy(stream));
  return ok;
}

/* The floor: a resource whose allocate is one pointer bump, called through
 * the same dispatch (gmr_resource_allocate), so the arena's figure can be read against
 * what any resource costs on this machine. */
typedef struct bump_resource {
  gmr_resource base;
  uintptr_t next;
} bump_resource;

static gmr_status bump_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  (void)alignment;
  (void)stream;
  (void)failure;
  bump_resource *b = (bump_resource *)self;
  *out_ptr = (void *)b->next;
  b->next += (bytes + 255) & ~(size_t)255;
  return GMR_OK;
}

static gmr_status bump_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  (void)self;
  (void)ptr;
  (void)bytes;
  (void)alignment;
  (void)stream;
  return GMR_OK;
}

static gmr_status bump_destroy(gmr_resource *self) {
  (void)self;
  return GMR_OK;
}

static const gmr_resource_vtbl bump_vtbl = {
    GMR_RESOURCE_VTBL_VERSION, "bump", bump_allocate, bump_deallocate, bump_destroy,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL};

static double dispatch_floor_ns(const options *o, const size_t *sizes, void **ptrs) {
  double *ns = calloc(o->rounds, sizeof *ns);
  if (ns == NULL) return 0.0;
  for (size_t round = 0; round < o->rounds; ++round) {
    bump_resource b = {{&bump_vtbl}, 4096};
    uint64_t t0 = replay_clock_now_ns();
    for (size_t i = 0; i < o->allocs; ++i) {
      if (gmr_resource_allocate(&b.base, sizes[i % SIZE_COUNT], 0, NULL, &ptrs[i]) != GMR_OK) break;
    }
    ns[round] = (double)(replay_clock_now_ns() - t0) / (double)o->allocs;
  }
  double m = replay_median_double(ns, o->rounds);
  free(ns);
  return m;
}

/* A count of at least 1 for option `name`; says why not on stderr. */
static bool parse_count(const char *name, const char *s, size_t *out) {
  uint64_t v = 0;
  char why[96];
  if (!replay_parse_count(s, 1, UINT64_C(1) << 32, &v, why, sizeof why)) {
    fprintf(stderr, "bench_arena: %s '%s': %s\n", name, s, why);
    return false;
  }
  *out = (size_t)v;
  return true;
}

int main(int argc, char **argv) {
  options o = {100000, 21, false, 0.0};
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--sim") == 0) {
      o.sim = true;
    } else if (strcmp(argv[i], "--allocs") == 0 && i + 1 < argc) {
      if (!parse_count("--allocs", argv[++i], &o.allocs)) return 2;
    } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      if (!parse_count("--rounds", argv[++i], &o.rounds)) return 2;
    } else if (strcmp(argv[i], "--max-ns") == 0 && i + 1 < argc) {
      char why[96];
      if (!replay_parse_decimal(argv[i + 1], 0.0, 1e9, &o.max_ns, why, sizeof why)) {
        fprintf(stderr, "bench_arena: --max-ns '%s': %s\n", argv[i + 1], why);
        return 2;
      }
      i++;
    } else {
      fprintf(stderr,
              "usage: bench_arena [--allocs N] [--rounds R] [--sim] [--max-ns X]\n"
              "Host ns per allocation/free from a graph_arena_resource during a real CUDA graph "
              "capture.\n");
      return strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  int devices = 0;
  if (!o.sim && (gmr_device_get_count(&devices) != GMR_OK || devices == 0)) o.sim = true;
  if (o.sim && !check(gmr_cuda_sim_enable(NULL), "gmr_cuda_sim_enable")) return 1;
  printf("bench_arena: %s, %zu allocations per round (256 B .. 64 KiB), %zu rounds, median\n",
         o.sim ? "host simulation (no GPU)" : "real GPU", o.allocs, o.rounds);

  size_t sizes[SIZE_COUNT];
  uint32_t x = 12345;
  for (size_t i = 0; i < SIZE_COUNT; ++i) {
    x = x * 1664525u + 1013904223u;
    sizes[i] = (size_t)256 << (x >> 29) % 9; /* 256 B .. 64 KiB, powers of two */
    sizes[i] -= (x >> 8) % 200;              /* and not all exact */
  }
  gmr_cuda_resource *cuda = NULL;
  if (!check(gmr_cuda_resource_create(NULL, &cuda), "gmr_cuda_resource_create")) return 1;
  void **ptrs = calloc(o.allocs, sizeof *ptrs);
  if (ptrs == NULL) return 1;

  printf("  floor: a one-line bump resource through gmr_resource_allocate: %.1f ns/call\n",
         dispatch_floor_ns(&o, sizes, ptrs));
  bool ok = true, over = false;
  const gmr_graph_arena_policy policies[] = {GMR_GRAPH_ARENA_MONOTONE,
                                             GMR_GRAPH_ARENA_ORDERED_REUSE};
  const gmr_graph_arena_detection modes[] = {GMR_GRAPH_ARENA_DETECT_EXPLICIT,
                                             GMR_GRAPH_ARENA_DETECT_AUTO};
  for (size_t m = 0; m < 2; ++m) {
    for (size_t p = 0; p < 2; ++p) {
      result res = {0, 0, 0};
      if (!run_mode(gmr_cuda_resource_as_resource(cuda), &o, policies[p], modes[m], sizes, ptrs,
                    &res)) {
        ok = false;
        continue;
      }
      bool explicit_session = modes[m] == GMR_GRAPH_ARENA_DETECT_EXPLICIT;
      printf(
          "  %-9s session, %-13s  allocate %7.1f ns/call (min %.1f)   deallocate %7.1f "
          "ns/call\n",
          explicit_session ? "explicit" : "automatic",
          gmr_graph_arena_resource_policy_name(policies[p]), res.alloc_ns, res.alloc_min_ns,
          res.free_ns);
      if (explicit_session && o.max_ns > 0 && res.alloc_ns > o.max_ns) over = true;
    }
  }
  if (o.max_ns > 0) {
    printf("target: explicit-session allocation <= %.1f ns/call: %s\n", o.max_ns,
           over ? "MISSED" : "met");
  }
  free(ptrs);
  ok = check(gmr_resource_destroy(gmr_cuda_resource_as_resource(cuda)), "destroy cuda") && ok;
  if (o.sim) ok = check(gmr_cuda_sim_disable(), "gmr_cuda_sim_disable") && ok;
  return ok && !over ? 0 : 1;
}
