// The stream-ordering property over every stream-ordered resource and stack
// (docs/stream_ordering.md): no stream ever gets memory that work of another
// stream may still use. Random programs on four to six streams with holds,
// waits that chain, record_stream, handoffs, stream destroys and failed event
// calls, each allocation checked by the oracle (tests/support/order_oracle.h).
//
// GMR_ORDER_PROGRAMS=N runs N programs per stack instead of the default (the
// fuzz target fuzz/stream_order_fuzz.c runs more); GMR_ORDER_SEED=S runs the
// one program of seed S (with GMR_ORDER_TRACE=1 it prints its steps).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/order_oracle.h"
#include "tests/support/sim_fixture.h"

namespace {

struct Case {
  const char *name;
  const char *spec;
  bool reuse_handles;    // the stack asks stream ids (or is told streams outlive it)
  bool destroy_streams;  // false where the program promised its streams outlive the stack
  bool same_stream_free; // the stack checks that a free names the allocating stream
};

const Case kCases[] = {
    {"pool", "pool > cuda", false, true, false},
    {"pool_every_free", "pool(record_every_free=true) > cuda", false, true, false},
    {"pool_stream_ids", "pool(stream_ids=true) > cuda", true, true, false},
    {"pool_streams_outlive", "pool(streams_outlive=true) > cuda", false, false, false},
    {"fixed_block", "fixed_block(block=64KiB, blocks_per_chunk=16) > cuda", false, true, false},
    {"fixed_block_stream_ids", "fixed_block(block=64KiB, stream_ids=true) > cuda", true, true, false},
    {"vmm", "vmm", false, true, false},
    {"vmm_streams_outlive", "vmm(streams_outlive=true)", false, false, false},
    {"vmm_pages", "vmm_pages", false, true, false},
    {"vmm_pages_no_small", "vmm_pages(small_pool=false)", false, true, false},
    {"graph_arena", "graph_arena(chunk=16MiB) > cuda", false, true, false},
    {"tracking_limiting_pool", "tracking > limiting(limit=6GiB) > pool > cuda", false, true, true},
    {"oom_limiting_vmm", "limiting(limit=1GiB, on_oom=trim_retry) > vmm", false, true, false},
    {"vmm_creators_floor", "vmm(creators=2, handle_floor=4MiB)", false, true, false},
};

// A graph arena keeps a capture's memory for its graph until the caller
// releases it, and hands the bytes of a released memory to anyone at once
// (its contract: the caller synchronises first). The test claims each
// capture's memory when the capture ends and releases them all once the
// program has freed everything and synchronised.
struct CaptureMemories {
  gmr_resource *top = nullptr;
  std::vector<gmr_graph_memory *> memories;
};

gmr_graph_arena_resource *ArenaOf(gmr_resource *top) {
  gmr_resource *layer = gmr_resource_find(top, "graph_arena_resource");
  return layer == nullptr ? nullptr : gmr_graph_arena_resource_from_resource(layer);
}

void ClaimCaptureMemory(void *ctx, const gmr_stream *streams, size_t count) {
  auto *c = static_cast<CaptureMemories *>(ctx);
  gmr_graph_arena_resource *arena = ArenaOf(c->top);
  for (size_t i = 0; arena != nullptr && i < count; ++i) {
    gmr_graph_memory *m = nullptr;
    // Sessions the capture opened on this stream, if any.
    while (gmr_graph_arena_resource_end_capture(arena, streams[i], &m) == GMR_OK) {
      c->memories.push_back(m);
    }
  }
}

void ReleaseCaptureMemories(CaptureMemories *c) {
  gmr_graph_arena_resource *arena = ArenaOf(c->top);
  for (gmr_graph_memory *m : c->memories) {
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena, m));
  }
  c->memories.clear();
}

int ProgramCount(int fallback) {
  const char *env = std::getenv("GMR_ORDER_PROGRAMS");
  if (env == nullptr || *env == '\0') return fallback;
  return std::atoi(env);
}

class StreamOrderProperty : public gmr_test::SimTest,
                            public ::testing::WithParamInterface<Case> {
 protected:
  // Runs `programs` programs with options `opt`; every one must pass.
  void RunPrograms(int programs, order_program_options opt, uint64_t seed_base) {
    const Case &c = GetParam();
    if (const char *one = std::getenv("GMR_ORDER_SEED")) {
      seed_base = std::strtoull(one, nullptr, 10);
      programs = 1;
    }
    uint64_t allocations = 0, waits = 0, holds = 0, captures = 0;
    for (int i = 0; i < programs; ++i) {
      gmr_stack *stack = nullptr;
      gmr_spec_error err = {};
      ASSERT_EQ(GMR_OK, gmr_stack_create(c.spec, &stack, &err)) << err.message;
      order_source src = order_source_seed(seed_base + static_cast<uint64_t>(i));
      CaptureMemories memories;
      memories.top = gmr_stack_as_resource(stack);
      if (opt.after_capture != nullptr) opt.after_capture_ctx = &memories;
      order_program_result result;
      bool ok = order_program_run(gmr_stack_as_resource(stack), &src, &opt, &result);
      EXPECT_TRUE(ok) << c.spec << ", seed " << seed_base + i << ": "
                      << (result.error[0] != '\0' ? result.error : result.first_violation);
      allocations += result.allocations;
      waits += result.resource_waits;
      holds += result.holds;
      captures += result.captures;
      ReleaseCaptureMemories(&memories);
      ASSERT_EQ(GMR_OK, gmr_stack_destroy(stack)) << c.spec << ", seed " << seed_base + i;
      for (uint32_t s = 0; s < result.kept_count; ++s) {
        EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(result.kept_streams[s]));
      }
      if (!ok) return;
    }
    // The programs reached the paths under test: many allocations, streams
    // held, and the resource made streams wait on others.
    EXPECT_GT(allocations, static_cast<uint64_t>(programs) * 20);
    EXPECT_GE(holds, static_cast<uint64_t>(programs));
    if (opt.captures) {
      EXPECT_GE(captures, static_cast<uint64_t>(programs));
    }
    RecordProperty("allocations", std::to_string(allocations));
    RecordProperty("resource_waits", std::to_string(waits));
  }

  order_program_options Options() const {
    order_program_options opt = ORDER_PROGRAM_OPTIONS_DEFAULT;
    opt.reuse_handles = GetParam().reuse_handles;
    opt.destroy_streams = GetParam().destroy_streams;
    opt.same_stream_free = GetParam().same_stream_free;
    return opt;
  }
};

TEST_P(StreamOrderProperty, FourStreams) { RunPrograms(ProgramCount(300), Options(), 1000); }

TEST_P(StreamOrderProperty, SixStreamsLargeRequests) {
  order_program_options opt = Options();
  opt.stream_count = 6;
  opt.max_bytes = static_cast<size_t>(48) << 20;
  RunPrograms(ProgramCount(100), opt, 50000);
}

TEST_P(StreamOrderProperty, FailedEventCalls) {
  order_program_options opt = Options();
  opt.faults = true;
  RunPrograms(ProgramCount(200), opt, 90000);
}

// Inside graph captures: forked streams (nested too), record_stream during
// the capture, partial and full joins. Memory freed with uses on forked
// streams comes back inside the capture only once they have joined back.
TEST_P(StreamOrderProperty, Captures) {
  order_program_options opt = Options();
  opt.captures = true;
  opt.after_capture = ClaimCaptureMemory;
  RunPrograms(ProgramCount(300), opt, 130000);
}

INSTANTIATE_TEST_SUITE_P(Stacks, StreamOrderProperty, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.name);
                         });

}  // namespace
