/*
 * tools/bench/bench_stacks.c: see bench_stacks.h. The stacks are built by
 * tools/replay's stack builder (specs and replay's aliases); this file only
 * adds the bench's own aliases.
 */
#include "tools/bench/bench_stacks.h"

#include <stdio.h>
#include <string.h>

typedef struct alias {
  const char *name;
  const char *spec;
} alias;

static const alias aliases[] = {
    {"pool_device", "pool > cuda(kind=device)"},
    {"pool_one_arena", "pool(arenas=1) > cuda(kind=async)"},
    {"fixed_block_device", "fixed_block > cuda(kind=device)"},
    {"pool_host", "pool(stream_ordered=false) > host"},
};
#define ALIAS_COUNT (sizeof aliases / sizeof aliases[0])

size_t bench_stack_known_count(void) { return ALIAS_COUNT; }

const char *bench_stack_known_name(size_t i) { return i < ALIAS_COUNT ? aliases[i].name : NULL; }

const char *bench_stack_resolve(const char *name) {
  for (size_t i = 0; name != NULL && i < ALIAS_COUNT; ++i) {
    if (strcmp(name, aliases[i].name) == 0) return aliases[i].spec;
  }
  return name;
}

static void append_aliases(char *err, size_t err_bytes) {
  size_t n = strlen(err);
  for (size_t i = 0; i < ALIAS_COUNT && n < err_bytes; ++i) {
    n += (size_t)snprintf(err + n, err_bytes - n, ", %s", aliases[i].name);
  }
}

gmr_status bench_stack_check(const char *name, char *err, size_t err_bytes) {
  gmr_status st = replay_stack_check(bench_stack_resolve(name), err, err_bytes);
  if (st != GMR_OK && err != NULL && err_bytes > 0) append_aliases(err, err_bytes);
  return st;
}

gmr_status bench_stack_create(const char *name, bench_stack *out, char *err, size_t err_bytes) {
  out->stack = NULL;
  gmr_status st = replay_stack_create(bench_stack_resolve(name), &out->stack, err, err_bytes);
  if (st != GMR_OK && err != NULL && err_bytes > 0) append_aliases(err, err_bytes);
  return st;
}

gmr_resource *bench_stack_top(bench_stack *stack) {
  return stack->stack == NULL ? NULL : replay_stack_top(stack->stack);
}

gmr_resource *bench_stack_leaf(bench_stack *stack) {
  gmr_resource *r = bench_stack_top(stack);
  for (gmr_resource *below = gmr_resource_get_upstream(r); below != NULL;
       below = gmr_resource_get_upstream(r)) {
    r = below;
  }
  return r;
}

gmr_status bench_stack_destroy(bench_stack *stack) {
  if (stack->stack == NULL) return GMR_OK;
  gmr_status st = replay_stack_destroy(stack->stack);
  if (st == GMR_OK) stack->stack = NULL;
  return st;
}
