// PyTorch's private memory pools in direct mode (integrations/torch/
// graph_pools.cc), driven as torch.cuda.graph and CUDA graph trees drive the
// hooks, on the simulation, over every kind of stack gmr.torch accepts: the
// contract of c10/cuda/CUDACachingAllocator.cpp's private pools (a pool's
// memory serves only that pool until its last release, frees in a capture go
// back to the pool, shared pools, release at the next safe point), frees on
// forked streams, frees of ordinary blocks during a capture, the thread
// filter of graph trees' warm-up, checkpoint restore at exact addresses,
// the out-of-memory retry, a stack that cannot serve a capture, the device
// statistics, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmr/gmr.h"
#include "gmr/sim/streams.h"
#include "integrations/torch/gmr_torch.h"
#include "tests/support/torch_shim_fixture.h"

namespace {

using gmr_test::contains;
using gmr_test::graph_pool_info;
using gmr_test::torch_counters;
using gmr_test::torch_last_error;

constexpr size_t kMiB = size_t{1} << 20;

struct Range {
  uintptr_t begin, end;
  bool overlaps(const Range &o) const { return begin < o.end && o.begin < end; }
};

Range range(void *p, size_t bytes) {
  return Range{reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes};
}

// torch.cuda.graph's filter: the stream captures (PyTorch also compares the
// capture id; one capture at a time here).
std::function<bool(gmr_stream)> capturing_on(gmr_stream s) {
  return [s](gmr_stream x) {
    bool capturing = false;
    return x == s && gmr_stream_get_capture_info(x, &capturing, nullptr) == GMR_OK && capturing;
  };
}

std::vector<std::pair<uintptr_t, size_t>> pool_blocks(int device, gmr_torch_mempool_id id) {
  size_t n = 0;
  EXPECT_EQ(GMR_OK, gmr_torch_get_pool_blocks(device, id.first, id.second, nullptr, nullptr,
                                              nullptr, 0, &n));
  std::vector<uintptr_t> ptrs(n), streams(n);
  std::vector<size_t> sizes(n);
  EXPECT_EQ(GMR_OK, gmr_torch_get_pool_blocks(device, id.first, id.second, ptrs.data(),
                                              sizes.data(), streams.data(), n, &n));
  std::vector<std::pair<uintptr_t, size_t>> out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(ptrs[i], sizes[i]);
  return out;
}

gmr_torch_device_stats device_stats_init() {
  gmr_torch_device_stats s{};
  s.size = sizeof s;
  s.version = GMR_TORCH_DEVICE_STATS_VERSION;
  return s;
}

class GraphPools : public gmr_test::TorchShimTest,
                   public ::testing::WithParamInterface<const char *> {
 protected:
  void SetUp() override {
    TorchShimTest::SetUp();
    use_spec(GetParam());
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s_));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&other_));
    // The device's stack is made at its first request, before any capture
    // (as in a program, whose model is on the GPU before it captures).
    gmr_torch_free(gmr_torch_alloc(4096, 0, s_), 4096, 0, s_);
  }
  void TearDown() override {
    // empty_cache gives the arena's chunks back on the streams they were
    // taken on: before those streams go (PyTorch's streams never do).
    gmr_torch_reset();
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s_));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(other_));
    for (gmr_graph g : graphs_) EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
    TorchShimTest::TearDown();
  }
  // One torch.cuda.graph capture into `pool` on s_, running `body`.
  template <typename Body>
  void capture(gmr_torch_mempool_id pool, Body body) {
    gmr_torch_begin_allocate_to_pool(0, pool, capturing_on(s_));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s_));
    body();
    gmr_graph g = nullptr;
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s_, &g)) << "the capture was broken";
    graphs_.push_back(g);
    gmr_torch_end_allocate_to_pool(0, pool);
  }
  gmr_stream s_ = nullptr;
  gmr_stream other_ = nullptr;
  std::vector<gmr_graph> graphs_;
};

