// pool_resource on the host simulation: placement, splitting and merging
// (checked by the invariant walk), stream-ordered reuse with simulated events,
// growth, maximum, upstream failures, trim, arenas and threads.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/host_resource.h"
#include "gmr/pool_resource.h"
#include "tests/pool_test_fixture.h"
#include "tests/support/sim_fixture.h"

namespace {

using namespace pool_test;

TEST_F(PoolTest, CreateChecksEveryArgument) {
  gmr_pool_resource *p = reinterpret_cast<gmr_pool_resource *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(upstream_, nullptr, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(nullptr, nullptr, &p));
  EXPECT_EQ(nullptr, p);
  auto bad = [&](void (*edit)(gmr_pool_resource_config &)) {
    gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
    edit(c);
    gmr_pool_resource *q = reinterpret_cast<gmr_pool_resource *>(0x1);
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_create(upstream_, &c, &q));
    EXPECT_EQ(nullptr, q);
  };
  bad([](gmr_pool_resource_config &c) { c.chunk_granularity_bytes = 0; });
  bad([](gmr_pool_resource_config &c) { c.chunk_granularity_bytes = 3 * MiB; });
  bad([](gmr_pool_resource_config &c) { c.chunk_granularity_bytes = 128; });
  bad([](gmr_pool_resource_config &c) { c.min_growth_bytes = 0; });
  bad([](gmr_pool_resource_config &c) { c.min_growth_bytes = c.max_growth_bytes + 1; });
  bad([](gmr_pool_resource_config &c) { c.arena_count = 65; });
  bad([](gmr_pool_resource_config &c) { c.growth_percent = 1001; });
  bad([](gmr_pool_resource_config &c) { c.recent_free_count = 33; });
  bad([](gmr_pool_resource_config &c) {
    c.maximum_pool_bytes = 4 * MiB;
    c.initial_pool_bytes = 8 * MiB;
  });
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));

  // NULL config: the defaults, one arena per CPU, nothing taken yet.
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, nullptr, &p));
  pools_.push_back(p);
  gmr_resource *r = gmr_pool_resource_as_resource(p);
  EXPECT_STREQ("pool_resource", gmr_resource_type_name(r));
  EXPECT_EQ(p, gmr_pool_resource_from_resource(r));
  EXPECT_EQ(nullptr, gmr_pool_resource_from_resource(upstream_));
  EXPECT_EQ(upstream_, gmr_resource_get_upstream(r));
  EXPECT_EQ(upstream_, gmr_pool_resource_get_upstream(p));
  EXPECT_GE(gmr_pool_resource_get_arena_count(p), 1u);
  EXPECT_LE(gmr_pool_resource_get_arena_count(p), 64u);
  EXPECT_EQ(0u, Stats(r).held_bytes);
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
}

TEST_F(PoolTest, InitialChunkAndExactStatistics) {
  gmr_pool_resource_config c = small_config();
  c.initial_pool_bytes = 8 * MiB;
  gmr_resource *r = Make(c);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(8 * MiB, s.held_bytes);
  EXPECT_EQ(8 * MiB, s.peak_held_bytes);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(1u, s.free_block_count);
  EXPECT_EQ(8 * MiB, s.largest_free_block_bytes);
  EXPECT_EQ(1u, s.arena_count);

  void *p = Alloc(r, 1000);
  s = Stats(r);
  EXPECT_EQ(1024u, s.in_use_bytes);  // rounded up to 256 bytes, no more
  EXPECT_EQ(1000u, s.requested_bytes);
  EXPECT_EQ(1u, s.in_use_count);
  EXPECT_EQ(8 * MiB - 1024, s.free_bytes);
  EXPECT_EQ(8 * MiB - 1024, s.largest_free_block_bytes);
  EXPECT_EQ(1u, s.free_block_count);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(8 * MiB, fp.held_bytes);
  EXPECT_EQ(8 * MiB, fp.peak_held_bytes);
  ExpectInvariants(r);

  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 1000, 0, nullptr));
  s = Stats(r);
  EXPECT_EQ(0u, s.in_use_bytes);
  EXPECT_EQ(0u, s.in_use_count);
  EXPECT_EQ(1u, s.free_block_count);  // merged back into one block
  EXPECT_EQ(8 * MiB, s.largest_free_block_bytes);
  ExpectInvariants(r);
}

TEST_F(PoolTest, FailedInitialChunkLeavesNothing) {
  gmr_pool_resource_config c = small_config();
  c.initial_pool_bytes = 8 * MiB;
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorMemoryAllocation));
  gmr_pool_resource *p = reinterpret_cast<gmr_pool_resource *>(0x1);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_pool_resource_create(upstream_, &c, &p));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

