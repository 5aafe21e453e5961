// graph_arena_resource on the host simulation: creation, the arena outside
// capture (bump, reset, growth, trim, rewind), null arguments and the stats
// header. Sessions: graph_arena_sessions_test.cc; policies and threads:
// graph_arena_policy_test.cc; growth in capture: graph_arena_capture_test.cc.
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
#include "tests/support/capture_leaf.h"
#include "tests/support/graph_arena_fixture.h"
#include "tests/support/mock_resource.h"

namespace {

using gmr_test::addr;
using gmr_test::GraphArena;
using gmr_test::GraphArenaPolicy;
using gmr_test::KiB;
using gmr_test::MiB;

// ---- creation -------------------------------------------------------------

TEST_F(GraphArena, CreateRejectsBadArgumentsAndTakesNothing) {
  gmr_graph_arena_resource *a = reinterpret_cast<gmr_graph_arena_resource *>(0x1);
  gmr_graph_arena_resource_config c = Config(MiB);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_create(up_, &c, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_create(nullptr, &c, &a));
  EXPECT_EQ(nullptr, a);
  for (size_t alignment : {size_t{0}, size_t{128}, size_t{300}, size_t{257}}) {
    c = Config(MiB);
    c.alignment = alignment;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_create(up_, &c, &a)) << alignment;
  }
  c = Config(2 * MiB);
  c.max_capacity_bytes = MiB;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_create(up_, &c, &a));
  c = Config(MiB);
  c.capture_policy = static_cast<gmr_graph_arena_policy>(7);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_create(up_, &c, &a));
  c = Config(MiB);
  c.detection = static_cast<gmr_graph_arena_detection>(-1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_create(up_, &c, &a));
  c = Config(MiB);
  c.uncaptured = static_cast<gmr_graph_arena_uncaptured>(2);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_create(up_, &c, &a));
  EXPECT_EQ(nullptr, a);
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
}

TEST_F(GraphArena, CreateTakesTheInitialCapacityInOneUpstreamCall) {
  gmr_graph_arena_resource *a = Make(Config(3 * MiB + 1));  // rounded to 256
  ASSERT_NE(nullptr, a);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  EXPECT_STREQ("graph_arena_resource", gmr_resource_get_type_name(r));
  EXPECT_EQ(a, gmr_graph_arena_resource_from_resource(r));
  EXPECT_EQ(nullptr, gmr_graph_arena_resource_from_resource(up_));
  EXPECT_EQ(up_, gmr_resource_get_upstream(r));
  EXPECT_EQ(a,
            gmr_graph_arena_resource_from_resource(gmr_resource_find(r, "graph_arena_resource")));
  EXPECT_EQ(nullptr,
            gmr_graph_arena_resource_from_resource(gmr_resource_find(up_, "graph_arena_resource")));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(3 * MiB + 256, st.held_bytes);
  EXPECT_EQ(1u, st.chunk_count);
  EXPECT_EQ(0u, st.in_use_bytes);
  EXPECT_EQ(1u, st.upstream_call_count);
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(3 * MiB + 256, fp.held_bytes);
  gmr_graph_arena_resource_config got = gmr_graph_arena_resource_get_config(a);
  EXPECT_EQ(3 * MiB + 256, got.initial_capacity_bytes);
  EXPECT_EQ(256u, got.alignment);
  EXPECT_EQ(GMR_GRAPH_ARENA_MONOTONE, got.capture_policy);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(0u, u.used_bytes);
}

TEST_F(GraphArena, CreateFailsCleanlyWhenTheUpstreamHasNoMemory) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1,
                                                cudaErrorMemoryAllocation));
  gmr_graph_arena_resource_config c = Config(MiB);
  gmr_graph_arena_resource *a = reinterpret_cast<gmr_graph_arena_resource *>(0x1);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_graph_arena_resource_create(up_, &c, &a));
  EXPECT_EQ(nullptr, a);
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

