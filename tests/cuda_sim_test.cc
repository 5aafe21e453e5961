// The host simulation of the CUDA layer: what tests of every resource rely on.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <set>
#include <thread>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/sim_fixture.h"

// The simulation's CUDA ops, used directly to check the layer itself.
#include "core/cuda_layer.h"

namespace {

using gmr_test::SimTest;

class CudaSim : public SimTest {
 protected:
  const gmr__cuda_ops *ops() { return gmr__cuda(); }
};

TEST_F(CudaSim, IsActiveAndCountsCalls) {
  EXPECT_TRUE(gmr_cuda_is_simulated());
  EXPECT_TRUE(ops()->simulated);
  int n = -1;
  ASSERT_EQ(GMR_OK, gmr_device_get_count(&n));
  EXPECT_EQ(1, n);
  ASSERT_EQ(GMR_OK, gmr_device_get_count(&n));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_GET_DEVICE_COUNT));
  EXPECT_STREQ("cudaGetDeviceCount", gmr_cuda_call_name(GMR_CUDA_CALL_GET_DEVICE_COUNT));
  EXPECT_STREQ("unknown", gmr_cuda_call_name(GMR_CUDA_CALL_COUNT));
}

TEST_F(CudaSim, InjectedFailureHitsExactlyTheNthCall) {
  // The 3rd cudaMalloc from now fails with cudaErrorMemoryAllocation.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 2, 1,
                                                cudaErrorMemoryAllocation));
  void *p[4] = {};
  EXPECT_EQ(cudaSuccess, ops()->malloc(&p[0], 1000));
  EXPECT_EQ(cudaSuccess, ops()->malloc(&p[1], 1000));
  EXPECT_EQ(cudaErrorMemoryAllocation, ops()->malloc(&p[2], 1000));
  EXPECT_EQ(nullptr, p[2]);
  EXPECT_EQ(cudaSuccess, ops()->malloc(&p[3], 1000));
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(3u, u.allocation_count);   // the failed call changed nothing
  EXPECT_EQ(3u * 1024, u.used_bytes);  // 1000 rounds to 1024 (256-byte granules)
  for (void *q : p) EXPECT_EQ(cudaSuccess, ops()->free(q));
  EXPECT_EQ(4u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
}

TEST_F(CudaSim, StreamIdsAreUniqueAndNeverReused) {
  std::set<unsigned long long> ids;
  for (int i = 0; i < 20; ++i) {
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaSuccess, ops()->stream_create(&s));
    unsigned long long id = 0;
    ASSERT_EQ(cudaSuccess, ops()->stream_get_id(s, &id));
    EXPECT_TRUE(ids.insert(id).second) << "id " << id << " given twice";
    ASSERT_EQ(cudaSuccess, ops()->stream_destroy(s));  // the next may get the same handle
  }
  // The per-thread default stream is a different stream in every thread.
  unsigned long long mine = 0, theirs = 0, legacy = 0;
  ASSERT_EQ(cudaSuccess, ops()->stream_get_id(cudaStreamPerThread, &mine));
  std::thread([&] { EXPECT_EQ(cudaSuccess, ops()->stream_get_id(cudaStreamPerThread, &theirs)); })
      .join();
  EXPECT_NE(mine, theirs);
  ASSERT_EQ(cudaSuccess, ops()->stream_get_id(nullptr, &legacy));
  EXPECT_FALSE(ids.count(legacy) || legacy == mine || legacy == theirs);
  EXPECT_EQ(22u + 1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID));  // before the reuse
  // Handles are reused on demand (the driver often does), ids never.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_reuse_stream_handles(true));
  cudaStream_t a = nullptr, b = nullptr;
  unsigned long long ida = 0, idb = 0;
  ASSERT_EQ(cudaSuccess, ops()->stream_create(&a));
  ASSERT_EQ(cudaSuccess, ops()->stream_get_id(a, &ida));
  ASSERT_EQ(cudaSuccess, ops()->stream_destroy(a));
  ASSERT_EQ(cudaSuccess, ops()->stream_create(&b));
  ASSERT_EQ(cudaSuccess, ops()->stream_get_id(b, &idb));
  EXPECT_EQ(a, b);
  EXPECT_NE(ida, idb);
  ASSERT_EQ(cudaSuccess, ops()->stream_destroy(b));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_reuse_stream_handles(false));
  // A destroyed stream's handle is stale: counted, refused, no crash.
  cudaStream_t dead = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->stream_create(&dead));
  ASSERT_EQ(cudaSuccess, ops()->stream_destroy(dead));
  unsigned long long id = 0;
  EXPECT_EQ(cudaErrorInvalidResourceHandle, ops()->stream_get_id(dead, &id));
  EXPECT_EQ(1u, gmr_cuda_sim_get_stale_handle_count());
  expect_stale_handles_ = true;
}

