// graph_arena_resource on the host simulation: ordered reuse carving from a
// capture's freed bytes and the free space as one range (exact addresses),
// and the graph pool sharing its upstream's memory (UNCAPTURED_FORWARD): the
// upstream's free blocks taken when a capture starts, never by growing it;
// idle chunks given back when a capture ends and when a memory is released;
// what the caller reserved kept; failures on both ways changing nothing else.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

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
#include "gmr/pool_resource.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/capture_leaf.h"
#include "tests/support/graph_arena_fixture.h"
#include "tests/support/mock_resource.h"

namespace {

using gmr_test::addr;
using gmr_test::ArenaCapture;
using gmr_test::KiB;
using gmr_test::MiB;

// ---- ordered reuse: freed bytes and free space as one range ------------------------------

gmr_graph_memory_info MemoryInfo(gmr_graph_arena_resource *a, gmr_graph_memory *m) {
  gmr_graph_memory_info info;
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_get_graph_memory_info(a, m, &info));
  return info;
}

TEST_F(ArenaCapture, OrderedReuseJoinsFreedBytesWithTheFreeSpaceTheyTouch) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(MiB, 0, GMR_GRAPH_ARENA_ORDERED_REUSE), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *x = Alloc(r, 128 * KiB, s);
  const uintptr_t base = addr(x);
  void *y = Alloc(r, 128 * KiB, s);
  void *z = Alloc(r, 256 * KiB, s);
  EXPECT_EQ(base + 128 * KiB, addr(y));
  EXPECT_EQ(base + 256 * KiB, addr(z));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 128 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, z, 256 * KiB, 0, s));
  // Free ranges of the capture: x's [0,128K) alone, and z's [256K,512K)
  // touching the free space [512K,1M): one range of 768 KiB.
  void *u = Alloc(r, 128 * KiB, s);
  EXPECT_EQ(base, addr(u)) << "best fit: x's bytes, the smaller range";
  void *v = Alloc(r, 640 * KiB, s);
  EXPECT_EQ(base + 256 * KiB, addr(v)) << "z's bytes and the free space after them";
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(0u, st.capture_refusal_count);
  EXPECT_EQ(896 * KiB, st.in_use_bytes);
  // 128 KiB are left, so 256 KiB do not fit (growth is off).
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate(r, 256 * KiB, 0, s, &p));
  gmr_graph_memory *m = EndCapture(a, s);
  EXPECT_EQ(896 * KiB, MemoryInfo(a, m).held_bytes) << "512 KiB carved, then 384 KiB more";
  for (auto [q, n] : {std::pair{u, 128 * KiB}, {y, 128 * KiB}, {v, 640 * KiB}}) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, n, 0, s));
  }
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, BytesFreedOnAnotherStreamAreNotJoinedForThisOne) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource *a = Make(Config(MiB, 0, GMR_GRAPH_ARENA_ORDERED_REUSE), R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream(), other = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *w = Alloc(r, 768 * KiB, s);
  const uintptr_t base = addr(w);
  // Freed on `other`: reusable only by `other`, though it touches the free
  // space [768K,1M).
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, w, 768 * KiB, 0, other));
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate(r, 512 * KiB, 0, s, &p));
  void *q = Alloc(r, 256 * KiB, s);
  EXPECT_EQ(base + 768 * KiB, addr(q)) << "the free space alone";
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 256 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaCapture, WithNvtxAnnotationFreedBytesAndFreeSpaceStayApart) {
  // Regions may not overlap: a block carved across both would need a region
  // over part of a widened one.
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource_config c = Config(MiB, 0, GMR_GRAPH_ARENA_ORDERED_REUSE);
  c.nvtx_annotate = true;
  gmr_graph_arena_resource *a = Make(c, R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *x = Alloc(r, 256 * KiB, s);
  const uintptr_t base = addr(x);
  void *z = Alloc(r, 256 * KiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, z, 256 * KiB, 0, s));
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate(r, 640 * KiB, 0, s, &p))
      << "z's 256 KiB and the free 512 KiB are not one range here";
  void *v = Alloc(r, 512 * KiB, s);
  EXPECT_EQ(base + 512 * KiB, addr(v));
  void *u = Alloc(r, 256 * KiB, s);
  EXPECT_EQ(base + 256 * KiB, addr(u)) << "z's bytes, whole";
  gmr_graph_memory *m = EndCapture(a, s);
  for (auto [q, n] : {std::pair{x, 256 * KiB}, {v, 512 * KiB}, {u, 256 * KiB}}) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, n, 0, s));
  }
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- the graph pool shares its upstream's memory ------------------------------------------

