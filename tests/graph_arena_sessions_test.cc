// graph_arena_resource on the host simulation: capture sessions (explicit
// and detected), refusals, session errors and BUSY, block ids, and the
// forwarding mode of the graph pool.
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

// ---- capture sessions ---------------------------------------------------------------

TEST_F(GraphArena, ExplicitSessionServesACaptureWithoutAnyCudaCall) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  uintptr_t base = Base(a);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  uint64_t queries = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  void *p0 = Alloc(r, 1000, s);
  void *p1 = Alloc(r, 3000, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p0, 1000, 0, s));
  void *p2 = Alloc(r, 1000, s);
  EXPECT_EQ(base, addr(p0));
  EXPECT_EQ(base + 1024, addr(p1));
  EXPECT_EQ(base + 1024 + 3072, addr(p2)) << "monotone: p0's bytes are not reused";
  EXPECT_EQ(queries, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO));
  EXPECT_EQ(mallocs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  ASSERT_NE(nullptr, mem);
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, mem, &info));
  EXPECT_EQ(1024u + 3072u + 1024u, info.held_bytes);
  EXPECT_EQ(3072u + 1024u, info.live_bytes);
  EXPECT_EQ(2u, info.live_count);
  EXPECT_EQ(3u, info.allocation_count);
  EXPECT_EQ(1u, info.session_count);
  EXPECT_EQ(1u, info.reference_count);
  EXPECT_FALSE(info.capturing);
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(3u, st.capture_allocation_count);
  EXPECT_EQ(0u, st.upstream_call_during_capture_count);
  EXPECT_EQ(1u, st.graph_memory_count);
  EXPECT_EQ(0u, st.open_session_count);
  // The memory is kept: an uncaptured request does not get those bytes.
  void *after = Alloc(r, 256);
  EXPECT_EQ(base + 5120, addr(after));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_release_graph_memory(a, mem));
  // Released, its freed bytes are back; its live blocks come back when freed.
  EXPECT_EQ(256u + 4096u, Stats(a).in_use_bytes);
  gmr_graph_arena_block_info bi;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_find_block(a, p1, &bi));
  EXPECT_EQ(nullptr, bi.memory);
  EXPECT_TRUE(bi.captured);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p1, 3000, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p2, 1000, 0, s));
  EXPECT_EQ(256u, Stats(a).in_use_bytes);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, after, 256, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, CaptureTimeExhaustionRefusesChangesNothingAndKeepsTheCapture) {
  // Nothing below can allocate during capture: the arena refuses and advises.
  gmr_graph_arena_resource *a = Make(Config(MiB, MiB), R(Leaf(false)));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p0 = Alloc(r, 768 * KiB, s);
  gmr_graph_arena_resource_stats before = Stats(a);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(r, 512 * KiB, 0, s, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(r, f.where);
  EXPECT_STREQ(
      "graph_arena: capture needs 512.0 KiB more and plain_leaf cannot allocate during capture: "
      "call gmr_graph_arena_resource_reserve(arena, 1572864) before it",
      f.message);
  EXPECT_TRUE(f.free_info_known);
  EXPECT_EQ(256 * KiB, f.free_bytes);
  EXPECT_EQ(256 * KiB, f.largest_free_block_bytes);
  // A later request that fits still succeeds; the advice grows with it.
  void *p1 = Alloc(r, 128 * KiB, s);
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(r, 256 * KiB, 0, s, &p, &f));
  EXPECT_STREQ(
      "graph_arena: capture needs 896.0 KiB more and plain_leaf cannot allocate during capture: "
      "call gmr_graph_arena_resource_reserve(arena, 1966080) before it",
      f.message);
  EXPECT_EQ(128 * KiB, f.free_bytes);
  gmr_graph_arena_resource_stats after = Stats(a);
  EXPECT_EQ(before.held_bytes, after.held_bytes);
  EXPECT_EQ(before.live_count + 1, after.live_count);
  EXPECT_EQ(2u, after.capture_refusal_count);
  EXPECT_EQ(896 * KiB, after.capture_shortfall_bytes);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC)) << "never grown in capture";
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_graph_arena_resource_reserve(a, MiB))
      << "not during capture";
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph)) << "the capture was not invalidated";
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p0, 768 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p1, 128 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));

  // Follow the advice, then the same capture fits.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(a, 1966080));
  EXPECT_EQ(MiB + 896 * KiB, Stats(a).held_bytes);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(a, 1966080)) << "already there: no call";
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  std::vector<std::pair<void *, size_t>> got;
  for (size_t n : {768 * KiB, 512 * KiB, 128 * KiB, 256 * KiB}) got.emplace_back(Alloc(r, n, s), n);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph));
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  for (auto &[q, n] : got) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, n, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, ReserveGrowsToACapacityAndFailsCleanly) {
  gmr_graph_arena_resource_config c = Config(MiB, MiB);
  c.max_capacity_bytes = 2 * MiB;
  gmr_graph_arena_resource *a = Make(c);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_reserve(nullptr, 10));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_reserve(a, 0));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_graph_arena_resource_reserve(a, 2 * MiB + 1))
      << "above the maximum";
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(a, MiB)) << "there already";
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1,
                                                cudaErrorMemoryAllocation));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_graph_arena_resource_reserve(a, MiB + 768 * KiB));
  EXPECT_EQ(MiB, Stats(a).held_bytes);
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(a, MiB + 768 * KiB - 10));
  EXPECT_EQ(MiB + 768 * KiB, Stats(a).held_bytes) << "rounded up to 256";
  EXPECT_EQ(2u, Stats(a).chunk_count);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, ArenaDoesNotGrowForAnotherStreamWhileACaptureIsOpen) {
  // Nothing below can allocate without breaking the capture.
  gmr_graph_arena_resource *a = Make(Config(MiB, MiB), R(Leaf(false)));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream capturing = NewStream(), other = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, capturing, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(capturing));
  void *fits = Alloc(r, 512 * KiB, other);  // uncaptured, from the free space
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(r, 768 * KiB, 0, other, &p, &f));
  EXPECT_STREQ(
      "graph_arena: cannot grow by 768.0 KiB while a capture is open (plain_leaf cannot "
      "allocate during capture); call gmr_graph_arena_resource_reserve() before capture",
      f.message);
  EXPECT_TRUE(f.free_info_known);
  EXPECT_EQ(512 * KiB, f.free_bytes);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  size_t released = 5;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released)) << "trim is a no-op during capture";
  EXPECT_EQ(0u, released);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_reset(a, nullptr));
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(capturing, &graph));
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, capturing, &mem));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  p = Alloc(r, 768 * KiB, other);  // now it grows
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(0u, Stats(a).upstream_call_during_capture_count);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, fits, 512 * KiB, 0, other));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 768 * KiB, 0, other));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, CudaResourceRefusesInCaptureWhereTheArenaServes) {
  // The same requests inside a capture: cudaMalloc is not allowed there, the
  // arena is; neither breaks the capture.
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(up_, 4096, 0, s, &p, &f));
  EXPECT_EQ(nullptr, p);
  void *q = Alloc(r, 4096, s);  // detected: served in an automatic session
  EXPECT_EQ(1u, Stats(a).capture_allocation_count);
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph));
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 4096, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, AutomaticDetectionOpensAndEndsSessionsFromCaptureIds) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  uintptr_t base = Base(a);
  uint64_t q0 = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  void *pre = Alloc(r, 256, s);  // not capturing: uncaptured
  EXPECT_EQ(q0 + 1, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO));

  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *c1 = Alloc(r, 256, s);
  void *c2 = Alloc(r, 256, s);
  EXPECT_EQ(q0 + 3, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO))
      << "one capture query per allocation";
  gmr_graph g1 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g1));
  // A second capture on the same stream: a new id, a new session and memory.
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *d1 = Alloc(r, 256, s);
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(3u, st.capture_allocation_count);
  EXPECT_EQ(1u, st.open_session_count);
  EXPECT_EQ(2u, st.graph_memory_count);
  gmr_graph g2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g2));
  // Uncaptured again: the second session ends unclaimed too.
  void *post = Alloc(r, 256, s);
  EXPECT_EQ(0u, Stats(a).open_session_count);
  EXPECT_EQ(base, addr(pre));
  EXPECT_EQ(base + 256, addr(c1));
  EXPECT_EQ(base + 512, addr(c2));
  EXPECT_EQ(base + 768, addr(d1));
  EXPECT_EQ(base + 1024, addr(post));

  // Claim the most recent memory, then the older one.
  gmr_graph_memory *m2 = nullptr, *m1 = nullptr, *none = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m2));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m1));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_end_capture(a, s, &none));
  EXPECT_EQ(nullptr, none);
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, m1, &info));
  EXPECT_EQ(2u, info.allocation_count);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, m2, &info));
  EXPECT_EQ(1u, info.allocation_count);
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g1));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g2));
  for (void *p : {pre, c1, c2, d1, post})
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 256, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m1));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m2));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, AnAutomaticSessionCanBeDeclaredAndEndedExplicitly) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p0 = Alloc(r, 256, s);  // detected
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));  // now explicit
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  uint64_t q = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  void *p1 = Alloc(r, 256, s);
  EXPECT_EQ(q, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, mem, &info));
  EXPECT_EQ(2u, info.allocation_count) << "one memory for the whole capture";
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p0, 256, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p1, 256, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, ExplicitDetectionNeverAsksCuda) {
  gmr_graph_arena_resource_config c = Config(MiB);
  c.detection = GMR_GRAPH_ARENA_DETECT_EXPLICIT;
  gmr_graph_arena_resource *a = Make(c);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  uint64_t q = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  void *p0 = Alloc(r, 256, s);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *p1 = Alloc(r, 256, s);
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  void *p2 = Alloc(r, 256, s);
  EXPECT_EQ(q, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO));
  EXPECT_EQ(1u, Stats(a).capture_allocation_count);
  for (void *p : {p0, p1, p2}) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 256, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, CaptureQueryFailureIsReportedAndChangesNothing) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO, 0, 1,
                                                cudaErrorInvalidResourceHandle));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_ex(r, 256, 0, nullptr, &p, &f));
  EXPECT_EQ(int{cudaErrorInvalidResourceHandle}, f.cuda_error);
  EXPECT_EQ(0u, Stats(a).allocation_count);
  uint64_t mark = 0;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO, 0, 1,
                                                cudaErrorInvalidResourceHandle));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_graph_arena_resource_checkpoint(a, nullptr, &mark));
  EXPECT_EQ(0u, mark);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- sessions: errors, BUSY ------------------------------------------------------------