TEST_F(PoolTest, SplitsFromTheFrontAndMergesNeighboursInAnyOrder) {
  gmr_resource *r = Make(small_config());
  void *a = Alloc(r, 256 * KiB), *b = Alloc(r, 256 * KiB), *c = Alloc(r, 256 * KiB);
  EXPECT_EQ(U(a) + 256 * KiB, U(b));
  EXPECT_EQ(U(b) + 256 * KiB, U(c));
  EXPECT_EQ(1u, Stats(r).free_block_count);  // the tail
  ExpectInvariants(r);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, b, 256 * KiB, 0, nullptr));
  EXPECT_EQ(2u, Stats(r).free_block_count);  // the hole and the tail
  ExpectInvariants(r);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, a, 256 * KiB, 0, nullptr));
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(2u, s.free_block_count);  // a merged with b
  EXPECT_EQ(4 * MiB - 768 * KiB, s.largest_free_block_bytes);
  ExpectInvariants(r);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, c, 256 * KiB, 0, nullptr));
  s = Stats(r);
  EXPECT_EQ(1u, s.free_block_count);  // everything merged: the whole chunk
  EXPECT_EQ(4 * MiB, s.largest_free_block_bytes);
  ExpectInvariants(r);
}

TEST_F(PoolTest, BestFitTakesTheSmallestHoleThatFits) {
  gmr_resource *r = Make(small_config(16 * MiB));
  // [1 MiB][x][3 MiB][x][2 MiB][x][tail]
  void *h1 = Alloc(r, 1 * MiB), *x1 = Alloc(r, 4096), *h3 = Alloc(r, 3 * MiB),
       *x2 = Alloc(r, 4096), *h2 = Alloc(r, 2 * MiB), *x3 = Alloc(r, 4096);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, h1, 1 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, h3, 3 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, h2, 2 * MiB, 0, nullptr));
  EXPECT_EQ(4u, Stats(r).free_block_count);
  void *p2 = Alloc(r, 2 * MiB);
  EXPECT_EQ(h2, p2);  // exact fit
  void *p1 = Alloc(r, 900 * KiB);
  EXPECT_EQ(h1, p1);  // the 1 MiB hole, not the 3 MiB one or the tail
  void *p3 = Alloc(r, 2 * MiB + 512 * KiB);
  EXPECT_EQ(h3, p3);  // the 3 MiB hole, not the tail
  ExpectInvariants(r);
  for (auto [p, n] : std::vector<std::pair<void *, size_t>>{{p1, 900 * KiB},
                                                            {p2, 2 * MiB},
                                                            {p3, 2 * MiB + 512 * KiB},
                                                            {x1, 4096},
                                                            {x2, 4096},
                                                            {x3, 4096}}) {
    EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, n, 0, nullptr));
  }
  EXPECT_EQ(1u, Stats(r).free_block_count);
  ExpectInvariants(r);
}

class PoolRandomTest : public PoolTest, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(PoolRandomTest, RandomSequencesKeepEveryInvariant) {
  // Random sizes, alignments and streams; the walk runs after every call, and
  // at the end trim must give everything back. The parameter is the number of
  // recent frees each stream keeps unmerged.
  gmr_pool_resource_config c = small_config(8 * MiB);
  c.growth_percent = 25;
  c.max_growth_bytes = 32 * MiB;
  c.recent_free_count = GetParam();
  c.recent_free_max_bytes = SIZE_MAX;  // cache every size: the hardest case for the walk
  gmr_resource *r = Make(c);
  gmr_stream streams[2] = {Stream(), Stream()};
  std::mt19937_64 rng(7);
  struct Live {
    void *p;
    size_t bytes, align;
  };
  std::vector<Live> live;
  for (int i = 0; i < 4000; ++i) {
    gmr_stream s = streams[rng() % 2];
    if (live.empty() || rng() % 100 < 60) {
      size_t bytes = 1 + rng() % (rng() % 8 == 0 ? 6 * MiB : 64 * KiB);
      size_t align = size_t{1} << (rng() % 16);  // 1 B .. 32 KiB
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_allocate(r, bytes, align, s, &p));
      ASSERT_EQ(0u, U(p) % std::max<size_t>(align, 256));
      live.push_back({p, bytes, align});
    } else {
      size_t k = rng() % live.size();
      ASSERT_EQ(GMR_OK, gmr_deallocate(r, live[k].p, live[k].bytes, live[k].align, s));
      live[k] = live.back();
      live.pop_back();
    }
    char err[256];
    ASSERT_EQ(GMR_OK, gmr_pool_resource_check_invariants(gmr_pool_resource_from_resource(r), err,
                                                         sizeof err))
        << "after call " << i << ": " << err;
  }
  for (auto &l : live) ASSERT_EQ(GMR_OK, gmr_deallocate(r, l.p, l.bytes, l.align, streams[0]));
  // All on one stream now? Not necessarily: blocks freed on the second stream
  // stay apart until settled. Trim settles everything and gives it all back.
  size_t released = 0;
  gmr_pool_stats before = Stats(r);
  EXPECT_EQ(0u, before.in_use_count);
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(before.held_bytes, released);
  EXPECT_EQ(0u, Stats(r).held_bytes);
  EXPECT_EQ(0u, Stats(r).free_block_count);
  ExpectInvariants(r);
}