// A stack `graph_arena(detect=explicit, ...) > pool > cuda(kind=device)` whose
// pool has one arena and takes chunks of exactly what a request needs (at
// least 2 MiB).
class SharedPool : public ArenaCapture {
 protected:
  gmr_stack *stack_ = nullptr;
  gmr_resource *top_ = nullptr;
  gmr_graph_arena_resource *arena_ = nullptr;
  gmr_resource *pool_ = nullptr;

  void TearDown() override {
    if (stack_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack_));
    }
    ArenaCapture::TearDown();
  }

  void Build(const std::string &arena_options) {
    std::string spec = "graph_arena(detect=explicit" + arena_options +
                       ") > pool(arenas=1, min_growth=2MiB, max_growth=2MiB) > cuda(kind=device)";
    gmr_spec_error e;
    ASSERT_EQ(GMR_OK, gmr_stack_create(spec.c_str(), &stack_, &e)) << e.message;
    top_ = gmr_stack_as_resource(stack_);
    arena_ =
        gmr_graph_arena_resource_from_resource(gmr_resource_find(top_, "graph_arena_resource"));
    pool_ = gmr_resource_find(gmr_stack_as_resource(stack_), "pool_resource");
    ASSERT_NE(nullptr, arena_);
    ASSERT_NE(nullptr, pool_);
  }

  size_t PoolHeld() const {
    gmr_footprint f;
    EXPECT_EQ(GMR_OK, gmr_resource_get_footprint(pool_, &f));
    return f.held_bytes;
  }
  size_t PoolPeak() const {
    gmr_footprint f;
    EXPECT_EQ(GMR_OK, gmr_resource_get_footprint(pool_, &f));
    return f.peak_held_bytes;
  }
  size_t PoolFree() const {
    gmr_memory_info info = GMR_MEMORY_INFO_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_get_memory_info(pool_, &info));
    return info.free_bytes;
  }

  // Blocks of `a` and `b` bytes allocated and freed on `w` (a stream other
  // than the capture's, as a warm-up on a side stream): free pool memory that
  // a capture could not get from the pool.
  std::pair<void *, void *> WarmUp(gmr_stream w, size_t a, size_t b) {
    void *p = Alloc(pool_, a, w);
    void *q = Alloc(pool_, b, w);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(pool_, p, a, 0, w));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(pool_, q, b, 0, w));
    return {p, q};
  }
};

