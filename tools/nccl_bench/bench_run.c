/*
 * tools/nccl_bench/bench_run.c: the local ranks of the NCCL benchmark, the
 * variants' buffers, the correctness check and the timing (nccl_bench.h).
 *
 * Data: rank r's send buffer holds pattern(i, r) (30-bit values, so the sum
 * of two never overflows int32); after the all-reduce every rank's receive
 * buffer must hold the sum over ranks at every index, which the check
 * computes again from the formula. The receive buffer is poisoned first,
 * and a pattern that differs per index catches a collective that read
 * another offset or another buffer (a wrong registration would).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/nccl/chunk_listener_adaptor.h"
#include "gmr/resource.h"
#include "gmr/nccl/symmetric_resource.h"
#include "tools/nccl_bench/nccl_bench.h"

const char *const bench_variant_names[VARIANT_COUNT] = {
    "cudaMalloc", "cudaMalloc+reg", "gmr pool", "gmr pool+reg", "vmm_pages+reg", "symmetric+reg"};

/* The stack of each gmr variant, for device %d. */
static const char *const variant_specs[VARIANT_COUNT] = {
    NULL,
    NULL,
    "pool > chunk_listener > cumem(device=%d, nccl_ready=true, peer_access=all)",
    "pool > chunk_listener > cumem(device=%d, nccl_ready=true, peer_access=all)",
    "pool > chunk_listener > vmm_pages(device=%d, nccl_ready=true, peer_access=all)",
    "symmetric(region_size=256MiB) > chunk_listener > cumem(device=%d, nccl_ready=true, "
    "peer_access=all)"};

static bool variant_registers(bench_variant v) {
  return v != VARIANT_CUDA_MALLOC && v != VARIANT_POOL;
}

typedef struct local_rank {
  gmr_nccl_comm *comm;
  int device;
  int rank;
  cudaStream_t stream;
  cudaEvent_t start[BENCH_MAX_ITERATIONS];
  cudaEvent_t stop[BENCH_MAX_ITERATIONS];
  int32_t *host_send; /* pattern(i, rank) for max_bytes */
  int32_t *host_recv;
  /* The variant being run: */
  gmr_stack *stack;
  gmr_resource *resource;
  gmr_nccl_registration *pool_reg;
  void *send;
  void *recv;
  gmr_nccl_registration *send_reg;
  gmr_nccl_registration *recv_reg;
} local_rank;

struct bench_ranks {
  bench_options options;
  gmr_nccl_library *lib;
  int rank_count; /* local */
  int global_rank_count;
  local_rank ranks[BENCH_MAX_RANKS];
};

static int32_t pattern(size_t i, int rank) {
  uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15u + (uint64_t)(rank + 1) * 0xbf58476d1ce4e5b9u;
  x ^= x >> 31;
  return (int32_t)(x & 0x3fffffff);
}

static bool cuda_ok(cudaError_t err, const char *what, char *error, size_t error_bytes) {
  if (err == cudaSuccess) return true;
  if (error[0] == '\0') snprintf(error, error_bytes, "%s: %s", what, cudaGetErrorName(err));
  return false;
}

static bool gmr_ok(gmr_status st, const char *what, const gmr_failure *f, char *error,
                   size_t error_bytes) {
  if (st == GMR_OK) return true;
  if (error[0] == '\0') {
    snprintf(error, error_bytes, "%s: %s %s", what, gmr_status_name(st),
             f != NULL ? f->message : "");
  }
  return false;
}

