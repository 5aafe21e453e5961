// fixed_block_resource's contracts on the host simulation: destroy either
// succeeds or changes nothing (upstream frees and event destroys failing at
// every position), bad frees get the status that names them, create explains
// the one option that is wrong, and a slow growth in one thread holds up no
// other thread.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/fixed_block_resource.h"
#include "tests/support/fixed_block_fixture.h"

namespace {

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

class FixedBlockContract : public gmr_test::FixedBlockTest {
 protected:
  static gmr_fixed_block_resource_config Config(size_t block = 64 * KiB, size_t per_chunk = 4) {
    return BlockConfig(block, per_chunk);
  }
};

// ---- destroy ----------------------------------------------------------------

TEST_F(FixedBlockContract, AFailedUpstreamFreeAtAnyPositionLeavesAValidResourceToRetry) {
  for (uint64_t k = 0; k < 3; ++k) {
    gmr_fixed_block_resource_config c = Config(64 * KiB, 1);
    c.initial_chunk_count = 3;
    gmr_fixed_block_resource *f = nullptr;
    ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_create(upstream_, &c, &f));
    gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_FREE, k, 1, cudaErrorLaunchFailure));
    EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r)) << "failure at free " << k;
    gmr_fixed_block_resource_stats s = Stats(f);
    EXPECT_EQ(3u - k, s.chunk_count) << k;
    EXPECT_EQ((3u - k) * 64 * KiB, s.held_bytes) << k;
    EXPECT_EQ(3u - k, gmr_cuda_resource_get_live_count(cuda_)) << k;
    void *p = Alloc(r, 100);  // still a working resource
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r)) << k;
    EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_)) << k;
  }
}

TEST_F(FixedBlockContract, AFailedEventDestroyIsReportedAndCountedAndTheRetryWorks) {
  gmr_fixed_block_resource *f = nullptr;
  gmr_fixed_block_resource_config c = Config(64 * KiB, 1);
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_create(upstream_, &c, &f));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s = Stream();
  void *p = Alloc(r, 100, s);  // the chunk grown on s records s's event
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
  ASSERT_GE(gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_CREATE), 1u);
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_EVENT_DESTROY, 0, 1, cudaErrorLaunchFailure));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r));
  EXPECT_EQ(1u, Stats(f).event_destroy_failure_count);
  EXPECT_EQ(1u, Stats(f).chunk_count);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

// ---- bad frees ----------------------------------------------------------------

TEST_F(FixedBlockContract, BadFreesAreNamedByTheirStatus) {
  gmr_fixed_block_resource *f = Make(Config());
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  void *p = Alloc(r, 300);
  int local = 0;
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 301, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 300, 512, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, static_cast<char *>(p) + 256, 300,
                                                             0, nullptr));  // inside a block
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, static_cast<char *>(p) + 64 * KiB,
                                                             300, 0, nullptr));  // never given
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, &local, 300, 0, nullptr));
  EXPECT_EQ(1u, Stats(f).in_use_block_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 300, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 300, 0, nullptr));
  EXPECT_EQ(0u, Stats(f).in_use_block_count);
  // Forwarded (oversize) allocations and block lists.
  void *big = Alloc(r, 3 * MiB);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, big, 2 * MiB, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, big, 100, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, &local, 3 * MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, big, 3 * MiB, 0, nullptr));
  gmr_block_list *list = nullptr;
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_allocate_blocks(f, 100 * KiB, nullptr, &list));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH,
            gmr_resource_deallocate(r, list->blocks[0], 64 * KiB, 0, nullptr));
  gmr_block_list fake = *list;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_fixed_block_resource_deallocate_blocks(f, &fake, nullptr));
  EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_deallocate_blocks(f, list, nullptr));
  EXPECT_EQ(0u, Stats(f).in_use_block_count);
}

// ---- messages ------------------------------------------------------------------

std::string CreateMessage(gmr_resource *upstream, const gmr_fixed_block_resource_config &c,
                          gmr_status expect) {
  gmr_fixed_block_resource *f = reinterpret_cast<gmr_fixed_block_resource *>(0x1);
  gmr_failure fl = GMR_FAILURE_INIT;
  EXPECT_EQ(expect, gmr_fixed_block_resource_create_ex(upstream, &c, &f, &fl));
  EXPECT_EQ(nullptr, f);
  EXPECT_EQ(expect, fl.status);
  return fl.message;
}

TEST_F(FixedBlockContract, ConfigErrorsNameTheOneOptionThatIsWrong) {
  gmr_fixed_block_resource_config c = Config();
  c.block_bytes = 1000;
  std::string m = CreateMessage(upstream_, c, GMR_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string::npos, m.find("block_bytes")) << m;
  EXPECT_NE(std::string::npos, m.find("1000")) << m;
  EXPECT_NE(std::string::npos, m.find("256")) << m;
  EXPECT_EQ(std::string::npos, m.find("blocks_per_chunk")) << m;
  c = Config();
  c.blocks_per_chunk = 0;
  m = CreateMessage(upstream_, c, GMR_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string::npos, m.find("blocks_per_chunk")) << m;
  EXPECT_EQ(std::string::npos, m.find("block_bytes")) << m;
  c = Config();
  c.max_chunk_count = 1;
  c.initial_chunk_count = 2;
  m = CreateMessage(upstream_, c, GMR_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string::npos, m.find("initial_chunk_count")) << m;
  EXPECT_NE(std::string::npos, m.find("max_chunk_count")) << m;
  c = Config();
  c.oversize = static_cast<gmr_fixed_block_oversize>(7);
  m = CreateMessage(upstream_, c, GMR_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string::npos, m.find("oversize")) << m;
}

TEST_F(FixedBlockContract, InitialChunksTooLargeSayTheBytesAndTheOption) {
  gmr_fixed_block_resource_config c = Config(MiB, 1024);  // 1 GiB chunks
  c.initial_chunk_count = 100;                            // 100 GiB on an 80 GiB device
  std::string m = CreateMessage(upstream_, c, GMR_ERR_OUT_OF_MEMORY);
  EXPECT_NE(std::string::npos, m.find("1073741824")) << m;
  EXPECT_NE(std::string::npos, m.find("initial_chunk_count")) << m;
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

// ---- no CUDA call under the spin lock ----------------------------------------------

TEST_F(FixedBlockContract, ASlowGrowthHoldsUpNoAllocationFromFreeBlocks) {
  gmr_fixed_block_resource_config c = Config(64 * KiB, 2);
  c.initial_chunk_count = 1;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  void *first = Alloc(r, 100);  // one free block left
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_delay(GMR_CUDA_CALL_MALLOC, 2000000000u));  // 2 s
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  std::atomic<bool> grown{false};
  gmr_block_list *list = nullptr;
  std::thread grower([&] {
    EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_allocate_blocks(f, 2 * 64 * KiB, nullptr, &list));
    grown = true;
  });
  while (gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC) == mallocs) std::this_thread::yield();
  void *second = Alloc(r, 100);  // the free block
  EXPECT_FALSE(grown.load()) << "an allocation from a free block waited for another's growth";
  grower.join();
  EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_deallocate_blocks(f, list, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, first, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, second, 100, 0, nullptr));
}

}  // namespace