TEST_F(SharedPool, TheCaptureUsesThePoolsFreeBlocksAndGivesBackWhatItDidNotUse) {
  Build(", uncaptured=forward, policy=ordered_reuse, chunk=1MiB");
  gmr_stream w = NewStream(), s = NewStream();
  auto [p32, p8] = WarmUp(w, 32 * MiB, 8 * MiB);
  ASSERT_EQ(40 * MiB, PoolHeld());
  ASSERT_EQ(40 * MiB, PoolFree());
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(arena_, s, nullptr));
  gmr_graph_arena_resource_stats st = Stats(arena_);
  EXPECT_EQ(2u, st.adopted_chunk_count) << "32 MiB, then 8 MiB";
  EXPECT_EQ(40 * MiB, st.adopted_bytes);
  EXPECT_EQ(40 * MiB, st.held_bytes);
  EXPECT_EQ(40 * MiB, PoolPeak()) << "taken from what the pool held, nothing more";
  EXPECT_EQ(0u, PoolFree());
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *c = Alloc(top_, 4 * MiB, s);
  EXPECT_EQ(addr(p8), addr(c)) << "best fit: the 8 MiB block";
  EXPECT_EQ(0u, Stats(arena_).capture_growth_count);
  EXPECT_EQ(0u, Stats(arena_).upstream_call_during_capture_count);
  gmr_graph_memory *m = EndCapture(arena_, s);
  st = Stats(arena_);
  EXPECT_EQ(1u, st.returned_chunk_count) << "the untouched 32 MiB block";
  EXPECT_EQ(32 * MiB, st.returned_bytes);
  EXPECT_EQ(8 * MiB, st.held_bytes);
  EXPECT_EQ(32 * MiB, PoolFree());
  // Traffic outside captures gets it back, the footprint unchanged.
  void *q = Alloc(top_, 32 * MiB, w);
  EXPECT_EQ(addr(p32), addr(q));
  EXPECT_EQ(40 * MiB, PoolPeak());
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, q, 32 * MiB, 0, w));
  // Released, the memory's chunk goes back too.
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, c, 4 * MiB, 0, s));
  EXPECT_EQ(8 * MiB, Stats(arena_).held_bytes) << "the memory keeps its freed bytes";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena_, m));
  st = Stats(arena_);
  EXPECT_EQ(2u, st.returned_chunk_count);
  EXPECT_EQ(0u, st.held_bytes);
  EXPECT_EQ(40 * MiB, PoolFree());
  EXPECT_EQ(40 * MiB, PoolPeak());
}

TEST_F(SharedPool, ACaptureThatNeedsMoreGrowsAndItsChunkGoesBackAtRelease) {
  Build(", uncaptured=forward, policy=monotone, chunk=2MiB");
  gmr_stream w = NewStream(), s = NewStream();
  auto [p4, p2] = WarmUp(w, 4 * MiB, 2 * MiB);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(arena_, s, nullptr));
  EXPECT_EQ(2u, Stats(arena_).adopted_chunk_count);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *a = Alloc(top_, 4 * MiB, s);
  void *b = Alloc(top_, 2 * MiB, s);
  void *c = Alloc(top_, 2 * MiB, s);  // nothing left: grows, capture-safe
  EXPECT_EQ(addr(p4), addr(a));
  EXPECT_EQ(addr(p2), addr(b));
  gmr_graph_arena_resource_stats st = Stats(arena_);
  EXPECT_EQ(1u, st.capture_growth_count);
  EXPECT_EQ(8 * MiB, st.held_bytes);
  EXPECT_EQ(8 * MiB, PoolHeld());
  gmr_graph_memory *m = EndCapture(arena_, s);
  EXPECT_EQ(0u, Stats(arena_).returned_chunk_count) << "every chunk holds a block";
  for (auto [p, n] : {std::pair{a, 4 * MiB}, {b, 2 * MiB}, {c, 2 * MiB}}) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, n, 0, s));
  }
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena_, m));
  st = Stats(arena_);
  EXPECT_EQ(3u, st.returned_chunk_count);
  EXPECT_EQ(0u, st.held_bytes);
  EXPECT_EQ(8 * MiB, PoolFree());
}

TEST_F(SharedPool, InitialAndReservedChunksStay) {
  Build(", uncaptured=forward, policy=ordered_reuse, chunk=1MiB, initial=2MiB");
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(arena_, 6 * MiB));
  ASSERT_EQ(6 * MiB, Stats(arena_).held_bytes);
  ASSERT_EQ(0u, PoolFree()) << "the pool's chunks are the arena's, nothing to take";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(arena_, s, nullptr));
  EXPECT_EQ(0u, Stats(arena_).adopted_chunk_count);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *big = Alloc(top_, 8 * MiB, s);  // more than initial + reserve: grows
  gmr_graph_memory *m = EndCapture(arena_, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, big, 8 * MiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena_, m));
  gmr_graph_arena_resource_stats st = Stats(arena_);
  EXPECT_EQ(1u, st.capture_growth_count);
  EXPECT_EQ(1u, st.returned_chunk_count) << "only the grown chunk";
  EXPECT_EQ(8 * MiB, st.returned_bytes);
  EXPECT_EQ(6 * MiB, st.held_bytes) << "initial and reserved stay, as asked";
}

