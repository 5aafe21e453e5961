// The per-device registry (gmr/device_resource.h) on real GPUs: the default
// stack works on the current device; with two devices, each device's
// resource allocates on its own device (cudaPointerGetAttributes) from a
// thread whose current device is the other one, on that device's streams,
// and leaves the caller's device current. The two-device cases skip, saying
// so, on a machine with one GPU (run them on nvidia-h200-x2).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gmr/gmr.h"
#include "tests/support/gpu_fixture.h"

namespace {

class DeviceResourceGpuTest : public gmr_test::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    unsetenv("GMR_STACK");
    ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec(nullptr, nullptr));
    ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  }
  void TearDown() override {
    if (device_count_ == 0) return;
    EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
    EXPECT_EQ(GMR_OK, gmr_device_resource_set_spec(nullptr, nullptr));
  }
  static int current() {
    int d = -1;
    EXPECT_EQ(cudaSuccess, cudaGetDevice(&d));
    return d;
  }
  static int device_of(void *p) {
    cudaPointerAttributes a{};
    EXPECT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, p));
    return a.device;
  }
};

TEST_F(DeviceResourceGpuTest, DefaultStackServesTheCurrentDevice) {
  gmr_resource *r = nullptr;
  gmr_spec_error error;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get_current(&r, &error)) << error.message;
  EXPECT_STREQ(GMR_DEVICE_RESOURCE_DEFAULT_SPEC, gmr_device_resource_get_spec(0));
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1 << 20, 0, s, &p));
  EXPECT_EQ(0, device_of(p));
  EXPECT_EQ(cudaSuccess, cudaMemsetAsync(p, 7, 1 << 20, s));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1 << 20, 0, s));
  EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s));
}

TEST_F(DeviceResourceGpuTest, EachDeviceAllocatesOnItselfFromTheOtherDevice) {
  if (device_count_ < 2) {
    GTEST_SKIP() << "needs two CUDA devices (found " << device_count_
                 << "); run on nvidia-h200-x2";
  }
  for (int d = 0; d < 2; ++d) {
    const int other = 1 - d;
    ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ASSERT_EQ(cudaSuccess, cudaSetDevice(other));
    gmr_resource *r = nullptr;
    gmr_spec_error error;
    ASSERT_EQ(GMR_OK, gmr_device_resource_get(d, &r, &error)) << error.message;
    EXPECT_EQ(other, current());
    for (int i = 0; i < 8; ++i) {
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, size_t{4} << 20, 0, s, &p));
      EXPECT_EQ(d, device_of(p));
      EXPECT_EQ(other, current());
      ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
      EXPECT_EQ(cudaSuccess, cudaMemsetAsync(p, i, size_t{4} << 20, s));
      ASSERT_EQ(cudaSuccess, cudaSetDevice(other));
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, size_t{4} << 20, 0, s));  // pool: event on s
      EXPECT_EQ(other, current());
    }
    ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
    EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s));
  }
  EXPECT_EQ(cudaSuccess, cudaGetLastError());
}

TEST_F(DeviceResourceGpuTest, ThreadsOnBothDevicesShareOneStackEach) {
  if (device_count_ < 2) {
    GTEST_SKIP() << "needs two CUDA devices (found " << device_count_
                 << "); run on nvidia-h200-x2";
  }
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("tracking > pool > cuda(kind=async)", nullptr));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const int mine = t % 2;
      if (cudaSetDevice(mine) != cudaSuccess) failures++;
      for (int i = 0; i < 200; ++i) {
        int d = (i + t) % 2;
        gmr_resource *r = nullptr;
        if (gmr_device_resource_get(d, &r, nullptr) != GMR_OK) {
          failures++;
          continue;
        }
        void *p = nullptr;
        size_t bytes = size_t{256} << (i % 12);
        if (gmr_resource_allocate(r, bytes, 0, nullptr, &p) != GMR_OK || device_of(p) != d)
          failures++;
        if (gmr_resource_deallocate(r, p, bytes, 0, nullptr) != GMR_OK) failures++;
        int now = -1;
        if (cudaGetDevice(&now) != cudaSuccess || now != mine) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
}

}  // namespace