INSTANTIATE_TEST_SUITE_P(RecentFrees, PoolRandomTest, ::testing::Values(0u, 8u, 32u));

TEST_F(PoolTest, RecentFreesAreReusedUnmergedUntilSpaceIsNeeded) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.recent_free_count = 2;
  c.recent_free_max_bytes = 256 * KiB;
  gmr_resource *r = Make(c);
  void *a = Alloc(r, 256 * KiB), *b = Alloc(r, 256 * KiB), *d = Alloc(r, 256 * KiB);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, b, 256 * KiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, a, 256 * KiB, 0, nullptr));
  EXPECT_EQ(3u, Stats(r).free_block_count);  // the tail, and a and b unmerged
  ExpectInvariants(r);
  EXPECT_EQ(a, Alloc(r, 256 * KiB));  // the most recent free of that size
  EXPECT_EQ(b, Alloc(r, 256 * KiB));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, b, 256 * KiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, a, 256 * KiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, d, 256 * KiB, 0, nullptr));  // full: b is merged
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(4u, s.free_block_count);  // b, a, d apart, and the tail
  EXPECT_EQ(4 * MiB - 768 * KiB, s.largest_free_block_bytes);
  ExpectInvariants(r);
  // Nothing free is large enough until the recent frees merge: no growth.
  void *big = Alloc(r, 3 * MiB + 512 * KiB);
  EXPECT_EQ(a, big);
  s = Stats(r);
  EXPECT_EQ(1u, s.grow_count);
  EXPECT_EQ(1u, s.free_block_count);
  ExpectInvariants(r);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, big, 3 * MiB + 512 * KiB, 0, nullptr));
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));  // trim merges and gives back
  EXPECT_EQ(4 * MiB, released);
  ExpectInvariants(r);
}

TEST_F(PoolTest, FreeSpaceOfOneStreamIsFullyMerged) {
  gmr_resource *r = Make(small_config(8 * MiB));
  std::mt19937_64 rng(11);
  std::vector<std::pair<void *, size_t>> live;
  for (int i = 0; i < 300; ++i) {
    size_t bytes = 1 + rng() % (512 * KiB);
    live.emplace_back(Alloc(r, bytes), bytes);
  }
  std::shuffle(live.begin(), live.end(), rng);
  for (auto &l : live) ASSERT_EQ(GMR_OK, gmr_deallocate(r, l.first, l.second, 0, nullptr));
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(s.chunk_count, s.free_block_count);  // one free block per chunk
  EXPECT_EQ(s.held_bytes, s.free_bytes);
  ExpectInvariants(r);
}

TEST_F(PoolTest, LargeAlignmentsLeaveTheirPaddingFree) {
  gmr_resource *r = Make(small_config(8 * MiB));
  void *first = Alloc(r, 256);  // so the chunk's start is taken
  for (size_t align : {size_t{4096}, size_t{65536}, MiB}) {
    void *p = Alloc(r, 1000, nullptr, align);
    EXPECT_EQ(0u, U(p) % align);
    ExpectInvariants(r);
    EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 1000, align, nullptr));
  }
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_allocate_ex(r, 1000, 2 * MiB, nullptr, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "alignment")) << f.message;
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, first, 256, 0, nullptr));
  EXPECT_EQ(1u, Stats(r).free_block_count);
  ExpectInvariants(r);
}

TEST_F(PoolTest, BadFreesChangeNothing) {
  gmr_resource *r = Make(small_config());
  void *p = Alloc(r, 5000);
  gmr_pool_stats before = Stats(r);
  int local = 0;
  // One vocabulary for bad frees in every layer (issue 9): gmr/resource.h.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_deallocate(r, p, 4999, 0, nullptr));    // size
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_deallocate(r, p, 5000, 512, nullptr));  // alignment
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_deallocate(r, static_cast<char *>(p) + 256, 256, 0, nullptr));  // interior
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_deallocate(r, &local, 5000, 0, nullptr)); // foreign
  gmr_pool_stats after = Stats(r);
  EXPECT_EQ(before.in_use_bytes, after.in_use_bytes);
  EXPECT_EQ(before.free_block_count, after.free_block_count);
  ExpectInvariants(r);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 5000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_deallocate(r, p, 5000, 0, nullptr));  // twice
  ExpectInvariants(r);
}

