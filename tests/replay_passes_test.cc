// tests/replay_passes_test.cc: passes (cold and warm) of tools/replay, the
// wall-clock run beside the per-call-timed one (measure.h), the held bytes
// over the replay, the peak of each pass and the fragmentation at it, on the
// host simulation of CUDA.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/resource.h"
#include "tests/support/sim_fixture.h"
#include "tools/replay/measure.h"
#include "tools/replay/replay.h"
#include "tools/replay/report.h"
#include "tools/replay/stacks.h"
#include "tools/replay/trace.h"

namespace {

std::string WriteTrace(const std::string &name, const std::string &content) {
  const char *dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  return path;
}

struct Trace {
  replay_trace *trace = nullptr;
  ~Trace() { replay_trace_destroy(trace); }
};

void ParseOrDie(const std::string &path, Trace *out) {
  char err[512];
  ASSERT_EQ(GMR_OK, replay_trace_read(path.c_str(), nullptr, &out->trace, err, sizeof err))
      << err;
}

// Live bytes after each event: 1024, 5120, 4096, 6144, 6244, 2148, 100.
const char kSmallTrace[] =
    "action,addr,size,stream,time_us\r\n"
    "alloc,4096,1024,0,1\r\n"
    "alloc,8192,4096,0,2\r\n"
    "free_requested,4096,1024,0,3\r\n"
    "alloc,12288,2048,0,4\r\n"
    "alloc,4096,100,0,5\r\n"
    "free_requested,8192,4096,0,6\r\n"
    "free_requested,12288,2048,0,7\r\n";  // the 100-byte allocation stays live

// ---- a resource that answers get_memory_info ---------------------------------
//
// Serves from aligned_alloc and keeps books as a pool would: it holds its live bytes
// rounded up to 4 KiB chunks and never gives a chunk back; of the free bytes,
// the largest block is a quarter (so the fragmentation is always 0.75).
// Optionally, its first allocation passes through a transient peak (held
// briefly 64 KiB higher inside the call), which only the high-water mark sees.

struct FragResource {
  gmr_resource base;
  size_t live_bytes = 0;
  size_t held_bytes = 0;
  size_t peak_held_bytes = 0;
  size_t transient_bytes = 0;  // added to the peak by the first allocation
  bool first_done = false;
};

constexpr size_t kChunkBytes = 4096;

gmr_status FragAllocate(gmr_resource *self, size_t bytes, size_t, gmr_stream, void **out,
                        gmr_failure *) {
  FragResource *r = reinterpret_cast<FragResource *>(self);
  *out = std::aligned_alloc(256, (bytes + 255) / 256 * 256);  // gmr's default alignment
  if (*out == nullptr) return GMR_ERR_OUT_OF_MEMORY;
  r->live_bytes += bytes;
  size_t needed = (r->live_bytes + kChunkBytes - 1) / kChunkBytes * kChunkBytes;
  if (needed > r->held_bytes) r->held_bytes = needed;
  size_t peak = r->held_bytes + (r->first_done ? 0 : r->transient_bytes);
  r->first_done = true;
  if (peak > r->peak_held_bytes) r->peak_held_bytes = peak;
  return GMR_OK;
}

gmr_status FragDeallocate(gmr_resource *self, void *ptr, size_t bytes, size_t, gmr_stream) {
  FragResource *r = reinterpret_cast<FragResource *>(self);
  std::free(ptr);
  r->live_bytes -= bytes;
  return GMR_OK;
}

gmr_status FragDestroy(gmr_resource *) { return GMR_OK; }

gmr_status FragFootprint(const gmr_resource *self, gmr_footprint *out) {
  const FragResource *r = reinterpret_cast<const FragResource *>(self);
  out->held_bytes = r->held_bytes;
  out->peak_held_bytes = r->peak_held_bytes;
  return GMR_OK;
}

gmr_status FragMemoryInfo(const gmr_resource *self, gmr_memory_info *out) {
  const FragResource *r = reinterpret_cast<const FragResource *>(self);
  out->held_bytes = r->held_bytes;
  out->live_bytes = r->live_bytes;
  out->free_bytes = r->held_bytes - r->live_bytes;
  out->largest_free_block_bytes = out->free_bytes / 4;
  out->free_block_count = out->free_bytes > 0 ? 4 : 0;
  return GMR_OK;
}

const gmr_resource_vtbl *FragVtbl(bool answers_memory_info) {
  static gmr_resource_vtbl with, without;
  for (gmr_resource_vtbl *v : {&with, &without}) {
    v->version = GMR_RESOURCE_VTBL_VERSION;
    v->type_name = "frag_test_resource";
    v->allocate = FragAllocate;
    v->deallocate = FragDeallocate;
    v->destroy = FragDestroy;
    v->get_footprint = FragFootprint;
  }
  with.get_memory_info = FragMemoryInfo;
  return answers_memory_info ? &with : &without;
}

class ReplayPassesTest : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    ParseOrDie(WriteTrace("small.csv", kSmallTrace), &trace_);
  }
  Trace trace_;
};

