// Frees that meet a CUDA fault (issue 20): a failed cudaEventCreate,
// cudaEventRecord or cudaGetDevice at a free is absorbed, as gmr's pool and
// fine placement absorb it. The free returns GMR_OK and releases the memory
// with exact books, and the memory is never reused before the work that may
// still use it is done: the pool waits for the stream on the host instead
// of recording (cudaStreamSynchronize), or, when even that fails, keeps the
// memory for the freeing stream alone (stream order). Only a used stream
// (record_stream) that can be neither recorded on nor waited for makes the
// free fail, releasing nothing.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

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
using gmr_test::Regions;
using gmr_test::Stats;

uint64_t HostWaits() { return gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_SYNCHRONIZE); }

class VmmPoolFreeFaults : public gmr_test::SimTest {
 protected:
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;
  gmr_stream a_ = nullptr, b_ = nullptr;

  void Make(gmr_test::Placement placement = gmr_test::Placement::kPages) {
    gmr_vmm_pool_resource_config c = gmr_test::TestConfig(16);
    c.growth_percent = 0;
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_test::CreateVmm(placement, &c, &pool_, &f)) << f.message;
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
  }
  void SetUp() override {
    gmr_test::SimTest::SetUp();
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a_));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b_));
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, false));
    if (pool_ != nullptr) {
      gmr_test::ExpectInvariants(pool_);
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    }
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a_));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b_));
    gmr_test::SimTest::TearDown();
  }
  void *Alloc(size_t bytes, gmr_stream s) {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, bytes, 0, s, &p, &f)) << f.message;
    return p;
  }
  void Fail(gmr_cuda_call call, uint64_t skip, uint64_t count, int error) {
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(call, skip, count, error));
  }
};

struct Fault {
  gmr_cuda_call call;
  int error;
};

const Fault kFaults[] = {
    {GMR_CUDA_CALL_EVENT_CREATE, cudaErrorMemoryAllocation},  // the pool has no spare event yet
    {GMR_CUDA_CALL_EVENT_RECORD, cudaErrorLaunchFailure},
    {GMR_CUDA_CALL_GET_DEVICE, cudaErrorUnknown},  // the pool's device cannot be made current
};

// Whole pages: each fault at the free of a region whose stream is still at
// work. The pool waits for A on the host, so B may then take the memory.
TEST_F(VmmPoolFreeFaults, EachFaultAtAFreeIsAbsorbedWithTheStreamWaitedFor) {
  for (const Fault &fault : kFaults) {
    SCOPED_TRACE(gmr_cuda_call_name(fault.call));
    Make();
    void *p = Alloc(2 * kPage, a_);
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));  // A's work still uses p
    const uint64_t waits = HostWaits();
    const uint64_t calls = gmr_cuda_sim_get_call_count(fault.call);
    Fail(fault.call, 0, 1, fault.error);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 2 * kPage, 0, a_));
    EXPECT_LT(calls, gmr_cuda_sim_get_call_count(fault.call)) << "the free met the fault";
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    // Exact books: released, free, still mapped; a second free is a double free.
    gmr_vmm_pool_resource_stats st = Stats(pool_);
    EXPECT_EQ(0u, st.live_bytes);
    EXPECT_EQ(0u, st.live_count);
    EXPECT_EQ(2 * kPage, st.free_bytes);
    EXPECT_EQ(2 * kPage, st.mapped_bytes);
    EXPECT_EQ("[-2]", Layout(pool_));
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 2 * kPage, 0, a_));
    gmr_test::ExpectInvariants(pool_);
    // Instead of an event, the free waited for A: nothing is pending.
    EXPECT_EQ(waits + 1, HostWaits());
    EXPECT_FALSE(Regions(pool_)[0].pending);
    void *q = Alloc(2 * kPage, b_);
    EXPECT_EQ(p, q) << "A's work up to the free is done: B takes the memory, no new page";
    EXPECT_EQ(2 * kPage, Stats(pool_).mapped_bytes);
    EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(b_));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 2 * kPage, 0, b_));
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
    gmr_test::ExpectInvariants(pool_);
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    pool_ = nullptr;
  }
}