// Stacks gmr.torch documents for captures, plus the plain ones.
INSTANTIATE_TEST_SUITE_P(Stacks, GraphPools,
                         ::testing::Values("vmm", "vmm_pages", "pool > cuda(kind=device)",
                                           "cuda(kind=device)",
                                           "tracking > limiting(limit=512MiB) > pool > "
                                           "cuda(kind=device)"));

TEST_P(GraphPools, ACapturesMemoryServesOnlyItsPoolUntilReleased) {
  const gmr_torch_mempool_id pool{1, 0};
  void *a = nullptr, *b = nullptr, *c = nullptr;
  capture(pool, [&] {
    a = gmr_torch_alloc(3 * kMiB, 0, s_);
    b = gmr_torch_alloc(kMiB, 0, s_);
    gmr_torch_free(b, kMiB, 0, s_);  // back to the pool: reused in the capture
    c = gmr_torch_alloc(kMiB, 0, s_);
  });
  EXPECT_EQ(b, c) << "a block freed in the capture serves the capture's next request";
  EXPECT_EQ(3u, torch_counters().capture_allocation_count >= 3 ? 3u : 0u);
  auto held = pool_blocks(0, pool);
  EXPECT_EQ(2u, held.size());
  // One memory (the capture's one stream): memory_snapshot's one segment.
  uintptr_t seg_stream = 0;
  size_t seg_bytes = 0, seg_count = 0;
  ASSERT_EQ(GMR_OK, gmr_torch_get_pool_segments(0, pool.first, pool.second, &seg_stream,
                                                &seg_bytes, 1, &seg_count));
  EXPECT_EQ(1u, seg_count);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(s_), seg_stream);
  EXPECT_GE(seg_bytes, 4 * kMiB);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_torch_get_pool_segments(0, pool.first, pool.second, nullptr, nullptr, 1,
                                        &seg_count));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_torch_get_pool_segments(0, 99, 99, nullptr, nullptr, 0, &seg_count));
  // The graph's blocks freed after the capture (its outputs dropped) stay the
  // pool's: eager requests on any stream never get them.
  gmr_torch_free(a, 3 * kMiB, 0, s_);
  gmr_torch_free(c, kMiB, 0, s_);
  std::vector<std::pair<void *, size_t>> eager;
  for (int i = 0; i < 16; ++i) {
    for (gmr_stream st : {s_, other_}) {
      size_t n = (i % 4 + 1) * kMiB / 2;
      void *p = gmr_torch_alloc(n, 0, st);
      eager.emplace_back(p, n);
      EXPECT_FALSE(range(p, n).overlaps(range(a, 3 * kMiB))) << "eager request " << i;
      EXPECT_FALSE(range(p, n).overlaps(range(c, kMiB))) << "eager request " << i;
    }
  }
  for (auto &[p, n] : eager) gmr_torch_free(p, n, 0, s_);
  // A second graph in its own pool never shares the first one's memory (they
  // may replay concurrently).
  const gmr_torch_mempool_id second{2, 0};
  void *d = nullptr;
  capture(second, [&] { d = gmr_torch_alloc(3 * kMiB, 0, s_); });
  EXPECT_FALSE(range(d, 3 * kMiB).overlaps(range(a, 3 * kMiB)));
  EXPECT_FALSE(range(d, 3 * kMiB).overlaps(range(c, kMiB)));
  gmr_torch_free(d, 3 * kMiB, 0, s_);
  // Released: the memory waits for a safe point, then goes back to the stack
  // and serves a new capture.
  gmr_torch_release_pool(0, pool);
  gmr_torch_release_pool(0, second);
  EXPECT_EQ(0u, graph_pool_info(0).pool_count);
  EXPECT_EQ(2u, graph_pool_info(0).pending_memory_count);
  EXPECT_GT(graph_pool_info(0).arena_held_bytes, 0u);
  gmr_torch_reset();  // torch.cuda.empty_cache()
  EXPECT_EQ(0u, graph_pool_info(0).pending_memory_count);
  EXPECT_EQ(0u, graph_pool_info(0).arena_held_bytes);
  const gmr_torch_mempool_id third{3, 0};
  void *e = nullptr;
  capture(third, [&] { e = gmr_torch_alloc(3 * kMiB, 0, s_); });
  EXPECT_NE(nullptr, e);
  gmr_torch_free(e, 3 * kMiB, 0, s_);
  gmr_torch_release_pool(0, third);
}

