// Two GPUs in one process, on two simulated devices (issue 15, section 1):
// per-device stacks from the registry over VMM memory with peer access,
// threads that switch devices between calls, and the caller's device
// restored after every call of a stack that belongs to the other device.
// tests/gpu/multi_gpu_test runs the same on two real GPUs, with kernels.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/device_resource.h"
#include "gmr/resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

class MultiDevice : public gmr_test::SimTest {
 protected:
  MultiDevice() { sim_config_.device_count = 2; }
  void SetUp() override {
    SimTest::SetUp();
    unsetenv("GMR_STACK");
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
    EXPECT_EQ(GMR_OK, gmr_device_resource_set_spec(nullptr, nullptr));
    SimTest::TearDown();
  }
  static int Current() {
    int d = -1;
    EXPECT_EQ(GMR_OK, gmr_device_get_current(&d));
    return d;
  }
  static gmr_cuda_sim_vmm_mapping Mapping(const void *p) {
    gmr_cuda_sim_vmm_mapping m;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(p, &m));
    return m;
  }
};

// Each device's stack allocates on its own device, from the other device,
// and its pages are open to the other device (peer_access=all): what a
// kernel there needs to read them.
TEST_F(MultiDevice, PerDeviceStacksOverVmmMemoryAreOpenToThePeer) {
  for (const char *spec : {"pool > vmm_pages(peer_access=all, va_chunk=1GiB)",
                           "pool > chunk_listener > cumem(nccl_ready=true, peer_access=all)"}) {
    SCOPED_TRACE(spec);
    ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec(spec, nullptr));
    for (int d = 0; d < 2; ++d) {
      const int other = 1 - d;
      ASSERT_EQ(GMR_OK, gmr_device_set_current(other));
      gmr_resource *r = nullptr;
      gmr_spec_error e;
      ASSERT_EQ(GMR_OK, gmr_device_resource_get(d, &r, &e)) << e.message;
      EXPECT_EQ(other, Current()) << "creating the stack restores the caller's device";
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 3 * kMiB, 0, nullptr, &p));
      EXPECT_EQ(other, Current());
      gmr_cuda_sim_vmm_mapping m = Mapping(p);
      EXPECT_TRUE(m.mapped);
      EXPECT_EQ(d, m.device) << "the memory is the stack's device's";
      EXPECT_EQ(3u, m.access_device_mask) << "readable and writable by both devices";
      // "The other device reads it": a copy issued with the other device current.
      std::vector<unsigned char> host(3 * kMiB, 0);
      EXPECT_EQ(GMR_OK, gmr_cuda_stream_memcpy_async(host.data(), p, host.size(), nullptr));
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 3 * kMiB, 0, nullptr));
      EXPECT_EQ(other, Current());
    }
    ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
    ASSERT_EQ(GMR_OK, gmr_device_resource_release_all());
  }
}

// Threads change their current device between calls and allocate from the
// current device's stack: every block is on the device that was current.
TEST_F(MultiDevice, ThreadsThatSwitchDevicesAllocateOnTheCurrentOne) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec(
                        "tracking > pool > chunk_listener > cumem(peer_access=all)", nullptr));
  std::atomic<int> wrong{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 120; ++i) {
        const int d = (i + t) % 2;
        if (gmr_device_set_current(d) != GMR_OK) failures++;
        gmr_resource *r = nullptr;
        if (gmr_device_resource_get_current(&r, nullptr) != GMR_OK) {
          failures++;
          continue;
        }
        size_t bytes = size_t{4096} << (i % 10);
        void *p = nullptr;
        if (gmr_resource_allocate(r, bytes, 0, nullptr, &p) != GMR_OK) {
          failures++;
          continue;
        }
        gmr_cuda_sim_vmm_mapping m;
        if (gmr_cuda_sim_vmm_query(p, &m) != GMR_OK || m.device != d) wrong++;
        // Free it from the other device: the stack still frees on its own.
        if (gmr_device_set_current(1 - d) != GMR_OK) failures++;
        if (gmr_resource_deallocate(r, p, bytes, 0, nullptr) != GMR_OK) failures++;
        int now = -1;
        if (gmr_device_get_current(&now) != GMR_OK || now != 1 - d) wrong++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0, wrong.load());
}

// Every call on the stack of device 1 leaves device 0 current.
TEST_F(MultiDevice, TheCallersDeviceIsRestoredAfterEveryCall) {
  // vmm_pages answers every slot (record_stream, allocate_capturing, trim).
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("vmm_pages(va_chunk=1GiB)", nullptr));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  gmr_stream s1 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
  gmr_resource *r = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &r, nullptr));
  EXPECT_EQ(0, Current());
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4 * kMiB, 0, s1, &p));
  EXPECT_EQ(0, Current()) << "allocate";
  EXPECT_EQ(1, Mapping(p).device);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, s1));
  EXPECT_EQ(0, Current()) << "record_stream";
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s1));
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 5 * kMiB, 0, s1, &q, &f)) << f.message;
  EXPECT_EQ(0, Current()) << "allocate_capturing";
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s1, &g));
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &info));
  EXPECT_EQ(0, Current()) << "memory info";
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(0, Current()) << "footprint";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4 * kMiB, 0, s1));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 5 * kMiB, 0, s1));
  EXPECT_EQ(0, Current()) << "deallocate";
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, nullptr));
  EXPECT_EQ(0, Current()) << "trim";
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s1));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
}

}  // namespace
