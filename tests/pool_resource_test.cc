// pool_resource on the host simulation: create and its checks, placement,
// splitting and merging (checked by the invariant walk), bad frees, and the
// statistics header. Stream-ordered reuse: pool_reuse_test.cc; growth, trim
// and destroy: pool_growth_test.cc; arenas and threads: pool_arenas_test.cc.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/host_resource.h"
#include "gmr/pool_resource.h"
#include "tests/pool_test_fixture.h"
#include "tests/support/sim_fixture.h"

namespace {

using namespace pool_test;

TEST_F(PoolTest, CreateChecksEveryArgument) {
  gmr_pool_resource *p = reinterpret_cast<gmr_pool_resource *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(upstream_, nullptr, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(nullptr, nullptr, &p));
  EXPECT_EQ(nullptr, p);
  auto bad = [&](void (*edit)(gmr_pool_resource_config &)) {
    gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
    edit(c);
    gmr_pool_resource *q = reinterpret_cast<gmr_pool_resource *>(0x1);
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(upstream_, &c, &q));
    EXPECT_EQ(nullptr, q);
  };
  bad([](gmr_pool_resource_config &c) { c.chunk_granularity_bytes = 0; });
  bad([](gmr_pool_resource_config &c) { c.chunk_granularity_bytes = 3 * MiB; });
  bad([](gmr_pool_resource_config &c) { c.chunk_granularity_bytes = 128; });
  bad([](gmr_pool_resource_config &c) { c.min_growth_bytes = 0; });
  bad([](gmr_pool_resource_config &c) { c.min_growth_bytes = c.max_growth_bytes + 1; });
  bad([](gmr_pool_resource_config &c) { c.arena_count = 65; });
  bad([](gmr_pool_resource_config &c) { c.growth_percent = 1001; });
  bad([](gmr_pool_resource_config &c) { c.recent_free_count = 33; });
  bad([](gmr_pool_resource_config &c) {
    c.maximum_pool_bytes = 4 * MiB;
    c.initial_pool_bytes = 8 * MiB;
  });
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));

  // NULL config: the defaults, one arena per CPU, nothing taken yet.
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, nullptr, &p));
  pools_.push_back(p);
  gmr_resource *r = gmr_pool_resource_as_resource(p);
  EXPECT_STREQ("pool_resource", gmr_resource_get_type_name(r));
  EXPECT_EQ(p, gmr_pool_resource_from_resource(r));
  EXPECT_EQ(nullptr, gmr_pool_resource_from_resource(upstream_));
  EXPECT_EQ(upstream_, gmr_resource_get_upstream(r));
  EXPECT_EQ(upstream_, gmr_resource_get_upstream(gmr_pool_resource_as_resource(p)));
  EXPECT_GE(gmr_pool_resource_get_arena_count(p), 1u);
  EXPECT_LE(gmr_pool_resource_get_arena_count(p), 64u);
  EXPECT_EQ(0u, Stats(r).held_bytes);
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
}

TEST_F(PoolTest, InitialChunkAndExactStatistics) {
  gmr_pool_resource_config c = small_config();
  c.initial_pool_bytes = 8 * MiB;
  gmr_resource *r = Make(c);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(8 * MiB, s.held_bytes);
  EXPECT_EQ(8 * MiB, s.peak_held_bytes);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(1u, s.free_block_count);
  EXPECT_EQ(8 * MiB, s.largest_free_block_bytes);
  EXPECT_EQ(1u, s.arena_count);

  void *p = Alloc(r, 1000);
  s = Stats(r);
  EXPECT_EQ(1024u, s.in_use_bytes);  // rounded up to 256 bytes, no more
  EXPECT_EQ(1000u, s.requested_bytes);
  EXPECT_EQ(1u, s.in_use_count);
  EXPECT_EQ(8 * MiB - 1024, s.free_bytes);
  EXPECT_EQ(8 * MiB - 1024, s.largest_free_block_bytes);
  EXPECT_EQ(1u, s.free_block_count);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(8 * MiB, fp.held_bytes);
  EXPECT_EQ(8 * MiB, fp.peak_held_bytes);
  ExpectInvariants(r);

  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  s = Stats(r);
  EXPECT_EQ(0u, s.in_use_bytes);
  EXPECT_EQ(0u, s.in_use_count);
  EXPECT_EQ(1u, s.free_block_count);  // merged back into one block
  EXPECT_EQ(8 * MiB, s.largest_free_block_bytes);
  ExpectInvariants(r);
}

