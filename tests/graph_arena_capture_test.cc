// graph_arena_resource during capture, on the host simulation: growth through
// the upstream's allocate_capturing (and refusal when nothing below can),
// growth failures and the capture mode restored on every path, several graphs
// captured into one graph memory under both policies (exact addresses),
// frees and releases around captures, capture detection that asks CUDA only
// when it can matter, and the memory info the arena reports.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "gmr/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "tests/support/capture_leaf.h"
#include "tests/support/mock_resource.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;
constexpr int kGlobalMode = 0;  // cudaStreamCaptureModeGlobal

uintptr_t addr(const void *p) { return reinterpret_cast<uintptr_t>(p); }

class ArenaCapture : public gmr_test::SimTest {
 protected:
  std::vector<gmr_stream> streams_;
  std::vector<gmr_capture_leaf *> leaves_;

  void TearDown() override {
    for (gmr_stream s : streams_) EXPECT_EQ(GMR_OK, gmr_stream_destroy(s));
    for (gmr_capture_leaf *l : leaves_) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_capture_leaf_as_resource(l)));
    }
    SimTest::TearDown();
  }

  gmr_stream NewStream() {
    gmr_stream s = nullptr;
    EXPECT_EQ(GMR_OK, gmr_stream_create(&s));
    streams_.push_back(s);
    return s;
  }

  // A cudaMalloc leaf that can (or cannot) allocate during capture.
  gmr_capture_leaf *Leaf(bool can_capture) {
    gmr_capture_leaf *l = gmr_capture_leaf_create(can_capture);
    EXPECT_NE(nullptr, l);
    leaves_.push_back(l);
    return l;
  }

  static gmr_resource *R(gmr_capture_leaf *l) { return gmr_capture_leaf_as_resource(l); }

  static gmr_graph_arena_resource_config Config(
      size_t initial, size_t chunk, gmr_graph_arena_policy policy = GMR_GRAPH_ARENA_MONOTONE) {
    gmr_graph_arena_resource_config c = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
    c.initial_capacity_bytes = initial;
    c.chunk_bytes = chunk;
    c.capture_policy = policy;
    return c;
  }

  static gmr_graph_arena_resource *Make(const gmr_graph_arena_resource_config &c,
                                        gmr_resource *up) {
    gmr_graph_arena_resource *a = nullptr;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_create(up, &c, &a));
    return a;
  }

  static gmr_graph_arena_stats Stats(gmr_graph_arena_resource *a) {
    gmr_graph_arena_stats st = GMR_GRAPH_ARENA_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_get_stats(a, &st));
    return st;
  }

  static void *Alloc(gmr_resource *r, size_t bytes, gmr_stream s) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_allocate(r, bytes, 0, s, &p)) << bytes;
    return p;
  }

  // End the real capture (it must be valid) and the arena's session.
  static gmr_graph_memory *EndCapture(gmr_graph_arena_resource *a, gmr_stream s) {
    gmr_graph g = nullptr;
    EXPECT_EQ(GMR_OK, gmr_stream_end_capture(s, &g)) << "the capture was invalidated";
    EXPECT_EQ(GMR_OK, gmr_graph_destroy(g));
    gmr_graph_memory *m = nullptr;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
    return m;
  }
};

// ---- growth during capture (issue 11 section 1) -------------------------------------

