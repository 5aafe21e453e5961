// cuda_resource on a real GPU: every kind gives memory the device can write
// and the host can read back; capture safety as CUDA really behaves.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "tests/support/gpu_fixture.h"

namespace {

using gmr_test::GpuTest;

class CudaResourceGpu : public GpuTest, public ::testing::WithParamInterface<gmr_cuda_kind> {};

gmr_cuda_resource *make(gmr_cuda_kind kind, int device = GMR_CURRENT_DEVICE) {
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = kind;
  c.device = device;
  gmr_cuda_resource *r = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &r));
  return r;
}

TEST_P(CudaResourceGpu, DeviceWritesEveryByteAndHostReadsThemBack) {
  gmr_cuda_resource *cr = make(GetParam());
  ASSERT_NE(nullptr, cr);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);

  const size_t sizes[] = {1, 257, 4096, size_t{3} << 20, size_t{64} << 20};
  std::vector<void *> ptrs;
  int value = 0x11;
  for (size_t bytes : sizes) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, stream, &p)) << bytes;
    ASSERT_EQ(0u, reinterpret_cast<uintptr_t>(p) % 256);
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(p, value++, bytes, s));
    ptrs.push_back(p);
  }
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  value = 0x11;
  for (size_t i = 0; i < ptrs.size(); ++i) {
    std::vector<unsigned char> host(sizes[i]);
    ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), ptrs[i], sizes[i], cudaMemcpyDefault));
    for (size_t b = 0; b < sizes[i]; ++b) {
      ASSERT_EQ(static_cast<unsigned char>(value), host[b]) << "block " << i << " byte " << b;
    }
    value++;
  }
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  size_t total = 0;
  for (size_t bytes : sizes) total += bytes;
  EXPECT_GE(fp.peak_held_bytes, total);

  for (size_t i = 0; i < ptrs.size(); ++i) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, ptrs[i], sizes[i], 0, stream));
  }
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_synchronize(stream));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
}

TEST_P(CudaResourceGpu, ImpossibleRequestIsOutOfMemoryWithTheCudaError) {
  if (GetParam() == GMR_CUDA_KIND_PINNED || GetParam() == GMR_CUDA_KIND_MANAGED) {
    // Pinned and managed requests beyond the device are host-memory questions
    // (and asking for more managed memory than the card has can hang it).
    GTEST_SKIP() << "only device and async kinds have a device-memory OOM to test";
  }
  gmr_cuda_resource *cr = make(GetParam());
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(GMR_OK, gmr_device_get_memory_info(&free_bytes, &total_bytes));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_allocate_ex(r, total_bytes * 2, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(int{cudaErrorMemoryAllocation}, f.cuda_error) << f.message;
  (void)cudaGetLastError();  // clear the sticky-free last error
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

INSTANTIATE_TEST_SUITE_P(AllKinds, CudaResourceGpu,
                         ::testing::Values(GMR_CUDA_KIND_DEVICE, GMR_CUDA_KIND_ASYNC,
                                           GMR_CUDA_KIND_MANAGED, GMR_CUDA_KIND_PINNED),
                         [](const ::testing::TestParamInfo<gmr_cuda_kind> &info) {
                           return std::string(gmr_cuda_kind_name(info.param));
                         });

using CudaResourceGpuCapture = GpuTest;

TEST_F(CudaResourceGpuCapture, DeviceKindRefusesInsideCaptureAndTheGraphStillWorks) {
  gmr_cuda_resource *dev = make(GMR_CUDA_KIND_DEVICE);
  gmr_cuda_resource *async = make(GMR_CUDA_KIND_ASYNC);
  gmr_resource *d = gmr_cuda_resource_as_resource(dev);
  gmr_resource *a = gmr_cuda_resource_as_resource(async);
  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  void *out = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(d, 4096, 0, stream, &out));

  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(d, 4096, 0, stream, &p, &f));
  EXPECT_EQ(nullptr, p);
  // Stream-ordered allocation inside the capture becomes a graph memory node.
  void *tmp = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(a, 4096, 0, stream, &tmp));
  ASSERT_EQ(cudaSuccess, cudaMemsetAsync(tmp, 0x5a, 4096, s));
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(out, tmp, 4096, cudaMemcpyDeviceToDevice, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(a, tmp, 4096, 0, stream));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph)) << "the refused call must not "
                                                             "invalidate the capture";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  std::vector<unsigned char> host(4096);
  ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), out, 4096, cudaMemcpyDeviceToHost));
  for (unsigned char c : host) ASSERT_EQ(0x5a, c);
  EXPECT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
  EXPECT_EQ(cudaSuccess, cudaGraphDestroy(graph));

  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(d, out, 4096, 0, stream));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(d));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
}

TEST_F(CudaResourceGpuCapture, EveryDeviceGetsItsOwnResourceAndTheCallersDeviceIsRestored) {
  if (device_count_ < 2) {
    GTEST_SKIP() << "needs 2 GPUs to check device restore on real hardware (found "
                 << device_count_ << "); the host simulation covers it with 2 devices";
  }
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_DEVICE, 1);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1 << 20, 0, nullptr, &p));
  cudaPointerAttributes attr;
  ASSERT_EQ(cudaSuccess, cudaPointerGetAttributes(&attr, p));
  EXPECT_EQ(1, attr.device);
  int current = -1;
  ASSERT_EQ(cudaSuccess, cudaGetDevice(&current));
  EXPECT_EQ(0, current);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1 << 20, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

}  // namespace