// ---- stream ordering --------------------------------------------------------


// RMM's rule, the default before records on demand and kept as an option
// (record_at_every_free): the program may destroy a stream right after the
// call that named it (cudaStreamDestroy is legal with work pending). Every
// free on a created stream then records its event at once and the pool never
// touches the stream again; on the default stream nothing is recorded.
// pool_streams_test.cc checks the default, records on demand.
TEST_F(PoolTest, ByDefaultAFreeOnACreatedStreamRecordsItsEventAtOnce) {
  gmr_pool_resource_config c = small_config();
  c.streams_outlive_resource = false;
  c.record_at_every_free = true;
  gmr_resource *r = Make(c);
  gmr_stream s = nullptr;  // not Stream(): destroyed below, before the pool
  ASSERT_EQ(GMR_OK, gmr_stream_create(&s));
  void *p = Alloc(r, MiB, s);
  size_t records = Stats(r).event_record_count;  // the new chunk's
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, s));
    EXPECT_EQ(p, Alloc(r, MiB, s));
  }
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, s));
  EXPECT_EQ(records + 11, Stats(r).event_record_count);
  ASSERT_EQ(GMR_OK, gmr_stream_destroy(s));
  // Another stream takes s's memory through the recorded event alone, and
  // trim and destroy need nothing of s: the fixture fails the test if any
  // CUDA call names the destroyed stream.
  gmr_stream other = Stream();
  EXPECT_EQ(p, Alloc(r, MiB, other));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, other));
  void *d = Alloc(r, MiB, nullptr);
  size_t before = Stats(r).event_record_count;
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, d, MiB, 0, nullptr));
    EXPECT_EQ(d, Alloc(r, MiB, nullptr));
  }
  EXPECT_EQ(before, Stats(r).event_record_count);  // the default stream stays lazy
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, d, MiB, 0, nullptr));
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(4 * MiB, released);
}

TEST_F(PoolTest, SameStreamReuseMakesNoCudaCallAtAll) {
  gmr_resource *r = Make(small_config());
  gmr_stream s = Stream();
  void *p = Alloc(r, MiB, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, s));
  uint64_t calls_before = 0;
  for (int c = 0; c < GMR_CUDA_CALL_COUNT; ++c) {
    calls_before += gmr_cuda_sim_get_call_count(static_cast<gmr_cuda_call>(c));
  }
  for (int i = 0; i < 100; ++i) {
    void *q = Alloc(r, MiB, s);
    EXPECT_EQ(p, q);
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, q, MiB, 0, s));
  }
  uint64_t calls_after = 0;
  for (int c = 0; c < GMR_CUDA_CALL_COUNT; ++c) {
    calls_after += gmr_cuda_sim_get_call_count(static_cast<gmr_cuda_call>(c));
  }
  EXPECT_EQ(calls_before, calls_after);
  EXPECT_EQ(0u, EventCalls());
}

TEST_F(PoolTest, AnotherStreamReusesMemoryOnceItsEventCompleted) {
  gmr_resource *r = Make(small_config());
  gmr_stream s1 = Stream(), s2 = Stream();
  void *p = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, s1));
  EXPECT_EQ(0u, EventCalls());  // a free records nothing
  void *q = Alloc(r, MiB, s2);
  EXPECT_EQ(p, q);  // s1's work is done (the simulation completes it at once)
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(1u, s.event_record_count);
  EXPECT_EQ(1u, s.event_query_count);
  EXPECT_EQ(0u, s.stream_wait_count);
  EXPECT_EQ(1u, s.grow_count);
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(s2));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD));
  // The settled memory is now free for every stream: a third stream needs no
  // event at all.
  gmr_stream s3 = Stream();
  void *t = Alloc(r, MiB, s3);
  EXPECT_EQ(1u, Stats(r).event_record_count);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, t, MiB, 0, s3));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, q, MiB, 0, s2));
  ExpectInvariants(r);
}

TEST_F(PoolTest, AnotherStreamWaitsForPendingWorkBeforeReuse) {
  gmr_resource *r = Make(small_config());
  gmr_stream s1 = Stream(), s2 = Stream();
  void *p = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1, true));  // s1's work stays pending
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, s1));
  void *q = Alloc(r, MiB, s2);
  EXPECT_EQ(p, q);  // reused, but only after s2 waits for s1
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(s2));
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(s1));
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(1u, s.event_record_count);
  EXPECT_EQ(1u, s.event_query_count);
  EXPECT_EQ(1u, s.stream_wait_count);
  EXPECT_EQ(1u, s.grow_count);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, q, MiB, 0, s2));
  ExpectInvariants(r);
}

