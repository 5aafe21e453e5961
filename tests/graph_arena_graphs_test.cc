// graph_arena_resource on the host simulation: several graphs captured one
// after another into one graph memory under both policies (exact addresses,
// the LLM-server pattern), and the memory info the arena reports.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/graph_arena_fixture.h"
#include "tests/support/capture_leaf.h"
#include "tests/support/mock_resource.h"

namespace {

using gmr_test::addr;
using gmr_test::ArenaCapture;
using gmr_test::kGlobalMode;
using gmr_test::KiB;
using gmr_test::MiB;

// ---- many graphs, one graph memory (issue 11 section 2) -------------------------------

// One capture of the LLM-server pattern at batch size `batch`: two
// activations, one freed before a third is allocated, the output kept live.
struct Step {
  void *x = nullptr, *h = nullptr, *y = nullptr;
};

Step CaptureStep(gmr_resource *r, gmr_stream s, size_t batch) {
  Step t;
  EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, batch * 64 * KiB, 0, s, &t.x));
  EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, batch * 128 * KiB, 0, s, &t.h));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, t.x, batch * 64 * KiB, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, batch * 64 * KiB, 0, s, &t.y));  // the output
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, t.h, batch * 128 * KiB, 0, s));
  return t;
}

TEST_F(ArenaCapture, OrderedReuseLetsALaterCaptureReuseWhatAnEarlierOneFreed) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a =
      Make(Config(4 * MiB, 0, GMR_GRAPH_ARENA_ORDERED_REUSE), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  // The chunk's base: the first block of the first capture.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  Step g4 = CaptureStep(r, s, 4);  // x 256K, h 512K, y 256K
  gmr_graph_memory *pool = EndCapture(a, s);
  const uintptr_t base = addr(g4.x);
  EXPECT_EQ(base + 256 * KiB, addr(g4.h));
  EXPECT_EQ(base, addr(g4.y)) << "x's bytes, freed earlier in the capture";
  // Graph 2 (batch 2) appends to the same memory: everything it needs comes
  // from what graph 1 freed (h's 512 KiB), best fit, lowest address first.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, pool));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  Step g2 = CaptureStep(r, s, 2);  // x 128K, h 256K, y 128K
  gmr_graph_memory *same = EndCapture(a, s);
  EXPECT_EQ(pool, same);
  EXPECT_EQ(base + 256 * KiB, addr(g2.x));
  EXPECT_EQ(base + 384 * KiB, addr(g2.h));
  EXPECT_EQ(base + 256 * KiB, addr(g2.y));
  // Graph 1's output is freed between captures (its consumer is done): graph 3
  // (batch 1) gets it back, PyTorch's rule for a shared private pool.
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, g4.y, 256 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, pool));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  Step g1 = CaptureStep(r, s, 1);  // x 64K, h 128K, y 64K
  EndCapture(a, s);
  // Free ranges now: [0,256K) from y of graph 1 and [384K,768K) from graph 2.
  EXPECT_EQ(base, addr(g1.x)) << "best fit: the smaller range";
  EXPECT_EQ(base + 64 * KiB, addr(g1.h));
  EXPECT_EQ(base, addr(g1.y));
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, pool, &info));
  EXPECT_EQ(768 * KiB, info.held_bytes) << "three graphs in the first one's bytes";
  EXPECT_EQ(3u, info.session_count);
  EXPECT_EQ(3u, info.reference_count);
  EXPECT_EQ(2u, info.live_count);  // the outputs of graphs 2 and 3
  EXPECT_EQ(768 * KiB, Stats(a).peak_in_use_bytes);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, g2.y, 128 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, g1.y, 64 * KiB, 0, s));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, pool));
  }
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, MonotoneNeverOverlapsAnythingOfOneGraphMemory) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(4 * MiB, 0, GMR_GRAPH_ARENA_MONOTONE), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  gmr_graph_memory *pool = nullptr;
  std::vector<std::pair<uintptr_t, size_t>> blocks;
  uintptr_t base = 0;
  for (size_t batch : {4, 2, 1}) {
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, pool));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
    Step t = CaptureStep(r, s, batch);
    gmr_graph_memory *m = EndCapture(a, s);
    if (pool == nullptr) {
      pool = m;
      base = addr(t.x);
    }
    // Every block right after the one before: a bump through the memory.
    EXPECT_EQ(addr(t.x) + batch * 64 * KiB, addr(t.h));
    EXPECT_EQ(addr(t.h) + batch * 128 * KiB, addr(t.y));
    blocks.push_back({addr(t.x), batch * 64 * KiB});
    blocks.push_back({addr(t.h), batch * 128 * KiB});
    blocks.push_back({addr(t.y), batch * 64 * KiB});
    if (batch < 4) {
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, t.y, batch * 64 * KiB, 0, s));
    }
  }
  EXPECT_EQ(base + 1024 * KiB, blocks[3].first) << "graph 2 starts after graph 1";
  EXPECT_EQ(base + 1536 * KiB, blocks[6].first) << "graph 3 after graph 2, its output freed";
  std::sort(blocks.begin(), blocks.end());
  for (size_t i = 1; i < blocks.size(); ++i) {
    EXPECT_LE(blocks[i - 1].first + blocks[i - 1].second, blocks[i].first) << "overlap at " << i;
  }
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, pool, &info));
  EXPECT_EQ(1792 * KiB, info.held_bytes) << "the sum of everything allocated";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, reinterpret_cast<void *>(base + 768 * KiB),
                                            256 * KiB, 0, s));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, pool));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, LlmServerPatternGrowsOnceUnderOrderedReuse) {
  // One graph per batch size, largest first, one memory, nothing reserved:
  // the first capture grows the arena, the smaller ones fit in what it freed.
  for (auto policy : {GMR_GRAPH_ARENA_ORDERED_REUSE, GMR_GRAPH_ARENA_MONOTONE}) {
    SCOPED_TRACE(gmr_graph_arena_resource_policy_name(policy));
    gmr_capture_leaf *leaf = Leaf(true);
    gmr_graph_arena_resource *a = Make(Config(0, 4 * MiB, policy), R(leaf));
    gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
    gmr_stream s = NewStream();
    gmr_graph_memory *pool = nullptr;
    std::vector<std::pair<void *, size_t>> outputs;
    size_t total = 0;
    for (size_t batch : {16, 8, 4, 2, 1}) {
      ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, pool));
      ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
      Step t = CaptureStep(r, s, batch);
      gmr_graph_memory *m = EndCapture(a, s);
      if (pool == nullptr) pool = m;
      outputs.push_back({t.y, batch * 64 * KiB});
      total += batch * 256 * KiB;
      EXPECT_EQ(kGlobalMode, gmr_cuda_sim_get_thread_capture_mode());
    }
    gmr_graph_arena_resource_stats st = Stats(a);
    EXPECT_EQ(0u, st.capture_refusal_count);
    if (policy == GMR_GRAPH_ARENA_ORDERED_REUSE) {
      EXPECT_EQ(1u, st.capture_growth_count) << "only the largest graph grew it";
      EXPECT_EQ(4 * MiB, st.held_bytes) << "one chunk of graph 1's 4 MiB";
    } else {
      EXPECT_EQ(total, st.in_use_bytes) << "monotone keeps the sum";
      EXPECT_LE(total, st.held_bytes);
    }
    for (auto &[p, n] : outputs) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, n, 0, s));
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, pool));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

