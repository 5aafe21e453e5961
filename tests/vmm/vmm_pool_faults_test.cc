// Injected failures at every driver and runtime call of an allocation that
// grows, of a defragmentation, of sleep, of wake and of extend: each gives
// OUT_OF_MEMORY (CUDA_ERROR_OUT_OF_MEMORY) or CUDA (anything else) with the
// code and the call's name in the failure record, and leaves the pool's
// regions, pages and reservations (and the simulated device) exactly as they
// were. Then the same operation without the fault succeeds.
#include <gtest/gtest.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <functional>
#include <string>
#include <tuple>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/streams.h"
#include "gmr/vmm_pool_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace {

using gmr_test::kPage;
using gmr_test::Layout;
using gmr_test::Stats;

struct Snapshot {
  std::string layout;
  gmr_vmm_pool_resource_stats stats;
  gmr_cuda_sim_vmm_usage vmm;
  gmr_cuda_sim_usage device, host;

  auto Key() const {
    return std::make_tuple(layout, stats.mapped_bytes, stats.reserved_bytes, stats.live_bytes,
                           stats.free_bytes, stats.hole_bytes, stats.zombie_bytes,
                           stats.asleep_bytes, stats.saved_bytes, vmm.reservation_count,
                           vmm.physical_count, vmm.mapping_count, vmm.mapped_bytes,
                           device.used_bytes, host.used_bytes);
  }
};

Snapshot Take(gmr_vmm_pool_resource *pool) {
  Snapshot s;
  s.layout = Layout(pool);
  s.stats = Stats(pool);
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&s.vmm));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &s.device));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_host_usage(&s.host));
  return s;
}

using Op = std::function<gmr_status(gmr_failure *)>;

// Fail the 1st, 2nd, ... call of kind `call` that `op` makes, until `op`
// makes fewer such calls than that and succeeds. Each failure must change
// nothing. Returns how many distinct calls were failed.
int FailEachCall(gmr_vmm_pool_resource *pool, gmr_cuda_call call, int error, const Op &op,
                 const char *name) {
  SCOPED_TRACE(gmr_cuda_call_name(call));
  const gmr_status want = error == CUDA_ERROR_OUT_OF_MEMORY ? GMR_ERR_OUT_OF_MEMORY : GMR_ERR_CUDA;
  for (int k = 0; k < 100; ++k) {
    SCOPED_TRACE("failing call " + std::to_string(k + 1));
    const Snapshot before = Take(pool);
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(call, static_cast<uint64_t>(k), 1, error));
    gmr_failure f = GMR_FAILURE_INIT;
    gmr_status st = op(&f);
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    if (st == GMR_OK) return k;
    EXPECT_EQ(want, st);
    EXPECT_EQ(error, f.cuda_error);
    EXPECT_NE(nullptr, std::strstr(f.message, name)) << f.message;
    EXPECT_EQ(before.Key(), Take(pool).Key()) << "was:\n" << before.layout << "\nnow:\n"
                                              << Layout(pool);
    gmr_test::ExpectInvariants(pool);
  }
  ADD_FAILURE() << "the operation never succeeded";
  return -1;
}

class VmmPoolFaults : public gmr_test::SimTest {
 protected:
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;
  gmr_stream a_ = nullptr, b_ = nullptr;

  void SetUp() override {
    gmr_test::SimTest::SetUp();
    gmr_vmm_pool_resource_config c = gmr_test::TestConfig(16);
    ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&c, &pool_, nullptr));
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a_));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b_));
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
    gmr_test::ExpectInvariants(pool_);
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a_));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b_));
    gmr_test::SimTest::TearDown();
  }
  void *Alloc(size_t pages, gmr_stream s) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r_, pages * kPage, 0, s, &p));
    return p;
  }
};

TEST_F(VmmPoolFaults, EveryCallOfAnAllocationThatMapsNewPages) {
  void *first = Alloc(1, nullptr);
  void *p = nullptr;
  Op op = [&](gmr_failure *f) {
    return gmr_resource_allocate_ex(r_, 3 * kPage, 0, nullptr, &p, f);
  };
  auto undo = [&] {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 3 * kPage, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_trim(r_, nullptr)); /* so the next try maps pages again */
  };
  EXPECT_EQ(3, FailEachCall(pool_, GMR_CUDA_CALL_MEM_CREATE, CUDA_ERROR_OUT_OF_MEMORY, op,
                            "cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY"));
  undo();
  EXPECT_EQ(3, FailEachCall(pool_, GMR_CUDA_CALL_MEM_MAP, CUDA_ERROR_INVALID_VALUE, op,
                            "cuMemMap failed: CUDA_ERROR_INVALID_VALUE"));
  undo();
  EXPECT_EQ(1, FailEachCall(pool_, GMR_CUDA_CALL_MEM_SET_ACCESS, CUDA_ERROR_INVALID_DEVICE, op,
                            "cuMemSetAccess failed"));
  undo();
  // A request larger than the VA chunk also reserves addresses.
  Op big = [&](gmr_failure *f) {
    return gmr_resource_allocate_ex(r_, 20 * kPage, 0, nullptr, &p, f);
  };
  EXPECT_EQ(1, FailEachCall(pool_, GMR_CUDA_CALL_MEM_ADDRESS_RESERVE, CUDA_ERROR_OUT_OF_MEMORY,
                            big, "cuMemAddressReserve failed"));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 20 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, first, kPage, 0, nullptr));
}

