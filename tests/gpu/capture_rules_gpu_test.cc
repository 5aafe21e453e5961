// CUDA's capture rules as the simulation (gmr/sim/cuda_sim.h) states them, checked
// against the real driver, call by call. Every rule the pools rely on (and the
// simulation enforces in tests/cuda_sim_test.cc) has a case here; a failure
// names the rule the simulation gets wrong. The cudaStreamGetId and captured
// event cases are what an H100 answered (GPU run 7); the thread-mode case is
// CUDA's documented rule for a potentially unsafe call. Straight CUDA calls:
// no gmr resource is involved.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

#include "tests/support/gpu_fixture.h"

namespace {

using gmr_test::GpuTest;

class CaptureRulesGpu : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
    ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&other_, cudaStreamNonBlocking));
    ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&e_, cudaEventDisableTiming));
  }

  void TearDown() override {
    if (s_ != nullptr) {
      // Leave no capture behind, whatever a failed expectation left.
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(s_, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
        cudaGraph_t g = nullptr;
        (void)cudaStreamEndCapture(s_, &g);
        if (g != nullptr) (void)cudaGraphDestroy(g);
      }
      (void)cudaGetLastError();
      EXPECT_EQ(cudaSuccess, cudaEventDestroy(e_));
      EXPECT_EQ(cudaSuccess, cudaStreamDestroy(other_));
      EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s_));
    }
  }

  // Ends the capture on s_: cudaSuccess when it stayed valid.
  cudaError_t End() {
    cudaGraph_t g = nullptr;
    cudaError_t err = cudaStreamEndCapture(s_, &g);
    if (g != nullptr) {
      EXPECT_EQ(cudaSuccess, cudaGraphDestroy(g));
    }
    (void)cudaGetLastError();
    return err;
  }

  static cudaStreamCaptureMode Exchange(cudaStreamCaptureMode mode) {
    EXPECT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
    return mode;
  }

  // The driver's cuStreamGetId (CUresult: 0 success, 900 capture unsupported),
  // found without linking libcuda; nullptr where the driver has none.
  using DriverStreamGetId = int (*)(cudaStream_t, unsigned long long *);
  static DriverStreamGetId DriverGetId() {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuStreamGetId", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return nullptr;
    }
    return reinterpret_cast<DriverStreamGetId>(fn);
  }

  cudaStream_t s_ = nullptr;
  cudaStream_t other_ = nullptr;
  cudaEvent_t e_ = nullptr;
};

// GPU run 7 (H100, driver 580): on the capturing stream cudaStreamGetId
// returns 900 and invalidates the capture in every thread mode, relaxed
// included; so does the driver's cuStreamGetId.
TEST_F(CaptureRulesGpu, StreamGetIdOnTheCapturingStreamBreaksItInEveryThreadMode) {
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                     cudaStreamCaptureModeRelaxed}) {
    unsigned long long id = 0;
    ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureMode saved = Exchange(mode);
    EXPECT_EQ(cudaErrorStreamCaptureUnsupported, cudaStreamGetId(s_, &id)) << "thread mode " << mode;
    Exchange(saved);
    EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End()) << "thread mode " << mode;
  }
  DriverStreamGetId get_id = DriverGetId();
  ASSERT_NE(nullptr, get_id) << "no driver entry point for cuStreamGetId";
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeRelaxed}) {
    unsigned long long id = 0;
    ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureMode saved = Exchange(mode);
    EXPECT_EQ(900, get_id(s_, &id)) << "cuStreamGetId, thread mode " << mode;
    Exchange(saved);
    EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End()) << "cuStreamGetId, thread mode " << mode;
  }
}

// GPU run 7: on a stream that is not capturing, cudaStreamGetId is legal
// during a capture and leaves it valid, from the capturing thread in global
// mode and from another thread in global or thread-local mode.
TEST_F(CaptureRulesGpu, StreamGetIdOnAnotherStreamIsLegalDuringACapture) {
  unsigned long long id = 0;
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaSuccess, cudaStreamGetId(other_, &id)) << "the capturing thread, global mode";
  EXPECT_NE(0u, id);
  cudaError_t global_mode = cudaErrorUnknown;
  std::thread([&] {
    unsigned long long theirs = 0;
    global_mode = cudaStreamGetId(other_, &theirs);
  }).join();
  EXPECT_EQ(cudaSuccess, global_mode) << "another thread, global mode";
  cudaError_t thread_local_mode = cudaErrorUnknown;
  std::thread([&] {
    Exchange(cudaStreamCaptureModeThreadLocal);
    unsigned long long theirs = 0;
    thread_local_mode = cudaStreamGetId(other_, &theirs);
  }).join();
  EXPECT_EQ(cudaSuccess, thread_local_mode) << "another thread, thread-local mode";
  DriverStreamGetId get_id = DriverGetId();
  ASSERT_NE(nullptr, get_id) << "no driver entry point for cuStreamGetId";
  EXPECT_EQ(0, get_id(other_, &id)) << "cuStreamGetId on another stream";
  EXPECT_EQ(cudaSuccess, End()) << "cudaStreamGetId on other streams broke the capture";
}

