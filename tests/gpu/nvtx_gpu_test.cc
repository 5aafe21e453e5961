// NVTX pieces on a real GPU: the logging adaptor over cuda_resource, and
// annotated pool blocks used correctly. Run plain (no tool: the adaptor stays
// silent) and under `compute-sanitizer --tool memcheck` (tests/gpu/
// run_sanitizer_checks.sh), where the annotations are live and correct use
// must give 0 errors, and under `nsys profile --trace=cuda,nvtx`.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/nvtx_mem.h"
#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "gmr/log_adaptor.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "tests/support/gpu_fixture.h"

namespace {

using gmr_test::GpuTest;

class NvtxGpuTest : public GpuTest {};

TEST_F(NvtxGpuTest, LoggingAdaptorOverCudaAsyncGivesWritableMemoryOnEveryStream) {
  gmr_cuda_resource_config cc = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  cc.kind = GMR_CUDA_KIND_ASYNC;
  gmr_cuda_resource *cuda = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&cc, &cuda));
  gmr_nvtx_logging_adaptor *nvtx = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_nvtx_logging_adaptor_create(gmr_cuda_resource_as_resource(cuda), nullptr, &nvtx));
  gmr_resource *r = gmr_nvtx_logging_adaptor_as_resource(nvtx);
  gmr_stream streams[2] = {nullptr, nullptr};
  ASSERT_EQ(GMR_OK, gmr_stream_create(&streams[0]));
  ASSERT_EQ(GMR_OK, gmr_stream_create(&streams[1]));

  const size_t sizes[] = {1, 1000, 4096, size_t{3} << 20};
  struct Block {
    void *p;
    size_t bytes;
    gmr_stream s;
    int value;
  };
  std::vector<Block> blocks;
  int value = 0x40;
  for (gmr_stream s : streams) {
    for (size_t bytes : sizes) {
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_allocate(r, bytes, 0, s, &p)) << bytes;
      ASSERT_EQ(cudaSuccess,
                cudaMemsetAsync(p, value, bytes, reinterpret_cast<cudaStream_t>(s)));
      blocks.push_back({p, bytes, s, value++});
    }
  }
  for (gmr_stream s : streams) ASSERT_EQ(GMR_OK, gmr_stream_synchronize(s));
  for (const Block &b : blocks) {
    std::vector<unsigned char> host(b.bytes);
    ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), b.p, b.bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < b.bytes; ++i) {
      ASSERT_EQ(static_cast<unsigned char>(b.value), host[i]) << "byte " << i;
    }
  }
  for (const Block &b : blocks) EXPECT_EQ(GMR_OK, gmr_deallocate(r, b.p, b.bytes, 0, b.s));
  for (gmr_stream s : streams) {
    EXPECT_EQ(GMR_OK, gmr_stream_synchronize(s));
    EXPECT_EQ(GMR_OK, gmr_stream_destroy(s));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cuda_resource_as_resource(cuda)));
}

// A chunk annotated as a pool, with blocks handed out, written exactly, freed
// and reused: memcheck with the annotations live must find nothing.
TEST_F(NvtxGpuTest, AnnotatedBlocksUsedCorrectlyAreCleanUnderMemcheck) {
  const size_t chunk_bytes = size_t{1} << 20;
  unsigned char *chunk = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(reinterpret_cast<void **>(&chunk), chunk_bytes));
  void *heap = gmr__nvtx_mem_heap_register(chunk, chunk_bytes, "nvtx_gpu_test chunk");
  const size_t asked[] = {1000, 4096, 256, 70000};
  size_t offset = 0;
  std::vector<std::pair<unsigned char *, size_t>> blocks;
  for (size_t bytes : asked) {
    unsigned char *p = chunk + offset;
    offset += (bytes + 1023) / 1024 * 1024;
    gmr__nvtx_mem_region_register(heap, p, bytes);
    blocks.emplace_back(p, bytes);
    ASSERT_EQ(cudaSuccess, cudaMemset(p, 0x5a, bytes));
  }
  // Free the first block and hand its space out again, smaller.
  gmr__nvtx_mem_region_unregister(blocks[0].first);
  gmr__nvtx_mem_region_register(heap, blocks[0].first, 512);
  ASSERT_EQ(cudaSuccess, cudaMemset(blocks[0].first, 0x6b, 512));
  std::vector<unsigned char> host(512);
  ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), blocks[0].first, 512, cudaMemcpyDeviceToHost));
  for (unsigned char c : host) ASSERT_EQ(0x6b, c);
  blocks[0].second = 512;

  for (auto &b : blocks) gmr__nvtx_mem_region_unregister(b.first);
  gmr__nvtx_mem_heap_unregister(heap);  // before the chunk goes back
  ASSERT_EQ(cudaSuccess, cudaFree(chunk));
}

}  // namespace
