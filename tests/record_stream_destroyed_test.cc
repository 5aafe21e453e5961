// Issue 30: a stream given to record_stream and destroyed before the free.
// PyTorch's rule is that it must live until the free; gmr's pool tolerates
// it, and so must every resource that honours record_stream by holding the
// block back: the free succeeds (a second one is a double free), and the
// memory is never handed out before the work the destroyed stream had
// queued is done (the driver runs it after cudaStreamDestroy returns).
// vmm and the small path of vmm_pages kept refusing such a
// free: the record failed, then the host wait on the dead stream failed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"

namespace {

struct Case {
  const char *name;
  const char *spec;
  size_t bytes;
};

// pool and fixed_block hold the block back until a later synchronisation;
// vmm's engine waits for the destroyed stream at the free itself.
const Case kHoldBack[] = {
    {"pool", "pool(min_growth=8MiB) > cuda", size_t{1} << 20},
    {"fixed_block", "fixed_block(block=1MiB, blocks_per_chunk=8) > cuda", size_t{1} << 20},
};
const Case kWaitAtFree[] = {
    {"vmm", "vmm(growth_percent=0)", size_t{1} << 20},
    {"vmm_small", "vmm(growth_percent=0)", 5000},
    {"vmm_pages_small_path", "vmm_pages", 5000},  // vmm_pages: the same engine, in chunks
};

class RecordStreamDestroyed : public gmr_test::SimTest,
                              public ::testing::WithParamInterface<Case> {
 protected:
  RecordStreamDestroyed() {
    // The resources record an event on the recorded stream at the free, as
    // PyTorch does: on a destroyed one that call names a dead handle, which
    // the simulation counts. The tests bound how often (below).
    expect_stale_handles_ = true;
  }
  void SetUp() override {
    gmr_test::SimTest::SetUp();
    gmr_spec_error error;
    ASSERT_EQ(GMR_OK, gmr_stack_create(GetParam().spec, &stack_, &error)) << error.message;
    r_ = gmr_stack_as_resource(stack_);
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a_));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&c_));
  }
  void TearDown() override {
    if (stack_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack_));
    }
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a_));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(c_));
    gmr_test::SimTest::TearDown();
  }
  void *Alloc(gmr_stream s) {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, GetParam().bytes, 0, s, &p, &f)) << f.message;
    return p;
  }
  // p allocated on A, used on B (record_stream) by work still running when
  // B is destroyed; *use marks that work.
  void *UsedOnADestroyedStream(gmr_cuda_sim_mark *use) {
    gmr_stream b = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_create(&b));
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold_beyond_destroy(b));
    void *p = Alloc(a_);
    EXPECT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, b));
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_stream(b, use));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b));
    return p;
  }
  // Whether `q` (just allocated on `s`) may be p's memory: only once the
  // destroyed stream's use is done or ordered before s.
  static void ExpectNotEarly(const void *p, const void *q, gmr_cuda_sim_mark use, gmr_stream s) {
    if (p != q) return;
    bool done = false, ordered = false;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_query(use, &done));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_ordered_before(use, s, &ordered));
    EXPECT_TRUE(done || ordered) << "handed out while the destroyed stream may still use it";
  }
  gmr_stack *stack_ = nullptr;
  gmr_resource *r_ = nullptr;
  gmr_stream a_ = nullptr, c_ = nullptr;
};

TEST_P(RecordStreamDestroyed, TheFreeSucceedsAndTheMemoryWaitsForTheStreamsWork) {
  const size_t n = GetParam().bytes;
  gmr_cuda_sim_mark use = 0;
  void *p = UsedOnADestroyedStream(&use);
  const uint64_t stale = gmr_cuda_sim_get_stale_handle_count();
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, n, 0, a_));
  EXPECT_LE(gmr_cuda_sim_get_stale_handle_count() - stale, 2u)
      << "the free names the dead stream no more than the pool does (its capture status, the "
         "record)";
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, n, 0, a_));
  void *q = Alloc(a_);
  ExpectNotEarly(p, q, use, a_);
  void *t = Alloc(c_);
  ExpectNotEarly(p, t, use, c_);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, n, 0, a_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, t, n, 0, c_));
  // Not lost: after a synchronisation everything goes back.
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r_, &fp));
  EXPECT_EQ(0u, fp.held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_check(r_));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_release(use));
}

// Where the free itself waits (one device synchronisation), a refused
// synchronisation refuses the free and changes nothing: the memory stays
// the caller's, with its record_stream use, and the free can be repeated.
class RecordStreamDestroyedWait : public RecordStreamDestroyed {};

TEST_P(RecordStreamDestroyedWait, ARefusedWaitRefusesTheFreeAndChangesNothing) {
  const size_t n = GetParam().bytes;
  gmr_cuda_sim_mark use = 0;
  void *p = UsedOnADestroyedStream(&use);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, 1,
                                                999 /* cudaErrorUnknown */));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_deallocate(r_, p, n, 0, a_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_EQ(GMR_OK, gmr_resource_check(r_));
  bool done = true;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_query(use, &done));
  EXPECT_FALSE(done) << "nothing waited for the destroyed stream's work";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, n + 256, 0, a_))
      << "still live";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, n, 0, a_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_query(use, &done));
  EXPECT_TRUE(done) << "the free waited for it";
  void *q = Alloc(c_);
  ExpectNotEarly(p, q, use, c_);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, n, 0, c_));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_release(use));
}

std::string CaseName(const ::testing::TestParamInfo<Case> &info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(HoldBack, RecordStreamDestroyed, ::testing::ValuesIn(kHoldBack),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(WaitAtFree, RecordStreamDestroyed, ::testing::ValuesIn(kWaitAtFree),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(WaitAtFree, RecordStreamDestroyedWait, ::testing::ValuesIn(kWaitAtFree),
                         CaseName);

}  // namespace