TEST_F(PoolTest, FailedInitialChunkLeavesNothing) {
  gmr_pool_resource_config c = small_config();
  c.initial_pool_bytes = 8 * MiB;
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorMemoryAllocation));
  gmr_pool_resource *p = reinterpret_cast<gmr_pool_resource *>(0x1);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_pool_resource_create(upstream_, &c, &p));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

TEST_F(PoolTest, SplitsFromTheFrontAndMergesNeighboursInAnyOrder) {
  gmr_resource *r = Make(small_config());
  void *a = Alloc(r, 256 * KiB), *b = Alloc(r, 256 * KiB), *c = Alloc(r, 256 * KiB);
  EXPECT_EQ(U(a) + 256 * KiB, U(b));
  EXPECT_EQ(U(b) + 256 * KiB, U(c));
  EXPECT_EQ(1u, Stats(r).free_block_count);  // the tail
  ExpectInvariants(r);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 256 * KiB, 0, nullptr));
  EXPECT_EQ(2u, Stats(r).free_block_count);  // the hole and the tail
  ExpectInvariants(r);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 256 * KiB, 0, nullptr));
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(2u, s.free_block_count);  // a merged with b
  EXPECT_EQ(4 * MiB - 768 * KiB, s.largest_free_block_bytes);
  ExpectInvariants(r);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, c, 256 * KiB, 0, nullptr));
  s = Stats(r);
  EXPECT_EQ(1u, s.free_block_count);  // everything merged: the whole chunk
  EXPECT_EQ(4 * MiB, s.largest_free_block_bytes);
  ExpectInvariants(r);
}

TEST_F(PoolTest, BestFitTakesTheSmallestHoleThatFits) {
  gmr_resource *r = Make(small_config(16 * MiB));
  // [1 MiB][x][3 MiB][x][2 MiB][x][tail]
  void *h1 = Alloc(r, 1 * MiB), *x1 = Alloc(r, 4096), *h3 = Alloc(r, 3 * MiB),
       *x2 = Alloc(r, 4096), *h2 = Alloc(r, 2 * MiB), *x3 = Alloc(r, 4096);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, h1, 1 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, h3, 3 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, h2, 2 * MiB, 0, nullptr));
  EXPECT_EQ(4u, Stats(r).free_block_count);
  void *p2 = Alloc(r, 2 * MiB);
  EXPECT_EQ(h2, p2);  // exact fit
  void *p1 = Alloc(r, 900 * KiB);
  EXPECT_EQ(h1, p1);  // the 1 MiB hole, not the 3 MiB one or the tail
  void *p3 = Alloc(r, 2 * MiB + 512 * KiB);
  EXPECT_EQ(h3, p3);  // the 3 MiB hole, not the tail
  ExpectInvariants(r);
  for (auto [p, n] : std::vector<std::pair<void *, size_t>>{{p1, 900 * KiB},
                                                            {p2, 2 * MiB},
                                                            {p3, 2 * MiB + 512 * KiB},
                                                            {x1, 4096},
                                                            {x2, 4096},
                                                            {x3, 4096}}) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, n, 0, nullptr));
  }
  EXPECT_EQ(1u, Stats(r).free_block_count);
  ExpectInvariants(r);
}

