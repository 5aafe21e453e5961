// tests/vmm/vmm_growth_test.cc: how a `vmm` growth makes its physical
// allocations (gmr/vmm_resource.h, "Growth"): the handle floor
// (handle_floor_bytes, spec `handle_floor`) and the creator threads
// (creator_thread_count, spec `creators`): their sizes, their failures, the
// books and the footprint, destroy and trim, threads and captures; on the
// host simulation of CUDA.
#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "gmr/vmm_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace {

using gmr_test::ExpectInvariants;
using gmr_test::kMiB;
using gmr_test::kPage;
using gmr_test::Stats;

class VmmGrowthTest : public gmr_test::SimTest {
 protected:
  std::vector<gmr_vmm_pool_resource *> pools_;

  // One shard, exact growth (no tail), handles of at most 1/128 of what is
  // held: a growth on an empty pool is a handle per page unless a floor says.
  gmr_vmm_pool_resource_config Config(size_t floor_bytes, uint32_t creators) {
    gmr_vmm_pool_resource_config c = gmr_test::TestConfig(512);
    c.shard_count = 1;
    c.growth_percent = 0;
    c.handle_floor_bytes = floor_bytes;
    c.creator_thread_count = creators;
    return c;
  }
  gmr_vmm_pool_resource *Make(const gmr_vmm_pool_resource_config &c) {
    gmr_vmm_pool_resource *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_vmm_resource_create(&c, &p, &f)) << f.message;
    if (p != nullptr) pools_.push_back(p);
    return p;
  }
  static gmr_resource *R(gmr_vmm_pool_resource *p) { return gmr_vmm_pool_resource_as_resource(p); }
  static size_t Held(gmr_vmm_pool_resource *p) {
    gmr_footprint fp;
    EXPECT_EQ(GMR_OK, gmr_resource_get_footprint(R(p), &fp));
    return fp.held_bytes;
  }
  static size_t DeviceUsed() {
    gmr_cuda_sim_usage u;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
    return u.used_bytes;
  }
  void TearDown() override {
    for (gmr_vmm_pool_resource *p : pools_) {
      ExpectInvariants(p);
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(R(p)));
    }
    pools_.clear();
    SimTest::TearDown();
  }
};

// ---- the floor --------------------------------------------------------------------

TEST_F(VmmGrowthTest, AFloorMakesAnEarlyGrowthTakeFewerLargerHandles) {
  gmr_vmm_pool_resource *plain = Make(Config(0, 0));
  gmr_vmm_pool_resource *floored = Make(Config(16 * kMiB, 0));
  gmr_vmm_pool_resource *odd = Make(Config(3 * kMiB, 0));  // rounded up to the page: 4 MiB
  for (gmr_vmm_pool_resource *p : {plain, floored, odd}) {
    void *a = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 64 * kMiB, 0, nullptr, &a));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 64 * kMiB, 0, nullptr));
    EXPECT_EQ(64 * kMiB, Held(p)) << "the same bytes, whatever the handles";
  }
  EXPECT_EQ(32u, Stats(plain).page_create_count) << "1/128 of nothing held: a page each";
  EXPECT_EQ(4u, Stats(floored).page_create_count);
  EXPECT_EQ(16u, Stats(odd).page_create_count);
  EXPECT_EQ(Stats(floored).map_count, Stats(floored).page_create_count);
}

TEST_F(VmmGrowthTest, TheFloorNeverMakesAGrowthHoldMoreThanItNeeds) {
  gmr_vmm_pool_resource *p = Make(Config(32 * kMiB, 0));
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 5 * kMiB, 0, nullptr, &a));
  EXPECT_EQ(6 * kMiB, Held(p)) << "a floor caps no handle below the request: 3 pages";
  EXPECT_EQ(1u, Stats(p).page_create_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 5 * kMiB, 0, nullptr));
}

