// pool_resource and fixed_block_resource on a real GPU. Every block is written
// whole by the device (cudaMemsetAsync) on two streams at once, each block
// with its own byte, then read back: a block that overlapped another, or that
// was reused by one stream while the other's work on it was still pending,
// would hold the wrong byte somewhere.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/pool_resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/gpu_fixture.h"

namespace {

using gmr_test::GpuTest;

constexpr size_t MiB = size_t{1} << 20;

struct Block {
  void *ptr = nullptr;
  size_t bytes = 0;
  unsigned char value = 0;
  int stream = 0;
};

// A stack under test: its top, and everything to destroy (top first).
struct GpuStack {
  std::string name;
  gmr_resource *top = nullptr;
  std::vector<gmr_resource *> owned;  // bottom first
  size_t max_bytes = 0;               // largest request to make
};

gmr_resource *MakeCuda(gmr_cuda_kind kind, std::vector<gmr_resource *> &owned) {
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = kind;
  gmr_cuda_resource *r = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &r));
  owned.push_back(gmr_cuda_resource_as_resource(r));
  return owned.back();
}

GpuStack MakePool(gmr_cuda_kind kind, uint32_t arenas, bool stream_ids) {
  GpuStack s;
  s.name = std::string("pool>") + gmr_cuda_kind_name(kind);
  gmr_resource *up = MakeCuda(kind, s.owned);
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = arenas;
  c.streams.stream_ids = stream_ids;
  c.min_growth_bytes = 16 * MiB;  // several chunks, so chunk edges are exercised
  c.max_growth_bytes = 16 * MiB;
  gmr_pool_resource *p = nullptr;
  EXPECT_EQ(GMR_OK, gmr_pool_resource_create(up, &c, &p));
  s.owned.push_back(gmr_pool_resource_as_resource(p));
  s.top = s.owned.back();
  s.max_bytes = 3 * MiB;
  return s;
}

GpuStack MakeFixed(gmr_cuda_kind kind, bool stream_ids) {
  GpuStack s;
  s.name = std::string("fixed_block>") + gmr_cuda_kind_name(kind);
  gmr_resource *up = MakeCuda(kind, s.owned);
  gmr_fixed_block_resource_config c = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  c.blocks_per_chunk = 16;
  c.streams.stream_ids = stream_ids;
  gmr_fixed_block_resource *f = nullptr;
  EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_create(up, &c, &f));
  s.owned.push_back(gmr_fixed_block_resource_as_resource(f));
  s.top = s.owned.back();
  s.max_bytes = c.block_bytes;
  return s;
}

void Destroy(GpuStack &s) {
  for (auto it = s.owned.rbegin(); it != s.owned.rend(); ++it) {
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(*it))
        << s.name << ": " << gmr_resource_get_type_name(*it);
  }
  s.owned.clear();
}

// Read every byte of `b` back and compare with its value.
void ExpectFilled(const Block &b, const std::string &what) {
  std::vector<unsigned char> host(b.bytes);
  ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), b.ptr, b.bytes, cudaMemcpyDefault));
  for (size_t i = 0; i < b.bytes; ++i) {
    if (host[i] != b.value) {
      FAIL() << what << ": byte " << i << " of a block of " << b.bytes << " bytes at " << b.ptr
             << " holds " << int{host[i]} << ", not " << int{b.value};
    }
  }
}

class PoolsOnGpu : public GpuTest, public ::testing::WithParamInterface<int> {
 protected:
  // stream_ids: streams known by id too (for programs that destroy streams
  // with work pending); the default is by handle, as RMM.
  GpuStack Make(bool stream_ids = false) {
    switch (GetParam()) {
      case 0:
        return MakePool(GMR_CUDA_KIND_DEVICE, 1, stream_ids);
      case 1:
        return MakePool(GMR_CUDA_KIND_ASYNC, 4, stream_ids);
      case 2:
        return MakeFixed(GMR_CUDA_KIND_DEVICE, stream_ids);
      default:
        return MakeFixed(GMR_CUDA_KIND_PINNED, stream_ids);
    }
  }
};

