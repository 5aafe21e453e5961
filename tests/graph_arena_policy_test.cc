// graph_arena_resource on the host simulation: both capture policies
// (reuse, repeated sessions, overlap, rewind in capture, shared memories) and
// sessions and uncaptured use from several threads.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/capture_leaf.h"
#include "tests/support/graph_arena_fixture.h"
#include "tests/support/mock_resource.h"

namespace {

using gmr_test::addr;
using gmr_test::GraphArena;
using gmr_test::GraphArenaPolicy;
using gmr_test::KiB;
using gmr_test::MiB;

// ---- policies -----------------------------------------------------------------------

TEST_P(GraphArenaPolicy, AFreeDuringCaptureIsReusedOnlyUnderOrderedReuse) {
  gmr_graph_arena_resource *a = Make(Config(MiB, 0, GetParam()));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream(), other = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *x = Alloc(r, 2 * KiB, s);
  void *y = Alloc(r, 2 * KiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 2 * KiB, 0, s));
  void *z = Alloc(r, KiB, s);  // fits in x's bytes
  if (reuse()) {
    EXPECT_EQ(x, z);
  } else {
    EXPECT_EQ(addr(y) + 2 * KiB, addr(z));
  }
  // Freed on another stream: never reused in the capture (no ordering known).
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, y, 2 * KiB, 0, other));
  void *w = Alloc(r, 2 * KiB, s);
  EXPECT_NE(y, w);
  EXPECT_GT(addr(w), addr(y));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, mem, &info));
  EXPECT_EQ(reuse() ? 6 * KiB : 7 * KiB, info.held_bytes);
  EXPECT_EQ(3 * KiB, info.live_bytes);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, z, KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, w, 2 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(GraphArenaPolicy, RepeatedSessionsGetTheSameAddresses) {
  gmr_graph_arena_resource *a = Make(Config(4 * MiB, 0, GetParam()));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  std::mt19937 rng(11);
  std::vector<size_t> sizes;
  for (int i = 0; i < 64; ++i) sizes.push_back(1 + rng() % (16 * KiB));
  std::vector<void *> first;
  for (int round = 0; round < 4; ++round) {
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
    std::vector<void *> got;
    for (size_t i = 0; i < sizes.size(); ++i) {
      got.push_back(Alloc(r, sizes[i], s));
      if (i % 4 == 3) {  // free some in the capture: policies differ here
        ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, got[i - 2], sizes[i - 2], 0, s));
      }
    }
    gmr_graph graph = nullptr;
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph));
    gmr_graph_memory *mem = nullptr;
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
    ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (i % 4 != 1) {
        ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, got[i], sizes[i], 0, s));
      }
    }
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
    if (round == 0) {
      first = got;
    } else {
      EXPECT_EQ(first, got) << "round " << round;
    }
  }
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(GraphArenaPolicy, NoTwoLiveBlocksOfACaptureOverlap) {
  gmr_graph_arena_resource *a = Make(Config(16 * MiB, 0, GetParam()));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  std::mt19937 rng(3);
  struct Live {
    uintptr_t begin, end;
    size_t bytes;
  };
  std::vector<Live> live;
  std::vector<std::pair<uintptr_t, uintptr_t>> ever;  // every block of the capture
  for (int i = 0; i < 2000; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      size_t k = rng() % live.size();
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, reinterpret_cast<void *>(live[k].begin),
                                                live[k].bytes, 0, s));
      live.erase(live.begin() + static_cast<long>(k));
      continue;
    }
    size_t bytes = 1 + rng() % (8 * KiB);
    void *p = Alloc(r, bytes, s);
    std::memset(p, i & 0xff, bytes);
    Live l{addr(p), addr(p) + bytes, bytes};
    for (const Live &o : live) ASSERT_TRUE(l.end <= o.begin || o.end <= l.begin);
    if (!reuse()) {
      for (auto &[b, e] : ever) ASSERT_TRUE(l.end <= b || e <= l.begin) << "monotone never aliases";
    }
    live.push_back(l);
    ever.emplace_back(l.begin, l.end);
  }
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, mem, &info));
  size_t total = 0;
  for (auto &[b, e] : ever) total += (e - b + 255) / 256 * 256;
  if (reuse()) {
    EXPECT_LT(info.held_bytes, total / 2) << "reuse keeps the capture near its peak";
  } else {
    EXPECT_EQ(total, info.held_bytes);
  }
  for (const Live &l : live) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, reinterpret_cast<void *>(l.begin), l.bytes, 0, s));
  }
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(GraphArenaPolicy, RewindInCaptureFollowsThePolicy) {
  gmr_graph_arena_resource *a = Make(Config(MiB, 0, GetParam()));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *keep = Alloc(r, KiB, s);
  uint64_t mark = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, s, &mark));
  void *t0 = Alloc(r, KiB, s);
  void *t1 = Alloc(r, KiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, t1, KiB, 0, s));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, s, mark, &released));
  EXPECT_EQ(1u, released);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, t0, KiB, 0, s));
  void *next = Alloc(r, KiB, s);
  if (reuse()) {
    EXPECT_EQ(t0, next);
  } else {
    EXPECT_EQ(addr(t1) + KiB, addr(next)) << "monotone: rewound bytes stay with the memory";
  }
  // A mark of the uncaptured scope is not a mark of the session.
  uint64_t outside = 0;
  gmr_stream other = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, other, &outside));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_rewind(a, s, outside, nullptr));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_rewind(a, s, mark, nullptr))
      << "the session's marks end with it";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, keep, KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, next, KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(GraphArenaPolicy, GraphsShareOneMemory) {
  gmr_graph_arena_resource *a = Make(Config(MiB, 0, GetParam()));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream(), s2 = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *x = Alloc(r, 4 * KiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 4 * KiB, 0, s));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  // A second graph appends to the same memory.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, mem));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_begin_capture(a, s2, mem))
      << "one session at a time";
  void *y = Alloc(r, 4 * KiB, s);
  if (reuse()) {
    EXPECT_EQ(x, y) << "PyTorch-style pool sharing: replay in capture order";
  } else {
    EXPECT_NE(x, y) << "monotone sharing never aliases: any replay order is safe";
  }
  gmr_graph_memory *again = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &again));
  EXPECT_EQ(mem, again);
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, mem, &info));
  EXPECT_EQ(2u, info.reference_count);
  EXPECT_EQ(2u, info.session_count);
  EXPECT_EQ(reuse() ? 4 * KiB : 8 * KiB, info.held_bytes);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, y, 4 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(reuse() ? 4 * KiB : 8 * KiB, Stats(a).in_use_bytes) << "one reference left";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_begin_capture(a, s, mem))
      << "a released memory cannot be shared";
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