TEST_F(VmmGrowthTest, OutOfRangeOptionsAreRefusedNamingTheField) {
  gmr_vmm_pool_resource_config c = Config(0, GMR_VMM_POOL_MAX_CREATOR_THREADS + 1);
  gmr_vmm_pool_resource *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_resource_create(&c, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_NE(std::string::npos, std::string(f.message).find("creator_thread_count")) << f.message;
  c = Config(GMR_MAX_ALLOCATION_BYTES + 1, 0);
  f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_resource_create(&c, &p, &f));
  EXPECT_NE(std::string::npos, std::string(f.message).find("handle_floor_bytes")) << f.message;
  // In specs: the component's ranges; the defaults as listed.
  gmr_stack *s = nullptr;
  gmr_spec_error e;
  EXPECT_NE(GMR_OK, gmr_stack_create("vmm(creators=9)", &s, &e));
  EXPECT_NE(std::string::npos, std::string(e.message).find("creators")) << e.message;
  ASSERT_EQ(GMR_OK, gmr_stack_create("vmm(handle_floor=20MiB, creators=2, shards=1)", &s, &e))
      << e.message;
  gmr_vmm_pool_resource *pool = gmr_vmm_pool_resource_from_resource(
      gmr_resource_find(gmr_stack_as_resource(s), "vmm_pool_resource"));
  ASSERT_NE(nullptr, pool);
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(s), 40 * kMiB, 0, nullptr, &a));
  EXPECT_EQ(2u, Stats(pool).page_create_count) << "two 20 MiB handles";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(s), a, 40 * kMiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

// ---- creator threads ----------------------------------------------------------------

// Two pools, one with threads, take the same requests: the handles, their
// places, the bytes held and the driver calls are the same.
TEST_F(VmmGrowthTest, ThreadsMakeExactlyTheHandlesTheAllocatingThreadWould) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_delay(GMR_CUDA_CALL_MEM_CREATE, 200000));
  gmr_vmm_pool_resource *alone = Make(Config(0, 0));
  gmr_vmm_pool_resource *helped = Make(Config(0, 3));
  const size_t sizes[] = {40 * kMiB, 3 * kMiB, 90 * kMiB, 1000, 17 * kMiB};
  for (gmr_vmm_pool_resource *p : {alone, helped}) {
    std::vector<void *> ptrs;
    for (size_t bytes : sizes) {
      void *a = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), bytes, 0, nullptr, &a));
      ptrs.push_back(a);
    }
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(p), ptrs[2], sizes[2], 0, nullptr));
    void *b = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 120 * kMiB, 0, nullptr, &b));
    ptrs[2] = b;
    for (size_t i = 0; i < ptrs.size(); ++i) {
      size_t bytes = i == 2 ? 120 * kMiB : sizes[i];
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(p), ptrs[i], bytes, 0, nullptr));
    }
  }
  gmr_vmm_pool_resource_stats a = Stats(alone), h = Stats(helped);
  EXPECT_GT(a.page_create_count, 10u);
  EXPECT_EQ(a.page_create_count, h.page_create_count);
  EXPECT_EQ(a.map_count, h.map_count);
  EXPECT_EQ(a.unmap_count, h.unmap_count);
  EXPECT_EQ(a.mapped_bytes, h.mapped_bytes);
  EXPECT_EQ(a.peak_mapped_bytes, h.peak_mapped_bytes);
  std::vector<gmr_vmm_pool_region> ra = gmr_test::Regions(alone), rh = gmr_test::Regions(helped);
  ASSERT_EQ(ra.size(), rh.size());
  const char *base_a = static_cast<const char *>(ra[0].addr);
  const char *base_h = static_cast<const char *>(rh[0].addr);
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(static_cast<const char *>(ra[i].addr) - base_a,
              static_cast<const char *>(rh[i].addr) - base_h);
    EXPECT_EQ(ra[i].bytes, rh[i].bytes);
    EXPECT_EQ(ra[i].kind, rh[i].kind);
  }
}