TEST_P(PoolsOnGpu, TwoStreamsWriteEveryByteOfDisjointBlocks) {
  GpuStack s = Make();
  ASSERT_NE(nullptr, s.top);
  gmr_stream streams[2] = {nullptr, nullptr};
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&streams[0]));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&streams[1]));
  std::mt19937 rng(1234);
  std::vector<Block> live;
  unsigned char next_value = 1;
  auto fill = [&](Block &b) {
    b.value = next_value;
    next_value = static_cast<unsigned char>(next_value % 250 + 1);
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(b.ptr, b.value, b.bytes,
                                           reinterpret_cast<cudaStream_t>(streams[b.stream])));
  };
  // Rounds of: allocate on alternating streams and fill; free a third of the
  // blocks on their stream; the next round's allocations reuse them, often
  // from the other stream.
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 40; ++i) {
      Block b;
      b.stream = i % 2;
      b.bytes = 1 + rng() % s.max_bytes;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(s.top, b.bytes, 0, streams[b.stream], &b.ptr))
          << s.name;
      ASSERT_EQ(0u, reinterpret_cast<uintptr_t>(b.ptr) % 256);
      ASSERT_NO_FATAL_FAILURE(fill(b));
      live.push_back(b);
    }
    for (size_t k = 0; k < live.size() / 3; ++k) {
      size_t j = rng() % live.size();
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(s.top, live[j].ptr, live[j].bytes, 0,
                                                streams[live[j].stream]));
      live[j] = live.back();
      live.pop_back();
    }
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(streams[0]));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(streams[1]));
  for (const Block &b : live) ASSERT_NO_FATAL_FAILURE(ExpectFilled(b, s.name));
  for (const Block &b : live) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(s.top, b.ptr, b.bytes, 0, streams[b.stream]));
  }
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(s.top, &released));
  Destroy(s);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(streams[0]));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(streams[1]));
}

TEST_P(PoolsOnGpu, ABlockFreedWhileItsStreamIsBusyIsReusedInOrder) {
  GpuStack s = Make();
  ASSERT_NE(nullptr, s.top);
  gmr_stream a = nullptr, b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b));
  // Keep stream a busy for a while: large memsets of a scratch buffer.
  void *scratch = nullptr;
  size_t scratch_bytes = 512 * MiB;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&scratch, scratch_bytes));
  size_t bytes = s.max_bytes / 2;
  for (int i = 0; i < 8; ++i) {
    Block blk;
    blk.bytes = bytes;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(s.top, bytes, 0, a, &blk.ptr));
    for (int k = 0; k < 8; ++k) {
      ASSERT_EQ(cudaSuccess, cudaMemsetAsync(scratch, k, scratch_bytes, reinterpret_cast<cudaStream_t>(a)));
    }
    // The last write of stream a to the block, queued behind the busy work.
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(blk.ptr, 0xAA, bytes, reinterpret_cast<cudaStream_t>(a)));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(s.top, blk.ptr, bytes, 0, a));
    // Stream b asks for the same size: if it gets the same block, the pool
    // must have ordered b after a's pending work, so b's byte wins.
    Block mine;
    mine.bytes = bytes;
    mine.value = 0x55;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(s.top, bytes, 0, b, &mine.ptr));
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(mine.ptr, mine.value, bytes, reinterpret_cast<cudaStream_t>(b)));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(a));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(b));
    ASSERT_NO_FATAL_FAILURE(ExpectFilled(mine, s.name + " (reuse across streams)"));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(s.top, mine.ptr, bytes, 0, b));
  }
  ASSERT_EQ(cudaSuccess, cudaFree(scratch));
  Destroy(s);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b));
}

