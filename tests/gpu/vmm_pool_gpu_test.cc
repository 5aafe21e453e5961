// vmm_pages on a real GPU: pages mapped through the driver's VMM
// API and written by kernels; defragmentation by double mapping keeps the
// data of the blocks that stay; zombies are unmapped only after their event
// (a kernel that waits for the host holds the event back, so nothing here
// depends on timing); growth during a real graph capture; sleep gives the
// memory back to the device and wake restores the saved contents bit for
// bit; a kernel on a second GPU reads what the first wrote (peer access).
// Clean under `compute-sanitizer --tool memcheck`.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <vector>

#include "gmr/resource.h"
#include "gmr/vmm_pages_resource.h"
#include "gmr/vmm_resource.h"
#include "tests/gpu/vmm_kernels.h"
#include "tests/support/check_stack.h"
#include "tests/support/gpu_fixture.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kPage = 2 * kMiB;

class VmmPoolGpu : public gmr_test::GpuTest {
 protected:
  gmr_test::VmmKernels kernels_;
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;
  cudaStream_t s_ = nullptr, s2_ = nullptr;

  void SetUp() override {
    gmr_test::GpuTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
    ASSERT_EQ(cudaSuccess, kernels_.load());
    ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
    ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s2_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (pool_ != nullptr) {
      char err[256];
      EXPECT_EQ(GMR_OK, check_stack(r_, err, sizeof err)) << err;
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    }
    if (s_ != nullptr) {
      EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s_));
    }
    if (s2_ != nullptr) {
      EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s2_));
    }
  }
  // A pool on device 0; skips the test when the device has no VMM support.
  void Make(gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT) {
    gmr_failure f = GMR_FAILURE_INIT;
    gmr_status st = gmr_vmm_pages_resource_create(&c, &pool_, &f);
    if (st == GMR_ERR_UNSUPPORTED) GTEST_SKIP() << f.message;
    ASSERT_EQ(GMR_OK, st) << f.message;
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
  }
  void *Alloc(size_t bytes, cudaStream_t s) {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, bytes, 0, s, &p, &f)) << f.message;
    return p;
  }
  gmr_vmm_pool_resource_stats Stats() {
    gmr_vmm_pool_resource_stats s = GMR_VMM_POOL_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_get_stats(pool_, &s));
    return s;
  }
  // Copy `bytes` at p back and compare with the pattern of `seed`.
  void ExpectPattern(const void *p, size_t bytes, unsigned seed) {
    std::vector<unsigned char> host(bytes);
    ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost));
    size_t wrong = 0, first = bytes;
    for (size_t i = 0; i < bytes; ++i) {
      if (host[i] != gmr_test::PatternByte(i, seed)) {
        if (wrong++ == 0) first = i;
      }
    }
    EXPECT_EQ(0u, wrong) << "first wrong byte at " << first << " of " << bytes;
  }
};

