// fixed_block_resource and streams and threads (issues 11, 12, 14): by
// default no event per free once a stream is known, a dead stream's pending
// block never handed unordered to a new stream with its handle,
// record_stream, shards for threads on streams of their own, one shard's
// memory for threads that take turns on one stream, and exact
// get_memory_info and free figures in the failure record.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/fixed_block_fixture.h"

namespace {

constexpr size_t KiB = size_t{1} << 10;

class FixedBlockStreams : public gmr_test::FixedBlockTest {
 protected:
  static gmr_fixed_block_resource_config Config(size_t per_chunk = 4) {
    return BlockConfig(64 * KiB, per_chunk);
  }
};

TEST_F(FixedBlockStreams, FreesOnAKnownStreamRecordNoEvent) {
  gmr_fixed_block_resource *f = Make(Config());
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s = Stream();
  void *p = Alloc(r, 100, s);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
    ASSERT_EQ(p, Alloc(r, 100, s));
  }
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
  EXPECT_LE(Stats(f).event_record_count, 6u);  // the growth and the first few frees
}

// With stream_ids: a stream destroyed with its work pending never gives its
// block to the new stream that got its handle, unordered.
TEST_F(FixedBlockStreams, ANewStreamWithADeadStreamsHandleNeverTakesItsBlockUnordered) {
  gmr_fixed_block_resource_config c = Config(1);
  c.streams.stream_ids = true;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_reuse_stream_handles(true));  // as the driver often does
  gmr_stream s1 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1));
  void *p = Alloc(r, 100, s1);
  for (int i = 0; i < 8; ++i) {  // past the first frees: the last one is not recorded
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s1));
    ASSERT_EQ(p, Alloc(r, 100, s1));
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold_beyond_destroy(s1));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s1));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s1));
  gmr_stream s2 = StreamWithHandle(s1);
  ASSERT_NE(nullptr, s2) << "the simulation gave no new stream the destroyed one's handle";
  uint64_t syncs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  void *q = Alloc(r, 100, s2);
  bool ordered = gmr_cuda_sim_get_stream_wait_count(s2) > 0 ||
                 gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE) > syncs;
  EXPECT_TRUE(q != p || ordered) << "the dead stream's pending block went to the new stream";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 100, 0, s2));
}

// By handle (the default, as RMM), a warm pair makes no CUDA call at all.
TEST_F(FixedBlockStreams, WarmPairsByHandleMakeNoCudaCall) {
  gmr_fixed_block_resource *f = Make(Config());
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s = Stream();
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, Alloc(r, 100, s), 100, 0, s));
  uint64_t calls = 0;
  for (int call = 0; call < GMR_CUDA_CALL_COUNT; ++call) {
    calls += gmr_cuda_sim_get_call_count(static_cast<gmr_cuda_call>(call));
  }
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, Alloc(r, 100, s), 100, 0, s));
  uint64_t after = 0;
  for (int call = 0; call < GMR_CUDA_CALL_COUNT; ++call) {
    after += gmr_cuda_sim_get_call_count(static_cast<gmr_cuda_call>(call));
  }
  EXPECT_EQ(calls, after);
}

// With stream_ids, once warm, a stream's own alloc/free pairs ask for its id
// at most once per allocation and never at a free.
TEST_F(FixedBlockStreams, WarmPairsAskTheIdOnlyAtAllocations) {
  gmr_fixed_block_resource_config c = Config();
  c.streams.stream_ids = true;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s = Stream();
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, Alloc(r, 100, s), 100, 0, s));
  uint64_t ids = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID);
  for (int i = 0; i < 100; ++i) {
    void *p = Alloc(r, 100, s);
    uint64_t at_free = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
    EXPECT_EQ(at_free, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID));
  }
  EXPECT_LE(gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID), ids + 100);
}

