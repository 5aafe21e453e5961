// pool_resource's hot path (issue 32) and its fall-backs: a free of a size
// the stream asks for again waits unmerged in its slot's cache of recent
// frees and stays in the arena's live map, so the next allocation of that
// size takes it back with no index, no split and no map insert; every way a
// block leaves the cache (eviction, a request the cache cannot serve, trim)
// takes it out of the map; a free of a cached block is a double free; each
// thread reuses the arena it found last for the same pool and stream.
// Invariants (check_stack, pool_check.c) are checked between the steps.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gmr/pool_resource.h"
#include "gmr/sim/streams.h"
#include "tests/pool_test_fixture.h"

namespace {

using namespace pool_test;

gmr_pool_resource_config cached_config(uint32_t recent = 4) {
  gmr_pool_resource_config c = small_config();
  c.recent_free_count = recent;
  c.recent_free_max_bytes = MiB;
  return c;
}

TEST_F(PoolTest, ACachedBlockComesBackForTheSameSizeAndTheBooksStayExact) {
  gmr_resource *r = Make(cached_config());
  void *p = Alloc(r, 64 * KiB);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, nullptr));
    ExpectInvariants(r);  // cached: free, in its slot's cache, still in the live map
    gmr_pool_resource_stats s = Stats(r);
    EXPECT_EQ(0u, s.in_use_count);
    EXPECT_EQ(0u, s.in_use_bytes);
    EXPECT_EQ(0u, s.requested_bytes);
    EXPECT_EQ(p, Alloc(r, 64 * KiB));
    ExpectInvariants(r);
    s = Stats(r);
    EXPECT_EQ(1u, s.in_use_count);
    EXPECT_EQ(64 * KiB, s.in_use_bytes);
  }
  // The rounding is the block's, the request is the caller's.
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, nullptr));
  void *q = Alloc(r, 64 * KiB - 100);
  EXPECT_EQ(p, q);
  EXPECT_EQ(64 * KiB - 100, Stats(r).requested_bytes);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, q, 64 * KiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 64 * KiB - 100, 0, nullptr));
  ExpectInvariants(r);
}

TEST_F(PoolTest, AFreeOfACachedBlockIsADoubleFreeAndChangesNothing) {
  gmr_resource *r = Make(cached_config());
  void *p = Alloc(r, 64 * KiB);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 64 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 32 * KiB, 0, nullptr));
  ExpectInvariants(r);
  // record_stream names live allocations only.
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_record_stream(r, p, Stream()));
  EXPECT_EQ(p, Alloc(r, 64 * KiB));  // still cached, and handed out once
  EXPECT_EQ(1u, Stats(r).in_use_count);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, nullptr));
}

TEST_F(PoolTest, AFullCacheEvictsItsOldestEntryOutOfTheLiveMap) {
  gmr_resource *r = Make(cached_config(2));
  void *a = Alloc(r, 64 * KiB), *b = Alloc(r, 64 * KiB), *c = Alloc(r, 64 * KiB);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 64 * KiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 64 * KiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, c, 64 * KiB, 0, nullptr));  // a leaves the cache
  ExpectInvariants(r);
  // a is merged into the index now, and its free is still a double free.
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, a, 64 * KiB, 0, nullptr));
  // The newest first: c, then b, then the index.
  EXPECT_EQ(c, Alloc(r, 64 * KiB));
  EXPECT_EQ(b, Alloc(r, 64 * KiB));
  void *d = Alloc(r, 64 * KiB);
  EXPECT_EQ(a, d);  // the merged free space starts where a was
  ExpectInvariants(r);
  for (void *p : {b, c, d}) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, nullptr));
  ExpectInvariants(r);
}