TEST_F(ArenaCapture, GrowsDuringCaptureWithNothingReservedThroughAllocateCapturing) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(0, MiB), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));  // global mode, the strictest
  void *p0 = Alloc(r, 300 * KiB, s);                // grows by one chunk
  EXPECT_EQ(kGlobalMode, gmr_cuda_sim_get_thread_capture_mode()) << "restored";
  void *p1 = Alloc(r, 600 * KiB, s);  // fits the chunk
  void *p2 = Alloc(r, 2 * MiB, s);    // larger than a chunk: a chunk of its size
  EXPECT_EQ(addr(p0) + 300 * KiB, addr(p1));
  EXPECT_EQ(kGlobalMode, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(0u, gmr_capture_leaf_allocate_calls(leaf)) << "never the plain slot in capture";
  EXPECT_EQ(2u, gmr_capture_leaf_capturing_calls(leaf));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_graph_arena_stats st = Stats(a);
  EXPECT_EQ(3 * MiB, st.held_bytes);
  EXPECT_EQ(2u, st.chunk_count);
  EXPECT_EQ(2u, st.capture_growth_count);
  EXPECT_EQ(2u, st.upstream_call_in_session_count);
  EXPECT_EQ(2u, st.upstream_call_during_capture_count);
  EXPECT_EQ(0u, st.capture_refusal_count);
  EXPECT_EQ(3u, st.capture_allocation_count);
  gmr_graph_memory *m = EndCapture(a, s);  // still valid: nothing broke it
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, m, &info));
  EXPECT_EQ(900 * KiB + 2 * MiB, info.held_bytes);
  for (auto [p, n] : {std::pair{p0, 300 * KiB}, {p1, 600 * KiB}, {p2, 2 * MiB}}) {
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, n, 0, s));
  }
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0u, gmr_capture_leaf_live_bytes(leaf)) << "every chunk went back";
}

TEST_F(ArenaCapture, AnUndeclaredCaptureGrowsTooWithAutomaticDetection) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(0, MiB), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *p = Alloc(r, 4 * KiB, s);
  EXPECT_EQ(1u, Stats(a).capture_allocation_count);
  EXPECT_EQ(1u, gmr_capture_leaf_capturing_calls(leaf));
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 4 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, ReservingInAdvanceStillMakesNoUpstreamCallInTheCapture) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(0, MiB), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(a, 3 * MiB));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *p0 = Alloc(r, 900 * KiB, s);
  void *p1 = Alloc(r, 2 * MiB, s);
  gmr_graph_memory *m = EndCapture(a, s);
  EXPECT_EQ(0u, gmr_capture_leaf_capturing_calls(leaf));
  EXPECT_EQ(0u, Stats(a).upstream_call_during_capture_count);
  EXPECT_EQ(0u, Stats(a).capture_growth_count);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p0, 900 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p1, 2 * MiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, AHostUpstreamWithoutTheSlotIsRefusedWithTheFigureToReserve) {
  gmr_mock_resource *mock = gmr_mock_resource_create(nullptr);
  gmr_graph_arena_resource *a = Make(Config(0, MiB), gmr_mock_resource_as_resource(mock));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_allocate_ex(r, 1000, 0, s, &p, &f));
  EXPECT_EQ(r, f.where) << "the arena refused, not the mock";
  EXPECT_STREQ(
      "graph_arena: capture needs 1.0 KiB more and mock_resource cannot allocate during capture: "
      "call gmr_graph_arena_resource_reserve(arena, 1024) before it",
      f.message);
  EXPECT_EQ(0u, gmr_mock_resource_called_allocate(mock)) << "the dispatch was not even tried";
  // Asked once per capture: the second request does not ask again either.
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_allocate_ex(r, 1000, 0, s, &p, &f));
  EXPECT_EQ(0u, Stats(a).upstream_call_count);
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(a, 2048));  // the advice, doubled
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock)));
}

