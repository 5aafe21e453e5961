// The graph pool (tools/replay's alias graph_pool) on the two bundled capture
// traces, on the host simulation: every allocation inside the captures served
// with no reserve given, and the stack's footprint, cold and warm, at or below
// what PyTorch's caching allocator reserved when the trace was recorded (the
// trace's segment rows). Byte counts do not depend on the machine: every size
// is the stack's own, so the simulation's footprint is the GPU's.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "gmr/graph_arena_resource.h"
#include "tests/support/sim_fixture.h"
#include "tools/replay/locate.h"
#include "tools/replay/replay.h"
#include "tools/replay/report.h"
#include "tools/replay/stacks.h"
#include "tools/replay/trace.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

class GraphPoolTraces : public gmr_test::SimTest,
                        public ::testing::WithParamInterface<const char *> {};

TEST_P(GraphPoolTraces, ServesEveryCaptureWithinPyTorchsReserve) {
  char path[4096], looked[8192], err[512];
  ASSERT_EQ(GMR_OK, replay_locate_bundled_trace(nullptr, GetParam(), path, sizeof path, looked,
                                                sizeof looked))
      << looked;
  replay_trace *trace = nullptr;
  ASSERT_EQ(GMR_OK, replay_trace_read(path, nullptr, &trace, err, sizeof err)) << err;
  const replay_trace_summary *sum = &trace->summary;
  ASSERT_TRUE(sum->has_reserved_reference);
  replay_stack *stack = nullptr;
  ASSERT_EQ(GMR_OK, replay_stack_create("graph_pool", &stack, err, sizeof err)) << err;
  replay_options options = REPLAY_OPTIONS_DEFAULT;
  options.pass_count = 2;  // cold, then warm on what the first pass left
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run_with(trace, replay_stack_top(stack), 0, &options, &r));
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  EXPECT_EQ(r.capture_alloc_count, r.capture_alloc_ok_count);
  EXPECT_EQ(0u, r.arena.capture_refusal_count);
  EXPECT_GT(r.arena.adopted_chunk_count, 0u) << "the pool's idle memory served the captures";
  ASSERT_EQ(2u, r.pass_count);
  for (size_t i = 0; i < r.pass_count; ++i) {
    SCOPED_TRACE("pass " + std::to_string(i + 1));
    ASSERT_TRUE(r.passes[i].has_peak_held);
    EXPECT_LE(r.passes[i].peak_held_bytes, sum->reference_peak_reserved_bytes)
        << r.passes[i].peak_held_bytes / MiB << " MiB held, PyTorch reserved "
        << sum->reference_peak_reserved_bytes / MiB << " MiB";
  }
  // The report says which part of the arena was the pool's idle memory.
  std::FILE *f = std::tmpfile();
  ASSERT_NE(nullptr, f);
  const char *names[] = {"graph_pool"};
  replay_report_print_table(f, trace, names, &r, 1);
  std::rewind(f);
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f) != nullptr) text += buf;
  std::fclose(f);
  EXPECT_NE(std::string::npos, text.find("free blocks of the layer below taken")) << text;
  replay_result_free(&r);
  EXPECT_EQ(GMR_OK, replay_stack_destroy(stack));
  replay_trace_destroy(trace);
}

INSTANTIATE_TEST_SUITE_P(Bundled, GraphPoolTraces,
                         ::testing::Values("llm_multigraph.csv.gz", "gpt2_graph_capture.csv.gz"));

}  // namespace
