// graph_arena_resource on the host simulation: creation, the arena outside
// capture (bump, reset, growth, rewind), capture sessions (explicit and
// detected), both capture policies, graph memories, ids, forwarding, and the
// error paths with fault injection.
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
#include "gmr/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "tests/support/capture_leaf.h"
#include "tests/support/mock_resource.h"
#include "tests/support/sim_fixture.h"

namespace {

using gmr_test::SimTest;

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

uintptr_t addr(const void *p) { return reinterpret_cast<uintptr_t>(p); }

class GraphArena : public SimTest {
 protected:
  gmr_cuda_resource *cuda_ = nullptr;
  gmr_resource *up_ = nullptr;
  std::vector<gmr_stream> streams_;

  void SetUp() override {
    SimTest::SetUp();
    gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &cuda_));
    up_ = gmr_cuda_resource_as_resource(cuda_);
  }

  void TearDown() override {
    for (gmr_stream s : streams_) EXPECT_EQ(GMR_OK, gmr_stream_destroy(s));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_));
    for (gmr_capture_leaf *l : leaves_) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_capture_leaf_as_resource(l)));
    }
    SimTest::TearDown();
  }

  std::vector<gmr_capture_leaf *> leaves_;

  // A cudaMalloc leaf that can (or cannot) allocate during capture, destroyed
  // after the test's arenas.
  gmr_capture_leaf *Leaf(bool can_capture) {
    gmr_capture_leaf *l = gmr_capture_leaf_create(can_capture);
    EXPECT_NE(nullptr, l);
    leaves_.push_back(l);
    return l;
  }

  static gmr_resource *R(gmr_capture_leaf *l) { return gmr_capture_leaf_as_resource(l); }

  gmr_stream NewStream() {
    gmr_stream s = nullptr;
    EXPECT_EQ(GMR_OK, gmr_stream_create(&s));
    streams_.push_back(s);
    return s;
  }

  static gmr_graph_arena_resource_config Config(
      size_t initial, size_t chunk = 0, gmr_graph_arena_policy policy = GMR_GRAPH_ARENA_MONOTONE) {
    gmr_graph_arena_resource_config c = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
    c.initial_capacity_bytes = initial;
    c.chunk_bytes = chunk;
    c.capture_policy = policy;
    return c;
  }

  gmr_graph_arena_resource *Make(const gmr_graph_arena_resource_config &c,
                                 gmr_resource *up = nullptr) {
    gmr_graph_arena_resource *a = nullptr;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_create(up != nullptr ? up : up_, &c, &a));
    return a;
  }

  static gmr_graph_arena_stats Stats(gmr_graph_arena_resource *a) {
    gmr_graph_arena_stats st = GMR_GRAPH_ARENA_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_get_stats(a, &st));
    return st;
  }

  static void *Alloc(gmr_resource *r, size_t bytes, gmr_stream s = nullptr) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_allocate(r, bytes, 0, s, &p)) << bytes;
    return p;
  }

  // The first byte of the arena's only chunk, found by the first uncaptured
  // allocation (then rewound away).
  static uintptr_t Base(gmr_graph_arena_resource *a) {
    uint64_t mark = 0;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, nullptr, &mark));
    void *p = Alloc(gmr_graph_arena_resource_as_resource(a), 1);
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, nullptr, mark, nullptr));
    return addr(p);
  }
};

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
  EXPECT_STREQ("graph_arena_resource", gmr_resource_type_name(r));
  EXPECT_EQ(a, gmr_graph_arena_resource_from_resource(r));
  EXPECT_EQ(nullptr, gmr_graph_arena_resource_from_resource(up_));
  EXPECT_EQ(up_, gmr_resource_get_upstream(r));
  EXPECT_EQ(a, gmr_graph_arena_resource_find_in_stack(r));
  EXPECT_EQ(nullptr, gmr_graph_arena_resource_find_in_stack(up_));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_graph_arena_stats st = Stats(a);
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p1, 512, 0, nullptr));
  void *p3 = Alloc(r, 256);
  EXPECT_EQ(base + 1280, addr(p3)) << "a freed block is not reused before a reset";
  gmr_graph_arena_stats st = Stats(a);
  EXPECT_EQ(1536u, st.in_use_bytes);
  EXPECT_EQ(256u + 512u + 256u, st.live_bytes);
  EXPECT_EQ(3u, st.live_count);
  EXPECT_EQ(5u, st.allocation_count);  // Base() made one
  EXPECT_EQ(0u, st.capture_allocation_count);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  // Wrong size, double free, unknown pointers: refused, nothing changes.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_deallocate(r, p0, 99, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_deallocate(r, p1, 512, 0, nullptr));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_deallocate(r, &local, 4, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_deallocate(r, static_cast<char *>(p2) + 256, 1, 0, nullptr))
      << "inside a block, where none ever started";
  EXPECT_EQ(3u, Stats(a).live_count);
  for (auto [p, n] : {std::pair{p0, 100}, {p2, 257}, {p3, 256}}) {
    EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, n, 0, nullptr));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, LargerAlignmentsAreHonouredInsideTheChunk) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  void *small = Alloc(r, 256);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 1000, 4096, nullptr, &p));
  EXPECT_EQ(0u, addr(p) % 4096);
  EXPECT_GT(addr(p), addr(small));
  void *q = Alloc(r, 256);  // the gap before p stays free and is used first
  EXPECT_EQ(addr(small) + 256, addr(q));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_allocate(r, 64, 3, nullptr, &p));
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
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, first[i], sizes[i], 0, nullptr));
  }
  gmr_graph_arena_stats before = Stats(a);
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, &released));
  EXPECT_EQ(first.size() - (first.size() + 2) / 3, released);
  EXPECT_EQ(0u, Stats(a).live_count);
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_deallocate(r, first[1], sizes[1], 0, nullptr))
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
  gmr_graph_arena_stats st = Stats(a);
  EXPECT_EQ(3 * MiB + 512 * KiB, st.held_bytes);
  EXPECT_EQ(3u, st.chunk_count);
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_allocate_ex(r, MiB, 0, nullptr, &p, &f));
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
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_allocate_ex(r, 1, 0, nullptr, &p, &f));
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
  gmr_graph_arena_stats before = Stats(a);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1,
                                                cudaErrorMemoryAllocation));
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_allocate_ex(r, 768 * KiB, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(int{cudaErrorMemoryAllocation}, f.cuda_error);
  EXPECT_EQ(up_, f.where) << "the record names the resource that failed";
  gmr_graph_arena_stats after = Stats(a);
  EXPECT_EQ(before.held_bytes, after.held_bytes);
  EXPECT_EQ(before.in_use_bytes, after.in_use_bytes);
  EXPECT_EQ(before.live_count, after.live_count);
  EXPECT_EQ(before.allocation_count, after.allocation_count);
  // The next try grows normally, and the old block was not disturbed.
  void *p1 = Alloc(r, 768 * KiB);
  EXPECT_EQ(2 * MiB, Stats(a).held_bytes);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p0, 512 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p1, 768 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, MockUpstreamFailureStatusTravelsUp) {
  gmr_mock_resource *mock = gmr_mock_resource_create(up_);
  gmr_resource *m = gmr_mock_resource_as_resource(mock);
  gmr_graph_arena_resource *a = Make(Config(0, MiB), m);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_mock_resource_try_fail(mock, 0, 1, GMR_ERR_LIMIT_EXCEEDED, 0);
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_allocate_ex(r, 10, 0, nullptr, &p, &f));
  EXPECT_STREQ("mock_resource: planned failure", f.message);
  EXPECT_EQ(0u, Stats(a).held_bytes);
  EXPECT_EQ(1u, Stats(a).upstream_call_count);
  p = Alloc(r, 10);
  EXPECT_EQ(MiB, gmr_mock_resource_live_bytes(mock));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 10, 0, nullptr));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p1, MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, released) << "a freed uncaptured block is held until reset";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));  // p0 and p2 too
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(3 * MiB, released);
  gmr_graph_arena_stats st = Stats(a);
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, c, 5000, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, nullptr, &inner));
  EXPECT_NE(outer, inner);
  void *d = Alloc(r, 700);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, nullptr, inner, &released));
  EXPECT_EQ(1u, released);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_deallocate(r, d, 700, 0, nullptr)) << "the rewind freed it";
  EXPECT_EQ(d, Alloc(r, 700)) << "the same request after a rewind gets the same address";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, nullptr, outer, &released));
  EXPECT_EQ(2u, released);  // b and the second d; c was freed already
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_rewind(a, nullptr, outer, &released))
      << "a mark is used once";
  EXPECT_EQ(0u, released);
  EXPECT_EQ(b, Alloc(r, 300));
  gmr_graph_arena_stats st = Stats(a);
  EXPECT_EQ(2u, st.live_count);
  EXPECT_EQ(1024u + 512u, st.in_use_bytes);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, keep, 1000, 0, nullptr));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, theirs, 100, 0, s2));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, s1, mark, &released));
  EXPECT_EQ(1u, released);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_deallocate(r, mine, 100, 0, s1));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- capture sessions ---------------------------------------------------------------

