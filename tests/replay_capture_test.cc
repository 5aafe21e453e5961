// tools/replay honouring capture_begin / capture_end rows, on the host
// simulation: real captures, an explicit session on the stack's graph arena,
// the counts the report gives, and what breaks a capture.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/capture_leaf.h"
#include "tests/support/multigraph_trace.h"
#include "tests/support/sim_fixture.h"
#include "tools/replay/locate.h"
#include "tools/replay/replay.h"
#include "tools/replay/report.h"
#include "tools/replay/stacks.h"
#include "tools/replay/trace.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

std::string WriteTrace(const std::string &name, const std::string &content) {
  const char *dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  return path;
}

// Stream 5 captures: two allocations inside (one freed inside), one freed after.
const char kCaptureTrace[] =
    "action,addr,size,stream,time_us\n"
    "alloc,4096,1000,5,1\n"              // before the capture
    "capture_begin,0,0,5,2\n"
    "alloc,8192,300000,5,3\n"
    "alloc,1048576,5000,5,4\n"
    "free_requested,8192,300000,5,5\n"
    "capture_end,0,0,5,6\n"
    "free_requested,1048576,5000,5,7\n"
    "free_requested,4096,1000,5,8\n";

class ReplayCapture : public gmr_test::SimTest {
 protected:
  replay_trace *trace_ = nullptr;
  gmr_cuda_resource *cuda_ = nullptr;

  void SetUp() override {
    SimTest::SetUp();
    gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &cuda_));
  }

  std::vector<gmr_capture_leaf *> leaves_;

  void TearDown() override {
    replay_trace_destroy(trace_);
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cuda_resource_as_resource(cuda_)));
    for (gmr_capture_leaf *l : leaves_) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_capture_leaf_as_resource(l)));
    }
    SimTest::TearDown();
  }

  // A cudaMalloc leaf that can (or cannot) allocate during capture.
  gmr_resource *Leaf(bool can_capture) {
    gmr_capture_leaf *l = gmr_capture_leaf_create(can_capture);
    EXPECT_NE(nullptr, l);
    leaves_.push_back(l);
    return gmr_capture_leaf_as_resource(l);
  }

  void ParseFile(const std::string &path) {
    char err[512];
    ASSERT_EQ(GMR_OK, replay_trace_read(path.c_str(), nullptr, &trace_, err, sizeof err)) << err;
  }

  void Parse(const char *name, const std::string &text) {
    char err[512];
    ASSERT_EQ(GMR_OK, replay_trace_read(WriteTrace(name, text).c_str(), nullptr, &trace_, err,
                                        sizeof err))
        << err;
  }

  gmr_graph_arena_resource *Arena(size_t initial, gmr_graph_arena_uncaptured uncaptured,
                                  gmr_resource *up = nullptr,
                                  gmr_graph_arena_policy policy = GMR_GRAPH_ARENA_MONOTONE,
                                  size_t chunk = MiB) {
    gmr_graph_arena_resource_config c = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
    c.initial_capacity_bytes = initial;
    c.chunk_bytes = chunk;
    c.uncaptured = uncaptured;
    c.capture_policy = policy;
    gmr_graph_arena_resource *a = nullptr;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_create(
                          up != nullptr ? up : gmr_cuda_resource_as_resource(cuda_), &c, &a));
    return a;
  }

  std::string Report(const char *name, const replay_result &r) {
    std::FILE *f = std::tmpfile();
    const char *names[] = {name};
    replay_report_print_table(f, trace_, names, &r, 1);
    std::rewind(f);
    std::string text;
    char buf[512];
    while (std::fgets(buf, sizeof buf, f) != nullptr) text += buf;
    std::fclose(f);
    return text;
  }
};

