// graph_arena_resource during capture, on the host simulation: growth through
// the upstream's allocate_capturing (and refusal when nothing below can),
// growth failures and the capture mode restored on every path, frees and
// releases around captures, and capture detection that asks CUDA only when
// it can matter. Several graphs in one memory and the memory info:
// graph_arena_graphs_test.cc.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
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

// ---- growth during capture (issue 11 section 1) -------------------------------------

TEST_F(ArenaCapture, GrowsDuringCaptureWithNothingReservedThroughAllocateCapturing) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(0, MiB), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));  // global mode, the strictest
  void *p0 = Alloc(r, 300 * KiB, s);                // grows by one chunk
  EXPECT_EQ(kGlobalMode, gmr_cuda_sim_get_thread_capture_mode()) << "restored";
  void *p1 = Alloc(r, 600 * KiB, s);  // fits the chunk
  void *p2 = Alloc(r, 2 * MiB, s);    // larger than a chunk: a chunk of its size
  EXPECT_EQ(addr(p0) + 300 * KiB, addr(p1));
  EXPECT_EQ(kGlobalMode, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(0u, gmr_capture_leaf_allocate_calls(leaf)) << "never the plain slot in capture";
  EXPECT_EQ(2u, gmr_capture_leaf_capturing_calls(leaf));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_graph_arena_resource_stats st = Stats(a);
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
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, n, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = Alloc(r, 4 * KiB, s);
  EXPECT_EQ(1u, Stats(a).capture_allocation_count);
  EXPECT_EQ(1u, gmr_capture_leaf_capturing_calls(leaf));
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4 * KiB, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p0 = Alloc(r, 900 * KiB, s);
  void *p1 = Alloc(r, 2 * MiB, s);
  gmr_graph_memory *m = EndCapture(a, s);
  EXPECT_EQ(0u, gmr_capture_leaf_capturing_calls(leaf));
  EXPECT_EQ(0u, Stats(a).upstream_call_during_capture_count);
  EXPECT_EQ(0u, Stats(a).capture_growth_count);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p0, 900 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p1, 2 * MiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, AHostUpstreamWithoutTheSlotIsRefusedWithTheFigureToReserve) {
  gmr_mock_resource *mock = gmr_mock_resource_create(nullptr);
  gmr_graph_arena_resource *a = Make(Config(0, MiB), gmr_mock_resource_as_resource(mock));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(r, 1000, 0, s, &p, &f));
  EXPECT_EQ(r, f.where) << "the arena refused, not the mock";
  EXPECT_STREQ(
      "graph_arena: capture needs 1.0 KiB more and mock_resource cannot allocate during capture: "
      "call gmr_graph_arena_resource_reserve(arena, 1024) before it",
      f.message);
  EXPECT_EQ(0u, gmr_mock_resource_called_allocate(mock)) << "the dispatch was not even tried";
  // Asked once per capture: the second request does not ask again either.
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(r, 1000, 0, s, &p, &f));
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
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(r, 2 * MiB, 0, s, &p, &f));
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
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p0 = Alloc(r, 1536 * KiB, s);  // a 1.5 MiB chunk
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, MiB, 0, s, &p, &f));
  EXPECT_STREQ("graph_arena: 1.0 MiB does not fit under max_capacity_bytes (2097152)", f.message);
  EXPECT_TRUE(f.free_info_known);
  EXPECT_EQ(0u, f.free_bytes);
  void *p1 = Alloc(r, 512 * KiB, s);  // the last half MiB
  EXPECT_EQ(2 * MiB, Stats(a).held_bytes);
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p0, 1536 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p1, 512 * KiB, 0, s));
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
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(k.call, 0, 1, k.error));
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(k.expect, gmr_resource_allocate_ex(r, 4 * KiB, 0, s, &p, &f));
    EXPECT_EQ(nullptr, p);
    EXPECT_EQ(int{k.error}, f.cuda_error);
    EXPECT_EQ(kGlobalMode, gmr_cuda_sim_get_thread_capture_mode());
    gmr_graph_arena_resource_stats st = Stats(a);
    EXPECT_EQ(0u, st.held_bytes);
    EXPECT_EQ(0u, st.live_count);
    EXPECT_EQ(0u, st.capture_growth_count) << "a failed growth is no growth";
    EXPECT_EQ(0u, gmr_capture_leaf_live_bytes(leaf));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    p = Alloc(r, 4 * KiB, s);  // the fault is gone: it grows
    EXPECT_EQ(MiB, Stats(a).held_bytes);
    EXPECT_EQ(kGlobalMode, gmr_cuda_sim_get_thread_capture_mode());
    gmr_graph_memory *m = EndCapture(a, s);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4 * KiB, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(capturing));
  void *in = Alloc(r, 512 * KiB, capturing);
  void *out = Alloc(r, 768 * KiB, other);  // uncaptured, does not fit: grows
  EXPECT_EQ(1u, gmr_capture_leaf_capturing_calls(leaf));
  EXPECT_EQ(1u, gmr_capture_leaf_allocate_calls(leaf)) << "the initial chunk only";
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(1u, st.capture_growth_count);
  EXPECT_EQ(0u, st.upstream_call_in_session_count) << "not for the capturing stream";
  EXPECT_EQ(1u, st.upstream_call_during_capture_count);
  gmr_graph_memory *m = EndCapture(a, capturing);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, in, 512 * KiB, 0, capturing));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, out, 768 * KiB, 0, other));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, TheArenasOwnAllocateCapturingSlot) {
  // Something above calls gmr_resource_allocate_capturing() on the arena: requests
  // outside sessions then reach the upstream through its capture-safe slot.
  gmr_capture_leaf *capable = Leaf(true), *plain = Leaf(false);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  std::vector<std::pair<gmr_graph_arena_resource *, void *>> got;
  for (auto uncaptured : {GMR_GRAPH_ARENA_UNCAPTURED_ARENA, GMR_GRAPH_ARENA_UNCAPTURED_FORWARD}) {
    SCOPED_TRACE(uncaptured);
    gmr_graph_arena_resource_config c = Config(0, MiB);
    c.detection = GMR_GRAPH_ARENA_DETECT_EXPLICIT;  // no session: served outside one
    c.uncaptured = uncaptured;
    gmr_graph_arena_resource *a = Make(c, R(capable));
    unsigned long before = gmr_capture_leaf_capturing_calls(capable);
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(gmr_graph_arena_resource_as_resource(a),
                                                      8 * KiB, 0, s, &p, nullptr));
    EXPECT_EQ(before + 1, gmr_capture_leaf_capturing_calls(capable));
    EXPECT_EQ(0u, gmr_capture_leaf_allocate_calls(capable));
    got.push_back({a, p});

    gmr_graph_arena_resource *b = Make(c, R(plain));
    gmr_resource *rb = gmr_graph_arena_resource_as_resource(b);
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_capturing(rb, 8 * KiB, 0, s, &p, &f));
    EXPECT_EQ(0u, gmr_capture_leaf_allocate_calls(plain));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(rb));
  }
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g)) << "nothing broke the capture";
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  // cudaFree is not capture-safe: the blocks go back after the capture.
  for (auto [a, p] : got) {
    gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 8 * KiB, 0, s));
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
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
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
    void *live = Alloc(r, 100 * KiB, s);
    gmr_graph_memory *m = EndCapture(a, s);
    gmr_graph_memory_info info;
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, m, &info));
    EXPECT_EQ(1u, info.live_count);
    EXPECT_EQ(100 * KiB, info.live_bytes);
    // Freed after the capture: the bytes stay with the graph memory until
    // its release (the graph writes them at every replay).
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, live, 100 * KiB, 0, s));
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, m, &info));
    EXPECT_EQ(0u, info.live_count);
    EXPECT_EQ(100 * KiB, info.held_bytes);
    void *outside = Alloc(r, 100 * KiB, s);  // uncaptured: never those bytes
    EXPECT_EQ(addr(live) + 100 * KiB, addr(outside));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, outside, 100 * KiB, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *x = Alloc(r, 64 * KiB, s);
  // Accepted (stream-ordered semantics allow a free on any stream) but the
  // bytes are tagged with `other`: only a later capture on `other` reuses them.
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 64 * KiB, 0, other));
  void *y = Alloc(r, 64 * KiB, s);
  EXPECT_EQ(addr(x) + 64 * KiB, addr(y)) << "not x's bytes";
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, x, 64 * KiB, 0, s));
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, other, m));
  void *z = Alloc(r, 64 * KiB, other);
  EXPECT_EQ(x, z) << "a capture on `other` into the same memory gets them";
  gmr_graph_memory *m2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, other, &m2));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, y, 64 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, z, 64 * KiB, 0, other));
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
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = Alloc(r, 64 * KiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, s));
  gmr_graph_memory *m = EndCapture(a, s);
  void *before = Alloc(r, 64 * KiB, s);
  EXPECT_NE(p, before) << "held for the graph";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  void *after = Alloc(r, 64 * KiB, s);
  EXPECT_EQ(p, after) << "released: the next request gets the graph's bytes";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_release_graph_memory(a, m))
      << "a released memory is gone";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, after, 64 * KiB, 0, s));
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
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4 * KiB, 0, s));
  }
  EXPECT_EQ(q0, queries());
  EXPECT_EQ(10u, Stats(a).forwarded_allocation_count);
  // An explicit session: its own stream's requests make no query; another
  // stream's do (the capture may have forked onto it).
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *in = Alloc(r, 4 * KiB, s);
  EXPECT_EQ(q0, queries());
  void *elsewhere = Alloc(r, 4 * KiB, side);
  EXPECT_EQ(q0 + 1, queries());
  EXPECT_EQ(1u, Stats(a).capture_allocation_count) << "side does not capture: forwarded";
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, elsewhere, 4 * KiB, 0, side));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, in, 4 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  // An undeclared capture without a hint is not seen (the mode's contract):
  // the request is forwarded as if uncaptured...
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(side));
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
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, hinted, 4 * KiB, 0, side));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, missed, 4 * KiB, 0, side));
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
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4 * KiB, 0, s));
  EXPECT_EQ(q0 + 2, queries()) << "one per allocate, one per forwarded free";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *in = Alloc(r, 4 * KiB, s);
  gmr_graph_memory *m = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
  uint64_t q1 = queries();
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, in, 4 * KiB, 0, s));
  EXPECT_EQ(q1, queries()) << "a block of the arena is found without asking CUDA";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- threads ------------------------------------------------------------------------------

