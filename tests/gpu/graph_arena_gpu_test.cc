// graph_arena_resource on a real GPU: a CUDA graph captured with arena memory
// is replayed 1,000 times and every byte it writes is checked; capture-time
// exhaustion and automatic detection as CUDA really behaves; cudaMalloc in a
// capture fails as documented. Self-contained (static CUDA runtime), so it can
// run under compute-sanitizer:
//   compute-sanitizer --tool memcheck graph_arena_gpu_test
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/gpu_fixture.h"

namespace {

using gmr_test::GpuTest;

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

class GraphArenaGpu : public GpuTest {
 protected:
  gmr_cuda_resource *cuda_ = nullptr;
  gmr_resource *up_ = nullptr;

  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &cuda_));
    up_ = gmr_cuda_resource_as_resource(cuda_);
  }

  void TearDown() override {
    if (up_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_));
    }
  }

  gmr_graph_arena_resource *Make(size_t initial, gmr_graph_arena_policy policy,
                                 gmr_graph_arena_detection detection) {
    gmr_graph_arena_resource_config c = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
    c.initial_capacity_bytes = initial;
    c.chunk_bytes = 0;
    c.capture_policy = policy;
    c.detection = detection;
    gmr_graph_arena_resource *a = nullptr;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_create(up_, &c, &a));
    return a;
  }
};

// What the graph below writes into `out`: A's value, half A half B, C's value.
std::vector<unsigned char> Expected(size_t a_bytes, size_t b_bytes) {
  std::vector<unsigned char> v(a_bytes + b_bytes + a_bytes);
  std::memset(v.data(), 0x11, a_bytes);
  std::memset(v.data() + a_bytes, 0x11, b_bytes / 2);
  std::memset(v.data() + a_bytes + b_bytes / 2, 0x22, b_bytes - b_bytes / 2);
  std::memset(v.data() + a_bytes + b_bytes, 0x33, a_bytes);
  return v;
}

class GraphArenaGpuPolicy : public GraphArenaGpu,
                            public ::testing::WithParamInterface<gmr_graph_arena_policy> {};

TEST_P(GraphArenaGpuPolicy, CapturedGraphUsesArenaMemoryAndReplays1000Times) {
  const size_t a_bytes = MiB + 3, b_bytes = 257 * KiB + 1;
  gmr_graph_arena_resource *arena = Make(8 * MiB, GetParam(), GMR_GRAPH_ARENA_DETECT_EXPLICIT);
  ASSERT_NE(nullptr, arena);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(arena);
  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  const size_t out_bytes = a_bytes + b_bytes + a_bytes;
  unsigned char *out = nullptr;  // outside the arena, allocated before capture
  ASSERT_EQ(cudaSuccess, cudaMalloc(reinterpret_cast<void **>(&out), out_bytes));

  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(arena, stream, nullptr));
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  void *A = nullptr, *B = nullptr, *C = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, a_bytes, 0, stream, &A));
  ASSERT_EQ(cudaSuccess, cudaMemsetAsync(A, 0x11, a_bytes, s));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, b_bytes, 0, stream, &B));
  ASSERT_EQ(cudaSuccess, cudaMemsetAsync(B, 0x22, b_bytes, s));
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(B, A, b_bytes / 2, cudaMemcpyDeviceToDevice, s));
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(out, A, a_bytes, cudaMemcpyDeviceToDevice, s));
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(out + a_bytes, B, b_bytes, cudaMemcpyDeviceToDevice, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, A, a_bytes, 0, stream));  // freed inside the capture
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, a_bytes, 0, stream, &C));
  ASSERT_EQ(cudaSuccess, cudaMemsetAsync(C, 0x33, a_bytes, s));
  ASSERT_EQ(cudaSuccess,
            cudaMemcpyAsync(out + a_bytes + b_bytes, C, a_bytes, cudaMemcpyDeviceToDevice, s));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, B, b_bytes, 0, stream));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(arena, stream, &mem));
  if (GetParam() == GMR_GRAPH_ARENA_ORDERED_REUSE) {
    EXPECT_EQ(A, C) << "ordered reuse: A's bytes serve C later on the same stream";
  } else {
    EXPECT_NE(A, C) << "monotone: no two blocks of the graph share bytes";
  }
  gmr_graph_arena_resource_stats st = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_stats(arena, &st));
  EXPECT_EQ(3u, st.capture_allocation_count);
  EXPECT_EQ(0u, st.upstream_call_during_capture_count);
  EXPECT_EQ(1u, st.upstream_call_count);  // the initial chunk only

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  const std::vector<unsigned char> expected = Expected(a_bytes, b_bytes);
  std::vector<unsigned char> host(out_bytes);
  for (int replay = 0; replay < 1000; ++replay) {
    // Clear the output outside the graph, so every replay must write it again.
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(out, 0, out_bytes, s));
    ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
    ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(host.data(), out, out_bytes, cudaMemcpyDeviceToHost, s));
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
    ASSERT_EQ(0, std::memcmp(expected.data(), host.data(), out_bytes)) << "replay " << replay;
  }
  ASSERT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
  ASSERT_EQ(cudaSuccess, cudaGraphDestroy(graph));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, C, a_bytes, 0, stream));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena, mem));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_stats(arena, &st));
  EXPECT_EQ(0u, st.in_use_bytes);
  EXPECT_EQ(cudaSuccess, cudaFree(out));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Policies, GraphArenaGpuPolicy,
                         ::testing::Values(GMR_GRAPH_ARENA_MONOTONE, GMR_GRAPH_ARENA_ORDERED_REUSE),
                         [](const ::testing::TestParamInfo<gmr_graph_arena_policy> &info) {
                           return std::string(gmr_graph_arena_resource_policy_name(info.param));
                         });