TEST_F(GraphArena, SessionCallsRejectBadArguments) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_graph_arena_resource *b = Make(Config(MiB));
  gmr_stream s = NewStream(), s2 = NewStream();
  gmr_graph_memory *mem = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_begin_capture(nullptr, s, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_begin_capture(a, nullptr, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_end_capture(a, s, &mem));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_end_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(b, s, nullptr));
  gmr_graph_memory *of_b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(b, s, &of_b));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_begin_capture(a, s, of_b))
      << "a memory of another arena";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_release_graph_memory(a, of_b));
  gmr_graph_memory_info info;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_get_graph_memory_info(a, of_b, &info));
  EXPECT_EQ(0u, info.reference_count);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_release_graph_memory(a, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s2, nullptr));
  EXPECT_EQ(2u, Stats(a).open_session_count);
  gmr_graph_memory *m1 = nullptr, *m2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m1));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s2, &m2));
  EXPECT_NE(m1, m2);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m1));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m2));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(b, of_b));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(a)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(b)));
}

TEST_F(GraphArena, DestroyIsBusyWhileAnythingIsLiveAndThenFreesEveryChunk) {
  gmr_graph_arena_resource *a = Make(Config(MiB, MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  void *p = Alloc(r, 2 * MiB);  // a second chunk
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r)) << "a live allocation";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 2 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r)) << "an open session";
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r)) << "a held graph memory";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  // An automatic session the arena has not seen end: it may still be open
  // (the arena never asks CUDA about a stream outside a request on it).
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *q = Alloc(r, 256, s);
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 256, 0, s));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r)) << "an open automatic session";
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_reset(a, nullptr));
  // Seen to end (a request outside capture on its stream): unclaimed memory,
  // still BUSY until a reset releases it.
  void *outside = Alloc(r, 256, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, outside, 256, 0, s));
  EXPECT_EQ(0u, Stats(a).open_session_count);
  EXPECT_EQ(1u, Stats(a).graph_memory_count);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r)) << "its graph may still be alive";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_release_graph_memory(a, mem));
  size_t released = 9;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, &released));
  EXPECT_EQ(0u, released) << "no live uncaptured block";
  EXPECT_EQ(0u, Stats(a).graph_memory_count);
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(0u, u.used_bytes);
}