TEST_F(ReplayCapture, ArenaServesTheCaptureWithoutUpstreamCalls) {
  Parse("capture.csv", kCaptureTrace);
  gmr_graph_arena_resource *a = Arena(MiB, GMR_GRAPH_ARENA_UNCAPTURED_FORWARD);
  gmr_resource *top = gmr_graph_arena_resource_as_resource(a);
  uint64_t begins = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_BEGIN_CAPTURE);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run(trace_, top, 0, &r));
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  EXPECT_EQ(begins + 1, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_BEGIN_CAPTURE));
  EXPECT_EQ(1u, r.capture_count);
  EXPECT_EQ(0u, r.capture_failure_count);
  EXPECT_EQ(2u, r.capture_alloc_count);
  EXPECT_EQ(2u, r.capture_alloc_ok_count);
  EXPECT_TRUE(r.has_graph_arena);
  EXPECT_EQ(2u, r.arena.capture_allocation_count);
  EXPECT_EQ(0u, r.arena.upstream_call_during_capture_count);
  EXPECT_EQ(1u, r.arena.forwarded_allocation_count);  // the one before the capture
  EXPECT_EQ(0u, r.arena.graph_memory_count) << "released at the end of the trace";
  EXPECT_EQ(0u, r.arena.live_count);
  EXPECT_NE(std::string::npos,
            Report("arena", r).find("arena: 1 capture begun, 0 broken or refused; 2 allocations "
                                    "inside, 2 served; graph arena: 2 served inside captures, 0 "
                                    "upstream calls during capture (0 capture-safe growths), capacity 1.0 MiB"))
      << Report("arena", r);
  replay_result_free(&r);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
}

TEST_F(ReplayCapture, CudaMallocStackIsRefusedInsideTheCapture) {
  Parse("capture.csv", kCaptureTrace);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run(trace_, gmr_cuda_resource_as_resource(cuda_), 0, &r));
  EXPECT_FALSE(replay_result_ok(&r));
  EXPECT_EQ(2u, r.failed_alloc_count);
  EXPECT_EQ(2u, r.skipped_free_count);
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, r.first_alloc_failure.status);
  EXPECT_EQ(0u, r.capture_failure_count) << "cuda_resource refuses without breaking it";
  EXPECT_EQ(0u, r.capture_alloc_ok_count);
  EXPECT_FALSE(r.has_graph_arena);
  EXPECT_NE(std::string::npos, Report("cuda", r).find("no graph arena in the stack"));
  replay_result_free(&r);
}

TEST_F(ReplayCapture, TooSmallAnArenaIsRefusedAndReserveFixesIt) {
  // Nothing below can allocate during capture: the arena must be reserved.
  Parse("capture.csv", kCaptureTrace);
  gmr_graph_arena_resource *a =
      Arena(256 * 1024, GMR_GRAPH_ARENA_UNCAPTURED_FORWARD, Leaf(false));
  gmr_resource *top = gmr_graph_arena_resource_as_resource(a);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run(trace_, top, 0, &r));
  EXPECT_EQ(1u, r.failed_alloc_count);  // 300000 bytes do not fit 256 KiB
  EXPECT_EQ(1u, r.arena.capture_refusal_count);
  EXPECT_EQ(1u, r.arena.capture_allocation_count);
  EXPECT_EQ(0u, r.capture_failure_count) << "the refusal keeps the capture";
  EXPECT_NE(std::string::npos, Report("small", r).find("1 refused (needs 0.3 MiB more)"))
      << Report("small", r);
  replay_result_free(&r);

  replay_options options = REPLAY_OPTIONS_DEFAULT;
  options.arena_reserve_bytes = 256 * 1024 + 300032 + 5120;  // the message's figure
  ASSERT_EQ(GMR_OK, replay_run_with(trace_, top, 0, &options, &r));
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  EXPECT_EQ(options.arena_reserve_bytes, r.arena.held_bytes);
  replay_result_free(&r);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
}

TEST_F(ReplayCapture, AnUpstreamCallFromAnotherStreamLeavesTheGlobalCaptureValid) {
  // Stream 7 allocates during stream 5's capture: forwarded to cudaMalloc,
  // which the cuda resource makes in relaxed mode (global mode would refuse
  // it and end the capture): served, and the capture goes on.
  Parse("other.csv",
        "action,addr,size,stream,time_us\n"
        "capture_begin,0,0,5,1\n"
        "alloc,4096,1000,5,2\n"
        "alloc,8192,1000,7,3\n"
        "capture_end,0,0,5,4\n"
        "free_requested,4096,1000,5,5\n"
        "free_requested,8192,1000,7,6\n");
  gmr_graph_arena_resource *a = Arena(MiB, GMR_GRAPH_ARENA_UNCAPTURED_FORWARD);
  gmr_resource *top = gmr_graph_arena_resource_as_resource(a);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run(trace_, top, 0, &r));
  EXPECT_EQ(0u, r.capture_failure_count) << r.first_failure;
  EXPECT_EQ(0u, r.failed_alloc_count) << r.first_failure;
  EXPECT_EQ(1u, r.arena.upstream_call_during_capture_count);
  replay_result_free(&r);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
}

