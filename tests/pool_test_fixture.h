// tests/pool_test_fixture.h: the fixture of the pool_resource tests (a
// simulated device, a cuda_resource upstream, pools and streams cleaned up at
// the end) and small helpers they share.
#ifndef GMR_TESTS_POOL_TEST_FIXTURE_H_
#define GMR_TESTS_POOL_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/pool_resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/check_stack.h"
#include "tests/support/sim_fixture.h"

namespace pool_test {


inline constexpr size_t KiB = size_t{1} << 10;
inline constexpr size_t MiB = size_t{1} << 20;

// One arena, no growth surprises: chunks of exactly max(request, min_growth).
inline gmr_pool_resource_config small_config(size_t min_growth = 4 * MiB) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 1;
  c.min_growth_bytes = min_growth;
  c.max_growth_bytes = min_growth;
  c.growth_percent = 0;
  c.release_on_growth = false;
  c.recent_free_count = 0;  // merge at every free: the block structure is exact
  // The tests below check the lazy event scheme, which this promise enables
  // on every stream; PoolEagerEvents checks the default.
  c.streams.streams_outlive_resource = true;
  return c;
}

class PoolTest : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &cuda_));
    upstream_ = gmr_cuda_resource_as_resource(cuda_);
  }

  void TearDown() override {
    for (gmr_pool_resource *p : pools_) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_pool_resource_as_resource(p)));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(upstream_));
    for (gmr_stream s : streams_) {
      EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, false));
      EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    }
    SimTest::TearDown();
  }

  gmr_resource *Make(const gmr_pool_resource_config &c, gmr_resource *upstream = nullptr) {
    gmr_pool_resource *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_pool_resource_create(upstream ? upstream : upstream_, &c, &p));
    if (p == nullptr) return nullptr;
    pools_.push_back(p);
    return gmr_pool_resource_as_resource(p);
  }

  gmr_stream Stream() {
    gmr_stream s = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
    streams_.push_back(s);
    return s;
  }

  static gmr_pool_resource_stats Stats(gmr_resource *r) {
    gmr_pool_resource_stats s = GMR_POOL_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_pool_resource_get_stats(gmr_pool_resource_from_resource(r), &s));
    return s;
  }

  static void ExpectInvariants(gmr_resource *r) {
    char err[256];
    ASSERT_NE(nullptr, gmr_pool_resource_from_resource(r));
    EXPECT_EQ(GMR_OK, check_stack(r, err, sizeof err))
        << err;
  }

  static void *Alloc(gmr_resource *r, size_t bytes, gmr_stream s = nullptr, size_t align = 0) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, align, s, &p)) << bytes;
    return p;
  }

  static uintptr_t U(void *p) { return reinterpret_cast<uintptr_t>(p); }

  gmr_cuda_resource *cuda_ = nullptr;
  gmr_resource *upstream_ = nullptr;
  std::vector<gmr_pool_resource *> pools_;
  std::vector<gmr_stream> streams_;
};

// CUDA calls a pool makes for stream ordering.
inline uint64_t EventCalls() {
  return gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD) +
         gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_QUERY) +
         gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_SYNCHRONIZE) +
         gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_WAIT_EVENT);
}

// Every CUDA call made so far.
inline uint64_t AllCalls() {
  uint64_t n = 0;
  for (int c = 0; c < GMR_CUDA_CALL_COUNT; ++c) {
    n += gmr_cuda_sim_get_call_count(static_cast<gmr_cuda_call>(c));
  }
  return n;
}

}  // namespace pool_test

#endif  // GMR_TESTS_POOL_TEST_FIXTURE_H_