// With stream_ids: a stream destroyed while its work on a block is pending,
// and a new stream (the driver often gives it the same handle) that asks for
// the same size: if it gets that block, its write must land after the old
// stream's. (By handle, the default, this is the hazard of RMM issue #649:
// an H100 showed the old stream's write landing last.)
TEST_P(PoolsOnGpu, ADestroyedStreamsPendingBlockIsNeverReusedUnordered) {
  GpuStack s = Make(/*stream_ids=*/true);
  ASSERT_NE(nullptr, s.top);
  void *scratch = nullptr;
  size_t scratch_bytes = 512 * MiB;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&scratch, scratch_bytes));
  size_t bytes = s.max_bytes / 2;
  int same_handle = 0;
  for (int i = 0; i < 8; ++i) {
    gmr_stream a = nullptr, b = nullptr;
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a));
    void *p = nullptr;
    for (int k = 0; k < 10; ++k) {  // past the pool's first frees on a
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(s.top, bytes, 0, a, &p));
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(s.top, p, bytes, 0, a));
    }
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(s.top, bytes, 0, a, &p));
    for (int k = 0; k < 8; ++k) {
      ASSERT_EQ(cudaSuccess,
                cudaMemsetAsync(scratch, k, scratch_bytes, reinterpret_cast<cudaStream_t>(a)));
    }
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(p, 0xAA, bytes, reinterpret_cast<cudaStream_t>(a)));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(s.top, p, bytes, 0, a));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(a));  // legal with work pending
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b));
    same_handle += a == b;
    Block mine;
    mine.bytes = bytes;
    mine.value = 0x55;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(s.top, bytes, 0, b, &mine.ptr));
    ASSERT_EQ(cudaSuccess,
              cudaMemsetAsync(mine.ptr, mine.value, bytes, reinterpret_cast<cudaStream_t>(b)));
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    ASSERT_NO_FATAL_FAILURE(ExpectFilled(mine, s.name + " (a new stream after a destroyed one)"));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(s.top, mine.ptr, bytes, 0, b));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(b));
  }
  RecordProperty("same_handle_count", same_handle);
  ASSERT_EQ(cudaSuccess, cudaFree(scratch));
  Destroy(s);
}

// record_stream: a block also written on a busy side stream, freed on its
// own stream, must not be reused there before the side stream's write.
TEST_P(PoolsOnGpu, RecordStreamKeepsABlockUntilTheSideStreamIsDone) {
  GpuStack s = Make();
  ASSERT_NE(nullptr, s.top);
  gmr_stream m = nullptr, side = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&m));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&side));
  void *scratch = nullptr;
  size_t scratch_bytes = 512 * MiB;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&scratch, scratch_bytes));
  size_t bytes = s.max_bytes / 2;
  for (int i = 0; i < 8; ++i) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(s.top, bytes, 0, m, &p));
    for (int k = 0; k < 8; ++k) {
      ASSERT_EQ(cudaSuccess,
                cudaMemsetAsync(scratch, k, scratch_bytes, reinterpret_cast<cudaStream_t>(side)));
    }
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(p, 0xAA, bytes, reinterpret_cast<cudaStream_t>(side)));
    ASSERT_EQ(GMR_OK, gmr_resource_record_stream(s.top, p, side));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(s.top, p, bytes, 0, m));
    Block mine;
    mine.bytes = bytes;
    mine.value = 0x55;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(s.top, bytes, 0, m, &mine.ptr));
    ASSERT_EQ(cudaSuccess,
              cudaMemsetAsync(mine.ptr, mine.value, bytes, reinterpret_cast<cudaStream_t>(m)));
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    ASSERT_NO_FATAL_FAILURE(ExpectFilled(mine, s.name + " (record_stream)"));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(s.top, mine.ptr, bytes, 0, m));
  }
  ASSERT_EQ(cudaSuccess, cudaFree(scratch));
  Destroy(s);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(m));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(side));
}

std::string StackName(const ::testing::TestParamInfo<int> &info) {
  static const char *const names[] = {"pool_device", "pool_async_4_arenas", "fixed_block_device",
                                      "fixed_block_pinned"};
  return names[info.param];
}

INSTANTIATE_TEST_SUITE_P(Stacks, PoolsOnGpu, ::testing::Values(0, 1, 2, 3), StackName);

using FixedBlockListOnGpu = GpuTest;

