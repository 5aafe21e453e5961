// fixed_block_resource's hot path (issue 32) and its fall-backs: a block is
// found from its address by a shift when the block size is a power of two
// and by a division otherwise, with the same verdicts on addresses that are
// no block's start; each thread reuses the shard it found last for the same
// resource and stream, and a free made by another thread finds the block's
// own shard. Invariants (check_stack) are checked between the steps.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "tests/support/check_stack.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t KiB = size_t{1} << 10;

class FixedBlockHotPathTest : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    gmr_cuda_resource *cuda = nullptr;
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &cuda));
    cuda_ = gmr_cuda_resource_as_resource(cuda);
  }

  void TearDown() override {
    for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(*it));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(cuda_));
    for (gmr_stream s : streams_) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    SimTest::TearDown();
  }

  gmr_resource *Make(size_t block, size_t per_chunk, uint32_t shards, bool own = true) {
    gmr_fixed_block_resource_config c = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
    c.block_bytes = block;
    c.blocks_per_chunk = per_chunk;
    c.shard_count = shards;
    gmr_fixed_block_resource *f = nullptr;
    EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_create(cuda_, &c, &f));
    if (f == nullptr) return nullptr;
    gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
    if (own) owned_.push_back(r);
    return r;
  }

  gmr_stream Stream() {
    gmr_stream s = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
    streams_.push_back(s);
    return s;
  }

  static void ExpectInvariants(gmr_resource *r) {
    char err[256];
    EXPECT_EQ(GMR_OK, check_stack(r, err, sizeof err)) << err;
  }

  static gmr_fixed_block_resource_stats Stats(gmr_resource *r) {
    gmr_fixed_block_resource_stats s = GMR_FIXED_BLOCK_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK,
              gmr_fixed_block_resource_get_stats(gmr_fixed_block_resource_from_resource(r), &s));
    return s;
  }

  gmr_resource *cuda_ = nullptr;
  std::vector<gmr_resource *> owned_;
  std::vector<gmr_stream> streams_;
};

// 768 B and 3,840 B blocks take the division, 1 KiB and 64 KiB the shift.
TEST_F(FixedBlockHotPathTest, BlocksAreFoundByShiftOrDivisionWithTheSameVerdicts) {
  for (size_t block : {size_t{768}, size_t{1024}, size_t{3840}, 64 * KiB}) {
    gmr_resource *r = Make(block, 8, 1);
    std::vector<void *> blocks;
    std::set<uintptr_t> seen;
    for (int i = 0; i < 20; ++i) {  // three chunks
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, block, 0, nullptr, &p)) << block;
      EXPECT_TRUE(seen.insert(reinterpret_cast<uintptr_t>(p)).second) << block;
      blocks.push_back(p);
    }
    ExpectInvariants(r);
    // Inside a block but not at its start: no block of ours starts there.
    char *inside = static_cast<char *>(blocks[3]) + 256;
    EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, inside, 256, 0, nullptr))
        << block;
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, blocks[3], 256, 0, nullptr))
        << block;
    for (void *p : blocks) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, block, 0, nullptr));
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, blocks[0], block, 0, nullptr));
    ExpectInvariants(r);
    EXPECT_EQ(0u, Stats(r).in_use_block_count) << block;
    // The most recent free comes back first (a stack per stream).
    void *again = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, block, 0, nullptr, &again));
    EXPECT_EQ(blocks.back(), again) << block;
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, again, block, 0, nullptr));
  }
}

// A thread keeps the shard it found for a resource and stream; another
// resource on the same stream, or one made after one was destroyed (perhaps
// at the same address), must not get that answer.
TEST_F(FixedBlockHotPathTest, ThePerThreadShardAnswerIsPerResourceAndStream) {
  gmr_resource *one = Make(4 * KiB, 16, 4);
  gmr_resource *two = Make(4 * KiB, 16, 4);
  gmr_stream s = Stream();
  for (int i = 0; i < 20; ++i) {
    gmr_resource *r = i % 2 == 0 ? one : two;
    gmr_stream st = i % 3 == 0 ? s : nullptr;
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4 * KiB, 0, st, &p));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4 * KiB, 0, st));
  }
  ExpectInvariants(one);
  ExpectInvariants(two);
  for (int round = 0; round < 4; ++round) {
    gmr_resource *r = Make(4 * KiB, 16, 4, false);
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4 * KiB, 0, s, &p));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4 * KiB, 0, s));
    ExpectInvariants(r);
    ASSERT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

// Threads on streams of their own and on the default stream hand blocks to
// each other; a block freed by another thread goes back to its own shard.
TEST_F(FixedBlockHotPathTest, BlocksFreedByOtherThreadsGoBackToTheirShards) {
  gmr_resource *r = Make(4 * KiB, 32, 4);
  constexpr int kThreads = 6;
  std::vector<gmr_stream> streams;
  for (int t = 0; t < kThreads; ++t) streams.push_back(t < 4 ? Stream() : nullptr);
  std::mutex mu;
  std::vector<void *> shared;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 7u);
      gmr_stream st = streams[t];
      std::vector<void *> live;
      for (int i = 0; i < 2000; ++i) {
        void *p = nullptr;
        if (gmr_resource_allocate(r, 4 * KiB, 0, st, &p) != GMR_OK) {
          failures++;
          continue;
        }
        live.push_back(p);
        if (live.size() > 12 || rng() % 3 == 0) {
          size_t k = rng() % live.size();
          void *q = live[k];
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
          if (rng() % 6 == 0) {
            std::lock_guard<std::mutex> lock(mu);
            shared.push_back(q);
            continue;
          }
          if (gmr_resource_deallocate(r, q, 4 * KiB, 0, st) != GMR_OK) failures++;
        }
        void *other = nullptr;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!shared.empty() && rng() % 4 == 0) {
            other = shared.back();
            shared.pop_back();
          }
        }
        if (other != nullptr && gmr_resource_deallocate(r, other, 4 * KiB, 0, st) != GMR_OK) {
          failures++;
        }
      }
      for (void *q : live) {
        if (gmr_resource_deallocate(r, q, 4 * KiB, 0, st) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  for (void *q : shared) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 4 * KiB, 0, nullptr));
  EXPECT_EQ(0, failures.load());
  gmr_fixed_block_resource_stats s = Stats(r);
  EXPECT_EQ(0u, s.in_use_block_count);
  EXPECT_EQ(s.block_count, s.free_block_count);
  ExpectInvariants(r);
}

}  // namespace
