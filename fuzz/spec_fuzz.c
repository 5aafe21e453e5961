/*
 * fuzz/spec_fuzz.c: libFuzzer target for the spec language and stack
 * construction (gmr_stack_check, gmr_stack_create, stack/), on the host
 * simulation of CUDA, followed by a few allocations through the built stack
 * and its destruction.
 *
 * The input is the spec text (cut at its first NUL byte). What is checked
 * besides the sanitizers (ASan, UBSan):
 *   - a refused spec has a message "spec:..." that is not a bare status: a
 *     layer that refuses its own options after the spec accepted them means
 *     the spec's checks and the layer's disagree;
 *   - gmr_stack_check and gmr_stack_create agree (check refuses => create
 *     refuses with the same message; check accepts => create does not say
 *     INVALID_ARGUMENT), except where only create can know (device count,
 *     `%` sizes);
 *   - allocations through the stack are aligned and freed back with GMR_OK,
 *     the stack is destroyed with GMR_OK, and no simulated CUDA object (an
 *     allocation, stream, event, pool) is left alive or named after its death.
 *
 * Kept out of reach: plugins (plugin:PATH:SYMBOL would dlopen any library on
 * the machine), log files other than /dev/null (the fuzzer would write files
 * anywhere), and initial reservations over host memory (real memory, tens of
 * GiB at a time); such specs are only parsed and checked.
 *
 * Run it with fuzz/run.sh spec SECONDS.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmr/sim/cuda_sim.h"
#include "gmr/resource.h"
#include "gmr/stack.h"
#include "stack/spec.h"

/* The same sanitizer options by hand as under fuzz/run.sh: a huge request
 * gets NULL from malloc (the code under test must cope) instead of ending the
 * run. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=1024";
}

/* Stop with a report libFuzzer turns into a crash file. */
static void fail(const char *what, const char *spec, const char *detail) {
  fprintf(stderr, "spec_fuzz: %s\n  spec: %s\n  detail: %s\n", what, spec, detail);
  abort();
}

typedef struct safety {
  bool parsed;        /* the parser accepts it (else create fails in the parser) */
  bool plugin;        /* a value loads a plugin: neither check nor create */
  bool writes_file;   /* a log layer with a file other than /dev/null: check only */
  bool may_block;     /* a `wait` OOM policy: no allocations (a wait may last forever) */
  bool device_bound;  /* a `%` size or a device ordinal: check and create may differ */
  bool host_reserve;  /* an initial reservation of host memory: check only (see below) */
} safety;

static safety classify(const char *text) {
  safety s = {false, false, false, false, false, false};
  gmr__spec spec;
  if (gmr__spec_parse(text, "spec", &spec, NULL) != GMR_OK) return s;
  s.parsed = true;
  for (size_t i = 0; i < spec.layer_count; ++i) {
    const gmr__spec_layer *layer = &spec.layers[i];
    for (size_t j = 0; j < layer->option_count; ++j) {
      const gmr__spec_option *o = &layer->options[j];
      if (strncmp(o->value, "plugin:", 7) == 0) s.plugin = true;
      if (strcmp(o->value, "wait") == 0) s.may_block = true;
      if (strchr(o->value, '%') != NULL || strcmp(o->name, "device") == 0) s.device_bound = true;
      if (strcmp(layer->name, "log") == 0 && strcmp(o->name, "file") == 0 &&
          strcmp(o->value, "/dev/null") != 0) {
        s.writes_file = true;
      }
      if (strncmp(o->name, "initial", 7) == 0) s.host_reserve = true;
    }
  }
  /* Host memory is real memory: fixed_block(initial_chunks=529) > host takes
   * 66 GiB at create, which ASan's bookkeeping alone takes minutes to touch
   * (a timeout, not a fault). Over the simulated device the same reservation
   * costs nothing, so only a host bottom is kept to checking. */
  s.host_reserve = s.host_reserve && spec.layer_count > 0 &&
                   strcmp(spec.layers[spec.layer_count - 1].name, "host") == 0;
  gmr__spec_free(&spec);
  return s;
}

/* A message "ORIGIN:L:C: cannot create NAME: GMR_ERR_X" with nothing after
 * the status, or with the builder's words for a layer that refused what the
 * spec's checks let through. The shape is matched from the start, so the
 * spec's own text quoted in other messages cannot pass for it. */
