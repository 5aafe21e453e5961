// vmm (fine placement) on a real GPU: blocks that share
// pages written by kernels, free memory moved (whole handles unmapped and
// mapped again) while the blocks that stay keep their data, growth during a
// real graph capture in global mode, a repeating loop that makes no driver
// call once warm, sleep and wake with saved contents restored bit for bit,
// trim. Clean under `compute-sanitizer --tool memcheck`.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <vector>

#include "gmr/resource.h"
#include "gmr/vmm_resource.h"
#include "tests/gpu/vmm_kernels.h"
#include "tests/support/check_stack.h"
#include "tests/support/gpu_fixture.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kPage = 2 * kMiB;

class VmmFineGpu : public gmr_test::GpuTest {
 protected:
  gmr_test::VmmKernels kernels_;
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;
  cudaStream_t s_ = nullptr;

  void SetUp() override {
    gmr_test::GpuTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
    ASSERT_EQ(cudaSuccess, kernels_.load());
    ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
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
  }
  // Fine placement on device 0 (exact growth, one handle per growth unless
  // asked); skips the test when the device has no VMM support.
  void Make(uint32_t growth_percent = 0, uint32_t handle_divisor = 0,
            uint32_t remap_permille = 0) {
    gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
    c.growth_percent = growth_percent;
    c.handle_divisor = handle_divisor;
    c.remap_permille = remap_permille;
    gmr_failure f = GMR_FAILURE_INIT;
    gmr_status st = gmr_vmm_resource_create(&c, &pool_, &f);
    if (st == GMR_ERR_UNSUPPORTED) GTEST_SKIP() << f.message;
    ASSERT_EQ(GMR_OK, st) << f.message;
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
  }
  void *Alloc(size_t bytes) {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, bytes, 0, s_, &p, &f)) << f.message;
    return p;
  }
  void Free(void *p, size_t bytes) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, bytes, 0, s_));
  }
  gmr_vmm_pool_resource_stats Stats() {
    gmr_vmm_pool_resource_stats s = GMR_VMM_POOL_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_get_stats(pool_, &s));
    return s;
  }
  uint64_t DriverCalls() {
    gmr_vmm_pool_resource_stats s = Stats();
    return s.page_create_count + s.page_release_count + s.map_count + s.unmap_count;
  }
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

