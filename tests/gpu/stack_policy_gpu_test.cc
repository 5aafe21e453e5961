// tests/gpu/stack_policy_gpu_test.cc: limit and OOM policies at work on a real
// GPU. The bundled resnet50_train trace (PyTorch, peak live 2,980 MiB) is
// replayed with tools/replay's engine through
//   tracking > limiting(limit=PEAK/2, on_limit=fail|increase) > cuda(kind=async)
// and then, with the device nearly full, through on_oom=fail vs trim_retry.
// A direct experiment shows what trim_retry buys when the async pool holds
// cached memory the request needs. Every case checks the books (tracking and
// limiting back to zero) and prints one summary line for the closing note.
// Skips (with the reason) without a CUDA device.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "gmr/device.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/stack.h"
#include "gmr/tracking_adaptor.h"
#include "tools/replay/locate.h"
#include "tools/replay/replay.h"
#include "tools/replay/timing.h"
#include "tools/replay/trace.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

class StackPolicyGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    gmr_status st = gmr_device_get_count(&count);
    if (st != GMR_OK || count == 0) {
      GTEST_SKIP() << "no CUDA device: gmr_device_get_count returned " << gmr_status_name(st)
                   << " with " << count << " devices (this test needs a GPU)";
    }
    ASSERT_FALSE(gmr_cuda_is_simulated());
    char path[4096], looked[8192], err[512];
    ASSERT_EQ(GMR_OK, replay_locate_bundled_trace(nullptr, "resnet50_train.csv.gz", path,
                                                  sizeof path, looked, sizeof looked))
        << "looked in: " << looked;
    ASSERT_EQ(GMR_OK, replay_trace_read(path, nullptr, &trace_, err, sizeof err)) << err;
    peak_live_ = trace_->summary.peak_live_bytes;
    ASSERT_GT(peak_live_, 1000 * kMiB);
  }
  void TearDown() override {
    if (hog_ != nullptr) {
      EXPECT_EQ(cudaSuccess, cudaFree(hog_));
    }
    replay_trace_destroy(trace_);
  }

  struct Run {
    replay_result result{};
    gmr_limiting_adaptor_stats limiting = GMR_LIMITING_ADAPTOR_STATS_INIT;
    gmr_tracking_adaptor_stats tracking = GMR_TRACKING_ADAPTOR_STATS_INIT;
  };

  // Replay the trace through `spec`; the books must balance at the end.
  Run Replay(const std::string &spec) {
    Run run;
    gmr_stack *stack = nullptr;
    gmr_spec_error e;
    EXPECT_EQ(GMR_OK, gmr_stack_create(spec.c_str(), &stack, &e)) << e.message;
    if (stack == nullptr) return run;
    EXPECT_EQ(GMR_OK, replay_run(trace_, gmr_stack_as_resource(stack), 0, &run.result))
        << run.result.first_failure;
    gmr_limiting_adaptor *lim = gmr_limiting_adaptor_from_resource(
        gmr_resource_find(gmr_stack_as_resource(stack), "limiting_adaptor"));
    gmr_tracking_adaptor *trk = gmr_tracking_adaptor_from_resource(
        gmr_resource_find(gmr_stack_as_resource(stack), "tracking_adaptor"));
    EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim, &run.limiting));
    EXPECT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(trk, &run.tracking));
    // replay_run frees what the trace left live: nothing may stay on the books.
    EXPECT_EQ(0u, run.limiting.used_bytes);
    EXPECT_EQ(0, run.tracking.bytes.current);
    EXPECT_EQ(0, run.tracking.allocations.current);
    // The limiting layer counts every failed attempt of its upstream; the
    // OOM layer of on_oom retried all but the last of a request's.
    EXPECT_EQ(run.result.failed_alloc_count, run.limiting.refused_count +
                                                 run.limiting.upstream_failure_count -
                                                 run.limiting.oom.retry_count);
    EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
    return run;
  }

  void Print(const char *policy, const Run &r) {
    std::printf(
        "GPU policy summary: trace=resnet50_train peak_live=%.1f MiB policy=%s: failures=%zu "
        "(refused %llu, device OOM %llu) peak_used=%.1f MiB limit_raises=%llu final_limit=%s "
        "oom_retries=%llu trims=%llu trimmed=%.1f MiB recovered=%llu\n",
        peak_live_ / double(kMiB), policy, r.result.failed_alloc_count,
        (unsigned long long)r.limiting.refused_count,
        (unsigned long long)r.limiting.upstream_failure_count,
        r.limiting.peak_used_bytes / double(kMiB), (unsigned long long)r.limiting.raise_count,
        r.limiting.limit_bytes == GMR_LIMIT_NONE
            ? "none"
            : (std::to_string(r.limiting.limit_bytes / kMiB) + " MiB").c_str(),
        (unsigned long long)r.limiting.oom.retry_count,
        (unsigned long long)r.limiting.oom.trim_count,
        r.limiting.oom.trimmed_bytes / double(kMiB),
        (unsigned long long)r.limiting.oom.recovered_count);
  }

  // Take device memory with plain cudaMalloc until `leave` bytes are free.
  void HogAllBut(size_t leave) {
    size_t free_bytes = 0, total = 0;
    ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_bytes, &total));
    ASSERT_GT(free_bytes, leave + 256 * kMiB);
    ASSERT_EQ(cudaSuccess, cudaMalloc(&hog_, free_bytes - leave));
    ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_bytes, &total));
    std::printf("device pressure: %.1f MiB left free of %.1f MiB\n", free_bytes / double(kMiB),
                total / double(kMiB));
  }

  replay_trace *trace_ = nullptr;
  uint64_t peak_live_ = 0;
  void *hog_ = nullptr;
};

