// NVTX pieces on a real GPU: the logging adaptor over cuda_resource, and
// annotated blocks used correctly: through core/nvtx_mem directly, and from
// gmr's pool_resource, fixed_block_resource and graph_arena_resource with
// nvtx_annotate, written by a kernel (memcheck checks kernel accesses against
// the regions). Run plain (no tool: everything stays silent) and under
// `compute-sanitizer --tool memcheck` (tests/gpu/run_sanitizer_checks.sh),
// where the annotations are live and correct use must give 0 errors (a region
// missing or too small would be reported), and under
// `nsys profile --trace=cuda,nvtx`.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/nvtx_mem.h"
#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/log_adaptor.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "gmr/pool_resource.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/gpu/fill_kernel.h"
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
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&streams[0]));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&streams[1]));

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
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, s, &p)) << bytes;
      ASSERT_EQ(cudaSuccess,
                cudaMemsetAsync(p, value, bytes, reinterpret_cast<cudaStream_t>(s)));
      blocks.push_back({p, bytes, s, value++});
    }
  }
  for (gmr_stream s : streams) ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(s));
  for (const Block &b : blocks) {
    std::vector<unsigned char> host(b.bytes);
    ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), b.p, b.bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < b.bytes; ++i) {
      ASSERT_EQ(static_cast<unsigned char>(b.value), host[i]) << "byte " << i;
    }
  }
  for (const Block &b : blocks) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b.p, b.bytes, 0, b.s));
  for (gmr_stream s : streams) {
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_synchronize(s));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
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


constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

// Read `bytes` at `p` back and check that every byte is `value`.
::testing::AssertionResult HoldsOnly(const void *p, size_t bytes, unsigned char value) {
  std::vector<unsigned char> host(bytes);
  cudaError_t err = cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return ::testing::AssertionFailure() << cudaGetErrorName(err);
  for (size_t i = 0; i < bytes; ++i) {
    if (host[i] != value) {
      return ::testing::AssertionFailure()
             << "byte " << i << " of " << bytes << " is " << int{host[i]} << ", not "
             << int{value};
    }
  }
  return ::testing::AssertionSuccess();
}

struct Written {
  void *p;
  size_t bytes;
  unsigned char value;
  gmr_stream stream;
};

// Allocate each size on each stream from `r`, write exactly the bytes asked
// for with the kernel, wait, and check them.
void AllocateAndWrite(gmr_resource *r, const gmr_test::FillKernel &k,
                      const std::vector<size_t> &sizes, const std::vector<gmr_stream> &streams,
                      unsigned char first_value, std::vector<Written> *out) {
  unsigned char value = first_value;
  for (gmr_stream s : streams) {
    for (size_t bytes : sizes) {
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, s, &p)) << bytes;
      ASSERT_EQ(cudaSuccess, k.fill(p, bytes, value, reinterpret_cast<cudaStream_t>(s)));
      out->push_back({p, bytes, value++, s});
    }
  }
  for (gmr_stream s : streams) ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(s));
  for (const Written &w : *out) ASSERT_TRUE(HoldsOnly(w.p, w.bytes, w.value)) << w.bytes;
}

// Free them (their work is done: the host unregisters a region at once).
void FreeAll(gmr_resource *r, std::vector<Written> *blocks) {
  for (const Written &w : *blocks)
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, w.p, w.bytes, 0, w.stream));
  blocks->clear();
}

class NvtxAnnotatedGpuTest : public GpuTest {
 protected:
  gmr_test::FillKernel kernel_;
  std::vector<gmr_stream> streams_;
  gmr_cuda_resource *cuda_ = nullptr;

  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cudaSuccess, cudaFree(nullptr));  // the runtime starts before any NVTX call
    ASSERT_EQ(cudaSuccess, kernel_.load());
    for (int i = 0; i < 2; ++i) {
      gmr_stream s = nullptr;
      ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
      streams_.push_back(s);
    }
    gmr_cuda_resource_config cc = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    cc.kind = GMR_CUDA_KIND_DEVICE;
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&cc, &cuda_));
  }

  void TearDown() override {
    for (gmr_stream s : streams_) {
      EXPECT_EQ(GMR_OK, gmr_cuda_stream_synchronize(s));
      EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    }
    if (cuda_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cuda_resource_as_resource(cuda_)));
    }
  }
};