replay_options Passes(size_t count, replay_timing timing) {
  replay_options o = REPLAY_OPTIONS_DEFAULT;
  o.pass_count = count;
  o.timing = timing;
  return o;
}

// ---- passes ----------------------------------------------------------------------

TEST_F(ReplayPassesTest, EveryPassReplaysTheTraceAndFreesWhatItLeftLive) {
  FragResource frag;
  frag.base.vtbl = FragVtbl(true);
  replay_options o = Passes(3, REPLAY_TIMING_PER_CALL);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run_with(trace_.trace, &frag.base, 0, &o, &r)) << r.first_failure;
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  ASSERT_EQ(3u, r.pass_count);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(4u, r.passes[k].alloc_count) << k;
    EXPECT_EQ(3u, r.passes[k].free_count) << k;
    EXPECT_EQ(0u, r.passes[k].failure_count) << k;
    EXPECT_EQ(1u, r.passes[k].live_at_end_count) << k;
  }
  EXPECT_EQ(12u, r.alloc_count);
  EXPECT_EQ(9u, r.free_count);
  EXPECT_EQ(3u, r.live_at_end_count);
  EXPECT_EQ(0u, frag.live_bytes) << "the last pass's leftovers were freed";
  // The device was synchronised after each pass, outside the calls.
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE));
  // Held bytes after every event, pass after pass: the resource keeps its
  // chunks, so the warm passes start where the cold one ended.
  const std::vector<size_t> one_pass = {4096, 8192, 8192, 8192, 8192, 8192, 8192};
  ASSERT_NE(nullptr, r.held_bytes);
  ASSERT_EQ(21u, r.held_count);
  for (size_t i = 0; i < 21; ++i) {
    EXPECT_EQ(i < 7 ? one_pass[i] : 8192u, r.held_bytes[i]) << i;
  }
  replay_result_free(&r);
}

TEST_F(ReplayPassesTest, AWarmPoolTakesNothingMoreFromTheDevice) {
  uint64_t cold_grows = 0;
  for (size_t passes : {1, 4}) {
    replay_stack *stack = nullptr;
    char err[256];
    ASSERT_EQ(GMR_OK, replay_stack_create("pool > cuda(kind=device)", &stack, err, sizeof err))
        << err;
    uint64_t before = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
    replay_options o = Passes(passes, REPLAY_TIMING_PER_CALL);
    replay_result r;
    ASSERT_EQ(GMR_OK, replay_run_with(trace_.trace, replay_stack_top(stack), 0, &o, &r));
    EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
    uint64_t grows = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC) - before;
    if (passes == 1) cold_grows = grows;
    EXPECT_GT(grows, 0u);
    EXPECT_EQ(cold_grows, grows) << "passes 2.. must reuse what pass 1 took";
    for (size_t k = 1; k < passes; ++k) {
      EXPECT_EQ(r.passes[0].peak_held_bytes, r.passes[k].peak_held_bytes) << k;
    }
    replay_result_free(&r);
    EXPECT_EQ(GMR_OK, replay_stack_destroy(stack));
  }
}