TEST_P(GraphPools, GraphsSharingAPoolReuseEachOthersFreedMemory) {
  // torch.cuda.graph(pool=g0.pool()): each capture begins the pool once and
  // each graph releases it once; the second capture reuses what the first
  // freed (PyTorch's graphs captured largest first into one pool).
  const gmr_torch_mempool_id pool{4, 0};
  void *x = nullptr, *out0 = nullptr;
  capture(pool, [&] {
    x = gmr_torch_alloc(2 * kMiB, 0, s_);
    out0 = gmr_torch_alloc(kMiB, 0, s_);
    gmr_torch_free(x, 2 * kMiB, 0, s_);
  });
  void *y = nullptr;
  capture(pool, [&] { y = gmr_torch_alloc(2 * kMiB, 0, s_); });
  EXPECT_EQ(x, y) << "the shared pool reuses the first graph's freed bytes";
  EXPECT_FALSE(range(y, 2 * kMiB).overlaps(range(out0, kMiB)))
      << "never a block the first graph still holds";
  gmr_torch_free(y, 2 * kMiB, 0, s_);
  gmr_torch_free(out0, kMiB, 0, s_);
  gmr_torch_release_pool(0, pool);
  EXPECT_EQ(1u, graph_pool_info(0).pool_count) << "one graph of the two still uses the pool";
  EXPECT_EQ(0u, graph_pool_info(0).pending_memory_count);
  gmr_torch_release_pool(0, pool);
  EXPECT_EQ(0u, graph_pool_info(0).pool_count);
  EXPECT_EQ(1u, graph_pool_info(0).pending_memory_count);
}

TEST_P(GraphPools, ABlockUsedOnAForkedStreamIsReusedOnlyAfterTheCapture) {
  const gmr_torch_mempool_id pool{5, 0};
  void *p = nullptr, *q = nullptr, *plain = nullptr, *again = nullptr;
  capture(pool, [&] {
    p = gmr_torch_alloc(kMiB, 0, s_);
    gmr_torch_record_stream(p, other_);  // a side stream of the capture reads it
    gmr_torch_free(p, kMiB, 0, s_);
    q = gmr_torch_alloc(kMiB, 0, s_);    // the side stream may not have joined yet
    plain = gmr_torch_alloc(kMiB, 0, s_);
    gmr_torch_free(plain, kMiB, 0, s_);  // no other stream: reused at once
    again = gmr_torch_alloc(kMiB, 0, s_);
  });
  EXPECT_FALSE(range(q, kMiB).overlaps(range(p, kMiB)))
      << "PyTorch defers such a free to the end of the capture";
  EXPECT_EQ(plain, again);
  // After the capture (every forked stream joined) the bytes serve the pool.
  void *later = nullptr;
  capture(pool, [&] { later = gmr_torch_alloc(kMiB, 0, s_); });
  EXPECT_EQ(p, later);
  for (void *b : {q, again, later}) gmr_torch_free(b, kMiB, 0, s_);
  gmr_torch_release_pool(0, pool);
  gmr_torch_release_pool(0, pool);
}