TEST_F(NvtxAnnotatedGpuTest, PoolBlocksWrittenExactlyByKernelsAreClean) {
  gmr_pool_resource_config pc = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  pc.min_growth_bytes = 4 * MiB;  // several chunks: several heaps
  pc.max_growth_bytes = 4 * MiB;
  pc.chunk_granularity_bytes = 2 * MiB;
  pc.streams.nvtx_annotate = true;
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(gmr_cuda_resource_as_resource(cuda_), &pc, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  std::vector<Written> blocks;
  // Sizes that are not multiples of 256: each block's last bytes sit just
  // before its unregistered rounding, so a region one byte short would show.
  AllocateAndWrite(r, kernel_, {1, 255, 1000, 4097, 64 * KiB + 3, 3 * MiB + 5}, streams_, 0x10,
                   &blocks);
  FreeAll(r, &blocks);
  // The freed places again, cut differently (split, merged, reused by the
  // other stream after its event).
  AllocateAndWrite(r, kernel_, {700, 2 * MiB + 1, 300, 5000}, streams_, 0x40, &blocks);
  FreeAll(r, &blocks);
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_LT(0u, released);
  AllocateAndWrite(r, kernel_, {123, 4 * MiB - 17}, streams_, 0x70, &blocks);  // after trim
  FreeAll(r, &blocks);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(NvtxAnnotatedGpuTest, FixedBlockBlocksAndListsWrittenByKernelsAreClean) {
  gmr_fixed_block_resource_config fc = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  fc.block_bytes = 64 * KiB;
  fc.blocks_per_chunk = 8;
  fc.streams.nvtx_annotate = true;
  gmr_fixed_block_resource *fb = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_fixed_block_resource_create(gmr_cuda_resource_as_resource(cuda_), &fc, &fb));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(fb);
  std::vector<Written> blocks;
  AllocateAndWrite(r, kernel_, {1, 1000, 64 * KiB - 1, 64 * KiB, 200 * KiB}, streams_, 0x10,
                   &blocks);  // 200 KiB is forwarded to cuda_resource
  FreeAll(r, &blocks);
  // A list's blocks are regions of whole blocks.
  cudaStream_t s = reinterpret_cast<cudaStream_t>(streams_[0]);
  gmr_block_list *list = nullptr;
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_allocate_blocks(fb, 300 * KiB, streams_[0], &list));
  ASSERT_NE(nullptr, list);
  for (size_t i = 0; i < list->block_count; ++i) {
    ASSERT_EQ(cudaSuccess, kernel_.fill(list->blocks[i], list->block_bytes,
                                        static_cast<unsigned char>(0x80 + i), s));
  }
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  for (size_t i = 0; i < list->block_count; ++i) {
    EXPECT_TRUE(HoldsOnly(list->blocks[i], list->block_bytes, static_cast<unsigned char>(0x80 + i)));
  }
  EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_deallocate_blocks(fb, list, streams_[0]));
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// Over cuda(kind=device): Compute Sanitizer (CUDA 13.0, driver 580, H100)
// rejects NVTX heaps over cudaMallocFromPoolAsync memory ("Call to
// nvtxMemHeapRegister failed: One or more of the parameters is invalid"),
// even after the allocating stream was synchronised, so annotated pools are
// documented to need a cudaMalloc upstream.
TEST_F(NvtxAnnotatedGpuTest, SpecStackWithNvtxLoggingOverAnAnnotatedPoolIsClean) {
  gmr_stack *stack = nullptr;
  gmr_spec_error e;
  ASSERT_EQ(GMR_OK, gmr_stack_create("nvtx_logging > pool(nvtx_annotate=true) > cuda(kind=device)",
                                     &stack, &e))
      << e.message;
  gmr_resource *r = gmr_stack_as_resource(stack);
  std::vector<Written> blocks;
  AllocateAndWrite(r, kernel_, {17, 1000, MiB + 1}, streams_, 0x20, &blocks);
  FreeAll(r, &blocks);
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
}