TEST_F(ArenaCapture, GrowthOffStillRefusesInCaptureEvenWhenTheUpstreamCould) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(MiB, 0), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_allocate_ex(r, 2 * MiB, 0, s, &p, &f));
  EXPECT_STREQ(
      "graph_arena: capture needs 2.0 MiB more; create the arena with initial_capacity_bytes >= "
      "3145728 or call gmr_graph_arena_resource_reserve(arena, 3145728) before capture",
      f.message);
  EXPECT_EQ(0u, gmr_capture_leaf_capturing_calls(leaf));
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, MaximumCapacityBoundsGrowthInCapture) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource_config c = Config(0, MiB);
  c.max_capacity_bytes = 2 * MiB;
  gmr_graph_arena_resource *a = Make(c, R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *p0 = Alloc(r, 1536 * KiB, s);  // a 1.5 MiB chunk
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_allocate_ex(r, MiB, 0, s, &p, &f));
  EXPECT_STREQ("graph_arena: 1.0 MiB does not fit under max_capacity_bytes (2097152)", f.message);
  EXPECT_TRUE(f.free_info_known);
  EXPECT_EQ(0u, f.free_bytes);
  void *p1 = Alloc(r, 512 * KiB, s);  // the last half MiB
  EXPECT_EQ(2 * MiB, Stats(a).held_bytes);
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p0, 1536 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p1, 512 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// A growth that fails inside the capture leaves the capture valid, the arena
// as it was and the thread in global mode, whichever CUDA call of the path
// failed; the next request grows.
TEST_F(ArenaCapture, AFailedGrowthKeepsTheCaptureAndTheCaptureModeWhateverCallFails) {
  struct Case {
    gmr_cuda_call call;
    cudaError_t error;
    gmr_status expect;
    gmr_graph_arena_detection detection;
  };
  const Case cases[] = {
      // Switching to relaxed mode fails: no cudaMalloc is made at all.
      {GMR_CUDA_CALL_THREAD_EXCHANGE_CAPTURE_MODE, cudaErrorUnknown, GMR_ERR_CUDA,
       GMR_GRAPH_ARENA_DETECT_EXPLICIT},
      // The cudaMalloc in relaxed mode fails: the mode is switched back.
      {GMR_CUDA_CALL_MALLOC, cudaErrorMemoryAllocation, GMR_ERR_OUT_OF_MEMORY,
       GMR_GRAPH_ARENA_DETECT_EXPLICIT},
      // Automatic detection: the capture query itself fails.
      {GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO, cudaErrorUnknown, GMR_ERR_CUDA,
       GMR_GRAPH_ARENA_DETECT_AUTO},
  };
  for (const Case &k : cases) {
    SCOPED_TRACE(gmr_cuda_call_name(k.call));
    gmr_capture_leaf *leaf = Leaf(true);
    gmr_graph_arena_resource_config c = Config(0, MiB);
    c.detection = k.detection;
    gmr_graph_arena_resource *a = Make(c, R(leaf));
    gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
    gmr_stream s = NewStream();
    if (k.detection == GMR_GRAPH_ARENA_DETECT_EXPLICIT) {
      ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
    }
    ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(k.call, 0, 1, k.error));
    void *p = nullptr;
    gmr_failure f;
    EXPECT_EQ(k.expect, gmr_allocate_ex(r, 4 * KiB, 0, s, &p, &f));
    EXPECT_EQ(nullptr, p);
    EXPECT_EQ(int{k.error}, f.cuda_error);
    EXPECT_EQ(kGlobalMode, gmr_cuda_sim_get_thread_capture_mode());
    gmr_graph_arena_stats st = Stats(a);
    EXPECT_EQ(0u, st.held_bytes);
    EXPECT_EQ(0u, st.live_count);
    EXPECT_EQ(0u, gmr_capture_leaf_live_bytes(leaf));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    p = Alloc(r, 4 * KiB, s);  // the fault is gone: it grows
    EXPECT_EQ(MiB, Stats(a).held_bytes);
    EXPECT_EQ(kGlobalMode, gmr_cuda_sim_get_thread_capture_mode());
    gmr_graph_memory *m = EndCapture(a, s);
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 4 * KiB, 0, s));
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