// A driver that refuses fabric handles (no IMEX channel) in a threaded
// growth: the refused creation is asked again without them, on whichever
// thread it was, and costs one call.
TEST_F(VmmGrowthTest, AFabricRefusalOnAnyThreadCostsOneCall) {
  gmr_cuda_sim_vmm_config v = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  v.fabric_handles_supported = true;
  v.gpu_direct_rdma_supported = true;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&v));
  gmr_vmm_pool_resource_config c = Config(0, 3);
  c.nccl_ready = true;  // asks for fabric handles where the device says it has them
  gmr_vmm_pool_resource *p = Make(c);
  ASSERT_NE(nullptr, p);
  for (uint64_t skip : {0u, 1u, 2u}) {
    SCOPED_TRACE("refused creation " + std::to_string(skip));
    const uint64_t calls = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE);
    const uint64_t handles = Stats(p).page_create_count;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_CREATE, skip, 1,
                                                  CUDA_ERROR_NOT_PERMITTED));
    void *a = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 12 * kPage, 0, nullptr, &a));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    const uint64_t made = Stats(p).page_create_count - handles;
    EXPECT_GE(made, 2u) << "a growth of several handles, made with the threads";
    EXPECT_EQ(made + 1, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE) - calls);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 12 * kPage, 0, nullptr));
    ASSERT_EQ(GMR_OK, gmr_resource_trim(R(p), nullptr));
  }
}

// Shards growing at once on four threads, with and without creator threads,
// while the driver refuses fabric handles to one creation: that creation is
// asked again without them and every later one of the pool asks without them
// at once (one refused call in all). The refusal is kept in a flag of its
// own: the properties every creating thread reads are never written after
// create (TSan runs this; the old write raced with those reads, though the
// simulation's own locks mostly ordered it, so TSan did not see it here).
TEST_F(VmmGrowthTest, AFabricRefusalDuringConcurrentGrowthsIsSeenByEveryShard) {
  gmr_cuda_sim_vmm_config v = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  v.fabric_handles_supported = true;
  v.gpu_direct_rdma_supported = true;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&v));
  for (uint32_t creators : {0u, 2u}) {
    SCOPED_TRACE("creators " + std::to_string(creators));
    gmr_vmm_pool_resource_config c = Config(0, creators);
    c.shard_count = 4;
    c.nccl_ready = true;
    gmr_vmm_pool_resource *p = Make(c);
    ASSERT_NE(nullptr, p);
    const uint64_t calls = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE);
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_CREATE, 0, 1,
                                                  CUDA_ERROR_NOT_PERMITTED));
    // Slow creations (the delay is outside the simulation's lock): other
    // threads' cuMemCreate calls fall between the refusal and its retry.
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_delay(GMR_CUDA_CALL_MEM_CREATE, 1000000));
    std::vector<std::vector<void *>> ptrs(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 6; ++i) {
          void *a = nullptr;
          EXPECT_EQ(GMR_OK, gmr_resource_allocate(R(p), (3 + i) * kPage, 0,
                                                  (gmr_stream)cudaStreamPerThread, &a));
          ptrs[t].push_back(a);
        }
      });
    }
    for (auto &th : threads) th.join();
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    EXPECT_EQ(Stats(p).page_create_count + 1,
              gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE) - calls)
        << "one refused call, every other creation asked without fabric";
    void *after = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 64 * kPage, 0, nullptr, &after));
    gmr_cuda_sim_vmm_mapping m;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(after, &m));
    EXPECT_EQ(0u, m.handle_types & CU_MEM_HANDLE_TYPE_FABRIC);
    EXPECT_NE(0u, m.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(p), after, 64 * kPage, 0, nullptr));
    for (int t = 0; t < 4; ++t) {
      for (int i = 0; i < 6; ++i) {
        ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(p), ptrs[t][i], (3 + i) * kPage, 0,
                                                  (gmr_stream)cudaStreamPerThread));
      }
    }
    ExpectInvariants(p);
  }
}

// With cuMemCreate slow, a growth of many handles made with threads takes
// less time than one made alone; on this simulation the calls run at once (a
// real driver may serialise them: then it takes as long).
TEST_F(VmmGrowthTest, ThreadsOverlapSlowCreationsOnTheSimulation) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_delay(GMR_CUDA_CALL_MEM_CREATE, 20000000));  // 20 ms
  auto timed = [&](uint32_t creators) {
    gmr_vmm_pool_resource *p = Make(Config(0, creators));
    void *a = nullptr;
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(R(p), 16 * kMiB, 0, nullptr, &a));  // 8 handles
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
    EXPECT_EQ(8u, Stats(p).page_create_count);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 16 * kMiB, 0, nullptr));
    return ms;
  };
  const long alone = timed(0);
  const long helped = timed(3);
  EXPECT_GE(alone, 160);  // 8 x 20 ms, one after another
  EXPECT_LT(helped, 120) << "alone " << alone << " ms";  // 8 over 4 threads: ~40 ms
}