// During a global capture: the capturing stream gets its own block back and
// the capture stays valid (by handle; its id is never asked while it
// captures); with stream_ids, a new stream with a destroyed stream's handle
// gets none of the old stream's pending blocks (CAPTURE_UNSAFE: it cannot
// grow or wait) and its capture stays valid.
TEST_F(FixedBlockStreams, CapturingStreamsAreIdentifiedWithoutBreakingTheCapture) {
  gmr_fixed_block_resource *f = Make(Config(1));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream own = Stream();
  void *p = Alloc(r, 100, own);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, own));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(own));
  EXPECT_EQ(p, Alloc(r, 100, own));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, own));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(own, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));

  // With stream_ids, the rest: a stream is known by its capture, and the
  // capture of a stream that got a dead stream's handle takes nothing of it.
  gmr_fixed_block_resource_config c = Config(1);
  c.streams.stream_ids = true;
  r = gmr_fixed_block_resource_as_resource(Make(c));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_reuse_stream_handles(true));
  gmr_stream s1 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1));
  void *q = Alloc(r, 100, s1);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 100, 0, s1));
    q = Alloc(r, 100, s1);
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold_beyond_destroy(s1));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 100, 0, s1));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s1));
  gmr_stream s2 = StreamWithHandle(s1);
  ASSERT_NE(nullptr, s2);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s2));
  void *x = nullptr;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate(r, 100, 0, s2, &x));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s2, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
}

// With stream_ids, a stream that captured comes back to its own blocks once
// the capture is over (the stream-slot table's slot_return,
// stream_ordered/stream_slots.h, which fixed_block shares with pool since the table
// was unified): its pending block, retired when the capture keyed the
// handle, is its own again, in stream order: no device synchronisation, no
// new chunk.
TEST_F(FixedBlockStreams, AStreamGetsItsOwnBlocksBackAfterItsCapture) {
  gmr_fixed_block_resource_config c = Config(1);
  c.streams.stream_ids = true;
  c.shard_count = 1;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s = Stream();
  void *p = Alloc(r, 100, s);
  for (int i = 0; i < 8; ++i) {  // past the first frees: the last one is not recorded
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
    ASSERT_EQ(p, Alloc(r, 100, s));
  }
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *x = nullptr;
  // Keyed by its capture, the stream cannot take the block (stream_ids).
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate(r, 100, 0, s, &x));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  uint64_t syncs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  size_t chunks = Stats(f).chunk_count;
  EXPECT_EQ(p, Alloc(r, 100, s));
  EXPECT_EQ(syncs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE));
  EXPECT_EQ(chunks, Stats(f).chunk_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
}

// While one thread captures in global mode, another thread's calls on its own
// stream, one of them finding another stream's block done through an event
// query, make no call that breaks the capture.
TEST_F(FixedBlockStreams, AnotherThreadsCallsLeaveAGlobalCaptureValid) {
  gmr_fixed_block_resource *f = Make(Config(1));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream c = Stream(), t = Stream(), other = Stream();
  void *x = Alloc(r, 100, t);
  void *y = Alloc(r, 100, other);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(other, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, y, 100, 0, other));  // recorded, pending
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 100, 0, t));
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, Alloc(r, 100, t), 100, 0, t));
  uint64_t queries = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_QUERY);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(other, false));  // done, but nobody knows yet
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(c));
  std::thread([&] {
    for (int i = 0; i < 100; ++i) {
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 0, t, &p));
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, t));
    }
    void *a = nullptr, *b = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 0, t, &a));
    EXPECT_EQ(x, a);
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 0, t, &b));
    EXPECT_EQ(y, b);  // other's, found done by an event query
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 100, 0, t));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 100, 0, t));
  }).join();
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(c, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_LT(queries, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_QUERY));
  EXPECT_EQ(2u, Stats(f).chunk_count);
}

// A trim whose device synchronisation fails (refused while any stream
// captures, or a fault) still waits for the streams whose frees are
// recorded: their chunks go back; the chunk of a stream whose frees no
// record covers stays until a later trim synchronises the device.
TEST_F(FixedBlockStreams, TrimWaitsForRecordedStreamsWhenTheDeviceSynchronisationFails) {
  gmr_fixed_block_resource_config c = Config(1);  // a chunk per block
  c.shard_count = 1;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream a = Stream(), b = Stream();
  void *x = Alloc(r, 100, a);
  void *y = Alloc(r, 100, b);
  for (int i = 0; i < 4; ++i) {  // b's first frees record at once; then none
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, y, 100, 0, b));
    ASSERT_EQ(y, Alloc(r, 100, b));
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 100, 0, a));  // recorded, pending
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, y, 100, 0, b));  // no record covers it
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, 1,
                                                cudaErrorUnknown));
  gmr_fixed_block_resource_stats before = Stats(f);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(64 * KiB, released) << "x's chunk, after waiting for a's event";
  gmr_fixed_block_resource_stats after = Stats(f);
  EXPECT_EQ(before.device_synchronize_count + 1, after.device_synchronize_count);
  EXPECT_EQ(before.event_synchronize_count + 1, after.event_synchronize_count);
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));  // the device synchronises now
  EXPECT_EQ(64 * KiB, released) << "y's chunk";
  EXPECT_EQ(0u, Stats(f).chunk_count);
}