TEST_F(ArenaCapture, AnotherStreamGrowsTheArenaWithoutBreakingTheCapture) {
  // uncaptured=arena: a request on another stream that does not fit grows the
  // arena while the capture is open, through the capture-safe slot: a plain
  // cudaMalloc from any thread would end a global-mode capture.
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(MiB, MiB), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream capturing = NewStream(), other = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, capturing, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(capturing));
  void *in = Alloc(r, 512 * KiB, capturing);
  void *out = Alloc(r, 768 * KiB, other);  // uncaptured, does not fit: grows
  EXPECT_EQ(1u, gmr_capture_leaf_capturing_calls(leaf));
  EXPECT_EQ(1u, gmr_capture_leaf_allocate_calls(leaf)) << "the initial chunk only";
  gmr_graph_arena_stats st = Stats(a);
  EXPECT_EQ(1u, st.capture_growth_count);
  EXPECT_EQ(0u, st.upstream_call_in_session_count) << "not for the capturing stream";
  EXPECT_EQ(1u, st.upstream_call_during_capture_count);
  gmr_graph_memory *m = EndCapture(a, capturing);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, in, 512 * KiB, 0, capturing));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, out, 768 * KiB, 0, other));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, TheArenasOwnAllocateCapturingSlot) {
  // Something above calls gmr_allocate_capturing() on the arena: requests
  // outside sessions then reach the upstream through its capture-safe slot.
  gmr_capture_leaf *capable = Leaf(true), *plain = Leaf(false);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  std::vector<std::pair<gmr_graph_arena_resource *, void *>> got;
  for (auto uncaptured : {GMR_GRAPH_ARENA_UNCAPTURED_ARENA, GMR_GRAPH_ARENA_UNCAPTURED_FORWARD}) {
    SCOPED_TRACE(uncaptured);
    gmr_graph_arena_resource_config c = Config(0, MiB);
    c.detection = GMR_GRAPH_ARENA_DETECT_EXPLICIT;  // no session: served outside one
    c.uncaptured = uncaptured;
    gmr_graph_arena_resource *a = Make(c, R(capable));
    unsigned long before = gmr_capture_leaf_capturing_calls(capable);
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_allocate_capturing(gmr_graph_arena_resource_as_resource(a), 8 * KiB,
                                             0, s, &p, nullptr));
    EXPECT_EQ(before + 1, gmr_capture_leaf_capturing_calls(capable));
    EXPECT_EQ(0u, gmr_capture_leaf_allocate_calls(capable));
    got.push_back({a, p});

    gmr_graph_arena_resource *b = Make(c, R(plain));
    gmr_resource *rb = gmr_graph_arena_resource_as_resource(b);
    gmr_failure f;
    EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_allocate_capturing(rb, 8 * KiB, 0, s, &p, &f));
    EXPECT_EQ(0u, gmr_capture_leaf_allocate_calls(plain));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(rb));
  }
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &g)) << "nothing broke the capture";
  ASSERT_EQ(GMR_OK, gmr_graph_destroy(g));
  // cudaFree is not capture-safe: the blocks go back after the capture.
  for (auto [a, p] : got) {
    gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 8 * KiB, 0, s));
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

// ---- many graphs, one graph memory (issue 11 section 2) -------------------------------

// One capture of the LLM-server pattern at batch size `batch`: two
// activations, one freed before a third is allocated, the output kept live.
struct Step {
  void *x = nullptr, *h = nullptr, *y = nullptr;
};

Step CaptureStep(gmr_resource *r, gmr_stream s, size_t batch) {
  Step t;
  EXPECT_EQ(GMR_OK, gmr_allocate(r, batch * 64 * KiB, 0, s, &t.x));
  EXPECT_EQ(GMR_OK, gmr_allocate(r, batch * 128 * KiB, 0, s, &t.h));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, t.x, batch * 64 * KiB, 0, s));
  EXPECT_EQ(GMR_OK, gmr_allocate(r, batch * 64 * KiB, 0, s, &t.y));  // the output
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, t.h, batch * 128 * KiB, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  Step g4 = CaptureStep(r, s, 4);  // x 256K, h 512K, y 256K
  gmr_graph_memory *pool = EndCapture(a, s);
  const uintptr_t base = addr(g4.x);
  EXPECT_EQ(base + 256 * KiB, addr(g4.h));
  EXPECT_EQ(base, addr(g4.y)) << "x's bytes, freed earlier in the capture";
  // Graph 2 (batch 2) appends to the same memory: everything it needs comes
  // from what graph 1 freed (h's 512 KiB), best fit, lowest address first.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, pool));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  Step g2 = CaptureStep(r, s, 2);  // x 128K, h 256K, y 128K
  gmr_graph_memory *same = EndCapture(a, s);
  EXPECT_EQ(pool, same);
  EXPECT_EQ(base + 256 * KiB, addr(g2.x));
  EXPECT_EQ(base + 384 * KiB, addr(g2.h));
  EXPECT_EQ(base + 256 * KiB, addr(g2.y));
  // Graph 1's output is freed between captures (its consumer is done): graph 3
  // (batch 1) gets it back, PyTorch's rule for a shared private pool.
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, g4.y, 256 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, pool));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, g2.y, 128 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, g1.y, 64 * KiB, 0, s));
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
    ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
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
      ASSERT_EQ(GMR_OK, gmr_deallocate(r, t.y, batch * 64 * KiB, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, reinterpret_cast<void *>(base + 768 * KiB), 256 * KiB, 0, s));
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
      ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
      Step t = CaptureStep(r, s, batch);
      gmr_graph_memory *m = EndCapture(a, s);
      if (pool == nullptr) pool = m;
      outputs.push_back({t.y, batch * 64 * KiB});
      total += batch * 256 * KiB;
      EXPECT_EQ(kGlobalMode, gmr_cuda_sim_get_thread_capture_mode());
    }
    gmr_graph_arena_stats st = Stats(a);
    EXPECT_EQ(0u, st.capture_refusal_count);
    if (policy == GMR_GRAPH_ARENA_ORDERED_REUSE) {
      EXPECT_EQ(1u, st.capture_growth_count) << "only the largest graph grew it";
      EXPECT_EQ(4 * MiB, st.held_bytes) << "one chunk of graph 1's 4 MiB";
    } else {
      EXPECT_EQ(total, st.in_use_bytes) << "monotone keeps the sum";
      EXPECT_LE(total, st.held_bytes);
    }
    for (auto &[p, n] : outputs) ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, n, 0, s));
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, pool));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

