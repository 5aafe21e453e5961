// pool_resource's memory: what get_memory_info and the failure record say
// (exact), the list of its blocks (gmr_pool_resource_get_blocks), growth
// over a tight upstream, which free block a request takes (completed memory
// of another stream before splitting new space), and the footprint of
// arenas when two threads take turns.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/pool_resource.h"
#include "tests/pool_test_fixture.h"
#include "tests/support/sim_fixture.h"

namespace {

using namespace pool_test;

gmr_memory_info Info(gmr_resource *r) {
  gmr_memory_info m = GMR_MEMORY_INFO_INIT;
  EXPECT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &m));
  return m;
}

// ---- get_memory_info (issue 14) ----------------------------------------------

TEST_F(PoolTest, MemoryInfoIsExact) {
  gmr_resource *r = Make(small_config(4 * MiB));
  gmr_memory_info m = Info(r);
  EXPECT_EQ(0u, m.held_bytes);
  EXPECT_EQ(0u, m.free_block_count);
  // [a 1 MiB][b 1000 B -> 1024][c 1 MiB][tail]; then b is freed: two holes.
  void *a = Alloc(r, MiB), *b = Alloc(r, 1000), *c = Alloc(r, MiB);
  m = Info(r);
  EXPECT_EQ(4 * MiB, m.held_bytes);
  EXPECT_EQ(2 * MiB + 1024, m.live_bytes);
  EXPECT_EQ(2 * MiB - 1024, m.free_bytes);
  EXPECT_EQ(2 * MiB - 1024, m.largest_free_block_bytes);
  EXPECT_EQ(1u, m.free_block_count);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 1000, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, MiB, 0, nullptr));
  m = Info(r);
  EXPECT_EQ(MiB, m.live_bytes);
  EXPECT_EQ(3 * MiB, m.free_bytes);
  EXPECT_EQ(2 * MiB - 1024, m.largest_free_block_bytes);
  EXPECT_EQ(2u, m.free_block_count);  // a+b merged, and the tail
  EXPECT_EQ(m.held_bytes, m.live_bytes + m.free_bytes);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, c, MiB, 0, nullptr));
  m = Info(r);
  EXPECT_EQ(4 * MiB, m.largest_free_block_bytes);
  EXPECT_EQ(1u, m.free_block_count);
  // Several arenas add up.
  gmr_pool_resource_config cc = small_config(4 * MiB);
  cc.arena_count = 2;
  cc.streams.streams_outlive_resource = false;  // streams identified: arenas follow them
  gmr_resource *r2 = Make(cc);
  // Two threads, each with a stream of its own: each stream in its thread's arena.
  gmr_stream s1 = Stream(), s2 = Stream();
  void *x = nullptr, *y = nullptr;
  std::thread([&] { x = Alloc(r2, MiB, s1); }).join();
  std::thread([&] { y = Alloc(r2, 3 * MiB, s2); }).join();
  m = Info(r2);
  EXPECT_EQ(8 * MiB, m.held_bytes);
  EXPECT_EQ(4 * MiB, m.live_bytes);
  EXPECT_EQ(3 * MiB, m.largest_free_block_bytes);
  EXPECT_EQ(2u, m.free_block_count);
  // A caller's struct of exactly version 1 gets every field.
  gmr_memory_info v1 = GMR_MEMORY_INFO_INIT;
  v1.size = offsetof(gmr_memory_info, free_block_count) + sizeof(size_t);
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r2, &v1));
  EXPECT_EQ(2u, v1.free_block_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r2, x, MiB, 0, s1));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r2, y, 3 * MiB, 0, s2));
}

TEST_F(PoolTest, AFailureSaysHowMuchWasFreeAndTheLargestBlock) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.maximum_pool_bytes = 4 * MiB;
  gmr_resource *r = Make(c);
  void *a = Alloc(r, MiB), *b = Alloc(r, MiB), *d = Alloc(r, MiB);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, MiB, 0, nullptr));  // 2 MiB free in two pieces
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 2 * MiB, 0, nullptr, &p, &f));
  EXPECT_TRUE(f.free_info_known);
  EXPECT_EQ(2 * MiB, f.free_bytes);
  EXPECT_EQ(MiB, f.largest_free_block_bytes);  // fragmentation, not exhaustion
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, d, MiB, 0, nullptr));
}

// ---- growth over a tight upstream (issue 13) -------------------------------------