TEST_F(VmmPoolFaults, EveryCallOfADefragmentation) {
  // [-2 pending on A][1][-2 pending on A][1]: 6 pages for B remap the 4 free
  // ones (B waits for A on the GPU) and map 2 new.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  void *f1 = Alloc(2, a_);
  void *l1 = Alloc(1, a_);
  void *f2 = Alloc(2, a_);
  void *l2 = Alloc(1, a_);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, f1, 2 * kPage, 0, a_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, f2, 2 * kPage, 0, a_));
  ASSERT_EQ("[-2][1][-2][1]", Layout(pool_));
  void *p = nullptr;
  Op op = [&](gmr_failure *f) { return gmr_resource_allocate_ex(r_, 6 * kPage, 0, b_, &p, f); };
  const int maps = FailEachCall(pool_, GMR_CUDA_CALL_MEM_MAP, CUDA_ERROR_OUT_OF_MEMORY, op,
                                "cuMemMap failed: CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(6, maps) << "4 second mappings and 2 new pages";
  EXPECT_EQ("[~2][1][~2][1][+6]", Layout(pool_, p));
  EXPECT_EQ(1u, Stats(pool_).defrag_count);
  // Run the same defragmentation again for every other kind of call.
  const struct {
    gmr_cuda_call call;
    int error;
    const char *name;
    int count;
  } calls[] = {
      {GMR_CUDA_CALL_MEM_CREATE, CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate", 2},
      {GMR_CUDA_CALL_MEM_SET_ACCESS, CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess", 3},
      {GMR_CUDA_CALL_STREAM_WAIT_EVENT, cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent", 2},
      {GMR_CUDA_CALL_EVENT_RECORD, cudaErrorLaunchFailure, "cudaEventRecord", 1},
  };
  for (const auto &c : calls) {
    // Back to the fragmented state: free the 6, release A so its zombies go,
    // trim, and rebuild the same layout.
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 6 * kPage, 0, b_));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, l1, kPage, 0, a_));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, l2, kPage, 0, a_));
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
    EXPECT_EQ(GMR_OK, gmr_resource_trim(r_, nullptr));
    ASSERT_EQ("", Layout(pool_));
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
    f1 = Alloc(2, a_);
    l1 = Alloc(1, a_);
    f2 = Alloc(2, a_);
    l2 = Alloc(1, a_);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, f1, 2 * kPage, 0, a_));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, f2, 2 * kPage, 0, a_));
    ASSERT_EQ("[-2][1][-2][1]", Layout(pool_));
    EXPECT_EQ(c.count, FailEachCall(pool_, c.call, c.error, op, c.name));
    EXPECT_EQ("[~2][1][~2][1][+6]", Layout(pool_, p));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 6 * kPage, 0, b_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, l1, kPage, 0, a_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, l2, kPage, 0, a_));
}