TEST_F(FixedBlockListOnGpu, EveryBlockOfAListIsWritableAndDistinct) {
  GpuStack s = MakeFixed(GMR_CUDA_KIND_DEVICE, false);
  gmr_fixed_block_resource *f = gmr_fixed_block_resource_from_resource(s.top);
  ASSERT_NE(nullptr, f);
  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
  gmr_block_list *list = nullptr;
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_allocate_blocks(f, 40 * MiB + 5, stream, &list));
  ASSERT_EQ(41u, list->block_count);
  std::vector<Block> blocks;
  for (size_t i = 0; i < list->block_count; ++i) {
    Block b;
    b.ptr = list->blocks[i];
    b.bytes = list->block_bytes;
    b.value = static_cast<unsigned char>(i + 1);
    ASSERT_EQ(cudaSuccess, cudaMemsetAsync(b.ptr, b.value, b.bytes, reinterpret_cast<cudaStream_t>(stream)));
    blocks.push_back(b);
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(stream));
  for (const Block &b : blocks) ASSERT_NO_FATAL_FAILURE(ExpectFilled(b, "block list"));
  EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_deallocate_blocks(f, list, stream));
  gmr_fixed_block_resource_stats st = GMR_FIXED_BLOCK_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_get_stats(f, &st));
  EXPECT_EQ(0u, st.in_use_block_count);
  Destroy(s);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
}

using PoolCaptureOnGpu = GpuTest;

TEST_F(PoolCaptureOnGpu, CaptureUsesOnlyTheStreamsOwnBlocksAndSurvives) {
  GpuStack s = MakePool(GMR_CUDA_KIND_DEVICE, 1, false);
  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
  cudaStream_t cs = reinterpret_cast<cudaStream_t>(stream);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(s.top, MiB, 0, stream, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(s.top, p, MiB, 0, stream));
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
  void *q = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_allocate(s.top, MiB, 0, stream, &q));
  EXPECT_EQ(p, q);
  void *big = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(s.top, 64 * MiB, 0, stream, &big, &f));
  EXPECT_EQ(cudaSuccess, cudaMemsetAsync(q, 1, MiB, cs));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(cs, &graph));  // not invalidated
  EXPECT_EQ(cudaSuccess, cudaGraphDestroy(graph));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(s.top, q, MiB, 0, stream));
  Destroy(s);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
}

// allocate_capturing on a real capture in global mode: free memory is served
// with no call that breaks the capture; growth goes through the upstream's
// allocate_capturing when it has one (cudaMalloc in relaxed mode), and is
// refused with CAPTURE_UNSAFE otherwise; the capture stays valid either way,
// and the graph runs and writes the memory handed out during it.
TEST_F(PoolCaptureOnGpu, AllocateCapturingKeepsTheCaptureValid) {
  GpuStack s = MakePool(GMR_CUDA_KIND_DEVICE, 1, false);
  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&stream));
  cudaStream_t cs = reinterpret_cast<cudaStream_t>(stream);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(s.top, MiB, 0, stream, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(s.top, p, MiB, 0, stream));
  ASSERT_EQ(cudaSuccess, cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
  void *q = nullptr, *big = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_OK, gmr_resource_allocate_capturing(s.top, MiB, 0, stream, &q, &f)) << f.message;
  gmr_status grown = gmr_resource_allocate_capturing(s.top, 64 * MiB, 0, stream, &big, &f);
  EXPECT_TRUE(grown == GMR_OK || grown == GMR_ERR_CAPTURE_UNSAFE) << gmr_status_name(grown);
  EXPECT_EQ(cudaSuccess, cudaMemsetAsync(q, 7, MiB, cs));
  if (big != nullptr) {
    EXPECT_EQ(cudaSuccess, cudaMemsetAsync(big, 9, 64 * MiB, cs));
  }
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaSuccess, cudaStreamEndCapture(cs, &graph));  // not invalidated
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaSuccess, cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_EQ(cudaSuccess, cudaGraphLaunch(exec, cs));
  ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(cs));
  Block b;
  b.ptr = q;
  b.bytes = MiB;
  b.value = 7;
  ASSERT_NO_FATAL_FAILURE(ExpectFilled(b, "memory of a captured graph"));
  if (big != nullptr) {
    b.ptr = big;
    b.bytes = 64 * MiB;
    b.value = 9;
    ASSERT_NO_FATAL_FAILURE(ExpectFilled(b, "memory grown during the capture"));
  }
  RecordProperty("grew_during_capture", grown == GMR_OK ? 1 : 0);
  EXPECT_EQ(cudaSuccess, cudaGraphExecDestroy(exec));
  EXPECT_EQ(cudaSuccess, cudaGraphDestroy(graph));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(s.top, q, MiB, 0, stream));
  if (big != nullptr) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(s.top, big, 64 * MiB, 0, stream));
  }
  Destroy(s);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(stream));
}

}  // namespace
