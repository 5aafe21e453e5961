/*
 * tools/bench/bench_stacks.h: the stacks the benchmark compares, by name.
 *
 * Until the stack-spec parser lands, the stacks are built here in code. The
 * pools sit on cudaMallocAsync by default: growing and giving chunks back are
 * then stream-ordered calls of about a microsecond, where cudaMalloc costs tens
 * of microseconds and cudaFree synchronises the device.
 *   pool                pool_resource (defaults) > cuda_resource(kind=async)
 *   pool_device         pool_resource (defaults) > cuda_resource(kind=device)  (RMM's setup)
 *   pool_one_arena      pool_resource (arena_count=1) > cuda_resource(kind=async)
 *   fixed_block         fixed_block_resource (1 MiB x 128) > cuda_resource(kind=async)
 *   fixed_block_device  fixed_block_resource (1 MiB x 128) > cuda_resource(kind=device)
 *   cuda_async          cuda_resource(kind=async)   (cudaMallocFromPoolAsync)
 *   cuda_device         cuda_resource(kind=device)  (cudaMalloc / cudaFree)
 *   host                host_resource
 *   pool_host           pool_resource (stream_ordered=false) > host_resource
 * An unknown name is an error listing the known ones; nothing falls back.
 *
 * Thread-safe: create/destroy no; the stacks are as thread-safe as their
 * resources (all of the above: yes).
 */
#ifndef GMR_TOOLS_BENCH_BENCH_STACKS_H_
#define GMR_TOOLS_BENCH_BENCH_STACKS_H_

#include <stddef.h>

#include "gmr/resource.h"
#include "gmr/status.h"

#define BENCH_STACK_MAX_DEPTH 4

typedef struct bench_stack {
  char name[32];
  gmr_resource *layers[BENCH_STACK_MAX_DEPTH]; /* bottom first */
  size_t depth;
} bench_stack;

/** Number of known stack names, and name `i` (static string, NULL past the end). */
size_t bench_stack_known_count(void);
const char *bench_stack_known_name(size_t i);

/**
 * GMR_OK if `name` is known, else GMR_ERR_INVALID_ARGUMENT with `err`
 * (err_bytes) listing the known names. Makes no CUDA call.
 */
gmr_status bench_stack_check(const char *name, char *err, size_t err_bytes);

/**
 * Build the stack `name` into *out (caller storage). On failure nothing is
 * left allocated and `err` says why.
 */
gmr_status bench_stack_create(const char *name, bench_stack *out, char *err, size_t err_bytes);

/** The top resource, and the leaf (the bottom layer). */
gmr_resource *bench_stack_top(bench_stack *stack);
gmr_resource *bench_stack_leaf(bench_stack *stack);

/** Destroy the layers top-down; returns the first failure (GMR_ERR_BUSY: live allocations). */
gmr_status bench_stack_destroy(bench_stack *stack);

#endif /* GMR_TOOLS_BENCH_BENCH_STACKS_H_ */