TEST_F(PoolTest, OverATightLimitGrowthFallsBackToExactlyTheRequest) {
  gmr_limiting_adaptor_config lc = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  lc.limit_bytes = 10 * KiB;
  gmr_limiting_adaptor *limit = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(upstream_, &lc, &limit));
  gmr_resource *l = gmr_limiting_adaptor_as_resource(limit);
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;  // 48 MiB growth steps
  c.arena_count = 1;
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(l, &c, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  std::vector<void *> live;
  for (int i = 0; i < 10; ++i) {  // 10 x 1 KiB under a 10 KiB limit: all fit
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(r, KiB, 0, nullptr, &p, &f))
        << i << ": " << f.message;
    live.push_back(p);
  }
  EXPECT_EQ(10 * KiB, gmr_limiting_adaptor_get_used_bytes(limit));
  for (void *p : live) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, KiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(l));
}

// ---- which free block a request takes (issue 13) ---------------------------------

// PyTorch's order: memory freed on another stream whose work is known done is
// taken before new free space is split.
TEST_F(PoolTest, CompletedMemoryOfAnotherStreamIsTakenBeforeSplittingNewSpace) {
  gmr_pool_resource_config c = small_config(8 * MiB);
  c.streams.streams_outlive_resource = false;
  gmr_resource *r = Make(c);
  gmr_stream s = Stream(), t = Stream();
  void *keep = Alloc(r, MiB, t);  // t's chunk: [keep][7 MiB of new space]
  void *sp = Alloc(r, MiB, s);    // s's chunk
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, sp, MiB, 0, s));  // recorded; s's work is done
  void *q = Alloc(r, MiB, t);
  EXPECT_EQ(sp, q) << "split t's new space instead of reusing s's completed block";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, t));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, keep, MiB, 0, t));
  ExpectInvariants(r);
}

// ---- arenas cost no footprint to threads that take turns (issue 12) ------------

// The initial chunk is the default stream's, in the arena that serves it:
// with many arenas, default-stream requests of any thread use it.
TEST_F(PoolTest, TheInitialChunkServesTheDefaultStreamWhateverTheArenas) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 8;
  c.initial_pool_bytes = 8 * MiB;
  gmr_resource *r = Make(c);
  void *p = Alloc(r, MiB), *q = nullptr;
  std::thread([&] { q = Alloc(r, MiB); }).join();
  gmr_pool_resource_stats st = Stats(r);
  EXPECT_EQ(1u, st.grow_count);
  EXPECT_EQ(8 * MiB, st.held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, nullptr));
}

// Two threads alternate phases on one stream (PyTorch's forward thread and its
// autograd thread): the pool's arenas must not each grow their own memory.
TEST_F(PoolTest, TwoThreadsTakingTurnsReachTheSamePeakAsOne) {
  auto phase = [](gmr_resource *r, int round) {
    std::vector<std::pair<void *, size_t>> live;
    for (int i = 0; i < 40; ++i) {
      size_t bytes = (size_t{1} + static_cast<size_t>((i * 7 + round * 3) % 13)) * 512 * KiB;
      void *p = nullptr;
      EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, nullptr, &p));
      live.emplace_back(p, bytes);
      if (i % 3 == 2) {  // some frees inside the phase
        EXPECT_EQ(GMR_OK,
                  gmr_resource_deallocate(r, live.front().first, live.front().second, 0, nullptr));
        live.erase(live.begin());
      }
    }
    for (auto &b : live)
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b.first, b.second, 0, nullptr));
  };
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 2;
  c.min_growth_bytes = 2 * MiB;
  c.max_growth_bytes = 16 * MiB;
  size_t peak[2] = {0, 0};
  // One thread: every phase on it (one arena).
  gmr_resource *one = Make(c);
  std::thread([&] {
    for (int round = 0; round < 6; ++round) phase(one, round);
  }).join();
  peak[0] = Stats(one).peak_held_bytes;
  // Two: a new thread per phase; threads get homes round-robin, so the
  // phases alternate between the two arenas.
  gmr_resource *two = Make(c);
  for (int round = 0; round < 6; ++round) std::thread([&] { phase(two, round); }).join();
  peak[1] = Stats(two).peak_held_bytes;
  ExpectInvariants(one);
  ExpectInvariants(two);
  EXPECT_EQ(peak[0], peak[1]) << "taking turns over two arenas cost footprint";
}

// ---- the list of blocks (memory snapshots) ------------------------------------

std::vector<gmr_pool_block_info> Blocks(gmr_resource *r) {
  gmr_pool_resource *pool = gmr_pool_resource_from_resource(r);
  size_t n = 0;
  EXPECT_EQ(GMR_OK, gmr_pool_resource_get_blocks(pool, nullptr, 0, &n));
  std::vector<gmr_pool_block_info> out(n);
  size_t again = 0;
  EXPECT_EQ(GMR_OK, gmr_pool_resource_get_blocks(pool, out.data(), out.size(), &again));
  EXPECT_EQ(n, again);
  return out;
}

