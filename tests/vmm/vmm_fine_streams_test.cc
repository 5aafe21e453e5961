// vmm (fine placement) across streams and graph capture, on the
// simulation: reuse of another stream's memory once its work is done, a
// GPU-side wait when it is pending, record_stream, lazy events with
// streams_outlive_resource, and growth during a capture in relaxed mode.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/vmm/vmm_fine_fixture.h"

namespace {

using gmr_test::FineConfig;
using gmr_test::kPage;
using gmr_test::Stats;
using gmr_test::VmmCalls;

class VmmFineStreams : public gmr_test::FineTest {
 protected:
  gmr_stream a_ = nullptr, b_ = nullptr;
  void SetUp() override {
    FineTest::SetUp();
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a_));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b_));
  }
  void TearDown() override {
    if (pool_ != nullptr) {
      gmr_test::ExpectInvariants(pool_);
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
      pool_ = nullptr;
    }
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a_));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b_));
    FineTest::TearDown();
  }
};

TEST_F(VmmFineStreams, AnotherStreamsMemoryIsReusedOnceItsWorkIsDone) {
  Make();
  void *p = Alloc(3 * kPage, a_);
  Free(p, 3 * kPage, a_);
  const uint64_t records = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD);
  EXPECT_EQ(1u, records) << "a free on a created stream records its event (RMM's rule)";
  void *q = Alloc(3 * kPage, b_);
  EXPECT_EQ(p, q) << "A's work is done: B takes the memory";
  EXPECT_EQ(3 * kPage, Held());
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(b_));
  Free(q, 3 * kPage, b_);
}

TEST_F(VmmFineStreams, PendingMemoryOfAnotherStreamIsTakenWithAGpuSideWait) {
  Make();
  void *p = Alloc(3 * kPage, a_);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  Free(p, 3 * kPage, a_);
  void *q = Alloc(2 * kPage, b_);
  EXPECT_EQ(p, q) << "no new memory: B waits for A on the GPU";
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(b_));
  EXPECT_EQ(3 * kPage, Held());
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
  Free(q, 2 * kPage, b_);
}

// B needs 4 pages side by side while A's 3 free pages may still be in use by
// A's work. Without a wait they are neither moved nor handed to B in place;
// a growth that would pass the remap threshold waits for the device once
// (the host runs ahead of the GPU, so freed memory is mostly pending), and
// only then moves them.
TEST_F(VmmFineStreams, MemoryOfAPendingStreamMovesOnlyAfterTheDeviceIsDone) {
  Make();
  void *a = Alloc(3 * kPage, a_);
  void *fence = Alloc(kPage, b_);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  Free(a, 3 * kPage, a_);
  const uint64_t syncs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  void *big = Alloc(4 * kPage, b_);
  EXPECT_EQ(syncs + 1, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE));
  EXPECT_GT(Stats(pool_).unmap_count, 0u) << "A's pages, done after the wait, moved to B";
  EXPECT_LE(Held(), 6 * kPage);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
  Free(big, 4 * kPage, b_);
  Free(fence, kPage, b_);
}

TEST_F(VmmFineStreams, MemoryOfAPendingStreamDoesNotMoveWhenTheWaitFails) {
  Make();
  void *a = Alloc(3 * kPage, a_);
  void *fence = Alloc(kPage, b_);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  Free(a, 3 * kPage, a_);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, 1,
                                                cudaErrorUnknown));
  void *big = Alloc(4 * kPage, b_);  // grows instead
  EXPECT_EQ(0u, Stats(pool_).unmap_count);
  EXPECT_NE(a, big);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
  Free(big, 4 * kPage, b_);
  Free(fence, kPage, b_);
}

