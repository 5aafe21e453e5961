// A fixed_block_resource over a simulated cudaMalloc leaf, for the
// fixed_block tests: resources and streams made through it are destroyed at
// the end of the test (streams held by gmr_cuda_sim_stream_hold released
// first).
#ifndef GMR_TESTS_SUPPORT_FIXED_BLOCK_FIXTURE_H_
#define GMR_TESTS_SUPPORT_FIXED_BLOCK_FIXTURE_H_

#include <gtest/gtest.h>

#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/sim_fixture.h"

namespace gmr_test {

class FixedBlockTest : public SimTest {
 protected:
  static constexpr size_t kKiB = size_t{1} << 10;

  void SetUp() override {
    SimTest::SetUp();
    gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &cuda_));
    upstream_ = gmr_cuda_resource_as_resource(cuda_);
  }

  void TearDown() override {
    for (gmr_fixed_block_resource *f : owned_) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_fixed_block_resource_as_resource(f)));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(upstream_));
    for (gmr_stream s : streams_) {
      EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, false));
      EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    }
    SimTest::TearDown();
  }

  static gmr_fixed_block_resource_config BlockConfig(size_t block, size_t per_chunk) {
    gmr_fixed_block_resource_config c = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
    c.block_bytes = block;
    c.blocks_per_chunk = per_chunk;
    return c;
  }

  gmr_fixed_block_resource *Make(const gmr_fixed_block_resource_config &c) {
    gmr_fixed_block_resource *f = nullptr;
    EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_create(upstream_, &c, &f));
    if (f != nullptr) owned_.push_back(f);
    return f;
  }

  gmr_stream Stream() {
    gmr_stream s = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
    streams_.push_back(s);
    return s;
  }

  // A new stream that got `dead`'s handle (gmr_cuda_sim_reuse_stream_handles),
  // or nullptr.
  gmr_stream StreamWithHandle(gmr_stream dead) {
    gmr_stream s = Stream();
    return s == dead ? s : nullptr;
  }

  static gmr_fixed_block_resource_stats Stats(gmr_fixed_block_resource *f) {
    gmr_fixed_block_resource_stats s = GMR_FIXED_BLOCK_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_get_stats(f, &s));
    return s;
  }

  static void *Alloc(gmr_resource *r, size_t bytes, gmr_stream s = nullptr) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, s, &p)) << bytes;
    return p;
  }

  gmr_cuda_resource *cuda_ = nullptr;
  gmr_resource *upstream_ = nullptr;
  std::vector<gmr_fixed_block_resource *> owned_;
  std::vector<gmr_stream> streams_;
};

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_FIXED_BLOCK_FIXTURE_H_