TEST_F(VmmPoolGpu, KernelsWriteMappedPagesAndSmallBlocks) {
  Make();
  void *big = Alloc(3 * kPage + 100, s_);
  void *small = Alloc(1000, s_);
  ASSERT_EQ(cudaSuccess, kernels_.fill(big, 3 * kPage + 100, 11, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(small, 1000, 12, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  ExpectPattern(big, 3 * kPage + 100, 11);
  ExpectPattern(small, 1000, 12);
  gmr_vmm_pool_resource_stats st = Stats();
  EXPECT_EQ(5 * kPage, st.mapped_bytes) << "4 pages for the big block, 1 for the small pool";
  EXPECT_EQ(1000u + 24u, st.small_live_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, small, 1000, 0, s_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, big, 3 * kPage + 100, 0, s_));
}

TEST_F(VmmPoolGpu, DefragmentationKeepsTheDataOfTheBlocksThatStay) {
  Make();
  // [A 2][B 1][C 2][D 1], every block written by a kernel.
  void *a = Alloc(2 * kPage, s_);
  void *b = Alloc(1 * kPage, s_);
  void *c = Alloc(2 * kPage, s_);
  void *d = Alloc(1 * kPage, s_);
  ASSERT_EQ(cudaSuccess, kernels_.fill(a, 2 * kPage, 1, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(b, kPage, 2, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(c, 2 * kPage, 3, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(d, kPage, 4, s_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, a, 2 * kPage, 0, s_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, c, 2 * kPage, 0, s_));
  const size_t mapped = Stats().mapped_bytes;
  // 4 pages: no free region is that large, so A's and C's pages are mapped
  // again side by side, and written there by a kernel.
  void *e = Alloc(4 * kPage, s_);
  gmr_vmm_pool_resource_stats st = Stats();
  EXPECT_EQ(1u, st.defrag_count);
  EXPECT_EQ(4u, st.remapped_page_count);
  EXPECT_EQ(mapped, st.mapped_bytes) << "the same physical pages, no new ones";
  ASSERT_EQ(cudaSuccess, kernels_.fill(e, 4 * kPage, 5, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  ExpectPattern(b, kPage, 2);
  ExpectPattern(d, kPage, 4);
  ExpectPattern(e, 4 * kPage, 5);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, b, kPage, 0, s_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, d, kPage, 0, s_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, e, 4 * kPage, 0, s_));
}

TEST_F(VmmPoolGpu, ZombiesAreUnmappedOnlyAfterTheirEvent) {
  Make();
  int *flag = nullptr;
  ASSERT_EQ(cudaSuccess, cudaHostAlloc(reinterpret_cast<void **>(&flag), sizeof *flag,
                                       cudaHostAllocMapped));
  *flag = 0;
  int clock_khz = 0;
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  void *a = Alloc(2 * kPage, s2_);
  void *fence = Alloc(kPage, s_);
  ASSERT_EQ(cudaSuccess, kernels_.fill(a, 2 * kPage, 6, s2_));
  // s2 holds until the host sets the flag (at most ~20 s, so a bug cannot
  // hang the run): A's free is pending on it.
  ASSERT_EQ(cudaSuccess, kernels_.wait_flag(flag, static_cast<long long>(clock_khz) * 20000, s2_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, a, 2 * kPage, 0, s2_));
  void *b = Alloc(2 * kPage, s_);  // A's pages, mapped again after the fence; s waits for s2
  EXPECT_EQ(1u, Stats().zombie_count);
  const uint64_t unmaps = Stats().unmap_count;
  void *c = Alloc(kPage, s_);
  EXPECT_EQ(1u, Stats().zombie_count) << "still pending: the old addresses stay mapped";
  EXPECT_EQ(unmaps, Stats().unmap_count);
  *reinterpret_cast<volatile int *>(flag) = 1;
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s2_));
  void *d = Alloc(kPage, s_);
  EXPECT_EQ(0u, Stats().zombie_count);
  EXPECT_EQ(unmaps + 2, Stats().unmap_count);
  // The pages behind b still hold what the kernel wrote through A.
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  ExpectPattern(b, 2 * kPage, 6);
  for (void *p : {fence, c, d}) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, kPage, 0, s_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, b, 2 * kPage, 0, s_));
  EXPECT_EQ(cudaSuccess, cudaFreeHost(flag));
}

TEST_F(VmmPoolGpu, GrowthDuringARealCaptureKeepsTheCaptureValid) {
  Make();
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  gmr_status st = gmr_resource_allocate_capturing(r_, 4 * kPage, 0, s_, &p, &f);
  EXPECT_EQ(GMR_OK, st) << f.message;
  if (st == GMR_OK) {
    EXPECT_EQ(cudaSuccess, kernels_.fill(p, 4 * kPage, 7, s_));
  }
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s_, &graph)) << "page mapping broke the capture";
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(cudaStreamCaptureModeGlobal, mode) << "the thread's mode was restored";
  ASSERT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  ExpectPattern(p, 4 * kPage, 7);
  EXPECT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
  EXPECT_EQ(cudaSuccess, cudaGraphDestroy(graph));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 4 * kPage, 0, s_));
}

