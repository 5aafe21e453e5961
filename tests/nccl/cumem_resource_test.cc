// gmr_cumem_resource on the simulation: one physical allocation per request
// at the granularity, ncclMemAlloc's properties with nccl_ready (and the
// retry without fabric handles), peers, the device restored, bad frees,
// capture, every driver failure rolled back, destroy, and in specs.
#include <gtest/gtest.h>

#include <cuda.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/nccl/cumem_resource.h"
#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

gmr_cuda_sim_vmm_usage VmmUsage() {
  gmr_cuda_sim_vmm_usage u;
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&u));
  return u;
}

class Cumem : public gmr_test::SimTest {
 protected:
  Cumem() { sim_config_.device_count = 2; }
  gmr_cumem_resource *cumem_ = nullptr;
  gmr_resource *r_ = nullptr;

  void Make(gmr_cumem_resource_config c = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT) {
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_cumem_resource_create(&c, &cumem_, &f)) << f.message;
    r_ = gmr_cumem_resource_as_resource(cumem_);
  }
  gmr_cumem_resource_stats Stats() {
    gmr_cumem_resource_stats s = GMR_CUMEM_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_cumem_resource_get_stats(cumem_, &s));
    return s;
  }
  void TearDown() override {
    if (r_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    }
    gmr_cuda_sim_vmm_usage u = VmmUsage();
    EXPECT_EQ(0u, u.physical_count) << "a physical allocation outlived the resource";
    EXPECT_EQ(0u, u.reservation_count) << "addresses outlived the resource";
    gmr_test::SimTest::TearDown();
  }
};

TEST_F(Cumem, EachAllocationIsOnePhysicalAllocationRoundedToTheGranularity) {
  Make();
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 1, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 5 * kMiB, 0, nullptr, &b));
  gmr_cuda_sim_vmm_mapping ma, mb;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(a, &ma));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(b, &mb));
  EXPECT_TRUE(ma.mapped);
  EXPECT_EQ(a, ma.base);
  EXPECT_EQ(2 * kMiB, ma.bytes);
  EXPECT_EQ(b, mb.base);
  EXPECT_EQ(6 * kMiB, mb.bytes) << "5 MiB rounds up to three 2 MiB granules, one mapping";
  EXPECT_NE(ma.physical_id, mb.physical_id);
  EXPECT_EQ(0u, ma.handle_types) << "not NCCL-ready: no export handle types";
  EXPECT_EQ(1u, ma.access_device_mask) << "the device alone";
  gmr_cuda_sim_vmm_usage u = VmmUsage();
  EXPECT_EQ(2u, u.physical_count);
  EXPECT_EQ(2u, u.reservation_count);
  std::memset(b, 0x5a, 6 * kMiB);  // writable to the last byte
  gmr_cumem_resource_stats s = Stats();
  EXPECT_EQ(8 * kMiB, s.live_bytes);
  EXPECT_EQ(2u, s.live_count);
  EXPECT_EQ(2u, s.create_count);
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r_, &fp));
  EXPECT_EQ(8 * kMiB, fp.held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, a, 1, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, b, 5 * kMiB, 0, nullptr));
  EXPECT_EQ(2u, Stats().release_count);
  EXPECT_EQ(0u, VmmUsage().physical_count);
  EXPECT_EQ(0u, VmmUsage().reservation_count);
}

TEST_F(Cumem, NcclReadyAsksForExportableHandlesAndTheRecommendedGranularity) {
  gmr_cuda_sim_vmm_config v = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  v.recommended_granularity_bytes = 4 * kMiB;
  v.fabric_handles_supported = true;
  v.gpu_direct_rdma_supported = true;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&v));
  gmr_cumem_resource_config c = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;
  c.nccl_ready = true;
  Make(c);
  gmr_cumem_resource_stats s = Stats();
  EXPECT_EQ(4 * kMiB, s.granularity_bytes);
  EXPECT_TRUE(s.gpu_direct_rdma);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kMiB, 0, nullptr, &p));
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(p, &m));
  EXPECT_EQ(4 * kMiB, m.bytes);
  EXPECT_EQ(unsigned{CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC},
            m.handle_types);
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % (4 * kMiB));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, kMiB, 0, nullptr));
}

TEST_F(Cumem, ADriverThatRefusesFabricHandlesIsAskedAgainWithoutThem) {
  gmr_cuda_sim_vmm_config v = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  v.fabric_handles_supported = true;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&v));
  gmr_cumem_resource_config c = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;
  c.nccl_ready = true;
  Make(c);
  // No IMEX channel: the driver says NOT_PERMITTED to the first cuMemCreate.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_CREATE, 0, 1,
                                                CUDA_ERROR_NOT_PERMITTED));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kMiB, 0, nullptr, &p));
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(p, &m));
  EXPECT_EQ(unsigned{CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}, m.handle_types);
  EXPECT_EQ(unsigned{CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}, Stats().handle_types)
      << "fabric is not asked for again";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, kMiB, 0, nullptr));
}