// A delayed call sleeps without the simulation's lock: another thread's
// calls complete meanwhile (ordering only, no timing is asserted).
TEST_F(CudaSim, AnInjectedDelayHoldsUpOnlyTheDelayedCall) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_delay(GMR_CUDA_CALL_MALLOC, 2000000000u));  // 2 s
  std::atomic<bool> malloc_returned{false};
  void *p = nullptr;
  std::thread slow([&] {
    EXPECT_EQ(cudaSuccess, ops()->malloc(&p, 1000));
    malloc_returned = true;
  });
  // Wait until the slow call has started (it is counted before it sleeps).
  while (gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC) == 0) std::this_thread::yield();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->stream_create(&s));
  ASSERT_EQ(cudaSuccess, ops()->stream_destroy(s));
  EXPECT_FALSE(malloc_returned.load()) << "a call of another thread waited for the slow one";
  slow.join();
  EXPECT_TRUE(malloc_returned.load());
  EXPECT_EQ(cudaSuccess, ops()->free(p));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_inject_delay(GMR_CUDA_CALL_COUNT, 1));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());  // delays go too
  void *q = nullptr;
  EXPECT_EQ(cudaSuccess, ops()->malloc(&q, 1000));
  EXPECT_EQ(cudaSuccess, ops()->free(q));
}

// cudaStreamDestroy returns at once and the stream's pending work still runs:
// an event recorded on a stream held beyond its destroy stays pending until a
// device-wide synchronisation.
TEST_F(CudaSim, AHeldStreamsWorkOutlivesItsDestroy) {
  cudaStream_t s = nullptr;
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->stream_create(&s));
  ASSERT_EQ(cudaSuccess, ops()->event_create(&e));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold_beyond_destroy(reinterpret_cast<gmr_stream>(s)));
  ASSERT_EQ(cudaSuccess, ops()->event_record(e, s));
  ASSERT_EQ(cudaSuccess, ops()->stream_destroy(s));
  EXPECT_EQ(cudaErrorNotReady, ops()->event_query(e));
  EXPECT_EQ(cudaErrorNotReady, ops()->event_query(e));
  ASSERT_EQ(cudaSuccess, ops()->device_synchronize());
  EXPECT_EQ(cudaSuccess, ops()->event_query(e));
  // With a plain hold (or none), the work of a destroyed stream counts as done.
  ASSERT_EQ(cudaSuccess, ops()->stream_create(&s));
  ASSERT_EQ(cudaSuccess, ops()->event_record(e, s));
  ASSERT_EQ(cudaSuccess, ops()->stream_destroy(s));
  EXPECT_EQ(cudaSuccess, ops()->event_query(e));
  EXPECT_EQ(cudaSuccess, ops()->event_destroy(e));
}

TEST_F(CudaSim, InjectionArgumentsAreChecked) {
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_COUNT, 0, 1, cudaErrorUnknown));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, 0));
}

TEST_F(CudaSim, CapacityIsEnforced) {
  void *a = nullptr, *b = nullptr;
  size_t cap = sim_config_.device_memory_bytes;
  EXPECT_EQ(cudaSuccess, ops()->malloc(&a, cap / 2));
  EXPECT_EQ(cudaErrorMemoryAllocation, ops()->malloc(&b, cap / 2 + 4096));
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(GMR_OK, gmr_device_get_memory_info(&free_bytes, &total_bytes));
  EXPECT_EQ(cap, total_bytes);
  EXPECT_EQ(cap - cap / 2, free_bytes);
  EXPECT_EQ(cudaSuccess, ops()->free(a));
}