// CUDA's documented rule for a potentially unsafe call (cudaMalloc; the
// capture modes of cudaThreadExchangeStreamCaptureMode, PyTorch's
// capture_error_mode): a thread in thread-local mode ignores other threads'
// captures, a thread in global mode is refused during another thread's
// global capture, a thread-local capture forbids only its own thread.
TEST_F(CaptureRulesGpu, ThreadModesDecideWhoseCapturesForbidACall) {
  auto malloc_in_a_thread = [](bool thread_local_mode) {
    cudaError_t err = cudaErrorUnknown;
    std::thread([&] {
      if (thread_local_mode) Exchange(cudaStreamCaptureModeThreadLocal);
      void *p = nullptr;
      err = cudaMalloc(&p, 256);
      if (err == cudaSuccess) (void)cudaFree(p);
    }).join();
    return err;
  };
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaSuccess, malloc_in_a_thread(true)) << "thread-local mode ignores other threads' captures";
  EXPECT_EQ(cudaSuccess, End());

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, malloc_in_a_thread(false))
      << "global mode is refused during another thread's global capture";
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End());

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
  EXPECT_EQ(cudaSuccess, malloc_in_a_thread(false)) << "a thread-local capture forbids only its own thread";
  EXPECT_EQ(cudaSuccess, End());
}

TEST_F(CaptureRulesGpu, CaptureInfoIsLegalDuringACapture) {
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaSuccess, cudaStreamGetCaptureInfo(s_, &st));
  EXPECT_EQ(cudaStreamCaptureStatusActive, st);
  std::thread([&] {
    cudaStreamCaptureStatus o = cudaStreamCaptureStatusActive;
    EXPECT_EQ(cudaSuccess, cudaStreamGetCaptureInfo(other_, &o));
    EXPECT_EQ(cudaStreamCaptureStatusNone, o);
  }).join();
  EXPECT_EQ(cudaSuccess, End());
}

// GPU run 7: after the capture ended, a query of an event recorded in it says
// cudaErrorInvalidValue (not cudaErrorCapturedEvent). Not asserted, only
// printed for the simulation to follow: what a query says after a capture
// that ended valid, and what a synchronisation says after an invalidated one.
TEST_F(CaptureRulesGpu, AnEventRecordedInACaptureIsACapturedEvent) {
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaSuccess, cudaEventRecord(e_, s_));
  EXPECT_EQ(cudaSuccess, End()) << "a record on the capturing stream is a legal node";
  cudaError_t after_valid = cudaEventQuery(e_);
  (void)cudaGetLastError();
  std::printf("[ info ] cudaEventQuery after a valid capture that recorded the event: %s\n",
              cudaGetErrorName(after_valid));

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaSuccess, cudaEventRecord(e_, s_));
  cudaStreamCaptureMode saved = Exchange(cudaStreamCaptureModeRelaxed);
  EXPECT_EQ(cudaErrorCapturedEvent, cudaEventQuery(e_)) << "relaxed query of a captured event";
  Exchange(saved);
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End()) << "the query invalidates the capture";
  EXPECT_EQ(cudaErrorInvalidValue, cudaEventQuery(e_)) << "after the capture ended";
  (void)cudaGetLastError();
  cudaError_t sync_after = cudaEventSynchronize(e_);
  (void)cudaGetLastError();
  std::printf("[ info ] cudaEventSynchronize after the capture ended: %s\n",
              cudaGetErrorName(sync_after));
  EXPECT_EQ(cudaSuccess, cudaEventRecord(e_, s_));
  EXPECT_EQ(cudaSuccess, cudaEventSynchronize(e_));
  EXPECT_EQ(cudaSuccess, cudaEventQuery(e_)) << "recorded outside a capture again";
}

TEST_F(CaptureRulesGpu, AWaitDuringACaptureNeedsAnEventOfThatCapture) {
  cudaEvent_t outside = nullptr;
  ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&outside, cudaEventDisableTiming));
  ASSERT_EQ(cudaSuccess, cudaEventRecord(outside, other_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(other_));

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaSuccess, cudaEventRecord(e_, s_));
  EXPECT_EQ(cudaSuccess, cudaStreamWaitEvent(other_, e_, 0)) << "a fork";
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaSuccess, cudaStreamIsCapturing(other_, &st));
  EXPECT_EQ(cudaStreamCaptureStatusActive, st) << "the waiting stream joins the capture";
  EXPECT_EQ(cudaSuccess, cudaEventRecord(e_, other_));
  EXPECT_EQ(cudaSuccess, cudaStreamWaitEvent(s_, e_, 0)) << "the join";
  EXPECT_EQ(cudaSuccess, End());
  EXPECT_EQ(cudaSuccess, cudaStreamIsCapturing(other_, &st));
  EXPECT_EQ(cudaStreamCaptureStatusNone, st);

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaErrorStreamCaptureIsolation, cudaStreamWaitEvent(s_, outside, 0))
      << "a capturing stream waits on an event recorded outside the capture";
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End());
  EXPECT_EQ(cudaSuccess, cudaEventDestroy(outside));
}

TEST_F(CaptureRulesGpu, SynchronisingACaptureIsRefusedEvenInRelaxedMode) {
  cudaStreamCaptureMode saved = Exchange(cudaStreamCaptureModeRelaxed);
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, cudaStreamSynchronize(s_));
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End());
  (void)cudaGetLastError();
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeRelaxed));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, cudaDeviceSynchronize());
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End());
  (void)cudaGetLastError();
  Exchange(saved);
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
}

}  // namespace