TEST_F(ReplayPassesTest, PassCountsOutsideOneToAThousandAreRefusedBeforeAnyCall) {
  FragResource frag;
  frag.base.vtbl = FragVtbl(true);
  for (size_t passes : {size_t{0}, size_t{REPLAY_MAX_PASSES + 1}, SIZE_MAX}) {
    replay_options o = Passes(passes, REPLAY_TIMING_PER_CALL);
    replay_result r;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, replay_run_with(trace_.trace, &frag.base, 0, &o, &r));
    EXPECT_EQ(0u, r.alloc_count);
    EXPECT_EQ(nullptr, r.passes);
    EXPECT_NE(std::string::npos, std::string(r.first_failure).find("passes asked; give 1 to 1000"))
        << r.first_failure;
    EXPECT_FALSE(replay_result_ok(&r));
    replay_result_free(&r);
  }
  EXPECT_EQ(0u, frag.held_bytes);
}

TEST_F(ReplayPassesTest, TheWallClockRunHasNoPerCallTimerAndThePerCallRunNoWallClock) {
  FragResource frag;
  frag.base.vtbl = FragVtbl(true);
  replay_options o = Passes(2, REPLAY_TIMING_PASS);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run_with(trace_.trace, &frag.base, 0, &o, &r));
  EXPECT_EQ(nullptr, r.alloc_ns);
  EXPECT_EQ(nullptr, r.free_ns);
  EXPECT_EQ(nullptr, r.held_bytes);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(7u, r.passes[k].wall_call_count) << k;
    EXPECT_EQ(0u, r.passes[k].alloc_p50_ns) << k;
    // Without samples the high-water mark since creation is all there is.
    EXPECT_TRUE(r.passes[k].has_peak_held);
    EXPECT_EQ(8192u, r.passes[k].peak_held_bytes);
    EXPECT_EQ(GMR_ERR_UNSUPPORTED, r.passes[k].memory_info_status);
  }
  replay_result_free(&r);

  FragResource frag2;
  frag2.base.vtbl = FragVtbl(true);
  o.timing = REPLAY_TIMING_PER_CALL;
  ASSERT_EQ(GMR_OK, replay_run_with(trace_.trace, &frag2.base, 0, &o, &r));
  EXPECT_NE(nullptr, r.alloc_ns);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(0u, r.passes[k].wall_call_count);
    EXPECT_EQ(0u, r.passes[k].wall_ns);
    EXPECT_EQ(0.0, replay_pass_mean_ns(&r.passes[k]));
  }
  replay_result_free(&r);
}

// ---- the peak and the fragmentation at it -------------------------------------------

TEST_F(ReplayPassesTest, FragmentationIsReadWhereTheHeldBytesFirstReachTheirPeak) {
  FragResource frag;
  frag.base.vtbl = FragVtbl(true);
  replay_options o = Passes(2, REPLAY_TIMING_PER_CALL);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run_with(trace_.trace, &frag.base, 0, &o, &r));
  // Pass 1: 8 KiB held from the second allocation on (event 1), with 5 KiB
  // live: 3 KiB free, the largest block 768 bytes.
  const replay_pass_result &cold = r.passes[0];
  EXPECT_TRUE(cold.has_peak_held);
  EXPECT_EQ(8192u, cold.peak_held_bytes);
  EXPECT_EQ(1u, cold.peak_event_index);
  ASSERT_EQ(GMR_OK, cold.memory_info_status);
  EXPECT_EQ(8192u, cold.memory_info.held_bytes);
  EXPECT_EQ(5120u, cold.memory_info.live_bytes);
  EXPECT_EQ(3072u, cold.memory_info.free_bytes);
  EXPECT_EQ(768u, cold.memory_info.largest_free_block_bytes);
  double f = -1;
  ASSERT_TRUE(replay_pass_fragmentation(&cold, &f));
  EXPECT_DOUBLE_EQ(0.75, f);
  // Pass 2 holds its peak from its first event, with 1 KiB live.
  const replay_pass_result &warm = r.passes[1];
  EXPECT_EQ(8192u, warm.peak_held_bytes);
  EXPECT_EQ(0u, warm.peak_event_index);
  ASSERT_EQ(GMR_OK, warm.memory_info_status);
  EXPECT_EQ(1024u, warm.memory_info.live_bytes);
  EXPECT_EQ(7168u, warm.memory_info.free_bytes);
  replay_result_free(&r);
}

