/*
 * tools/bench/bench_stacks.c: see bench_stacks.h.
 */
#include "tools/bench/bench_stacks.h"

#include <stdio.h>
#include <string.h>

#include "gmr/cuda_resource.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/host_resource.h"
#include "gmr/pool_resource.h"

typedef enum leaf_kind { LEAF_CUDA_DEVICE, LEAF_CUDA_ASYNC, LEAF_HOST } leaf_kind;
typedef enum top_kind { TOP_NONE, TOP_POOL, TOP_POOL_ONE_ARENA, TOP_POOL_UNORDERED, TOP_FIXED } top_kind;

typedef struct stack_entry {
  const char *name;
  top_kind top;
  leaf_kind leaf;
} stack_entry;

static const stack_entry known[] = {
    {"pool", TOP_POOL, LEAF_CUDA_ASYNC},
    {"pool_device", TOP_POOL, LEAF_CUDA_DEVICE},
    {"pool_one_arena", TOP_POOL_ONE_ARENA, LEAF_CUDA_ASYNC},
    {"fixed_block", TOP_FIXED, LEAF_CUDA_ASYNC},
    {"fixed_block_device", TOP_FIXED, LEAF_CUDA_DEVICE},
    {"cuda_async", TOP_NONE, LEAF_CUDA_ASYNC},
    {"cuda_device", TOP_NONE, LEAF_CUDA_DEVICE},
    {"host", TOP_NONE, LEAF_HOST},
    {"pool_host", TOP_POOL_UNORDERED, LEAF_HOST},
};
#define KNOWN_COUNT (sizeof known / sizeof known[0])

size_t bench_stack_known_count(void) { return KNOWN_COUNT; }

const char *bench_stack_known_name(size_t i) { return i < KNOWN_COUNT ? known[i].name : NULL; }

static const stack_entry *find(const char *name) {
  for (size_t i = 0; name != NULL && i < KNOWN_COUNT; ++i) {
    if (strcmp(name, known[i].name) == 0) return &known[i];
  }
  return NULL;
}

gmr_status bench_stack_check(const char *name, char *err, size_t err_bytes) {
  if (find(name) != NULL) return GMR_OK;
  if (err != NULL && err_bytes > 0) {
    size_t n = (size_t)snprintf(err, err_bytes, "unknown stack '%s'; known stacks:",
                                name == NULL ? "(null)" : name);
    for (size_t i = 0; i < KNOWN_COUNT && n < err_bytes; ++i) {
      n += (size_t)snprintf(err + n, err_bytes - n, "%s %s", i == 0 ? "" : ",", known[i].name);
    }
  }
  return GMR_ERR_INVALID_ARGUMENT;
}

static gmr_status make_leaf(leaf_kind kind, gmr_resource **out) {
  if (kind == LEAF_HOST) {
    gmr_host_resource *h = NULL;
    gmr_status st = gmr_host_resource_create(&h);
    *out = gmr_host_resource_as_resource(h);
    return st;
  }
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = kind == LEAF_CUDA_ASYNC ? GMR_CUDA_KIND_ASYNC : GMR_CUDA_KIND_DEVICE;
  gmr_cuda_resource *r = NULL;
  gmr_status st = gmr_cuda_resource_create(&c, &r);
  *out = gmr_cuda_resource_as_resource(r);
  return st;
}

static gmr_status make_top(top_kind kind, gmr_resource *upstream, gmr_resource **out) {
  if (kind == TOP_FIXED) {
    gmr_fixed_block_resource *f = NULL;
    gmr_status st = gmr_fixed_block_resource_create(upstream, NULL, &f);
    *out = gmr_fixed_block_resource_as_resource(f);
    return st;
  }
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  if (kind == TOP_POOL_ONE_ARENA) c.arena_count = 1;
  if (kind == TOP_POOL_UNORDERED) c.stream_ordered = false;
  gmr_pool_resource *p = NULL;
  gmr_status st = gmr_pool_resource_create(upstream, &c, &p);
  *out = gmr_pool_resource_as_resource(p);
  return st;
}

gmr_status bench_stack_create(const char *name, bench_stack *out, char *err, size_t err_bytes) {
  memset(out, 0, sizeof *out);
  gmr_status st = bench_stack_check(name, err, err_bytes);
  if (st != GMR_OK) return st;
  const stack_entry *e = find(name);
  snprintf(out->name, sizeof out->name, "%s", e->name);
  gmr_resource *leaf = NULL;
  st = make_leaf(e->leaf, &leaf);
  if (st != GMR_OK) {
    snprintf(err, err_bytes, "stack '%s': creating its leaf resource failed: %s", name,
             gmr_status_name(st));
    return st;
  }
  out->layers[out->depth++] = leaf;
  if (e->top != TOP_NONE) {
    gmr_resource *top = NULL;
    st = make_top(e->top, leaf, &top);
    if (st != GMR_OK) {
      snprintf(err, err_bytes, "stack '%s': creating its top resource failed: %s", name,
               gmr_status_name(st));
      (void)bench_stack_destroy(out);
      return st;
    }
    out->layers[out->depth++] = top;
  }
  return GMR_OK;
}

gmr_resource *bench_stack_top(bench_stack *stack) {
  return stack->depth == 0 ? NULL : stack->layers[stack->depth - 1];
}

gmr_resource *bench_stack_leaf(bench_stack *stack) {
  return stack->depth == 0 ? NULL : stack->layers[0];
}

gmr_status bench_stack_destroy(bench_stack *stack) {
  gmr_status first = GMR_OK;
  while (stack->depth > 0) {
    gmr_status st = gmr_resource_destroy(stack->layers[stack->depth - 1]);
    if (st != GMR_OK) {
      if (first == GMR_OK) first = st;
      if (st == GMR_ERR_BUSY) return first; /* keep the rest: they are still in use */
    }
    stack->depth--;
  }
  return first;
}