TEST_F(GraphArena, ExplicitSessionServesACaptureWithoutAnyCudaCall) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  uintptr_t base = Base(a);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  uint64_t queries = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  void *p0 = Alloc(r, 1000, s);
  void *p1 = Alloc(r, 3000, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p0, 1000, 0, s));
  void *p2 = Alloc(r, 1000, s);
  EXPECT_EQ(base, addr(p0));
  EXPECT_EQ(base + 1024, addr(p1));
  EXPECT_EQ(base + 1024 + 3072, addr(p2)) << "monotone: p0's bytes are not reused";
  EXPECT_EQ(queries, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO));
  EXPECT_EQ(mallocs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &graph));
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
  gmr_graph_arena_stats st = Stats(a);
  EXPECT_EQ(3u, st.capture_allocation_count);
  EXPECT_EQ(0u, st.upstream_call_during_capture_count);
  EXPECT_EQ(1u, st.graph_memory_count);
  EXPECT_EQ(0u, st.open_session_count);
  // The memory is kept: an uncaptured request does not get those bytes.
  void *after = Alloc(r, 256);
  EXPECT_EQ(base + 5120, addr(after));
  EXPECT_EQ(GMR_OK, gmr_graph_destroy(graph));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_release_graph_memory(a, mem));
  // Released, its freed bytes are back; its live blocks come back when freed.
  EXPECT_EQ(256u + 4096u, Stats(a).in_use_bytes);
  gmr_graph_arena_block_info bi;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_find_block(a, p1, &bi));
  EXPECT_EQ(nullptr, bi.memory);
  EXPECT_TRUE(bi.captured);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p1, 3000, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p2, 1000, 0, s));
  EXPECT_EQ(256u, Stats(a).in_use_bytes);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, after, 256, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, CaptureTimeExhaustionRefusesChangesNothingAndKeepsTheCapture) {
  // Nothing below can allocate during capture: the arena refuses and advises.
  gmr_graph_arena_resource *a = Make(Config(MiB, MiB), R(Leaf(false)));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *p0 = Alloc(r, 768 * KiB, s);
  gmr_graph_arena_stats before = Stats(a);
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_allocate_ex(r, 512 * KiB, 0, s, &p, &f));
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
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_allocate_ex(r, 256 * KiB, 0, s, &p, &f));
  EXPECT_STREQ(
      "graph_arena: capture needs 896.0 KiB more and plain_leaf cannot allocate during capture: "
      "call gmr_graph_arena_resource_reserve(arena, 1966080) before it",
      f.message);
  EXPECT_EQ(128 * KiB, f.free_bytes);
  gmr_graph_arena_stats after = Stats(a);
  EXPECT_EQ(before.held_bytes, after.held_bytes);
  EXPECT_EQ(before.live_count + 1, after.live_count);
  EXPECT_EQ(2u, after.capture_refusal_count);
  EXPECT_EQ(896 * KiB, after.capture_shortfall_bytes);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC)) << "never grown in capture";
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_graph_arena_resource_reserve(a, MiB))
      << "not during capture";
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &graph)) << "the capture was not invalidated";
  ASSERT_EQ(GMR_OK, gmr_graph_destroy(graph));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p0, 768 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p1, 128 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));

  // Follow the advice, then the same capture fits.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(a, 1966080));
  EXPECT_EQ(MiB + 896 * KiB, Stats(a).held_bytes);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(a, 1966080)) << "already there: no call";
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  std::vector<std::pair<void *, size_t>> got;
  for (size_t n : {768 * KiB, 512 * KiB, 128 * KiB, 256 * KiB}) got.emplace_back(Alloc(r, n, s), n);
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &graph));
  ASSERT_EQ(GMR_OK, gmr_graph_destroy(graph));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  for (auto &[q, n] : got) ASSERT_EQ(GMR_OK, gmr_deallocate(r, q, n, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(capturing));
  void *fits = Alloc(r, 512 * KiB, other);  // uncaptured, from the free space
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_allocate_ex(r, 768 * KiB, 0, other, &p, &f));
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
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(capturing, &graph));
  ASSERT_EQ(GMR_OK, gmr_graph_destroy(graph));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, capturing, &mem));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  p = Alloc(r, 768 * KiB, other);  // now it grows
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(0u, Stats(a).upstream_call_during_capture_count);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, fits, 512 * KiB, 0, other));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 768 * KiB, 0, other));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, CudaResourceRefusesInCaptureWhereTheArenaServes) {
  // The same requests inside a capture: cudaMalloc is not allowed there, the
  // arena is; neither breaks the capture.
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_allocate_ex(up_, 4096, 0, s, &p, &f));
  EXPECT_EQ(nullptr, p);
  void *q = Alloc(r, 4096, s);  // detected: served in an automatic session
  EXPECT_EQ(1u, Stats(a).capture_allocation_count);
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &graph));
  ASSERT_EQ(GMR_OK, gmr_graph_destroy(graph));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, q, 4096, 0, s));
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

  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *c1 = Alloc(r, 256, s);
  void *c2 = Alloc(r, 256, s);
  EXPECT_EQ(q0 + 3, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO))
      << "one capture query per allocation";
  gmr_graph g1 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &g1));
  // A second capture on the same stream: a new id, a new session and memory.
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *d1 = Alloc(r, 256, s);
  gmr_graph_arena_stats st = Stats(a);
  EXPECT_EQ(3u, st.capture_allocation_count);
  EXPECT_EQ(1u, st.open_session_count);
  EXPECT_EQ(2u, st.graph_memory_count);
  gmr_graph g2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &g2));
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
  EXPECT_EQ(GMR_OK, gmr_graph_destroy(g1));
  EXPECT_EQ(GMR_OK, gmr_graph_destroy(g2));
  for (void *p : {pre, c1, c2, d1, post}) ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 256, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m1));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m2));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, AnAutomaticSessionCanBeDeclaredAndEndedExplicitly) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *p0 = Alloc(r, 256, s);  // detected
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));  // now explicit
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  uint64_t q = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  void *p1 = Alloc(r, 256, s);
  EXPECT_EQ(q, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &g));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, mem, &info));
  EXPECT_EQ(2u, info.allocation_count) << "one memory for the whole capture";
  ASSERT_EQ(GMR_OK, gmr_graph_destroy(g));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p0, 256, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p1, 256, 0, s));
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
  for (void *p : {p0, p1, p2}) ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 256, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(GraphArena, CaptureQueryFailureIsReportedAndChangesNothing) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO, 0, 1,
                                                cudaErrorInvalidResourceHandle));
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_allocate_ex(r, 256, 0, nullptr, &p, &f));
  EXPECT_EQ(int{cudaErrorInvalidResourceHandle}, f.cuda_error);
  EXPECT_EQ(0u, Stats(a).allocation_count);
  uint64_t mark = 0;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO, 0, 1,
                                                cudaErrorInvalidResourceHandle));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_graph_arena_resource_checkpoint(a, nullptr, &mark));
  EXPECT_EQ(0u, mark);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- policies -----------------------------------------------------------------------