TEST_F(GraphArena, PolicyNamesRoundTrip) {
  EXPECT_STREQ("monotone", gmr_graph_arena_resource_policy_name(GMR_GRAPH_ARENA_MONOTONE));
  EXPECT_STREQ("ordered_reuse",
               gmr_graph_arena_resource_policy_name(GMR_GRAPH_ARENA_ORDERED_REUSE));
  EXPECT_STREQ("unknown",
               gmr_graph_arena_resource_policy_name(static_cast<gmr_graph_arena_policy>(9)));
  gmr_graph_arena_policy p = GMR_GRAPH_ARENA_MONOTONE;
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_policy_from_name("ordered_reuse", &p));
  EXPECT_EQ(GMR_GRAPH_ARENA_ORDERED_REUSE, p);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_policy_from_name("Monotone", &p));
  EXPECT_EQ(GMR_GRAPH_ARENA_ORDERED_REUSE, p);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_policy_from_name(nullptr, &p));
}

// ---- outside capture ---------------------------------------------------------

TEST_F(GraphArena, UncapturedRequestsAreBumpedAndAFreeIsOnlyBookkeeping) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  uintptr_t base = Base(a);
  void *p0 = Alloc(r, 100);
  void *p1 = Alloc(r, 512);
  void *p2 = Alloc(r, 257);
  EXPECT_EQ(base, addr(p0));
  EXPECT_EQ(base + 256, addr(p1));
  EXPECT_EQ(base + 768, addr(p2));
  std::memset(p2, 0x5a, 257);  // host-backed: ASan checks the bounds
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p1, 512, 0, nullptr));
  void *p3 = Alloc(r, 256);
  EXPECT_EQ(base + 1280, addr(p3)) << "a freed block is not reused before a reset";
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(1536u, st.in_use_bytes);
  EXPECT_EQ(256u + 512u + 256u, st.live_bytes);
  EXPECT_EQ(3u, st.live_count);
  EXPECT_EQ(5u, st.allocation_count);  // Base() made one
  EXPECT_EQ(0u, st.capture_allocation_count);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  // Wrong size, double free, unknown pointers: refused, nothing changes.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p0, 99, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p1, 512, 0, nullptr));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, &local, 4, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_deallocate(r, static_cast<char *>(p2) + 256, 1, 0, nullptr))
      << "inside a block, where none ever started";
  EXPECT_EQ(3u, Stats(a).live_count);
  for (auto [p, n] : {std::pair{p0, 100}, {p2, 257}, {p3, 256}}) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, n, 0, nullptr));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, LargerAlignmentsAreHonouredInsideTheChunk) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  void *small = Alloc(r, 256);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 4096, nullptr, &p));
  EXPECT_EQ(0u, addr(p) % 4096);
  EXPECT_GT(addr(p), addr(small));
  void *q = Alloc(r, 256);  // the gap before p stays free and is used first
  EXPECT_EQ(addr(small) + 256, addr(q));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_allocate(r, 64, 3, nullptr, &p));
  EXPECT_EQ(nullptr, p);
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, &released));
  EXPECT_EQ(3u, released);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, ResetReleasesEverythingAndTheSameRequestsGetTheSameAddresses) {
  gmr_graph_arena_resource *a = Make(Config(0, 256 * KiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  std::mt19937 rng(5);
  std::vector<size_t> sizes;
  for (int i = 0; i < 300; ++i) sizes.push_back(1 + rng() % (64 * KiB));
  sizes.push_back(MiB);  // bigger than a chunk: a chunk of its own
  std::vector<void *> first;
  for (size_t n : sizes) first.push_back(Alloc(r, n));
  // Free every third one: bookkeeping only.
  for (size_t i = 0; i < first.size(); i += 3) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, first[i], sizes[i], 0, nullptr));
  }
  gmr_graph_arena_resource_stats before = Stats(a);
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, &released));
  EXPECT_EQ(first.size() - (first.size() + 2) / 3, released);
  EXPECT_EQ(0u, Stats(a).live_count);
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, first[1], sizes[1], 0, nullptr))
      << "the reset freed it";
  for (int iteration = 0; iteration < 3; ++iteration) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      ASSERT_EQ(first[i], Alloc(r, sizes[i])) << "iteration " << iteration << " request " << i;
    }
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, &released));
    EXPECT_EQ(sizes.size(), released);
  }
  EXPECT_EQ(mallocs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC)) << "reset keeps chunks";
  EXPECT_EQ(before.held_bytes, Stats(a).held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(mallocs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
}

TEST_F(GraphArena, GrowsInChunksUpToTheMaximum) {
  gmr_graph_arena_resource_config c = Config(0, MiB);
  c.max_capacity_bytes = 3 * MiB + 512 * KiB;
  gmr_graph_arena_resource *a = Make(c);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  Alloc(r, 600 * KiB);
  EXPECT_EQ(MiB, Stats(a).held_bytes);
  Alloc(r, 600 * KiB);  // does not fit the rest of the first chunk
  EXPECT_EQ(2 * MiB, Stats(a).held_bytes);
  Alloc(r, 300 * KiB);  // fits the first chunk's tail (first fit)
  EXPECT_EQ(2 * MiB, Stats(a).held_bytes);
  Alloc(r, 1536 * KiB);  // above chunk_bytes and under the limit: only the 1.5 MiB left
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(3 * MiB + 512 * KiB, st.held_bytes);
  EXPECT_EQ(3u, st.chunk_count);
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, MiB, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(r, f.where);
  EXPECT_STREQ("graph_arena: 1.0 MiB does not fit under max_capacity_bytes (3670016)", f.message);
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, WithoutChunkBytesTheArenaNeverGrowsOnDemand) {
  gmr_graph_arena_resource *a = Make(Config(MiB, 0));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  Alloc(r, MiB);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 1, 0, nullptr, &p, &f));
  EXPECT_STREQ("graph_arena: 256 bytes does not fit and growth is off (chunk_bytes is 0)",
               f.message);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, UpstreamFailureDuringGrowthChangesNothing) {
  gmr_graph_arena_resource *a = Make(Config(0, MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  void *p0 = Alloc(r, 512 * KiB);
  gmr_graph_arena_resource_stats before = Stats(a);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1,
                                                cudaErrorMemoryAllocation));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 768 * KiB, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(int{cudaErrorMemoryAllocation}, f.cuda_error);
  EXPECT_EQ(up_, f.where) << "the record names the resource that failed";
  gmr_graph_arena_resource_stats after = Stats(a);
  EXPECT_EQ(before.held_bytes, after.held_bytes);
  EXPECT_EQ(before.in_use_bytes, after.in_use_bytes);
  EXPECT_EQ(before.live_count, after.live_count);
  EXPECT_EQ(before.allocation_count, after.allocation_count);
  // The next try grows normally, and the old block was not disturbed.
  void *p1 = Alloc(r, 768 * KiB);
  EXPECT_EQ(2 * MiB, Stats(a).held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p0, 512 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p1, 768 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, MockUpstreamFailureStatusTravelsUp) {
  gmr_mock_resource *mock = gmr_mock_resource_create(up_);
  gmr_resource *m = gmr_mock_resource_as_resource(mock);
  gmr_graph_arena_resource *a = Make(Config(0, MiB), m);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_mock_resource_try_fail(mock, 0, 1, GMR_ERR_LIMIT_EXCEEDED, 0);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate_ex(r, 10, 0, nullptr, &p, &f));
  EXPECT_STREQ("mock_resource: planned failure", f.message);
  EXPECT_EQ(0u, Stats(a).held_bytes);
  EXPECT_EQ(1u, Stats(a).upstream_call_count);
  p = Alloc(r, 10);
  EXPECT_EQ(MiB, gmr_mock_resource_live_bytes(mock));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 10, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0u, gmr_mock_resource_live_bytes(mock));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(m));
}

