/*
 * tools/replay/stacks.c: see stacks.h. A thin layer over gmr_stack: aliases
 * resolved to specs, errors worded for the command line, a line of adaptor
 * counters for the report.
 */
#include "tools/replay/stacks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/limiting_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/tracking_adaptor.h"

typedef struct alias {
  const char *name;
  const char *spec;
} alias;

/* One table: the names accepted, the names listed in errors and the help
 * text all come from it, so they cannot disagree. */
static const alias aliases[] = {
    {"cuda_device", "cuda(kind=device)"},
    {"cuda_async", "cuda(kind=async)"},
    {"cuda_managed", "cuda(kind=managed)"},
    {"host", "host"},
    {"pool", "pool > cuda(kind=async)"},
    {"fixed_block", "fixed_block > cuda(kind=async)"},
    /* The arena grows during capture through the pool's allocate_capturing,
     * which grows through cudaMalloc in relaxed capture mode: cuda(kind=async)
     * cannot (its memory would be graph memory nodes). Replay declares its
     * captures, so detect=hinted never asks CUDA outside them, and each
     * declared capture first takes the pool's free blocks (uncaptured=forward
     * shares the pool: docs/graph_pool.md). */
    {"graph_pool",
     "tracking(per=stream) > limiting > graph_arena(uncaptured=forward, policy=ordered_reuse, "
     "detect=hinted) > pool > cuda(kind=device)"},
    /* The recommended VMM allocator (the spec component `vmm`): 256-byte
     * placement over shared pages, free memory moved instead of holding more. */
    {"vmm", "vmm"},
};
#define ALIAS_COUNT (sizeof aliases / sizeof aliases[0])

struct replay_stack {
  char *name; /* as given */
  gmr_stack *stack;
};

size_t replay_stack_known_count(void) { return ALIAS_COUNT; }

const char *replay_stack_known_name(size_t index) {
  return index < ALIAS_COUNT ? aliases[index].name : NULL;
}

const char *replay_stack_known_spec(size_t index) {
  return index < ALIAS_COUNT ? aliases[index].spec : NULL;
}

/* The spec an alias stands for (spaces around it allowed), or `spec` itself. */
static const char *resolve(const char *spec) {
  const char *begin = spec;
  while (*begin == ' ' || *begin == '\t') begin++;
  size_t len = strlen(begin);
  while (len > 0 && (begin[len - 1] == ' ' || begin[len - 1] == '\t')) len--;
  for (size_t i = 0; i < ALIAS_COUNT; ++i) {
    if (strlen(aliases[i].name) == len && strncmp(begin, aliases[i].name, len) == 0) {
      return aliases[i].spec;
    }
  }
  return spec;
}

static void spec_error(char *err, size_t err_bytes, const char *spec, const char *message) {
  if (err == NULL || err_bytes == 0) return;
  int n = snprintf(err, err_bytes, "stack '%s': %s; aliases:", spec, message);
  for (size_t i = 0; i < ALIAS_COUNT && n >= 0 && (size_t)n < err_bytes; ++i) {
    int m = snprintf(err + n, err_bytes - (size_t)n, "%s %s", i == 0 ? "" : ",", aliases[i].name);
    n = m < 0 ? m : n + m;
  }
}

