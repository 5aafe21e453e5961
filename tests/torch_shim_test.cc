// The PyTorch entry points (integrations/torch/gmr_torch.h), called as
// PyTorch calls them, on two simulated devices: both modes' alloc/free,
// refused frees, spec errors and out of memory as exceptions (direct) or NULL
// (MemPool), record_stream with and without the stack's support, empty_cache,
// the memory fraction, a MemPool segment during capture, and threads. CUDA
// graph pools in direct mode: tests/torch_graph_pools_test.cc.
// This build has no PyTorch headers, so the exceptions are std::runtime_error.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmr/gmr.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "integrations/torch/gmr_torch.h"
#include "tests/support/mock_resource.h"
#include "tests/support/torch_shim_fixture.h"

namespace {

using gmr_test::contains;
using gmr_test::TorchShimTest;

gmr_torch_counters counters() { return gmr_test::torch_counters(); }
std::string last_error() { return gmr_test::torch_last_error(); }
constexpr size_t kDeviceBytes = TorchShimTest::kDeviceBytes;

TEST_F(TorchShimTest, DirectAllocLandsOnTheGivenDeviceAndRestoresTheCallers) {
  gmr_torch_init(2);
  uint64_t before = counters().allocation_count;
  void *p = gmr_torch_alloc(1024, 1, nullptr);
  ASSERT_NE(nullptr, p);
  EXPECT_EQ(0, current_device());
  EXPECT_EQ(1024u, used(1));
  EXPECT_EQ(0u, used(0));
  EXPECT_EQ(before + 1, counters().allocation_count);
  EXPECT_EQ(1u, counters().live_count);
  EXPECT_EQ(1024u, counters().live_bytes);
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % 256);
  gmr_torch_free(p, 1024, 1, nullptr);
  EXPECT_EQ(0u, used(1));
  EXPECT_EQ(0u, counters().live_count);
  // Zero bytes: NULL, and freeing NULL does nothing.
  EXPECT_EQ(nullptr, gmr_torch_alloc(0, 0, nullptr));
  EXPECT_EQ(nullptr, gmr_torch_mempool_alloc(0, 0, nullptr));
  gmr_torch_free(nullptr, 0, 0, nullptr);
  gmr_torch_mempool_free(nullptr, 0, 0, nullptr);
  EXPECT_EQ(0u, counters().live_count);
}

TEST_F(TorchShimTest, FreesGmrDidNotGiveAreRefusedAndNeverReachCuda) {
  uint64_t refused = counters().refused_free_count;
  uint64_t frees = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE);
  gmr_torch_free(reinterpret_cast<void *>(0x1000), 64, 0, nullptr);
  EXPECT_EQ(refused + 1, counters().refused_free_count);
  EXPECT_TRUE(contains(last_error(), "refused to free 0x1000")) << last_error();
  EXPECT_TRUE(contains(last_error(), "nothing was passed to CUDA")) << last_error();
  // Wrong size, wrong device, wrong mode: refused, the allocation stays live.
  void *p = gmr_torch_alloc(512, 0, nullptr);
  gmr_torch_free(p, 1024, 0, nullptr);
  EXPECT_TRUE(contains(last_error(), "allocated as 512 bytes on device 0")) << last_error();
  gmr_torch_free(p, 512, 1, nullptr);
  gmr_torch_mempool_free(p, 512, 0, nullptr);
  EXPECT_TRUE(contains(last_error(), "other mode")) << last_error();
  EXPECT_EQ(refused + 4, counters().refused_free_count);
  EXPECT_EQ(frees, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  EXPECT_EQ(512u, used(0));
  gmr_torch_free(p, 512, 0, nullptr);
  EXPECT_EQ(frees + 1, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  // A double free is an unknown pointer by then.
  gmr_torch_free(p, 512, 0, nullptr);
  EXPECT_EQ(refused + 5, counters().refused_free_count);
  EXPECT_EQ(frees + 1, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
}

TEST_F(TorchShimTest, MalformedGmrStackFailsTheFirstAllocationWithTheSpecError) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec(nullptr, nullptr));
  setenv("GMR_STACK", "pool > cuda(kidn=async)", 1);
  try {
    (void)gmr_torch_alloc(4096, 0, nullptr);
    FAIL() << "no exception";
  } catch (const std::runtime_error &e) {
    EXPECT_TRUE(contains(e.what(), "cannot create the memory resource of device 0")) << e.what();
    EXPECT_TRUE(contains(e.what(), "GMR_STACK:1:")) << e.what();
    EXPECT_TRUE(contains(e.what(), "kidn")) << e.what();
  }
  EXPECT_EQ(nullptr, gmr_torch_mempool_alloc(4096, 0, nullptr));
  EXPECT_TRUE(contains(last_error(), "GMR_STACK:1:")) << last_error();
  EXPECT_EQ(0u, used(0));
}

