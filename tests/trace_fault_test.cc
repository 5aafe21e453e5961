// Exact byte accounting on every failing path, on a real trace: the bundled
// multistream trace (PyTorch, 4 streams, 800 allocations) replayed through
// `tracking > limiting > cuda(kind=async)` on the simulation, with a failure
// injected at the k-th cudaMallocFromPoolAsync or cudaFreeAsync for sampled
// k, and with a limit below the trace's peak. After every request the
// tracking and limiting counters must equal the sums over live allocations,
// and everything must return to zero at the end.
#include <gtest/gtest.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "gmr/tracking_adaptor.h"
#include "tests/support/sim_fixture.h"
#include "tests/support/trace.h"

namespace {

struct Live {
  void *ptr;
  size_t size;
  gmr_stream stream;
};

struct Outcome {
  size_t failures = 0;
  size_t refused = 0;
  size_t failed_frees = 0;
  gmr_limiting_adaptor_stats limiting = GMR_LIMITING_ADAPTOR_STATS_INIT;
};

class TraceFault : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    char path[1024], why[256] = "";
    ASSERT_EQ(0, gmr_trace_load(gmr_trace_path("multistream.csv.gz", path, sizeof path), &trace_,
                                why))
        << why;
    ASSERT_EQ(800u, trace_.alloc_count);
    ASSERT_EQ(4u, trace_.stream_count);
    for (size_t i = 0; i < trace_.stream_count; ++i) {
      ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&streams_[i]));
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < trace_.stream_count; ++i) {
      EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(streams_[i]));
    }
    gmr_trace_free(&trace_);
    SimTest::TearDown();
  }

  // Replay the trace through `spec`; check the books after every request.
  Outcome Replay(const std::string &spec) {
    Outcome out;
    gmr_stack *stack = nullptr;
    gmr_spec_error err;
    EXPECT_EQ(GMR_OK, gmr_stack_create(spec.c_str(), &stack, &err)) << err.message;
    if (stack == nullptr) return out;
    gmr_resource *top = gmr_stack_as_resource(stack);
    gmr_tracking_adaptor *trk = gmr_tracking_adaptor_from_resource(top);
    gmr_limiting_adaptor *lim = gmr_limiting_adaptor_from_resource(
        gmr_resource_find(gmr_stack_as_resource(stack), "limiting_adaptor"));
    std::unordered_map<uint64_t, Live> live;
    std::vector<Live> retry_later;
    int64_t live_bytes = 0;
    size_t charged = 0;
    auto check = [&](size_t i) {
      gmr_tracking_adaptor_stats ts = GMR_TRACKING_ADAPTOR_STATS_INIT;
      ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(trk, &ts));
      ASSERT_EQ(live_bytes, ts.bytes.current) << "event " << i;
      ASSERT_EQ(static_cast<int64_t>(live.size() + retry_later.size()), ts.allocations.current)
          << "event " << i;
      ASSERT_EQ(charged, gmr_limiting_adaptor_get_used_bytes(lim)) << "event " << i;
    };
    for (size_t i = 0; i < trace_.count; ++i) {
      const gmr_trace_event &e = trace_.events[i];
      gmr_stream stream = streams_[e.stream];
      if (!e.is_free) {
        void *p = nullptr;
        gmr_status st = gmr_resource_allocate(top, e.size, 0, stream, &p);
        if (st == GMR_OK) {
          live[e.addr] = Live{p, e.size, stream};
          live_bytes += static_cast<int64_t>(e.size);
          charged += (e.size + 255) / 256 * 256;
        } else if (st == GMR_ERR_LIMIT_EXCEEDED) {
          out.refused++;
        } else {
          EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, st);
          out.failures++;
        }
      } else {
        auto it = live.find(e.addr);
        if (it == live.end()) continue;  // its allocation failed
        Live b = it->second;
        live.erase(it);
        gmr_status st = gmr_resource_deallocate(top, b.ptr, b.size, 0, b.stream);
        if (st == GMR_OK) {
          live_bytes -= static_cast<int64_t>(b.size);
          charged -= (b.size + 255) / 256 * 256;
        } else {
          EXPECT_EQ(GMR_ERR_CUDA, st);
          out.failed_frees++;
          retry_later.push_back(b);  // still live: nothing was released
        }
      }
      check(i);
      if (HasFatalFailure()) break;
    }
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    for (auto &b : retry_later)
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, b.ptr, b.size, 0, b.stream));
    for (auto &kv : live) {
      EXPECT_EQ(GMR_OK,
                gmr_resource_deallocate(top, kv.second.ptr, kv.second.size, 0, kv.second.stream));
    }
    gmr_tracking_adaptor_stats ts = GMR_TRACKING_ADAPTOR_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(trk, &ts));
    EXPECT_EQ(0, ts.bytes.current);
    EXPECT_EQ(0, ts.allocations.current);
    EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(lim));
    EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim, &out.limiting));
    EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
    return out;
  }

  gmr_trace trace_{};
  gmr_stream streams_[GMR_TRACE_MAX_STREAMS] = {};
};

