/*
 * tools/bench/holes.c: the `holes` workload (workloads.h) and the traces that
 * let RMM's pool and cudaMallocAsync run the same measurement
 * (../shared/bench's replayers): rmm#2507's benchmark, where a pool that
 * scans a linear free list pays for every free hole at each request.
 *
 * Setup: 2N+1 blocks of hole_bytes (512 B) on the default stream, then every
 * other one freed: N free holes, each between two live blocks, so no two
 * merge and none fits the request. Measured: request_bytes (1 KiB) allocate
 * + free pairs on the same stream, timed in batches of 64, mean and
 * percentiles per pair.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gmr/device.h"
#include "tools/bench/bench_stacks.h"
#include "tools/bench/workloads.h"
#include "tools/replay/measure.h"
#include "tools/replay/timing.h"

#define HOLE_BYTES 512u
#define REQUEST_BYTES 1024u
#define BATCH_PAIRS 64u

/* Give back every block still live (the untimed cleanup; a failed setup
 * too, so that the stack can be destroyed and the next row gets the whole
 * device). */
static void free_all(gmr_resource *r, void **ptrs, size_t blocks) {
  for (size_t i = 0; i < blocks; ++i) {
    if (ptrs[i] != NULL) GMR_IGNORE_STATUS(gmr_resource_deallocate(r, ptrs[i], HOLE_BYTES, 0, NULL));
    ptrs[i] = NULL;
  }
}

static void format_gib(size_t bytes, char *out, size_t out_bytes) {
  snprintf(out, out_bytes, "%.1f GiB", (double)bytes / (double)((size_t)1 << 30));
}

/* The setup ran out of device memory after `made` of `blocks` blocks: if
 * what the stack held per block, times `blocks`, is more than the device
 * has, the measurement does not apply to the stack as configured (a
 * fixed_block of 1 MiB blocks makes every 512 B hole a whole block): say so
 * in the row and return true. */
static bool too_big_for_device(gmr_resource *r, size_t made, size_t blocks, bench_row *row) {
  gmr_footprint fp;
  size_t free_bytes = 0, total_bytes = 0;
  if (made == 0 || gmr_resource_get_footprint(r, &fp) != GMR_OK || fp.held_bytes == 0 ||
      gmr_device_get_memory_info(&free_bytes, &total_bytes) != GMR_OK) {
    return false;
  }
  double per_block = (double)fp.held_bytes / (double)made;
  double need = per_block * (double)blocks;
  if (need <= (double)total_bytes) return false;
  char need_text[32], total_text[32], held_text[32];
  format_gib((size_t)need, need_text, sizeof need_text);
  format_gib(total_bytes, total_text, sizeof total_text);
  format_gib(fp.held_bytes, held_text, sizeof held_text);
  row->not_applicable = true;
  snprintf(row->error, sizeof row->error,
           "does not apply: each %u B request holds %.0f KiB here (%s after %zu blocks), so "
           "%zu blocks need %s, more than the device's %s",
           HOLE_BYTES, per_block / 1024.0, held_text, made, blocks, need_text, total_text);
  return true;
}

