// The GPU+HOST downgrade workload (tests/tiers/downgrade_workload.h) on the
// simulation, at a small scale: buffers written, moved down when the GPU
// space passes its trigger, moved back up when there is room, every byte
// checked, the GPU space never promising more than its reservation limit.
// The same code runs on a real GPU in tiers_gpu_test.
#include <gtest/gtest.h>

#include <string>

#include "gmr/sim/cuda_sim.h"
#include "tests/tiers/downgrade_workload.h"

namespace {

TEST(TierWorkload, DowngradesAndUpgradesOnTheSimulation) {
  gmr_cuda_sim_config sc = GMR_CUDA_SIM_CONFIG_DEFAULT;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_enable(&sc));
  gmr_test::WorkloadConfig c;
  c.buffer_bytes = 64 * 1024;
  c.buffers = 48;
  c.gpu_bytes = 1024 * 1024;
  c.host_bytes = 4 * 1024 * 1024;
  c.host_block_bytes = 16 * 1024;  // four HOST blocks per buffer
  c.host_blocks_per_chunk = 16;
  gmr_test::WorkloadResult r;
  std::string error;
  {
    gmr_test::DowngradeWorkload w(c);
    ASSERT_TRUE(w.Run(&r, &error)) << error;
  }
  gmr_test::PrintWorkload("tiers_sim", c, r);
  EXPECT_EQ(0u, r.bad_bytes);
  EXPECT_FALSE(r.over_promised);
  EXPECT_GT(r.moves_down, 0u);
  EXPECT_GT(r.moves_up, 0u);
  EXPECT_GT(r.gpu.downgrade_start_count, 0u);
  EXPECT_LE(r.gpu.peak_allocated_bytes, r.gpu.capacity_bytes);
  EXPECT_EQ(static_cast<uint64_t>(c.buffers) + r.moves_down + r.moves_up, r.manager.reserve_count);
  EXPECT_EQ(0u, r.manager.reservation_count);
  EXPECT_EQ(0u, r.manager.timeout_count);
  EXPECT_LE(r.manager.immediate_reserve_count, r.manager.reserve_count);
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_disable());
}

// With HOST chunks pinned at create, the same workload; the manager counts
// them among the NUMA resource's allocations.
TEST(TierWorkload, HostChunksPinnedAtCreate) {
  gmr_cuda_sim_config sc = GMR_CUDA_SIM_CONFIG_DEFAULT;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_enable(&sc));
  gmr_test::WorkloadConfig c;
  c.buffer_bytes = 64 * 1024;
  c.buffers = 24;
  c.gpu_bytes = 1024 * 1024;
  c.host_bytes = 4 * 1024 * 1024;
  c.host_block_bytes = 16 * 1024;
  c.host_blocks_per_chunk = 16;
  c.host_initial_chunks = 3;
  gmr_test::WorkloadResult r;
  std::string error;
  {
    gmr_test::DowngradeWorkload w(c);
    ASSERT_TRUE(w.Run(&r, &error)) << error;
  }
  gmr_test::PrintWorkload("tiers_sim_prepinned", c, r);
  EXPECT_EQ(0u, r.bad_bytes);
  EXPECT_FALSE(r.over_promised);
  EXPECT_GT(r.moves_down, 0u);
  EXPECT_GE(r.numa.placed_count + r.numa.unplaced_count, 3u);
  EXPECT_EQ(0u, r.manager.reservation_count);
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_disable());
}

}  // namespace
