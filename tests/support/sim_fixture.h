/*
 * tests/support/sim_fixture.h: a GoogleTest fixture that runs each test on
 * the host simulation of the CUDA layer and fails the test if it leaked a
 * simulated allocation, stream, event, pool or graph, named a dead handle, or
 * unmapped memory that pending work still used.
 */
#ifndef GMR_TESTS_SUPPORT_SIM_FIXTURE_H_
#define GMR_TESTS_SUPPORT_SIM_FIXTURE_H_

#include <gtest/gtest.h>

#include "gmr/sim/cuda_sim.h"

namespace gmr_test {

class SimTest : public ::testing::Test {
 protected:
  // Tests that need another machine (two devices, no pools) change this in
  // their constructor.
  gmr_cuda_sim_config sim_config_ = GMR_CUDA_SIM_CONFIG_DEFAULT;

  void SetUp() override { ASSERT_EQ(GMR_OK, gmr_cuda_sim_enable(&sim_config_)); }

  // Tests that hand stale handles to CUDA on purpose set this.
  bool expect_stale_handles_ = false;
  // Tests that unmap memory under pending work on purpose set this.
  bool expect_unmap_under_work_ = false;

  void TearDown() override {
    if (!expect_stale_handles_) {
      EXPECT_EQ(0u, gmr_cuda_sim_get_stale_handle_count())
          << "a CUDA call named a destroyed or unknown stream/event/pool/graph (real CUDA may "
             "crash on it)";
    }
    gmr_cuda_sim_vmm_usage vmm;
    if (!expect_unmap_under_work_ && gmr_cuda_sim_get_vmm_usage(&vmm) == GMR_OK) {
      EXPECT_EQ(0u, vmm.unmap_under_work_count)
          << "cuMemUnmap of memory that work still pending on a stream used (a GPU faults)";
    }
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_disable())
        << "the test left simulated CUDA objects alive (a leak)";
  }
};

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_SIM_FIXTURE_H_
