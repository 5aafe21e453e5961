// core/event_cache: spare events taken and given back, the cap, and a
// destroy that fails part-way keeping what it could not destroy.
#include <gtest/gtest.h>

#include <vector>

#include "core/cuda_layer.h"
#include "stream_ordered/event_cache.h"
#include "gmr/sim/cuda_sim.h"
#include "tests/support/sim_fixture.h"

namespace {

class EventCache : public gmr_test::SimTest {};

TEST_F(EventCache, ReusesUpToItsCapAndDestroysTheRest) {
  const gmr__cuda_ops *cuda = gmr__cuda();
  gmr__event_cache c = GMR__EVENT_CACHE_INIT(2);
  std::vector<cudaEvent_t> taken(3);
  for (cudaEvent_t &e : taken) ASSERT_EQ(cudaSuccess, gmr__event_cache_take(&c, cuda, &e));
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_CREATE));
  for (cudaEvent_t e : taken) ASSERT_EQ(cudaSuccess, gmr__event_cache_give(&c, cuda, e));
  EXPECT_EQ(2u, c.count) << "the cap";
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_DESTROY)) << "the third destroyed";
  cudaEvent_t again = nullptr;
  ASSERT_EQ(cudaSuccess, gmr__event_cache_take(&c, cuda, &again));
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_CREATE)) << "a spare, not a new one";
  ASSERT_EQ(cudaSuccess, gmr__event_cache_give(&c, cuda, again));
  ASSERT_EQ(cudaSuccess, gmr__event_cache_clear(&c, cuda));
  EXPECT_EQ(0u, c.count);
  EXPECT_EQ(nullptr, c.events);
}

TEST_F(EventCache, AFailedCreateOrDestroyChangesNothingElse) {
  const gmr__cuda_ops *cuda = gmr__cuda();
  gmr__event_cache c = GMR__EVENT_CACHE_INIT(8);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_EVENT_CREATE, 0, 1,
                                                cudaErrorMemoryAllocation));
  cudaEvent_t e = reinterpret_cast<cudaEvent_t>(0x1);
  EXPECT_EQ(cudaErrorMemoryAllocation, gmr__event_cache_take(&c, cuda, &e));
  EXPECT_EQ(reinterpret_cast<cudaEvent_t>(0x1), e) << "*out unchanged";
  cudaEvent_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaSuccess, gmr__event_cache_take(&c, cuda, &a));
  ASSERT_EQ(cudaSuccess, gmr__event_cache_take(&c, cuda, &b));
  ASSERT_EQ(cudaSuccess, gmr__event_cache_give(&c, cuda, a));
  ASSERT_EQ(cudaSuccess, gmr__event_cache_give(&c, cuda, b));
  // The second destroy fails: one destroyed, one kept; a later clear ends it.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_EVENT_DESTROY, 1, 1,
                                                cudaErrorInvalidResourceHandle));
  EXPECT_EQ(cudaErrorInvalidResourceHandle, gmr__event_cache_clear(&c, cuda));
  EXPECT_EQ(1u, c.count);
  EXPECT_EQ(cudaSuccess, gmr__event_cache_clear(&c, cuda));
  EXPECT_EQ(0u, c.count);
}

}  // namespace