TEST_F(TorchShimTest, OutOfMemoryAndRefusedLimitsCarryGmrsMessage) {
  use_spec("limiting(limit=1MiB) > cuda(kind=device)");
  uint64_t failed = counters().failed_allocation_count;
  try {
    (void)gmr_torch_alloc(2 << 20, 0, nullptr);
    FAIL() << "no exception";
  } catch (const std::runtime_error &e) {
    EXPECT_TRUE(contains(e.what(), "memory limit reached (GMR_ERR_LIMIT_EXCEEDED)")) << e.what();
    EXPECT_TRUE(contains(e.what(), "2097152 bytes (2.00 MiB) on device 0")) << e.what();
    EXPECT_TRUE(contains(e.what(), "stack: limiting(limit=1MiB) > cuda(kind=device)"))
        << e.what();
  }
  use_spec("cuda(kind=device)");
  try {
    (void)gmr_torch_alloc(2 * kDeviceBytes, 1, nullptr);
    FAIL() << "no exception";
  } catch (const std::runtime_error &e) {
    EXPECT_TRUE(contains(e.what(), "out of memory (GMR_ERR_OUT_OF_MEMORY)")) << e.what();
    EXPECT_TRUE(contains(e.what(), "cudaMalloc")) << e.what();
  }
  EXPECT_EQ(nullptr, gmr_torch_mempool_alloc(2 * kDeviceBytes, 1, nullptr));
  EXPECT_TRUE(contains(last_error(), "out of memory")) << last_error();
  EXPECT_EQ(failed + 3, counters().failed_allocation_count);
  EXPECT_EQ(0u, counters().live_count);
  EXPECT_EQ(0, current_device());
}

TEST_F(TorchShimTest, MempoolModeAllocatesAndFreesSegments) {
  void *p = gmr_torch_mempool_alloc(20 << 20, 1, nullptr);
  ASSERT_NE(nullptr, p);
  EXPECT_EQ(size_t{20} << 20, used(1));
  gmr_torch_mempool_free(p, 20 << 20, 1, nullptr);
  EXPECT_EQ(0u, used(1));
}

// A resource without a record_stream slot: the shim keeps the stream and
// makes the allocation's stream wait for it at the free.
TEST_F(TorchShimTest, RecordStreamTheStackCannotHonourMakesTheFreeWait) {
  gmr_mock_resource *mock = gmr_mock_resource_create(nullptr);
  ASSERT_NE(nullptr, mock);
  ASSERT_EQ(GMR_OK, gmr_device_resource_set(0, gmr_mock_resource_as_resource(mock), nullptr));
  gmr_stream alloc_stream = nullptr;
  gmr_stream side = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&alloc_stream));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&side));
  gmr_torch_counters before = counters();
  void *p = gmr_torch_alloc(4096, 0, alloc_stream);
  ASSERT_NE(nullptr, p);
  gmr_torch_record_stream(p, side);
  gmr_torch_record_stream(p, side);          // once is enough
  gmr_torch_record_stream(p, alloc_stream);  // its own stream: nothing to do
  gmr_torch_counters after = counters();
  EXPECT_EQ(before.record_stream_count + 3, after.record_stream_count);
  EXPECT_EQ(before.record_stream_fallback_count + 1, after.record_stream_fallback_count);
  uint64_t waits = gmr_cuda_sim_get_stream_wait_count(alloc_stream);
  gmr_torch_free(p, 4096, 0, alloc_stream);
  EXPECT_EQ(waits + 1, gmr_cuda_sim_get_stream_wait_count(alloc_stream));
  EXPECT_EQ(0u, gmr_mock_resource_live_bytes(mock));
  // An unknown pointer: logged, nothing recorded.
  gmr_torch_record_stream(reinterpret_cast<void *>(0x2000), side);
  EXPECT_TRUE(contains(last_error(), "record_stream(0x2000")) << last_error();
  EXPECT_EQ(after.record_stream_count, counters().record_stream_count);
  ASSERT_EQ(GMR_OK, gmr_device_resource_set(0, nullptr, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock)));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(alloc_stream));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(side));
}