TEST_F(ReplayCapture, CaptureOffIgnoresTheMarkersAndTheDefaultStreamCannotCapture) {
  Parse("default.csv",
        "action,addr,size,stream,time_us\n"
        "capture_begin,0,0,0,1\n"
        "alloc,4096,1000,0,2\n"
        "capture_end,0,0,0,3\n"
        "free_requested,4096,1000,0,4\n");
  replay_result r;
  replay_options off = REPLAY_OPTIONS_DEFAULT;
  off.capture = REPLAY_CAPTURE_OFF;
  gmr_resource *cuda = gmr_cuda_resource_as_resource(cuda_);
  ASSERT_EQ(GMR_OK, replay_run_with(trace_, cuda, 0, &off, &r));
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  EXPECT_EQ(0u, r.capture_count);
  EXPECT_EQ(0u, r.capture_alloc_count);
  replay_result_free(&r);
  ASSERT_EQ(GMR_OK, replay_run(trace_, cuda, 0, &r));
  EXPECT_EQ(1u, r.capture_failure_count);
  EXPECT_STREQ("line 2: capture_begin on recorded stream 0, the default stream, which CUDA "
               "cannot capture",
               r.first_failure);
  replay_result_free(&r);
}

// ---- growth during capture and many graphs in one memory (issue 11) ------------------------

std::string MultigraphTrace(gmr_multigraph_summary *summary) {
  const char *dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/multigraph.csv";
  gmr_multigraph_shape shape = GMR_MULTIGRAPH_SHAPE_DEFAULT;
  EXPECT_EQ(0, gmr_multigraph_trace_write(path.c_str(), &shape, summary));
  return path;
}

TEST_F(ReplayCapture, TheArenaGrowsInTheCaptureWithNoReserve) {
  Parse("capture.csv", kCaptureTrace);
  gmr_graph_arena_resource *a = Arena(0, GMR_GRAPH_ARENA_UNCAPTURED_FORWARD, Leaf(true));
  gmr_resource *top = gmr_graph_arena_resource_as_resource(a);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run(trace_, top, 0, &r));
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  EXPECT_EQ(2u, r.capture_alloc_ok_count);
  EXPECT_EQ(1u, r.arena.capture_growth_count);
  EXPECT_EQ(0u, r.arena.capture_refusal_count);
  EXPECT_NE(std::string::npos,
            Report("grow", r).find("graph arena: 2 served inside captures, 1 upstream calls "
                                   "during capture (1 capture-safe growths), capacity 1.0 MiB"))
      << Report("grow", r);
  replay_result_free(&r);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
}

// Six graphs, largest batch first, one pool: under ordered_reuse the first
// capture grows the arena once and every later one fits in what it freed;
// under monotone each keeps its own bytes. No reserve either way.
TEST_F(ReplayCapture, ManyGraphsShareOneMemory) {
  gmr_multigraph_summary sum;
  ParseFile(MultigraphTrace(&sum));
  ASSERT_EQ(6u, sum.capture_count);
  for (auto policy : {GMR_GRAPH_ARENA_ORDERED_REUSE, GMR_GRAPH_ARENA_MONOTONE}) {
    SCOPED_TRACE(gmr_graph_arena_resource_policy_name(policy));
    gmr_graph_arena_resource *a =
        Arena(0, GMR_GRAPH_ARENA_UNCAPTURED_FORWARD, Leaf(true), policy, 4 * MiB);
    gmr_resource *top = gmr_graph_arena_resource_as_resource(a);
    replay_result r;
    ASSERT_EQ(GMR_OK, replay_run(trace_, top, 0, &r));
    EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
    EXPECT_EQ(6u, r.capture_count);
    EXPECT_EQ(sum.capture_alloc_count, r.capture_alloc_ok_count);
    EXPECT_EQ(sum.capture_alloc_count, r.arena.capture_allocation_count);
    EXPECT_EQ(0u, r.arena.capture_refusal_count);
    EXPECT_EQ(0u, r.arena.graph_memory_count) << "released at the end";
    if (policy == GMR_GRAPH_ARENA_ORDERED_REUSE) {
      // Only possible if graphs 2..6 appended to graph 1's memory.
      EXPECT_EQ(1u, r.arena.capture_growth_count);
      EXPECT_EQ(4 * MiB, r.arena.peak_held_bytes);
      EXPECT_EQ(2 * MiB, r.arena.peak_in_use_bytes) << "graph 1's layer window";
    } else {
      EXPECT_EQ(sum.capture_bytes, r.arena.peak_in_use_bytes) << "the sum, never overlapped";
      EXPECT_GT(r.arena.capture_growth_count, 1u);
    }
    replay_result_free(&r);
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
  }
}

