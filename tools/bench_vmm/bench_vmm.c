/*
 * tools/bench_vmm/bench_vmm.c: what the VMM pool's page operations cost on
 * the device, per page, measured through vmm_pages (gmr/vmm_pages_resource.h,
 * one physical allocation per page).
 *
 * Each round makes a fresh pool and times, with one clock read before and one
 * after each call:
 *   map      one allocation of N pages from an empty pool: N x (cuMemCreate +
 *            cuMemMap) and one cuMemSetAccess;
 *   hit      allocate + free of one page that a free region serves (phase 1:
 *            no driver call), per pair;
 *   unmap    trim of those N free pages: N x (cuMemUnmap + cuMemRelease);
 *   defrag   a request of N pages when 2N single-page regions alternate live
 *            and free: the N free pages are mapped a second time side by side
 *            (N x cuMemMap, one cuMemSetAccess per harvested region); the old
 *            addresses are unmapped in the same call when their events are
 *            already done (an idle GPU), else by the next allocation;
 *   after    the next allocation of one page (it unmaps any zombies left);
 *   sleep / wake   the 2N live pages given back and mapped again, without
 *            saving contents, then sleep with pinned host copies and wake
 *            restoring them.
 * The pool's statistics confirm each step took the intended path (a step that
 * did not fails the run). Figures are medians over rounds; divide-by-N
 * figures are per page.
 *
 *   bazel run -c opt //tools/bench_vmm -- [--pages N] [--rounds R] [--sim]
 * Exit status: 0 ok; 1 a call failed or a step took another path; 2
 * command-line error.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/vmm_pages_resource.h"

enum { STEP_MAP, STEP_HIT, STEP_UNMAP, STEP_DEFRAG, STEP_ZOMBIES, STEP_SLEEP, STEP_WAKE,
       STEP_SLEEP_SAVE, STEP_WAKE_RESTORE, STEP_COUNT };

static const char *const step_names[STEP_COUNT] = {
    "map (create+map+access)", "hit (alloc, free + event record)", "unmap (trim: unmap+release)",
    "defrag (remap N, unmap old)", "after (next 1-page allocation)", "sleep (no copies)",
    "wake (fresh pages)", "sleep (pinned copies)", "wake (restoring copies)"};

/* Pages each step handles, in units of N (0: a figure per call instead). */
static const unsigned pages_of[STEP_COUNT] = {1, 0, 1, 1, 0, 2, 2, 2, 2};

