// pool_resource over an upstream that grows allocations in place (the extend
// slot of gmr/resource.h, as vmm_pages has it): the pool grows a chunk whose
// free tail then holds the request, instead of taking a new chunk; when the
// upstream refuses, it takes a new chunk as before.
#include <gtest/gtest.h>

#include <thread>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/pool_resource.h"
#include "tests/pool_test_fixture.h"
#include "tests/support/extend_leaf.h"
#include "tests/support/sim_fixture.h"

namespace {

using namespace pool_test;

class PoolExtendTest : public PoolTest {
 protected:
  void SetUp() override {
    PoolTest::SetUp();
    leaf_ = gmr_extend_leaf_create(64 * MiB, 64);
    ASSERT_NE(nullptr, leaf_);
    up_ = gmr_extend_leaf_as_resource(leaf_);
  }
  void TearDown() override {
    for (gmr_pool_resource *p : pools_) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_pool_resource_as_resource(p)));
    }
    pools_.clear();
    EXPECT_EQ(0u, gmr_extend_leaf_live_count(leaf_)) << "the pool left upstream allocations behind";
    if (up_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_));
    }
    PoolTest::TearDown();
  }

  // A bump arena over a host buffer whose last allocation can grow in place.
  gmr_extend_leaf *leaf_ = nullptr;
  gmr_resource *up_ = nullptr;
};

TEST_F(PoolExtendTest, AChunkGrowsInPlaceMergedWithItsFreeTail) {
  gmr_resource *r = Make(small_config(4 * MiB), up_);
  void *a = Alloc(r, 3 * MiB);  // a chunk of 4 MiB: 1 MiB of free tail
  void *b = Alloc(r, 3 * MiB);  // no block of 3 MiB: the chunk grows
  EXPECT_EQ(U(a) + 3 * MiB, U(b));
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(1u, s.grow_count);
  EXPECT_EQ(1u, s.in_place_growth_count);
  // The tail now holds max(request, growth step) = 4 MiB: 4 MiB added
  // (3 MiB, rounded to the 2 MiB granularity).
  EXPECT_EQ(8 * MiB, s.held_bytes);
  EXPECT_EQ(2 * MiB, s.largest_free_block_bytes);
  EXPECT_EQ(1u, gmr_extend_leaf_allocate_count(leaf_));
  EXPECT_EQ(1u, gmr_extend_leaf_extend_count(leaf_));
  ExpectInvariants(r);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 3 * MiB, 0, nullptr));
  EXPECT_EQ(1u, Stats(r).free_block_count);  // one block over the whole grown chunk
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(8 * MiB, released);  // given back with its grown size
  EXPECT_EQ(0u, gmr_extend_leaf_live_count(leaf_));
}

TEST_F(PoolExtendTest, ARefusedExtensionMeansANewChunk) {
  for (gmr_status refusal : {GMR_ERR_UNSUPPORTED, GMR_ERR_OUT_OF_MEMORY}) {
    gmr_extend_leaf_refuse_extend(leaf_, refusal);
    gmr_pool_resource *p = nullptr;
    gmr_pool_resource_config c = small_config(4 * MiB);
    ASSERT_EQ(GMR_OK, gmr_pool_resource_create(up_, &c, &p));
    gmr_resource *r = gmr_pool_resource_as_resource(p);
    void *a = Alloc(r, 3 * MiB), *b = Alloc(r, 3 * MiB);
    gmr_pool_resource_stats s = Stats(r);
    EXPECT_EQ(2u, s.chunk_count) << gmr_status_name(refusal);
    EXPECT_EQ(0u, s.in_place_growth_count);
    EXPECT_EQ(8 * MiB, s.held_bytes);
    ExpectInvariants(r);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * MiB, 0, nullptr));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 3 * MiB, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

TEST_F(PoolExtendTest, AFreeFromAnotherArenaFindsTheGrownPart) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.arena_count = 2;
  gmr_resource *r = Make(c, up_);
  gmr_stream s = Stream();
  void *a = nullptr, *b = nullptr;
  std::thread([&] {
    a = Alloc(r, 3 * MiB, s);
    b = Alloc(r, 3 * MiB, s);  // in the grown part
  }).join();
  EXPECT_EQ(1u, Stats(r).in_place_growth_count);
  // Freed by another thread on the default stream, whose arena (that
  // thread's) does not hold them: found through the table of chunks, which
  // knows the grown size.
  std::thread([&] {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 3 * MiB, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * MiB, 0, nullptr));
  }).join();
  EXPECT_EQ(0u, Stats(r).in_use_count);
  ExpectInvariants(r);
}

}  // namespace