TEST_F(ReplayPassesTest, AStackThatDoesNotAnswerHasNoFragmentation) {
  FragResource frag;
  frag.base.vtbl = FragVtbl(false);
  replay_options o = Passes(1, REPLAY_TIMING_PER_CALL);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run_with(trace_.trace, &frag.base, 0, &o, &r));
  EXPECT_TRUE(r.passes[0].has_peak_held);
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, r.passes[0].memory_info_status);
  double f = -1;
  EXPECT_FALSE(replay_pass_fragmentation(&r.passes[0], &f));
  EXPECT_EQ(-1, f);
  replay_result_free(&r);
}

TEST(ReplayFragmentationTest, NothingFreeIsNoFragmentation) {
  replay_pass_result pass = {};
  pass.memory_info_status = GMR_OK;
  pass.memory_info.free_bytes = 0;
  double f = -1;
  ASSERT_TRUE(replay_pass_fragmentation(&pass, &f));
  EXPECT_EQ(0.0, f);
  pass.memory_info.free_bytes = 1000;
  pass.memory_info.largest_free_block_bytes = 1000;
  ASSERT_TRUE(replay_pass_fragmentation(&pass, &f));
  EXPECT_EQ(0.0, f);  // one block: not fragmented
  pass.memory_info.largest_free_block_bytes = 5000;  // a resource's bad answer: clamped
  ASSERT_TRUE(replay_pass_fragmentation(&pass, &f));
  EXPECT_EQ(0.0, f);
}

TEST_F(ReplayPassesTest, APeakInsideOneCallCountsForItsPassOnly) {
  FragResource frag;
  frag.base.vtbl = FragVtbl(true);
  frag.transient_bytes = 65536;  // inside the first allocation only
  replay_options o = Passes(2, REPLAY_TIMING_PER_CALL);
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run_with(trace_.trace, &frag.base, 0, &o, &r));
  EXPECT_EQ(4096u + 65536u, r.passes[0].peak_held_bytes) << "the high-water mark rose in pass 1";
  EXPECT_EQ(8192u, r.passes[1].peak_held_bytes) << "pass 2 does not inherit pass 1's mark";
  replay_result_free(&r);
}

// ---- measure: the two runs joined ---------------------------------------------------

TEST_F(ReplayPassesTest, MeasureJoinsTheTimedRunAndTheWallClockRun) {
  replay_options o = Passes(2, REPLAY_TIMING_PER_CALL);
  replay_result r;
  char describe[256], err[256];
  ASSERT_EQ(GMR_OK, replay_measure(trace_.trace, "pool", 0, &o, &r, describe, sizeof describe,
                                   err, sizeof err))
      << err;
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  EXPECT_EQ(0u, r.clock_run_failure_count);
  ASSERT_EQ(2u, r.pass_count);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(7u, r.passes[k].wall_call_count) << "the mean comes from the wall-clock run";
    EXPECT_TRUE(r.passes[k].has_peak_held);
  }
  EXPECT_NE(nullptr, r.alloc_ns) << "the percentiles come from the timed run";
  ASSERT_NE(nullptr, r.held_bytes);
  EXPECT_EQ(14u, r.held_count);
  replay_result_free(&r);
}