static bool is_unexplained(const char *message) {
  const char *p = strchr(message, ':');
  if (p == NULL) return false;
  for (int field = 0; field < 2; ++field) { /* line and column */
    if (p[1] < '0' || p[1] > '9') return false;
    p = strchr(p + 1, ':');
    if (p == NULL) return false;
  }
  if (strncmp(p, ": cannot create ", 16) != 0) return false;
  p += 16;
  while ((*p >= 'a' && *p <= 'z') || *p == '_') p++; /* the component's name */
  if (strncmp(p, ": GMR_", 6) != 0) return false;
  p += 6;
  while ((*p >= 'A' && *p <= 'Z') || *p == '_') p++; /* the status */
  return *p == '\0' ||
         strcmp(p, ": the layer refused options the spec accepted (a gap in the spec's "
                   "checks: please report this spec)") == 0;
}

/* A few allocations of sizes and alignments taken from the spec's bytes. */
static void allocate_through(gmr_stack *stack, const char *text, size_t length) {
  static const size_t sizes[] = {1, 255, 256, 4096, 65536, (size_t)1 << 20, (size_t)3 << 20};
  static const size_t alignments[] = {0, 256, 4096, (size_t)1 << 16};
  gmr_resource *top = gmr_stack_as_resource(stack);
  enum { COUNT = 4 };
  void *ptrs[COUNT];
  size_t bytes[COUNT], align[COUNT];
  for (size_t i = 0; i < COUNT; ++i) {
    unsigned char b = length > 0 ? (unsigned char)text[(i * 7) % length] : 0;
    bytes[i] = sizes[b % (sizeof sizes / sizeof sizes[0])];
    align[i] = alignments[(b / 8) % (sizeof alignments / sizeof alignments[0])];
    ptrs[i] = NULL;
    gmr_status st = gmr_resource_allocate(top, bytes[i], align[i], NULL, &ptrs[i]);
    if (st != GMR_OK) {
      if (ptrs[i] != NULL) fail("failed allocation left a pointer", text, gmr_status_name(st));
      continue;
    }
    size_t a = align[i] == 0 ? 256 : align[i];
    if (ptrs[i] == NULL || (uintptr_t)ptrs[i] % a != 0) {
      fail("allocation is NULL or misaligned", text, gmr_status_name(st));
    }
  }
  for (size_t i = COUNT; i-- > 0;) {
    if (ptrs[i] == NULL) continue;
    gmr_status st = gmr_resource_deallocate(top, ptrs[i], bytes[i], align[i], NULL);
    if (st != GMR_OK) fail("free of a live allocation refused", text, gmr_status_name(st));
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  size_t length = strlen(text);

  if (gmr_cuda_sim_enable(NULL) != GMR_OK) fail("simulation did not start fresh", text, "");
  safety s = classify(text);
  if (!s.plugin) {
    gmr_spec_error checked, created;
    gmr_status check_st = gmr_stack_check(text, &checked);
    if (check_st != GMR_OK && strncmp(checked.message, "spec", 4) != 0) {
      fail("check refused without a message", text, checked.message);
    }
    if (!s.writes_file && !s.host_reserve) {
      gmr_stack *stack = NULL;
      gmr_status st = gmr_stack_create(text, &stack, &created);
      if (st != GMR_OK) {
        if (stack != NULL) fail("failed create left a stack", text, created.message);
        if (strncmp(created.message, "spec", 4) != 0) {
          fail("create refused without a message", text, created.message);
        }
        if (is_unexplained(created.message)) {
          fail("a layer failed without saying what to change", text, created.message);
        }
      }
      if (!s.device_bound) {
        if (check_st == GMR_ERR_INVALID_ARGUMENT &&
            (st != check_st || strcmp(checked.message, created.message) != 0)) {
          fail("check refused, create did otherwise", text, created.message);
        }
        if (check_st == GMR_OK && st == GMR_ERR_INVALID_ARGUMENT) {
          fail("check accepted, create refused", text, created.message);
        }
      }
      if (st == GMR_OK) {
        if (!s.may_block) allocate_through(stack, text, length);
        gmr_status destroyed = gmr_stack_destroy(stack);
        if (destroyed != GMR_OK) fail("destroy failed", text, gmr_status_name(destroyed));
      }
    }
  }
  if (gmr_cuda_sim_get_stale_handle_count() != 0) fail("a dead CUDA handle was used", text, "");
  GMR_IGNORE_STATUS(gmr_cuda_sim_clear_failures());
  if (gmr_cuda_sim_disable() != GMR_OK) fail("simulated CUDA objects leaked", text, "");
  free(text);
  return 0;
}