TEST_F(SharedPool, NothingIsTakenOutsideTheGraphPoolOrOnceTheCaptureRuns) {
  gmr_stream w = NewStream(), s = NewStream(), t = NewStream();
  // uncaptured=arena: the arena is an allocator of its own; chunk=0: it may
  // not grow at all.
  for (const char *options : {", uncaptured=arena, chunk=1MiB", ", uncaptured=forward, chunk=0"}) {
    SCOPED_TRACE(options);
    Build(options);
    WarmUp(w, 4 * MiB, 2 * MiB);
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(arena_, s, nullptr));
    EXPECT_EQ(0u, Stats(arena_).adopted_chunk_count);
    EXPECT_EQ(0u, Stats(arena_).held_bytes);
    EXPECT_EQ(6 * MiB, PoolFree());
    gmr_graph_memory *m = nullptr;
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(arena_, s, &m));
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena_, m));
    EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack_));
    stack_ = nullptr;
  }
  Build(", uncaptured=forward, chunk=1MiB");
  WarmUp(w, 4 * MiB, 2 * MiB);
  // Declared after the capture began: the pool could not serve it in a
  // capture, so nothing is asked of it; the capture stays valid.
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(arena_, s, nullptr));
  EXPECT_EQ(0u, Stats(arena_).adopted_chunk_count);
  gmr_graph_memory *m = EndCapture(arena_, s);
  // A second capture while one is open: the pool's calls could touch the
  // first one's stream; the first takes, the second does not.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(arena_, s, nullptr));
  EXPECT_EQ(2u, Stats(arena_).adopted_chunk_count);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(arena_, t, nullptr));
  EXPECT_EQ(2u, Stats(arena_).adopted_chunk_count);
  gmr_graph_memory *ms = nullptr, *mt = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(arena_, t, &mt));
  EXPECT_EQ(0u, Stats(arena_).returned_chunk_count) << "s's session is still open";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(arena_, s, &ms));
  EXPECT_EQ(2u, Stats(arena_).returned_chunk_count) << "the last one out gives back";
  for (gmr_graph_memory *x : {m, ms, mt}) {
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena_, x));
  }
}

TEST_F(SharedPool, SmallFreeBlocksAreNotTakenAndNotEvenAskedAbout) {
  Build(", uncaptured=forward, chunk=1MiB");
  gmr_stream w = NewStream(), s = NewStream();
  // Below 2 MiB: a pool chunk of 2 MiB in one 1 MiB and one 1 MiB-less block.
  void *p = Alloc(top_, MiB, w);
  void *q = Alloc(top_, MiB, w);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, MiB, 0, w));
  uint64_t queries = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(arena_, s, nullptr));
  EXPECT_EQ(0u, Stats(arena_).adopted_chunk_count);
  EXPECT_EQ(queries, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO));
  gmr_graph_memory *m = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(arena_, s, &m));
  EXPECT_EQ(queries, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO))
      << "nothing to give back: no query";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena_, m));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, q, MiB, 0, w));
}

// ---- failures ------------------------------------------------------------------------------

// An upstream that says it has an 8 MiB free block but gets it from its own
// upstream (a leaf) each time: taking it would make it grow.
struct Boaster {
  gmr_resource base;
  gmr_resource *leaf;
};