TEST_F(PoolTest, RequestsTheCacheCannotServeFallBackAndFlushIt) {
  gmr_resource *r = Make(cached_config());
  std::vector<void *> held;
  for (int i = 0; i < 4; ++i) held.push_back(Alloc(r, 64 * KiB));
  for (void *p : held) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, nullptr));
  ExpectInvariants(r);
  // Another size, an alignment above 256 and a block larger than
  // recent_free_max_bytes all go past the cache.
  void *x = Alloc(r, 100 * KiB);
  void *y = Alloc(r, 64 * KiB, nullptr, 4096);
  void *z = Alloc(r, 2 * MiB);
  ExpectInvariants(r);
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(y) % 4096);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, z, 2 * MiB, 0, nullptr));  // filed at once
  ExpectInvariants(r);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, y, 64 * KiB, 4096, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 100 * KiB, 0, nullptr));
  // Everything is free: trim flushes the caches and gives the chunk back.
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(4 * MiB, released);
  ExpectInvariants(r);
  EXPECT_EQ(0u, Stats(r).held_bytes);
}

// A thread keeps the arena it found for a pool and stream; another pool on
// the same stream, or a pool made after one was destroyed (perhaps at the
// same address), must not get that answer.
TEST_F(PoolTest, ThePerThreadArenaAnswerIsPerPoolAndStream) {
  gmr_pool_resource_config c = cached_config();
  c.arena_count = 4;
  gmr_resource *one = Make(c);
  gmr_resource *two = Make(c);
  gmr_stream s = Stream();
  for (int i = 0; i < 20; ++i) {
    gmr_resource *r = i % 2 == 0 ? one : two;
    gmr_stream st = i % 3 == 0 ? s : nullptr;
    void *p = Alloc(r, 64 * KiB, st);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, st));
  }
  ExpectInvariants(one);
  ExpectInvariants(two);
  for (int round = 0; round < 4; ++round) {
    gmr_pool_resource *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, &c, &p));
    gmr_resource *r = gmr_pool_resource_as_resource(p);
    void *x = Alloc(r, 64 * KiB, s);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 64 * KiB, 0, s));
    ExpectInvariants(r);
    ASSERT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

// Threads on streams of their own and on one shared stream, each freeing
// some of what the others allocated (the other arena's path), over a pool
// with several arenas; then every book balances.
TEST_F(PoolTest, ThreadsSharingArenasAndFreeingEachOthersBlocksKeepTheBooks) {
  gmr_pool_resource_config c = cached_config(8);
  c.arena_count = 4;
  c.min_growth_bytes = c.max_growth_bytes = 8 * MiB;
  gmr_resource *r = Make(c);
  constexpr int kThreads = 6;
  std::vector<gmr_stream> streams;
  for (int t = 0; t < kThreads; ++t) streams.push_back(t < 4 ? Stream() : nullptr);
  std::mutex mu;
  std::vector<std::pair<void *, size_t>> shared;  // blocks handed to any thread
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      gmr_stream st = streams[t];
      std::vector<std::pair<void *, size_t>> live;
      for (int i = 0; i < 2000; ++i) {
        size_t bytes = size_t{256} << (rng() % 10);  // 256 B to 128 KiB
        void *p = nullptr;
        if (gmr_resource_allocate(r, bytes, 0, st, &p) != GMR_OK) {
          failures++;
          continue;
        }
        live.push_back({p, bytes});
        if (live.size() > 16 || rng() % 3 == 0) {
          size_t k = rng() % live.size();
          auto block = live[k];
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
          if (rng() % 8 == 0) {
            std::lock_guard<std::mutex> lock(mu);
            shared.push_back(block);
            continue;
          }
          if (gmr_resource_deallocate(r, block.first, block.second, 0, st) != GMR_OK) failures++;
        }
        std::pair<void *, size_t> other{nullptr, 0};
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!shared.empty() && rng() % 4 == 0) {
            other = shared.back();
            shared.pop_back();
          }
        }
        // Another thread's block, freed on this thread's stream.
        if (other.first != nullptr &&
            gmr_resource_deallocate(r, other.first, other.second, 0, st) != GMR_OK) {
          failures++;
        }
      }
      for (auto [q, n] : live) {
        if (gmr_resource_deallocate(r, q, n, 0, st) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  for (auto [q, n] : shared) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, n, 0, nullptr));
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0u, Stats(r).in_use_count);
  ExpectInvariants(r);
}

}  // namespace