class GraphArenaPolicy : public GraphArena,
                         public ::testing::WithParamInterface<gmr_graph_arena_policy> {
 protected:
  bool reuse() const { return GetParam() == GMR_GRAPH_ARENA_ORDERED_REUSE; }
};

TEST_P(GraphArenaPolicy, AFreeDuringCaptureIsReusedOnlyUnderOrderedReuse) {
  gmr_graph_arena_resource *a = Make(Config(MiB, 0, GetParam()));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream(), other = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *x = Alloc(r, 2 * KiB, s);
  void *y = Alloc(r, 2 * KiB, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, x, 2 * KiB, 0, s));
  void *z = Alloc(r, KiB, s);  // fits in x's bytes
  if (reuse()) {
    EXPECT_EQ(x, z);
  } else {
    EXPECT_EQ(addr(y) + 2 * KiB, addr(z));
  }
  // Freed on another stream: never reused in the capture (no ordering known).
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, y, 2 * KiB, 0, other));
  void *w = Alloc(r, 2 * KiB, s);
  EXPECT_NE(y, w);
  EXPECT_GT(addr(w), addr(y));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  gmr_graph_memory_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, mem, &info));
  EXPECT_EQ(reuse() ? 6 * KiB : 7 * KiB, info.held_bytes);
  EXPECT_EQ(3 * KiB, info.live_bytes);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, z, KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, w, 2 * KiB, 0, s));
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
    ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
    std::vector<void *> got;
    for (size_t i = 0; i < sizes.size(); ++i) {
      got.push_back(Alloc(r, sizes[i], s));
      if (i % 4 == 3) {  // free some in the capture: policies differ here
        ASSERT_EQ(GMR_OK, gmr_deallocate(r, got[i - 2], sizes[i - 2], 0, s));
      }
    }
    gmr_graph graph = nullptr;
    ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &graph));
    gmr_graph_memory *mem = nullptr;
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
    ASSERT_EQ(GMR_OK, gmr_graph_destroy(graph));
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (i % 4 != 1) {
        ASSERT_EQ(GMR_OK, gmr_deallocate(r, got[i], sizes[i], 0, s));
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
      ASSERT_EQ(GMR_OK, gmr_deallocate(r, reinterpret_cast<void *>(live[k].begin),
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
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, reinterpret_cast<void *>(l.begin), l.bytes, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, t1, KiB, 0, s));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, s, mark, &released));
  EXPECT_EQ(1u, released);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_deallocate(r, t0, KiB, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, keep, KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, next, KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(GraphArenaPolicy, GraphsShareOneMemory) {
  gmr_graph_arena_resource *a = Make(Config(MiB, 0, GetParam()));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream(), s2 = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *x = Alloc(r, 4 * KiB, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, x, 4 * KiB, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, y, 4 * KiB, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 2 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r)) << "an open session";
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r)) << "a held graph memory";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  // An automatic session the arena has not seen end: it may still be open
  // (the arena never asks CUDA about a stream outside a request on it).
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *q = Alloc(r, 256, s);
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &g));
  ASSERT_EQ(GMR_OK, gmr_graph_destroy(g));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, q, 256, 0, s));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r)) << "an open automatic session";
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_reset(a, nullptr));
  // Seen to end (a request outside capture on its stream): unclaimed memory,
  // still BUSY until a reset releases it.
  void *outside = Alloc(r, 256, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, outside, 256, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 2 * MiB, 0, nullptr));
  // The second cudaFree fails: one chunk is gone, one stays.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_FREE, 1, 1, cudaErrorLaunchFailure));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r));
  gmr_graph_arena_stats st = Stats(a);
  EXPECT_EQ(1u, st.chunk_count);
  EXPECT_EQ(0u, st.in_use_bytes);
  void *q = Alloc(r, 100);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, q, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- ids --------------------------------------------------------------------------------