TEST_P(GraphPools, AnOrdinaryBlockFreedDuringACaptureIsFreedAfterIt) {
  // A tensor made before the capture and dropped inside it: the stack sees
  // the free only when the capture is over (its graph may still use it, and
  // a cudaFree or an event record would break or join the capture).
  // The history says so too: free_requested in the capture, free_completed
  // after it.
  auto completions = [&] {
    std::vector<gmr_torch_history_entry> all(64);
    size_t n = 0;
    EXPECT_EQ(GMR_OK, gmr_torch_get_history(all.data(), all.size(), &n, nullptr));
    all.resize(std::min(n, all.size()));
    return std::count_if(all.begin(), all.end(), [&](const gmr_torch_history_entry &e) {
      return e.action == GMR_TORCH_HISTORY_FREE_COMPLETED && e.size == kMiB;
    });
  };
  ASSERT_EQ(GMR_OK, gmr_torch_clear_history());
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(1, 64, nullptr));
  void *before = gmr_torch_alloc(kMiB, 0, s_);
  const gmr_torch_mempool_id pool{6, 0};
  capture(pool, [&] {
    void *inside = gmr_torch_alloc(4096, 0, s_);
    gmr_torch_free(before, kMiB, 0, s_);
    EXPECT_EQ(1u, graph_pool_info(0).deferred_free_count);
    EXPECT_EQ(0, completions());
    gmr_torch_free(inside, 4096, 0, s_);
  });
  EXPECT_EQ(0u, graph_pool_info(0).deferred_free_count);
  EXPECT_EQ(1, completions());
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(0, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_torch_clear_history());
  gmr_torch_release_pool(0, pool);
}

TEST_P(GraphPools, GraphTreesWarmUpRoutesTheThreadsRequestsOutsideCapture) {
  // _cuda_beginAllocateCurrentThreadToPool: a filter that accepts the
  // thread's requests on any stream, nothing capturing.
  const gmr_torch_mempool_id pool{7, 0};
  gmr_torch_begin_allocate_to_pool(0, pool, [](gmr_stream) { return true; });
  void *w = gmr_torch_alloc(kMiB, 0, s_);
  void *v = gmr_torch_alloc(2 * kMiB, 0, s_);
  gmr_torch_end_allocate_to_pool(0, pool);
  auto blocks = pool_blocks(0, pool);
  ASSERT_EQ(2u, blocks.size());
  std::vector<uintptr_t> expected = {reinterpret_cast<uintptr_t>(w),
                                     reinterpret_cast<uintptr_t>(v)};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(expected[0], blocks[0].first);
  EXPECT_EQ(expected[1], blocks[1].first);
  void *eager = gmr_torch_alloc(kMiB, 0, s_);  // not routed any more
  EXPECT_EQ(2u, pool_blocks(0, pool).size());
  gmr_torch_free(eager, kMiB, 0, s_);
  gmr_torch_free(w, kMiB, 0, s_);
  EXPECT_EQ(1u, pool_blocks(0, pool).size());
  gmr_torch_free(v, 2 * kMiB, 0, s_);
  EXPECT_EQ(0u, pool_blocks(0, pool).size());
  gmr_torch_release_pool(0, pool);
  size_t n = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_torch_get_pool_blocks(0, pool.first, pool.second, nullptr, nullptr, nullptr, 0,
                                      &n));
}

