// Never unmap under running kernels (issue 33, item 2; vllm#43020 and
// vllm#45615 unmapped memory a still-running forward used, and faulted). On
// the simulation, work queued on a held stream stays pending and uses the
// addresses it touched: a cuMemUnmap over such a use is counted
// (gmr_cuda_sim_vmm_usage.unmap_under_work_count), and SimTest fails every
// test that made one. Here, in both placements, a held stream uses memory
// (a copy into it: the kernel) and a mark is taken after it; then sleep,
// trim after a free, decommit and the free of a range must not unmap that
// memory until the mark's work is done: either they wait for it (the mark
// is complete when they return, and the memory is gone) or they leave the
// memory mapped; with the device synchronisation refused they unmap
// nothing and the work is still pending. The first test shows that the
// simulation catches an unmap under pending work (the check the others
// rely on fails there).
#include <gtest/gtest.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "gmr/vmm_pool_range.h"
#include "gmr/vmm_pool_sleep.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_sleep_fixture.h"

namespace {

using gmr_test::kMiB;
using gmr_test::kPage;

size_t UnmapsUnderWork() {
  gmr_cuda_sim_vmm_usage u;
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&u));
  return u.unmap_under_work_count;
}

bool Complete(gmr_cuda_sim_mark m) {
  bool done = false;
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_query(m, &done));
  return done;
}

// The check the other tests rely on: the driver's own calls, an unmap
// while a held stream's copy into the memory is pending.
class UnmapUnderWork : public gmr_test::SimTest {};

TEST_F(UnmapUnderWork, TheSimulationCountsAnUnmapUnderPendingWork) {
  expect_unmap_under_work_ = true; /* on purpose: this is what must never happen */
  const gmr__cuda_vmm_ops *vmm = gmr__cuda_vmm(gmr__cuda());
  ASSERT_EQ(CUDA_SUCCESS, vmm->init(0));
  CUdeviceptr va = 0;
  ASSERT_EQ(CUDA_SUCCESS, vmm->address_reserve(&va, 2 * kPage, kPage));
  CUmemGenericAllocationHandle h[2] = {0, 0};
  const gmr__vmm_prop prop = {0, 0, false};
  const int dev = 0;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(CUDA_SUCCESS, vmm->create(&h[i], kPage, &prop));
    ASSERT_EQ(CUDA_SUCCESS, vmm->map(va + i * kPage, kPage, h[i]));
  }
  ASSERT_EQ(CUDA_SUCCESS, vmm->set_access(va, 2 * kPage, &dev, 1));
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));
  std::vector<char> src(4096, 7);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_memcpy_async(reinterpret_cast<void *>(va + kPage),
                                                 src.data(), src.size(), s));
  // The page nothing runs on: fine.
  ASSERT_EQ(CUDA_SUCCESS, vmm->unmap(va, kPage));
  EXPECT_EQ(0u, UnmapsUnderWork());
  // The page the pending copy writes: a GPU would fault.
  ASSERT_EQ(CUDA_SUCCESS, vmm->unmap(va + kPage, kPage));
  EXPECT_EQ(1u, UnmapsUnderWork());
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, false));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
  for (int i = 0; i < 2; ++i) ASSERT_EQ(CUDA_SUCCESS, vmm->release(h[i]));
  ASSERT_EQ(CUDA_SUCCESS, vmm->address_free(va, 2 * kPage));
}

class UnmapOrder : public gmr_test::SleepTest {
 protected:
  void SetUp() override {
    gmr_test::SleepTest::SetUp();
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s_));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s_, true));
  }
  void TearDown() override {
    for (gmr_cuda_sim_mark m : marks_) EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_release(m));
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s_, false));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s_));
    gmr_test::SleepTest::TearDown();
  }
  // A kernel on the held stream that writes [p, p + bytes): pending until
  // the stream is released or something waits for it; a mark after it.
  gmr_cuda_sim_mark Use(void *p, size_t bytes, unsigned char value) {
    src_.assign(bytes, value);
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_memcpy_async(p, src_.data(), bytes, s_));
    gmr_cuda_sim_mark m = 0;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_stream(s_, &m));
    marks_.push_back(m);
    return m;
  }
  gmr_stream s_ = nullptr;
  std::vector<unsigned char> src_;
  std::vector<gmr_cuda_sim_mark> marks_;
};

