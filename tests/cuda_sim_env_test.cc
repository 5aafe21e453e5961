// GMR_CUDA_SIM (gmr/sim/cuda_sim.h): the environment switch read once at the
// first use of the CUDA layer. The layer is chosen once per process, so each
// case runs in a fresh child process (gtest's threadsafe death-test style
// re-executes this binary) that inherits the variable set here.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include "gmr/gmr.h"
#include "gmr/sim/cuda_sim.h"

namespace {

// Exits 0 when the layer is what the case expects, 1 (with the difference on
// stderr) otherwise.
void expect_layer(bool simulated, int devices, size_t memory_bytes) {
  bool is_sim = gmr_cuda_is_simulated();
  int count = -1;
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (is_sim) {
    (void)gmr_device_get_count(&count);
    (void)gmr_device_get_memory_info(&free_bytes, &total_bytes);
  }
  bool ok = is_sim == simulated && (!simulated || (count == devices && total_bytes == memory_bytes));
  fprintf(stderr, "layer: simulated=%d devices=%d memory=%zu\n", is_sim, count, total_bytes);
  _exit(ok ? 0 : 1);
}

class CudaSimEnvTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  void TearDown() override { unsetenv("GMR_CUDA_SIM"); }
};

TEST_F(CudaSimEnvTest, OneMeansTheDefaultSimulation) {
  setenv("GMR_CUDA_SIM", "1", 1);
  EXPECT_EXIT(expect_layer(true, 1, (size_t)80 << 30), ::testing::ExitedWithCode(0), "");
  setenv("GMR_CUDA_SIM", "Yes", 1);
  EXPECT_EXIT(expect_layer(true, 1, (size_t)80 << 30), ::testing::ExitedWithCode(0), "");
}

TEST_F(CudaSimEnvTest, DevicesAndMemoryAreConfigurable) {
  setenv("GMR_CUDA_SIM", "devices=2,memory=1GiB", 1);
  EXPECT_EXIT(expect_layer(true, 2, (size_t)1 << 30), ::testing::ExitedWithCode(0), "");
  setenv("GMR_CUDA_SIM", "memory=512M", 1);
  EXPECT_EXIT(expect_layer(true, 1, (size_t)512 << 20), ::testing::ExitedWithCode(0), "");
}

TEST_F(CudaSimEnvTest, OffWordsAndEmptyMeanTheRealRuntime) {
  for (const char *off : {"0", "off", "FALSE", "no", ""}) {
    setenv("GMR_CUDA_SIM", off, 1);
    EXPECT_EXIT(expect_layer(false, 0, 0), ::testing::ExitedWithCode(0), "") << off;
  }
}

TEST_F(CudaSimEnvTest, InvalidValuesWarnAndKeepTheDefault) {
  setenv("GMR_CUDA_SIM", "devices=99,colour=red,memory=lots", 1);
  EXPECT_EXIT(expect_layer(true, 1, (size_t)80 << 30), ::testing::ExitedWithCode(0),
              "devices must be 1..16(.|\n)*unknown key(.|\n)*memory must be a size");
  setenv("GMR_CUDA_SIM", "maybe", 1);
  EXPECT_EXIT(expect_layer(true, 1, (size_t)80 << 30), ::testing::ExitedWithCode(0),
              "expected 1, 0, or key=value pairs");
}

void disable_first_then_check() {
  if (gmr_cuda_sim_disable() != GMR_OK) _exit(2);
  expect_layer(false, 0, 0);
}

TEST_F(CudaSimEnvTest, AnExplicitChoiceFirstIgnoresTheEnvironment) {
  setenv("GMR_CUDA_SIM", "1", 1);
  EXPECT_EXIT(disable_first_then_check(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