gmr_status replay_stack_check(const char *spec, char *err, size_t err_bytes) {
  if (spec == NULL) {
    spec_error(err, err_bytes, "(null)", "no spec given");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_spec_error e;
  gmr_status st = gmr_stack_check(resolve(spec), &e);
  if (st != GMR_OK) spec_error(err, err_bytes, spec, e.message);
  return st;
}

gmr_status replay_stack_create(const char *spec, replay_stack **out, char *err,
                               size_t err_bytes) {
  if (out != NULL) *out = NULL;
  if (out == NULL || spec == NULL) {
    spec_error(err, err_bytes, spec == NULL ? "(null)" : spec, "no spec or no place for the stack");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  replay_stack *stack = calloc(1, sizeof *stack);
  size_t n = strlen(spec) + 1;
  if (stack != NULL) stack->name = malloc(n);
  if (stack == NULL || stack->name == NULL) {
    free(stack);
    if (err != NULL && err_bytes > 0) snprintf(err, err_bytes, "stack '%s': out of host memory", spec);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  memcpy(stack->name, spec, n);
  gmr_spec_error e;
  gmr_status st = gmr_stack_create(resolve(spec), &stack->stack, &e);
  if (st != GMR_OK) {
    if (st == GMR_ERR_INVALID_ARGUMENT) {
      spec_error(err, err_bytes, spec, e.message);
    } else if (err != NULL && err_bytes > 0) {
      snprintf(err, err_bytes, "stack '%s': %s", spec, e.message);
    }
    free(stack->name);
    free(stack);
    return st;
  }
  *out = stack;
  return GMR_OK;
}

gmr_resource *replay_stack_top(replay_stack *stack) {
  return stack == NULL ? NULL : gmr_stack_as_resource(stack->stack);
}

const char *replay_stack_name(const replay_stack *stack) {
  return stack == NULL ? "" : stack->name;
}

gmr_stack *replay_stack_get(replay_stack *stack) { return stack == NULL ? NULL : stack->stack; }

/* Append printf-style text to out (which holds *used bytes so far). */
static void append(char *out, size_t out_bytes, size_t *used, const char *fmt, ...) {
  if (*used >= out_bytes) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out + *used, out_bytes - *used, fmt, ap);
  va_end(ap);
  if (n > 0) *used += (size_t)n;
  if (*used >= out_bytes) *used = out_bytes - 1;
}

static void describe_oom(char *out, size_t out_bytes, size_t *used, const gmr_oom_counts *c) {
  append(out, out_bytes, used,
         "oom: %llu failures, %llu retries, %llu recovered, %llu gave up, %llu trims (%llu "
         "bytes), %llu waits (%llu timed out)",
         (unsigned long long)c->failure_count, (unsigned long long)c->retry_count,
         (unsigned long long)c->recovered_count, (unsigned long long)c->gave_up_count,
         (unsigned long long)c->trim_count, (unsigned long long)c->trimmed_bytes,
         (unsigned long long)c->wait_count, (unsigned long long)c->wait_timeout_count);
}

void replay_stack_describe(replay_stack *stack, char *out, size_t out_bytes) {
  if (out == NULL || out_bytes == 0) return;
  out[0] = '\0';
  size_t used = 0;
  gmr_stack *s = replay_stack_get(stack);
  for (size_t i = 0; i < gmr_stack_get_depth(s); ++i) {
    gmr_resource *layer = gmr_stack_get_layer(s, i);
    const char *sep = used == 0 ? "" : "; ";
    gmr_limiting_adaptor *lim = gmr_limiting_adaptor_from_resource(layer);
    gmr_tracking_adaptor *trk = gmr_tracking_adaptor_from_resource(layer);
    gmr_oom_adaptor *oom = gmr_oom_adaptor_from_resource(layer);
    if (lim != NULL) {
      gmr_limiting_adaptor_stats st = GMR_LIMITING_ADAPTOR_STATS_INIT;
      if (gmr_limiting_adaptor_get_stats(lim, &st) != GMR_OK) continue;
      append(out, out_bytes, &used, "%slimiting: limit ", sep);
      if (st.limit_bytes == GMR_LIMIT_NONE) {
        append(out, out_bytes, &used, "none");
      } else {
        append(out, out_bytes, &used, "%zu", st.limit_bytes);
      }
      append(out, out_bytes, &used,
             ", peak used %zu, %llu refused, %llu raises, %llu overages (max %zu bytes over), ",
             st.peak_used_bytes, (unsigned long long)st.refused_count,
             (unsigned long long)st.raise_count, (unsigned long long)st.overage_count,
             st.max_overage_bytes);
      describe_oom(out, out_bytes, &used, &st.oom);
    } else if (trk != NULL) {
      gmr_tracking_adaptor_stats st = GMR_TRACKING_ADAPTOR_STATS_INIT;
      if (gmr_tracking_adaptor_get_stats(trk, &st) != GMR_OK) continue;
      append(out, out_bytes, &used,
             "%stracking: peak %lld bytes in %lld allocations, %llu owners, %llu bad frees", sep,
             (long long)st.bytes.peak, (long long)st.allocations.peak,
             (unsigned long long)st.owner_count,
             (unsigned long long)(st.unknown_pointer_count + st.double_free_count +
                                  st.size_mismatch_count + st.stream_mismatch_count));
    } else if (oom != NULL) {
      gmr_oom_counts c = GMR_OOM_COUNTS_INIT;
      if (gmr_oom_adaptor_get_counts(oom, &c) != GMR_OK) continue;
      append(out, out_bytes, &used, "%s", sep);
      describe_oom(out, out_bytes, &used, &c);
    }
  }
}

gmr_status replay_stack_destroy(replay_stack *stack) {
  if (stack == NULL) return GMR_OK;
  gmr_status st = gmr_stack_destroy(stack->stack);
  if (st != GMR_OK) return st;
  free(stack->name);
  free(stack);
  return GMR_OK;
}