constexpr const char *kStack = "tracking > limiting > cuda(kind=async)";

TEST_F(TraceFault, NoFaultReplaysEveryRequest) {
  Outcome o = Replay(kStack);
  EXPECT_EQ(0u, o.failures);
  EXPECT_EQ(800u, o.limiting.allocation_count);
  EXPECT_GE(o.limiting.peak_used_bytes, trace_.peak_live_bytes);
}

TEST_F(TraceFault, AllocationFailureAtTheKthUpstreamCallLosesNoByte) {
  for (uint64_t k = 0; k < 800; k += 57) {
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC, k, 1, 2));
    Outcome o = Replay(kStack);
    ASSERT_FALSE(HasFatalFailure()) << "k=" << k;
    EXPECT_EQ(1u, o.failures) << "k=" << k;
    EXPECT_EQ(799u, o.limiting.allocation_count) << "k=" << k;
    EXPECT_EQ(1u, o.limiting.upstream_failure_count) << "k=" << k;
  }
}

TEST_F(TraceFault, RetryPolicyHidesAnInjectedFailureAtTheKthCall) {
  for (uint64_t k = 5; k < 800; k += 113) {
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC, k, 1, 2));
    Outcome o = Replay("tracking > limiting(on_oom=retry) > cuda(kind=async)");
    ASSERT_FALSE(HasFatalFailure()) << "k=" << k;
    EXPECT_EQ(0u, o.failures) << "k=" << k;
    EXPECT_EQ(1u, o.limiting.oom.retry_count) << "k=" << k;
    EXPECT_EQ(1u, o.limiting.oom.recovered_count) << "k=" << k;
  }
}

TEST_F(TraceFault, FreeFailureAtTheKthUpstreamCallKeepsTheAllocationLive) {
  for (uint64_t k = 0; k < 800; k += 89) {
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_FREE_ASYNC, k, 1, 700));
    Outcome o = Replay(kStack);
    ASSERT_FALSE(HasFatalFailure()) << "k=" << k;
    EXPECT_EQ(1u, o.failed_frees) << "k=" << k;
    EXPECT_EQ(800u, o.limiting.deallocation_count) << "k=" << k;  // the retried free counts once
  }
}

TEST_F(TraceFault, LimitBelowThePeakRefusesAndIncreaseAdmitsEverything) {
  size_t limit = trace_.peak_live_bytes / 2;
  Outcome fail = Replay("tracking > limiting(limit=" + std::to_string(limit) +
                        ") > cuda(kind=async)");
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_GT(fail.refused, 0u);
  EXPECT_EQ(fail.refused, fail.limiting.refused_count);
  EXPECT_LE(fail.limiting.peak_used_bytes, limit);
  Outcome grow = Replay("tracking > limiting(limit=" + std::to_string(limit) +
                        ", on_limit=increase) > cuda(kind=async)");
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(0u, grow.refused);
  EXPECT_GT(grow.limiting.raise_count, 0u);
  EXPECT_GE(grow.limiting.limit_bytes, grow.limiting.peak_used_bytes);
  // Both at once: refusals from the limit and an injected device failure.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC, 100, 1, 2));
  Outcome both = Replay("tracking > limiting(limit=" + std::to_string(limit) +
                        ") > cuda(kind=async)");
  EXPECT_EQ(1u, both.failures);
  EXPECT_GT(both.refused, 0u);
}

}  // namespace
