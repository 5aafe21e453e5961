/*
 * tools/bench_vmm/bench_handles.c: what one driver VMM call costs as a
 * function of the physical allocation's size, through gmr's CUDA layer
 * (core/cuda_vmm.h, the calls the VMM resources make).
 *
 * For each size S (default 2 MiB .. 2 GiB, powers of four) and each round,
 * with one clock read before and one after each call:
 *   create   cuMemCreate of S bytes;
 *   map      cuMemMap of it into a reserved range;
 *   access   cuMemSetAccess over it;
 *   unmap    cuMemUnmap;
 *   release  cuMemRelease;
 *   remap    unmap + map at another address + access (how vmm
 *            moves free memory);
 *   batch    K = min(64, 2 GiB / S) handles of S mapped side by side and one
 *            cuMemSetAccess over all of them, per handle (a growth of
 *            vmm when handles are limited to S).
 * Medians over rounds, in microseconds per call; the last column is the
 * cost per 2 MiB of create+map+access. The question it answers: how much
 * cheaper per byte are larger handles (fewer driver calls per growth)?
 *
 *   bazel run -c opt //tools/bench_vmm:bench_handles -- [--rounds R] [--max-mib M] [--sim]
 * Exit status: 0 ok; 1 a call failed; 2 command-line error.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/sim/cuda_sim.h"

enum { CREATE, MAP, ACCESS, UNMAP, RELEASE, REMAP, BATCH, COLUMN_COUNT };
static const char *const column_names[COLUMN_COUNT] = {"create",  "map",   "access", "unmap",
                                                       "release", "remap", "batch"};

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

static bool check(CUresult cu, const char *call, size_t bytes) {
  if (cu == CUDA_SUCCESS) return true;
  fprintf(stderr, "bench_handles: %s of %zu bytes failed: %d\n", call, bytes, (int)cu);
  return false;
}

typedef struct ctx {
  const gmr__cuda_vmm_ops *vmm;
  gmr__vmm_prop prop;
  int device;
  CUdeviceptr va; /* a reservation of 2 x (the largest batch) */
} ctx;

/* One round at size `bytes`: fills us[column]. */
static bool round_at(const ctx *c, size_t bytes, double *us) {
  CUmemGenericAllocationHandle h = 0;
  uint64_t t = now_ns();
  if (!check(c->vmm->create(&h, bytes, &c->prop), "cuMemCreate", bytes)) return false;
  us[CREATE] = (double)(now_ns() - t) / 1e3;
  t = now_ns();
  if (!check(c->vmm->map(c->va, bytes, h), "cuMemMap", bytes)) return false;
  us[MAP] = (double)(now_ns() - t) / 1e3;
  t = now_ns();
  if (!check(c->vmm->set_access(c->va, bytes, &c->device, 1), "cuMemSetAccess", bytes)) {
    return false;
  }
  us[ACCESS] = (double)(now_ns() - t) / 1e3;
  /* remap: to the second half of the reservation and back to the start. */
  CUdeviceptr other = c->va + bytes;
  t = now_ns();
  bool fine = check(c->vmm->unmap(c->va, bytes), "cuMemUnmap", bytes) &&
              check(c->vmm->map(other, bytes, h), "cuMemMap", bytes) &&
              check(c->vmm->set_access(other, bytes, &c->device, 1), "cuMemSetAccess", bytes);
  us[REMAP] = (double)(now_ns() - t) / 1e3;
  if (!fine) return false;
  t = now_ns();
  if (!check(c->vmm->unmap(other, bytes), "cuMemUnmap", bytes)) return false;
  us[UNMAP] = (double)(now_ns() - t) / 1e3;
  t = now_ns();
  if (!check(c->vmm->release(h), "cuMemRelease", bytes)) return false;
  us[RELEASE] = (double)(now_ns() - t) / 1e3;
  return true;
}

/* K handles of `bytes` side by side, one access call: microseconds per handle
 * for create + map (+ the shared access). */