TEST_F(VmmPoolGpu, SleepGivesTheMemoryBackAndWakeRestoresItBitForBit) {
  Make();
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, 1));
  void *weights = Alloc(256 * kMiB, s_);
  void *small = Alloc(4096, s_);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, 2));
  void *cache = Alloc(64 * kMiB, s_);
  ASSERT_EQ(cudaSuccess, kernels_.fill(weights, 256 * kMiB, 21, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(small, 4096, 22, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(cache, 64 * kMiB, 23, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  size_t free_awake = 0, total = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_awake, &total));

  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_tag_mask = 1u << 1;  // weights (and the small pool's page): the cache is discarded
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
  size_t free_asleep = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_asleep, &total));
  EXPECT_GE(free_asleep, free_awake + 320 * kMiB) << "the device has the pages back";
  EXPECT_EQ(0u, Stats().mapped_bytes);
  void *refused = nullptr;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate(r_, kPage, 0, s_, &refused));

  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  ExpectPattern(weights, 256 * kMiB, 21);
  ExpectPattern(small, 4096, 22);
  // The cache woke with fresh pages: write it again and read it back.
  ASSERT_EQ(cudaSuccess, kernels_.fill(cache, 64 * kMiB, 24, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  ExpectPattern(cache, 64 * kMiB, 24);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, weights, 256 * kMiB, 0, s_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, small, 4096, 0, s_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, cache, 64 * kMiB, 0, s_));
}

TEST_F(VmmPoolGpu, TrimGivesFreePagesBackToTheDevice) {
  Make();
  void *p = Alloc(128 * kMiB, s_);
  ASSERT_EQ(cudaSuccess, kernels_.fill(p, 128 * kMiB, 31, s_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 128 * kMiB, 0, s_));
  size_t before = 0, after = 0, total = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&before, &total));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(128 * kMiB, released);
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&after, &total));
  EXPECT_GE(after, before + 120 * kMiB);
}

// A request above all of the device's memory (cudaMemGetInfo's total) is
// refused at once on either VMM resource, with the device's size in the
// message and no device memory taken; a request that fits is served after.
TEST_F(VmmPoolGpu, ARequestAboveTheDevicesMemoryIsRefusedAtOnce) {
  using CreateFn = gmr_status (*)(const gmr_vmm_pool_resource_config *, gmr_vmm_pool_resource **,
                                  gmr_failure *);
  for (CreateFn create :
       {CreateFn{gmr_vmm_pages_resource_create}, CreateFn{gmr_vmm_resource_create}}) {
    gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
    gmr_vmm_pool_resource *pool = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    gmr_status st = create(&c, &pool, &f);
    if (st == GMR_ERR_UNSUPPORTED) GTEST_SKIP() << f.message;
    ASSERT_EQ(GMR_OK, st) << f.message;
    gmr_resource *r = gmr_vmm_pool_resource_as_resource(pool);
    size_t free_before = 0, free_after = 0, total = 0;
    ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_before, &total));
    void *p = nullptr;
    f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, total + 1, 0, s_, &p, &f));
    EXPECT_NE(nullptr, std::strstr(f.message, ("memory in all (" + std::to_string(total)).c_str()))
        << f.message;
    ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_after, &total));
    EXPECT_GE(free_after + 64 * kMiB, free_before) << "nothing mapped for the refused request";
    p = nullptr;
    f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(r, 64 * kMiB, 0, s_, &p, &f)) << f.message;
    ASSERT_EQ(cudaSuccess, kernels_.fill(p, 64 * kMiB, 7, s_));
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
    ExpectPattern(p, 64 * kMiB, 7);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * kMiB, 0, s_));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

TEST_F(VmmPoolGpu, AKernelOnASecondGpuReadsWhatTheFirstWrote) {
  if (device_count_ < 2) GTEST_SKIP() << "needs two GPUs (nvidia-h200-x2); this machine has 1";
  int can = 0;
  ASSERT_EQ(cudaSuccess, cudaDeviceCanAccessPeer(&can, 1, 0));
  if (!can) GTEST_SKIP() << "device 1 cannot access device 0";
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  c.device = 0;
  c.peer_access = GMR_VMM_POOL_PEERS_LIST;
  c.peers[0] = 1;
  c.peer_count = 1;
  Make(c);
  void *p = Alloc(3 * kPage, s_);
  ASSERT_EQ(cudaSuccess, kernels_.fill(p, 3 * kPage, 41, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  void *dst = nullptr;
  cudaStream_t s1 = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&dst, 3 * kPage));
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  ASSERT_EQ(cudaSuccess, kernels_.copy(dst, p, 3 * kPage, s1));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s1));
  ExpectPattern(dst, 3 * kPage, 41);
  EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s1));
  EXPECT_EQ(cudaSuccess, cudaFree(dst));
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 3 * kPage, 0, s_));
}

}  // namespace
