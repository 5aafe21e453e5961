// Two GPUs in one process (issue 15, section 1), on real devices: the
// registry's per-device stacks over VMM memory with peer_access=all, each
// device's memory written by a kernel there and read by a kernel on the
// other device, in both directions; threads that switch their device
// between calls; and the caller's device restored after every call on the
// other device's stack. tests/nccl/multi_device_test runs the same on two
// simulated devices; vmm_pool_gpu_test's AKernelOnASecondGpu... test covers
// a vmm_pages made by hand. Skips, saying why, with one GPU.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gmr/device_resource.h"
#include "gmr/resource.h"
#include "tests/gpu/vmm_kernels.h"
#include "tests/support/gpu_fixture.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

class MultiGpu : public gmr_test::GpuTest {
 protected:
  gmr_test::VmmKernels kernels_;

  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (device_count_ < 2) {
      GTEST_SKIP() << "needs two GPUs (nvidia-h200-x2); this machine has " << device_count_;
    }
    int can01 = 0, can10 = 0;
    ASSERT_EQ(cudaSuccess, cudaDeviceCanAccessPeer(&can01, 0, 1));
    ASSERT_EQ(cudaSuccess, cudaDeviceCanAccessPeer(&can10, 1, 0));
    if (!can01 || !can10) GTEST_SKIP() << "devices 0 and 1 cannot access each other";
    unsetenv("GMR_STACK");
    ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
    ASSERT_EQ(cudaSuccess, kernels_.load());
  }
  void TearDown() override {
    if (device_count_ < 2) return;
    EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
    EXPECT_EQ(GMR_OK, gmr_device_resource_set_spec(nullptr, nullptr));
    (void)cudaSetDevice(0);
  }
  static int Current() {
    int d = -1;
    EXPECT_EQ(cudaSuccess, cudaGetDevice(&d));
    return d;
  }
  static int DeviceOf(const void *p) {
    cudaPointerAttributes a{};
    EXPECT_EQ(cudaSuccess, cudaPointerGetAttributes(&a, p));
    return a.device;
  }
  void ExpectPattern(const void *p, size_t bytes, unsigned seed) {
    std::vector<unsigned char> host(bytes);
    ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (size_t i = 0; i < bytes; ++i) wrong += host[i] != gmr_test::PatternByte(i, seed);
    EXPECT_EQ(0u, wrong) << "of " << bytes << " bytes";
  }
};

// A kernel on device d writes a block of d's stack; a kernel on the other
// device copies it into memory of its own, reading d's pages over peer
// access; the copy holds the pattern. Both directions, two stacks.
TEST_F(MultiGpu, EachDevicesVmmMemoryIsReadByAKernelOnTheOther) {
  for (const char *spec : {"pool > vmm_pages(peer_access=all)",
                           "pool > chunk_listener > cumem(nccl_ready=true, peer_access=all)"}) {
    SCOPED_TRACE(spec);
    ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec(spec, nullptr));
    for (int d = 0; d < 2; ++d) {
      const int other = 1 - d;
      const size_t bytes = 5 * kMiB + 300;
      ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
      cudaStream_t sd = nullptr, so = nullptr;
      ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&sd, cudaStreamNonBlocking));
      ASSERT_EQ(cudaSuccess, cudaSetDevice(other));
      ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&so, cudaStreamNonBlocking));
      gmr_resource *r = nullptr;
      gmr_spec_error e;
      ASSERT_EQ(GMR_OK, gmr_device_resource_get(d, &r, &e)) << e.message;
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, sd, &p));  // from the other device
      EXPECT_EQ(other, Current()) << "allocate restored the caller's device";
      EXPECT_EQ(d, DeviceOf(p));
      ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
      ASSERT_EQ(cudaSuccess, kernels_.fill(p, bytes, 30u + unsigned(d), sd));
      ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(sd));
      ASSERT_EQ(cudaSuccess, cudaSetDevice(other));
      void *dst = nullptr;
      ASSERT_EQ(cudaSuccess, cudaMalloc(&dst, bytes));
      ASSERT_EQ(cudaSuccess, kernels_.copy(dst, p, bytes, so));  // peer reads
      ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(so));
      ExpectPattern(dst, bytes, 30u + unsigned(d));
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, bytes, 0, sd));
      EXPECT_EQ(other, Current()) << "deallocate restored the caller's device";
      EXPECT_EQ(cudaSuccess, cudaFree(dst));
      EXPECT_EQ(cudaSuccess, cudaStreamDestroy(so));
      ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
      EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(sd));
      EXPECT_EQ(cudaSuccess, cudaStreamDestroy(sd));
    }
    ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
    ASSERT_EQ(GMR_OK, gmr_device_resource_release_all());
  }
  EXPECT_EQ(cudaSuccess, cudaGetLastError());
}

// Threads switch their current device before every allocation and free the
// block with the other device current.
TEST_F(MultiGpu, ThreadsThatSwitchDevicesAllocateOnTheCurrentOne) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec(
                        "tracking > pool > chunk_listener > cumem(peer_access=all)", nullptr));
  std::atomic<int> wrong{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 150; ++i) {
        const int d = (i + t) % 2;
        if (cudaSetDevice(d) != cudaSuccess) failures++;
        gmr_resource *r = nullptr;
        if (gmr_device_resource_get_current(&r, nullptr) != GMR_OK) {
          failures++;
          continue;
        }
        size_t bytes = size_t{4096} << (i % 11);
        void *p = nullptr;
        if (gmr_resource_allocate(r, bytes, 0, nullptr, &p) != GMR_OK) {
          failures++;
          continue;
        }
        cudaPointerAttributes a{};
        if (cudaPointerGetAttributes(&a, p) != cudaSuccess || a.device != d) wrong++;
        if (cudaMemset(p, i & 0xff, bytes) != cudaSuccess) failures++;
        if (cudaSetDevice(1 - d) != cudaSuccess) failures++;
        if (gmr_resource_deallocate(r, p, bytes, 0, nullptr) != GMR_OK) failures++;
        int now = -1;
        if (cudaGetDevice(&now) != cudaSuccess || now != 1 - d) wrong++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0, wrong.load());
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
    EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  }
}

// Every call on device 1's stack, made with device 0 current, leaves device
// 0 current: allocate, record_stream, allocate_capturing in a real capture,
// memory info, deallocate, trim.
TEST_F(MultiGpu, TheCallersDeviceIsRestoredAfterEveryCall) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("vmm_pages", nullptr));
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  cudaStream_t s1 = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  gmr_resource *r = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &r, nullptr));
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4 * kMiB, 0, s1, &p));
  EXPECT_EQ(0, Current()) << "allocate";
  EXPECT_EQ(1, DeviceOf(p));
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, s1));
  EXPECT_EQ(0, Current()) << "record_stream";
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 6 * kMiB, 0, s1, &q, &f)) << f.message;
  EXPECT_EQ(0, Current()) << "allocate_capturing";
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaSuccess, cudaStreamEndCapture(s1, &g));
  if (g != nullptr) {
    EXPECT_EQ(cudaSuccess, cudaGraphDestroy(g));
  }
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &info));
  EXPECT_EQ(0, Current()) << "memory info";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4 * kMiB, 0, s1));
  if (q != nullptr) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 6 * kMiB, 0, s1));
  }
  EXPECT_EQ(0, Current()) << "deallocate";
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, nullptr));
  EXPECT_EQ(0, Current()) << "trim";
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(s1));
  EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s1));
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
}

}  // namespace
