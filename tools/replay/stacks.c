/*
 * tools/replay/stacks.c: see stacks.h.
 */
#include "tools/replay/stacks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/cuda_resource.h"
#include "gmr/host_resource.h"

#define STACK_NAME_BYTES 64

typedef enum stack_kind { STACK_CUDA, STACK_HOST } stack_kind;

typedef struct stack_entry {
  const char *name;
  stack_kind kind;
  gmr_cuda_kind cuda_kind; /* STACK_CUDA only */
} stack_entry;

/* One table: the names accepted, the names listed in errors and the help
 * text all come from it, so they cannot disagree. */
static const stack_entry known_stacks[] = {
    {"cuda_device", STACK_CUDA, GMR_CUDA_KIND_DEVICE},
    {"cuda_async", STACK_CUDA, GMR_CUDA_KIND_ASYNC},
    {"cuda_managed", STACK_CUDA, GMR_CUDA_KIND_MANAGED},
    {"host", STACK_HOST, GMR_CUDA_KIND_DEVICE},
};
#define KNOWN_STACK_COUNT (sizeof known_stacks / sizeof known_stacks[0])

struct replay_stack {
  char name[STACK_NAME_BYTES];
  gmr_resource *top; /* the only resource for now */
};

size_t replay_stack_known_count(void) { return KNOWN_STACK_COUNT; }

const char *replay_stack_known_name(size_t index) {
  return index < KNOWN_STACK_COUNT ? known_stacks[index].name : NULL;
}

static const stack_entry *find_stack(const char *spec) {
  if (spec == NULL) return NULL;
  for (size_t i = 0; i < KNOWN_STACK_COUNT; ++i) {
    if (strcmp(spec, known_stacks[i].name) == 0) return &known_stacks[i];
  }
  return NULL;
}

gmr_status replay_stack_check(const char *spec, char *err, size_t err_bytes) {
  if (find_stack(spec) != NULL) return GMR_OK;
  if (err != NULL && err_bytes > 0) {
    int n = snprintf(err, err_bytes, "unknown stack '%s'; known stacks:",
                     spec == NULL ? "(null)" : spec);
    for (size_t i = 0; i < KNOWN_STACK_COUNT && n >= 0 && (size_t)n < err_bytes; ++i) {
      int m = snprintf(err + n, err_bytes - (size_t)n, "%s %s", i == 0 ? "" : ",",
                       known_stacks[i].name);
      n = m < 0 ? m : n + m;
    }
  }
  return GMR_ERR_INVALID_ARGUMENT;
}

gmr_status replay_stack_create(const char *spec, replay_stack **out, char *err,
                               size_t err_bytes) {
  if (out != NULL) *out = NULL;
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr_status st = replay_stack_check(spec, err, err_bytes);
  if (st != GMR_OK) return st;
  const stack_entry *entry = find_stack(spec);

  replay_stack *stack = calloc(1, sizeof *stack);
  if (stack == NULL) {
    if (err_bytes > 0) snprintf(err, err_bytes, "%s: out of host memory", spec);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  snprintf(stack->name, sizeof stack->name, "%s", entry->name);
  const char *what = NULL;
  if (entry->kind == STACK_CUDA) {
    gmr_cuda_resource_config config = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    config.kind = entry->cuda_kind;
    gmr_cuda_resource *cuda = NULL;
    st = gmr_cuda_resource_create(&config, &cuda);
    stack->top = gmr_cuda_resource_as_resource(cuda);
    what = "gmr_cuda_resource_create";
  } else {
    gmr_host_resource *host = NULL;
    st = gmr_host_resource_create(&host);
    stack->top = gmr_host_resource_as_resource(host);
    what = "gmr_host_resource_create";
  }
  if (st != GMR_OK) {
    if (err != NULL && err_bytes > 0) {
      snprintf(err, err_bytes, "stack '%s': %s failed: %s (%s)", spec, what,
               gmr_status_name(st), gmr_status_string(st));
    }
    free(stack);
    return st;
  }
  *out = stack;
  return GMR_OK;
}

gmr_resource *replay_stack_top(replay_stack *stack) { return stack == NULL ? NULL : stack->top; }

const char *replay_stack_name(const replay_stack *stack) {
  return stack == NULL ? "" : stack->name;
}

gmr_status replay_stack_destroy(replay_stack *stack) {
  if (stack == NULL) return GMR_OK;
  gmr_status st = gmr_resource_destroy(stack->top);
  if (st != GMR_OK) return st;
  free(stack);
  return GMR_OK;
}
