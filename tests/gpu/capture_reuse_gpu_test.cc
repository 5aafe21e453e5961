// On a real GPU: reuse inside a capture of memory freed with record_stream
// uses on forked streams (stream_ordered/capture_reuse.h), through the
// driver's own graph queries (cudaStreamGetCaptureInfo's dependencies,
// cudaGraphNodeGetDependencies), with kernels on every stream; the graph is
// then launched and its results checked. And the capture facts the
// resources rely on: cudaMalloc in relaxed mode during another stream's
// global capture leaves it valid; cudaDeviceSynchronize does not.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/stack.h"
#include "tests/gpu/fill_kernel.h"
#include "tests/support/gpu_fixture.h"

namespace {

struct Case {
  const char *name;
  const char *spec;
  size_t bytes;
};

const size_t kMiB = static_cast<size_t>(1) << 20;

const Case kCases[] = {
    {"vmm", "vmm", 1 * kMiB},
    {"pool", "pool(min_growth=1MiB, max_growth=1MiB, granularity=1MiB) > cuda", 1 * kMiB},
    {"vmm_pages", "vmm_pages", 4 * kMiB},
};

class CaptureReuseGpu : public gmr_test::GpuTest, public ::testing::WithParamInterface<Case> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (device_count_ == 0) return;
    ASSERT_EQ(cudaSuccess, fill_.load());
    gmr_spec_error err = {};
    ASSERT_EQ(GMR_OK, gmr_stack_create(GetParam().spec, &stack_, &err)) << err.message;
    r_ = gmr_stack_as_resource(stack_);
    for (cudaStream_t *s : {&o_, &f1_, &f2_}) {
      ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
    }
  }
  void TearDown() override {
    if (stack_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack_));
    }
    for (cudaStream_t s : {o_, f1_, f2_}) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
  }
  void *Allocate(cudaStream_t s) {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_capturing(r_, GetParam().bytes, 0, (gmr_stream)s, &p,
                                                      &f))
        << f.message;
    return p;
  }
  void Free(void *p, cudaStream_t s) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, GetParam().bytes, 0, (gmr_stream)s));
  }
  void Join(cudaStream_t waiter, cudaStream_t waited) {
    cudaEvent_t e = nullptr;
    ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ASSERT_EQ(cudaSuccess, cudaEventRecord(e, waited));
    ASSERT_EQ(cudaSuccess, cudaStreamWaitEvent(waiter, e, 0));
    ASSERT_EQ(cudaSuccess, cudaEventDestroy(e));
  }

  gmr_test::FillKernel fill_;
  gmr_stack *stack_ = nullptr;
  gmr_resource *r_ = nullptr;
  cudaStream_t o_ = nullptr, f1_ = nullptr, f2_ = nullptr;
};

// O forks F1, F1 forks F2; a block of O is written by O and F2, freed on O.
// Not back for O after F2 joined F1 only; back once F1 joined O. The graph
// then runs: the block's last writer inside the graph wins.
TEST_P(CaptureReuseGpu, BackOnlyAfterEveryUserJoined) {
  if (device_count_ == 0) return;
  const size_t n = GetParam().bytes;
  // Warm the stack outside the capture, then synchronise.
  void *warm = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, n, 0, (gmr_stream)o_, &warm));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, warm, n, 0, (gmr_stream)o_));
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(o_, cudaStreamCaptureModeGlobal));
  Join(f1_, o_);
  Join(f2_, f1_);
  void *p = Allocate(o_);
  ASSERT_EQ(cudaSuccess, fill_.fill(p, n, 1, o_));
  Join(f2_, o_);
  ASSERT_EQ(cudaSuccess, fill_.fill(p, n, 2, f2_)); // a use on the nested fork
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, (gmr_stream)f2_));
  Free(p, o_);
  void *before = Allocate(o_);
  EXPECT_NE(p, before);
  Join(f1_, f2_); // a partial join
  void *partial = Allocate(o_);
  EXPECT_NE(p, partial);
  Join(o_, f1_); // the full join
  void *after = Allocate(o_);
  EXPECT_EQ(p, after) << "not reused inside the capture after the join";
  ASSERT_EQ(cudaSuccess, fill_.fill(after, n, 3, o_));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(o_, &graph));
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, o_));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(o_));
  std::vector<unsigned char> host(n);
  ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), after, n, cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (unsigned char c : host) wrong += c != 3;
  EXPECT_EQ(0u, wrong) << "the reuse's writes did not come after the fork's";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  Free(after, o_);
  Free(partial, o_);
  Free(before, o_);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
}

INSTANTIATE_TEST_SUITE_P(Stacks, CaptureReuseGpu, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.name);
                         });

// The facts behind the relaxed-mode growth (docs/stream_ordering.md): while
// stream A captures in global mode, a cudaMalloc from this thread in relaxed
// mode succeeds and leaves the capture valid; a cudaDeviceSynchronize in
// relaxed mode is refused, and the test reports whether it broke the
// capture (what the pools avoid during captures).
class CaptureFactsGpu : public gmr_test::GpuTest {};

TEST_F(CaptureFactsGpu, RelaxedMallocKeepsAnotherStreamsGlobalCapture) {
  if (device_count_ == 0) return;
  cudaStream_t a = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
  void *p = nullptr;
  EXPECT_EQ(cudaSuccess, cudaMalloc(&p, 1 << 20));
  cudaError_t sync = cudaDeviceSynchronize();
  ASSERT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
  cudaGraph_t g = nullptr;
  cudaError_t end = cudaStreamEndCapture(a, &g);
  std::printf("capture facts: relaxed cudaDeviceSynchronize during a global capture: %s; "
              "end capture after it: %s\n",
              cudaGetErrorName(sync), cudaGetErrorName(end));
  EXPECT_NE(cudaSuccess, sync);
  if (g != nullptr) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  if (p != nullptr) {
    EXPECT_EQ(cudaSuccess, cudaFree(p));
  }
  cudaStreamDestroy(a);
}

TEST_F(CaptureFactsGpu, RelaxedMallocAloneLeavesTheCaptureValid) {
  if (device_count_ == 0) return;
  cudaStream_t a = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
  void *p = nullptr;
  EXPECT_EQ(cudaSuccess, cudaMalloc(&p, 1 << 20));
  ASSERT_EQ(cudaSuccess, cudaThreadExchangeStreamCaptureMode(&mode));
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaSuccess, cudaStreamEndCapture(a, &g));
  if (g != nullptr) cudaGraphDestroy(g);
  EXPECT_EQ(cudaSuccess, cudaFree(p));
  cudaStreamDestroy(a);
}

}  // namespace