TEST_F(Cumem, PeersGetAccessAndTheCallersDeviceIsRestored) {
  gmr_cumem_resource_config c = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;
  c.device = 1;
  c.peer_access = GMR_CUMEM_PEERS_ALL;
  Make(c);
  EXPECT_EQ(2u, Stats().access_device_count);
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kMiB, 0, nullptr, &p));
  int now = -1;
  ASSERT_EQ(GMR_OK, gmr_device_get_current(&now));
  EXPECT_EQ(0, now) << "allocate restores the caller's device";
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(p, &m));
  EXPECT_EQ(1, m.device) << "memory of the resource's device";
  EXPECT_EQ(3u, m.access_device_mask) << "device 1 and its peer 0";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, kMiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_device_get_current(&now));
  EXPECT_EQ(0, now) << "deallocate restores the caller's device";
}

TEST_F(Cumem, BadConfigsAreRefusedWithAReason) {
  gmr_cumem_resource *r = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  gmr_cumem_resource_config c = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;
  c.device = 7;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cumem_resource_create(&c, &r, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "device 7 does not exist")) << f.message;
  EXPECT_EQ(nullptr, r);
  c = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;
  c.peer_access = GMR_CUMEM_PEERS_LIST;
  c.peers[0] = 0;
  c.peer_count = 1;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cumem_resource_create(&c, &r, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "peer 0 is not another device")) << f.message;
  c.peer_count = GMR_CUMEM_MAX_PEERS + 1;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cumem_resource_create(&c, &r, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cumem_resource_create(nullptr, nullptr, &f));
  gmr_cuda_sim_vmm_config v = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  v.peer_access_supported = false;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&v));
  c = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;
  c.peer_access = GMR_CUMEM_PEERS_LIST;
  c.peers[0] = 1;
  c.peer_count = 1;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_cumem_resource_create(&c, &r, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "cannot access")) << f.message;
  v.supported = false;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&v));
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_cumem_resource_create(nullptr, &r, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "no virtual memory management")) << f.message;
}

TEST_F(Cumem, BadFreesChangeNothing) {
  Make();
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 3 * kMiB, 0, nullptr, &p));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r_, &local, 4, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 5 * kMiB, 0, nullptr))
      << "5 MiB rounds to 6, the allocation has 4";
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r_));
  EXPECT_EQ(1u, VmmUsage().physical_count);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 4 * kMiB, 0, nullptr))
      << "the same rounded size is not the size asked for";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 3 * kMiB, 4096, nullptr))
      << "another alignment";
  EXPECT_EQ(1u, VmmUsage().physical_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 3 * kMiB, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 3 * kMiB, 0, nullptr));
}

// The size and alignment asked for name an allocation, not the granule they
// round to: a free of 999 bytes for 1,000 is refused, changing nothing, and
// the correct free after it succeeds instead of reading as a double free.
TEST_F(Cumem, AFreeMustNameTheSizeAndAlignmentAskedFor) {
  Make();
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 1000, 512, nullptr, &p));
  const gmr_cumem_resource_stats before = Stats();
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 999, 512, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 1001, 512, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 2 * kMiB, 512, nullptr))
      << "the granule it rounds to";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 1000, 0, nullptr))
      << "256 bytes, not the 512 asked for";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 1000, 1024, nullptr));
  const gmr_cumem_resource_stats after = Stats();
  EXPECT_EQ(before.live_count, after.live_count);
  EXPECT_EQ(before.live_bytes, after.live_bytes);
  EXPECT_EQ(before.release_count, after.release_count);
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(p, &m));
  EXPECT_TRUE(m.mapped);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 1000, 512, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 1000, 512, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 999, 0, nullptr))
      << "freed: whatever the size";
  EXPECT_EQ(0u, VmmUsage().physical_count);
}

// Threads that free one block at the same time: it is unmapped once, and
// every other free is named a double free (never an unknown pointer, never a
// second unmap).
TEST_F(Cumem, RacingFreesOfOneBlockFreeItOnceAndTheRestAreDoubleFrees) {
  Make();
  constexpr int kThreads = 4;
  for (int round = 0; round < 25; ++round) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kMiB, 0, nullptr, &p));
    std::atomic<int> ok{0}, double_free{0}, other{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        gmr_status st = gmr_resource_deallocate(r_, p, kMiB, 0, nullptr);
        (st == GMR_OK ? ok : st == GMR_ERR_DOUBLE_FREE ? double_free : other)++;
      });
    }
    for (auto &th : threads) th.join();
    EXPECT_EQ(1, ok.load()) << "round " << round;
    EXPECT_EQ(kThreads - 1, double_free.load()) << "round " << round;
    EXPECT_EQ(0, other.load()) << "round " << round;
  }
  EXPECT_EQ(25u, Stats().release_count);
  EXPECT_EQ(0u, Stats().live_count);
}