TEST_F(GraphArenaGpu, AutomaticDetectionSeesARealCapture) {
  gmr_graph_arena_resource *arena =
      Make(4 * MiB, GMR_GRAPH_ARENA_MONOTONE, GMR_GRAPH_ARENA_DETECT_AUTO);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(arena);
  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  void *before = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4096, 0, stream, &before));  // uncaptured
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 64 * KiB, 0, stream, &p));
  ASSERT_EQ(cudaSuccess, cudaMemsetAsync(p, 0x5a, 64 * KiB, s));
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(before, p, 4096, cudaMemcpyDeviceToDevice, s));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph)) << "cudaStreamGetCaptureInfo is safe";
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(arena, stream, &mem));
  gmr_graph_arena_resource_stats st = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_stats(arena, &st));
  EXPECT_EQ(1u, st.capture_allocation_count);
  EXPECT_EQ(2u, st.allocation_count);
  EXPECT_EQ(0u, st.upstream_call_during_capture_count);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 10; ++replay) {
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(before, 0, 4096, s));
    ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
  }
  std::vector<unsigned char> host(4096);
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(host.data(), before, 4096, cudaMemcpyDeviceToHost, s));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  for (unsigned char c : host) ASSERT_EQ(0x5a, c);
  ASSERT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
  ASSERT_EQ(cudaSuccess, cudaGraphDestroy(graph));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64 * KiB, 0, stream));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, before, 4096, 0, stream));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena, mem));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(arena, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
}

TEST_F(GraphArenaGpu, ExhaustionInCaptureRefusesAndTheCaptureStaysValid) {
  gmr_graph_arena_resource *arena =
      Make(MiB, GMR_GRAPH_ARENA_MONOTONE, GMR_GRAPH_ARENA_DETECT_AUTO);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(arena);
  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 768 * KiB, 0, stream, &p));
  ASSERT_EQ(cudaSuccess, cudaMemsetAsync(p, 1, 768 * KiB, s));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(r, 512 * KiB, 0, stream, &q, &f));
  EXPECT_EQ(nullptr, q);
  EXPECT_STREQ(
      "graph_arena: capture needs 512.0 KiB more; create the arena with "
      "initial_capacity_bytes >= 1572864 or call gmr_graph_arena_resource_reserve(arena, 1572864) "
      "before "
      "capture",
      f.message);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph)) << "the refusal made no CUDA call";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  ASSERT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
  ASSERT_EQ(cudaSuccess, cudaGraphDestroy(graph));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(arena, stream, &mem));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 768 * KiB, 0, stream));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena, mem));
  // The advice works: grow to the figure, capture again, both fit.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(arena, 1572864));
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 768 * KiB, 0, stream, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 512 * KiB, 0, stream, &q));
  ASSERT_EQ(cudaSuccess, cudaMemsetAsync(q, 2, 512 * KiB, s));
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph));
  ASSERT_EQ(cudaSuccess, cudaGraphDestroy(graph));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(arena, stream, &mem));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 768 * KiB, 0, stream));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 512 * KiB, 0, stream));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena, mem));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
}

TEST_F(GraphArenaGpu, CudaMallocInCaptureFailsAsDocumented) {
  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  void *out = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&out, 4096));

  // Through cuda_resource(kind=device): refused before any CUDA call, so the
  // capture survives and the rest of the graph works.
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(up_, 4096, 0, stream, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_STREQ(
      "cudaMalloc is not allowed while the stream is capturing a CUDA graph; allocate before "
      "capture, call gmr_resource_allocate_capturing, or use a graph_arena_resource",
      f.message);
  ASSERT_EQ(cudaSuccess, cudaMemsetAsync(out, 0x7e, 4096, s));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, s));
  std::vector<unsigned char> host(4096);
  ASSERT_EQ(cudaSuccess, cudaMemcpyAsync(host.data(), out, 4096, cudaMemcpyDeviceToHost, s));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
  for (unsigned char c : host) ASSERT_EQ(0x7e, c);
  ASSERT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
  ASSERT_EQ(cudaSuccess, cudaGraphDestroy(graph));

  // A raw cudaMalloc in a global capture: refused, and the capture is lost.
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  void *raw = nullptr;
  EXPECT_EQ(cudaErrorStreamCaptureUnsupported, cudaMalloc(&raw, 4096));
  graph = nullptr;
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, cudaStreamEndCapture(s, &graph));
  EXPECT_EQ(nullptr, graph);
  (void)cudaGetLastError();  // clear the error the failed capture left
  EXPECT_EQ(cudaSuccess, cudaFree(out));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
}