gmr_status BoasterAllocate(gmr_resource *self, size_t bytes, size_t alignment, gmr_stream stream,
                           void **out, gmr_failure *failure) {
  return gmr_resource_allocate_ex(reinterpret_cast<Boaster *>(self)->leaf, bytes, alignment, stream,
                                  out, failure);
}
gmr_status BoasterAllocateCapturing(gmr_resource *self, size_t bytes, size_t alignment,
                                    gmr_stream stream, void **out, gmr_failure *failure) {
  return gmr_resource_allocate_capturing(reinterpret_cast<Boaster *>(self)->leaf, bytes, alignment,
                                         stream, out, failure);
}
gmr_status BoasterDeallocate(gmr_resource *self, void *p, size_t bytes, size_t alignment,
                             gmr_stream stream) {
  return gmr_resource_deallocate(reinterpret_cast<Boaster *>(self)->leaf, p, bytes, alignment,
                                 stream);
}
gmr_status BoasterDestroy(gmr_resource *) { return GMR_OK; }
gmr_status BoasterFootprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_capture_leaf *leaf = reinterpret_cast<const gmr_capture_leaf *>(
      reinterpret_cast<const Boaster *>(self)->leaf);
  out->held_bytes = gmr_capture_leaf_live_bytes(leaf);
  out->peak_held_bytes = out->held_bytes;
  return GMR_OK;
}
gmr_status BoasterMemoryInfo(const gmr_resource *, gmr_memory_info *out) {
  out->free_bytes = 8 * MiB;
  out->largest_free_block_bytes = 8 * MiB;
  out->free_block_count = 1;
  return GMR_OK;
}

const gmr_resource_vtbl kBoasterVtbl = [] {
  gmr_resource_vtbl v{};
  v.version = GMR_RESOURCE_VTBL_VERSION;
  v.type_name = "boaster";
  v.allocate = BoasterAllocate;
  v.deallocate = BoasterDeallocate;
  v.destroy = BoasterDestroy;
  v.get_footprint = BoasterFootprint;
  v.get_memory_info = BoasterMemoryInfo;
  v.allocate_capturing = BoasterAllocateCapturing;
  return v;
}();

TEST_F(ArenaCapture, TakingNeverMakesTheUpstreamGrow) {
  gmr_capture_leaf *leaf = Leaf(true);
  Boaster boaster{{&kBoasterVtbl}, R(leaf)};
  gmr_graph_arena_resource_config c = Config(0, MiB, GMR_GRAPH_ARENA_ORDERED_REUSE);
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *a = Make(c, &boaster.base);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  unsigned long calls = gmr_capture_leaf_allocate_calls(leaf);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(0u, st.adopted_chunk_count);
  EXPECT_EQ(0u, st.held_bytes);
  EXPECT_EQ(calls + 1, gmr_capture_leaf_allocate_calls(leaf)) << "tried once, then stopped";
  EXPECT_EQ(0u, gmr_capture_leaf_live_bytes(leaf)) << "and gave it back at once";
  EXPECT_EQ(2u, st.upstream_call_count);
  // The capture grows as it would have.
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = Alloc(r, 64 * KiB, s);
  EXPECT_EQ(1u, Stats(a).capture_growth_count);
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(1u, Stats(a).returned_chunk_count);
  EXPECT_EQ(0u, gmr_capture_leaf_live_bytes(leaf));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(SharedPool, AFailedTakeIsNoErrorAndChangesNothing) {
  // graph_arena > mock > pool: the mock refuses the arena's allocation.
  Build(", uncaptured=forward, chunk=1MiB");
  gmr_stream w = NewStream(), s = NewStream();
  WarmUp(w, 4 * MiB, 2 * MiB);
  gmr_mock_resource *mock = gmr_mock_resource_create(pool_);
  gmr_graph_arena_resource_config c = Config(0, MiB, GMR_GRAPH_ARENA_ORDERED_REUSE);
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *a = Make(c, gmr_mock_resource_as_resource(mock));
  gmr_mock_resource_try_fail(mock, 0, 1, GMR_ERR_OUT_OF_MEMORY, 0);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  EXPECT_EQ(1u, gmr_mock_resource_called_allocate(mock));
  EXPECT_EQ(0u, Stats(a).adopted_chunk_count);
  EXPECT_EQ(0u, Stats(a).held_bytes);
  EXPECT_EQ(6 * MiB, PoolFree());
  gmr_graph_memory *m = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(a)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock)));
}