TEST_P(GraphPools, ACheckpointIsRestoredAtTheSameAddresses) {
  // CUDA graph trees: getCheckpointState after a recording, more blocks
  // later, then setCheckpointPoolState frees the later ones and allocates
  // the checkpoint's blocks again exactly where they were.
  const gmr_torch_mempool_id pool{8, 0};
  auto all = [](gmr_stream) { return true; };
  gmr_torch_begin_allocate_to_pool(0, pool, all);
  void *a = gmr_torch_alloc(kMiB, 0, s_);
  void *b = gmr_torch_alloc(3 * kMiB / 2, 0, s_);
  gmr_torch_end_allocate_to_pool(0, pool);
  auto checkpoint = pool_blocks(0, pool);
  ASSERT_EQ(2u, checkpoint.size());
  // After the checkpoint: b dies, a newer block takes its bytes.
  gmr_torch_free(b, 3 * kMiB / 2, 0, s_);
  gmr_torch_begin_allocate_to_pool(0, pool, all);
  void *later = gmr_torch_alloc(kMiB / 2, 0, s_);
  gmr_torch_end_allocate_to_pool(0, pool);
  // Restore: free what the checkpoint did not have, re-allocate what it had.
  gmr_torch_free(later, kMiB / 2, 0, s_);
  ASSERT_EQ(GMR_OK, gmr_torch_expect_address(0, pool.first, pool.second, b));
  void *b2 = gmr_torch_alloc(3 * kMiB / 2, 0, s_);
  EXPECT_EQ(b, b2);
  EXPECT_EQ(checkpoint, pool_blocks(0, pool));
  // An address the pool does not hold free is refused, changing nothing.
  ASSERT_EQ(GMR_OK, gmr_torch_expect_address(0, pool.first, pool.second, a));
  try {
    (void)gmr_torch_alloc(kMiB, 0, s_);
    ADD_FAILURE() << "a live block was handed out twice";
  } catch (const std::runtime_error &e) {
    EXPECT_TRUE(contains(e.what(), "does not hold those bytes free")) << e.what();
  }
  EXPECT_EQ(checkpoint, pool_blocks(0, pool));
  // The expectation was used up: the next request is an ordinary one.
  void *plain = gmr_torch_alloc(kMiB, 0, s_);
  EXPECT_NE(a, plain);
  gmr_torch_free(plain, kMiB, 0, s_);
  gmr_torch_free(a, kMiB, 0, s_);
  gmr_torch_free(b2, 3 * kMiB / 2, 0, s_);
  gmr_torch_release_pool(0, pool);
  gmr_torch_release_pool(0, pool);
}

// A stack whose bottom cannot allocate while a stream captures (cumem has no
// allocate_capturing slot).
class GraphPoolRefusals : public gmr_test::TorchShimTest {};

