// pool_resource's contracts on the host simulation: destroy either succeeds
// or changes nothing (upstream frees and event destroys failing at every
// position), bad frees get the status that names them, create explains the
// one option that is wrong, and a slow growth in one thread holds up no
// other thread of the same arena.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/pool_resource.h"
#include "tests/pool_test_fixture.h"
#include "tests/support/sim_fixture.h"

namespace {

using namespace pool_test;

// ---- destroy ----------------------------------------------------------------

// A pool over its own upstream, with three chunks given back at destroy.
class PoolDestroyTest : public PoolTest {
 protected:
  gmr_pool_resource *ThreeChunks(gmr_pool_resource_config c) {
    gmr_pool_resource *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, &c, &p));
    gmr_resource *r = gmr_pool_resource_as_resource(p);
    void *a = Alloc(r, 3 * MiB), *b = Alloc(r, 3 * MiB), *d = Alloc(r, 3 * MiB);
    EXPECT_EQ(3u, Stats(r).chunk_count);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * MiB, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 3 * MiB, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, d, 3 * MiB, 0, nullptr));
    return p;
  }
};

TEST_F(PoolDestroyTest, AFailedUpstreamFreeAtAnyPositionLeavesAValidPoolToRetry) {
  for (uint64_t k = 0; k < 3; ++k) {
    gmr_pool_resource *p = ThreeChunks(small_config(4 * MiB));
    gmr_resource *r = gmr_pool_resource_as_resource(p);
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_FREE, k, 1, cudaErrorLaunchFailure));
    EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r)) << "failure at free " << k;
    // Still a pool: what it could not give back is still its own, usable.
    ExpectInvariants(r);
    gmr_pool_resource_stats s = Stats(r);
    EXPECT_EQ(3u - k, s.chunk_count) << k;
    EXPECT_EQ((3u - k) * 4 * MiB, s.held_bytes) << k;
    EXPECT_EQ(3u - k, gmr_cuda_resource_get_live_count(cuda_)) << k;
    void *q = Alloc(r, MiB);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, nullptr));
    // Once the fault is gone, a retry gives everything back.
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r)) << k;
    EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_)) << k;
  }
}

TEST_F(PoolDestroyTest, AFailedUpstreamFreeWithSeveralArenasLeavesAValidPool) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.arena_count = 3;
  gmr_pool_resource *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, &c, &p));
  gmr_resource *r = gmr_pool_resource_as_resource(p);
  // Each thread on its own stream, so each arena grows its own chunk.
  for (int t = 0; t < 3; ++t) {
    gmr_stream s = Stream();
    std::thread([&] {
      void *a = Alloc(r, MiB, s);
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, MiB, 0, s));
    }).join();
  }
  ASSERT_EQ(3u, Stats(r).chunk_count);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_FREE, 1, 1, cudaErrorLaunchFailure));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r));
  ExpectInvariants(r);
  EXPECT_EQ(2u, Stats(r).chunk_count);
  EXPECT_EQ(2u, gmr_cuda_resource_get_live_count(cuda_));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

TEST_F(PoolDestroyTest, AFailedEventDestroyIsReportedAndCountedAndTheRetryWorks) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  gmr_pool_resource *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, &c, &p));
  gmr_resource *r = gmr_pool_resource_as_resource(p);
  gmr_stream s1 = Stream(), s2 = Stream();
  void *a = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, MiB, 0, s1));
  void *b = Alloc(r, MiB, s2);  // takes s1's memory through s1's event
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, MiB, 0, s2));
  ASSERT_GE(gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_CREATE), 1u);
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_EVENT_DESTROY, 0, 1, cudaErrorLaunchFailure));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r));
  ExpectInvariants(r);
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(1u, s.event_destroy_failure_count);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

// ---- bad frees ----------------------------------------------------------------

TEST_F(PoolTest, BadFreesAreNamedByTheirStatus) {
  for (uint32_t arenas : {1u, 3u}) {
    gmr_pool_resource_config c = small_config();
    c.arena_count = arenas;
    gmr_resource *r = Make(c);
    void *p = Alloc(r, 5000), *q = Alloc(r, 5000);
    gmr_pool_resource_stats before = Stats(r);
    int local = 0;
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 4999, 0, nullptr)) << arenas;
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 5000, 512, nullptr)) << arenas;
    EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, static_cast<char *>(p) + 256, 256,
                                                               0, nullptr))  // interior
        << arenas;
    EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, &local, 5000, 0, nullptr))
        << arenas;
    gmr_pool_resource_stats after = Stats(r);
    EXPECT_EQ(before.in_use_bytes, after.in_use_bytes);
    EXPECT_EQ(before.free_block_count, after.free_block_count);
    ExpectInvariants(r);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 5000, 0, nullptr));
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 5000, 0, nullptr)) << arenas;
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 5000, 0, nullptr));
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, q, 5000, 0, nullptr))
        << arenas;  // merged
    ExpectInvariants(r);
  }
}