TEST_F(GraphArena, DestroyThatCannotFreeAChunkKeepsTheArenaUsable) {
  gmr_graph_arena_resource *a = Make(Config(MiB, MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  void *p = Alloc(r, 2 * MiB);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 2 * MiB, 0, nullptr));
  // The second cudaFree fails: one chunk is gone, one stays.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_FREE, 1, 1, cudaErrorLaunchFailure));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r));
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(1u, st.chunk_count);
  EXPECT_EQ(0u, st.in_use_bytes);
  void *q = Alloc(r, 100);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- ids --------------------------------------------------------------------------------

TEST_F(GraphArena, BlocksHaveIdsThatFindAndReturnThem) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_stream s = NewStream();
  void *p = nullptr;
  uint64_t id = 0;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_allocate(a, 300, 0, s, &p, &id, &f));
  EXPECT_NE(0u, id);
  gmr_graph_arena_block_info bi;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_block(a, id, &bi));
  EXPECT_EQ(id, bi.id);
  EXPECT_EQ(p, bi.ptr);
  EXPECT_EQ(300u, bi.bytes);
  EXPECT_EQ(512u, bi.carved_bytes);
  EXPECT_EQ(s, bi.stream);
  EXPECT_FALSE(bi.captured);
  EXPECT_EQ(nullptr, bi.memory);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_find_block(a, p, &bi));
  EXPECT_EQ(id, bi.id);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_return_block(a, id, s));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_graph_arena_resource_get_block(a, id, &bi));
  EXPECT_EQ(0u, bi.id);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_graph_arena_resource_return_block(a, id, s));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_graph_arena_resource_find_block(a, p, &bi));
  // The slot is reused, the id is not.
  uint64_t id2 = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_allocate(a, 300, 0, s, &p, &id2, nullptr));
  EXPECT_NE(id, id2);
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_graph_arena_resource_get_block(a, id, &bi));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_graph_arena_resource_return_block(a, id, s))
      << "an id given out before, whose block is gone";
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_graph_arena_resource_return_block(a, id2 + (uint64_t{1} << 32), s))
      << "an id never given out";
  // Captured blocks name their memory.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *c = nullptr;
  uint64_t cid = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_allocate(a, 64, 512, s, &c, &cid, nullptr));
  EXPECT_EQ(0u, addr(c) % 512);
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_block(a, cid, &bi));
  EXPECT_TRUE(bi.captured);
  EXPECT_EQ(mem, bi.memory);
  // Argument errors, zero bytes.
  void *none = nullptr;
  uint64_t nid = 7;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_allocate(a, 8, 0, s, &none, nullptr, &f));
  EXPECT_EQ(nullptr, none);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_allocate(a, 8, 48, s, &none, &nid, &f));
  EXPECT_EQ(0u, nid);
  EXPECT_STREQ("alignment 48 is not a power of two", f.message);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_graph_arena_resource_allocate(
                                       a, GMR_MAX_ALLOCATION_BYTES + 1, 0, s, &none, &nid, &f));
  EXPECT_EQ(gmr_graph_arena_resource_as_resource(a), f.where);
  nid = 7;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_allocate(a, 0, 0, s, &none, &nid, &f));
  EXPECT_EQ(nullptr, none);
  EXPECT_EQ(0u, nid);
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_graph_arena_resource_get_block(a, 0, &bi));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_graph_arena_resource_get_block(a, UINT64_MAX, &bi));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_get_block(a, id2, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_return_block(a, cid, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_return_block(a, id2, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(a)));
}