// When the stream cannot be waited for either, the memory stays the freeing
// stream's (reusable in stream order), as a free during a capture: another
// stream never gets it while the stream may still be at work.
TEST_F(VmmPoolFreeFaults, AFreeThatCanNeitherRecordNorWaitKeepsTheMemoryForItsStream) {
  Make();
  void *p = Alloc(2 * kPage, a_);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  Fail(GMR_CUDA_CALL_EVENT_RECORD, 0, 1, cudaErrorLaunchFailure);
  Fail(GMR_CUDA_CALL_STREAM_SYNCHRONIZE, 0, 1, cudaErrorLaunchFailure);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 2 * kPage, 0, a_));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_EQ("[-2]", Layout(pool_));
  EXPECT_EQ(0u, Stats(pool_).live_bytes);
  EXPECT_TRUE(Regions(pool_)[0].pending);
  void *q = Alloc(2 * kPage, b_);
  EXPECT_NE(p, q) << "B got memory A's work may still use";
  EXPECT_EQ("[-2][+2]", Layout(pool_, q));
  void *t = Alloc(2 * kPage, a_);
  EXPECT_EQ(p, t) << "A's own later work is ordered after the free: A reuses it";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 2 * kPage, 0, b_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, t, 2 * kPage, 0, a_));
}

// record_stream: the event on the used stream B cannot be recorded, so the
// free waits for B on the host; only when B cannot be waited for either
// does the free fail, releasing nothing.
TEST_F(VmmPoolFreeFaults, AUsedStreamThatCannotBeRecordedOnIsWaitedFor) {
  Make();
  void *p = Alloc(2 * kPage, a_);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, b_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, true));  // B still reads p
  // The free records A's event first, then B's.
  Fail(GMR_CUDA_CALL_EVENT_RECORD, 1, 1, cudaErrorLaunchFailure);
  Fail(GMR_CUDA_CALL_STREAM_SYNCHRONIZE, 0, 1, cudaErrorLaunchFailure);
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_deallocate(r_, p, 2 * kPage, 0, a_));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_EQ("[2]", Layout(pool_)) << "nothing released";
  EXPECT_EQ(2 * kPage, Stats(pool_).live_bytes);
  gmr_test::ExpectInvariants(pool_);
  const uint64_t waits = HostWaits();
  Fail(GMR_CUDA_CALL_EVENT_RECORD, 1, 1, cudaErrorLaunchFailure);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 2 * kPage, 0, a_));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_EQ(waits + 1, HostWaits()) << "B's use was waited for";
  EXPECT_EQ("[-2]", Layout(pool_));
  void *q = Alloc(2 * kPage, a_);
  EXPECT_EQ(p, q) << "B's use is over: the memory is free again";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 2 * kPage, 0, a_));
}

// Small blocks (vmm_pages' small path) and vmm absorb the same faults at
// a free with a record_stream use.
TEST_F(VmmPoolFreeFaults, SmallBlocksAndFinePlacementAbsorbTheSameFaults) {
  for (gmr_test::Placement placement : {gmr_test::Placement::kPages, gmr_test::Placement::kFine}) {
    for (const Fault &fault : kFaults) {
      SCOPED_TRACE(std::string(gmr_cuda_call_name(fault.call)) +
                   (placement == gmr_test::Placement::kFine ? " vmm" : " small path"));
      Make(placement);
      void *p = Alloc(5000, a_);
      ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, b_));
      ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, true));
      const uint64_t waits = HostWaits();
      Fail(fault.call, 0, UINT64_MAX, fault.error);  // every such call of the free
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 5000, 0, a_));
      EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
      EXPECT_EQ(waits + 1, HostWaits()) << "B's use was waited for on the host";
      EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 5000, 0, a_));
      gmr_test::ExpectInvariants(pool_);
      void *q = Alloc(5000, a_);
      EXPECT_EQ(p, q) << "B's use is over: the block is free again";
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 5000, 0, a_));
      EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, false));
      gmr_test::ExpectInvariants(pool_);
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
      pool_ = nullptr;
    }
  }
}

}  // namespace