// ---- memory info (issue 14 section 3) ----------------------------------------------------

TEST_F(ArenaCapture, MemoryInfoIsExact) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(MiB, 0), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &info));
  EXPECT_EQ(MiB, info.held_bytes);
  EXPECT_EQ(0u, info.live_bytes);
  EXPECT_EQ(MiB, info.free_bytes);
  EXPECT_EQ(MiB, info.largest_free_block_bytes);
  EXPECT_EQ(1u, info.free_block_count);
  // A graph memory in the middle, released with one block still live: the
  // free space is in two pieces around it.
  void *first = Alloc(r, 100, s);  // 256 B, uncaptured
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *c0 = Alloc(r, 64 * KiB, s);
  void *c1 = Alloc(r, 1000, s);  // 1 KiB carved
  gmr_graph_memory *m = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
  void *last = Alloc(r, 300 * KiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, c0, 64 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &info));
  const size_t live = 256 + KiB + 300 * KiB;
  EXPECT_EQ(MiB, info.held_bytes);
  EXPECT_EQ(live, info.live_bytes);
  EXPECT_EQ(MiB - live, info.free_bytes);
  EXPECT_EQ(MiB - 256 - 65 * KiB - 300 * KiB, info.largest_free_block_bytes);
  EXPECT_EQ(2u, info.free_block_count) << "c0's 64 KiB and the tail";
  // An older, shorter struct gets what it has room for.
  gmr_memory_info small = GMR_MEMORY_INFO_INIT;
  small.size = offsetof(gmr_memory_info, free_block_count) + sizeof(size_t);
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &small));
  EXPECT_EQ(2u, small.free_block_count);
  for (auto [p, n] : {std::pair{first, size_t{100}}, {c1, size_t{1000}}, {last, 300 * KiB}}) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, n, 0, s));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, ForwardingTheStacksMemoryInfoIsTheUpstreams) {
  // graph_arena(forward) over graph_arena(arena): the top answers with the
  // lower arena's figures, as for the footprint; over an upstream that cannot
  // answer, with its own.
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *lower = Make(Config(2 * MiB, 0), R(leaf));
  gmr_graph_arena_resource_config c = Config(MiB, 0);
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *top = Make(c, gmr_graph_arena_resource_as_resource(lower));
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(gmr_graph_arena_resource_as_resource(top), &info));
  EXPECT_EQ(2 * MiB, info.held_bytes);
  EXPECT_EQ(MiB, info.live_bytes) << "the top's chunk is a block of the lower arena";
  EXPECT_EQ(MiB, info.free_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(top)));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(lower, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(lower)));

  gmr_graph_arena_resource *alone = Make(c, R(leaf));
  ASSERT_EQ(GMR_OK,
            gmr_resource_get_memory_info(gmr_graph_arena_resource_as_resource(alone), &info));
  EXPECT_EQ(MiB, info.held_bytes);
  EXPECT_EQ(MiB, info.free_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(alone)));
}

TEST_F(ArenaCapture, AnArenaFailureCarriesItsFreeFigures) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(MiB, 0), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  void *p = Alloc(r, 700 * KiB, nullptr);
  void *q = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 500 * KiB, 0, nullptr, &q, &f));
  EXPECT_EQ(r, f.where);
  EXPECT_TRUE(f.free_info_known);
  EXPECT_EQ(324 * KiB, f.free_bytes);
  EXPECT_EQ(324 * KiB, f.largest_free_block_bytes);
  // The upstream's own failure names the upstream, which keeps no free figures.
  gmr_graph_arena_resource *g = Make(Config(0, MiB), R(leaf));
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorMemoryAllocation));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(gmr_graph_arena_resource_as_resource(g),
                                                            10, 0, nullptr, &q, &f));
  EXPECT_EQ(R(leaf), f.where);
  EXPECT_FALSE(f.free_info_known);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(g)));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 700 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

}  // namespace
