// numa_host_resource and the CUDA layer calls it brought (cudaHostRegister,
// cudaHostUnregister, cudaMemcpyAsync) on the simulation: NUMA detection
// from /sys text, placement counted (or the mbind refusal recorded), pinned
// bytes seen by the simulation, failures that leave nothing mapped or pinned,
// and bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "gmr/tiers/numa_host_resource.h"
#include "core/cuda_layer.h"
#include "tests/support/sim_fixture.h"
#include "tiers/numa.h"

namespace {

class NumaHost : public gmr_test::SimTest {
 protected:
  void TearDown() override {
    if (r_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_numa_host_resource_as_resource(r_)));
    }
    SimTest::TearDown();
  }
  gmr_numa_host_resource_stats Stats() {
    gmr_numa_host_resource_stats s = GMR_NUMA_HOST_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_numa_host_resource_get_stats(r_, &s));
    return s;
  }
  gmr_resource *R() { return gmr_numa_host_resource_as_resource(r_); }
  gmr_numa_host_resource *r_ = nullptr;
};

TEST(NumaList, ParsesKernelListsAndRefusesMalformedText) {
  int count = 0, max = 0;
  EXPECT_TRUE(gmr__numa_parse_list("0\n", &count, &max));
  EXPECT_EQ(1, count);
  EXPECT_EQ(0, max);
  EXPECT_TRUE(gmr__numa_parse_list("0-3", &count, &max));
  EXPECT_EQ(4, count);
  EXPECT_EQ(3, max);
  EXPECT_TRUE(gmr__numa_parse_list("0,2-3,7\n", &count, &max));
  EXPECT_EQ(4, count);
  EXPECT_EQ(7, max);
  for (const char *bad : {"", "\n", "a", "3-1", "0,", "-1", "0-", "1 2", "0-99999"}) {
    EXPECT_FALSE(gmr__numa_parse_list(bad, &count, &max)) << bad;
  }
}

TEST(NumaList, MissingSysfsMeansOneNode) {
  int count = 0, max = -1;
  gmr__numa_online("/nonexistent-sysfs-root", &count, &max);
  EXPECT_EQ(1, count);
  EXPECT_EQ(0, max);
  EXPECT_EQ(0u, gmr__numa_node_memory_bytes("/nonexistent-sysfs-root", 0));
}

TEST_F(NumaHost, ThisMachinesNodesAreReported) {
  int count = 0, max = -1;
  ASSERT_EQ(GMR_OK, gmr_numa_host_resource_get_node_count(&count, &max));
  EXPECT_GE(count, 1);
  EXPECT_GE(max, count - 1);
  ASSERT_EQ(GMR_OK, gmr_numa_host_resource_get_node_count(nullptr, nullptr));
}

TEST_F(NumaHost, AllocationIsPinnedWholePagesAndFreedAgain) {
  gmr_numa_host_resource_config c = GMR_NUMA_HOST_RESOURCE_CONFIG_DEFAULT;
  c.numa_node = 0;
  ASSERT_EQ(GMR_OK, gmr_numa_host_resource_create(&c, &r_));
  EXPECT_EQ(r_, gmr_numa_host_resource_from_resource(R()));
  EXPECT_STREQ("numa_host_resource", gmr_resource_get_type_name(R()));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(), 10000, 0, nullptr, &p));
  std::memset(p, 0x5a, 10000);  // host memory the test can touch
  gmr_cuda_sim_usage host;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_host_usage(&host));
  EXPECT_GE(host.used_bytes, 10000u);  // registered with CUDA: pinned
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_REGISTER));
  gmr_numa_host_resource_stats s = Stats();
  EXPECT_EQ(0, s.numa_node);
  EXPECT_EQ(1u, s.live_count);
  EXPECT_EQ(0u, s.held_bytes % 4096);
  EXPECT_GE(s.held_bytes, 10000u);
  // Placed, or refused by the sandbox with the errno kept; never both.
  EXPECT_EQ(1u, s.placed_count + s.unplaced_count);
  if (s.unplaced_count > 0) {
    EXPECT_NE(0, s.last_placement_errno);
  }
  // Destroy refuses while the allocation lives.
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(R()));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(), p, 10000, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_host_usage(&host));
  EXPECT_EQ(0u, host.used_bytes);
  EXPECT_EQ(0u, Stats().live_count);
}