TEST_F(VmmFineStreams, RecordStreamHoldsMemoryUntilTheOtherStreamIsDone) {
  Make();
  void *p = Alloc(5000, a_);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, true));
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, b_));
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, b_)) << "twice is once";
  Free(p, 5000, a_);
  void *q = Alloc(5000, a_);
  EXPECT_NE(p, q) << "B may still use it";
  std::vector<gmr_vmm_pool_region> v = gmr_test::Regions(pool_);
  EXPECT_TRUE(v[0].pending);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, false));
  Free(q, 5000, a_);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(kPage, released) << "B done: the block was free again and its page went back";
  int outside = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_record_stream(r_, &outside, b_));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_record_stream(r_, p, b_));
}

TEST_F(VmmFineStreams, StreamsThatOutliveThePoolRecordOnlyWhenAnotherStreamNeedsTheMemory) {
  gmr_vmm_pool_resource_config c = FineConfig();
  c.streams.streams_outlive_resource = true;
  Make(c);
  for (int i = 0; i < 10; ++i) Free(Alloc(kPage, a_), kPage, a_);
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD)) << "no record per free";
  void *q = Alloc(kPage, b_);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD))
      << "B wanted A's memory: A's event recorded once";
  EXPECT_EQ(kPage, Held());
  Free(q, kPage, b_);
}

TEST_F(VmmFineStreams, GrowthDuringACaptureMapsInRelaxedModeAndTouchesNoStream) {
  Make();
  void *pending = Alloc(2 * kPage, a_);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  Free(pending, 2 * kPage, a_);
  const uint64_t records = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(b_));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r_, 3 * kPage, 0, b_, &p, &f)) << f.message;
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 100, 0, b_, &q)) << "a plain allocate is served too";
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode()) << "global mode restored";
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(b_));
  EXPECT_NE(pending, p) << "A's pending memory was left alone";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 100, 0, b_));
  EXPECT_EQ(records, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD))
      << "nothing recorded during the capture";
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(b_, &g)) << "the capture was not invalidated";
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
  void *other = Alloc(100, a_);
  EXPECT_NE(q, other) << "freed during B's capture without an event: B's only";
  Free(other, 100, a_);
  Free(p, 3 * kPage, b_);
}

TEST_F(VmmFineStreams, AFailedSwitchToRelaxedModeChangesNothing) {
  Make();
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(b_));
  const uint64_t calls = VmmCalls();
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_THREAD_EXCHANGE_CAPTURE_MODE, 0, 1,
                                                cudaErrorUnknown));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_capturing(r_, kPage, 0, b_, &p, &f));
  EXPECT_EQ(calls, VmmCalls());
  EXPECT_EQ(0u, Held());
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(b_, &g));
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
}

TEST_F(VmmFineStreams, ThreadsAllocateAndFreeConcurrently) {
  gmr_vmm_pool_resource_config c = FineConfig(512);
  c.growth_percent = 25;
  c.handle_divisor = 32;
  c.remap_permille = 20;
  Make(c);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      gmr_stream s = t % 2 == 0 ? a_ : b_;
      std::vector<std::pair<unsigned char *, size_t>> mine;
      unsigned x = 77u + static_cast<unsigned>(t);
      for (int i = 0; i < 300; ++i) {
        x = x * 1103515245u + 12345u;
        if (mine.size() < 8 && (mine.empty() || x % 3 != 0)) {
          size_t bytes = 256 + (x >> 7) % (2 * kPage);
          void *p = nullptr;
          if (gmr_resource_allocate(r_, bytes, 0, s, &p) != GMR_OK) {
            failures++;
            continue;
          }
          std::memset(p, t + 1, bytes);
          mine.emplace_back(static_cast<unsigned char *>(p), bytes);
        } else {
          auto [p, bytes] = mine.back();
          mine.pop_back();
          for (size_t k = 0; k < bytes; k += 4093) {
            if (p[k] != t + 1) failures++;
          }
          if (gmr_resource_deallocate(r_, p, bytes, 0, s) != GMR_OK) failures++;
        }
      }
      for (auto [p, bytes] : mine) {
        if (gmr_resource_deallocate(r_, p, bytes, 0, s) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
}

}  // namespace
