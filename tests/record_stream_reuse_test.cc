// record_stream reuse with PyTorch's semantics (issue 20), for every
// resource that honours record_stream by holding the block back: pool,
// fixed_block and vmm. A block freed with a
// pending use on another stream is not reused while that use is pending;
// once it has completed, the next request of the same size on the
// allocating stream gets the block back, so a record_stream-heavy loop holds
// no more memory than its first iteration.
#include <gtest/gtest.h>

#include <string>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"

namespace {

struct Case {
  const char *name;
  const char *spec;
  size_t bytes;
};

// Requests that leave room in the first growth, so that a resource that
// handed out other memory instead of the block would show it at once.
const Case kCases[] = {
    {"pool", "pool(min_growth=8MiB) > cuda", size_t{1} << 20},
    {"fixed_block", "fixed_block(block=1MiB, blocks_per_chunk=8) > cuda", size_t{1} << 20},
    {"vmm", "vmm(growth_percent=0)", size_t{1} << 20},
    {"vmm_small", "vmm(growth_percent=0)", 5000},
    {"vmm_pages_small_path", "vmm_pages", 5000},  // vmm_pages: the same engine, in chunks
};

class RecordStreamReuse : public gmr_test::SimTest,
                          public ::testing::WithParamInterface<Case> {
 protected:
  gmr_stack *stack_ = nullptr;
  gmr_resource *r_ = nullptr;
  gmr_stream a_ = nullptr, b_ = nullptr;

  void SetUp() override {
    gmr_test::SimTest::SetUp();
    gmr_spec_error error;
    ASSERT_EQ(GMR_OK, gmr_stack_create(GetParam().spec, &stack_, &error)) << error.message;
    r_ = gmr_stack_as_resource(stack_);
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a_));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b_));
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, false));
    if (stack_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack_));
    }
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a_));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b_));
    gmr_test::SimTest::TearDown();
  }
  void *Alloc(gmr_stream s) {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, GetParam().bytes, 0, s, &p, &f)) << f.message;
    return p;
  }
  size_t Held() {
    gmr_footprint fp;
    EXPECT_EQ(GMR_OK, gmr_resource_get_footprint(r_, &fp));
    return fp.held_bytes;
  }
};

// PyTorch's loop: a tensor made on A, used on B (record_stream), freed, B
// synchronised; the next tensor of that size on A reuses its block.
TEST_P(RecordStreamReuse, TheBlockComesBackOnceTheRecordedUseCompleted) {
  const size_t n = GetParam().bytes;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, true));  // B's work waits for a sync
  void *p = Alloc(a_);
  ASSERT_NE(nullptr, p);
  size_t held = 0;
  for (int i = 0; i < 100; ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, b_));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, n, 0, a_));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(b_));  // the recorded use completed
    void *q = Alloc(a_);
    ASSERT_EQ(p, q) << "a block whose recorded use completed was not reused";
    if (i == 0) held = Held();
    ASSERT_EQ(held, Held()) << "memory held grew under a record_stream loop";
  }
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, n, 0, a_));
}

// The other half of the contract: while the recorded use is pending, the
// block is not handed out, not even to the allocating stream.
TEST_P(RecordStreamReuse, TheBlockStaysBackWhileTheRecordedUseIsPending) {
  const size_t n = GetParam().bytes;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, true));
  void *p = Alloc(a_);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, b_));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, n, 0, a_));
  void *q = Alloc(a_);
  EXPECT_NE(p, q) << "reused while B may still read it";
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(b_));
  void *t = Alloc(a_);
  EXPECT_EQ(p, t) << "B is done: the block is free again";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, n, 0, a_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, t, n, 0, a_));
}

INSTANTIATE_TEST_SUITE_P(Resources, RecordStreamReuse, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.name);
                         });

}  // namespace
