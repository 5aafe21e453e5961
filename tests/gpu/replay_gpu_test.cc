// tests/gpu/replay_gpu_test.cc: the replay engine on a real GPU, with the
// bundled gpt2_train trace through cuda_device and cuda_async. Skips (with
// the reason) when the machine has no CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "gmr/device.h"
#include "tools/replay/locate.h"
#include "tools/replay/replay.h"
#include "tools/replay/stacks.h"
#include "tools/replay/timing.h"
#include "tools/replay/trace.h"

namespace {

class ReplayGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    gmr_status st = gmr_device_get_count(&count);
    if (st != GMR_OK || count == 0) {
      GTEST_SKIP() << "no CUDA device: gmr_device_get_count returned " << gmr_status_name(st)
                   << " with " << count << " devices";
    }
    ASSERT_FALSE(gmr_cuda_is_simulated());
  }
};

TEST_F(ReplayGpuTest, Gpt2TrainReplaysOnCudaDeviceAndCudaAsync) {
  char path[4096];
  char looked[8192];
  ASSERT_EQ(GMR_OK, replay_locate_bundled_trace(nullptr, "gpt2_train.csv.gz", path, sizeof path,
                                                looked, sizeof looked))
      << "looked in: " << looked;
  replay_trace *trace = nullptr;
  char err[512];
  ASSERT_EQ(GMR_OK, replay_trace_read(path, nullptr, &trace, err, sizeof err)) << err;
  const uint64_t peak_live = trace->summary.peak_live_bytes;
  ASSERT_EQ(UINT64_C(7701353160), peak_live);  // see tests/replay_test.cc
  const uint64_t overhead_ns = replay_clock_overhead_ns(1001);

  for (const char *name : {"cuda_device", "cuda_async"}) {
    SCOPED_TRACE(name);
    replay_stack *stack = nullptr;
    ASSERT_EQ(GMR_OK, replay_stack_create(name, &stack, err, sizeof err)) << err;
    replay_result r;
    EXPECT_EQ(GMR_OK, replay_run(trace, replay_stack_top(stack), overhead_ns, &r))
        << r.first_failure;
    replay_result_set_destroy_status(&r, replay_stack_destroy(stack));
    EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
    EXPECT_EQ(0u, replay_result_failure_count(&r));
    EXPECT_EQ(6179u, r.alloc_count);
    EXPECT_EQ(6176u, r.free_count);
    EXPECT_EQ(3u, r.live_at_end_count);
    ASSERT_EQ(GMR_OK, r.footprint_status);
    EXPECT_GE(r.footprint.peak_held_bytes, peak_live);
    // cuda_device counts the bytes asked for, so its peak is the trace's.
    if (std::string(name) == "cuda_device") {
      EXPECT_EQ(peak_live, r.footprint.peak_held_bytes);
    }
    // A pool may round up, but not hold twice what the trace needs.
    EXPECT_LT(r.footprint.peak_held_bytes, 2 * peak_live);
    EXPECT_LE(r.alloc_p50_ns, r.alloc_p99_ns);
    std::printf("%s: alloc p50 %llu ns p99 %llu ns, free p50 %llu ns p99 %llu ns, peak %llu B\n",
                name, (unsigned long long)r.alloc_p50_ns, (unsigned long long)r.alloc_p99_ns,
                (unsigned long long)r.free_p50_ns, (unsigned long long)r.free_p99_ns,
                (unsigned long long)r.footprint.peak_held_bytes);
    replay_result_free(&r);
  }
  replay_trace_destroy(trace);
}

}  // namespace