gmr_status bench_holes(const bench_options *o, const char *stack, size_t holes,
                       bench_row *row) {
  memset(row, 0, sizeof *row);
  snprintf(row->workload, sizeof row->workload, "holes(%zu)", holes);
  snprintf(row->stack, sizeof row->stack, "%s", stack);
  row->threads = 1;
  bench_stack s;
  char err[256];
  gmr_status st = bench_stack_create(stack, &s, err, sizeof err);
  if (st != GMR_OK) {
    snprintf(row->error, sizeof row->error, "%s", err);
    return st;
  }
  gmr_resource *r = bench_stack_top(&s);
  size_t blocks = 2 * holes + 1;
  void **ptrs = calloc(blocks, sizeof *ptrs);
  size_t batches = o->ops / (2u * BATCH_PAIRS) + 1u;
  uint64_t *batch_ns = malloc(batches * sizeof *batch_ns);
  if (ptrs == NULL || batch_ns == NULL) {
    free(ptrs);
    free(batch_ns);
    (void)bench_stack_destroy(&s);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr_failure failure = GMR_FAILURE_INIT;
  size_t made = 0;
  for (; made < blocks && st == GMR_OK; ++made) {
    st = gmr_resource_allocate_ex(r, HOLE_BYTES, 0, NULL, &ptrs[made], &failure);
  }
  if (st != GMR_OK) {
    made--; /* the failed one */
    if (st == GMR_ERR_OUT_OF_MEMORY && too_big_for_device(r, made, blocks, row)) {
      st = GMR_OK; /* a true verdict, not a failure of the run */
    } else {
      snprintf(row->error, sizeof row->error, "setting up %zu holes: %s after %zu blocks: %s",
               holes, gmr_status_name(st), made, failure.message);
    }
    free_all(r, ptrs, blocks);
    free(ptrs);
    free(batch_ns);
    gmr_status closed = bench_stack_destroy(&s);
    return st != GMR_OK ? st : closed;
  }
  for (size_t i = 1; i < blocks && st == GMR_OK; i += 2) {
    st = gmr_resource_deallocate(r, ptrs[i], HOLE_BYTES, 0, NULL);
    ptrs[i] = NULL;
  }
  if (st != GMR_OK) {
    snprintf(row->error, sizeof row->error, "setting up %zu holes: %s", holes,
             gmr_status_name(st));
  }
  /* One pair untimed: it may grow the stack. */
  void *p = NULL;
  if (st == GMR_OK && gmr_resource_allocate(r, REQUEST_BYTES, 0, NULL, &p) == GMR_OK) {
    GMR_IGNORE_STATUS(gmr_resource_deallocate(r, p, REQUEST_BYTES, 0, NULL));
  }
  size_t done = 0;
  uint64_t total = 0;
  uint64_t deadline = replay_clock_now_ns() + (uint64_t)(o->seconds * 1e9);
  for (; st == GMR_OK && done < batches; ++done) {
    uint64_t a = replay_clock_now_ns();
    if (a > deadline) break;
    for (unsigned i = 0; i < BATCH_PAIRS; ++i) {
      gmr_status rs = gmr_resource_allocate(r, REQUEST_BYTES, 0, NULL, &p);
      if (rs == GMR_OK) rs = gmr_resource_deallocate(r, p, REQUEST_BYTES, 0, NULL);
      if (rs != GMR_OK) row->failures++;
    }
    uint64_t b = replay_clock_now_ns();
    batch_ns[done] = replay_elapsed_ns(a, b, o->timer_overhead_ns);
    total += batch_ns[done];
  }
  replay_sort_u64(batch_ns, done);
  row->calls = done * BATCH_PAIRS * 2u;
  row->has_latency = done > 0;
  row->pair_p50_ns = (double)replay_percentile_u64(batch_ns, done, 50) / BATCH_PAIRS;
  row->pair_p99_ns = (double)replay_percentile_u64(batch_ns, done, 99) / BATCH_PAIRS;
  row->call_mean_ns = row->calls == 0 ? 0.0 : (double)total / (double)row->calls;
  row->calls_per_second = row->call_mean_ns > 0 ? 1e9 / row->call_mean_ns : 0.0;
  free_all(r, ptrs, blocks);
  free(ptrs);
  free(batch_ns);
  gmr_status closed = bench_stack_destroy(&s);
  if (st == GMR_OK && closed != GMR_OK) {
    snprintf(row->error, sizeof row->error, "destroying the stack: %s", gmr_status_name(closed));
    st = closed;
  }
  return st;
}

/* One row of the trace format (../shared/traces/README.md). */
static void row_out(gzFile f, const char *action, uint64_t addr, size_t bytes, uint64_t *t) {
  gzprintf(f, "%s,%llu,%zu,0,%llu\r\n", action, (unsigned long long)addr, bytes,
           (unsigned long long)(*t)++);
}

bool bench_holes_write_traces(const char *dir, size_t holes, size_t pairs, char *why,
                              size_t why_bytes) {
  for (int with_pairs = 0; with_pairs < 2; ++with_pairs) {
    char path[4096];
    snprintf(path, sizeof path, "%s/holes_%zu%s.csv.gz", dir, holes, with_pairs ? "_pairs" : "");
    gzFile f = gzopen(path, "wb");
    if (f == NULL) {
      snprintf(why, why_bytes, "cannot write %s", path);
      return false;
    }
    uint64_t t = 1;
    gzprintf(f, "action,addr,size,stream,time_us\r\n");
    /* Addresses are only keys that pair a free with its allocation. */
    for (size_t i = 0; i < 2 * holes + 1; ++i) row_out(f, "alloc", 4096 + i, HOLE_BYTES, &t);
    for (size_t i = 1; i < 2 * holes + 1; i += 2) {
      row_out(f, "free_requested", 4096 + i, HOLE_BYTES, &t);
    }
    uint64_t key = 4096 + 2 * holes + 1;
    for (size_t k = 0; with_pairs && k < pairs; ++k) {
      row_out(f, "alloc", key, REQUEST_BYTES, &t);
      row_out(f, "free_requested", key, REQUEST_BYTES, &t);
    }
    if (gzclose(f) != Z_OK) {
      snprintf(why, why_bytes, "writing %s failed", path);
      return false;
    }
  }
  return true;
}