// A cuMemCreate refused on a thread is asked again on the allocating
// thread, as a growth without threads would have made it; a refusal of the
// growth's own first creation fails the growth, whose undo gives back what
// the threads made, and the pool's out-of-memory step grows once more.
// Either way the allocation succeeds, nothing made is lost and the books
// agree.
TEST_F(VmmGrowthTest, ACreationRefusedOnAnyThreadCostsOneCallAndNothingElse) {
  gmr_vmm_pool_resource *p = Make(Config(0, 2));
  const uint64_t before = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE);
  // The third creation of the growth fails once, whichever thread makes it.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_CREATE, 2, 1,
                                                CUDA_ERROR_OUT_OF_MEMORY));
  void *a = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(R(p), 12 * kMiB, 0, nullptr, &a, &f)) << f.message;
  gmr_vmm_pool_resource_stats s = Stats(p);
  EXPECT_EQ(6u, s.page_create_count - s.page_release_count) << "six handles held";
  EXPECT_EQ(s.page_create_count + 1, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE) - before)
      << "every creation booked, and the one refused";
  EXPECT_EQ(12 * kMiB, Held(p));
  EXPECT_EQ(12 * kMiB, DeviceUsed());
  ExpectInvariants(p);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 12 * kMiB, 0, nullptr));
}

// When creation keeps failing, the growth fails with the driver's status,
// gives back everything it made (on any thread), and the pool holds what it
// held before; the same request succeeds once the device has room again.
TEST_F(VmmGrowthTest, AGrowthWhoseCreationsFailHoldsNothingNewAndFailsClearly) {
  gmr_vmm_pool_resource *p = Make(Config(0, 3));
  void *kept = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 4 * kMiB, 0, nullptr, &kept));
  const size_t held = Held(p), used = DeviceUsed();
  gmr_vmm_pool_resource_stats s0 = Stats(p);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_CREATE, 3, UINT64_MAX,
                                                CUDA_ERROR_OUT_OF_MEMORY));
  void *a = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(R(p), 40 * kMiB, 0, nullptr, &a, &f));
  EXPECT_EQ(nullptr, a);
  EXPECT_NE(std::string::npos, std::string(f.message).find("cuMemCreate")) << f.message;
  EXPECT_EQ(held, Held(p));
  EXPECT_EQ(used, DeviceUsed()) << "every handle made for the growth went back";
  gmr_vmm_pool_resource_stats s1 = Stats(p);
  EXPECT_EQ(s1.page_create_count - s0.page_create_count,
            s1.page_release_count - s0.page_release_count);
  ExpectInvariants(p);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 40 * kMiB, 0, nullptr, &a));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 40 * kMiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(R(p), kept, 4 * kMiB, 0, nullptr));
}

// A device too small for the request: out of memory, with the pool's free
// memory given back or used first and the books agreeing.
class VmmGrowthSmallDeviceTest : public VmmGrowthTest {
 public:
  VmmGrowthSmallDeviceTest() { sim_config_.device_memory_bytes = 64 * kMiB; }
};

TEST_F(VmmGrowthSmallDeviceTest, OutOfMemoryWithThreadsLeavesTheBooksWhole) {
  gmr_vmm_pool_resource *p = Make(Config(0, 2));
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 40 * kMiB, 0, nullptr, &a));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(R(p), 40 * kMiB, 0, nullptr, &b, &f));
  EXPECT_EQ(nullptr, b);
  EXPECT_EQ(40 * kMiB, Held(p));
  EXPECT_EQ(40 * kMiB, DeviceUsed());
  ExpectInvariants(p);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 40 * kMiB, 0, nullptr));
  // Its free memory serves a request as large as the device has room for.
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 60 * kMiB, 0, nullptr, &b));
  EXPECT_LE(DeviceUsed(), 64 * kMiB);
  ExpectInvariants(p);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(R(p), b, 60 * kMiB, 0, nullptr));
}