// ---- forwarding (the graph pool stack's mode) -----------------------------------------------

TEST_F(GraphArena, ForwardModeSendsUncapturedRequestsUpstreamAndCapturesToTheArena) {
  // A host-memory leaf: forwarding another stream's request during the
  // capture makes no CUDA call (a cudaMalloc would break a global capture).
  gmr_mock_resource *mock = gmr_mock_resource_create(nullptr);
  gmr_resource *m = gmr_mock_resource_as_resource(mock);
  gmr_graph_arena_resource_config c = Config(MiB);
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *a = Make(c, m);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream(), other = NewStream();
  EXPECT_EQ(1u, gmr_mock_resource_called_allocate(mock));  // the initial chunk
  void *f1 = Alloc(r, 5000, s);
  EXPECT_EQ(2u, gmr_mock_resource_called_allocate(mock));
  uint64_t mark = 0;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_graph_arena_resource_checkpoint(a, s, &mark));
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_graph_arena_resource_rewind(a, s, 1, nullptr));
  gmr_graph_arena_block_info bi;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_graph_arena_resource_find_block(a, f1, &bi));

  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *cap = Alloc(r, 5000, s);  // detected: from the arena
  EXPECT_EQ(2u, gmr_mock_resource_called_allocate(mock));
  void *f2 = Alloc(r, 100, other);  // another stream: forwarded, counted
  EXPECT_EQ(3u, gmr_mock_resource_called_allocate(mock));
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_deallocate(r, f1, 5000, 0, s))
      << "never an upstream call for a capturing stream";
  EXPECT_EQ(0u, gmr_mock_resource_called_deallocate(mock));
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(1u, st.capture_allocation_count);
  EXPECT_EQ(2u, st.forwarded_allocation_count);
  EXPECT_EQ(2u, st.forwarded_live_count);
  EXPECT_EQ(3u, st.upstream_call_count);
  EXPECT_EQ(1u, st.upstream_call_during_capture_count);
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g)) << "nothing broke the capture";
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, f1, 5000, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, f2, 100, 0, other));
  EXPECT_EQ(2u, gmr_mock_resource_called_deallocate(mock));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, f2, 100, 0, other))
      << "nothing of the arena's is upstream any more: not its pointer";
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_deallocate(r, static_cast<char *>(cap) + 256, 10, 0, s))
      << "inside a chunk but not a block";
  EXPECT_EQ(0u, Stats(a).forwarded_live_count);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, cap, 5000, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  gmr_footprint fp;  // the mock reports no footprint: the arena's own chunks
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(MiB, fp.held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0u, gmr_mock_resource_live_bytes(mock));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(m));
}

TEST_F(GraphArena, ForwardModeReportsTheUpstreamsFootprint) {
  gmr_graph_arena_resource_config c = Config(MiB);
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *a = Make(c);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  void *p = Alloc(r, 3 * MiB);
  EXPECT_EQ(MiB, Stats(a).held_bytes);
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(4 * MiB, fp.held_bytes) << "the arena's chunk and the forwarded block";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 3 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(MiB, fp.held_bytes);
  EXPECT_EQ(4 * MiB, fp.peak_held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

}  // namespace