// A captured graph writes with kernels into blocks that the host freed during
// the capture (bookkeeping under both policies) and into an uncaptured block
// freed during the capture: their regions must stay for the replays, which
// run after the frees. A region dropped at such a free would make memcheck
// report every replay.
TEST_F(NvtxAnnotatedGpuTest, GraphReplaysTouchingBlocksFreedDuringCaptureAreClean) {
  for (gmr_graph_arena_policy policy : {GMR_GRAPH_ARENA_MONOTONE, GMR_GRAPH_ARENA_ORDERED_REUSE}) {
    SCOPED_TRACE(gmr_graph_arena_resource_policy_name(policy));
    gmr_graph_arena_resource_config ac = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
    ac.initial_capacity_bytes = 4 * MiB;
    ac.capture_policy = policy;
    ac.detection = GMR_GRAPH_ARENA_DETECT_EXPLICIT;
    ac.nvtx_annotate = true;
    gmr_graph_arena_resource *arena = nullptr;
    ASSERT_EQ(GMR_OK,
              gmr_graph_arena_resource_create(gmr_cuda_resource_as_resource(cuda_), &ac, &arena));
    gmr_resource *r = gmr_graph_arena_resource_as_resource(arena);
    gmr_stream stream = streams_[0];
    cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
    const size_t a_bytes = 1000, b_bytes = 3000, w_bytes = 500;
    const size_t out_bytes = w_bytes + a_bytes + a_bytes + b_bytes;
    unsigned char *out = nullptr;  // a plain cudaMalloc, outside the arena
    ASSERT_EQ(cudaSuccess, cudaMalloc(reinterpret_cast<void **>(&out), out_bytes));
    void *W = nullptr;  // uncaptured, from before the capture
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, w_bytes, 0, nullptr, &W));

    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(arena, stream, nullptr));
    ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    void *A = nullptr, *B = nullptr, *C = nullptr;
    ASSERT_EQ(cudaSuccess, kernel_.fill(W, w_bytes, 0x44, s));
    ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(out, W, w_bytes, cudaMemcpyDeviceToDevice, s));
    ASSERT_EQ(GMR_OK,
              gmr_resource_deallocate(r, W, w_bytes, 0, stream));  // uncaptured, freed in capture
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, a_bytes, 0, stream, &A));
    ASSERT_EQ(cudaSuccess, kernel_.fill(A, a_bytes, 0x11, s));
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, b_bytes, 0, stream, &B));
    ASSERT_EQ(cudaSuccess, kernel_.fill(B, b_bytes, 0x22, s));
    ASSERT_EQ(cudaSuccess,
              cudaMemcpyAsync(out + w_bytes, A, a_bytes, cudaMemcpyDeviceToDevice, s));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, A, a_bytes, 0, stream));  // freed in the capture
    ASSERT_EQ(GMR_OK,
              gmr_resource_allocate(r, a_bytes, 0, stream, &C));  // ordered reuse: A's bytes
    ASSERT_EQ(cudaSuccess, kernel_.fill(C, a_bytes, 0x33, s));
    ASSERT_EQ(cudaSuccess,
              cudaMemcpyAsync(out + w_bytes + a_bytes, C, a_bytes, cudaMemcpyDeviceToDevice, s));
    ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(out + w_bytes + 2 * a_bytes, B, b_bytes,
                                           cudaMemcpyDeviceToDevice, s));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, B, b_bytes, 0, stream));
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph));
    gmr_graph_memory *memory = nullptr;
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(arena, stream, &memory));
    if (policy == GMR_GRAPH_ARENA_ORDERED_REUSE) {
      EXPECT_EQ(A, C);
    } else {
      EXPECT_NE(A, C);
    }

    std::vector<unsigned char> expected(out_bytes);
    std::memset(expected.data(), 0x44, w_bytes);
    std::memset(expected.data() + w_bytes, 0x11, a_bytes);
    std::memset(expected.data() + w_bytes + a_bytes, 0x33, a_bytes);
    std::memset(expected.data() + w_bytes + 2 * a_bytes, 0x22, b_bytes);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
    std::vector<unsigned char> host(out_bytes);
    for (int replay = 0; replay < 3; ++replay) {
      ASSERT_EQ(cudaSuccess, cudaMemsetAsync(out, 0, out_bytes, s));
      ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
      ASSERT_EQ(cudaSuccess,
                cudaMemcpyAsync(host.data(), out, out_bytes, cudaMemcpyDeviceToHost, s));
      ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
      ASSERT_EQ(0, std::memcmp(expected.data(), host.data(), out_bytes)) << "replay " << replay;
    }
    ASSERT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
    ASSERT_EQ(cudaSuccess, cudaGraphDestroy(graph));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, C, a_bytes, 0, stream));
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena, memory));
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reset(arena, nullptr));
    EXPECT_EQ(cudaSuccess, cudaFree(out));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

}  // namespace
