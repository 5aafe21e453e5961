// CUDA's capture rules as the simulation (gmr/cuda_sim.h) states them, checked
// against the real driver, call by call. Every rule the pools rely on (and the
// simulation enforces in tests/cuda_sim_test.cc) has a case here; a failure
// names the rule the simulation gets wrong. Straight CUDA runtime calls: no
// gmr resource is involved.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

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

  cudaStream_t s_ = nullptr;
  cudaStream_t other_ = nullptr;
  cudaEvent_t e_ = nullptr;
};

// GPU run 3 saw the first case; the others are what the simulation assumes
// of a "potentially unsafe" call.
TEST_F(CaptureRulesGpu, StreamGetIdIsPotentiallyUnsafe) {
  unsigned long long id = 0;
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, cudaStreamGetId(s_, &id)) << "on the capturing stream";
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End());

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, cudaStreamGetId(other_, &id))
      << "on a stream that is not capturing";
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End());

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureMode saved = Exchange(cudaStreamCaptureModeRelaxed);
  EXPECT_EQ(cudaSuccess, cudaStreamGetId(s_, &id)) << "relaxed, on the capturing stream";
  EXPECT_EQ(cudaSuccess, cudaStreamGetId(cudaStreamPerThread, &id)) << "relaxed, per-thread stream";
  Exchange(saved);
  EXPECT_EQ(cudaSuccess, End()) << "relaxed cudaStreamGetId broke the capture";
}

TEST_F(CaptureRulesGpu, ThreadModesDecideWhoseCapturesForbidACall) {
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  cudaError_t thread_local_mode = cudaErrorUnknown;
  std::thread([&] {
    Exchange(cudaStreamCaptureModeThreadLocal);
    unsigned long long id = 0;
    thread_local_mode = cudaStreamGetId(other_, &id);
  }).join();
  EXPECT_EQ(cudaSuccess, thread_local_mode) << "thread-local mode ignores other threads' captures";
  EXPECT_EQ(cudaSuccess, End());

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  cudaError_t global_mode = cudaSuccess;
  std::thread([&] {
    unsigned long long id = 0;
    global_mode = cudaStreamGetId(other_, &id);
  }).join();
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, global_mode)
      << "global mode is refused during another thread's global capture";
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End());

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
  cudaError_t other_thread = cudaErrorUnknown;
  std::thread([&] {
    void *p = nullptr;
    other_thread = cudaMalloc(&p, 256);
    if (other_thread == cudaSuccess) (void)cudaFree(p);
  }).join();
  EXPECT_EQ(cudaSuccess, other_thread) << "a thread-local capture forbids only its own thread";
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

TEST_F(CaptureRulesGpu, AnEventRecordedInACaptureIsACapturedEvent) {
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaSuccess, cudaEventRecord(e_, s_));
  EXPECT_EQ(cudaSuccess, End()) << "a record on the capturing stream is a legal node";

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s_, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(cudaSuccess, cudaEventRecord(e_, s_));
  cudaStreamCaptureMode saved = Exchange(cudaStreamCaptureModeRelaxed);
  EXPECT_EQ(cudaErrorCapturedEvent, cudaEventQuery(e_)) << "relaxed query of a captured event";
  Exchange(saved);
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, End()) << "the query invalidates the capture";
  EXPECT_EQ(cudaErrorCapturedEvent, cudaEventQuery(e_)) << "after the capture ended";
  (void)cudaGetLastError();
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