TEST_F(PoolTest, BlocksTileEveryChunkInAddressOrder) {
  gmr_resource *r = Make(small_config(4 * MiB));
  EXPECT_TRUE(Blocks(r).empty());
  // Chunk 1: [a 1 MiB][b 1000 B -> 1024, freed][c 1 MiB][free tail].
  // Chunk 2: [d 6 MiB] (a request above the growth step gets its own chunk).
  void *a = Alloc(r, MiB), *b = Alloc(r, 1000), *c = Alloc(r, MiB), *d = Alloc(r, 6 * MiB);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 1000, 0, nullptr));
  std::vector<gmr_pool_block_info> blocks = Blocks(r);
  ASSERT_EQ(5u, blocks.size());
  const std::vector<gmr_pool_block_info> listed = blocks;
  // Chunks come in the arena's order: put a's first to compare.
  std::stable_sort(blocks.begin(), blocks.end(),
                   [&](const gmr_pool_block_info &x, const gmr_pool_block_info &y) {
                     return (x.chunk == a) > (y.chunk == a);
                   });
  const struct {
    void *addr;
    size_t bytes, requested;
    gmr_pool_block_state state;
  } want[] = {
      {a, MiB, MiB, GMR_POOL_BLOCK_ALLOCATED},
      {b, 1024, 0, GMR_POOL_BLOCK_FREE},
      {c, MiB, MiB, GMR_POOL_BLOCK_ALLOCATED},
      {static_cast<char *>(c) + MiB, 2 * MiB - 1024, 0, GMR_POOL_BLOCK_FREE},
      {d, 6 * MiB, 6 * MiB, GMR_POOL_BLOCK_ALLOCATED},
  };
  size_t chunk_total = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(want[i].addr, blocks[i].addr);
    EXPECT_EQ(want[i].bytes, blocks[i].bytes);
    EXPECT_EQ(want[i].requested, blocks[i].requested_bytes);
    EXPECT_EQ(want[i].state, blocks[i].state);
    EXPECT_EQ(0u, blocks[i].arena);
    EXPECT_EQ(i < 4 ? a : d, blocks[i].chunk);
    EXPECT_EQ(i < 4 ? 4 * MiB : 6 * MiB, blocks[i].chunk_bytes);
    if (i == 0 || blocks[i].chunk != blocks[i - 1].chunk) {
      chunk_total += blocks[i].chunk_bytes;
    } else {
      EXPECT_EQ(U(blocks[i - 1].addr) + blocks[i - 1].bytes, U(blocks[i].addr));
    }
  }
  EXPECT_EQ(Stats(r).held_bytes, chunk_total);
  // Only part of the list: the count says how many there are.
  gmr_pool_block_info two[2];
  size_t n = 0;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_blocks(gmr_pool_resource_from_resource(r), two, 2, &n));
  EXPECT_EQ(5u, n);
  EXPECT_EQ(listed[0].addr, two[0].addr);
  EXPECT_EQ(listed[1].addr, two[1].addr);
  for (void *p : {a, c}) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, d, 6 * MiB, 0, nullptr));
  blocks = Blocks(r);
  ASSERT_EQ(2u, blocks.size());  // each chunk one free block
  for (const gmr_pool_block_info &info : blocks) EXPECT_EQ(GMR_POOL_BLOCK_FREE, info.state);
}

TEST_F(PoolTest, ABlockWaitingForARecordedStreamIsListedAsDeferred) {
  gmr_pool_resource_config config = small_config(4 * MiB);
  config.streams.streams_outlive_resource = false;
  gmr_resource *r = Make(config);
  gmr_stream s = Stream(), side = Stream();
  void *p = Alloc(r, MiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, side));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(side, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  std::vector<gmr_pool_block_info> blocks = Blocks(r);
  ASSERT_EQ(2u, blocks.size());
  EXPECT_EQ(p, blocks[0].addr);
  EXPECT_EQ(GMR_POOL_BLOCK_DEFERRED, blocks[0].state);
  EXPECT_EQ(0u, blocks[0].requested_bytes);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(side, false));
  ExpectInvariants(r);
}

TEST_F(PoolTest, ListingBlocksRefusesBadArgumentsAndWritesNothing) {
  gmr_resource *r = Make(small_config(4 * MiB));
  gmr_pool_resource *pool = gmr_pool_resource_from_resource(r);
  gmr_pool_block_info info;
  size_t n = 7;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_get_blocks(nullptr, &info, 1, &n));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_get_blocks(pool, &info, 1, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_get_blocks(pool, nullptr, 1, &n));
  EXPECT_EQ(7u, n);
}

}  // namespace