TEST_F(CudaSim, FreeOfUnknownPointerIsInvalidValue) {
  int x = 0;
  EXPECT_EQ(cudaErrorInvalidValue, ops()->free(&x));
  void *p = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->malloc(&p, 64));
  EXPECT_EQ(cudaErrorInvalidValue, ops()->free_host(p));  // wrong kind
  EXPECT_EQ(cudaSuccess, ops()->free(p));
  EXPECT_EQ(cudaErrorInvalidValue, ops()->free(p));  // double free
}

TEST_F(CudaSim, EnableWhileObjectsAreLiveIsBusy) {
  void *p = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->malloc(&p, 64));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_cuda_sim_enable(nullptr));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_cuda_sim_disable());
  EXPECT_TRUE(gmr_cuda_is_simulated());
  EXPECT_EQ(cudaSuccess, ops()->free(p));
}

TEST_F(CudaSim, EventsCompleteAtOnceUnlessTheStreamIsHeld) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->event_create(&e));
  ASSERT_EQ(cudaSuccess, ops()->event_record(e, s));
  EXPECT_EQ(cudaSuccess, ops()->event_query(e));

  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));
  ASSERT_EQ(cudaSuccess, ops()->event_record(e, s));
  EXPECT_EQ(cudaErrorNotReady, ops()->event_query(e));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, false));
  EXPECT_EQ(cudaSuccess, ops()->event_query(e));

  // Synchronising on a pending event finishes the work it waits for.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));
  ASSERT_EQ(cudaSuccess, ops()->event_record(e, s));
  EXPECT_EQ(cudaSuccess, ops()->event_synchronize(e));
  EXPECT_EQ(cudaSuccess, ops()->event_query(e));

  // An event of a destroyed stream counts as complete.
  ASSERT_EQ(cudaSuccess, ops()->event_record(e, s));
  EXPECT_EQ(cudaErrorNotReady, ops()->event_query(e));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
  EXPECT_EQ(cudaSuccess, ops()->event_query(e));
  EXPECT_EQ(cudaSuccess, ops()->event_destroy(e));
}

TEST_F(CudaSim, StreamWaitsAreCounted) {
  gmr_stream a = nullptr, b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b));
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->event_create(&e));
  ASSERT_EQ(cudaSuccess, ops()->event_record(e, a));
  ASSERT_EQ(cudaSuccess, ops()->stream_wait_event(b, e));
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(b));
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(a));
  EXPECT_EQ(cudaSuccess, ops()->event_destroy(e));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b));
}

TEST_F(CudaSim, StaleHandlesAreRejectedNotCrashing) {
  expect_stale_handles_ = true;
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
  EXPECT_EQ(0u, gmr_cuda_sim_get_stale_handle_count());
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_destroy(s));
  EXPECT_EQ(1u, gmr_cuda_sim_get_stale_handle_count());  // counted: real CUDA may crash
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_stream_hold(s, true));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_stream_hold(nullptr, true));
}

