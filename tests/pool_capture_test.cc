// pool_resource's allocate_capturing (issue 11): allocations made while the
// stream captures a CUDA graph, served from free memory or by growing through
// an upstream that can allocate during capture, never breaking the capture,
// with the thread's capture mode restored on every path.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <thread>

#include "core/cuda_layer.h"
#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/pool_resource.h"
#include "gmr/sim/streams.h"
#include "tests/pool_test_fixture.h"
#include "tests/support/sim_fixture.h"

namespace {

using namespace pool_test;

// An upstream that can allocate during capture the way cuda(kind=device)
// does it: cudaMalloc with the thread in relaxed capture mode.
struct CaptureUpstream {
  gmr_resource base;
  gmr_resource *inner;  // a cuda_resource of kind device
};

gmr_status cu_allocate(gmr_resource *self, size_t bytes, size_t alignment, gmr_stream stream,
                       void **out, gmr_failure *failure) {
  return gmr_resource_allocate_ex(reinterpret_cast<CaptureUpstream *>(self)->inner, bytes,
                                  alignment, stream, out, failure);
}

gmr_status cu_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                         gmr_stream stream) {
  return gmr_resource_deallocate(reinterpret_cast<CaptureUpstream *>(self)->inner, ptr, bytes,
                                 alignment, stream);
}

gmr_status cu_destroy(gmr_resource *self) {
  std::free(self);
  return GMR_OK;
}

gmr_resource *cu_get_upstream(const gmr_resource *self) {
  return reinterpret_cast<const CaptureUpstream *>(self)->inner;
}

gmr_status cu_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                 gmr_stream stream, void **out, gmr_failure *failure) {
  (void)stream;
  const gmr__cuda_ops *cuda = gmr__cuda();
  enum cudaStreamCaptureMode saved;
  cudaError_t err = gmr__cuda_capture_relaxed_enter(cuda, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
  // Not stream-ordered: on no stream at all.
  gmr_status st = gmr_resource_allocate_ex(reinterpret_cast<CaptureUpstream *>(self)->inner, bytes,
                                           alignment, nullptr, out, failure);
  gmr__cuda_capture_relaxed_leave(cuda, saved);
  return st;
}

const gmr_resource_vtbl capture_upstream_vtbl = {
    GMR_RESOURCE_VTBL_VERSION, "capture_upstream", cu_allocate, cu_deallocate, cu_destroy,
    cu_get_upstream, nullptr, nullptr, nullptr, nullptr, cu_allocate_capturing, nullptr};

class PoolCaptureTest : public PoolTest {
 protected:
  void SetUp() override {
    PoolTest::SetUp();
    auto *u = static_cast<CaptureUpstream *>(std::calloc(1, sizeof(CaptureUpstream)));
    u->base.vtbl = &capture_upstream_vtbl;
    u->inner = upstream_;
    capturing_upstream_ = &u->base;
  }

  void TearDown() override {
    for (gmr_pool_resource *p : pools_) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_pool_resource_as_resource(p)));
    }
    pools_.clear();
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(capturing_upstream_));
    PoolTest::TearDown();
  }

  // Ends the capture on `s`: GMR_OK when the capture stayed valid.
  static gmr_status EndCapture(gmr_stream s) {
    gmr_graph g = nullptr;
    gmr_status st = gmr_cuda_stream_end_capture(s, &g);
    if (g != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
    }
    return st;
  }

  gmr_resource *capturing_upstream_ = nullptr;
};

TEST_F(PoolCaptureTest, ServesFreeMemoryWithoutAnyCallThatJoinsOrBreaksTheCapture) {
  gmr_resource *r = Make(small_config(), capturing_upstream_);
  gmr_stream s = Stream();
  void *p = Alloc(r, MiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  uint64_t events = EventCalls();
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));  // global mode
  void *q = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, MiB, 0, s, &q, &f)) << f.message;
  EXPECT_EQ(p, q);
  void *q2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, MiB, 0, s, &q2, &f)) << f.message;  // split
  EXPECT_EQ(GMR_OK, EndCapture(s));
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(mallocs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(events, EventCalls());
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q2, MiB, 0, s));
  ExpectInvariants(r);
}

// A trim while a stream captures: the capturing stream's frees cannot be
// recorded (the record would join the graph), and a device synchronisation
// would be refused and break the capture. Its memory stays its own until a
// trim after the capture.
TEST_F(PoolCaptureTest, TrimDuringACaptureLeavesTheCaptureValid) {
  gmr_resource *r = Make(small_config(4 * MiB));  // streams outlive the pool: lazy records
  gmr_stream s = Stream();
  void *p = Alloc(r, MiB, s);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));  // not recorded: s captures
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, released);
  EXPECT_EQ(GMR_OK, EndCapture(s)) << "no call broke the capture";
  EXPECT_EQ(0u, Stats(r).device_synchronize_count);
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(4 * MiB, released) << "after the capture, recorded and waited for";
  ExpectInvariants(r);
}