bench_ranks *bench_ranks_create(const bench_options *o, gmr_nccl_library *lib,
                                gmr_nccl_comm **comms, int rank_count) {
  bench_ranks *b = calloc(1, sizeof *b);
  if (b == NULL || rank_count > BENCH_MAX_RANKS || o->iterations > BENCH_MAX_ITERATIONS) {
    free(b);
    return NULL;
  }
  b->options = *o;
  b->lib = lib;
  b->rank_count = rank_count;
  b->global_rank_count = gmr_nccl_comm_get_rank_count(comms[0]);
  size_t count = o->max_bytes / sizeof(int32_t);
  char error[BENCH_ERROR_BYTES] = "";
  bool ok = true;
  for (int i = 0; i < rank_count && ok; ++i) {
    local_rank *r = &b->ranks[i];
    r->comm = comms[i];
    r->device = gmr_nccl_comm_get_device(comms[i]);
    r->rank = gmr_nccl_comm_get_rank(comms[i]);
    ok = cuda_ok(cudaSetDevice(r->device), "cudaSetDevice", error, sizeof error) &&
         cuda_ok(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking), "stream", error,
                 sizeof error);
    for (int k = 0; ok && k < o->iterations; ++k) {
      ok = cuda_ok(cudaEventCreate(&r->start[k]), "event", error, sizeof error) &&
           cuda_ok(cudaEventCreate(&r->stop[k]), "event", error, sizeof error);
    }
    r->host_send = ok ? malloc(o->max_bytes) : NULL;
    r->host_recv = ok ? malloc(o->max_bytes) : NULL;
    if (r->host_send == NULL || r->host_recv == NULL) {
      ok = false;
      snprintf(error, sizeof error, "host memory for %zu-byte patterns", o->max_bytes);
    }
    for (size_t e = 0; ok && e < count; ++e) r->host_send[e] = pattern(e, r->rank);
  }
  if (!ok) {
    fprintf(stderr, "nccl_bench: setting up the ranks failed: %s\n", error);
    bench_ranks_destroy(b);
    return NULL;
  }
  return b;
}

void bench_ranks_destroy(bench_ranks *b) {
  if (b == NULL) return;
  for (int i = 0; i < b->rank_count; ++i) {
    local_rank *r = &b->ranks[i];
    (void)cudaSetDevice(r->device);
    for (int k = 0; k < b->options.iterations; ++k) {
      if (r->start[k] != NULL) (void)cudaEventDestroy(r->start[k]);
      if (r->stop[k] != NULL) (void)cudaEventDestroy(r->stop[k]);
    }
    if (r->stream != NULL) (void)cudaStreamDestroy(r->stream);
    free(r->host_send);
    free(r->host_recv);
  }
  free(b);
}

/* ---- one variant ----------------------------------------------------------- */

/* Build each rank's stack (gmr variants) and register the pool. */
static bool variant_begin(bench_ranks *b, bench_variant v, char *error, size_t error_bytes) {
  for (int i = 0; i < b->rank_count; ++i) {
    local_rank *r = &b->ranks[i];
    if (variant_specs[v] == NULL) continue;
    char spec[256];
    snprintf(spec, sizeof spec, variant_specs[v], r->device);
    gmr_spec_error e;
    if (gmr_stack_create(spec, &r->stack, &e) != GMR_OK) {
      snprintf(error, error_bytes, "the stack of device %d: %s", r->device, e.message);
      return false;
    }
    r->resource = gmr_stack_as_resource(r->stack);
    if (variant_registers(v)) {
      gmr_failure f = GMR_FAILURE_INIT;
      if (!gmr_ok(gmr_nccl_register_pool(r->comm, r->resource, &r->pool_reg, &f),
                  "gmr_nccl_register_pool", &f, error, error_bytes)) {
        return false;
      }
    }
  }
  return true;
}

static void variant_end(bench_ranks *b, char *error, size_t error_bytes) {
  for (int i = 0; i < b->rank_count; ++i) {
    local_rank *r = &b->ranks[i];
    gmr_failure f = GMR_FAILURE_INIT;
    (void)cudaSetDevice(r->device); /* the pool's events and streams are this device's */
    if (r->pool_reg != NULL) {
      (void)gmr_ok(gmr_nccl_deregister(r->pool_reg, &f), "gmr_nccl_deregister", &f, error,
                   error_bytes);
      r->pool_reg = NULL;
    }
    if (r->stack != NULL) {
      (void)gmr_ok(gmr_stack_destroy(r->stack), "gmr_stack_destroy", NULL, error, error_bytes);
      r->stack = NULL;
      r->resource = NULL;
    }
  }
}