TEST_F(CudaSim, CaptureForbidsUnsafeCallsAndInvalidatesTheCapture) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_begin_capture(nullptr));  // legacy stream
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  bool capturing = false;
  uint64_t id = 0;
  ASSERT_EQ(GMR_OK, gmr_stream_get_capture_info(s, &capturing, &id));
  EXPECT_TRUE(capturing);
  EXPECT_NE(0u, id);

  void *p = nullptr;
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, ops()->malloc(&p, 256));
  gmr_graph g = nullptr;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_end_capture(s, &g));  // invalidated
  EXPECT_EQ(nullptr, g);
  ASSERT_EQ(GMR_OK, gmr_stream_get_capture_info(s, &capturing, &id));
  EXPECT_FALSE(capturing);

  // A clean capture ends in a graph; ids are unique per capture.
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  uint64_t id2 = 0;
  ASSERT_EQ(GMR_OK, gmr_stream_get_capture_info(s, &capturing, &id2));
  EXPECT_NE(id, id2);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_NE(nullptr, g);
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(CudaSim, RelaxedThreadModeAllowsUnsafeCallsDuringCaptureAndKeepsItValid) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  EXPECT_EQ(cudaStreamCaptureModeGlobal, gmr_cuda_sim_get_thread_capture_mode());
  enum cudaStreamCaptureMode saved = cudaStreamCaptureModeGlobal;
  ASSERT_EQ(cudaSuccess, gmr__cuda_capture_relaxed_enter(ops(), &saved));
  EXPECT_EQ(cudaStreamCaptureModeGlobal, saved);
  EXPECT_EQ(cudaStreamCaptureModeRelaxed, gmr_cuda_sim_get_thread_capture_mode());
  void *p = nullptr;
  EXPECT_EQ(cudaSuccess, ops()->malloc(&p, 256));
  gmr__cuda_capture_relaxed_leave(ops(), saved);
  EXPECT_EQ(cudaStreamCaptureModeGlobal, gmr_cuda_sim_get_thread_capture_mode());

  // Another thread in its default (global) mode is still refused.
  cudaError_t other = cudaSuccess;
  std::thread t([&] {
    void *q = nullptr;
    other = gmr__cuda()->malloc(&q, 256);
  });
  t.join();
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, other);
  gmr_graph g = nullptr;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_end_capture(s, &g));  // the other thread broke it
  EXPECT_EQ(cudaSuccess, ops()->free(p));

  // Without the intruder the capture survives the relaxed cudaMalloc.
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  ASSERT_EQ(cudaSuccess, gmr__cuda_capture_relaxed_enter(ops(), &saved));
  EXPECT_EQ(cudaSuccess, ops()->malloc(&p, 256));
  gmr__cuda_capture_relaxed_leave(ops(), saved);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(cudaSuccess, ops()->free(p));
  enum cudaStreamCaptureMode bad = static_cast<enum cudaStreamCaptureMode>(7);
  EXPECT_EQ(cudaErrorInvalidValue, ops()->thread_exchange_capture_mode(&bad));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(CudaSim, PoolAllocationIsAllowedDuringCapture) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->mem_pool_create(&pool, 0));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr;
  EXPECT_EQ(cudaSuccess, ops()->malloc_from_pool_async(&p, 4096, pool, s));
  EXPECT_EQ(cudaSuccess, ops()->free_async(p, s));
  gmr_graph g = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(cudaSuccess, ops()->mem_pool_destroy(pool));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(CudaSim, PoolKeepsItsReserveUntilTrimmedOrThresholdAtSync) {
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->mem_pool_create(&pool, 0));
  ASSERT_EQ(cudaSuccess,
            ops()->mem_pool_set_attribute(pool, cudaMemPoolAttrReleaseThreshold, UINT64_MAX));
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->malloc_from_pool_async(&a, 1 << 20, pool, nullptr));
  ASSERT_EQ(cudaSuccess, ops()->free_async(a, nullptr));
  ASSERT_EQ(cudaSuccess, ops()->malloc_from_pool_async(&b, 1 << 19, pool, nullptr));
  uint64_t reserved = 0, high = 0, used = 0;
  ops()->mem_pool_get_attribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
  ops()->mem_pool_get_attribute(pool, cudaMemPoolAttrReservedMemHigh, &high);
  ops()->mem_pool_get_attribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  EXPECT_EQ(uint64_t{1} << 20, reserved);  // reused the cached megabyte
  EXPECT_EQ(uint64_t{1} << 20, high);
  EXPECT_EQ(uint64_t{1} << 19, used);
  ASSERT_EQ(GMR_OK, gmr_device_synchronize());  // threshold is max: keeps it
  ops()->mem_pool_get_attribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
  EXPECT_EQ(uint64_t{1} << 20, reserved);
  ASSERT_EQ(cudaSuccess, ops()->mem_pool_trim_to(pool, 0));
  ops()->mem_pool_get_attribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
  EXPECT_EQ(uint64_t{1} << 19, reserved);  // only the live half stays
  // Destroying a pool with live allocations is refused by the simulation.
  EXPECT_EQ(cudaErrorInvalidValue, ops()->mem_pool_destroy(pool));
  ASSERT_EQ(cudaSuccess, ops()->free_async(b, nullptr));
  EXPECT_EQ(cudaSuccess, ops()->mem_pool_destroy(pool));
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(0u, u.used_bytes);
}

