// The calling thread's capture mode around the calls gmr makes in relaxed
// mode (core/cuda_layer.h: gmr__cuda_capture_relaxed_enter/leave): a restore
// that fails is tried again, and one that fails twice is remembered and done
// by the thread's next relaxed section, so no failure of
// cudaThreadExchangeStreamCaptureMode leaves a thread in relaxed mode for good.
#include <gtest/gtest.h>

#include <thread>

#include "core/cuda_layer.h"
#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr int kGlobal = 0, kThreadLocal = 1, kRelaxed = 2;

class CaptureModeRestore : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    c.kind = GMR_CUDA_KIND_DEVICE;
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &cuda_));
    r_ = gmr_cuda_resource_as_resource(cuda_);
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    SimTest::TearDown();
  }
  // One allocation through the capture-safe path (relaxed mode around
  // cudaMalloc), freed again.
  void AllocateCapturing() {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r_, 4096, 0, nullptr, &p, &f)) << f.message;
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 4096, 0, nullptr));
  }
  void Fail(uint64_t skip, uint64_t count) {
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_THREAD_EXCHANGE_CAPTURE_MODE,
                                                  skip, count, cudaErrorUnknown));
  }

  gmr_cuda_resource *cuda_ = nullptr;
  gmr_resource *r_ = nullptr;
};

TEST_F(CaptureModeRestore, AFailedRestoreIsTriedAgain) {
  ASSERT_EQ(kGlobal, gmr_cuda_sim_get_thread_capture_mode());
  uint64_t unrestored = gmr__cuda_capture_mode_unrestored_count();
  Fail(1, 1);  // enter succeeds, the first restore fails
  AllocateCapturing();
  EXPECT_EQ(kGlobal, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(unrestored, gmr__cuda_capture_mode_unrestored_count());
}

TEST_F(CaptureModeRestore, ARestoreThatFailsTwiceIsDoneByTheThreadsNextRelaxedSection) {
  uint64_t unrestored = gmr__cuda_capture_mode_unrestored_count();
  Fail(1, 2);  // both tries of the restore fail
  AllocateCapturing();
  EXPECT_EQ(kRelaxed, gmr_cuda_sim_get_thread_capture_mode()) << "the call could not restore it";
  EXPECT_EQ(unrestored + 1, gmr__cuda_capture_mode_unrestored_count()) << "and it was counted";
  // The next relaxed section starts from the remembered mode, not from the
  // relaxed mode it finds, and restores it.
  AllocateCapturing();
  EXPECT_EQ(kGlobal, gmr_cuda_sim_get_thread_capture_mode());
  AllocateCapturing();
  EXPECT_EQ(kGlobal, gmr_cuda_sim_get_thread_capture_mode());
}

TEST_F(CaptureModeRestore, TheProgramsOwnModeIsWhatComesBack) {
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
  const gmr__cuda_ops *ops = gmr__cuda();
  ASSERT_EQ(cudaSuccess, ops->thread_exchange_capture_mode(&mode));
  Fail(1, 2);
  AllocateCapturing();
  AllocateCapturing();
  EXPECT_EQ(kThreadLocal, gmr_cuda_sim_get_thread_capture_mode());
  mode = cudaStreamCaptureModeGlobal;
  ASSERT_EQ(cudaSuccess, ops->thread_exchange_capture_mode(&mode));
}

TEST_F(CaptureModeRestore, ARememberedModeBelongsToItsThread) {
  Fail(1, 2);
  std::thread([&] {
    AllocateCapturing();
    EXPECT_EQ(kRelaxed, gmr_cuda_sim_get_thread_capture_mode());
    AllocateCapturing();  // the same thread puts its mode back
    EXPECT_EQ(kGlobal, gmr_cuda_sim_get_thread_capture_mode());
  }).join();
  // This thread never lost its mode: its sections save and restore global.
  EXPECT_EQ(kGlobal, gmr_cuda_sim_get_thread_capture_mode());
  AllocateCapturing();
  EXPECT_EQ(kGlobal, gmr_cuda_sim_get_thread_capture_mode());
}

TEST_F(CaptureModeRestore, AFailedEnterChangesNothing) {
  Fail(0, 1);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_capturing(r_, 4096, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(kGlobal, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
}

}  // namespace