class PoolRandomTest : public PoolTest, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(PoolRandomTest, RandomSequencesKeepEveryInvariant) {
  // Random sizes, alignments and streams; the walk runs after every call, and
  // at the end trim must give everything back. The parameter is the number of
  // recent frees each stream keeps unmerged.
  gmr_pool_resource_config c = small_config(8 * MiB);
  c.growth_percent = 25;
  c.max_growth_bytes = 32 * MiB;
  c.recent_free_count = GetParam();
  c.recent_free_max_bytes = SIZE_MAX;  // cache every size: the hardest case for the walk
  gmr_resource *r = Make(c);
  gmr_stream streams[2] = {Stream(), Stream()};
  std::mt19937_64 rng(7);
  struct Live {
    void *p;
    size_t bytes, align;
  };
  std::vector<Live> live;
  for (int i = 0; i < 4000; ++i) {
    gmr_stream s = streams[rng() % 2];
    if (live.empty() || rng() % 100 < 60) {
      // Two statements: the operands of % are unsequenced (builds differed).
      const auto draw = rng();
      size_t bytes = 1 + draw % (rng() % 8 == 0 ? 6 * MiB : 64 * KiB);
      size_t align = size_t{1} << (rng() % 16);  // 1 B .. 32 KiB
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, align, s, &p));
      ASSERT_EQ(0u, U(p) % std::max<size_t>(align, 256));
      live.push_back({p, bytes, align});
    } else {
      size_t k = rng() % live.size();
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, live[k].p, live[k].bytes, live[k].align, s));
      live[k] = live.back();
      live.pop_back();
    }
    char err[256];
    ASSERT_EQ(GMR_OK, check_stack(r, err, sizeof err)) << "after call " << i << ": " << err;
  }
  for (auto &l : live)
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, l.p, l.bytes, l.align, streams[0]));
  // All on one stream now? Not necessarily: blocks freed on the second stream
  // stay apart until settled. Trim settles everything and gives it all back.
  size_t released = 0;
  gmr_pool_resource_stats before = Stats(r);
  EXPECT_EQ(0u, before.in_use_count);
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(before.held_bytes, released);
  EXPECT_EQ(0u, Stats(r).held_bytes);
  EXPECT_EQ(0u, Stats(r).free_block_count);
  ExpectInvariants(r);
}

INSTANTIATE_TEST_SUITE_P(RecentFrees, PoolRandomTest, ::testing::Values(0u, 8u, 32u));

TEST_F(PoolTest, RecentFreesAreReusedUnmergedUntilSpaceIsNeeded) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.recent_free_count = 2;
  c.recent_free_max_bytes = 256 * KiB;
  gmr_resource *r = Make(c);
  void *a = Alloc(r, 256 * KiB), *b = Alloc(r, 256 * KiB), *d = Alloc(r, 256 * KiB);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 256 * KiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 256 * KiB, 0, nullptr));
  EXPECT_EQ(3u, Stats(r).free_block_count);  // the tail, and a and b unmerged
  ExpectInvariants(r);
  EXPECT_EQ(a, Alloc(r, 256 * KiB));  // the most recent free of that size
  EXPECT_EQ(b, Alloc(r, 256 * KiB));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 256 * KiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 256 * KiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, d, 256 * KiB, 0, nullptr));  // full: b is merged
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(4u, s.free_block_count);  // b, a, d apart, and the tail
  EXPECT_EQ(4 * MiB - 768 * KiB, s.largest_free_block_bytes);
  ExpectInvariants(r);
  // Nothing free is large enough until the recent frees merge: no growth.
  void *big = Alloc(r, 3 * MiB + 512 * KiB);
  EXPECT_EQ(a, big);
  s = Stats(r);
  EXPECT_EQ(1u, s.grow_count);
  EXPECT_EQ(1u, s.free_block_count);
  ExpectInvariants(r);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, big, 3 * MiB + 512 * KiB, 0, nullptr));
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));  // trim merges and gives back
  EXPECT_EQ(4 * MiB, released);
  ExpectInvariants(r);
}

TEST_F(PoolTest, FreeSpaceOfOneStreamIsFullyMerged) {
  gmr_resource *r = Make(small_config(8 * MiB));
  std::mt19937_64 rng(11);
  std::vector<std::pair<void *, size_t>> live;
  for (int i = 0; i < 300; ++i) {
    size_t bytes = 1 + rng() % (512 * KiB);
    live.emplace_back(Alloc(r, bytes), bytes);
  }
  std::shuffle(live.begin(), live.end(), rng);
  for (auto &l : live) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, l.first, l.second, 0, nullptr));
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(s.chunk_count, s.free_block_count);  // one free block per chunk
  EXPECT_EQ(s.held_bytes, s.free_bytes);
  ExpectInvariants(r);
}