// ---- CUDA's capture rules (cuda_runtime_api.h, cudaThreadExchangeStreamCaptureMode;
// the programming guide's "prohibited and unhandled operations"; GPU_FACTS.md) ----

// Seen on an H100 (driver 580, GPU run 7): cudaStreamGetId on the capturing
// stream returns cudaErrorStreamCaptureUnsupported and invalidates the
// capture in every thread mode, relaxed included. On any other stream it is
// legal during a capture, from any thread in any mode (it is not one of the
// "potentially unsafe" calls the thread modes govern).
TEST_F(CudaSim, StreamGetIdBreaksOnlyTheCaptureOfTheStreamItNames) {
  gmr_stream s = nullptr, other = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&other));
  unsigned long long id = 0;
  gmr_graph g = nullptr;
  for (enum cudaStreamCaptureMode mode :
       {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
        cudaStreamCaptureModeRelaxed}) {
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
    enum cudaStreamCaptureMode saved = mode;
    ASSERT_EQ(cudaSuccess, ops()->thread_exchange_capture_mode(&saved));
    EXPECT_EQ(cudaErrorStreamCaptureUnsupported, ops()->stream_get_id(s, &id)) << mode;
    ASSERT_EQ(cudaSuccess, ops()->thread_exchange_capture_mode(&saved));
    EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_end_capture(s, &g)) << mode << ": invalidated";
  }

  // Naming another stream, the per-thread or the legacy default stream, with
  // the thread in global mode: allowed, and the capture stays valid.
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  unsigned long long other_id = 0, per_thread = 0, legacy = 0;
  EXPECT_EQ(cudaSuccess, ops()->stream_get_id(other, &other_id));
  EXPECT_EQ(cudaSuccess, ops()->stream_get_id(cudaStreamPerThread, &per_thread));
  EXPECT_EQ(cudaSuccess, ops()->stream_get_id(nullptr, &legacy));
  EXPECT_NE(0u, other_id);
  // Another thread in global mode, during this thread's global capture.
  cudaError_t from_another_thread = cudaErrorUnknown;
  std::thread([&] {
    unsigned long long theirs = 0;
    from_another_thread = gmr__cuda()->stream_get_id(other, &theirs);
  }).join();
  EXPECT_EQ(cudaSuccess, from_another_thread);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(cudaSuccess, ops()->stream_get_id(s, &id));  // no capture: allowed
  EXPECT_NE(other_id, id);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(other));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// A potentially unsafe call (cudaMalloc): a thread in thread-local mode
