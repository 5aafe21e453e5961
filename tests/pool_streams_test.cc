// pool_resource and the streams memory is freed on, by default (a stream may
// be destroyed as soon as the call that named it returns): no event recorded
// per free once a stream is known, a dead stream's memory never handed to a
// new stream that got its handle without ordering, per-thread default
// streams told apart, records on demand, and record_stream (PyTorch's
// Tensor.record_stream).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/pool_resource.h"
#include "gmr/sim/streams.h"
#include "tests/pool_test_fixture.h"
#include "tests/support/sim_fixture.h"

namespace {

using namespace pool_test;

// The default stream-event mode, one arena, exact chunks.
gmr_pool_resource_config default_events_config(size_t min_growth = 4 * MiB) {
  gmr_pool_resource_config c = small_config(min_growth);
  c.streams.streams_outlive_resource = false;
  return c;
}

class PoolStreamsTest : public PoolTest {
 protected:
  // A new stream that got `dead`'s handle (the driver reuses the address of
  // a destroyed stream; gmr_cuda_sim_reuse_stream_handles), or nullptr.
  gmr_stream StreamWithHandle(gmr_stream dead) {
    gmr_stream s = Stream();
    return s == dead ? s : nullptr;
  }
};

// Issue 11: the event recorded at every free on a created stream serialised
// the threads in the driver. Once a stream is known, its frees record nothing.
TEST_F(PoolStreamsTest, FreesOnAKnownStreamRecordNoEvent) {
  gmr_resource *r = Make(default_events_config());
  gmr_stream s = Stream();
  void *p = Alloc(r, MiB, s);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
    ASSERT_EQ(p, Alloc(r, MiB, s));
  }
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  gmr_pool_resource_stats st = Stats(r);
  // The growth and the stream's first few frees; none after.
  EXPECT_LE(st.event_record_count, 6u);
  EXPECT_EQ(0u, st.stream_wait_count);
  ExpectInvariants(r);
}

// With stream_ids, a stream destroyed with its work pending; a new stream
// gets its handle. The new stream may take the memory only through an
// ordering: a wait on the event recorded at the free, or a device
// synchronisation.
TEST_F(PoolStreamsTest, ANewStreamWithADeadStreamsHandleNeverTakesItsMemoryUnordered) {
  for (int frees : {1, 8}) {  // the last free recorded, and not recorded
    gmr_pool_resource *pool = nullptr;
    gmr_pool_resource_config c = default_events_config();
    c.streams.stream_ids = true;
    ASSERT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, &c, &pool));
    gmr_resource *r = gmr_pool_resource_as_resource(pool);
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_reuse_stream_handles(true));  // as the driver often does
    gmr_stream s1 = nullptr;
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1));
    void *p = Alloc(r, MiB, s1);
    for (int i = 1; i < frees; ++i) {
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s1));
      ASSERT_EQ(p, Alloc(r, MiB, s1));
    }
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold_beyond_destroy(s1));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s1));  // a kernel may still use p
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s1));
    gmr_stream s2 = StreamWithHandle(s1);
    ASSERT_NE(nullptr, s2) << "the simulation gave no new stream the destroyed one's handle";
    uint64_t syncs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
    void *q = Alloc(r, MiB, s2);
    bool ordered = gmr_cuda_sim_get_stream_wait_count(s2) > 0 ||
                   gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE) > syncs;
    EXPECT_TRUE(q != p || ordered) << "frees=" << frees
                                   << ": the dead stream's pending block went to the new stream "
                                      "that got its handle, unordered";
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s2));
    ExpectInvariants(r);
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

// cudaStreamPerThread is a different stream in every thread: one thread's
// free is not another thread's to reuse without ordering.
TEST_F(PoolStreamsTest, PerThreadDefaultStreamsAreToldApart) {
  gmr_resource *r = Make(default_events_config());
  gmr_stream pt = reinterpret_cast<gmr_stream>(cudaStreamPerThread);
  void *p = nullptr;
  std::thread([&] {
    p = Alloc(r, MiB, pt);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, pt));
  }).join();
  uint64_t ordering_calls = EventCalls() + gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  void *q = nullptr;
  std::thread([&] { q = Alloc(r, MiB, pt); }).join();
  uint64_t after = EventCalls() + gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  EXPECT_TRUE(q != p || after > ordering_calls)
      << "another thread's per-thread stream reused the block with no ordering";
  // Told apart by thread, without asking the driver (stream_ordered/stream_event.h).
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, nullptr));
  ExpectInvariants(r);
}