TEST_P(UnmapOrder, SleepWaitsForTheWorkOnEveryStream) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 2 * kPage, 0, s_, &p));
  const gmr_cuda_sim_mark m = Use(p, 2 * kPage, 0x5c);
  gmr_vmm_pool_sleep_options o = SaveTags(UINT64_MAX);
  o.host = GMR_VMM_POOL_HOST_PAGEABLE;
  o.staging_bytes = kMiB;
  // Refused synchronisation: nothing unmapped, the kernel still runs.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, 1,
                                                cudaErrorLaunchFailure));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_TRUE(Mapped(p));
  EXPECT_FALSE(Complete(m));
  // The sleep waits for it, then unmaps: the kernel's writes are saved.
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  EXPECT_TRUE(Complete(m)) << "the sleep waited for the kernel";
  EXPECT_FALSE(Mapped(p));
  EXPECT_EQ(0u, UnmapsUnderWork());
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_EQ(0x5c, static_cast<unsigned char *>(p)[2 * kPage - 1]);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 2 * kPage, 0, s_));
}

TEST_P(UnmapOrder, TrimAfterAFreeNeverUnmapsWhatTheStreamStillUses) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 3 * kPage, 0, s_, &p));
  const gmr_cuda_sim_mark m = Use(p, 3 * kPage, 0x11);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 3 * kPage, 0, s_));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  // Either trim left the memory mapped (its stream's work is pending) or it
  // waited for that work before unmapping it.
  EXPECT_TRUE(Mapped(p) || Complete(m)) << "unmapped while the kernel still ran";
  EXPECT_EQ(0u, UnmapsUnderWork());
  // Once the work is done, trim gives it back.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s_, false));
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_FALSE(Mapped(p));
  EXPECT_EQ(0u, UnmapsUnderWork());
}

TEST_P(UnmapOrder, AnotherStreamsRequestNeverUnmapsWhatTheStreamStillUses) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 4 * kPage, 0, s_, &p));
  Use(p, 4 * kPage, 0x22);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 4 * kPage, 0, s_));
  // Requests on another stream that want memory: moved, mapped or grown,
  // never taken from under the pending kernel.
  gmr_stream t = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&t));
  std::vector<void *> got;
  for (size_t bytes : {kPage, 3 * kPage + 4096, 5 * kPage}) {
    void *q = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, bytes, 0, t, &q));
    got.push_back(q);
    EXPECT_EQ(0u, UnmapsUnderWork());
  }
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, got[0], kPage, 0, t));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, got[1], 3 * kPage + 4096, 0, t));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, got[2], 5 * kPage, 0, t));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(t));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(t));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(0u, UnmapsUnderWork());
}

TEST_P(UnmapOrder, DecommitAndFreeOfARangeWaitForTheWork) {
  void *base = nullptr;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_reserve_range(pool_, 8 * kPage, 0, &base, nullptr));
  char *kv = static_cast<char *>(base);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_commit(pool_, kv, 4 * kPage, nullptr));
  gmr_cuda_sim_mark m = Use(kv + kPage, kPage, 0x33);
  // Refused synchronisation: nothing unmapped, the kernel still runs.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, 1,
                                                cudaErrorLaunchFailure));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_vmm_pool_resource_decommit(pool_, kv, 2 * kPage, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "cudaDeviceSynchronize")) << f.message;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_TRUE(Mapped(kv + kPage));
  EXPECT_FALSE(Complete(m));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_decommit(pool_, kv, 2 * kPage, &f)) << f.message;
  EXPECT_TRUE(Complete(m)) << "the decommit waited for the kernel";
  EXPECT_FALSE(Mapped(kv + kPage));
  EXPECT_EQ(0u, UnmapsUnderWork());
  // The free of the range likewise.
  m = Use(kv + 3 * kPage, kPage, 0x44);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, 1,
                                                cudaErrorLaunchFailure));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_vmm_pool_resource_free_range(pool_, kv, &f));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_TRUE(Mapped(kv + 3 * kPage));
  EXPECT_FALSE(Complete(m));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_free_range(pool_, kv, &f)) << f.message;
  EXPECT_TRUE(Complete(m));
  EXPECT_EQ(0u, UnmapsUnderWork());
}

TEST_P(UnmapOrder, ASleepRefusedDuringACaptureUnmapsNothing) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kPage, 0, s_, &p));
  const gmr_cuda_sim_mark m = Use(p, kPage, 0x66);
  gmr_stream c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&c));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(c));
  gmr_vmm_pool_sleep_options o = SaveTags(UINT64_MAX);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_vmm_pool_resource_sleep(pool_, &o, &f));
  gmr_graph g = nullptr;
  (void)gmr_cuda_stream_end_capture(c, &g); /* the refused synchronisation invalidated it */
  if (g != nullptr) {
    EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(c));
  EXPECT_TRUE(Mapped(p));
  EXPECT_FALSE(Complete(m));
  EXPECT_EQ(0u, UnmapsUnderWork());
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, kPage, 0, s_));
}

INSTANTIATE_TEST_SUITE_P(Placements, UnmapOrder,
                         ::testing::Values(gmr_test::Placement::kPages,
                                           gmr_test::Placement::kFine),
                         gmr_test::PlacementName);

}  // namespace