TEST_F(PoolCaptureTest, GrowsThroughTheUpstreamAndTheCaptureStaysValid) {
  gmr_resource *r = Make(small_config(4 * MiB), capturing_upstream_);
  gmr_stream s = Stream();
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr, *q = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, MiB, 0, s, &p, &f)) << f.message;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 5 * MiB, 0, s, &q, &f)) << f.message;
  EXPECT_EQ(GMR_OK, EndCapture(s));
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(mallocs + 2, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_pool_resource_stats st = Stats(r);
  EXPECT_EQ(2u, st.chunk_count);
  EXPECT_EQ(4 * MiB + 6 * MiB, st.held_bytes);
  // The new chunk's rest is free for any stream (cudaMalloc is not ordered).
  gmr_stream other = Stream();
  void *o = Alloc(r, 2 * MiB, other);
  EXPECT_EQ(2u, Stats(r).chunk_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, o, 2 * MiB, 0, other));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 5 * MiB, 0, s));
  ExpectInvariants(r);
}

// The C registry's stack (pool > cuda(kind=async)) grows during a capture
// through async's capture slot: no memory node, the capture stays valid.
TEST_F(PoolCaptureTest, GrowsOverAsyncDuringACapture) {
  gmr_cuda_resource_config cc = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  cc.kind = GMR_CUDA_KIND_ASYNC;
  gmr_cuda_resource *async = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&cc, &async));
  gmr_pool_resource *pool = nullptr;
  gmr_pool_resource_config c = small_config();
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(gmr_cuda_resource_as_resource(async), &c, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  gmr_stream s = Stream();
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, MiB, 0, s, &p, &f)) << f.message;
  EXPECT_NE(nullptr, p);
  EXPECT_EQ(GMR_OK, EndCapture(s));
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_GE(Stats(r).held_bytes, MiB);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cuda_resource_as_resource(async)));
}

TEST_F(PoolCaptureTest, InjectedFailuresRestoreTheModeAndKeepTheCapture) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.streams.streams_outlive_resource = false;  // the default: other's free is recorded at once
  gmr_resource *r = Make(c, capturing_upstream_);
  gmr_stream s = Stream(), other = Stream();
  // Memory freed on another stream, recorded: taking it needs an event query,
  // which needs relaxed mode. (A lazy stream's memory is not reachable during
  // a capture: recording on it would be a stream-ordered call.)
  void *o = Alloc(r, MiB, other);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, o, MiB, 0, other));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  // The switch to relaxed mode fails: nothing is asked of CUDA or upstream.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_THREAD_EXCHANGE_CAPTURE_MODE, 0, 1,
                                                cudaErrorUnknown));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_capturing(r, 8 * MiB, 0, s, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  // The upstream has no memory: the mode is restored all the same.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, UINT64_MAX,
                                                cudaErrorMemoryAllocation));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_capturing(r, 8 * MiB, 0, s, &p, &f));
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_TRUE(f.free_info_known);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  // Free memory of the other stream, through a query in relaxed mode.
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 3 * MiB, 0, s, &p, &f)) << f.message;
  EXPECT_EQ(o, p);
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(GMR_OK, EndCapture(s));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 3 * MiB, 0, s));
  ExpectInvariants(r);
}

// ---- streams known by handle and id (the default: streams may be destroyed) ----

gmr_pool_resource_config identified_config() {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.streams.streams_outlive_resource = false;
  return c;
}

// Seen on an H100: cudaStreamGetId during a global capture breaks it. The pool
// learns a capturing stream's id with the thread in relaxed mode, so plain
// allocate and deallocate on the capturing stream, and allocate_capturing,
// all leave the capture valid.
TEST_F(PoolCaptureTest, ACapturingStreamIsIdentifiedWithoutBreakingTheCapture) {
  gmr_resource *r = Make(identified_config(), capturing_upstream_);
  gmr_stream s = Stream();
  void *p = Alloc(r, MiB, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));  // global mode
  void *q = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(r, MiB, 0, s, &q, &f)) << f.message;
  EXPECT_EQ(p, q);  // the stream's own block
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, MiB, 0, s, &q, &f)) << f.message;
  EXPECT_EQ(p, q);
  void *big = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 8 * MiB, 0, s, &big, &f)) << f.message;
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, big, 8 * MiB, 0, s));
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(GMR_OK, EndCapture(s));  // still valid
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, s));
  ExpectInvariants(r);
}

