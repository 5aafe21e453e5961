// pool_resource growth: geometric chunks, the maximum, upstream failures and
// their retries, release on growth; trim and destroy.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/host_resource.h"
#include "gmr/pool_resource.h"
#include "tests/pool_test_fixture.h"
#include "tests/support/sim_fixture.h"

namespace {

using namespace pool_test;

// ---- growth -----------------------------------------------------------------

TEST_F(PoolTest, GeometricGrowthFollowsThePolicy) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 1;
  c.min_growth_bytes = 2 * MiB;
  c.max_growth_bytes = 8 * MiB;
  c.growth_percent = 50;
  c.release_on_growth = false;
  gmr_resource *r = Make(c);
  std::vector<size_t> held_after_growth;
  std::vector<void *> live;
  for (int i = 0; i < 40; ++i) {
    size_t before = Stats(r).held_bytes;
    live.push_back(Alloc(r, MiB));
    size_t after = Stats(r).held_bytes;
    if (after != before) held_after_growth.push_back(after / MiB);
  }
  // step = held/2 clamped to [2, 8] MiB, rounded up to 2 MiB:
  // 0->2, 2->4, 4->6, 6->10 (3 -> 4), 10->16 (5 -> 6), 16->24, 24->32, 32->40
  EXPECT_EQ((std::vector<size_t>{2, 4, 6, 10, 16, 24, 32, 40}), held_after_growth);
  // A request larger than the step gets a chunk of its own size.
  void *big = Alloc(r, 21 * MiB);
  EXPECT_EQ(40 * MiB + 22 * MiB, Stats(r).held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, big, 21 * MiB, 0, nullptr));
  for (void *p : live) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, nullptr));
  ExpectInvariants(r);
}

TEST_F(PoolTest, MaximumPoolBytesIsNeverPassed) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.maximum_pool_bytes = 6 * MiB;
  gmr_resource *r = Make(c);
  void *a = Alloc(r, 3 * MiB);
  EXPECT_EQ(4 * MiB, Stats(r).held_bytes);
  void *b = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 3 * MiB, 0, nullptr, &b, &f));
  EXPECT_EQ(nullptr, b);
  EXPECT_EQ(r, f.where);
  EXPECT_NE(nullptr, std::strstr(f.message, "maximum_pool_bytes")) << f.message;
  void *d = Alloc(r, 2 * MiB);  // what is left below the maximum serves it
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(6 * MiB, s.held_bytes);
  EXPECT_EQ(2u, s.chunk_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, d, 2 * MiB, 0, nullptr));
  ExpectInvariants(r);
}

// Issue 13: a refused growth falls back to exactly the request at once (a
// smaller step would still overshoot a tight upstream; it used to halve).
TEST_F(PoolTest, UpstreamOutOfMemoryRetriesSmallerChunks) {
  gmr_resource *r = Make(small_config(64 * MiB));
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorMemoryAllocation));
  void *p = Alloc(r, MiB);
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(MiB, s.held_bytes);  // 64 MiB failed, exactly the request did not
  EXPECT_EQ(1u, s.upstream_failure_count);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, nullptr));
  ExpectInvariants(r);
}

TEST_F(PoolTest, UpstreamOutOfMemoryRetriesDownToTheRequestThenFailsCleanly) {
  gmr_resource *r = Make(small_config(64 * MiB));
  // 64 MiB fails; exactly the request (1 MiB) succeeds.
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorMemoryAllocation));
  void *p = Alloc(r, MiB);
  EXPECT_EQ(MiB, Stats(r).held_bytes);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, nullptr));

  // Everything fails: the request fails with the upstream's record, and the
  // pool holds what it held before (the 1 MiB chunk, free: too small).
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, UINT64_MAX,
                                                cudaErrorMemoryAllocation));
  void *q = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 3 * MiB, 0, nullptr, &q, &f));
  EXPECT_EQ(nullptr, q);
  EXPECT_EQ(upstream_, f.where);
  EXPECT_EQ(int{cudaErrorMemoryAllocation}, f.cuda_error);
  gmr_pool_resource_stats s = Stats(r);
  // Before giving up, the wholly free 1 MiB chunk went back (PyTorch's "free
  // cached blocks and retry").
  EXPECT_EQ(0u, s.held_bytes);
  EXPECT_EQ(0u, s.chunk_count);
  EXPECT_EQ(0u, s.in_use_count);
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  ExpectInvariants(r);
}

