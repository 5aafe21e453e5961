// cuda_resource's optional slots on a real GPU (issues 11 §1 and 12 §3):
//  - allocate_capturing during a global-mode capture (the thread switched to
//    relaxed mode and back): the capture stays valid, the graph keeps the
//    address, and a kernel in the graph writes the memory on every replay
//    (async: from its pool on its own stream, synchronised);
//  - record_stream with kind async: a block used by a slow stream and freed
//    on another is not handed out again before the slow stream's work ends.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "tests/gpu/fill_kernel.h"
#include "tests/support/gpu_fixture.h"

namespace {

using gmr_test::GpuTest;

gmr_cuda_resource *Make(gmr_cuda_kind kind) {
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = kind;
  gmr_cuda_resource *r = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &r));
  return r;
}

bool AllBytesAre(const void *device_ptr, size_t bytes, unsigned char value) {
  std::vector<unsigned char> host(bytes);
  if (cudaMemcpy(host.data(), device_ptr, bytes, cudaMemcpyDefault) != cudaSuccess) return false;
  for (unsigned char b : host) {
    if (b != value) return false;
  }
  return true;
}

class CaptureGpu : public GpuTest, public ::testing::WithParamInterface<gmr_cuda_kind> {};

TEST_P(CaptureGpu, AllocatesDuringAGlobalCaptureAndTheGraphUsesTheMemoryOnEveryReplay) {
  gmr_test::FillKernel fill;
  ASSERT_EQ(cudaSuccess, fill.load());
  gmr_cuda_resource *cr = Make(GetParam());
  ASSERT_NE(nullptr, cr);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  gmr_stream stream = reinterpret_cast<gmr_stream>(s);

  const size_t bytes = size_t{8} << 20;
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  gmr_status st = gmr_resource_allocate_capturing(r, bytes, 0, stream, &p, &f);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(cudaStreamCaptureModeGlobal, mode) << "the thread's mode was not restored";
  ASSERT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
  ASSERT_EQ(GMR_OK, st) << f.message << " (cuda error " << f.cuda_error << ")";
  ASSERT_EQ(cudaSuccess, fill.fill(p, bytes, 0x5a, s));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph)) << "the capture was invalidated";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 1000; ++i) {
    if (i == 500) {  // a clear between replays: the graph writes it again
      ASSERT_EQ(cudaSuccess, cudaMemsetAsync(p, 0, bytes, s));
    }
    ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
  }
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  EXPECT_TRUE(AllBytesAre(p, bytes, 0x5a));
  EXPECT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
  EXPECT_EQ(cudaSuccess, cudaGraphDestroy(graph));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, bytes, 0, stream));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(cudaSuccess, cudaStreamDestroy(s));
}

INSTANTIATE_TEST_SUITE_P(CaptureCapableKinds, CaptureGpu,
                         ::testing::Values(GMR_CUDA_KIND_DEVICE, GMR_CUDA_KIND_MANAGED,
                                           GMR_CUDA_KIND_PINNED, GMR_CUDA_KIND_ASYNC),
                         [](const ::testing::TestParamInfo<gmr_cuda_kind> &info) {
                           return std::string(gmr_cuda_kind_name(info.param));
                         });

using CudaSlotsGpu = GpuTest;

// Stream b writes 0xab into a block many times (milliseconds of work); the
// block is freed on stream a right after, and a block of the same size taken
// again on a is cleared to 0 there. With the recording, a waits for b before
// the free, so the clear comes last: every byte reads 0.
TEST_F(CudaSlotsGpu, AsyncFreeWaitsForARecordedStreamBeforeTheMemoryIsReused) {
  gmr_test::FillKernel fill;
  ASSERT_EQ(cudaSuccess, fill.load());
  gmr_cuda_resource *cr = Make(GMR_CUDA_KIND_ASYNC);
  ASSERT_NE(nullptr, cr);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  cudaStream_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  gmr_stream sa = reinterpret_cast<gmr_stream>(a), sb = reinterpret_cast<gmr_stream>(b);
  const size_t bytes = size_t{64} << 20;
  int reused = 0;
  for (int round = 0; round < 5; ++round) {
    void *p = nullptr, *q = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, sa, &p));
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(a));  // b may use it now
    for (int i = 0; i < 200; ++i) ASSERT_EQ(cudaSuccess, fill.fill(p, bytes, 0xab, b));
    ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, sb));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, bytes, 0, sa));
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, sa, &q));
    if (q == p) reused++;
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(q, 0, bytes, a));
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    EXPECT_TRUE(AllBytesAre(q, bytes, 0)) << "round " << round << ": b's writes came after a's clear";
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, bytes, 0, sa));
  }
  // The check means something only if the pool handed the block out again.
  EXPECT_GT(reused, 0) << "the pool never reused the block: nothing was tested";
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(cudaSuccess, cudaStreamDestroy(a));
  EXPECT_EQ(cudaSuccess, cudaStreamDestroy(b));
}

}  // namespace
