// Memory tiers and scoped pools on a real GPU (tag gpu; SKIPPED without one).
//
// DowngradeWorkload: tests/tiers/downgrade_workload.h with 48 buffers of
// 64 MiB through a 1 GiB GPU space (trigger 75 %, stop 50 %) and pinned,
// NUMA-placed 1 MiB HOST blocks; every buffer is read back and checked byte
// for byte. Prints the numbers BENCHMARKS.md takes: reservation latency
// (apart and with waits), waits, bytes moved, copy bandwidth, and where the
// time went. Twice: HOST chunks pinned on demand, then pinned at create.
//
// ScopedPoolsOnGpu: threads with their own scoped pools over
// `pool > cuda(kind=async)` write their blocks with the device and check
// them, iteration after iteration, at the same addresses.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "gmr/device.h"
#include "gmr/tiers/numa_host_resource.h"
#include "gmr/scoped/scoped_pool.h"
#include "gmr/tiers/stream_pool.h"
#include "gmr/tiers/tier_manager.h"
#include "tests/support/gpu_fixture.h"
#include "tests/tiers/downgrade_workload.h"

namespace {

using gmr_test::GpuTest;

constexpr size_t MiB = size_t{1} << 20;

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

class TiersGpu : public GpuTest {};

TEST_F(TiersGpu, DowngradeWorkload) {
  gmr_test::WorkloadConfig c;  // 48 x 64 MiB through 1 GiB of GPU, 1 MiB pinned host blocks
  gmr_test::WorkloadResult r;
  std::string error;
  gmr_test::DowngradeWorkload w(c);
  ASSERT_TRUE(w.Run(&r, &error)) << error;
  gmr_test::PrintWorkload("tiers_gpu", c, r);
  EXPECT_EQ(0u, r.bad_bytes);
  EXPECT_FALSE(r.over_promised);
  EXPECT_GT(r.moves_down, 0u);
  EXPECT_GT(r.moves_up, 0u);
  EXPECT_GT(r.gpu.downgrade_start_count, 0u);
  EXPECT_LE(r.gpu.peak_allocated_bytes, r.gpu.capacity_bytes);
  EXPECT_EQ(0u, r.manager.reservation_count);
}

// The same with the HOST space's pinned chunks taken at create (cuCascade
// pins its host pool up front): the moves down no longer pin fresh chunks,
// so the producer's waits are the copies' back-pressure alone. Compare its
// "waited for room" and "host blocks" figures with the run above.
TEST_F(TiersGpu, DowngradeWorkloadWithHostPinnedUpFront) {
  gmr_test::WorkloadConfig c;
  c.host_initial_chunks = 40;  // 40 x 64 MiB: above the 2112 MiB the first run held at its peak
  gmr_test::WorkloadResult r;
  std::string error;
  gmr_test::DowngradeWorkload w(c);
  ASSERT_TRUE(w.Run(&r, &error)) << error;
  gmr_test::PrintWorkload("tiers_gpu_prepinned", c, r);
  EXPECT_EQ(0u, r.bad_bytes);
  EXPECT_FALSE(r.over_promised);
  EXPECT_GT(r.moves_down, 0u);
  EXPECT_GE(r.numa.placed_count + r.numa.unplaced_count, 40u);
  EXPECT_EQ(0u, r.manager.reservation_count);
}

TEST_F(TiersGpu, ScopedPoolsOnGpu) {
  gmr_scope_registry *reg = nullptr;
  gmr_spec_error e;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_create_from_spec("pool > cuda(kind=async)", nullptr, &reg, &e))
      << e.message;
  constexpr int kThreads = 4, kIterations = 50;
  std::atomic<int> errors{0}, moved{0};
  std::atomic<uint64_t> scope_ns{0}, allocations{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      if (cudaSetDevice(0) != cudaSuccess) errors++;
      cudaStream_t s = nullptr;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) errors++;
      gmr_scoped_pool *p = nullptr;
      if (gmr_scope_registry_get_pool(reg, &p) != GMR_OK) {
        errors++;
        return;
      }
      std::vector<void *> first;
      unsigned char probe = 0;
      for (int k = 0; k < kIterations; ++k) {
        auto t0 = Clock::now();
        gmr_scope scope{};
        if (gmr_scope_enter(reg, &scope) != GMR_OK) errors++;
        std::vector<void *> got;
        for (size_t bytes = 4096; bytes <= 4 * MiB; bytes *= 4) {
          void *ptr = nullptr;
          if (gmr_resource_allocate(gmr_scoped_pool_as_resource(p), bytes, 0, s, &ptr) != GMR_OK)
            errors++;
          allocations++;
          unsigned char v = static_cast<unsigned char>(t * 31 + k + bytes);
          if (cudaMemsetAsync(ptr, v, bytes, s) != cudaSuccess) errors++;
          if (cudaMemcpyAsync(&probe, static_cast<unsigned char *>(ptr) + bytes - 1, 1,
                              cudaMemcpyDeviceToHost, s) != cudaSuccess) {
            errors++;
          }
          if (cudaStreamSynchronize(s) != cudaSuccess || probe != v) errors++;
          got.push_back(ptr);
        }
        // Synchronised above: the blocks may go back (the design's safety rule).
        if (gmr_scope_exit(reg, scope, nullptr) != GMR_OK) errors++;
        scope_ns += static_cast<uint64_t>(MsSince(t0) * 1e6);
        if (k == 0) {
          first = got;
        } else if (got != first) {
          moved++;
        }
      }
      size_t released = 0;
      if (gmr_scoped_pool_empty(p, &released) != GMR_OK || released == 0) errors++;
      cudaStreamDestroy(s);
    });
  }
  for (auto &th : ts) th.join();
  EXPECT_EQ(0, errors.load());
  EXPECT_EQ(0, moved.load());
  gmr_scope_registry_stats rs = GMR_SCOPE_REGISTRY_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_get_stats(reg, &rs));
  EXPECT_EQ(static_cast<uint64_t>(kThreads), rs.pools_created);
  EXPECT_EQ(static_cast<uint64_t>(kThreads), rs.pools_retired);
  std::printf("tiers_gpu scoped: %d threads x %d iterations, %" PRIu64
              " device-written blocks, same addresses every iteration, %.1f us per iteration "
              "(allocate, memset, read back, exit)\n",
              kThreads, kIterations, allocations.load(),
              scope_ns / 1e3 / (kThreads * kIterations));
  // Two devices: a pool refuses the other device.
  if (device_count_ >= 2) {
    gmr_scoped_pool *p0 = nullptr;
    ASSERT_EQ(GMR_OK, gmr_scope_registry_get_pool_for_device(reg, 0, &p0));
    ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
    void *ptr = nullptr;
    EXPECT_EQ(GMR_ERR_WRONG_DEVICE,
              gmr_resource_allocate(gmr_scoped_pool_as_resource(p0), 256, 0, nullptr, &ptr));
    ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  }
  EXPECT_EQ(GMR_OK, gmr_scope_registry_destroy(reg));
}

}  // namespace