TEST_F(PoolTest, OtherUpstreamErrorsAreNotRetried) {
  gmr_resource *r = Make(small_config(64 * MiB));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorLaunchFailure));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_ex(r, MiB, 0, nullptr, &p, &f));
  EXPECT_EQ(int{cudaErrorLaunchFailure}, f.cuda_error);
  EXPECT_EQ(upstream_, f.where);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(0u, Stats(r).held_bytes);
}

TEST_F(PoolTest, OutOfMemoryGivesBackFreeChunksAndRetries) {
  gmr_resource *r = Make(small_config(2 * MiB));
  void *a = Alloc(r, 2 * MiB), *b = Alloc(r, 2 * MiB);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 2 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 2 * MiB, 0, nullptr));
  EXPECT_EQ(4 * MiB, Stats(r).held_bytes);
  // 4 MiB and 3 MiB fail; after the two free chunks went back, 3 MiB works.
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 2, cudaErrorMemoryAllocation));
  void *c = Alloc(r, 3 * MiB);
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(3 * MiB, s.held_bytes);
  EXPECT_EQ(2u, s.release_count);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, c, 3 * MiB, 0, nullptr));
  ExpectInvariants(r);
}

TEST_F(PoolTest, ReleaseOnGrowthKeepsThePeakDown) {
  for (bool release : {false, true}) {
    gmr_pool_resource_config c = small_config(2 * MiB);
    c.release_on_growth = release;
    gmr_resource *r = Make(c);
    void *a = Alloc(r, 2 * MiB), *b = Alloc(r, 2 * MiB);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 2 * MiB, 0, nullptr));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 2 * MiB, 0, nullptr));
    void *d = Alloc(r, 4 * MiB);  // no 4 MiB block: two free 2 MiB chunks
    gmr_pool_resource_stats s = Stats(r);
    EXPECT_EQ(release ? 4 * MiB : 8 * MiB, s.held_bytes) << release;
    EXPECT_EQ(release ? 4 * MiB : 8 * MiB, s.peak_held_bytes) << release;
    EXPECT_EQ(release ? 2u : 0u, s.release_count) << release;
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, d, 4 * MiB, 0, nullptr));
    ExpectInvariants(r);
  }
}

TEST_F(PoolTest, ReleaseOnGrowthLeavesChunksOfStreamsStillAtWork) {
  gmr_pool_resource_config c = small_config(2 * MiB);
  c.release_on_growth = true;
  gmr_resource *r = Make(c);
  gmr_stream s1 = Stream(), s2 = Stream();
  void *a = Alloc(r, 2 * MiB, s1), *b = Alloc(r, 2 * MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 2 * MiB, 0, s1));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 2 * MiB, 0, s1));
  void *d = Alloc(r, 6 * MiB, s2);  // s1's chunks are pending: not given back
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(10 * MiB, s.held_bytes);
  EXPECT_EQ(0u, s.release_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, d, 6 * MiB, 0, s2));
  ExpectInvariants(r);
}

// ---- trim, destroy ------------------------------------------------------------

TEST_F(PoolTest, TrimGivesBackWhollyFreeChunksOnly) {
  gmr_resource *r = Make(small_config(4 * MiB));
  gmr_stream s = Stream();
  void *a = Alloc(r, 3 * MiB, s), *b = Alloc(r, 3 * MiB, s), *c = Alloc(r, 3 * MiB, s);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));  // the frees stay pending
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * MiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, c, 3 * MiB, 0, s));
  EXPECT_EQ(12 * MiB, Stats(r).held_bytes);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(8 * MiB, released);  // a's and c's chunks; b's stays
  gmr_pool_resource_stats st = Stats(r);
  EXPECT_EQ(4 * MiB, st.held_bytes);
  EXPECT_EQ(12 * MiB, st.peak_held_bytes);
  EXPECT_EQ(1u, st.chunk_count);
  EXPECT_EQ(2u, st.release_count);
  EXPECT_EQ(1u, st.event_synchronize_count);  // waited for s's pending frees
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(4 * MiB, fp.held_bytes);
  EXPECT_EQ(12 * MiB, fp.peak_held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 3 * MiB, 0, s));
  ExpectInvariants(r);
}

TEST_F(PoolTest, DestroyIsBusyWithLiveBlocksAndGivesEverythingBack) {
  gmr_pool_resource_config c = small_config();
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, &c, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  gmr_stream s = Stream();
  void *p = Alloc(r, 100, s), *q = Alloc(r, 5 * MiB, s);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 5 * MiB, 0, s));
  EXPECT_EQ(2u, gmr_cuda_resource_get_live_count(cuda_));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

}  // namespace
