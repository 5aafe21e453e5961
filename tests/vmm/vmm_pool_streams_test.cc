// gmr_vmm_pool_resource across streams on the simulation: reuse of other
// streams' memory (completed: at once; pending: remapped with a GPU-side
// wait), zombies unmapped only after their event, record_stream, trim, and
// capture-safe growth.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/streams.h"
#include "gmr/vmm_pool_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace {

using gmr_test::kPage;
using gmr_test::Layout;
using gmr_test::Stats;

class VmmPoolStreams : public gmr_test::SimTest {
 protected:
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;
  gmr_stream a_ = nullptr, b_ = nullptr;

  void SetUp() override {
    gmr_test::SimTest::SetUp();
    gmr_vmm_pool_resource_config c = gmr_test::TestConfig(64);
    ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&c, &pool_, nullptr));
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a_));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b_));
  }
  void TearDown() override {
    gmr_test::ExpectInvariants(pool_);
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a_));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b_));
    gmr_test::SimTest::TearDown();
  }
  void *Alloc(size_t pages, gmr_stream s) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r_, pages * kPage, 0, s, &p));
    return p;
  }
  void Free(void *p, size_t pages, gmr_stream s) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, pages * kPage, 0, s));
  }
};

TEST_F(VmmPoolStreams, AnotherStreamsCompletedMemoryIsReusedWithoutWaiting) {
  void *p = Alloc(4, a_);
  Free(p, 4, a_);
  void *q = Alloc(4, b_);
  EXPECT_EQ(p, q) << "phase 1b: completed on A, so free for B";
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(b_));
  EXPECT_EQ(1u, Stats(pool_).event_query_count);
  EXPECT_EQ(0u, Stats(pool_).defrag_count);
  Free(q, 4, b_);
}

TEST_F(VmmPoolStreams, TheSameStreamReusesPendingMemoryAtOnce) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  void *p = Alloc(4, a_);
  Free(p, 4, a_);
  void *q = Alloc(2, a_);
  EXPECT_EQ(p, q) << "stream order makes it safe";
  EXPECT_EQ(0u, Stats(pool_).event_query_count);
  Free(q, 2, a_);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
}

TEST_F(VmmPoolStreams, PendingMemoryIsRemappedWithAGpuWaitAndItsOldAddressWaitsForTheEvent) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  void *old = Alloc(4, a_);
  void *fence = Alloc(1, a_);
  std::memset(old, 0x77, 4 * kPage);
  Free(old, 4, a_);
  EXPECT_EQ("[-4][1]", Layout(pool_));

  // B needs 4 pages: A's are pending, so they are double-mapped after the
  // fence, B waits for A's event on the GPU, and the old addresses remain a
  // zombie while A's work may still use them.
  void *p = Alloc(4, b_);
  EXPECT_EQ("[~4][1][+4]", Layout(pool_, p));
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(b_));
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(1u, s.defrag_count);
  EXPECT_EQ(4u, s.remapped_page_count);
  EXPECT_EQ(5 * kPage, s.mapped_bytes) << "no new pages";
  gmr_cuda_sim_vmm_mapping at_old, at_new;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(static_cast<char *>(old) + 3 * kPage, &at_old));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(static_cast<char *>(p) + 3 * kPage, &at_new));
  EXPECT_TRUE(at_old.mapped);
  EXPECT_EQ(at_old.physical_id, at_new.physical_id) << "one page, two addresses";
  EXPECT_EQ(0x77, static_cast<unsigned char *>(p)[3 * kPage + 5]);

  // While A is held, later allocations leave the zombie alone.
  const uint64_t unmaps = s.unmap_count;
  void *more = Alloc(1, b_);
  EXPECT_EQ(unmaps, Stats(pool_).unmap_count);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(old, &at_old));
  EXPECT_TRUE(at_old.mapped);

  // A's work completes: the next allocation unmaps the old addresses.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
  void *last = Alloc(1, b_);
  EXPECT_EQ(unmaps + 4, Stats(pool_).unmap_count);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(static_cast<char *>(old) + kPage, &at_old));
  EXPECT_FALSE(at_old.mapped);
  EXPECT_TRUE(at_old.reserved);
  EXPECT_EQ("[+1][*3][1][4][1]", Layout(pool_, last)) << "the smallest hole that fits";
  Free(fence, 1, a_);
  Free(p, 4, b_);
  Free(more, 1, b_);
  Free(last, 1, b_);
}

TEST_F(VmmPoolStreams, AStreamDestroyedRightAfterItsFreeIsNeverTouchedAgain) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  void *p = Alloc(2, s);
  Free(p, 2, s);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
  void *q = Alloc(2, b_);
  EXPECT_EQ(p, q);
  Free(q, 2, b_);
  // The fixture fails the test if a CUDA call named the dead stream.
}