static bool buffers_get(bench_ranks *b, bench_variant v, size_t bytes, char *error,
                        size_t error_bytes) {
  for (int i = 0; i < b->rank_count; ++i) {
    local_rank *r = &b->ranks[i];
    gmr_failure f = GMR_FAILURE_INIT;
    if (!cuda_ok(cudaSetDevice(r->device), "cudaSetDevice", error, error_bytes)) return false;
    if (r->resource == NULL) {
      if (!cuda_ok(cudaMalloc(&r->send, bytes), "cudaMalloc", error, error_bytes) ||
          !cuda_ok(cudaMalloc(&r->recv, bytes), "cudaMalloc", error, error_bytes)) {
        return false;
      }
    } else if (!gmr_ok(gmr_resource_allocate_ex(r->resource, bytes, 0, r->stream, &r->send, &f),
                       "gmr_resource_allocate", &f, error, error_bytes) ||
               !gmr_ok(gmr_resource_allocate_ex(r->resource, bytes, 0, r->stream, &r->recv, &f),
                       "gmr_resource_allocate", &f, error, error_bytes)) {
      return false;
    }
    if (v == VARIANT_CUDA_MALLOC_REG &&
        (!gmr_ok(gmr_nccl_register_buffer(r->comm, r->send, bytes, &r->send_reg, &f),
                 "gmr_nccl_register_buffer", &f, error, error_bytes) ||
         !gmr_ok(gmr_nccl_register_buffer(r->comm, r->recv, bytes, &r->recv_reg, &f),
                 "gmr_nccl_register_buffer", &f, error, error_bytes))) {
      return false;
    }
  }
  return true;
}

/* Free the buffers; a pool gives its chunks back (deregistered first). */
static void buffers_put(bench_ranks *b, size_t bytes, char *error, size_t error_bytes) {
  for (int i = 0; i < b->rank_count; ++i) {
    local_rank *r = &b->ranks[i];
    gmr_failure f = GMR_FAILURE_INIT;
    (void)cudaSetDevice(r->device);
    (void)cudaStreamSynchronize(r->stream);
    gmr_nccl_registration **regs[2] = {&r->send_reg, &r->recv_reg};
    for (int k = 0; k < 2; ++k) {
      if (*regs[k] == NULL) continue;
      (void)gmr_ok(gmr_nccl_deregister(*regs[k], &f), "gmr_nccl_deregister", &f, error,
                   error_bytes);
      *regs[k] = NULL;
    }
    void **bufs[2] = {&r->send, &r->recv};
    for (int k = 0; k < 2; ++k) {
      if (*bufs[k] == NULL) continue;
      if (r->resource == NULL) {
        (void)cudaFree(*bufs[k]);
      } else {
        (void)gmr_ok(gmr_resource_deallocate(r->resource, *bufs[k], bytes, 0, r->stream),
                     "gmr_resource_deallocate", NULL, error, error_bytes);
      }
      *bufs[k] = NULL;
    }
    if (r->resource != NULL) {
      (void)cudaStreamSynchronize(r->stream);
      (void)gmr_ok(gmr_resource_trim(r->resource, NULL), "trim", NULL, error, error_bytes);
    }
  }
}

/* One all-reduce on every local rank (one group), events around it when
 * `k` >= 0. */
