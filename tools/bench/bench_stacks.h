/*
 * tools/bench/bench_stacks.h: the stacks the benchmark compares.
 *
 * A stack is a spec (`pool(arenas=1) > cuda(kind=async)`, see gmr/stack.h),
 * one of replay's aliases (cuda_device, cuda_async, cuda_managed, host, pool,
 * fixed_block, graph_pool, vmm), or one of the bench's own aliases:
 *   pool_device         pool > cuda(kind=device)            (RMM's setup)
 *   pool_one_arena      pool(arenas=1) > cuda(kind=async)
 *   fixed_block_device  fixed_block > cuda(kind=device)
 *   pool_host           pool(stream_ordered=false) > host
 * The pools sit on cudaMallocAsync by default (the `pool` alias): growing and
 * giving chunks back are then stream-ordered calls of about a microsecond,
 * where cudaMalloc costs tens of microseconds and cudaFree synchronises the
 * device. An unknown name is an error listing the known ones; nothing falls
 * back.
 *
 * Thread-safe: create/destroy no; the stacks are as thread-safe as their
 * resources.
 */
#ifndef GMR_TOOLS_BENCH_BENCH_STACKS_H_
#define GMR_TOOLS_BENCH_BENCH_STACKS_H_

#include <stddef.h>

#include "gmr/resource.h"
#include "gmr/status.h"
#include "tools/replay/stacks.h"

typedef struct bench_stack {
  replay_stack *stack; /* the layers, built from the spec */
} bench_stack;

/** Number of the bench's own aliases, and alias `i` (static string, NULL past the end). */
size_t bench_stack_known_count(void);
const char *bench_stack_known_name(size_t i);

/**
 * GMR_OK if `name` is a bench alias, a replay alias or a valid spec, else
 * GMR_ERR_INVALID_ARGUMENT with `err` (err_bytes) saying what is wrong and
 * listing the aliases. Makes no CUDA call.
 */
gmr_status bench_stack_check(const char *name, char *err, size_t err_bytes);

/** The spec `name` stands for: a bench alias's spec, else `name` itself (a
 * replay alias or a spec). Static or borrowed string. */
const char *bench_stack_resolve(const char *name);

/**
 * Build the stack `name` into *out (caller storage). On failure nothing is
 * left allocated and `err` says why.
 */
gmr_status bench_stack_create(const char *name, bench_stack *out, char *err, size_t err_bytes);

/** The top resource, and the leaf (the bottom layer). */
gmr_resource *bench_stack_top(bench_stack *stack);
gmr_resource *bench_stack_leaf(bench_stack *stack);

/** Destroy the layers top-down; returns the first failure (GMR_ERR_BUSY: live
 * allocations, then the stack stays as it is). */
gmr_status bench_stack_destroy(bench_stack *stack);

#endif /* GMR_TOOLS_BENCH_BENCH_STACKS_H_ */
