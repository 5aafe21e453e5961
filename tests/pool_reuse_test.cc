// pool_resource and stream-ordered reuse with simulated events: a free on a
// stream is reused at once on that stream, on another stream once its event
// completed (or after a wait), during a capture only on the capturing
// stream, and with stream ordering off without any CUDA call.
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
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/host_resource.h"
#include "gmr/pool_resource.h"
#include "gmr/sim/streams.h"
#include "tests/pool_test_fixture.h"
#include "tests/support/sim_fixture.h"

namespace {

using namespace pool_test;

// RMM's rule, the default before records on demand and kept as an option
// (record_at_every_free): the program may destroy a stream right after the
// call that named it (cudaStreamDestroy is legal with work pending). Every
// free on a created stream then records its event at once and the pool never
// touches the stream again; on the default stream nothing is recorded.
// pool_streams_test.cc checks the default, records on demand.
TEST_F(PoolTest, ByDefaultAFreeOnACreatedStreamRecordsItsEventAtOnce) {
  gmr_pool_resource_config c = small_config();
  c.streams.streams_outlive_resource = false;
  c.streams.record_at_every_free = true;
  gmr_resource *r = Make(c);
  gmr_stream s = nullptr;  // not Stream(): destroyed below, before the pool
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  void *p = Alloc(r, MiB, s);
  size_t records = Stats(r).event_record_count;  // the new chunk's
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
    EXPECT_EQ(p, Alloc(r, MiB, s));
  }
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  EXPECT_EQ(records + 11, Stats(r).event_record_count);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
  // Another stream takes s's memory through the recorded event alone, and
  // trim and destroy need nothing of s: the fixture fails the test if any
  // CUDA call names the destroyed stream.
  gmr_stream other = Stream();
  EXPECT_EQ(p, Alloc(r, MiB, other));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, other));
  void *d = Alloc(r, MiB, nullptr);
  size_t before = Stats(r).event_record_count;
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, d, MiB, 0, nullptr));
    EXPECT_EQ(d, Alloc(r, MiB, nullptr));
  }
  EXPECT_EQ(before, Stats(r).event_record_count);  // the default stream stays lazy
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, d, MiB, 0, nullptr));
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(4 * MiB, released);
}

TEST_F(PoolTest, SameStreamReuseMakesNoCudaCallAtAll) {
  gmr_resource *r = Make(small_config());
  gmr_stream s = Stream();
  void *p = Alloc(r, MiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  uint64_t calls_before = 0;
  for (int c = 0; c < GMR_CUDA_CALL_COUNT; ++c) {
    calls_before += gmr_cuda_sim_get_call_count(static_cast<gmr_cuda_call>(c));
  }
  for (int i = 0; i < 100; ++i) {
    void *q = Alloc(r, MiB, s);
    EXPECT_EQ(p, q);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s));
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
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s1));
  EXPECT_EQ(0u, EventCalls());  // a free records nothing
  void *q = Alloc(r, MiB, s2);
  EXPECT_EQ(p, q);  // s1's work is done (the simulation completes it at once)
  gmr_pool_resource_stats s = Stats(r);
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
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, t, MiB, 0, s3));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s2));
  ExpectInvariants(r);
}

TEST_F(PoolTest, AnotherStreamWaitsForPendingWorkBeforeReuse) {
  gmr_resource *r = Make(small_config());
  gmr_stream s1 = Stream(), s2 = Stream();
  void *p = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1, true));  // s1's work stays pending
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s1));
  void *q = Alloc(r, MiB, s2);
  EXPECT_EQ(p, q);  // reused, but only after s2 waits for s1
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(s2));
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(s1));
  gmr_pool_resource_stats s = Stats(r);
  EXPECT_EQ(1u, s.event_record_count);
  EXPECT_EQ(1u, s.event_query_count);
  EXPECT_EQ(1u, s.stream_wait_count);
  EXPECT_EQ(1u, s.grow_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s2));
  ExpectInvariants(r);
}

TEST_F(PoolTest, PendingMemoryTooSmallMeansGrowthNotWaiting) {
  gmr_resource *r = Make(small_config(2 * MiB));
  gmr_stream s1 = Stream(), s2 = Stream();
  void *p = Alloc(r, MiB, s1);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s1));  // s1 holds 2 MiB free, pending
  void *q = Alloc(r, 3 * MiB, s2);
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(s2));
  EXPECT_EQ(2u, Stats(r).grow_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 3 * MiB, 0, s2));
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
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 2 * MiB, 0, s1));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 2 * MiB, 0, s3));  // touching, other stream
  EXPECT_EQ(2u, Stats(r).free_block_count);
  void *c = Alloc(r, 4 * MiB, s2);  // neither stream alone has 4 MiB
  EXPECT_EQ(a, c);
  EXPECT_EQ(2u, gmr_cuda_sim_get_stream_wait_count(s2));
  EXPECT_EQ(1u, Stats(r).grow_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, c, 4 * MiB, 0, s2));
  ExpectInvariants(r);
}

TEST_F(PoolTest, DuringCaptureOnlyTheStreamsOwnBlocksAreUsed) {
  gmr_resource *r = Make(small_config());
  gmr_stream s = Stream(), other = Stream();
  void *p = Alloc(r, MiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  void *o = Alloc(r, 8 * MiB, other);
  ASSERT_EQ(GMR_OK,
            gmr_resource_deallocate(r, o, 8 * MiB, 0, other));  // other stream's free memory
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  uint64_t events = EventCalls();

  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *q = Alloc(r, MiB, s);  // its own block: fine inside the capture
  EXPECT_EQ(p, q);
  void *big = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(r, 6 * MiB, 0, s, &big, &f));
  EXPECT_EQ(nullptr, big);
  EXPECT_NE(nullptr, std::strstr(f.message, "capture")) << f.message;
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s));
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph));  // the capture survived
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  EXPECT_EQ(mallocs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(events, EventCalls());
  ExpectInvariants(r);
}

TEST_F(PoolTest, WithoutStreamOrderingNoCudaCallIsMade) {
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_resource *h = gmr_host_resource_as_resource(host);
  gmr_pool_resource_config c = small_config();
  c.streams.stream_ordered = false;
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
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s1));
  void *q = Alloc(r, MiB, s2);
  EXPECT_EQ(p, q);  // reused at once by another stream
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s2));
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

}  // namespace