TEST_F(GraphPoolRefusals, AStackThatCannotServeACaptureSaysSoAndLeavesItValid) {
  use_spec("pool > cumem");  // cumem maps outside any capture-safe slot
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  const gmr_torch_mempool_id pool{9, 0};
  gmr_torch_begin_allocate_to_pool(0, pool, capturing_on(s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  bool threw = false;
  try {
    (void)gmr_torch_alloc(8 * kMiB, 0, s);
  } catch (const std::runtime_error &e) {
    threw = true;
    std::string m = e.what();
    EXPECT_TRUE(contains(m, "GMR_ERR_CAPTURE_UNSAFE")) << m;
    EXPECT_TRUE(contains(m, "stack: pool > cumem")) << m;
    EXPECT_TRUE(contains(m, "gmr.torch.use(\"vmm\")")) << m;
  }
  EXPECT_TRUE(threw);
  gmr_graph g = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g)) << "the capture was broken";
  gmr_torch_end_allocate_to_pool(0, pool);
  gmr_torch_release_pool(0, pool);
  // The process goes on: eager work and the next capture (warm stack) run.
  void *p = gmr_torch_alloc(8 * kMiB, 0, s);
  gmr_torch_free(p, 8 * kMiB, 0, s);
  gmr_torch_reset();
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(GraphPoolRefusals, AStackWithAGraphArenaOfItsOwnIsRefusedForCaptures) {
  use_spec("graph_arena(uncaptured=forward, policy=ordered_reuse) > pool > cuda(kind=device)");
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  gmr_torch_free(gmr_torch_alloc(4096, 0, s), 4096, 0, s);
  const gmr_torch_mempool_id pool{13, 0};
  gmr_torch_begin_allocate_to_pool(0, pool, capturing_on(s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  try {
    (void)gmr_torch_alloc(kMiB, 0, s);
    ADD_FAILURE() << "the capture was served";
  } catch (const std::runtime_error &e) {
    EXPECT_TRUE(contains(e.what(), "remove graph_arena(...) from the spec")) << e.what();
  }
  gmr_graph g = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g)) << "the capture was broken";
  gmr_torch_end_allocate_to_pool(0, pool);
  gmr_torch_release_pool(0, pool);
  void *p = gmr_torch_alloc(kMiB, 0, s);  // eager work goes on
  gmr_torch_free(p, kMiB, 0, s);
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  gmr_torch_reset();
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(GraphPoolRefusals, OutOfMemoryReleasesReleasedPoolsAndRetries) {
  use_spec("cuda(kind=device)");
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  const gmr_torch_mempool_id pool{10, 0};
  gmr_torch_begin_allocate_to_pool(0, pool, capturing_on(s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *big = gmr_torch_alloc(kDeviceBytes / 2, 0, s);
  gmr_torch_free(big, kDeviceBytes / 2, 0, s);
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  gmr_torch_end_allocate_to_pool(0, pool);
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  gmr_torch_release_pool(0, pool);  // graph deleted: its pool waits for a safe point
  ASSERT_EQ(1u, graph_pool_info(0).pending_memory_count);
  gmr_torch_device_stats before = device_stats_init();
  ASSERT_EQ(GMR_OK, gmr_torch_get_device_stats(0, &before));
  void *p = gmr_torch_alloc(kDeviceBytes * 3 / 4, 0, s);  // fits only without the pool
  EXPECT_NE(nullptr, p);
  gmr_torch_device_stats after = device_stats_init();
  ASSERT_EQ(GMR_OK, gmr_torch_get_device_stats(0, &after));
  EXPECT_EQ(before.retry_count + 1, after.retry_count);
  EXPECT_EQ(0u, graph_pool_info(0).pending_memory_count);
  gmr_torch_free(p, kDeviceBytes * 3 / 4, 0, s);
  gmr_torch_reset();
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(GraphPoolRefusals, DeviceStatsFollowAllocationsAndTheirResets) {
  gmr_torch_device_stats st = device_stats_init();
  ASSERT_EQ(GMR_OK, gmr_torch_reset_peak_stats(1));
  ASSERT_EQ(GMR_OK, gmr_torch_reset_accumulated_stats(1));
  void *a = gmr_torch_alloc(3000, 1, nullptr);
  void *b = gmr_torch_alloc(5000, 1, nullptr);
  gmr_torch_free(a, 3000, 1, nullptr);
  ASSERT_EQ(GMR_OK, gmr_torch_get_device_stats(1, &st));
  EXPECT_EQ(1u, st.live_count);
  EXPECT_EQ(5000u, st.live_bytes);
  EXPECT_EQ(8000u, st.peak_live_bytes);
  EXPECT_EQ(2u, st.peak_live_count);
  EXPECT_EQ(2u, st.allocation_count);
  EXPECT_EQ(1u, st.free_count);
  EXPECT_EQ(8000u, st.allocated_bytes);
  EXPECT_EQ(3000u, st.freed_bytes);
  ASSERT_EQ(GMR_OK, gmr_torch_reset_peak_stats(1));
  ASSERT_EQ(GMR_OK, gmr_torch_get_device_stats(1, &st));
  EXPECT_EQ(5000u, st.peak_live_bytes);
  ASSERT_EQ(GMR_OK, gmr_torch_reset_accumulated_stats(1));
  ASSERT_EQ(GMR_OK, gmr_torch_get_device_stats(1, &st));
  EXPECT_EQ(0u, st.allocation_count);
  EXPECT_EQ(5000u, st.live_bytes) << "current figures are not accumulated ones";
  gmr_torch_free(b, 5000, 1, nullptr);
}

TEST_F(GraphPoolRefusals, BadInputIsRefusedAndChangesNothing) {
  gmr_torch_device_stats st = device_stats_init();
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_get_device_stats(64, &st));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_get_device_stats(-1, &st));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_get_device_stats(0, nullptr));
  gmr_torch_device_stats small = device_stats_init();
  small.size = 8;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_get_device_stats(0, &small));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_reset_peak_stats(99));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_reset_accumulated_stats(-3));
  gmr_torch_graph_pool_info info;
  info.size = sizeof info;
  info.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_get_graph_pool_info(0, &info));
  size_t n = 7;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_torch_get_pool_blocks(0, 1, 1, nullptr, nullptr, nullptr, 4, &n));
  EXPECT_EQ(0u, n);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_torch_get_pool_blocks(0, 1, 1, nullptr, nullptr, nullptr, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_torch_get_pool_blocks(0, 1, 1, nullptr, nullptr, nullptr, 0, &n));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_expect_address(0, 1, 1, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_expect_address(64, 1, 1, &n));
  // This build has no PyTorch headers: the storage calls say so.
  EXPECT_EQ(-2, gmr_torch_storage_adopt(0));
  EXPECT_EQ(-2, gmr_torch_storage_disown(0));
  // Hooks: logged, nothing changes.
  const gmr_torch_mempool_id pool{11, 1};
  gmr_torch_end_allocate_to_pool(0, pool);
  EXPECT_TRUE(contains(torch_last_error(), "no allocation to this pool was begun"))
      << torch_last_error();
  gmr_torch_begin_allocate_to_pool(99, pool, [](gmr_stream) { return true; });
  EXPECT_TRUE(contains(torch_last_error(), "device 99 is out of range")) << torch_last_error();
  gmr_torch_release_pool(0, pool);  // never begun: nothing to release
  EXPECT_EQ(0u, graph_pool_info(0).pool_count);
  // An expected address for one device met by a request for another.
  void *p = gmr_torch_alloc(4096, 0, nullptr);
  ASSERT_EQ(GMR_OK, gmr_torch_expect_address(1, pool.first, pool.second, p));
  EXPECT_THROW((void)gmr_torch_alloc(4096, 0, nullptr), std::runtime_error);
  gmr_torch_free(p, 4096, 0, nullptr);
}