INSTANTIATE_TEST_SUITE_P(Policies, GraphArenaPolicy,
                         ::testing::Values(GMR_GRAPH_ARENA_MONOTONE, GMR_GRAPH_ARENA_ORDERED_REUSE),
                         [](const ::testing::TestParamInfo<gmr_graph_arena_policy> &info) {
                           return std::string(gmr_graph_arena_resource_policy_name(info.param));
                         });

// ---- threads ----------------------------------------------------------------------------------

TEST_P(GraphArenaPolicy, ConcurrentSessionsOnTheirOwnStreamsNeverOverlap) {
  gmr_graph_arena_resource *a = Make(Config(64 * MiB, 0, GetParam()));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  constexpr int kThreads = 4;
  constexpr int kRounds = 3;
  std::vector<gmr_stream> streams;
  for (int t = 0; t < kThreads; ++t) streams.push_back(NewStream());
  std::atomic<int> failures{0};
  std::vector<std::vector<std::pair<uintptr_t, uintptr_t>>> held(kThreads * kRounds);
  auto worker = [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t));
    gmr_stream s = streams[t];
    for (int round = 0; round < kRounds; ++round) {
      bool explicit_session = (t + round) % 2 == 0;  // mix both kinds
      if (explicit_session && gmr_graph_arena_resource_begin_capture(a, s, nullptr) != GMR_OK)
        failures++;
      if (gmr_cuda_stream_begin_capture(s) != GMR_OK) failures++;
      std::vector<std::pair<void *, size_t>> live;
      for (int i = 0; i < 300; ++i) {
        size_t bytes = 1 + rng() % (16 * KiB);
        void *p = nullptr;
        if (gmr_resource_allocate(r, bytes, 0, s, &p) != GMR_OK) {
          failures++;
          continue;
        }
        std::memset(p, t, bytes);
        live.emplace_back(p, bytes);
        held[t * kRounds + round].emplace_back(addr(p), addr(p) + bytes);
        if (i % 5 == 4) {
          auto [q, n] = live[live.size() / 2];
          if (gmr_resource_deallocate(r, q, n, 0, s) != GMR_OK) failures++;
          live.erase(live.begin() + static_cast<long>(live.size() / 2));
        }
      }
      // Every live byte still holds this thread's value.
      for (auto &[p, n] : live) {
        const unsigned char *c = static_cast<const unsigned char *>(p);
        for (size_t b = 0; b < n; ++b) {
          if (c[b] != static_cast<unsigned char>(t)) {
            failures++;
            break;
          }
        }
      }
      gmr_graph g = nullptr;
      if (gmr_cuda_stream_end_capture(s, &g) != GMR_OK) failures++;
      gmr_graph_memory *mem = nullptr;
      if (gmr_graph_arena_resource_end_capture(a, s, &mem) != GMR_OK) failures++;
      for (auto &[p, n] : live) {
        if (gmr_resource_deallocate(r, p, n, 0, s) != GMR_OK) failures++;
      }
      // Keep the memory of odd rounds until the end: still no overlap.
      if (round % 2 == 0) {
        if (gmr_cuda_graph_destroy(g) != GMR_OK) failures++;
        if (gmr_graph_arena_resource_release_graph_memory(a, mem) != GMR_OK) failures++;
        held[t * kRounds + round].clear();
      } else {
        if (gmr_cuda_graph_destroy(g) != GMR_OK) failures++;
        if (gmr_graph_arena_resource_release_graph_memory(a, mem) != GMR_OK) failures++;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(0u, st.open_session_count);
  EXPECT_EQ(0u, st.graph_memory_count);
  EXPECT_EQ(0u, st.live_count);
  EXPECT_EQ(0u, st.in_use_bytes);
  EXPECT_EQ(0u, st.upstream_call_during_capture_count);
  EXPECT_EQ(static_cast<uint64_t>(kThreads * kRounds * 300), st.capture_allocation_count);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, ConcurrentUncapturedUseFromThreads) {
  gmr_graph_arena_resource *a = Make(Config(0, MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  constexpr int kThreads = 4;
  std::atomic<int> failures{0};
  std::vector<std::vector<std::pair<uintptr_t, uintptr_t>>> blocks(kThreads);
  auto worker = [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(100 + t));
    for (int i = 0; i < 500; ++i) {
      size_t bytes = 1 + rng() % (32 * KiB);
      void *p = nullptr;
      uint64_t id = 0;
      if (gmr_graph_arena_resource_allocate(a, bytes, 0, nullptr, &p, &id, nullptr) != GMR_OK) {
        failures++;
        continue;
      }
      std::memset(p, t, bytes);
      blocks[t].emplace_back(addr(p), addr(p) + bytes);
      gmr_graph_arena_block_info bi;
      if (gmr_graph_arena_resource_get_block(a, id, &bi) != GMR_OK || bi.ptr != p) failures++;
      if (i % 2 == 0 && gmr_graph_arena_resource_return_block(a, id, nullptr) != GMR_OK) failures++;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  std::vector<std::pair<uintptr_t, uintptr_t>> all;
  for (auto &v : blocks) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); ++i) ASSERT_LE(all[i - 1].second, all[i].first);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, &released));
  EXPECT_EQ(size_t{kThreads * 250}, released);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

}  // namespace