TEST_F(GraphArena, TrimGivesBackWhollyFreeGrownChunksButKeepsTheInitialOne) {
  gmr_graph_arena_resource *a = Make(Config(MiB, MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  void *p0 = Alloc(r, MiB);
  void *p1 = Alloc(r, MiB);
  void *p2 = Alloc(r, 2 * MiB);
  EXPECT_EQ(4 * MiB, Stats(a).held_bytes);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, released) << "nothing is free";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p1, MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, released) << "a freed uncaptured block is held until reset";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));  // p0 and p2 too
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(3 * MiB, released);
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(MiB, st.held_bytes);
  EXPECT_EQ(4 * MiB, st.peak_held_bytes);
  EXPECT_EQ(1u, st.chunk_count);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  (void)p0;
  (void)p2;
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, TrimStopsAtAChunkTheUpstreamRefusesToTakeBack) {
  gmr_graph_arena_resource *a = Make(Config(0, MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  Alloc(r, MiB);
  Alloc(r, MiB);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_FREE, 1, 1, cudaErrorLaunchFailure));
  size_t released = 0;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_trim(r, &released));
  EXPECT_EQ(MiB, released) << "the first chunk went back, the second stayed";
  EXPECT_EQ(1u, Stats(a).chunk_count);
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(MiB, released);
  EXPECT_EQ(0u, Stats(a).held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- rewind outside capture ----------------------------------------------------

TEST_F(GraphArena, RewindFreesEverythingAfterTheMarkInLifoOrder) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  void *keep = Alloc(r, 1000);
  uint64_t outer = 0, inner = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, nullptr, &outer));
  void *b = Alloc(r, 300);
  void *c = Alloc(r, 5000);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, c, 5000, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, nullptr, &inner));
  EXPECT_NE(outer, inner);
  void *d = Alloc(r, 700);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, nullptr, inner, &released));
  EXPECT_EQ(1u, released);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, d, 700, 0, nullptr))
      << "the rewind freed it";
  EXPECT_EQ(d, Alloc(r, 700)) << "the same request after a rewind gets the same address";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, nullptr, outer, &released));
  EXPECT_EQ(2u, released);  // b and the second d; c was freed already
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_rewind(a, nullptr, outer, &released))
      << "a mark is used once";
  EXPECT_EQ(0u, released);
  EXPECT_EQ(b, Alloc(r, 300));
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(2u, st.live_count);
  EXPECT_EQ(1024u + 512u, st.in_use_bytes);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, keep, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, RewindToAnOuterMarkDropsTheInnerOnes) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  uint64_t m1 = 0, m2 = 0, m3 = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, nullptr, &m1));
  Alloc(r, 10);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, nullptr, &m2));
  Alloc(r, 10);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, nullptr, &m3));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, nullptr, m2, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_rewind(a, nullptr, m3, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_rewind(a, nullptr, 0, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_rewind(a, nullptr, 12345, nullptr));
  EXPECT_EQ(1u, Stats(a).live_count);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, nullptr, m1, &released));
  EXPECT_EQ(1u, released);
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, RewindRefusesToFreeAnotherStreamsLiveBlocks) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s1 = NewStream(), s2 = NewStream();
  uint64_t mark = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, s1, &mark));
  void *mine = Alloc(r, 100, s1);
  void *theirs = Alloc(r, 100, s2);
  size_t released = 7;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_rewind(a, s1, mark, &released));
  EXPECT_EQ(0u, released);
  EXPECT_EQ(2u, Stats(a).live_count) << "nothing changed";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, theirs, 100, 0, s2));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, s1, mark, &released));
  EXPECT_EQ(1u, released);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, mine, 100, 0, s1));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, NullArgumentsAreRejected) {
  gmr_graph_arena_resource_stats st = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_get_stats(nullptr, &st));
  EXPECT_EQ(0u, st.held_bytes);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_reset(nullptr, nullptr));
  uint64_t mark = 5;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_checkpoint(nullptr, nullptr, &mark));
  EXPECT_EQ(0u, mark);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_rewind(nullptr, nullptr, 1, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_return_block(nullptr, 1, nullptr));
  EXPECT_EQ(nullptr, gmr_graph_arena_resource_as_resource(nullptr));
  EXPECT_EQ(nullptr, gmr_graph_arena_resource_from_resource(nullptr));
  EXPECT_EQ(nullptr, gmr_graph_arena_resource_from_resource(
                         gmr_resource_find(nullptr, "graph_arena_resource")));
}

TEST_F(GraphArena, StatsHonourTheSizeVersionHeader) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  // A missing header (size 0, version 0) or one too short is refused, untouched.
  gmr_graph_arena_resource_stats st;
  std::memset(&st, 0xab, sizeof st);
  st.size = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_get_stats(a, &st));
  EXPECT_EQ(0xababababu, st.version);
  st = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
  st.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_get_stats(a, &st));
  // An older, shorter struct gets only what it has room for.
  st = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
  st.size = offsetof(gmr_graph_arena_resource_stats, peak_held_bytes);
  st.peak_held_bytes = 77;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_stats(a, &st));
  EXPECT_EQ(MiB, st.held_bytes);
  EXPECT_EQ(77u, st.peak_held_bytes);
  EXPECT_EQ(offsetof(gmr_graph_arena_resource_stats, peak_held_bytes), st.size);
  EXPECT_EQ(GMR_GRAPH_ARENA_RESOURCE_STATS_VERSION, st.version);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(a)));
}

}  // namespace