// With stream_ids, a stream destroyed with a pending free, and a new stream
// that gets its handle and captures: the new stream never takes the old
// one's block, and its capture stays valid.
TEST_F(PoolCaptureTest, ANewStreamWithAReusedHandleCapturesWithoutTheOldStreamsBlock) {
  gmr_pool_resource_config c = identified_config();
  c.streams.stream_ids = true;
  gmr_resource *r = Make(c, capturing_upstream_);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_reuse_stream_handles(true));
  gmr_stream old = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&old));
  void *p = Alloc(r, MiB, old);
  for (int i = 0; i < 8; ++i) {  // past the first frees, which record at once
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, old));
    p = Alloc(r, MiB, old);
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold_beyond_destroy(old));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, old));  // pending, unrecorded
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(old));
  gmr_stream fresh = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&fresh));
  ASSERT_EQ(old, fresh);  // the handle is reused
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(fresh));
  void *q = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, MiB, 0, fresh, &q, &f)) << f.message;
  EXPECT_NE(p, q);
  EXPECT_EQ(GMR_OK, EndCapture(fresh));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, MiB, 0, fresh));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(fresh));
  ExpectInvariants(r);
}

// While one thread captures in global mode, another thread's pool calls on
// its own stream (reuse of its own blocks, and of memory another stream
// freed, found through an event query) make no call that breaks the capture.
TEST_F(PoolCaptureTest, AnotherThreadsCallsLeaveAGlobalCaptureValid) {
  gmr_resource *r = Make(identified_config(), capturing_upstream_);
  gmr_stream c = Stream(), t = Stream(), other = Stream();
  void *x = Alloc(r, 4 * MiB, t);      // chunk A, t's
  void *y = Alloc(r, 4 * MiB, other);  // chunk B, other's
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(other, true));
  ASSERT_EQ(GMR_OK,
            gmr_resource_deallocate(r, y, 4 * MiB, 0, other));  // recorded (a new stream's free)
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 4 * MiB, 0, t));
  for (int i = 0; i < 8; ++i) {  // past t's first frees, which record
    void *p = Alloc(r, MiB, t);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, t));
  }
  uint64_t queries = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_QUERY);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(other, false));  // done, but nobody knows yet
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(c));
  std::thread([&] {
    for (int i = 0; i < 100; ++i) {
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, MiB, 0, t, &p));
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, t));
    }
    void *a = nullptr, *b = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4 * MiB, 0, t, &a));
    EXPECT_EQ(x, a);  // t's own
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4 * MiB, 0, t, &b));
    EXPECT_EQ(y, b);  // other's, found done by an event query
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 4 * MiB, 0, t));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 4 * MiB, 0, t));
  }).join();
  EXPECT_EQ(GMR_OK, EndCapture(c));
  EXPECT_LT(queries, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_QUERY));
  EXPECT_EQ(2u, Stats(r).chunk_count);
  ExpectInvariants(r);
}

// Once warm, a stream's own alloc/free pairs ask for its id at most once per
// allocation and never at a free.
TEST_F(PoolCaptureTest, WarmPairsOnACreatedStreamAskTheIdOnlyAtAllocations) {
  gmr_pool_resource_config c = identified_config();
  c.streams.stream_ids = true;
  gmr_resource *r = Make(c);
  gmr_stream s = Stream();
  for (int i = 0; i < 8; ++i) {
    void *p = Alloc(r, MiB, s);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  }
  uint64_t ids = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID);
  uint64_t events = EventCalls();
  for (int i = 0; i < 100; ++i) {
    void *p = Alloc(r, MiB, s);
    uint64_t at_free = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
    EXPECT_EQ(at_free, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID));
  }
  EXPECT_LE(gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID), ids + 100);
  EXPECT_EQ(events, EventCalls());
  ExpectInvariants(r);
}

// By handle (the default, as RMM and PyTorch), a warm pair on a created
// stream makes no CUDA call at all: no stream id, no event.
TEST_F(PoolCaptureTest, WarmPairsByHandleMakeNoCudaCall) {
  gmr_resource *r = Make(identified_config());
  gmr_stream s = Stream();
  for (int i = 0; i < 8; ++i) {
    void *p = Alloc(r, MiB, s);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  }
  uint64_t ids = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID);
  uint64_t infos = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  uint64_t events = EventCalls();
  for (int i = 0; i < 100; ++i) {
    void *p = Alloc(r, MiB, s);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, MiB, 0, s));
  }
  EXPECT_EQ(ids, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID));
  EXPECT_EQ(infos, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO));
  EXPECT_EQ(events, EventCalls());
  ExpectInvariants(r);
}

}  // namespace