// A producer frees on s1, a consumer allocates on s2: once s2 has asked for
// s1's memory, s1 records at its next call, and s2 reuses it without growing.
TEST_F(PoolStreamsTest, AStreamRecordsOnDemandSoAnotherReusesItsMemory) {
  gmr_resource *r = Make(default_events_config(8 * MiB));
  gmr_stream s1 = Stream(), s2 = Stream();
  for (int i = 0; i < 10; ++i) {  // past s1's first frees
    void *p = Alloc(r, MiB, s1);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s1));
  }
  size_t records = Stats(r).event_record_count;
  uint64_t syncs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  for (int i = 0; i < 20; ++i) {
    void *p = Alloc(r, 6 * MiB, s1);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 6 * MiB, 0, s1));
    void *q = Alloc(r, 6 * MiB, s2);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 6 * MiB, 0, s2));
  }
  gmr_pool_resource_stats st = Stats(r);
  EXPECT_EQ(1u, st.chunk_count) << "the consumer grew instead of reusing";
  EXPECT_GT(st.event_record_count, records);  // recorded because s2 asked
  EXPECT_LE(gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE), syncs + 1);
  ExpectInvariants(r);
}

// ---- record_stream (issue 12) -------------------------------------------------

TEST_F(PoolStreamsTest, RecordStreamKeepsTheBlockUntilTheRecordedStreamsWorkIsDone) {
  gmr_resource *r = Make(default_events_config());
  gmr_stream s1 = Stream(), side = Stream();
  void *p = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, side));
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, side));  // twice is once
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(side, true));  // the side stream still reads p
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s1));
  void *q = Alloc(r, MiB, s1);
  EXPECT_NE(p, q) << "reused while the recorded stream's work was pending";
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(side, false));
  void *t = Alloc(r, MiB, s1);
  EXPECT_EQ(p, t) << "free once the recorded stream's work is done";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s1));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, t, MiB, 0, s1));
  ExpectInvariants(r);
}

TEST_F(PoolStreamsTest, RecordStreamRefusesWhatIsNotALiveAllocation) {
  gmr_resource *r = Make(default_events_config());
  gmr_stream side = Stream();
  void *p = Alloc(r, 5000);
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_record_stream(r, &local, side));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_record_stream(r, static_cast<char *>(p) + 256, side));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_record_stream(r, nullptr, side));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 5000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_record_stream(r, p, side));
  ExpectInvariants(r);
}

TEST_F(PoolStreamsTest, RecordStreamOnTheFreeingStreamCostsNothing) {
  gmr_resource *r = Make(default_events_config());
  gmr_stream s = Stream();
  void *p = Alloc(r, MiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, s));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  EXPECT_EQ(p, Alloc(r, MiB, s));  // same stream: ordered anyway
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
}

// A trim whose device synchronisation fails (refused while any stream
// captures, or a fault) still waits, one by one, for the streams whose frees
// are recorded: their chunks go back; only the chunk of a stream whose frees
// no record covers stays until a later trim synchronises the device.
TEST_F(PoolStreamsTest, TrimWaitsForRecordedStreamsWhenTheDeviceSynchronisationFails) {
  gmr_resource *r = Make(default_events_config(4 * MiB));
  gmr_stream a = Stream(), b = Stream();
  void *pa = Alloc(r, 3 * MiB, a);  // chunk A
  void *pb = Alloc(r, 3 * MiB, b);  // chunk B
  for (int i = 0; i < 4; ++i) {     // b's first frees record at once; then none
    void *q = Alloc(r, KiB, b);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, KiB, 0, b));
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, pa, 3 * MiB, 0, a));  // recorded, pending
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, pb, 3 * MiB, 0, b));  // no record covers it
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, 1,
                                                cudaErrorUnknown));
  gmr_pool_resource_stats before = Stats(r);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(4 * MiB, released) << "chunk A, after waiting for a's event";
  gmr_pool_resource_stats after = Stats(r);
  EXPECT_EQ(before.device_synchronize_count + 1, after.device_synchronize_count);
  EXPECT_EQ(before.event_synchronize_count + 1, after.event_synchronize_count);
  EXPECT_EQ(4 * MiB, after.held_bytes);
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));  // the device synchronises now
  EXPECT_EQ(4 * MiB, released) << "chunk B";
  EXPECT_EQ(0u, Stats(r).held_bytes);
  ExpectInvariants(r);
}