// ignores other threads' captures; a thread in global mode is refused during
// another thread's global capture and breaks it; a thread-local capture
// forbids only the thread that began it.
TEST_F(CudaSim, ThreadModesDecideWhoseCapturesForbidACall) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));  // global
  cudaError_t thread_local_call = cudaErrorUnknown;
  std::thread([&] {
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
    ASSERT_EQ(cudaSuccess, gmr__cuda()->thread_exchange_capture_mode(&mode));
    void *p = nullptr;
    thread_local_call = gmr__cuda()->malloc(&p, 256);
    if (thread_local_call == cudaSuccess) gmr__cuda()->free(p);
  }).join();
  EXPECT_EQ(cudaSuccess, thread_local_call);
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));  // still valid
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));

  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));  // global
  cudaError_t global_call = cudaSuccess;
  std::thread([&] {
    void *p = nullptr;
    global_call = gmr__cuda()->malloc(&p, 256);
    if (global_call == cudaSuccess) gmr__cuda()->free(p);
  }).join();
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, global_call);
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_end_capture(s, &g));  // invalidated

  ASSERT_EQ(cudaSuccess, ops()->stream_begin_capture(s, cudaStreamCaptureModeThreadLocal));
  cudaError_t other_thread = cudaErrorUnknown;
  std::thread([&] {
    void *p = nullptr;
    other_thread = gmr__cuda()->malloc(&p, 256);
    if (other_thread == cudaSuccess) gmr__cuda()->free(p);
  }).join();
  EXPECT_EQ(cudaSuccess, other_thread);  // not its capture
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  ASSERT_EQ(cudaSuccess, ops()->stream_begin_capture(s, cudaStreamCaptureModeThreadLocal));
  void *p = nullptr;
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, ops()->malloc(&p, 256));  // its own
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// Legal in every mode: asking whether a stream captures, from any thread.
TEST_F(CudaSim, CaptureInfoIsLegalDuringACapture) {
  gmr_stream s = nullptr, other = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&other));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  bool capturing = false;
  EXPECT_EQ(GMR_OK, gmr_stream_get_capture_info(s, &capturing, nullptr));
  EXPECT_TRUE(capturing);
  std::thread([&] {
    bool c = true;
    EXPECT_EQ(GMR_OK, gmr_stream_get_capture_info(other, &c, nullptr));
    EXPECT_FALSE(c);
  }).join();
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(other));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// A record on a capturing stream is legal: it becomes a node of the graph and
// runs nothing now. The event is then a captured event: querying or
// synchronising it is refused even in relaxed mode (cudaErrorCapturedEvent)
// and breaks the capture; once the capture has ended, a query says
// cudaErrorInvalidValue (seen on an H100, GPU run 7); a record outside any
// capture makes it ordinary again.
TEST_F(CudaSim, AnEventRecordedInACaptureIsACapturedEvent) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->event_create(&e));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  EXPECT_EQ(cudaSuccess, ops()->event_record(e, s));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));  // the record kept it valid
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));

  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  EXPECT_EQ(cudaSuccess, ops()->event_record(e, s));
  enum cudaStreamCaptureMode saved = cudaStreamCaptureModeGlobal;
  ASSERT_EQ(cudaSuccess, gmr__cuda_capture_relaxed_enter(ops(), &saved));
  EXPECT_EQ(cudaErrorCapturedEvent, ops()->event_query(e));
  EXPECT_EQ(cudaErrorCapturedEvent, ops()->event_synchronize(e));
  gmr__cuda_capture_relaxed_leave(ops(), saved);
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_end_capture(s, &g));  // invalidated
  EXPECT_EQ(cudaErrorInvalidValue, ops()->event_query(e));  // still last recorded in a capture
  EXPECT_EQ(cudaErrorInvalidValue, ops()->event_synchronize(e));

  ASSERT_EQ(cudaSuccess, ops()->event_record(e, s));  // outside a capture
  EXPECT_EQ(cudaSuccess, ops()->event_query(e));
  EXPECT_EQ(cudaSuccess, ops()->event_destroy(e));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// A record in a capture does not count as work of the stream: an event recorded
// before the capture on a held stream stays pending, and one recorded after it
// still waits for that work.
TEST_F(CudaSim, ARecordInACaptureRunsNothing) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));
  cudaEvent_t before = nullptr, inside = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->event_create(&before));
  ASSERT_EQ(cudaSuccess, ops()->event_create(&inside));
  ASSERT_EQ(cudaSuccess, ops()->event_record(before, s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  ASSERT_EQ(cudaSuccess, ops()->event_record(inside, s));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(cudaErrorNotReady, ops()->event_query(before));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, false));
  EXPECT_EQ(cudaSuccess, ops()->event_query(before));
  EXPECT_EQ(cudaSuccess, ops()->event_destroy(before));
  EXPECT_EQ(cudaSuccess, ops()->event_destroy(inside));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// cudaStreamWaitEvent on a capturing stream is legal only with an event of
