/*
 * tests/support/torch_shim_fixture.h: what the tests of the PyTorch shim
 * (integrations/torch/gmr_torch.h) share: two simulated devices of 1 GiB,
 * the per-device registry set to a spec per test, and checks that a test
 * left nothing live or pending behind.
 */
#ifndef GMR_TESTS_SUPPORT_TORCH_SHIM_FIXTURE_H_
#define GMR_TESTS_SUPPORT_TORCH_SHIM_FIXTURE_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "gmr/gmr.h"
#include "integrations/torch/gmr_torch.h"
#include "tests/support/sim_fixture.h"

namespace gmr_test {

inline gmr_torch_counters torch_counters() {
  gmr_torch_counters c;
  c.size = sizeof c;
  c.version = GMR_TORCH_COUNTERS_VERSION;
  EXPECT_EQ(GMR_OK, gmr_torch_get_counters(&c));
  return c;
}

inline gmr_torch_graph_pool_info graph_pool_info(int device) {
  gmr_torch_graph_pool_info info;
  info.size = sizeof info;
  info.version = GMR_TORCH_GRAPH_POOL_INFO_VERSION;
  EXPECT_EQ(GMR_OK, gmr_torch_get_graph_pool_info(device, &info));
  return info;
}

inline std::string torch_last_error() {
  char buffer[1024];
  gmr_torch_get_last_error(buffer, sizeof buffer);
  return buffer;
}

inline bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

class TorchShimTest : public SimTest {
 public:
  static constexpr size_t kDeviceBytes = size_t{1} << 30;

 protected:
  TorchShimTest() {
    sim_config_.device_count = 2;
    sim_config_.device_memory_bytes = kDeviceBytes;
  }
  void SetUp() override {
    SimTest::SetUp();
    unsetenv("GMR_STACK");
    ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("tracking > cuda(kind=device)", nullptr));
  }
  void TearDown() override {
    EXPECT_EQ(0u, torch_counters().live_count) << "a test left allocations live";
    // empty_cache: released graph pools give their memory back, the arenas go.
    gmr_torch_reset();
    for (int d = 0; d < 2; ++d) {
      gmr_torch_graph_pool_info info = graph_pool_info(d);
      EXPECT_EQ(0u, info.pool_count) << "a test left a graph pool begun on device " << d;
      EXPECT_EQ(0u, info.pending_memory_count) << "device " << d;
      EXPECT_EQ(0u, info.arena_held_bytes) << "device " << d;
    }
    EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
    EXPECT_EQ(GMR_OK, gmr_device_resource_set_spec(nullptr, nullptr));
    unsetenv("GMR_STACK");
    SimTest::TearDown();
  }
  static void use_spec(const char *spec) {
    gmr_torch_reset();
    ASSERT_EQ(GMR_OK, gmr_device_resource_release_all());
    ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec(spec, nullptr));
  }
  static size_t used(int device) {
    gmr_cuda_sim_usage u;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(device, &u));
    return u.used_bytes;
  }
  static int current_device() {
    int d = -1;
    EXPECT_EQ(GMR_OK, gmr_device_get_current(&d));
    return d;
  }
};

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_TORCH_SHIM_FIXTURE_H_