TEST_F(GraphArenaGpu, TwoThreadsCaptureAtTheSameTimeEachWithItsOwnSession) {
  gmr_graph_arena_resource *arena =
      Make(16 * MiB, GMR_GRAPH_ARENA_ORDERED_REUSE, GMR_GRAPH_ARENA_DETECT_EXPLICIT);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(arena);
  constexpr int kThreads = 2;
  constexpr size_t kBytes = 2 * MiB + 512;
  gmr_stream streams[kThreads] = {};
  unsigned char *outs[kThreads] = {};
  cudaGraph_t graphs[kThreads] = {};
  gmr_graph_memory *mems[kThreads] = {};
  void *blocks[kThreads][2] = {};
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&streams[t]));
    ASSERT_EQ(cudaSuccess, cudaMalloc(reinterpret_cast<void **>(&outs[t]), 2 * kBytes));
  }
  int errors[kThreads] = {};
  auto capture = [&](int t) {
    cudaStream_t s = reinterpret_cast<cudaStream_t>(streams[t]);
    int value = 0x40 + t;
    bool ok = gmr_graph_arena_resource_begin_capture(arena, streams[t], nullptr) == GMR_OK &&
              cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess;
    for (int i = 0; ok && i < 2; ++i) {
      ok = gmr_resource_allocate(r, kBytes, 0, streams[t], &blocks[t][i]) == GMR_OK &&
           cudaMemsetAsync(blocks[t][i], value + 2 * i, kBytes, s) == cudaSuccess &&
           cudaMemcpyAsync(outs[t] + i * kBytes, blocks[t][i], kBytes, cudaMemcpyDeviceToDevice,
                           s) == cudaSuccess;
    }
    ok = cudaStreamEndCapture(s, &graphs[t]) == cudaSuccess && ok;
    ok = gmr_graph_arena_resource_end_capture(arena, streams[t], &mems[t]) == GMR_OK && ok;
    errors[t] = ok ? 0 : 1;
  };
  std::thread t0(capture, 0), t1(capture, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(0, errors[0]);
  ASSERT_EQ(0, errors[1]);
  // No block of one graph overlaps a block of the other.
  for (void *x : blocks[0]) {
    for (void *y : blocks[1]) {
      uintptr_t a = reinterpret_cast<uintptr_t>(x), b = reinterpret_cast<uintptr_t>(y);
      EXPECT_TRUE(a + kBytes <= b || b + kBytes <= a);
    }
  }
  cudaGraphExec_t execs[kThreads] = {};
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&execs[t], graphs[t], 0));
  }
  std::vector<unsigned char> host(2 * kBytes);
  std::vector<unsigned char> expected[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    expected[t].assign(2 * kBytes, static_cast<unsigned char>(0x40 + t));
    std::memset(expected[t].data() + kBytes, 0x42 + t, kBytes);
  }
  for (int replay = 0; replay < 100; ++replay) {
    for (int t = 0; t < kThreads; ++t) {
      cudaStream_t s = reinterpret_cast<cudaStream_t>(streams[t]);
      ASSERT_EQ(cudaSuccess, cudaMemsetAsync(outs[t], 0, 2 * kBytes, s));
      ASSERT_EQ(cudaSuccess, cudaGraphLaunch(execs[t], s));
    }
    for (int t = 0; t < kThreads; ++t) {
      cudaStream_t s = reinterpret_cast<cudaStream_t>(streams[t]);
      ASSERT_EQ(cudaSuccess,
                cudaMemcpyAsync(host.data(), outs[t], 2 * kBytes, cudaMemcpyDeviceToHost, s));
      ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(s));
      ASSERT_EQ(0, std::memcmp(expected[t].data(), host.data(), 2 * kBytes))
          << "replay " << replay << " graph " << t;
    }
  }
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(cudaSuccess, cudaGraphExecDestroy(execs[t]));
    ASSERT_EQ(cudaSuccess, cudaGraphDestroy(graphs[t]));
    for (void *b : blocks[t])
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, kBytes, 0, streams[t]));
    ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena, mems[t]));
    EXPECT_EQ(cudaSuccess, cudaFree(outs[t]));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(streams[t]));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

}  // namespace