TEST_F(GraphArena, BlocksHaveIdsThatFindAndReturnThem) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_stream s = NewStream();
  void *p = nullptr;
  uint64_t id = 0;
  gmr_failure f;
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

  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *cap = Alloc(r, 5000, s);  // detected: from the arena
  EXPECT_EQ(2u, gmr_mock_resource_called_allocate(mock));
  void *f2 = Alloc(r, 100, other);  // another stream: forwarded, counted
  EXPECT_EQ(3u, gmr_mock_resource_called_allocate(mock));
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_deallocate(r, f1, 5000, 0, s))
      << "never an upstream call for a capturing stream";
  EXPECT_EQ(0u, gmr_mock_resource_called_deallocate(mock));
  gmr_graph_arena_stats st = Stats(a);
  EXPECT_EQ(1u, st.capture_allocation_count);
  EXPECT_EQ(2u, st.forwarded_allocation_count);
  EXPECT_EQ(2u, st.forwarded_live_count);
  EXPECT_EQ(3u, st.upstream_call_count);
  EXPECT_EQ(1u, st.upstream_call_during_capture_count);
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &g)) << "nothing broke the capture";
  ASSERT_EQ(GMR_OK, gmr_graph_destroy(g));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &mem));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, f1, 5000, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, f2, 100, 0, other));
  EXPECT_EQ(2u, gmr_mock_resource_called_deallocate(mock));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_deallocate(r, f2, 100, 0, other))
      << "nothing of the arena's is upstream any more: not its pointer";
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_deallocate(r, static_cast<char *>(cap) + 256, 10, 0, s))
      << "inside a chunk but not a block";
  EXPECT_EQ(0u, Stats(a).forwarded_live_count);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, cap, 5000, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 3 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(MiB, fp.held_bytes);
  EXPECT_EQ(4 * MiB, fp.peak_held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

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
      if (gmr_stream_begin_capture(s) != GMR_OK) failures++;
      std::vector<std::pair<void *, size_t>> live;
      for (int i = 0; i < 300; ++i) {
        size_t bytes = 1 + rng() % (16 * KiB);
        void *p = nullptr;
        if (gmr_allocate(r, bytes, 0, s, &p) != GMR_OK) {
          failures++;
          continue;
        }
        std::memset(p, t, bytes);
        live.emplace_back(p, bytes);
        held[t * kRounds + round].emplace_back(addr(p), addr(p) + bytes);
        if (i % 5 == 4) {
          auto [q, n] = live[live.size() / 2];
          if (gmr_deallocate(r, q, n, 0, s) != GMR_OK) failures++;
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
      if (gmr_stream_end_capture(s, &g) != GMR_OK) failures++;
      gmr_graph_memory *mem = nullptr;
      if (gmr_graph_arena_resource_end_capture(a, s, &mem) != GMR_OK) failures++;
      for (auto &[p, n] : live) {
        if (gmr_deallocate(r, p, n, 0, s) != GMR_OK) failures++;
      }
      // Keep the memory of odd rounds until the end: still no overlap.
      if (round % 2 == 0) {
        if (gmr_graph_destroy(g) != GMR_OK) failures++;
        if (gmr_graph_arena_resource_release_graph_memory(a, mem) != GMR_OK) failures++;
        held[t * kRounds + round].clear();
      } else {
        if (gmr_graph_destroy(g) != GMR_OK) failures++;
        if (gmr_graph_arena_resource_release_graph_memory(a, mem) != GMR_OK) failures++;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  gmr_graph_arena_stats st = Stats(a);
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

TEST_F(GraphArena, NullArgumentsAreRejected) {
  gmr_graph_arena_stats st = GMR_GRAPH_ARENA_STATS_INIT;
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
  EXPECT_EQ(nullptr, gmr_graph_arena_resource_find_in_stack(nullptr));
}

}  // namespace

TEST_F(GraphArena, StatsHonourTheSizeVersionHeader) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  // A missing header (size 0, version 0) or one too short is refused, untouched.
  gmr_graph_arena_stats st;
  std::memset(&st, 0xab, sizeof st);
  st.size = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_get_stats(a, &st));
  EXPECT_EQ(0xababababu, st.version);
  st = GMR_GRAPH_ARENA_STATS_INIT;
  st.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_get_stats(a, &st));
  // An older, shorter struct gets only what it has room for.
  st = GMR_GRAPH_ARENA_STATS_INIT;
  st.size = offsetof(gmr_graph_arena_stats, peak_held_bytes);
  st.peak_held_bytes = 77;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_stats(a, &st));
  EXPECT_EQ(MiB, st.held_bytes);
  EXPECT_EQ(77u, st.peak_held_bytes);
  EXPECT_EQ(offsetof(gmr_graph_arena_stats, peak_held_bytes), st.size);
  EXPECT_EQ(GMR_GRAPH_ARENA_STATS_VERSION, st.version);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(a)));
}