TEST_F(StackPolicyGpuTest, LimitBelowThePeakFailVersusIncrease) {
  const size_t limit = peak_live_ / 2;
  const std::string lim = "limit=" + std::to_string(limit);
  Run fail = Replay("tracking > limiting(" + lim + ", on_limit=fail) > cuda(kind=async)");
  Print("on_limit=fail", fail);
  EXPECT_GT(fail.limiting.refused_count, 0u);
  EXPECT_EQ(0u, fail.limiting.upstream_failure_count);
  EXPECT_LE(fail.limiting.peak_used_bytes, limit);
  replay_result_free(&fail.result);

  Run grow = Replay("tracking > limiting(" + lim + ", on_limit=increase) > cuda(kind=async)");
  Print("on_limit=increase", grow);
  EXPECT_EQ(0u, grow.result.failed_alloc_count);
  EXPECT_GT(grow.limiting.raise_count, 0u);
  EXPECT_GE(grow.limiting.limit_bytes, grow.limiting.peak_used_bytes);
  EXPECT_GE(static_cast<uint64_t>(grow.tracking.bytes.peak), peak_live_);
  replay_result_free(&grow.result);
}

TEST_F(StackPolicyGpuTest, DeviceNearlyFullFailVersusTrimRetry) {
  // Leave less than the trace needs: some requests hit a real OOM.
  HogAllBut(peak_live_ * 3 / 4);
  if (HasFatalFailure()) return;
  Run fail = Replay("tracking > limiting(on_oom=fail) > cuda(kind=async)");
  Print("on_oom=fail (device nearly full)", fail);
  EXPECT_GT(fail.limiting.upstream_failure_count, 0u);
  replay_result_free(&fail.result);
  Run trim = Replay("tracking > limiting(on_oom=trim_retry) > cuda(kind=async)");
  Print("on_oom=trim_retry (device nearly full)", trim);
  // Every device OOM went to the policy, which trimmed the pool each time.
  EXPECT_GT(trim.limiting.oom.failure_count, 0u);
  EXPECT_GT(trim.limiting.oom.trim_count, 0u);
  EXPECT_LE(trim.result.failed_alloc_count, fail.result.failed_alloc_count);
  replay_result_free(&trim.result);
}

// The pool keeps a freed block reserved (release threshold max). With the
// rest of the device taken, a larger request needs that reserve back.
TEST_F(StackPolicyGpuTest, TrimRetryGivesThePoolsCachedMemoryBackForALargerRequest) {
  for (const char *policy : {"fail", "trim_retry"}) {
    SCOPED_TRACE(policy);
    gmr_stack *stack = nullptr;
    gmr_spec_error e;
    ASSERT_EQ(GMR_OK, gmr_stack_create(
                          (std::string("limiting(on_oom=") + policy + ") > cuda(kind=async)").c_str(),
                          &stack, &e))
        << e.message;
    gmr_resource *top = gmr_stack_as_resource(stack);
    const size_t cached = 2048 * kMiB;
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, cached, 0, nullptr, &p));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top, p, cached, 0, nullptr));
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    HogAllBut(512 * kMiB);
    if (HasFatalFailure()) return;
    void *q = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    gmr_status st = gmr_resource_allocate_ex(top, cached + 256 * kMiB, 0, nullptr, &q, &f);
    gmr_limiting_adaptor_stats s = GMR_LIMITING_ADAPTOR_STATS_INIT;
    ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(gmr_limiting_adaptor_from_resource(
                                                         gmr_resource_find(top, "limiting_adaptor")),
                                                     &s));
    std::printf("GPU policy summary: cached %zu MiB in the pool, 512 MiB free, request %zu MiB, "
                "on_oom=%s: %s, trims=%llu trimmed=%.1f MiB retries=%llu\n",
                cached / kMiB, (cached + 256 * kMiB) / kMiB, policy, gmr_status_name(st),
                (unsigned long long)s.oom.trim_count, s.oom.trimmed_bytes / double(kMiB),
                (unsigned long long)s.oom.retry_count);
    if (std::string(policy) == "trim_retry") {
      EXPECT_EQ(GMR_OK, st) << f.message;
    }
    if (st == GMR_OK) {
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, q, cached + 256 * kMiB, 0, nullptr));
    }
    EXPECT_EQ(cudaSuccess, cudaFree(hog_));
    hog_ = nullptr;
    EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
  }
}

}  // namespace