static bool batch_at(const ctx *c, size_t bytes, size_t k, double *us) {
  CUmemGenericAllocationHandle *h = calloc(k, sizeof *h);
  if (h == NULL) return false;
  bool fine = true;
  uint64_t t = now_ns();
  size_t made = 0;
  for (; made < k && fine; ++made) {
    fine = check(c->vmm->create(&h[made], bytes, &c->prop), "cuMemCreate", bytes) &&
           check(c->vmm->map(c->va + made * bytes, bytes, h[made]), "cuMemMap", bytes);
  }
  fine = fine &&
         check(c->vmm->set_access(c->va, k * bytes, &c->device, 1), "cuMemSetAccess", k * bytes);
  *us = (double)(now_ns() - t) / 1e3 / (double)k;
  for (size_t i = 0; i < made; ++i) {
    if (h[i] == 0) continue;
    (void)c->vmm->unmap(c->va + i * bytes, bytes);
    (void)c->vmm->release(h[i]);
  }
  free(h);
  return fine;
}

static int usage(const char *why) {
  fprintf(stderr, "bench_handles: %s\nusage: bench_handles [--rounds R] [--max-mib M] [--sim]\n",
          why);
  return 2;
}

int main(int argc, char **argv) {
  size_t rounds = 5, max_mib = 2048;
  bool sim = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--sim") == 0) {
      sim = true;
    } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = (size_t)strtoul(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--max-mib") == 0 && i + 1 < argc) {
      max_mib = (size_t)strtoul(argv[++i], NULL, 10);
    } else {
      return usage("unknown argument");
    }
  }
  if (rounds == 0 || rounds > 1000 || max_mib < 2 || max_mib > 65536) {
    return usage("--rounds is 1..1000, --max-mib 2..65536");
  }
  if (sim && gmr_cuda_sim_enable(NULL) != GMR_OK) return usage("the simulation did not start");
  ctx c;
  memset(&c, 0, sizeof c);
  c.vmm = gmr__cuda_vmm(gmr__cuda());
  if (gmr__cuda()->get_device(&c.device) != cudaSuccess || c.vmm->init(c.device) != CUDA_SUCCESS) {
    fprintf(stderr, "bench_handles: no device\n");
    return 1;
  }
  c.prop.device = c.device;
  size_t gran = 0;
  if (!check(c.vmm->get_granularity(&gran, &c.prop, false), "cuMemGetAllocationGranularity", 0)) {
    return 1;
  }
  size_t max_bytes = max_mib << 20;
  size_t batch_bytes = (size_t)2 << 30;
  if (batch_bytes > max_bytes) batch_bytes = max_bytes;
  size_t span = 2 * (max_bytes > batch_bytes ? max_bytes : batch_bytes);
  if (!check(c.vmm->address_reserve(&c.va, span, gran), "cuMemAddressReserve", span)) return 1;
  printf(
      "bench_handles: %s, granularity %zu bytes, %zu rounds; microseconds per call "
      "(median)\n",
      sim ? "host simulation" : "device", gran, rounds);
  printf("%10s", "size MiB");
  for (int k = 0; k < COLUMN_COUNT; ++k) printf(" %9s", column_names[k]);
  printf(" %12s\n", "us per 2MiB");
  int rc = 0;
  double *v = calloc(rounds * COLUMN_COUNT, sizeof *v);
  for (size_t bytes = gran; bytes <= max_bytes && rc == 0 && v != NULL; bytes *= 4) {
    for (size_t r = 0; r < rounds && rc == 0; ++r) {
      double us[COLUMN_COUNT] = {0};
      size_t k = batch_bytes / bytes < 64 ? batch_bytes / bytes : 64;
      if (!round_at(&c, bytes, us) || !batch_at(&c, bytes, k > 0 ? k : 1, &us[BATCH])) rc = 1;
      for (int col = 0; col < COLUMN_COUNT; ++col) v[col * rounds + r] = us[col];
    }
    if (rc != 0) break;
    double med[COLUMN_COUNT];
    for (int col = 0; col < COLUMN_COUNT; ++col) med[col] = median(&v[col * rounds], rounds);
    printf("%10zu", bytes >> 20);
    for (int col = 0; col < COLUMN_COUNT; ++col) printf(" %9.1f", med[col]);
    printf(" %12.2f\n",
           (med[CREATE] + med[MAP] + med[ACCESS]) / (double)(bytes / ((size_t)2 << 20)));
  }
  free(v);
  (void)c.vmm->address_free(c.va, span);
  return rc;
}