TEST_F(VmmPoolFaults, EveryCallOfSleepAndWake) {
  void *a = Alloc(2, nullptr);
  void *b = Alloc(1, nullptr);
  std::memset(a, 0xa1, 2 * kPage);
  std::memset(b, 0xb2, kPage);
  gmr_vmm_pool_sleep_options so = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  so.save_all = true;
  so.host = GMR_VMM_POOL_HOST_PINNED; /* the pageable path: vmm_sleep_copy_test */
  Op sleep = [&](gmr_failure *f) { return gmr_vmm_pool_resource_sleep(pool_, &so, f); };
  Op wake = [&](gmr_failure *f) { return gmr_vmm_pool_resource_wake(pool_, nullptr, f); };
  const struct {
    gmr_cuda_call call;
    int error;
    const char *name;
    int count;
  } sleep_calls[] = {
      {GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, cudaErrorLaunchFailure, "cudaDeviceSynchronize", 1},
      {GMR_CUDA_CALL_HOST_ALLOC, cudaErrorMemoryAllocation, "cudaHostAlloc", 2},
      {GMR_CUDA_CALL_MEMCPY_ASYNC, cudaErrorLaunchFailure, "cudaMemcpyAsync", 2},
      {GMR_CUDA_CALL_STREAM_SYNCHRONIZE, cudaErrorLaunchFailure, "cudaStreamSynchronize", 1},
      {GMR_CUDA_CALL_MEM_UNMAP, CUDA_ERROR_INVALID_VALUE, "cuMemUnmap", 3},
  };
  const struct {
    gmr_cuda_call call;
    int error;
    const char *name;
    int count;
  } wake_calls[] = {
      {GMR_CUDA_CALL_MEM_CREATE, CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate", 3},
      {GMR_CUDA_CALL_MEM_MAP, CUDA_ERROR_INVALID_VALUE, "cuMemMap", 3},
      {GMR_CUDA_CALL_MEM_SET_ACCESS, CUDA_ERROR_INVALID_VALUE, "cuMemSetAccess", 2},
      {GMR_CUDA_CALL_MEMCPY_ASYNC, cudaErrorLaunchFailure, "cudaMemcpyAsync", 2},
      {GMR_CUDA_CALL_STREAM_SYNCHRONIZE, cudaErrorLaunchFailure, "cudaStreamSynchronize", 1},
  };
  for (const auto &c : sleep_calls) {
    // cudaErrorMemoryAllocation is the runtime's out of memory.
    int error = c.error == cudaErrorMemoryAllocation ? CUDA_ERROR_OUT_OF_MEMORY : c.error;
    EXPECT_EQ(c.count, FailEachCall(pool_, c.call, error, sleep, c.name));
    EXPECT_EQ("[z2][z1]", Layout(pool_));
    EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
    EXPECT_EQ(0xa1, static_cast<unsigned char *>(a)[2 * kPage - 1]);
    EXPECT_EQ(0xb2, static_cast<unsigned char *>(b)[0]);
  }
  for (const auto &c : wake_calls) {
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &so, nullptr));
    EXPECT_EQ(c.count, FailEachCall(pool_, c.call, c.error, wake, c.name));
    EXPECT_EQ("[2][1]", Layout(pool_));
    EXPECT_EQ(0xa1, static_cast<unsigned char *>(a)[0]);
    EXPECT_EQ(0xb2, static_cast<unsigned char *>(b)[kPage - 1]);
  }
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, a, 2 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, b, kPage, 0, nullptr));
}

TEST_F(VmmPoolFaults, EveryCallOfAnExtension) {
  void *p = Alloc(2, nullptr);
  Op op = [&](gmr_failure *f) {
    return gmr_resource_extend(r_, p, 2 * kPage, 5 * kPage, 0, nullptr, f);
  };
  EXPECT_EQ(3, FailEachCall(pool_, GMR_CUDA_CALL_MEM_CREATE, CUDA_ERROR_OUT_OF_MEMORY, op,
                            "cuMemCreate"));
  EXPECT_EQ("[5]", Layout(pool_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 5 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r_, nullptr));
  p = Alloc(2, nullptr);
  EXPECT_EQ(3, FailEachCall(pool_, GMR_CUDA_CALL_MEM_MAP, CUDA_ERROR_INVALID_VALUE, op, "cuMemMap"));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 5 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r_, nullptr));
  p = Alloc(2, nullptr);
  EXPECT_EQ(1, FailEachCall(pool_, GMR_CUDA_CALL_MEM_SET_ACCESS, CUDA_ERROR_INVALID_VALUE, op,
                            "cuMemSetAccess"));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 5 * kPage, 0, nullptr));
}

// A free that cannot record its event: vmm_pool_free_faults_test.cc.

TEST_F(VmmPoolFaults, ARefusedUnmapStopsTrimWithWhatWentBackStillGone) {
  void *p = Alloc(4, nullptr);
  void *wall = Alloc(1, nullptr);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 4 * kPage, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_UNMAP, 2, 1,
                                                CUDA_ERROR_INVALID_VALUE));
  size_t released = 0;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_trim(r_, &released));
  EXPECT_EQ(2 * kPage, released);
  EXPECT_EQ("[*2][-2][1]", Layout(pool_)) << "two pages went back, two stay free";
  gmr_test::ExpectInvariants(pool_);
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(2 * kPage, released);
  EXPECT_EQ("[*4][1]", Layout(pool_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, wall, kPage, 0, nullptr));
}

TEST_F(VmmPoolFaults, DestroyThatCannotSynchronizeChangesNothing) {
  void *p = Alloc(1, nullptr);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, kPage, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, 1,
                                                cudaErrorLaunchFailure));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r_));
  EXPECT_EQ("[-1]", Layout(pool_));
  // TearDown destroys it for real.
}

}  // namespace
