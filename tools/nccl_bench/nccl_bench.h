/*
 * tools/nccl_bench/nccl_bench.h: the parts of the NCCL all-reduce benchmark
 * (nccl_bench.c: options, process mode, tables; bench_run.c: the ranks,
 * the variants, the check and the timing).
 */
#ifndef GMR_TOOLS_NCCL_BENCH_NCCL_BENCH_H_
#define GMR_TOOLS_NCCL_BENCH_NCCL_BENCH_H_

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/nccl/nccl.h"
#include "gmr/stack.h"

#define BENCH_MAX_RANKS 8
#define BENCH_MAX_SIZES 24
#define BENCH_MAX_ITERATIONS 1000
/* Room for a call's name, a status name, a gmr failure message and a spec
 * with its error: nothing is cut. */
#define BENCH_ERROR_BYTES 640

/* Where the buffers come from, and whether they are registered with NCCL. */
typedef enum bench_variant {
  VARIANT_CUDA_MALLOC,     /* cudaMalloc, not registered */
  VARIANT_CUDA_MALLOC_REG, /* cudaMalloc, each buffer registered (gmr_nccl_register_buffer) */
  VARIANT_POOL,            /* pool > chunk_listener > cumem, not registered */
  VARIANT_POOL_REG,        /* the same, registered (gmr_nccl_register_pool) */
  VARIANT_VMM_POOL_REG,    /* pool > chunk_listener > vmm_pages, registered per page */
  VARIANT_SYMMETRIC_REG,   /* symmetric > chunk_listener > cumem, registered */
  VARIANT_COUNT
} bench_variant;

extern const char *const bench_variant_names[VARIANT_COUNT];

typedef struct bench_options {
  const char *library; /* libnccl.so.2 path; NULL: the loader's search */
  size_t min_bytes;
  size_t max_bytes;
  int iterations;
  int warmup;
  bool processes;        /* one process per GPU (ncclCommInitRank), else ncclCommInitAll */
  unsigned variant_mask; /* bit v: run variant v */
  int device_count;      /* GPUs to use (2) */
} bench_options;

/* What one variant measured at one size, on the ranks of this process. */
typedef struct bench_cell {
  bool ran;
  bool correct;        /* every element of every local rank's result was the sum */
  double median_us;    /* of the slowest local rank per iteration */
  int covered;         /* 1: every buffer inside one registered segment; 0: not; -1: n/a */
  int offsets_equal;   /* symmetric: 1 same (region, offset) on every local rank; -1: n/a */
  char error[BENCH_ERROR_BYTES]; /* the first failure, "" if none */
} bench_cell;

typedef struct bench_table {
  size_t sizes[BENCH_MAX_SIZES];
  size_t size_count;
  bench_cell cells[VARIANT_COUNT][BENCH_MAX_SIZES];
} bench_table;

/* One process's ranks: `rank_count` local ranks (device_count with
 * ncclCommInitAll, 1 per process), global ranks first_rank... */
typedef struct bench_ranks bench_ranks;

/* Set up the local ranks: streams, events, host patterns, communicators
 * (already made: comms[i] for local rank i). Returns NULL and prints why
 * on failure. */
bench_ranks *bench_ranks_create(const bench_options *o, gmr_nccl_library *lib,
                                gmr_nccl_comm **comms, int rank_count);
void bench_ranks_destroy(bench_ranks *ranks);

/* Run every selected variant at every size into `table`. Returns false when
 * a variant could not even be set up (the cells say what failed). */
bool bench_run(bench_ranks *ranks, bench_table *table);

#endif /* GMR_TOOLS_NCCL_BENCH_NCCL_BENCH_H_ */