static bool all_reduce(bench_ranks *b, size_t count, int k, char *error, size_t error_bytes) {
  gmr_failure f = GMR_FAILURE_INIT;
  for (int i = 0; k >= 0 && i < b->rank_count; ++i) {
    if (!cuda_ok(cudaEventRecord(b->ranks[i].start[k], b->ranks[i].stream), "cudaEventRecord",
                 error, error_bytes)) {
      return false;
    }
  }
  if (!gmr_ok(gmr_nccl_group_start(b->lib, &f), "ncclGroupStart", &f, error, error_bytes)) {
    return false;
  }
  bool ok = true;
  for (int i = 0; i < b->rank_count && ok; ++i) {
    local_rank *r = &b->ranks[i];
    ok = gmr_ok(gmr_nccl_all_reduce(r->comm, r->send, r->recv, count, GMR_NCCL_INT32, GMR_NCCL_SUM,
                                    (gmr_stream)r->stream, &f),
                "ncclAllReduce", &f, error, error_bytes);
  }
  ok = gmr_ok(gmr_nccl_group_end(b->lib, &f), "ncclGroupEnd", &f, error, error_bytes) && ok;
  for (int i = 0; ok && k >= 0 && i < b->rank_count; ++i) {
    ok = cuda_ok(cudaEventRecord(b->ranks[i].stop[k], b->ranks[i].stream), "cudaEventRecord",
                 error, error_bytes);
  }
  return ok;
}

static bool synchronize(bench_ranks *b, char *error, size_t error_bytes) {
  for (int i = 0; i < b->rank_count; ++i) {
    if (!cuda_ok(cudaStreamSynchronize(b->ranks[i].stream), "cudaStreamSynchronize", error,
                 error_bytes)) {
      return false;
    }
  }
  return true;
}

/* Upload the patterns, poison the results, run once, compare every element. */
static bool check(bench_ranks *b, size_t bytes, char *error, size_t error_bytes) {
  size_t count = bytes / sizeof(int32_t);
  for (int i = 0; i < b->rank_count; ++i) {
    local_rank *r = &b->ranks[i];
    if (!cuda_ok(cudaMemcpyAsync(r->send, r->host_send, bytes, cudaMemcpyHostToDevice, r->stream),
                 "upload", error, error_bytes) ||
        !cuda_ok(cudaMemsetAsync(r->recv, 0xff, bytes, r->stream), "poison", error, error_bytes)) {
      return false;
    }
  }
  if (!synchronize(b, error, error_bytes) || !all_reduce(b, count, -1, error, error_bytes) ||
      !synchronize(b, error, error_bytes)) {
    return false;
  }
  for (int i = 0; i < b->rank_count; ++i) {
    local_rank *r = &b->ranks[i];
    if (!cuda_ok(cudaMemcpy(r->host_recv, r->recv, bytes, cudaMemcpyDeviceToHost), "download",
                 error, error_bytes)) {
      return false;
    }
    for (size_t e = 0; e < count; ++e) {
      /* Two's complement wrap-around, as the GPU adds (past two ranks). */
      uint32_t want = 0;
      for (int g = 0; g < b->global_rank_count; ++g) want += (uint32_t)pattern(e, g);
      if ((uint32_t)r->host_recv[e] != want) {
        snprintf(error, error_bytes, "rank %d element %zu of %zu: %u, want %u", r->rank, e, count,
                 (unsigned)r->host_recv[e], (unsigned)want);
        return false;
      }
    }
  }
  return true;
}

static int compare_double(const void *x, const void *y) {
  double a = *(const double *)x, c = *(const double *)y;
  return a < c ? -1 : a > c;
}

/* Warm-up, then `iterations` timed all-reduces; median of the slowest rank. */
static bool time_it(bench_ranks *b, size_t bytes, double *median_us, char *error,
                    size_t error_bytes) {
  size_t count = bytes / sizeof(int32_t);
  for (int w = 0; w < b->options.warmup; ++w) {
    if (!all_reduce(b, count, -1, error, error_bytes)) return false;
  }
  int n = b->options.iterations;
  for (int k = 0; k < n; ++k) {
    if (!all_reduce(b, count, k, error, error_bytes)) return false;
  }
  if (!synchronize(b, error, error_bytes)) return false;
  double *us = calloc((size_t)n, sizeof *us);
  if (us == NULL) return false;
  bool ok = true;
  for (int k = 0; k < n && ok; ++k) {
    for (int i = 0; i < b->rank_count && ok; ++i) {
      float ms = 0;
      ok = cuda_ok(cudaEventElapsedTime(&ms, b->ranks[i].start[k], b->ranks[i].stop[k]),
                   "cudaEventElapsedTime", error, error_bytes);
      if (ok && ms * 1000.0 > us[k]) us[k] = ms * 1000.0;
    }
  }
  if (ok) {
    qsort(us, (size_t)n, sizeof *us, compare_double);
    *median_us = n % 2 ? us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2.0;
  }
  free(us);
  return ok;
}

