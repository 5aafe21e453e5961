// pool_resource arenas and threads: threads on their own streams keep every
// invariant, an arena that cannot grow uses or frees another's memory, and
// frees from another arena's thread find their arena.
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

// ---- arenas and threads --------------------------------------------------------

TEST_F(PoolTest, ThreadsOnTheirOwnStreamsKeepEveryInvariant) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 4;
  c.min_growth_bytes = 4 * MiB;
  gmr_resource *r = Make(c);
  constexpr int kThreads = 8;
  std::vector<gmr_stream> streams;
  for (int t = 0; t < kThreads; ++t) streams.push_back(Stream());
  // Blocks handed between threads: a thread frees what another allocated.
  std::mutex m;
  std::vector<std::pair<void *, size_t>> exchange;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 7919u);
      std::vector<std::pair<void *, size_t>> mine;
      for (int i = 0; i < 1500; ++i) {
        unsigned op = rng() % 10;
        if (op < 5 || mine.empty()) {
          // Two statements: the operands of % are unsequenced (builds differed).
          const auto draw = rng();
          size_t bytes = 1 + draw % (rng() % 10 == 0 ? 2 * MiB : 32 * KiB);
          void *p = nullptr;
          if (gmr_resource_allocate(r, bytes, 0, streams[t], &p) != GMR_OK) {
            failures++;
            continue;
          }
          std::memset(p, t, std::min<size_t>(bytes, 64));
          mine.emplace_back(p, bytes);
        } else if (op < 8) {
          auto b = mine.back();
          mine.pop_back();
          if (gmr_resource_deallocate(r, b.first, b.second, 0, streams[t]) != GMR_OK) failures++;
        } else {
          std::lock_guard<std::mutex> g(m);
          exchange.push_back(mine.back());
          mine.pop_back();
          if (exchange.size() > 4) {
            auto b = exchange.front();
            exchange.erase(exchange.begin());
            if (gmr_resource_deallocate(r, b.first, b.second, 0, streams[t]) != GMR_OK) failures++;
          }
        }
      }
      for (auto &b : mine) {
        if (gmr_resource_deallocate(r, b.first, b.second, 0, streams[t]) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  for (auto &b : exchange)
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b.first, b.second, 0, nullptr));
  EXPECT_EQ(0, failures.load());
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(0u, s.in_use_count);
  EXPECT_EQ(0u, s.in_use_bytes);
  EXPECT_EQ(4u, s.arena_count);
  ExpectInvariants(r);
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(s.held_bytes, released);
  EXPECT_EQ(0u, Stats(r).held_bytes);
}

// Runs `fn` on a new thread and waits: each such thread gets the next home
// number, so two calls in a row land in different arenas of a 2-arena pool.
template <typename F>
void OnNewThread(F fn) {
  std::thread t(fn);
  t.join();
}

TEST_F(PoolTest, AnArenaThatCannotGrowUsesAnotherArenasFreeMemory) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.arena_count = 2;
  c.maximum_pool_bytes = 4 * MiB;
  gmr_resource *r = Make(c);
  void *a = nullptr, *b = nullptr;
  OnNewThread([&] {
    a = Alloc(r, MiB);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, MiB, 0, nullptr));
  });
  OnNewThread([&] { b = Alloc(r, MiB); });  // its own arena is empty and may not grow
  EXPECT_EQ(a, b);
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(4 * MiB, s.held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, MiB, 0, nullptr));  // from this thread
  ExpectInvariants(r);
}

TEST_F(PoolTest, AnArenaThatCannotGrowMakesOthersGiveBackFreeChunks) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.arena_count = 2;
  c.maximum_pool_bytes = 8 * MiB;
  gmr_resource *r = Make(c);
  OnNewThread([&] {
    void *a = Alloc(r, 3 * MiB);  // arena x: a 4 MiB chunk, then free
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * MiB, 0, nullptr));
  });
  void *b = nullptr;
  OnNewThread([&] { b = Alloc(r, 5 * MiB); });  // arena y needs 6 MiB: 4 + 6 > 8
  ASSERT_NE(nullptr, b);
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(6 * MiB, s.held_bytes);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(1u, s.release_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 5 * MiB, 0, nullptr));
  ExpectInvariants(r);
}

TEST_F(PoolTest, FreesFromAnotherArenasThreadFindTheirArena) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.arena_count = 3;
  gmr_resource *r = Make(c);
  // Threads on streams of their own (the default stream's arena is shared by
  // its threads); streams_outlive mode: each thread has a home arena.
  struct Block {
    void *p;
    size_t bytes;
    gmr_stream s;
  };
  std::vector<Block> blocks;
  for (int t = 0; t < 3; ++t) {
    gmr_stream s = Stream();
    OnNewThread([&] {
      for (int i = 0; i < 20; ++i) blocks.push_back({Alloc(r, 1000 + i * 300, s), 1000u + i * 300u, s});
    });
  }
  EXPECT_EQ(3u, Stats(r).chunk_count);  // one per arena
  OnNewThread([&] {
    for (auto &b : blocks) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b.p, b.bytes, 0, b.s));
  });
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(0u, s.in_use_count);
  EXPECT_EQ(3u, s.free_block_count);
  ExpectInvariants(r);
}

}  // namespace