TEST_F(NumaHost, FailedRegistrationLeavesNothingBehind) {
  ASSERT_EQ(GMR_OK, gmr_numa_host_resource_create(nullptr, &r_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_HOST_REGISTER, 0, 1, 2));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(R(), 4096, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(2, f.cuda_error);
  EXPECT_EQ(0u, Stats().held_bytes);
}

TEST_F(NumaHost, UnpinnedMemoryMakesNoCudaCall) {
  gmr_numa_host_resource_config c = GMR_NUMA_HOST_RESOURCE_CONFIG_DEFAULT;
  c.pin = false;
  ASSERT_EQ(GMR_OK, gmr_numa_host_resource_create(&c, &r_));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(), 1, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(), p, 1, 0, nullptr));
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_REGISTER));
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_UNREGISTER));
}

TEST_F(NumaHost, BadInput) {
  gmr_numa_host_resource_config c = GMR_NUMA_HOST_RESOURCE_CONFIG_DEFAULT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_numa_host_resource_create(&c, nullptr));
  int count = 0, max = 0;
  ASSERT_EQ(GMR_OK, gmr_numa_host_resource_get_node_count(&count, &max));
  c.numa_node = max + 1;  // no such node
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_numa_host_resource_create(&c, &r_));
  c.numa_node = -2;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_numa_host_resource_create(&c, &r_));
  EXPECT_EQ(nullptr, r_);
  ASSERT_EQ(GMR_OK, gmr_numa_host_resource_create(nullptr, &r_));
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED,
            gmr_resource_allocate(R(), 64, size_t{1} << 20, nullptr, &p));  // > page
  EXPECT_EQ(nullptr, gmr_numa_host_resource_from_resource(nullptr));
  EXPECT_EQ(0u, gmr_numa_host_resource_get_node_memory_bytes(-1));
}

TEST_F(NumaHost, SimulatedRegistrationRefusesOverlapsUnknownRangesAndLeaks) {
  std::vector<char> buf(8192);
  const gmr__cuda_ops *cuda = gmr__cuda();
  ASSERT_TRUE(cuda->simulated);
  ASSERT_EQ(cudaSuccess, cuda->host_register(buf.data(), 4096));
  EXPECT_EQ(cudaErrorHostMemoryAlreadyRegistered, cuda->host_register(buf.data() + 1024, 4096));
  EXPECT_EQ(cudaErrorInvalidValue, cuda->host_register(nullptr, 4096));
  EXPECT_EQ(cudaErrorHostMemoryNotRegistered, cuda->host_unregister(buf.data() + 4096));
  // A registration left behind is a leak the simulation reports.
  EXPECT_EQ(GMR_ERR_BUSY, gmr_cuda_sim_disable());
  ASSERT_EQ(cudaSuccess, cuda->host_unregister(buf.data()));
}

TEST_F(NumaHost, CopiesBetweenPinnedBlocksThroughTheLayer) {
  ASSERT_EQ(GMR_OK, gmr_numa_host_resource_create(nullptr, &r_));
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(), 4096, 0, nullptr, &a));
  // A copy between two pinned blocks through the layer: stream-ordered memmove.
  void *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(), 4096, 0, nullptr, &b));
  std::memset(a, 7, 4096);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_memcpy_async(b, a, 4096, nullptr));
  EXPECT_EQ(7, static_cast<unsigned char *>(b)[4095]);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_memcpy_async(b, nullptr, 0, nullptr));  // nothing to copy
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_stream_memcpy_async(nullptr, a, 16, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(), a, 4096, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(), b, 4096, 0, nullptr));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_UNREGISTER));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEMCPY_ASYNC));
  EXPECT_STREQ("cudaHostRegister", gmr_cuda_call_name(GMR_CUDA_CALL_HOST_REGISTER));
  EXPECT_STREQ("cudaMemcpyAsync", gmr_cuda_call_name(GMR_CUDA_CALL_MEMCPY_ASYNC));
}

}  // namespace