// One thread captures again and again, growing the arena inside each capture;
// three others forward requests on their own streams the whole time (the
// graph pool's lock-free path, hinted detection). TSan checks the fast path
// against sessions opening and closing; every block is written and checked.
TEST_F(ArenaCapture, ThreadsForwardWhileAnotherCapturesAndGrows) {
  gmr_capture_leaf *leaf = gmr_capture_leaf_create_host(true);
  ASSERT_NE(nullptr, leaf);
  gmr_graph_arena_resource_config c = Config(0, 256 * KiB, GMR_GRAPH_ARENA_ORDERED_REUSE);
  c.detection = GMR_GRAPH_ARENA_DETECT_HINTED;
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *a = Make(c, R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  constexpr int kForwarders = 3, kRounds = 200;
  std::vector<gmr_stream> streams;
  for (int t = 0; t <= kForwarders; ++t) streams.push_back(NewStream());
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 1; t <= kForwarders; ++t) {
    threads.push_back(gmr_test::ForwardingThread(r, streams[t], t, 512, 4096, 17, 8, done, failures));
  }
  gmr_stream s = streams[0];
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
    void *x = Alloc(r, 200 * KiB, s);
    void *y = Alloc(r, 100 * KiB, s);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 200 * KiB, 0, s));
    gmr_graph_memory *m = EndCapture(a, s);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, y, 100 * KiB, 0, s));
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  }
  done = true;
  for (std::thread &t : threads) t.join();
  EXPECT_EQ(0, failures.load());
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(0u, st.forwarded_live_count);
  EXPECT_EQ(2u * kRounds, st.capture_allocation_count);
  EXPECT_EQ(0u, st.live_count);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(R(leaf)));
}