TEST_F(ReplayPassesTest, AFailureOfTheWallClockRunFailsTheMeasurement) {
  // cuda_device calls cudaMalloc once per allocation: 4 per pass. The timed
  // run makes 8 (two passes); the wall-clock run's first one fails.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 8, 1, 2));
  replay_options o = Passes(2, REPLAY_TIMING_PER_CALL);
  replay_result r;
  char err[256];
  ASSERT_EQ(GMR_OK, replay_measure(trace_.trace, "cuda_device", 0, &o, &r, nullptr, 0, err,
                                   sizeof err))
      << err;
  EXPECT_EQ(0u, r.failed_alloc_count) << "the timed run did not fail";
  EXPECT_EQ(1u, r.clock_run_failure_count);
  EXPECT_FALSE(replay_result_ok(&r));
  EXPECT_EQ(1u, r.passes[0].failure_count);
  EXPECT_EQ(0u, r.passes[1].failure_count);
  EXPECT_NE(std::string::npos, std::string(r.first_failure).find("wall-clock run: line 2: allocate"))
      << r.first_failure;
  replay_result_free(&r);
}

TEST_F(ReplayPassesTest, MeasureRefusesBadArgumentsAndUnknownStacks) {
  replay_options o = Passes(1, REPLAY_TIMING_PER_CALL);
  replay_result r;
  char err[512];
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            replay_measure(trace_.trace, "no_such_stack", 0, &o, &r, nullptr, 0, err, sizeof err));
  EXPECT_NE(std::string::npos, std::string(err).find("stack 'no_such_stack'")) << err;
  EXPECT_EQ(nullptr, r.passes);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            replay_measure(trace_.trace, nullptr, 0, &o, &r, nullptr, 0, err, sizeof err));
  o.pass_count = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            replay_measure(trace_.trace, "pool", 0, &o, &r, nullptr, 0, err, sizeof err));
  EXPECT_STREQ("0 passes asked; give 1 to 1000", err);
}

// ---- the table ------------------------------------------------------------------------

TEST_F(ReplayPassesTest, TheTableHasARowPerPassWithMeanAndFragmentation) {
  FragResource frag;
  frag.base.vtbl = FragVtbl(true);
  replay_options o = Passes(2, REPLAY_TIMING_PER_CALL);
  replay_result results[2];
  ASSERT_EQ(GMR_OK, replay_run_with(trace_.trace, &frag.base, 0, &o, &results[0]));
  FragResource silent;
  silent.base.vtbl = FragVtbl(false);
  ASSERT_EQ(GMR_OK, replay_run_with(trace_.trace, &silent.base, 0, &o, &results[1]));
  results[0].passes[0].wall_ns = 7000;  // as measure() would set them
  results[0].passes[0].wall_call_count = 7;
  const char *names[2] = {"frag", "silent"};
  char *text = nullptr;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  ASSERT_NE(nullptr, out);
  replay_report_print_table(out, trace_.trace, names, results, 2);
  std::fclose(out);
  std::string report(text, size);
  std::free(text);
  // name (10 wide here: "recorder reserved" spans name and pass), pass,
  // allocs, frees, failed, live@end, mean ns, ..., peak MiB, /live, frag.
  EXPECT_NE(std::string::npos, report.find("\nfrag       1 cold       4       3      0        1 "
                                           "    1000 "))
      << report;
  EXPECT_NE(std::string::npos, report.find("       0.0  1.312     0.750\n           2 warm "))
      << report;
  EXPECT_NE(std::string::npos, report.find("\nsilent     1 cold ")) << report;
  EXPECT_NE(std::string::npos, report.find("  1.312       n/a\n")) << report;
  for (replay_result &r : results) replay_result_free(&r);
}

}  // namespace