TEST_F(PoolTest, PendingMemoryTooSmallMeansGrowthNotWaiting) {
  gmr_resource *r = Make(small_config(2 * MiB));
  gmr_stream s1 = Stream(), s2 = Stream();
  void *p = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1, true));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, s1));  // s1 holds 2 MiB free, pending
  void *q = Alloc(r, 3 * MiB, s2);
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(s2));
  EXPECT_EQ(2u, Stats(r).grow_count);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, q, 3 * MiB, 0, s2));
  ExpectInvariants(r);
}

TEST_F(PoolTest, WaitsForEveryStreamWhenOnlyTheirBlocksTogetherFit) {
  gmr_resource *r = Make(small_config(4 * MiB));
  gmr_stream s1 = Stream(), s2 = Stream(), s3 = Stream();
  void *a = Alloc(r, 2 * MiB, s1);
  void *b = Alloc(r, 2 * MiB, s1);
  ASSERT_EQ(U(a) + 2 * MiB, U(b));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1, true));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s3, true));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, a, 2 * MiB, 0, s1));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, b, 2 * MiB, 0, s3));  // touching, other stream
  EXPECT_EQ(2u, Stats(r).free_block_count);
  void *c = Alloc(r, 4 * MiB, s2);  // neither stream alone has 4 MiB
  EXPECT_EQ(a, c);
  EXPECT_EQ(2u, gmr_cuda_sim_get_stream_wait_count(s2));
  EXPECT_EQ(1u, Stats(r).grow_count);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, c, 4 * MiB, 0, s2));
  ExpectInvariants(r);
}

TEST_F(PoolTest, DuringCaptureOnlyTheStreamsOwnBlocksAreUsed) {
  gmr_resource *r = Make(small_config());
  gmr_stream s = Stream(), other = Stream();
  void *p = Alloc(r, MiB, s);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, s));
  void *o = Alloc(r, 8 * MiB, other);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, o, 8 * MiB, 0, other));  // other stream's free memory
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  uint64_t events = EventCalls();

  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  void *q = Alloc(r, MiB, s);  // its own block: fine inside the capture
  EXPECT_EQ(p, q);
  void *big = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_allocate_ex(r, 6 * MiB, 0, s, &big, &f));
  EXPECT_EQ(nullptr, big);
  EXPECT_NE(nullptr, std::strstr(f.message, "capture")) << f.message;
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, q, MiB, 0, s));
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &graph));  // the capture survived
  EXPECT_EQ(GMR_OK, gmr_graph_destroy(graph));
  EXPECT_EQ(mallocs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(events, EventCalls());
  ExpectInvariants(r);
}

TEST_F(PoolTest, WithoutStreamOrderingNoCudaCallIsMade) {
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_resource *h = gmr_host_resource_as_resource(host);
  gmr_pool_resource_config c = small_config();
  c.stream_ordered = false;
  c.arena_count = 2;
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(h, &c, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  gmr_stream s1 = Stream(), s2 = Stream();
  uint64_t before = 0;
  for (int k = 0; k < GMR_CUDA_CALL_COUNT; ++k) {
    before += gmr_cuda_sim_get_call_count(static_cast<gmr_cuda_call>(k));
  }
  void *p = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, s1));
  void *q = Alloc(r, MiB, s2);
  EXPECT_EQ(p, q);  // reused at once by another stream
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, q, MiB, 0, s2));
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(4 * MiB, released);
  uint64_t after = 0;
  for (int k = 0; k < GMR_CUDA_CALL_COUNT; ++k) {
    after += gmr_cuda_sim_get_call_count(static_cast<gmr_cuda_call>(k));
  }
  EXPECT_EQ(before, after);
  ExpectInvariants(r);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(h));
}

// ---- growth -----------------------------------------------------------------

TEST_F(PoolTest, GeometricGrowthFollowsThePolicy) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 1;
  c.min_growth_bytes = 2 * MiB;
  c.max_growth_bytes = 8 * MiB;
  c.growth_percent = 50;
  c.release_on_growth = false;
  gmr_resource *r = Make(c);
  std::vector<size_t> held_after_growth;
  std::vector<void *> live;
  for (int i = 0; i < 40; ++i) {
    size_t before = Stats(r).held_bytes;
    live.push_back(Alloc(r, MiB));
    size_t after = Stats(r).held_bytes;
    if (after != before) held_after_growth.push_back(after / MiB);
  }
  // step = held/2 clamped to [2, 8] MiB, rounded up to 2 MiB:
  // 0->2, 2->4, 4->6, 6->10 (3 -> 4), 10->16 (5 -> 6), 16->24, 24->32, 32->40
  EXPECT_EQ((std::vector<size_t>{2, 4, 6, 10, 16, 24, 32, 40}), held_after_growth);
  // A request larger than the step gets a chunk of its own size.
  void *big = Alloc(r, 21 * MiB);
  EXPECT_EQ(40 * MiB + 22 * MiB, Stats(r).held_bytes);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, big, 21 * MiB, 0, nullptr));
  for (void *p : live) EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, nullptr));
  ExpectInvariants(r);
}