// ---- bad input and faults around captures -------------------------------------------

TEST_F(ArenaCapture, ACaptureThatEndsWithLiveBlocksKeepsThemForTheGraph) {
  for (auto policy : {GMR_GRAPH_ARENA_MONOTONE, GMR_GRAPH_ARENA_ORDERED_REUSE}) {
    SCOPED_TRACE(gmr_graph_arena_resource_policy_name(policy));
    gmr_capture_leaf *leaf = Leaf(true);
    gmr_graph_arena_resource *a = Make(Config(MiB, 0, policy), R(leaf));
    gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
    gmr_stream s = NewStream();
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
    ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
    void *live = Alloc(r, 100 * KiB, s);
    gmr_graph_memory *m = EndCapture(a, s);
    gmr_graph_memory_info info;
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, m, &info));
    EXPECT_EQ(1u, info.live_count);
    EXPECT_EQ(100 * KiB, info.live_bytes);
    // Freed after the capture: the bytes stay with the graph memory until
    // its release (the graph writes them at every replay).
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, live, 100 * KiB, 0, s));
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, m, &info));
    EXPECT_EQ(0u, info.live_count);
    EXPECT_EQ(100 * KiB, info.held_bytes);
    void *outside = Alloc(r, 100 * KiB, s);  // uncaptured: never those bytes
    EXPECT_EQ(addr(live) + 100 * KiB, addr(outside));
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, outside, 100 * KiB, 0, s));
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
    EXPECT_EQ(0u, Stats(a).in_use_bytes);
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

TEST_F(ArenaCapture, AFreeOfGraphMemoryOnAnotherStreamIsNeverReusedByThisCapture) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(MiB, 0, GMR_GRAPH_ARENA_ORDERED_REUSE), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream(), other = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *x = Alloc(r, 64 * KiB, s);
  // Accepted (stream-ordered semantics allow a free on any stream) but the
  // bytes are tagged with `other`: only a later capture on `other` reuses them.
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, x, 64 * KiB, 0, other));
  void *y = Alloc(r, 64 * KiB, s);
  EXPECT_EQ(addr(x) + 64 * KiB, addr(y)) << "not x's bytes";
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_deallocate(r, x, 64 * KiB, 0, s));
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, other, m));
  void *z = Alloc(r, 64 * KiB, other);
  EXPECT_EQ(x, z) << "a capture on `other` into the same memory gets them";
  gmr_graph_memory *m2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, other, &m2));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, y, 64 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, z, 64 * KiB, 0, other));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m2));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, ReleasedMemoryIsHandedOutAtOnceSoReleaseAfterTheGraphIsDone) {
  // The arena cannot know whether a graph still runs: the bytes of a released
  // memory go to the very next request (the documented rule: destroy the
  // graph and wait for its last launch before releasing).
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(MiB, 0), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *p = Alloc(r, 64 * KiB, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 64 * KiB, 0, s));
  gmr_graph_memory *m = EndCapture(a, s);
  void *before = Alloc(r, 64 * KiB, s);
  EXPECT_NE(p, before) << "held for the graph";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  void *after = Alloc(r, 64 * KiB, s);
  EXPECT_EQ(p, after) << "released: the next request gets the graph's bytes";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_release_graph_memory(a, m))
      << "a released memory is gone";
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, after, 64 * KiB, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- capture detection that asks CUDA only when it can matter ---------------------------