// Graph trees' warm-up routes one thread's requests (a thread filter) while
// other threads allocate eagerly: neither sees the other's memory.
TEST_F(GraphPoolRefusals, ThreadsAllocateEagerlyWhileAnotherFillsAPool) {
  use_spec("vmm");
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  std::vector<gmr_stream> streams(4);
  for (gmr_stream &x : streams) ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&x));
  const gmr_torch_mempool_id pool{12, 0};
  std::vector<Range> captured;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  std::vector<std::vector<Range>> eager(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      gmr_stream mine = streams[t];
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < 200; ++i) {
        size_t n = 4096 * (1 + (i + t) % 7);
        void *p = gmr_torch_alloc(n, 0, mine);
        eager[t].push_back(range(p, n));
        if (i % 3 == 0) {
          gmr_torch_free(p, n, 0, mine);
          eager[t].pop_back();
        }
      }
    });
  }
  std::thread::id me = std::this_thread::get_id();
  gmr_torch_begin_allocate_to_pool(0, pool,
                                   [me](gmr_stream) { return std::this_thread::get_id() == me; });
  go.store(true);
  std::vector<std::pair<void *, size_t>> mine;
  for (int i = 0; i < 100; ++i) {
    size_t n = 8192 * (1 + i % 5);
    void *p = gmr_torch_alloc(n, 0, s);
    mine.emplace_back(p, n);
    captured.push_back(range(p, n));
  }
  for (auto &t : threads) t.join();
  gmr_torch_end_allocate_to_pool(0, pool);
  EXPECT_EQ(100u, pool_blocks(0, pool).size());
  for (const auto &list : eager) {
    for (const Range &r : list) {
      for (const Range &c : captured) EXPECT_FALSE(r.overlaps(c));
    }
  }
  for (auto &[p, n] : mine) gmr_torch_free(p, n, 0, s);
  // The eager blocks were checked while both were live.
  for (int t = 0; t < 4; ++t) {
    for (const Range &r : eager[t]) {
      gmr_torch_free(reinterpret_cast<void *>(r.begin), r.end - r.begin, 0, streams[t]);
    }
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_synchronize(streams[t]));
  }
  gmr_torch_release_pool(0, pool);
  gmr_torch_reset();
  for (gmr_stream x : streams) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(x));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

}  // namespace