TEST_F(VmmGrowthTest, TrimAndDestroyAfterThreadedGrowthGiveEverythingBack) {
  gmr_vmm_pool_resource_config c = Config(0, 4);
  gmr_vmm_pool_resource *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_vmm_resource_create(&c, &p, nullptr));
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 30 * kMiB, 0, nullptr, &a));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(R(p))) << "live: destroy changes nothing";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 30 * kMiB, 0, nullptr));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(R(p), &released));
  EXPECT_EQ(30 * kMiB, released);
  EXPECT_EQ(0u, Held(p));
  EXPECT_EQ(0u, DeviceUsed());
  gmr_vmm_pool_resource_stats s = Stats(p);
  EXPECT_EQ(s.page_create_count, s.page_release_count);
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 30 * kMiB, 0, nullptr, &a));  // threads again
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 30 * kMiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(R(p))) << "the threads are joined";
  EXPECT_EQ(0u, DeviceUsed());
}

// A pool whose threads never started (no growth of several handles) is
// destroyed as one without threads.
TEST_F(VmmGrowthTest, APoolThatNeverGrewWithThreadsDestroysCleanly) {
  gmr_vmm_pool_resource_config c = Config(0, GMR_VMM_POOL_MAX_CREATOR_THREADS);
  gmr_vmm_pool_resource *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_vmm_resource_create(&c, &p, nullptr));
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(R(p), 1000, 0, nullptr, &a));  // one handle
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(R(p)));
}

// Several threads on streams (and shards) of their own grow at once through
// the same creator threads (run under --config=tsan).
TEST_F(VmmGrowthTest, ShardsGrowAtOnceThroughTheSameThreads) {
  gmr_vmm_pool_resource_config c = Config(0, 2);
  c.shard_count = 4;
  gmr_vmm_pool_resource *p = Make(c);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      gmr_stream s = nullptr;
      if (gmr_cuda_stream_create(&s) != GMR_OK) {
        failures++;
        return;
      }
      for (int i = 0; i < 20; ++i) {
        size_t bytes = (size_t(4 + (t * 7 + i * 3) % 13)) * kMiB;
        void *a = nullptr;
        if (gmr_resource_allocate(R(p), bytes, 0, s, &a) != GMR_OK) {
          failures++;
          continue;
        }
        if (gmr_resource_deallocate(R(p), a, bytes, 0, s) != GMR_OK) failures++;
      }
      if (gmr_cuda_stream_synchronize(s) != GMR_OK || gmr_cuda_stream_destroy(s) != GMR_OK) {
        failures++;
      }
    });
  }
  for (std::thread &t : threads) t.join();
  EXPECT_EQ(0, failures.load());
  ExpectInvariants(p);
  gmr_vmm_pool_resource_stats s = Stats(p);
  EXPECT_EQ(s.mapped_bytes, Held(p));
}

// Another thread captures a CUDA graph in global mode while a growth runs on
// the creator threads: their cuMemCreate calls (relaxed, as the allocating
// thread's) leave the capture valid.
TEST_F(VmmGrowthTest, ThreadedGrowthLeavesAnotherThreadsCaptureValid) {
  // Slow creations: the threads surely take some of the growth's.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_delay(GMR_CUDA_CALL_MEM_CREATE, 5000000));
  for (uint32_t creators : {0u, 3u}) {  // 0: the control (the allocating thread alone)
  SCOPED_TRACE(creators);
  gmr_vmm_pool_resource *p = Make(Config(0, creators));
  gmr_stream captured = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&captured));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(captured));
  std::thread grower([&] {
    void *a = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(R(p), 24 * kMiB, 0, nullptr, &a));  // 12 handles
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(R(p), a, 24 * kMiB, 0, nullptr));
  });
  grower.join();
  gmr_graph g = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(captured, &g)) << "the capture was broken";
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(captured));
  EXPECT_EQ(12u, Stats(p).page_create_count);
  }
}

}  // namespace