TEST_F(FixedBlockStreams, RecordStreamKeepsTheBlockUntilTheRecordedStreamsWorkIsDone) {
  gmr_fixed_block_resource *f = Make(Config());
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s = Stream(), side = Stream();
  void *p = Alloc(r, 100, s);
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_record_stream(r, &local, side));
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, side));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(side, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
  EXPECT_EQ(1u, Stats(f).deferred_block_count);
  void *q = Alloc(r, 100, s);
  EXPECT_NE(p, q) << "reused while the recorded stream's work was pending";
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(side, false));
  std::set<void *> got;
  std::vector<void *> more;
  for (int i = 0; i < 3; ++i) more.push_back(Alloc(r, 100, s));  // the chunk's other blocks, and p
  got.insert(more.begin(), more.end());
  EXPECT_EQ(1u, got.count(p)) << "free once the recorded stream's work is done";
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_record_stream(r, static_cast<char *>(q) + 256, side));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 100, 0, s));
  for (void *m : more) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, m, 100, 0, s));
  EXPECT_EQ(0u, Stats(f).deferred_block_count);
}

TEST_F(FixedBlockStreams, ThreadsOnStreamsOfTheirOwnGetShardsOfTheirOwn) {
  gmr_fixed_block_resource_config c = Config();
  c.shard_count = 4;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  EXPECT_EQ(4u, Stats(f).shard_count);
  std::vector<void *> first(4);
  std::vector<gmr_stream> streams;
  for (int t = 0; t < 4; ++t) streams.push_back(Stream());
  for (int t = 0; t < 4; ++t) {
    std::thread([&, t] { first[t] = Alloc(r, 100, streams[t]); }).join();
  }
  // Each thread's stream in its own shard: a chunk each.
  EXPECT_EQ(4u, Stats(f).chunk_count);
  // A free from another thread finds the block's shard.
  std::thread([&] {
    for (int t = 0; t < 4; ++t)
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, first[t], 100, 0, streams[t]));
  }).join();
  EXPECT_EQ(0u, Stats(f).in_use_block_count);
}

TEST_F(FixedBlockStreams, ThreadsTakingTurnsOnOneStreamShareOneShardsMemory) {
  gmr_fixed_block_resource_config c = Config();
  c.shard_count = 2;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  for (int round = 0; round < 6; ++round) {
    std::thread([&] {
      std::vector<void *> live;
      for (int i = 0; i < 6; ++i) live.push_back(Alloc(r, 100));
      for (void *p : live) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
    }).join();
  }
  EXPECT_EQ(2u, Stats(f).chunk_count) << "each thread's shard grew its own chunks";
}

TEST_F(FixedBlockStreams, MemoryInfoAndTheFailureRecordAreExact) {
  gmr_fixed_block_resource_config c = Config();
  c.max_chunk_count = 1;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  void *a = Alloc(r, 100), *b = Alloc(r, 64 * KiB), *big = Alloc(r, 200 * KiB);
  gmr_memory_info m = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &m));
  EXPECT_EQ(256 * KiB + 200 * KiB, m.held_bytes);  // one chunk + the forwarded request
  EXPECT_EQ(128 * KiB + 200 * KiB, m.live_bytes);
  EXPECT_EQ(128 * KiB, m.free_bytes);
  EXPECT_EQ(64 * KiB, m.largest_free_block_bytes);
  EXPECT_EQ(2u, m.free_block_count);
  void *x = Alloc(r, 10), *y = Alloc(r, 10), *z = nullptr;
  gmr_failure fl = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 10, 0, nullptr, &z, &fl));
  EXPECT_TRUE(fl.free_info_known);
  EXPECT_EQ(0u, fl.free_bytes);
  EXPECT_EQ(0u, fl.largest_free_block_bytes);
  for (void *p : {a, x, y})
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, p == a ? 100 : 10, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 64 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, big, 200 * KiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &m));
  EXPECT_EQ(256 * KiB, m.free_bytes);
  EXPECT_EQ(4u, m.free_block_count);
  EXPECT_EQ(m.held_bytes, m.free_bytes);
}

}  // namespace