// A resource that honours record_stream gets the call and no wait is added.
struct StreamRecorder {
  gmr_resource base;
  void *recorded_ptr = nullptr;
  gmr_stream recorded_stream = nullptr;
  alignas(256) char storage[4096];
};

gmr_status recorder_allocate(gmr_resource *self, size_t, size_t, gmr_stream, void **out,
                             gmr_failure *) {
  *out = reinterpret_cast<StreamRecorder *>(self)->storage;
  return GMR_OK;
}
gmr_status recorder_deallocate(gmr_resource *, void *, size_t, size_t, gmr_stream) {
  return GMR_OK;
}
gmr_status recorder_destroy(gmr_resource *) { return GMR_OK; }
gmr_status recorder_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  auto *r = reinterpret_cast<StreamRecorder *>(self);
  r->recorded_ptr = ptr;
  r->recorded_stream = stream;
  return GMR_OK;
}
const gmr_resource_vtbl recorder_vtbl = {
    GMR_RESOURCE_VTBL_VERSION, "stream_recorder", recorder_allocate, recorder_deallocate,
    recorder_destroy, nullptr, nullptr, nullptr, nullptr, recorder_record_stream, nullptr, nullptr};

TEST_F(TorchShimTest, RecordStreamTheStackHonoursIsPassedOn) {
  StreamRecorder recorder;
  recorder.base.vtbl = &recorder_vtbl;
  ASSERT_EQ(GMR_OK, gmr_device_resource_set(1, &recorder.base, nullptr));
  gmr_stream side = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&side));
  uint64_t fallbacks = counters().record_stream_fallback_count;
  void *p = gmr_torch_alloc(1024, 1, nullptr);
  gmr_torch_record_stream(p, side);
  EXPECT_EQ(p, recorder.recorded_ptr);
  EXPECT_EQ(side, recorder.recorded_stream);
  EXPECT_EQ(fallbacks, counters().record_stream_fallback_count);
  uint64_t waits = gmr_cuda_sim_get_stream_wait_count(side);
  gmr_torch_free(p, 1024, 1, nullptr);
  EXPECT_EQ(waits, gmr_cuda_sim_get_stream_wait_count(side));
  ASSERT_EQ(GMR_OK, gmr_device_resource_set(1, nullptr, nullptr));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(side));
}

TEST_F(TorchShimTest, EmptyCacheTrimsTheStacksOfTheDevicesUsed) {
  use_spec("pool > cuda(kind=device)");
  void *a = gmr_torch_alloc(4 << 20, 0, nullptr);
  void *b = gmr_torch_alloc(4 << 20, 1, nullptr);
  gmr_torch_free(a, 4 << 20, 0, nullptr);
  gmr_torch_free(b, 4 << 20, 1, nullptr);
  EXPECT_GT(used(0), 0u);
  EXPECT_GT(used(1), 0u);
  gmr_torch_reset();
  EXPECT_EQ(0u, used(0));
  EXPECT_EQ(0u, used(1));
  EXPECT_EQ(0, current_device());
}