TEST_F(VmmFineGpu, BlocksThatSharePagesKeepTheirOwnBytes) {
  Make();
  // Odd sizes: every boundary falls inside a page that two blocks share.
  const size_t sizes[] = {1000, kPage - 4096, 3 * kMiB + 777, 256, 5 * kPage + 12345};
  std::vector<void *> p;
  for (size_t i = 0; i < 5; ++i) {
    p.push_back(Alloc(sizes[i]));
    ASSERT_EQ(cudaSuccess, kernels_.fill(p[i], sizes[i], 50 + i, s_));
  }
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  EXPECT_LT(Stats().mapped_bytes, 12 * kPage) << "no request was rounded up to a page";
  Free(p[1], sizes[1]);
  Free(p[3], sizes[3]);
  void *q = Alloc(kPage - 8192);  // into the freed bytes, beside live ones
  ASSERT_EQ(cudaSuccess, kernels_.fill(q, kPage - 8192, 60, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  for (size_t i : {size_t{0}, size_t{2}, size_t{4}}) ExpectPattern(p[i], sizes[i], 50 + i);
  ExpectPattern(q, kPage - 8192, 60);
  Free(q, kPage - 8192);
  for (size_t i : {size_t{0}, size_t{2}, size_t{4}}) Free(p[i], sizes[i]);
}

TEST_F(VmmFineGpu, MovedMemoryServesANewBlockAndTheBlocksThatStayKeepTheirData) {
  Make();
  // [A 3][B 1][C 3][D 1], one handle each, written by kernels.
  void *a = Alloc(3 * kPage);
  void *b = Alloc(kPage);
  void *c = Alloc(3 * kPage);
  void *d = Alloc(kPage);
  ASSERT_EQ(cudaSuccess, kernels_.fill(a, 3 * kPage, 1, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(b, kPage, 2, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(c, 3 * kPage, 3, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(d, kPage, 4, s_));
  Free(a, 3 * kPage);
  Free(c, 3 * kPage);
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));  // their work done: movable
  const size_t mapped = Stats().mapped_bytes;
  void *e = Alloc(6 * kPage);
  gmr_vmm_pool_resource_stats st = Stats();
  EXPECT_EQ(mapped, st.mapped_bytes) << "the same physical memory, moved";
  EXPECT_EQ(6u, st.remapped_page_count);
  ASSERT_EQ(cudaSuccess, kernels_.fill(e, 6 * kPage, 5, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  ExpectPattern(b, kPage, 2);
  ExpectPattern(d, kPage, 4);
  ExpectPattern(e, 6 * kPage, 5);
  Free(b, kPage);
  Free(d, kPage);
  Free(e, 6 * kPage);
}

TEST_F(VmmFineGpu, GrowthDuringARealCaptureKeepsTheCaptureValid) {
  Make();
  void *before = Alloc(1000);
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  gmr_status st = gmr_resource_allocate_capturing(r_, 4 * kPage + 300, 0, s_, &p, &f);
  EXPECT_EQ(GMR_OK, st) << f.message;
  if (st == GMR_OK) {
    EXPECT_EQ(cudaSuccess, kernels_.fill(p, 4 * kPage + 300, 7, s_));
  }
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s_, &graph)) << "page mapping broke the capture";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  ExpectPattern(p, 4 * kPage + 300, 7);
  EXPECT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
  EXPECT_EQ(cudaSuccess, cudaGraphDestroy(graph));
  Free(p, 4 * kPage + 300);
  Free(before, 1000);
}

// Shaped like a training step (as vmm_fine_test's loop on the simulation):
// activations of many sizes kept until the step ends, a temporary after each.
TEST_F(VmmFineGpu, ALoopThatRepeatsMakesNoDriverCallOnceWarm) {
  Make(25, 128, 15);  // the `vmm` defaults
  auto step = [&](unsigned seed) {
    std::vector<std::pair<void *, size_t>> kept;
    unsigned x = 99;
    for (int i = 0; i < 100; ++i) {
      x = x * 1103515245u + 12345u;
      size_t bytes = 512 + (x >> 8) % (24 * kMiB);
      void *p = Alloc(bytes);
      ASSERT_EQ(cudaSuccess, kernels_.fill(p, bytes, seed, s_));
      kept.emplace_back(p, bytes);
      size_t temp = 256 + (x >> 4) % (6 * kMiB);
      void *t = Alloc(temp);
      ASSERT_EQ(cudaSuccess, kernels_.fill(t, temp, seed + 1, s_));
      Free(t, temp);
    }
    ExpectPattern(kept.front().first, kept.front().second, seed);
    while (!kept.empty()) {
      Free(kept.back().first, kept.back().second);
      kept.pop_back();
    }
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  };
  step(1);
  step(2);
  const uint64_t calls = DriverCalls();
  step(3);
  EXPECT_EQ(calls, DriverCalls()) << "the third step found every block's memory in place";
}

TEST_F(VmmFineGpu, SleepGivesTheMemoryBackAndWakeRestoresItBitForBit) {
  Make();
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, 1));
  void *weights = Alloc(256 * kMiB + 1000);
  void *small = Alloc(4096);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, 2));
  void *cache = Alloc(64 * kMiB);
  ASSERT_EQ(cudaSuccess, kernels_.fill(weights, 256 * kMiB + 1000, 21, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(small, 4096, 22, s_));
  ASSERT_EQ(cudaSuccess, kernels_.fill(cache, 64 * kMiB, 23, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  size_t free_awake = 0, total = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_awake, &total));
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_tag_mask = 1u << 1;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
  size_t free_asleep = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&free_asleep, &total));
  EXPECT_GE(free_asleep, free_awake + 320 * kMiB) << "the device has the memory back";
  EXPECT_EQ(0u, Stats().mapped_bytes);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  ExpectPattern(weights, 256 * kMiB + 1000, 21);
  ExpectPattern(small, 4096, 22);
  ASSERT_EQ(cudaSuccess, kernels_.fill(cache, 64 * kMiB, 24, s_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s_));
  ExpectPattern(cache, 64 * kMiB, 24);
  Free(weights, 256 * kMiB + 1000);
  Free(small, 4096);
  Free(cache, 64 * kMiB);
}

TEST_F(VmmFineGpu, TrimGivesFreeMemoryBackToTheDevice) {
  Make();
  void *p = Alloc(128 * kMiB);
  ASSERT_EQ(cudaSuccess, kernels_.fill(p, 128 * kMiB, 31, s_));
  Free(p, 128 * kMiB);
  size_t before = 0, after = 0, total = 0;
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&before, &total));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(128 * kMiB, released);
  ASSERT_EQ(cudaSuccess, cudaMemGetInfo(&after, &total));
  EXPECT_GE(after, before + 120 * kMiB);
}

}  // namespace
