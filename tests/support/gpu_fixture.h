/*
 * tests/support/gpu_fixture.h: a GoogleTest fixture for tests that need a
 * real CUDA device. Without one the test is reported SKIPPED with the reason
 * (the CUDA error of cudaGetDeviceCount), never passed silently.
 */
#ifndef GMR_TESTS_SUPPORT_GPU_FIXTURE_H_
#define GMR_TESTS_SUPPORT_GPU_FIXTURE_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "gmr/sim/cuda_sim.h"

namespace gmr_test {

class GpuTest : public ::testing::Test {
 protected:
  int device_count_ = 0;

  void SetUp() override {
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_disable()) << "a simulation left live objects";
    cudaError_t err = cudaGetDeviceCount(&device_count_);
    if (err != cudaSuccess || device_count_ == 0) {
      device_count_ = 0;
      GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount returned " << cudaGetErrorName(err)
                   << " (this test needs a GPU; it runs on the GPU machine)";
    }
  }
};

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_GPU_FIXTURE_H_