typedef struct options {
  size_t pages;
  size_t rounds;
  bool sim;
} options;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, size_t n) {
  qsort(v, n, sizeof *v, compare_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static bool ok(gmr_status st, const char *what, const gmr_failure *f) {
  if (st == GMR_OK) return true;
  fprintf(stderr, "bench_vmm: %s failed: %s%s%s\n", what, gmr_status_name(st),
          f != NULL ? ": " : "", f != NULL ? f->message : "");
  return false;
}

static bool expect(bool cond, const char *what) {
  if (!cond) fprintf(stderr, "bench_vmm: %s\n", what);
  return cond;
}

static gmr_vmm_pool_resource_stats stats_of(gmr_vmm_pool_resource *pool) {
  gmr_vmm_pool_resource_stats s = GMR_VMM_POOL_RESOURCE_STATS_INIT;
  if (gmr_vmm_pool_resource_get_stats(pool, &s) != GMR_OK) memset(&s, 0, sizeof s);
  return s;
}

/* One round of every step; ns[step] receives the time of the step. */
static bool run_round(const options *o, double *ns) {
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  gmr_vmm_pool_resource *pool = NULL;
  gmr_failure f = GMR_FAILURE_INIT;
  if (!ok(gmr_vmm_pages_resource_create(&c, &pool, &f), "create", &f)) return false;
  gmr_resource *r = gmr_vmm_pool_resource_as_resource(pool);
  size_t page = stats_of(pool).page_bytes;
  size_t n = o->pages;
  void **ptrs = calloc(2 * n, sizeof *ptrs);
  bool good = ptrs != NULL;
  void *p = NULL;
  uint64_t t0 = 0;

  /* map, hit, unmap */
  t0 = now_ns();
  good = good && ok(gmr_resource_allocate_ex(r, n * page, 0, NULL, &p, &f), "allocate N pages", &f);
  ns[STEP_MAP] = (double)(now_ns() - t0);
  good = good && ok(gmr_resource_deallocate(r, p, n * page, 0, NULL), "free N pages", NULL);
  t0 = now_ns();
  void *q = NULL;
  good = good && ok(gmr_resource_allocate_ex(r, page, 0, NULL, &q, &f), "allocate 1 page", &f);
  good = good && ok(gmr_resource_deallocate(r, q, page, 0, NULL), "free 1 page", NULL);
  ns[STEP_HIT] = (double)(now_ns() - t0);
  good = good && expect(stats_of(pool).page_create_count == n, "the hit mapped new pages");
  good = good && ok(gmr_device_synchronize(), "synchronize", NULL);
  size_t released = 0;
  t0 = now_ns();
  good = good && ok(gmr_resource_trim(r, &released), "trim", NULL);
  ns[STEP_UNMAP] = (double)(now_ns() - t0);
  good = good && expect(released == n * page, "trim released another amount");

  /* defrag, zombies: 2N single pages, every other one freed, then N pages. */
  for (size_t i = 0; good && i < 2 * n; ++i) {
    good = ok(gmr_resource_allocate_ex(r, page, 0, NULL, &ptrs[i], &f), "allocate a page", &f);
  }
  for (size_t i = 0; good && i < 2 * n; i += 2) {
    good = ok(gmr_resource_deallocate(r, ptrs[i], page, 0, NULL), "free a page", NULL);
  }
  good = good && ok(gmr_device_synchronize(), "synchronize", NULL);
  gmr_vmm_pool_resource_stats before = stats_of(pool);
  t0 = now_ns();
  good = good &&
         ok(gmr_resource_allocate_ex(r, n * page, 0, NULL, &p, &f), "defragmenting allocate", &f);
  ns[STEP_DEFRAG] = (double)(now_ns() - t0);
  gmr_vmm_pool_resource_stats after = stats_of(pool);
  good = good && expect(after.remapped_page_count - before.remapped_page_count == n &&
                            after.page_create_count == before.page_create_count,
                        "the request was not served by remapping N free pages");
  t0 = now_ns();
  good =
      good && ok(gmr_resource_allocate_ex(r, page, 0, NULL, &q, &f), "allocate after defrag", &f);
  ns[STEP_ZOMBIES] = (double)(now_ns() - t0);
  good = good && expect(stats_of(pool).zombie_count == 0, "zombies were left");
  good = good && ok(gmr_resource_deallocate(r, q, page, 0, NULL), "free", NULL);

  /* sleep / wake: the N remapped pages and the N single live pages. */
  gmr_vmm_pool_sleep_options so = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  t0 = now_ns();
  good = good && ok(gmr_vmm_pool_resource_sleep(pool, &so, &f), "sleep", &f);
  ns[STEP_SLEEP] = (double)(now_ns() - t0);
  t0 = now_ns();
  good = good && ok(gmr_vmm_pool_resource_wake(pool, NULL, &f), "wake", &f);
  ns[STEP_WAKE] = (double)(now_ns() - t0);
  so.save_all = true;
  t0 = now_ns();
  good = good && ok(gmr_vmm_pool_resource_sleep(pool, &so, &f), "sleep with copies", &f);
  ns[STEP_SLEEP_SAVE] = (double)(now_ns() - t0);
  t0 = now_ns();
  good = good && ok(gmr_vmm_pool_resource_wake(pool, NULL, &f), "wake with copies", &f);
  ns[STEP_WAKE_RESTORE] = (double)(now_ns() - t0);

  if (good) GMR_IGNORE_STATUS(gmr_resource_deallocate(r, p, n * page, 0, NULL));
  for (size_t i = 1; good && i < 2 * n; i += 2)
    GMR_IGNORE_STATUS(gmr_resource_deallocate(r, ptrs[i], page, 0, NULL));
  free(ptrs);
  good = ok(gmr_resource_destroy(r), "destroy", NULL) && good;
  return good;
}

static int usage(const char *why) {
  fprintf(stderr, "bench_vmm: %s\nusage: bench_vmm [--pages N] [--rounds R] [--sim]\n", why);
  return 2;
}

static bool parse_count(const char *text, size_t *out) {
  char *end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text || *end != '\0' || v == 0 || v > 1u << 20) return false;
  *out = (size_t)v;
  return true;
}

int main(int argc, char **argv) {
  options o = {256, 5, false};
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--sim") == 0) {
      o.sim = true;
    } else if (strcmp(argv[i], "--pages") == 0 && i + 1 < argc) {
      if (!parse_count(argv[++i], &o.pages)) return usage("--pages needs a count 1..1048576");
    } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      if (!parse_count(argv[++i], &o.rounds)) return usage("--rounds needs a count");
    } else {
      return usage("unknown argument");
    }
  }
  int devices = 0;
  if (!o.sim && (gmr_device_get_count(&devices) != GMR_OK || devices == 0)) {
    printf("bench_vmm: no GPU; using the host simulation (figures are not GPU costs)\n");
    o.sim = true;
  }
  if (o.sim) {
    gmr_cuda_sim_config sc = GMR_CUDA_SIM_CONFIG_DEFAULT;
    if (gmr_cuda_sim_enable(&sc) != GMR_OK) return 1;
  }
  double *samples = calloc(STEP_COUNT * o.rounds, sizeof *samples);
  if (samples == NULL) return 1;
  bool good = true;
  for (size_t round = 0; good && round < o.rounds; ++round) {
    double ns[STEP_COUNT] = {0};
    good = run_round(&o, ns);
    for (int s = 0; s < STEP_COUNT; ++s) samples[s * o.rounds + round] = ns[s];
  }
  if (good) {
    printf("bench_vmm: %s, %zu pages per step, median of %zu rounds\n",
           o.sim ? "host simulation" : "GPU", o.pages, o.rounds);
    printf("%-34s %14s %14s\n", "step", "ns per call", "ns per page");
    for (int s = 0; s < STEP_COUNT; ++s) {
      double m = median(&samples[s * o.rounds], o.rounds);
      if (pages_of[s] > 0) {
        printf("%-34s %14.0f %14.1f\n", step_names[s], m, m / (double)(pages_of[s] * o.pages));
      } else {
        printf("%-34s %14.0f %14s\n", step_names[s], s == STEP_HIT ? m / 2.0 : m, "-");
      }
    }
  }
  free(samples);
  if (o.sim && gmr_cuda_sim_disable() != GMR_OK) good = false;
  return good ? 0 : 1;
}