/* Registered variants: is every buffer inside one registered segment? */
static int coverage(bench_ranks *b, bench_variant v, size_t bytes) {
  if (!variant_registers(v)) return -1;
  for (int i = 0; i < b->rank_count; ++i) {
    local_rank *r = &b->ranks[i];
    gmr_nccl_registration *s = v == VARIANT_CUDA_MALLOC_REG ? r->send_reg : r->pool_reg;
    gmr_nccl_registration *d = v == VARIANT_CUDA_MALLOC_REG ? r->recv_reg : r->pool_reg;
    if (!gmr_nccl_registration_covers(s, r->send, bytes) ||
        !gmr_nccl_registration_covers(d, r->recv, bytes)) {
      return 0;
    }
  }
  return 1;
}

/* Symmetric: the same (region, offset) for each buffer on every local rank. */
static int offsets_equal(bench_ranks *b, bench_variant v) {
  if (v != VARIANT_SYMMETRIC_REG || b->rank_count < 2) return -1;
  size_t want[2][2] = {{0, 0}, {0, 0}};
  for (int i = 0; i < b->rank_count; ++i) {
    gmr_symmetric_resource *s = gmr_symmetric_resource_from_resource(b->ranks[i].resource);
    void *bufs[2] = {b->ranks[i].send, b->ranks[i].recv};
    for (int k = 0; k < 2; ++k) {
      size_t region = 0, offset = 0;
      if (gmr_symmetric_resource_get_offset(s, bufs[k], &region, &offset) != GMR_OK) return 0;
      if (i == 0) {
        want[k][0] = region;
        want[k][1] = offset;
      } else if (want[k][0] != region || want[k][1] != offset) {
        return 0;
      }
    }
  }
  return 1;
}

static void run_variant(bench_ranks *b, bench_variant v, bench_table *t) {
  char error[BENCH_ERROR_BYTES] = "";
  bool ready = variant_begin(b, v, error, sizeof error);
  for (size_t s = 0; s < t->size_count; ++s) {
    bench_cell *c = &t->cells[v][s];
    memset(c, 0, sizeof *c);
    c->ran = true;
    c->covered = -1;
    c->offsets_equal = -1;
    size_t bytes = t->sizes[s];
    if (ready && buffers_get(b, v, bytes, c->error, sizeof c->error)) {
      c->covered = coverage(b, v, bytes);
      c->offsets_equal = offsets_equal(b, v);
      c->correct = check(b, bytes, c->error, sizeof c->error);
      if (c->correct && !time_it(b, bytes, &c->median_us, c->error, sizeof c->error)) {
        c->correct = false;
      }
    } else if (!ready) {
      snprintf(c->error, sizeof c->error, "%s", error);
    }
    buffers_put(b, bytes, c->error, sizeof c->error);
  }
  error[0] = '\0';
  variant_end(b, error, sizeof error);
  if (error[0] != '\0') fprintf(stderr, "nccl_bench: %s: %s\n", bench_variant_names[v], error);
}

bool bench_run(bench_ranks *b, bench_table *t) {
  for (int v = 0; v < VARIANT_COUNT; ++v) {
    if ((b->options.variant_mask >> v & 1u) == 0) continue;
    run_variant(b, (bench_variant)v, t);
    fprintf(stderr, "nccl_bench: %s done\n", bench_variant_names[v]);
  }
  return true;
}