namespace {

// Shards, cross-thread frees, lists, record_stream, growth outside the spin
// lock and trims at once (run under --config=tsan for races).
TEST_F(FixedBlockStreams, EverythingAtOnceOverThreads) {
  gmr_fixed_block_resource_config c = Config(8);
  c.shard_count = 3;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  constexpr int kThreads = 6;
  std::vector<gmr_stream> streams;
  for (int t = 0; t < kThreads; ++t) streams.push_back(t < 2 ? nullptr : Stream());
  std::atomic<int> failures{0};
  std::mutex m;
  std::vector<void *> exchange;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 13u + 1u);
      std::vector<void *> mine;
      for (int i = 0; i < 4000; ++i) {
        unsigned op = rng() % 20;
        if (op < 9 || mine.empty()) {
          void *p = nullptr;
          if (gmr_resource_allocate(r, 1000, 0, streams[t], &p) != GMR_OK) {
            failures++;
            continue;
          }
          if (rng() % 8 == 0 &&
              gmr_resource_record_stream(r, p, streams[(t + 1) % kThreads]) != GMR_OK) {
            failures++;
          }
          mine.push_back(p);
        } else if (op < 15) {
          if (gmr_resource_deallocate(r, mine.back(), 1000, 0, streams[t]) != GMR_OK) failures++;
          mine.pop_back();
        } else if (op < 18) {
          std::lock_guard<std::mutex> g(m);
          exchange.push_back(mine.back());
          mine.pop_back();
          if (exchange.size() > 6) {
            if (gmr_resource_deallocate(r, exchange.front(), 1000, 0, streams[t]) != GMR_OK)
              failures++;
            exchange.erase(exchange.begin());
          }
        } else if (op == 18) {
          gmr_block_list *list = nullptr;
          if (gmr_fixed_block_resource_allocate_blocks(f, 3 * 64 * KiB, streams[t], &list) != GMR_OK ||
              gmr_fixed_block_resource_deallocate_blocks(f, list, streams[t]) != GMR_OK) {
            failures++;
          }
        } else if (t == 0) {
          size_t released = 0;
          if (gmr_resource_trim(r, &released) != GMR_OK) failures++;
        }
      }
      for (void *p : mine) {
        if (gmr_resource_deallocate(r, p, 1000, 0, streams[t]) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  for (void *p : exchange) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  EXPECT_EQ(0, failures.load());
  gmr_fixed_block_resource_stats s = Stats(f);
  EXPECT_EQ(0u, s.in_use_block_count);
  EXPECT_EQ(s.block_count, s.free_block_count);
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, Stats(f).held_bytes);
}

}  // namespace

namespace {

// A block whose record_stream wait cannot complete still goes back at
// destroy, and its event is destroyed with the resource's: nothing leaks.
TEST_F(FixedBlockStreams, DestroyWithABlockStillWaitingLeaksNothing) {
  gmr_fixed_block_resource *f = nullptr;
  gmr_fixed_block_resource_config c = Config();
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_create(upstream_, &c, &f));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s = Stream(), side = Stream();
  void *p = Alloc(r, 100, s);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, side));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(side, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
  EXPECT_EQ(1u, Stats(f).deferred_block_count);
  for (gmr_cuda_call call : {GMR_CUDA_CALL_EVENT_QUERY, GMR_CUDA_CALL_DEVICE_SYNCHRONIZE,
                             GMR_CUDA_CALL_EVENT_SYNCHRONIZE}) {
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(call, 0, UINT64_MAX, cudaErrorLaunchFailure));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

}  // namespace