TEST_F(TorchShimTest, MemoryFractionSetsTheLimitOfTheLimitingLayer) {
  use_spec("tracking > limiting > cuda(kind=device)");
  gmr_torch_set_memory_fraction(0.25, 1);
  gmr_resource *r = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &r, nullptr));
  gmr_limiting_adaptor *limiting = nullptr;
  for (gmr_resource *x = r; x != nullptr && limiting == nullptr; x = gmr_resource_get_upstream(x)) {
    limiting = gmr_limiting_adaptor_from_resource(x);
  }
  ASSERT_NE(nullptr, limiting);
  EXPECT_EQ(kDeviceBytes / 4, gmr_limiting_adaptor_get_limit(limiting));
  EXPECT_THROW((void)gmr_torch_alloc(kDeviceBytes / 2, 1, nullptr), std::runtime_error);
  void *p = gmr_torch_alloc(kDeviceBytes / 8, 1, nullptr);
  gmr_torch_free(p, kDeviceBytes / 8, 1, nullptr);
  EXPECT_THROW(gmr_torch_set_memory_fraction(1.5, 1), std::runtime_error);
  EXPECT_EQ(kDeviceBytes / 4, gmr_limiting_adaptor_get_limit(limiting));
  use_spec("cuda(kind=device)");
  try {
    gmr_torch_set_memory_fraction(0.5, 0);
    FAIL() << "no exception";
  } catch (const std::runtime_error &e) {
    EXPECT_TRUE(contains(e.what(), "has no limiting layer")) << e.what();
  }
}

// torch.cuda.graph's hooks, called in PyTorch's order around a capture.
TEST_F(TorchShimTest, MempoolSegmentDuringCaptureNeverBreaksTheCapture) {
  use_spec("cuda(kind=device)");
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  void *warm = gmr_torch_mempool_alloc(2 << 20, 0, s);
  gmr_torch_mempool_free(warm, 2 << 20, 0, s);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = gmr_torch_mempool_alloc(2 << 20, 0, s);
  gmr_graph graph = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph)) << "the capture was broken";
  if (p == nullptr) {
    EXPECT_TRUE(contains(last_error(), "GMR_ERR_CAPTURE_UNSAFE")) << last_error();
  } else {
    gmr_torch_mempool_free(p, 2 << 20, 0, s);
  }
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// At exit the registry destroys the stacks; a free PyTorch makes later (its
// static destructors) must not reach them. Run in a child process whose own
// atexit handler, registered first, runs last and frees then.
void *late_ptr = nullptr;

void late_free_after_exit() {
  gmr_torch_free(late_ptr, 4096, 0, nullptr);
  bool dropped = counters().live_count == 1;
  fprintf(stderr, dropped ? "late free dropped\n" : "late free NOT dropped\n");
  fflush(stderr);
  _exit(dropped ? 0 : 3);
}

void allocate_then_exit() {
  atexit(late_free_after_exit);
  late_ptr = gmr_torch_alloc(4096, 0, nullptr);
  exit(0);
}

TEST_F(TorchShimTest, FreesAfterExitBeganAreDropped) {
  use_spec("cuda(kind=async)");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(allocate_then_exit(), ::testing::ExitedWithCode(0), "late free dropped");
}

TEST_F(TorchShimTest, ThreadsAllocateAndFreeOnBothDevices) {
  use_spec("tracking > pool > cuda(kind=device)");
  constexpr int kThreads = 8;
  constexpr int kRounds = 300;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<void *, size_t>> mine;
      int device = t % 2;
      for (int i = 0; i < kRounds; ++i) {
        size_t bytes = 512u * (1 + (i * 7 + t) % 13);
        try {
          void *p = gmr_torch_alloc(bytes, device, nullptr);
          if (p == nullptr) failures++;
          mine.emplace_back(p, bytes);
        } catch (...) {
          failures++;
        }
        if (i % 3 == 2) {
          for (auto &m : mine) gmr_torch_free(m.first, m.second, device, nullptr);
          mine.clear();
        }
      }
      for (auto &m : mine) gmr_torch_free(m.first, m.second, device, nullptr);
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0u, counters().live_count);
  EXPECT_EQ(0u, counters().live_bytes);
  gmr_torch_reset();
  EXPECT_EQ(0u, used(0));
  EXPECT_EQ(0u, used(1));
}

}  // namespace
