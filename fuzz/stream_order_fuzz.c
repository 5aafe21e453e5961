/*
 * fuzz/stream_order_fuzz.c: libFuzzer target for the stream-ordering rule
 * (docs/stream_ordering.md): no stream ever gets memory that work of another
 * stream may still use, on every stream-ordered resource and stack.
 *
 * Input: the first byte picks the stack (see `stacks`), the second the
 * program's shape (streams, failed event calls, stream destroys); the rest
 * are the program's choices (tests/support/order_program.c: allocate, free,
 * hand off, record_stream, hold and release, waits that chain,
 * synchronise, new streams, trim, failed CUDA calls), each allocation
 * checked by the oracle of tests/support/order_oracle.h on the host
 * simulation, whose streams are ordered as a GPU's: transitively.
 * A violation, an error of the program, a stack that will not be destroyed
 * or a leaked simulated object is a finding (abort).
 *
 * Run it with fuzz/run.sh stream_order SECONDS; the test suite's
 * //tests:stream_order_property_test runs the same programs from seeds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/order_oracle.h"

const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=1024";
}

typedef struct stack_case {
  const char *spec;
  bool stream_ids;     /* handles may be reused while a dead stream's work runs */
  bool streams_outlive; /* streams must outlive the stack: no destroys */
  bool same_stream_free;
} stack_case;

static const stack_case stacks[] = {
    {"pool(min_growth=1MiB, max_growth=8MiB) > cuda", false, false, false},
    {"pool(record_every_free=true, min_growth=1MiB) > cuda", false, false, false},
    {"pool(stream_ids=true, min_growth=1MiB) > cuda", true, false, false},
    {"pool(streams_outlive=true) > cuda", false, true, false},
    {"fixed_block(block=64KiB, blocks_per_chunk=4) > cuda", false, false, false},
    {"fixed_block(block=64KiB, blocks_per_chunk=1, stream_ids=true) > cuda", true, false, false},
    {"vmm", false, false, false},
    {"vmm(streams_outlive=true)", false, true, false},
    {"vmm(remap_permille=0)", false, false, false},
    {"vmm_pages", false, false, false},
    {"vmm_pages(small_pool=false)", false, false, false},
    {"graph_arena(chunk=8MiB) > cuda", false, false, false},
    {"tracking > limiting(limit=2GiB) > pool(min_growth=1MiB) > cuda", false, false, true},
    {"limiting(limit=512MiB, on_oom=trim_retry) > vmm", false, false, false},
    {"vmm(creators=2, handle_floor=4MiB)", false, false, false},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  const stack_case *c = &stacks[data[0] % (sizeof stacks / sizeof stacks[0])];
  uint8_t shape = data[1];
  if (gmr_cuda_sim_enable(NULL) != GMR_OK) abort();
  gmr_stack *stack = NULL;
  gmr_spec_error err;
  if (gmr_stack_create(c->spec, &stack, &err) != GMR_OK) {
    fprintf(stderr, "stream_order: %s: %s\n", c->spec, err.message);
    abort();
  }
  order_program_options opt = ORDER_PROGRAM_OPTIONS_DEFAULT;
  opt.stream_count = 4 + (shape & 3) % 3;
  opt.faults = (shape & 4) != 0;
  opt.destroy_streams = !c->streams_outlive && (shape & 8) != 0;
  opt.reuse_handles = c->stream_ids && (shape & 16) != 0;
  opt.same_stream_free = c->same_stream_free;
  opt.max_bytes = (shape & 32) != 0 ? (size_t)48 << 20 : (size_t)4 << 20;
  opt.op_count = 2000;
  order_source src = order_source_bytes(data + 2, size - 2);
  order_program_result result;
  bool ok = order_program_run(gmr_stack_as_resource(stack), &src, &opt, &result);
  if (!ok) {
    fprintf(stderr, "stream_order: %s: %s\n", c->spec,
            result.error[0] != '\0' ? result.error : result.first_violation);
    abort();
  }
  if (gmr_stack_destroy(stack) != GMR_OK) {
    fprintf(stderr, "stream_order: %s: the stack refused to be destroyed when empty\n", c->spec);
    abort();
  }
  for (uint32_t s = 0; s < result.kept_count; ++s) {
    if (gmr_cuda_stream_destroy(result.kept_streams[s]) != GMR_OK) abort();
  }
  if (gmr_cuda_sim_get_stale_handle_count() != 0) {
    fprintf(stderr, "stream_order: %s: a CUDA call named a destroyed stream or event\n",
            c->spec);
    abort();
  }
  if (gmr_cuda_sim_disable() != GMR_OK) {
    fprintf(stderr, "stream_order: %s: simulated CUDA objects leaked\n", c->spec);
    abort();
  }
  return 0;
}