TEST_F(Cumem, EveryDriverFailureIsRolledBack) {
  Make();
  const struct {
    gmr_cuda_call call;
    int error;
    gmr_status status;
  } cases[] = {
      {GMR_CUDA_CALL_MEM_ADDRESS_RESERVE, CUDA_ERROR_OUT_OF_MEMORY, GMR_ERR_OUT_OF_MEMORY},
      {GMR_CUDA_CALL_MEM_CREATE, CUDA_ERROR_OUT_OF_MEMORY, GMR_ERR_OUT_OF_MEMORY},
      {GMR_CUDA_CALL_MEM_MAP, CUDA_ERROR_INVALID_VALUE, GMR_ERR_CUDA},
      {GMR_CUDA_CALL_MEM_SET_ACCESS, CUDA_ERROR_INVALID_VALUE, GMR_ERR_CUDA},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(gmr_cuda_call_name(c.call));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(c.call, 0, 1, c.error));
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(c.status, gmr_resource_allocate_ex(r_, kMiB, 0, nullptr, &p, &f));
    EXPECT_EQ(nullptr, p);
    EXPECT_EQ(c.error, f.cuda_error);
    EXPECT_NE(nullptr, std::strstr(f.message, gmr_cuda_call_name(c.call))) << f.message;
    gmr_cuda_sim_vmm_usage u = VmmUsage();
    EXPECT_EQ(0u, u.physical_count);
    EXPECT_EQ(0u, u.reservation_count);
    EXPECT_EQ(0u, Stats().live_count);
  }
  // A refused unmap or release keeps the allocation live and usable.
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kMiB, 0, nullptr, &p));
  for (gmr_cuda_call call : {GMR_CUDA_CALL_MEM_UNMAP, GMR_CUDA_CALL_MEM_RELEASE}) {
    SCOPED_TRACE(gmr_cuda_call_name(call));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(call, 0, 1, CUDA_ERROR_INVALID_VALUE));
    EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_deallocate(r_, p, kMiB, 0, nullptr));
    gmr_cuda_sim_vmm_mapping m;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(p, &m));
    EXPECT_TRUE(m.mapped);
    static_cast<char *>(p)[kMiB - 1] = 1;  // still writable
    EXPECT_EQ(1u, Stats().live_count);
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, kMiB - 1, 0, nullptr))
        << "live again, not remembered as freed";
  }
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, kMiB, 0, nullptr));
}

TEST_F(Cumem, TheDeviceRunningOutIsOutOfMemory) {
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_disable());
  gmr_cuda_sim_config small = GMR_CUDA_SIM_CONFIG_DEFAULT;
  small.device_memory_bytes = 8 * kMiB;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_enable(&small));
  Make();
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 6 * kMiB, 0, nullptr, &a));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r_, 4 * kMiB, 0, nullptr, &b, &f));
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, f.cuda_error);
  EXPECT_EQ(1u, VmmUsage().reservation_count) << "the failed request's addresses went back";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, a, 6 * kMiB, 0, nullptr));
}

TEST_F(Cumem, ACapturingStreamIsRefusedWithoutBreakingTheCapture) {
  Make();
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kMiB, 0, s, &p));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *q = nullptr;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate(r_, kMiB, 0, s, &q));
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_deallocate(r_, p, kMiB, 0, s));
  gmr_graph g = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g)) << "the capture is still valid";
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, kMiB, 0, s));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(Cumem, ThreadsAllocateAndFreeDisjointMemory) {
  Make();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        void *p = nullptr;
        size_t bytes = size_t(1 + (i + t) % 3) * kMiB;
        if (gmr_resource_allocate(r_, bytes, 0, nullptr, &p) != GMR_OK) {
          failures++;
          continue;
        }
        std::memset(p, t, bytes);
        if (static_cast<unsigned char *>(p)[bytes - 1] != t) failures++;
        if (gmr_resource_deallocate(r_, p, bytes, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0u, Stats().live_count);
}

TEST_F(Cumem, SpecsBuildItWithItsOptions) {
  gmr_stack *stack = nullptr;
  gmr_spec_error e;
  ASSERT_EQ(GMR_OK, gmr_stack_create("pool > cumem(device=1, nccl_ready=true, peer_access=all)",
                                        &stack, &e))
      << e.message;
  gmr_resource *top = gmr_stack_as_resource(stack);
  gmr_resource *leaf = gmr_resource_get_upstream(top);
  gmr_cumem_resource *c = gmr_cumem_resource_from_resource(leaf);
  ASSERT_NE(nullptr, c);
  gmr_cumem_resource_stats s = GMR_CUMEM_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_cumem_resource_get_stats(c, &s));
  EXPECT_EQ(1, s.device);
  EXPECT_EQ(2u, s.access_device_count);
  EXPECT_EQ(unsigned{CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}, s.handle_types);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 4096, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, p, 4096, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_stack_create("cumem(peer_access=zero)", &stack, &e));
  EXPECT_NE(nullptr, std::strstr(e.message, "peer_access")) << e.message;
}

}  // namespace