TEST_F(PoolTest, MaximumPoolBytesIsNeverPassed) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.maximum_pool_bytes = 6 * MiB;
  gmr_resource *r = Make(c);
  void *a = Alloc(r, 3 * MiB);
  EXPECT_EQ(4 * MiB, Stats(r).held_bytes);
  void *b = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_allocate_ex(r, 3 * MiB, 0, nullptr, &b, &f));
  EXPECT_EQ(nullptr, b);
  EXPECT_EQ(r, f.where);
  EXPECT_NE(nullptr, std::strstr(f.message, "maximum_pool_bytes")) << f.message;
  void *d = Alloc(r, 2 * MiB);  // what is left below the maximum serves it
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(6 * MiB, s.held_bytes);
  EXPECT_EQ(2u, s.chunk_count);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, a, 3 * MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, d, 2 * MiB, 0, nullptr));
  ExpectInvariants(r);
}

// Issue 13: a refused growth falls back to exactly the request at once (a
// smaller step would still overshoot a tight upstream; it used to halve).
TEST_F(PoolTest, UpstreamOutOfMemoryRetriesSmallerChunks) {
  gmr_resource *r = Make(small_config(64 * MiB));
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorMemoryAllocation));
  void *p = Alloc(r, MiB);
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(MiB, s.held_bytes);  // 64 MiB failed, exactly the request did not
  EXPECT_EQ(1u, s.upstream_failure_count);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, nullptr));
  ExpectInvariants(r);
}

TEST_F(PoolTest, UpstreamOutOfMemoryRetriesDownToTheRequestThenFailsCleanly) {
  gmr_resource *r = Make(small_config(64 * MiB));
  // 64 MiB fails; exactly the request (1 MiB) succeeds.
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorMemoryAllocation));
  void *p = Alloc(r, MiB);
  EXPECT_EQ(MiB, Stats(r).held_bytes);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, MiB, 0, nullptr));

  // Everything fails: the request fails with the upstream's record, and the
  // pool holds what it held before (the 1 MiB chunk, free: too small).
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, UINT64_MAX,
                                                cudaErrorMemoryAllocation));
  void *q = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_allocate_ex(r, 3 * MiB, 0, nullptr, &q, &f));
  EXPECT_EQ(nullptr, q);
  EXPECT_EQ(upstream_, f.where);
  EXPECT_EQ(int{cudaErrorMemoryAllocation}, f.cuda_error);
  gmr_pool_stats s = Stats(r);
  // Before giving up, the wholly free 1 MiB chunk went back (PyTorch's "free
  // cached blocks and retry").
  EXPECT_EQ(0u, s.held_bytes);
  EXPECT_EQ(0u, s.chunk_count);
  EXPECT_EQ(0u, s.in_use_count);
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  ExpectInvariants(r);
}

TEST_F(PoolTest, OtherUpstreamErrorsAreNotRetried) {
  gmr_resource *r = Make(small_config(64 * MiB));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorLaunchFailure));
  void *p = nullptr;
  gmr_failure f;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_allocate_ex(r, MiB, 0, nullptr, &p, &f));
  EXPECT_EQ(int{cudaErrorLaunchFailure}, f.cuda_error);
  EXPECT_EQ(upstream_, f.where);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(0u, Stats(r).held_bytes);
}

TEST_F(PoolTest, OutOfMemoryGivesBackFreeChunksAndRetries) {
  gmr_resource *r = Make(small_config(2 * MiB));
  void *a = Alloc(r, 2 * MiB), *b = Alloc(r, 2 * MiB);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, a, 2 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, b, 2 * MiB, 0, nullptr));
  EXPECT_EQ(4 * MiB, Stats(r).held_bytes);
  // 4 MiB and 3 MiB fail; after the two free chunks went back, 3 MiB works.
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 2, cudaErrorMemoryAllocation));
  void *c = Alloc(r, 3 * MiB);
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(3 * MiB, s.held_bytes);
  EXPECT_EQ(2u, s.release_count);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, c, 3 * MiB, 0, nullptr));
  ExpectInvariants(r);
}