TEST_F(ArenaCapture, AFailedGiveBackKeepsTheChunkFreeAndUsable) {
  gmr_capture_leaf *leaf = Leaf(true);
  gmr_graph_arena_resource_config c = Config(0, MiB, GMR_GRAPH_ARENA_ORDERED_REUSE);
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *a = Make(c, R(leaf));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = Alloc(r, 64 * KiB, s);  // grows by 1 MiB
  const uintptr_t at = addr(p);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, s));
  gmr_graph_memory *m = EndCapture(a, s);
  ASSERT_EQ(MiB, Stats(a).held_bytes) << "the memory keeps the freed block";
  // The release's cudaFree fails: the chunk stays, wholly free.
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_FREE, 0, 1, cudaErrorInvalidValue));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  gmr_graph_arena_resource_stats st = Stats(a);
  EXPECT_EQ(MiB, st.held_bytes);
  EXPECT_EQ(0u, st.returned_chunk_count);
  EXPECT_EQ(0u, st.graph_memory_count) << "the release itself succeeded";
  EXPECT_EQ(MiB, gmr_capture_leaf_live_bytes(leaf));
  // The next capture uses it without growing; its end gives it back.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *q = Alloc(r, 64 * KiB, s);
  EXPECT_EQ(at, addr(q));
  EXPECT_EQ(1u, Stats(a).capture_growth_count);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 64 * KiB, 0, s));
  m = EndCapture(a, s);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  st = Stats(a);
  EXPECT_EQ(1u, st.returned_chunk_count);
  EXPECT_EQ(0u, st.held_bytes);
  EXPECT_EQ(0u, gmr_capture_leaf_live_bytes(leaf));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- threads -------------------------------------------------------------------------------

TEST_F(ArenaCapture, ThreadsUseThePoolWhileCapturesTakeAndGiveBackItsBlocks) {
  // pool(stream_ordered=false) over host memory: the forwarding threads make
  // no CUDA call, so the main thread may capture in global mode meanwhile.
  gmr_capture_leaf *leaf = gmr_capture_leaf_create_host(true);
  ASSERT_NE(nullptr, leaf);
  gmr_pool_resource_config pc = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  pc.streams.stream_ordered = false;
  pc.min_growth_bytes = 4 * MiB;
  pc.max_growth_bytes = 4 * MiB;
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(R(leaf), &pc, &pool));
  gmr_graph_arena_resource_config c = Config(0, MiB, GMR_GRAPH_ARENA_ORDERED_REUSE);
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  c.detection = GMR_GRAPH_ARENA_DETECT_EXPLICIT;
  gmr_graph_arena_resource *a = Make(c, gmr_pool_resource_as_resource(pool));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  constexpr int kForwarders = 3, kRounds = 100;
  std::vector<gmr_stream> streams;
  for (int t = 0; t <= kForwarders; ++t) streams.push_back(NewStream());
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 1; t <= kForwarders; ++t) {
    threads.push_back(gmr_test::ForwardingThread(r, streams[t], t, 4096, 65536, 40, 6, done, failures));
  }
  gmr_stream s = streams[0];
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
    void *x = Alloc(r, 3 * MiB, s);
    void *y = Alloc(r, 100 * KiB, s);
    std::memset(x, 0x5a, 3 * MiB);  // host memory: nobody else may touch it
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 3 * MiB, 0, s));
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
  EXPECT_GT(st.adopted_chunk_count, 0u) << "later rounds took the pool's free blocks";
  EXPECT_EQ(0u, st.held_bytes) << "every chunk went back";
  EXPECT_EQ(st.adopted_chunk_count + st.capture_growth_count, st.returned_chunk_count);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_pool_resource_as_resource(pool)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(R(leaf)));
}

}  // namespace