TEST_F(ReplayCapture, TheRealCaptureTraceNeedsNoReserve) {
  char path[4096], looked[8192];
  ASSERT_EQ(GMR_OK, replay_locate_bundled_trace(nullptr, "gpt2_graph_capture.csv.gz", path,
                                                sizeof path, looked, sizeof looked))
      << looked;
  ParseFile(path);
  gmr_graph_arena_resource *a = Arena(0, GMR_GRAPH_ARENA_UNCAPTURED_FORWARD, Leaf(true),
                                      GMR_GRAPH_ARENA_ORDERED_REUSE, size_t{64} << 20);
  gmr_resource *top = gmr_graph_arena_resource_as_resource(a);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run(trace_, top, 0, &r));
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  EXPECT_EQ(192u, r.capture_alloc_ok_count);
  EXPECT_EQ(0u, r.arena.capture_refusal_count);
  EXPECT_GE(r.arena.capture_growth_count, 1u);
  replay_result_free(&r);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
}

// Whether `spec` can allocate while a stream captures (its resources
// implement allocate_capturing): the graph pool alias needs pool and
// cuda(kind=device) to.
bool CanAllocateInCapture(const char *spec) {
  gmr_stack *stack = nullptr;
  gmr_spec_error e;
  if (gmr_stack_create(spec, &stack, &e) != GMR_OK) return false;
  gmr_resource *top = gmr_stack_as_resource(stack);
  gmr_stream s = nullptr;
  bool ok = false;
  if (gmr_cuda_stream_create(&s) == GMR_OK && gmr_cuda_stream_begin_capture(s) == GMR_OK) {
    void *p = nullptr;
    ok = gmr_resource_allocate_capturing(top, 1 << 20, 0, s, &p, nullptr) == GMR_OK;
    gmr_graph g = nullptr;
    if (gmr_cuda_stream_end_capture(s, &g) == GMR_OK) (void)gmr_cuda_graph_destroy(g);
    if (ok) (void)gmr_resource_deallocate(top, p, 1 << 20, 0, s);
  }
  (void)gmr_cuda_stream_destroy(s);
  (void)gmr_stack_destroy(stack);
  return ok;
}

TEST_F(ReplayCapture, TheGraphPoolAliasReplaysBothCaptureTracesWithNoReserve) {
  if (!CanAllocateInCapture("pool > cuda(kind=device)")) {
    GTEST_SKIP() << "pool > cuda(kind=device) cannot allocate during capture yet "
                    "(allocate_capturing of pool_resource and cuda_resource, issue 11)";
  }
  gmr_multigraph_summary sum;
  std::string multigraph = MultigraphTrace(&sum);
  char path[4096], looked[8192];
  ASSERT_EQ(GMR_OK, replay_locate_bundled_trace(nullptr, "gpt2_graph_capture.csv.gz", path,
                                                sizeof path, looked, sizeof looked))
      << looked;
  for (const std::string &file : {multigraph, std::string(path)}) {
    SCOPED_TRACE(file);
    replay_trace_destroy(trace_);
    trace_ = nullptr;
    ParseFile(file);
    replay_stack *stack = nullptr;
    char err[512];
    ASSERT_EQ(GMR_OK, replay_stack_create("graph_pool", &stack, err, sizeof err)) << err;
    replay_result r;
    ASSERT_EQ(GMR_OK, replay_run(trace_, replay_stack_top(stack), 0, &r));
    EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
    EXPECT_EQ(0u, r.arena.capture_refusal_count);
    EXPECT_EQ(r.capture_alloc_count, r.capture_alloc_ok_count);
    replay_result_free(&r);
    EXPECT_EQ(GMR_OK, replay_stack_destroy(stack));
  }
}

}  // namespace