TEST_F(VmmPoolStreams, TrimGivesFreePagesBackToTheDeviceAfterTheirEvents) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  void *p = Alloc(3, a_);
  void *keep = Alloc(1, b_);
  Free(p, 3, a_);
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(4 * kPage, u.used_bytes);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(3 * kPage, released);
  EXPECT_EQ(1u, Stats(pool_).event_synchronize_count) << "A's event was waited for";
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(kPage, u.used_bytes) << "the device has the pages back";
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(GMR_OK, gmr_device_get_memory_info(&free_bytes, &total_bytes));
  EXPECT_EQ(total_bytes - kPage, free_bytes);
  EXPECT_EQ("[*3][1]", Layout(pool_));
  Free(keep, 1, b_);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
}

TEST_F(VmmPoolStreams, RecordStreamHoldsMemoryBackUntilTheOtherStreamIsDone) {
  gmr_stream u = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&u));
  void *p = Alloc(2, a_);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, u));
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, u)) << "twice is once";
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(u, true));
  Free(p, 2, a_);
  // A's own next request must not get the block while U may still use it.
  void *q = Alloc(2, a_);
  EXPECT_NE(p, q);
  std::vector<gmr_vmm_pool_region> regions = gmr_test::Regions(pool_);
  EXPECT_TRUE(regions[0].pending);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(u, false));
  Free(q, 2, a_);
  void *again = Alloc(4, a_);
  EXPECT_EQ(p, again) << "U done: the two free regions merged and serve 4 pages";
  Free(again, 4, a_);
  int x = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_record_stream(r_, &x, u));
  // Small blocks (the small path) honour record_stream the same way.
  void *small = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 100, 0, a_, &small));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(u, true));
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(r_, small, u));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, small, 100, 0, a_));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_record_stream(r_, small, u));
  void *small2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 100, 0, a_, &small2));
  EXPECT_NE(small, small2) << "U may still use the small block";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, small2, 100, 0, a_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(u, false));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(0u, Stats(pool_).live_count) << "U done: the small block was free again, and its "
                                            "chunk went back";
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(u));
}

TEST_F(VmmPoolStreams, GrowthDuringCaptureMapsPagesInRelaxedModeAndTouchesNoStream) {
  // A pending region of another stream exists: capture must not wait for it.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  void *pending = Alloc(2, a_);
  void *fence = Alloc(1, a_);
  Free(pending, 2, a_);
  const uint64_t records = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD);

  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(b_));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r_, 3 * kPage, 0, b_, &p, &f)) << f.message;
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kPage, 0, b_, &q))
      << "a plain allocate takes the same path";
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode()) << "global mode restored";
  EXPECT_EQ(records, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD));
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(b_));
  EXPECT_EQ("[-2][1][+3][1]", Layout(pool_, p)) << "A's pending pages were left alone";
  // A free during the capture records nothing: reusable by B only.
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, kPage, 0, b_));
  EXPECT_EQ(records, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(b_, &g)) << "the capture was not invalidated";
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));

  void *other = Alloc(1, a_);
  EXPECT_NE(q, other) << "freed in capture without an event: not for A";
  void *same = Alloc(1, b_);
  EXPECT_EQ(q, same);
  Free(same, 1, b_);
  Free(other, 1, a_);
  Free(p, 3, b_);
  Free(fence, 1, a_);
}

// Small requests during a capture: the small path grows by a chunk of whole
// pages in relaxed mode, with no stream-ordered call.
TEST_F(VmmPoolStreams, SmallRequestsGrowDuringACapture) {
  const uint64_t records = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(b_));
  void *p = nullptr, *q = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r_, 300, 0, b_, &p, &f)) << f.message;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 5000, 0, b_, &q))
      << "a plain allocate takes the same path";
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode()) << "global mode restored";
  EXPECT_EQ(2u, Stats(pool_).small_live_count);
  EXPECT_EQ(1u, Stats(pool_).live_count) << "one chunk of the small path";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 5000, 0, b_));
  EXPECT_EQ(records, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(b_, &g)) << "the capture was not invalidated";
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 300, 0, b_));
}

TEST_F(VmmPoolStreams, AFailedSwitchToRelaxedModeChangesNothing) {
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(b_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_THREAD_EXCHANGE_CAPTURE_MODE, 0, 1,
                                                cudaErrorUnknown));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_capturing(r_, kPage, 0, b_, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "cudaThreadExchangeStreamCaptureMode")) << f.message;
  EXPECT_EQ("", Layout(pool_));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(b_, &g));
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
}

}  // namespace