// ---- messages a person can act on -----------------------------------------------

std::string CreateMessage(gmr_resource *upstream, const gmr_pool_resource_config &c,
                          gmr_status expect) {
  gmr_pool_resource *p = reinterpret_cast<gmr_pool_resource *>(0x1);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(expect, gmr_pool_resource_create_ex(upstream, &c, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(expect, f.status);
  return f.message;
}

TEST_F(PoolTest, ConfigErrorsNameTheOneOptionThatIsWrongAndItsLimit) {
  auto message = [&](void (*edit)(gmr_pool_resource_config &)) {
    gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
    edit(c);
    return CreateMessage(upstream_, c, GMR_ERR_INVALID_ARGUMENT);
  };
  std::string m = message([](gmr_pool_resource_config &c) { c.arena_count = 65; });
  EXPECT_NE(std::string::npos, m.find("arena_count")) << m;
  EXPECT_NE(std::string::npos, m.find("65")) << m;
  EXPECT_NE(std::string::npos, m.find("64")) << m;
  EXPECT_EQ(std::string::npos, m.find("granularity")) << m;  // only the one broken
  m = message([](gmr_pool_resource_config &c) { c.chunk_granularity_bytes = 3 * MiB; });
  EXPECT_NE(std::string::npos, m.find("chunk_granularity_bytes")) << m;
  EXPECT_NE(std::string::npos, m.find("3145728")) << m;
  EXPECT_NE(std::string::npos, m.find("power of two")) << m;
  EXPECT_EQ(std::string::npos, m.find("arena")) << m;
  m = message([](gmr_pool_resource_config &c) { c.min_growth_bytes = c.max_growth_bytes + 256; });
  EXPECT_NE(std::string::npos, m.find("min_growth_bytes")) << m;
  EXPECT_NE(std::string::npos, m.find("max_growth_bytes")) << m;
  m = message([](gmr_pool_resource_config &c) { c.recent_free_count = 40; });
  EXPECT_NE(std::string::npos, m.find("recent_free_count")) << m;
  EXPECT_NE(std::string::npos, m.find("32")) << m;
  m = message([](gmr_pool_resource_config &c) { c.growth_percent = 2000; });
  EXPECT_NE(std::string::npos, m.find("growth_percent")) << m;
  EXPECT_NE(std::string::npos, m.find("1000")) << m;
  m = message([](gmr_pool_resource_config &c) {
    c.maximum_pool_bytes = 4 * MiB;
    c.initial_pool_bytes = 8 * MiB;
  });
  EXPECT_NE(std::string::npos, m.find("initial_pool_bytes")) << m;
  EXPECT_NE(std::string::npos, m.find("maximum_pool_bytes")) << m;
  EXPECT_NE(std::string::npos, m.find("8388608")) << m;
  // The plain create says the same status, with nothing to read.
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 65;
  gmr_pool_resource *p = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(upstream_, &c, &p));
}

TEST_F(PoolTest, AnInitialChunkTooLargeSaysTheBytesAndTheOption) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.initial_pool_bytes = size_t{100} << 30;  // the simulated device has 80 GiB
  std::string m = CreateMessage(upstream_, c, GMR_ERR_OUT_OF_MEMORY);
  EXPECT_NE(std::string::npos, m.find("107374182400")) << m;
  EXPECT_NE(std::string::npos, m.find("initial_pool_bytes")) << m;
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

// ---- no CUDA call under the arena's spin lock ------------------------------------

// One thread grows the arena through a slow cudaMalloc; another thread of the
// same arena allocates from free memory meanwhile and must not wait for it.
// Ordering only: the second allocation completes while the first is still
// inside its cudaMalloc.
TEST_F(PoolTest, ASlowGrowthHoldsUpNoAllocationFromFreeMemory) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.initial_pool_bytes = 4 * MiB;  // free memory for the second thread
  gmr_resource *r = Make(c);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_delay(GMR_CUDA_CALL_MALLOC, 2000000000u));  // 2 s
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  std::atomic<bool> grown{false};
  void *big = nullptr;
  std::thread grower([&] {
    big = Alloc(r, 8 * MiB);  // more than is free: a new chunk
    grown = true;
  });
  while (gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC) == mallocs) std::this_thread::yield();
  void *small = Alloc(r, MiB);  // from the initial chunk
  EXPECT_FALSE(grown.load()) << "an allocation from free memory waited for another's growth";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, small, MiB, 0, nullptr));
  grower.join();
  ASSERT_NE(nullptr, big);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, big, 8 * MiB, 0, nullptr));
  ExpectInvariants(r);
}

}  // namespace