TEST_F(PoolTest, ReleaseOnGrowthKeepsThePeakDown) {
  for (bool release : {false, true}) {
    gmr_pool_resource_config c = small_config(2 * MiB);
    c.release_on_growth = release;
    gmr_resource *r = Make(c);
    void *a = Alloc(r, 2 * MiB), *b = Alloc(r, 2 * MiB);
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, a, 2 * MiB, 0, nullptr));
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, b, 2 * MiB, 0, nullptr));
    void *d = Alloc(r, 4 * MiB);  // no 4 MiB block: two free 2 MiB chunks
    gmr_pool_stats s = Stats(r);
    EXPECT_EQ(release ? 4 * MiB : 8 * MiB, s.held_bytes) << release;
    EXPECT_EQ(release ? 4 * MiB : 8 * MiB, s.peak_held_bytes) << release;
    EXPECT_EQ(release ? 2u : 0u, s.release_count) << release;
    EXPECT_EQ(GMR_OK, gmr_deallocate(r, d, 4 * MiB, 0, nullptr));
    ExpectInvariants(r);
  }
}

TEST_F(PoolTest, ReleaseOnGrowthLeavesChunksOfStreamsStillAtWork) {
  gmr_pool_resource_config c = small_config(2 * MiB);
  c.release_on_growth = true;
  gmr_resource *r = Make(c);
  gmr_stream s1 = Stream(), s2 = Stream();
  void *a = Alloc(r, 2 * MiB, s1), *b = Alloc(r, 2 * MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1, true));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, a, 2 * MiB, 0, s1));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, b, 2 * MiB, 0, s1));
  void *d = Alloc(r, 6 * MiB, s2);  // s1's chunks are pending: not given back
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(10 * MiB, s.held_bytes);
  EXPECT_EQ(0u, s.release_count);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, d, 6 * MiB, 0, s2));
  ExpectInvariants(r);
}

// ---- trim, destroy ------------------------------------------------------------

TEST_F(PoolTest, TrimGivesBackWhollyFreeChunksOnly) {
  gmr_resource *r = Make(small_config(4 * MiB));
  gmr_stream s = Stream();
  void *a = Alloc(r, 3 * MiB, s), *b = Alloc(r, 3 * MiB, s), *c = Alloc(r, 3 * MiB, s);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));  // the frees stay pending
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, a, 3 * MiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, c, 3 * MiB, 0, s));
  EXPECT_EQ(12 * MiB, Stats(r).held_bytes);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(8 * MiB, released);  // a's and c's chunks; b's stays
  gmr_pool_stats st = Stats(r);
  EXPECT_EQ(4 * MiB, st.held_bytes);
  EXPECT_EQ(12 * MiB, st.peak_held_bytes);
  EXPECT_EQ(1u, st.chunk_count);
  EXPECT_EQ(2u, st.release_count);
  EXPECT_EQ(1u, st.event_synchronize_count);  // waited for s's pending frees
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(4 * MiB, fp.held_bytes);
  EXPECT_EQ(12 * MiB, fp.peak_held_bytes);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, b, 3 * MiB, 0, s));
  ExpectInvariants(r);
}

TEST_F(PoolTest, DestroyIsBusyWithLiveBlocksAndGivesEverythingBack) {
  gmr_pool_resource_config c = small_config();
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, &c, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  gmr_stream s = Stream();
  void *p = Alloc(r, 100, s), *q = Alloc(r, 5 * MiB, s);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 100, 0, s));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, q, 5 * MiB, 0, s));
  EXPECT_EQ(2u, gmr_cuda_resource_get_live_count(cuda_));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

// ---- arenas and threads --------------------------------------------------------