// the same capture; with an event recorded outside it the capture is broken
// (cudaErrorStreamCaptureIsolation). A stream that is not capturing and waits
// on a captured event joins the capture (a fork), which ends with it.
TEST_F(CudaSim, AWaitDuringACaptureNeedsAnEventOfThatCapture) {
  gmr_stream s = nullptr, side = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&side));
  cudaEvent_t outside = nullptr, inside = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->event_create(&outside));
  ASSERT_EQ(cudaSuccess, ops()->event_create(&inside));
  ASSERT_EQ(cudaSuccess, ops()->event_record(outside, side));

  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  uint64_t capture_id = 0;
  bool capturing = false;
  ASSERT_EQ(GMR_OK, gmr_stream_get_capture_info(s, &capturing, &capture_id));
  ASSERT_EQ(cudaSuccess, ops()->event_record(inside, s));
  EXPECT_EQ(cudaSuccess, ops()->stream_wait_event(side, inside));  // side joins (fork)
  uint64_t side_id = 0;
  ASSERT_EQ(GMR_OK, gmr_stream_get_capture_info(side, &capturing, &side_id));
  EXPECT_TRUE(capturing);
  EXPECT_EQ(capture_id, side_id);
  ASSERT_EQ(cudaSuccess, ops()->event_record(inside, side));
  EXPECT_EQ(cudaSuccess, ops()->stream_wait_event(s, inside));  // join back
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  ASSERT_EQ(GMR_OK, gmr_stream_get_capture_info(side, &capturing, nullptr));
  EXPECT_FALSE(capturing);  // the fork ended with the capture

  uint64_t waits = gmr_cuda_sim_get_stream_wait_count(s);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  EXPECT_EQ(cudaErrorStreamCaptureIsolation, ops()->stream_wait_event(s, outside));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_end_capture(s, &g));  // invalidated
  EXPECT_EQ(waits, gmr_cuda_sim_get_stream_wait_count(s));  // no wait was made
  EXPECT_EQ(cudaSuccess, ops()->event_destroy(outside));
  EXPECT_EQ(cudaSuccess, ops()->event_destroy(inside));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(side));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// Synchronising a capturing stream, or the whole device while any stream
// captures, conflicts with the capture in every thread mode.
TEST_F(CudaSim, SynchronisingACaptureIsRefusedEvenInRelaxedMode) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  enum cudaStreamCaptureMode saved = cudaStreamCaptureModeGlobal;
  ASSERT_EQ(cudaSuccess, gmr__cuda_capture_relaxed_enter(ops(), &saved));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, ops()->stream_synchronize(s));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_end_capture(s, &g));
  ASSERT_EQ(cudaSuccess, ops()->stream_begin_capture(s, cudaStreamCaptureModeRelaxed));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, ops()->device_synchronize());
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_stream_end_capture(s, &g));
  gmr__cuda_capture_relaxed_leave(ops(), saved);
  EXPECT_EQ(cudaSuccess, ops()->device_synchronize());  // no capture any more
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

class CudaSimTwoDevices : public SimTest {
 protected:
  CudaSimTwoDevices() { sim_config_.device_count = 2; }
};

TEST_F(CudaSimTwoDevices, CurrentDeviceIsPerThread) {
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  int d = -1;
  std::thread([&] { ASSERT_EQ(GMR_OK, gmr_device_get_current(&d)); }).join();
  EXPECT_EQ(0, d);  // a new thread starts on device 0
  ASSERT_EQ(GMR_OK, gmr_device_get_current(&d));
  EXPECT_EQ(1, d);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_device_set_current(2));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
}

TEST(CudaSimConfig, RejectsBadConfigurations) {
  gmr_cuda_sim_config c = GMR_CUDA_SIM_CONFIG_DEFAULT;
  c.device_count = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_enable(&c));
  c.device_count = 17;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_enable(&c));
  c.device_count = 1;
  c.device_memory_bytes = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_enable(&c));
  EXPECT_FALSE(gmr_cuda_is_simulated());
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, 2));
  gmr_cuda_sim_usage u;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_cuda_sim_get_device_usage(0, &u));
}

TEST(CudaErrorName, NamesKnownErrorsWithoutAGpu) {
  EXPECT_STREQ("cudaErrorMemoryAllocation", gmr_cuda_error_name(cudaErrorMemoryAllocation));
  EXPECT_STREQ("cudaSuccess", gmr_cuda_error_name(0));
}

}  // namespace