TEST_F(PoolStreamsTest, TrimAndDestroyWaitForRecordedStreams) {
  gmr_pool_resource *pool = nullptr;
  gmr_pool_resource_config c = default_events_config();
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, &c, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  gmr_stream s1 = Stream(), side = Stream();
  void *p = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, side));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(side, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s1));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(4 * MiB, released);  // waited for the side stream, then gave the chunk back
  void *q = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, q, side));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s1));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

}  // namespace

namespace {

// Threads on their own streams and on the default stream, with cross-thread
// frees, record_stream, growth (outside the spin lock), trims and device
// synchronisations all at once: every invariant holds at the end and nothing
// fails (run under --config=tsan for races).
TEST_F(PoolStreamsTest, EverythingAtOnceOverThreads) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 4;
  c.min_growth_bytes = 2 * MiB;
  c.max_growth_bytes = 4 * MiB;
  gmr_resource *r = Make(c);
  constexpr int kThreads = 6;
  std::vector<gmr_stream> streams;
  for (int t = 0; t < kThreads; ++t) streams.push_back(t < 2 ? nullptr : Stream());
  std::atomic<int> failures{0};
  std::mutex m;
  std::vector<std::pair<void *, size_t>> exchange;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 31u + 7u);
      std::vector<std::pair<void *, size_t>> mine;
      for (int i = 0; i < 4000; ++i) {
        unsigned op = rng() % 20;
        if (op < 9 || mine.empty()) {
          // Two statements: the operands of % are unsequenced (builds differed).
          const auto draw = rng();
          size_t bytes = 1 + draw % (rng() % 8 == 0 ? 3 * MiB : 48 * KiB);
          void *p = nullptr;
          if (gmr_resource_allocate(r, bytes, 0, streams[t], &p) != GMR_OK) {
            failures++;
            continue;
          }
          if (rng() % 8 == 0 &&
              gmr_resource_record_stream(r, p, streams[(t + 1) % kThreads]) != GMR_OK) {
            failures++;
          }
          mine.emplace_back(p, bytes);
        } else if (op < 16) {
          auto b = mine.back();
          mine.pop_back();
          if (gmr_resource_deallocate(r, b.first, b.second, 0, streams[t]) != GMR_OK) failures++;
        } else if (op < 19) {
          std::lock_guard<std::mutex> g(m);
          exchange.push_back(mine.back());
          mine.pop_back();
          if (exchange.size() > 6) {
            auto b = exchange.front();
            exchange.erase(exchange.begin());
            if (gmr_resource_deallocate(r, b.first, b.second, 0, streams[t]) != GMR_OK) failures++;
          }
        } else if (t == 0) {
          size_t released = 0;
          if (gmr_resource_trim(r, &released) != GMR_OK) failures++;
        }
      }
      for (auto &b : mine) {
        if (gmr_resource_deallocate(r, b.first, b.second, 0, streams[t]) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  for (auto &b : exchange)
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b.first, b.second, 0, nullptr));
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0u, Stats(r).in_use_count);
  ExpectInvariants(r);
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, Stats(r).held_bytes);
}

}  // namespace

namespace {

// A block whose record_stream wait cannot complete (queries and the device
// synchronisation fail) still goes back at destroy, and its event is
// destroyed with the pool's: nothing leaks.
TEST_F(PoolStreamsTest, DestroyWithABlockStillWaitingLeaksNothing) {
  gmr_pool_resource *pool = nullptr;
  gmr_pool_resource_config c = default_events_config();
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(upstream_, &c, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  gmr_stream s1 = Stream(), side = Stream();
  void *p = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, side));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(side, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s1));
  EXPECT_EQ(1u, Stats(r).deferred_block_count);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_EVENT_QUERY, 0, UINT64_MAX,
                                                cudaErrorLaunchFailure));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, UINT64_MAX,
                                                cudaErrorLaunchFailure));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_EVENT_SYNCHRONIZE, 0, UINT64_MAX,
                                                cudaErrorLaunchFailure));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cuda_));
}

}  // namespace