TEST_F(ArenaCapture, HintedDetectionAsksOnlyWhileASessionOrAHintIsUp) {
  // A host-memory leaf below: forwarding during a capture makes no CUDA call.
  gmr_mock_resource *mock = gmr_mock_resource_create(nullptr);
  gmr_graph_arena_resource_config c = Config(MiB, MiB);
  c.detection = GMR_GRAPH_ARENA_DETECT_HINTED;
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *a = Make(c, gmr_mock_resource_as_resource(mock));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream(), side = NewStream();
  auto queries = [] { return gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO); };
  // Outside captures: no CUDA call per request, no session.
  uint64_t q0 = queries();
  for (int i = 0; i < 10; ++i) {
    void *p = Alloc(r, 4 * KiB, s);
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 4 * KiB, 0, s));
  }
  EXPECT_EQ(q0, queries());
  EXPECT_EQ(10u, Stats(a).forwarded_allocation_count);
  // An explicit session: its own stream's requests make no query; another
  // stream's do (the capture may have forked onto it).
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *in = Alloc(r, 4 * KiB, s);
  EXPECT_EQ(q0, queries());
  void *elsewhere = Alloc(r, 4 * KiB, side);
  EXPECT_EQ(q0 + 1, queries());
  EXPECT_EQ(1u, Stats(a).capture_allocation_count) << "side does not capture: forwarded";
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, elsewhere, 4 * KiB, 0, side));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, in, 4 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  // An undeclared capture without a hint is not seen (the mode's contract):
  // the request is forwarded as if uncaptured...
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(side));
  uint64_t q1 = queries();
  void *missed = Alloc(r, 4 * KiB, side);
  EXPECT_EQ(q1, queries());
  EXPECT_EQ(1u, Stats(a).capture_allocation_count);
  // ... with the thread's hint up it is: one query, an automatic session.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_thread_hint_enter());
  void *hinted = Alloc(r, 4 * KiB, side);
  EXPECT_EQ(q1 + 1, queries());
  EXPECT_EQ(2u, Stats(a).capture_allocation_count);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_thread_hint_leave());
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_thread_hint_leave())
      << "no hint is up";
  gmr_graph_memory *hm = EndCapture(a, side);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, hinted, 4 * KiB, 0, side));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, missed, 4 * KiB, 0, side));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, hm));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock)));
}

TEST_F(ArenaCapture, AutomaticDetectionAsksOncePerForwardedCallAndNotForArenaBlocks) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource_config c = Config(MiB, MiB);
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *a = Make(c, R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  auto queries = [] { return gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO); };
  uint64_t q0 = queries();
  void *p = Alloc(r, 4 * KiB, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 4 * KiB, 0, s));
  EXPECT_EQ(q0 + 2, queries()) << "one per allocate, one per forwarded free";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *in = Alloc(r, 4 * KiB, s);
  gmr_graph_memory *m = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
  uint64_t q1 = queries();
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, in, 4 * KiB, 0, s));
  EXPECT_EQ(q1, queries()) << "a block of the arena is found without asking CUDA";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, c0, 64 * KiB, 0, s));
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
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, n, 0, s));
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
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_allocate_ex(r, 500 * KiB, 0, nullptr, &q, &f));
  EXPECT_EQ(r, f.where);
  EXPECT_TRUE(f.free_info_known);
  EXPECT_EQ(324 * KiB, f.free_bytes);
  EXPECT_EQ(324 * KiB, f.largest_free_block_bytes);
  // The upstream's own failure names the upstream, which keeps no free figures.
  gmr_graph_arena_resource *g = Make(Config(0, MiB), R(leaf));
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorMemoryAllocation));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_allocate_ex(gmr_graph_arena_resource_as_resource(g), 10, 0, nullptr, &q, &f));
  EXPECT_EQ(R(leaf), f.where);
  EXPECT_FALSE(f.free_info_known);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(g)));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 700 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

}  // namespace