TEST_F(PoolTest, ThreadsOnTheirOwnStreamsKeepEveryInvariant) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 4;
  c.min_growth_bytes = 4 * MiB;
  gmr_resource *r = Make(c);
  constexpr int kThreads = 8;
  std::vector<gmr_stream> streams;
  for (int t = 0; t < kThreads; ++t) streams.push_back(Stream());
  // Blocks handed between threads: a thread frees what another allocated.
  std::mutex m;
  std::vector<std::pair<void *, size_t>> exchange;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 7919u);
      std::vector<std::pair<void *, size_t>> mine;
      for (int i = 0; i < 1500; ++i) {
        unsigned op = rng() % 10;
        if (op < 5 || mine.empty()) {
          size_t bytes = 1 + rng() % (rng() % 10 == 0 ? 2 * MiB : 32 * KiB);
          void *p = nullptr;
          if (gmr_allocate(r, bytes, 0, streams[t], &p) != GMR_OK) {
            failures++;
            continue;
          }
          std::memset(p, t, std::min<size_t>(bytes, 64));
          mine.emplace_back(p, bytes);
        } else if (op < 8) {
          auto b = mine.back();
          mine.pop_back();
          if (gmr_deallocate(r, b.first, b.second, 0, streams[t]) != GMR_OK) failures++;
        } else {
          std::lock_guard<std::mutex> g(m);
          exchange.push_back(mine.back());
          mine.pop_back();
          if (exchange.size() > 4) {
            auto b = exchange.front();
            exchange.erase(exchange.begin());
            if (gmr_deallocate(r, b.first, b.second, 0, streams[t]) != GMR_OK) failures++;
          }
        }
      }
      for (auto &b : mine) {
        if (gmr_deallocate(r, b.first, b.second, 0, streams[t]) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  for (auto &b : exchange) EXPECT_EQ(GMR_OK, gmr_deallocate(r, b.first, b.second, 0, nullptr));
  EXPECT_EQ(0, failures.load());
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(0u, s.in_use_count);
  EXPECT_EQ(0u, s.in_use_bytes);
  EXPECT_EQ(4u, s.arena_count);
  ExpectInvariants(r);
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(s.held_bytes, released);
  EXPECT_EQ(0u, Stats(r).held_bytes);
}

// Runs `fn` on a new thread and waits: each such thread gets the next home
// number, so two calls in a row land in different arenas of a 2-arena pool.
template <typename F>
void OnNewThread(F fn) {
  std::thread t(fn);
  t.join();
}

TEST_F(PoolTest, AnArenaThatCannotGrowUsesAnotherArenasFreeMemory) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.arena_count = 2;
  c.maximum_pool_bytes = 4 * MiB;
  gmr_resource *r = Make(c);
  void *a = nullptr, *b = nullptr;
  OnNewThread([&] {
    a = Alloc(r, MiB);
    EXPECT_EQ(GMR_OK, gmr_deallocate(r, a, MiB, 0, nullptr));
  });
  OnNewThread([&] { b = Alloc(r, MiB); });  // its own arena is empty and may not grow
  EXPECT_EQ(a, b);
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(4 * MiB, s.held_bytes);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, b, MiB, 0, nullptr));  // from this thread
  ExpectInvariants(r);
}

TEST_F(PoolTest, AnArenaThatCannotGrowMakesOthersGiveBackFreeChunks) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.arena_count = 2;
  c.maximum_pool_bytes = 8 * MiB;
  gmr_resource *r = Make(c);
  OnNewThread([&] {
    void *a = Alloc(r, 3 * MiB);  // arena x: a 4 MiB chunk, then free
    EXPECT_EQ(GMR_OK, gmr_deallocate(r, a, 3 * MiB, 0, nullptr));
  });
  void *b = nullptr;
  OnNewThread([&] { b = Alloc(r, 5 * MiB); });  // arena y needs 6 MiB: 4 + 6 > 8
  ASSERT_NE(nullptr, b);
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(6 * MiB, s.held_bytes);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(1u, s.release_count);
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, b, 5 * MiB, 0, nullptr));
  ExpectInvariants(r);
}

TEST_F(PoolTest, FreesFromAnotherArenasThreadFindTheirArena) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.arena_count = 3;
  gmr_resource *r = Make(c);
  // Threads on streams of their own (the default stream's arena is shared by
  // its threads); streams_outlive mode: each thread has a home arena.
  struct Block {
    void *p;
    size_t bytes;
    gmr_stream s;
  };
  std::vector<Block> blocks;
  for (int t = 0; t < 3; ++t) {
    gmr_stream s = Stream();
    OnNewThread([&] {
      for (int i = 0; i < 20; ++i) blocks.push_back({Alloc(r, 1000 + i * 300, s), 1000u + i * 300u, s});
    });
  }
  EXPECT_EQ(3u, Stats(r).chunk_count);  // one per arena
  OnNewThread([&] {
    for (auto &b : blocks) EXPECT_EQ(GMR_OK, gmr_deallocate(r, b.p, b.bytes, 0, b.s));
  });
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(0u, s.in_use_count);
  EXPECT_EQ(3u, s.free_block_count);
  ExpectInvariants(r);
}

}  // namespace

TEST_F(PoolTest, StatsHonourTheSizeVersionHeader) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.initial_pool_bytes = MiB;
  gmr_pool_resource *p = gmr_pool_resource_from_resource(Make(c));
  ASSERT_NE(nullptr, p);
  gmr_pool_stats s = GMR_POOL_STATS_INIT;
  s.size = sizeof(size_t);  // shorter than the header
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_get_stats(p, &s));
  s = GMR_POOL_STATS_INIT;
  s.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_get_stats(p, &s));
  EXPECT_EQ(0u, s.held_bytes);
  s = GMR_POOL_STATS_INIT;
  s.size = offsetof(gmr_pool_stats, peak_held_bytes);  // an older, shorter struct
  s.peak_held_bytes = 77;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(p, &s));
  EXPECT_EQ(MiB, s.held_bytes);
  EXPECT_EQ(77u, s.peak_held_bytes);
  EXPECT_EQ(GMR_POOL_STATS_VERSION, s.version);
}