// Found by stack_ops_fuzz (fuzz/corpus/stack_ops/graph-arena-chunks-moved):
// a growth that moved the chunk table and then failed for lack of host
// memory (a chunk too large for its block table) returned without telling
// the sessions, and the next allocation in a session wrote through its
// pointer into the old table (heap-use-after-free under --config=asan).
// Now the sessions forget their chunk as soon as the table may have moved.
TEST_F(ArenaCapture, AGrowthThatMovesTheChunkTableAndFailsLeavesSessionsValid) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(0, MiB), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  std::vector<void *> uncaptured;
  for (int i = 0; i < 7; ++i) uncaptured.push_back(Alloc(r, MiB, nullptr));  // chunks 1..7
  gmr_stream s = NewStream();
  // An explicit session, no stream capture: the growths here call
  // cudaMalloc, which a global capture would forbid.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *first = Alloc(r, 64 * KiB, s);  // chunk 8: the table is full
  void *second = Alloc(r, 64 * KiB, s);  // the session's fast path, its chunk remembered
  EXPECT_EQ(addr(first) + 64 * KiB, addr(second));
  gmr_graph_arena_resource_stats before = Stats(a);
  ASSERT_EQ(8u, before.chunk_count);
  // The table grows (and may move), then the chunk's block table cannot be made.
  void *huge = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_allocate_ex(r, size_t{1} << 50, 0, nullptr, &huge, &f));
  EXPECT_EQ(nullptr, huge);
  EXPECT_NE(nullptr, std::strstr(f.message, "needs a block table")) << f.message;
  gmr_graph_arena_resource_stats after = Stats(a);
  EXPECT_EQ(before.chunk_count, after.chunk_count);
  EXPECT_EQ(before.held_bytes, after.held_bytes);
  EXPECT_EQ(before.live_bytes, after.live_bytes);
  void *third = Alloc(r, 64 * KiB, s);  // in the session again: no stale chunk
  EXPECT_EQ(addr(second) + 64 * KiB, addr(third));
  gmr_graph_memory *m = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
  ASSERT_NE(nullptr, m);
  for (void *p : {first, second, third})
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, s));
  for (void *p : uncaptured) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0u, gmr_capture_leaf_live_bytes(leaf)) << "every chunk went back";
}

}  // namespace

namespace {

// A request no device could hold, in a capture: the refusal says what was
// asked (the arena's block table for it is 1/64 of it, and host memory for
// that is what runs out first), and the capture stays valid.
TEST_F(ArenaCapture, AHugeRequestInACaptureSaysWhatWasAsked) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(0, MiB), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  const size_t huge = size_t{1} << 52;  // 4 PiB: its table alone is 64 TiB
  void *p = nullptr;
  gmr_failure failure = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, huge, 0, s, &p, &failure));
  EXPECT_EQ(nullptr, p);
  EXPECT_NE(nullptr, std::strstr(failure.message, std::to_string(huge).c_str())) << failure.message;
  EXPECT_EQ(nullptr, std::strstr(failure.message, "graph_arena: no host memory")) << failure.message;
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

}  // namespace