TEST_F(PoolTest, LargeAlignmentsLeaveTheirPaddingFree) {
  gmr_resource *r = Make(small_config(8 * MiB));
  void *first = Alloc(r, 256);  // so the chunk's start is taken
  for (size_t align : {size_t{4096}, size_t{65536}, MiB}) {
    void *p = Alloc(r, 1000, nullptr, align);
    EXPECT_EQ(0u, U(p) % align);
    ExpectInvariants(r);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, align, nullptr));
  }
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_allocate_ex(r, 1000, 2 * MiB, nullptr, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "alignment")) << f.message;
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, first, 256, 0, nullptr));
  EXPECT_EQ(1u, Stats(r).free_block_count);
  ExpectInvariants(r);
}

TEST_F(PoolTest, BadFreesChangeNothing) {
  gmr_resource *r = Make(small_config());
  void *p = Alloc(r, 5000);
  gmr_pool_resource_stats before = Stats(r);
  int local = 0;
  // One vocabulary for bad frees in every layer (issue 9): gmr/resource.h.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 4999, 0, nullptr));    // size
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 5000, 512, nullptr));  // alignment
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_deallocate(r, static_cast<char *>(p) + 256, 256, 0, nullptr));  // interior
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_deallocate(r, &local, 5000, 0, nullptr));  // foreign
  gmr_pool_resource_stats after = Stats(r);
  EXPECT_EQ(before.in_use_bytes, after.in_use_bytes);
  EXPECT_EQ(before.free_block_count, after.free_block_count);
  ExpectInvariants(r);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 5000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 5000, 0, nullptr));  // twice
  ExpectInvariants(r);
}

// RMM's pool refuses initial and maximum sizes that are not multiples of 256
// bytes; gmr's rounds them up and reports the sizes it uses.
TEST_F(PoolTest, SizesAreRoundedUpTo256AndReportedAsUsed) {
  gmr_pool_resource_config c = small_config();
  c.initial_pool_bytes = 1000;
  c.maximum_pool_bytes = 8 * MiB + 1;
  gmr_resource *r = Make(c);
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(1024u, s.initial_pool_bytes);
  EXPECT_EQ(8 * MiB + 256, s.maximum_pool_bytes);
  EXPECT_EQ(1024u, s.held_bytes) << "the initial chunk is the rounded size";
  c.initial_pool_bytes = 0;
  c.maximum_pool_bytes = 0;
  s = Stats(Make(c));
  EXPECT_EQ(0u, s.initial_pool_bytes);
  EXPECT_EQ(0u, s.maximum_pool_bytes) << "0 stays 'no maximum'";
}

TEST_F(PoolTest, StatsHonourTheSizeVersionHeader) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.initial_pool_bytes = MiB;
  gmr_pool_resource *p = gmr_pool_resource_from_resource(Make(c));
  ASSERT_NE(nullptr, p);
  gmr_pool_resource_stats s = GMR_POOL_RESOURCE_STATS_INIT;
  s.size = sizeof(size_t);  // shorter than the header
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_get_stats(p, &s));
  s = GMR_POOL_RESOURCE_STATS_INIT;
  s.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_get_stats(p, &s));
  EXPECT_EQ(0u, s.held_bytes);
  s = GMR_POOL_RESOURCE_STATS_INIT;
  s.size = offsetof(gmr_pool_resource_stats, peak_held_bytes);  // an older, shorter struct
  s.peak_held_bytes = 77;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(p, &s));
  EXPECT_EQ(MiB, s.held_bytes);
  EXPECT_EQ(77u, s.peak_held_bytes);
  EXPECT_EQ(GMR_POOL_RESOURCE_STATS_VERSION, s.version);
}

}  // namespace
