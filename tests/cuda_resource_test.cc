// cuda_resource on the host simulation: every kind, every error mapping, the
// device it belongs to, and capture safety.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "tests/support/sim_fixture.h"

namespace {

using gmr_test::SimTest;

gmr_cuda_resource *make(gmr_cuda_kind kind, int device = GMR_CURRENT_DEVICE) {
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = kind;
  c.device = device;
  gmr_cuda_resource *r = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &r));
  return r;
}

gmr_cuda_call alloc_call(gmr_cuda_kind kind) {
  switch (kind) {
    case GMR_CUDA_KIND_ASYNC:
      return GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC;
    case GMR_CUDA_KIND_MANAGED:
      return GMR_CUDA_CALL_MALLOC_MANAGED;
    case GMR_CUDA_KIND_PINNED:
      return GMR_CUDA_CALL_HOST_ALLOC;
    default:
      return GMR_CUDA_CALL_MALLOC;
  }
}

gmr_cuda_call free_call(gmr_cuda_kind kind) {
  switch (kind) {
    case GMR_CUDA_KIND_ASYNC:
      return GMR_CUDA_CALL_FREE_ASYNC;
    case GMR_CUDA_KIND_PINNED:
      return GMR_CUDA_CALL_FREE_HOST;
    default:
      return GMR_CUDA_CALL_FREE;
  }
}

class CudaResourceKind : public SimTest, public ::testing::WithParamInterface<gmr_cuda_kind> {};

TEST_P(CudaResourceKind, AllocatesUsableAlignedMemoryThroughItsCudaCall) {
  gmr_cuda_resource *cr = make(GetParam());
  ASSERT_NE(nullptr, cr);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  EXPECT_STREQ("cuda_resource", gmr_resource_get_type_name(r));
  EXPECT_EQ(cr, gmr_cuda_resource_from_resource(r));
  EXPECT_EQ(GetParam(), gmr_cuda_resource_get_kind(cr));

  std::vector<std::pair<void *, size_t>> blocks;
  for (size_t bytes : {size_t{1}, size_t{255}, size_t{4096}, size_t{1} << 20}) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, nullptr, &p));
    ASSERT_NE(nullptr, p);
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % 256);
    std::memset(p, 0xab, bytes);  // host-backed in the simulation
    blocks.emplace_back(p, bytes);
  }
  EXPECT_EQ(4u, gmr_cuda_sim_get_call_count(alloc_call(GetParam())));
  EXPECT_EQ(4u, gmr_cuda_resource_get_live_count(cr));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_GE(fp.held_bytes, size_t{1 + 255 + 4096 + (1 << 20)});
  EXPECT_GE(fp.peak_held_bytes, fp.held_bytes);

  for (auto &b : blocks)
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b.first, b.second, 0, nullptr));
  EXPECT_EQ(4u, gmr_cuda_sim_get_call_count(free_call(GetParam())));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(CudaResourceKind, OutOfMemoryKeepsTheCudaError) {
  gmr_cuda_resource *cr = make(GetParam());
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(alloc_call(GetParam()), 1, 1,
                                                cudaErrorMemoryAllocation));
  void *a = nullptr, *b = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(r, 1000, 0, nullptr, &a, &f));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 2000, 0, nullptr, &b, &f));
  EXPECT_EQ(nullptr, b);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, f.status);
  EXPECT_EQ(int{cudaErrorMemoryAllocation}, f.cuda_error);
  EXPECT_EQ(r, f.where);
  EXPECT_EQ(2000u, f.bytes);
  EXPECT_NE(nullptr, std::strstr(f.message, "cudaErrorMemoryAllocation")) << f.message;
  EXPECT_EQ(1u, gmr_cuda_resource_get_live_count(cr));  // the failure counted nothing
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(CudaResourceKind, OtherCudaErrorsAreCudaErrorWithTheCode) {
  gmr_cuda_resource *cr = make(GetParam());
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(alloc_call(GetParam()), 0, 1, cudaErrorLaunchFailure));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_ex(r, 64, 0, nullptr, &p, &f));
  EXPECT_EQ(int{cudaErrorLaunchFailure}, f.cuda_error);
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(CudaResourceKind, FailedFreeReleasesNothingAndCanBeRetried) {
  gmr_cuda_resource *cr = make(GetParam());
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 64, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(free_call(GetParam()), 0, 1, cudaErrorUnknown));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_deallocate(r, p, 64, 0, nullptr));
  EXPECT_EQ(1u, gmr_cuda_resource_get_live_count(cr));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(CudaResourceKind, AlignmentAbove256IsUnsupported) {
  gmr_cuda_resource *cr = make(GetParam());
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_allocate_ex(r, 64, 512, nullptr, &p, &f));
  EXPECT_STRNE("", f.message);
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(alloc_call(GetParam())));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 64, 128, nullptr, &p));  // below 256 is fine
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64, 128, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(CudaResourceKind, ConcurrentThreadsKeepCountsExact) {
  gmr_cuda_resource *cr = make(GetParam());
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        void *p = nullptr;
        size_t bytes = 256 * (1 + (i + t) % 7);
        if (gmr_resource_allocate(r, bytes, 0, nullptr, &p) != GMR_OK) failures++;
        if (gmr_resource_deallocate(r, p, bytes, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cr));
  EXPECT_EQ(800u, gmr_cuda_sim_get_call_count(alloc_call(GetParam())));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// Issue 9: the leaf keeps exact books and refuses bad frees before CUDA sees them.
TEST_P(CudaResourceKind, BadFreesAreRefusedWithTheVocabularyAndReachNoCuda) {
  gmr_cuda_resource *cr = make(GetParam());
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 3000, 128, nullptr, &q));
  std::memset(p, 0x5a, 1000);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 999, 0, nullptr));  // size
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH,
            gmr_resource_deallocate(r, p, 4096, 0, nullptr));  // size, larger
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, q, 3000, 0, nullptr));  // alignment
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, &local, 64, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, static_cast<char *>(p) + 256, 256,
                                                             0, nullptr));  // inside a block
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(free_call(GetParam())));
  // Nothing changed: the bytes are intact and both blocks still count.
  EXPECT_EQ(0x5a, static_cast<unsigned char *>(p)[999]);
  EXPECT_EQ(2u, gmr_cuda_resource_get_live_count(cr));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  if (GetParam() != GMR_CUDA_KIND_ASYNC) {
    EXPECT_EQ(4000u, fp.held_bytes);
  }
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 3000, 128, nullptr));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(free_call(GetParam())));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_P(CudaResourceKind, ThreadsWithBadFreesKeepTheBooksExact) {
  gmr_cuda_resource *cr = make(GetParam());
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<void *, size_t>> mine;
      for (int i = 0; i < 150; ++i) {
        size_t bytes = 256 * (1 + (i + t) % 5);
        void *p = nullptr;
        if (gmr_resource_allocate(r, bytes, 0, nullptr, &p) != GMR_OK) failures++;
        mine.emplace_back(p, bytes);
        if (i % 3 == 0) {
          auto b = mine.back();
          mine.pop_back();
          if (gmr_resource_deallocate(r, b.first, b.second + 1, 0, nullptr) !=
              GMR_ERR_FREE_MISMATCH)
            failures++;
          if (gmr_resource_deallocate(r, b.first, b.second, 0, nullptr) != GMR_OK) failures++;
          if (gmr_resource_deallocate(r, b.first, b.second, 0, nullptr) == GMR_OK) failures++;
        }
      }
      for (auto &b : mine) {
        if (gmr_resource_deallocate(r, b.first, b.second, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cr));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  if (GetParam() != GMR_CUDA_KIND_ASYNC) {
    EXPECT_EQ(0u, fp.held_bytes);
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

INSTANTIATE_TEST_SUITE_P(AllKinds, CudaResourceKind,
                         ::testing::Values(GMR_CUDA_KIND_DEVICE, GMR_CUDA_KIND_ASYNC,
                                           GMR_CUDA_KIND_MANAGED, GMR_CUDA_KIND_PINNED),
                         [](const ::testing::TestParamInfo<gmr_cuda_kind> &info) {
                           return std::string(gmr_cuda_kind_name(info.param));
                         });

using CudaResource = SimTest;

TEST_F(CudaResource, CreateChecksArguments) {
  gmr_cuda_resource *r = reinterpret_cast<gmr_cuda_resource *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_resource_create(nullptr, nullptr));
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.device = 1;  // only device 0 exists
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_resource_create(&c, &r));
  EXPECT_EQ(nullptr, r);
  c.device = -7;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_resource_create(&c, &r));
  c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = static_cast<gmr_cuda_kind>(9);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_resource_create(&c, &r));
  // NULL config means the default: device kind on the current device.
  ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(nullptr, &r));
  EXPECT_EQ(GMR_CUDA_KIND_DEVICE, gmr_cuda_resource_get_kind(r));
  EXPECT_EQ(0, gmr_cuda_resource_get_device(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cuda_resource_as_resource(r)));
}

TEST_F(CudaResource, CreateNamesTheDeviceAskedAndTheDeviceCount) {
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.device = 99;
  gmr_cuda_resource *r = reinterpret_cast<gmr_cuda_resource *>(0x1);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_resource_create_ex(&c, &r, &f));
  EXPECT_EQ(nullptr, r);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, f.status);
  EXPECT_NE(nullptr, std::strstr(f.message, "device 99")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "1 device")) << f.message;
  c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = static_cast<gmr_cuda_kind>(9);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_resource_create_ex(&c, &r, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "kind 9")) << f.message;
  // A CUDA failure keeps its error code and names the call.
  c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_GET_DEVICE_COUNT, 0, 1,
                                                cudaErrorNoDevice));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_resource_create_ex(&c, &r, &f));
  EXPECT_EQ(int{cudaErrorNoDevice}, f.cuda_error);
  EXPECT_NE(nullptr, std::strstr(f.message, "cudaGetDeviceCount")) << f.message;
  // NULL failure is allowed, and success leaves a usable resource.
  ASSERT_EQ(GMR_OK, gmr_cuda_resource_create_ex(&c, &r, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cuda_resource_as_resource(r)));
}

TEST_F(CudaResource, CreateFailuresLeaveNothingBehind) {
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = GMR_CUDA_KIND_ASYNC;
  gmr_cuda_resource *r = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_POOL_CREATE, 0, 1,
                                                cudaErrorMemoryAllocation));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_cuda_resource_create(&c, &r));
  EXPECT_EQ(nullptr, r);
  // The pool is created but setting its threshold fails: the pool is destroyed.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_POOL_SET_ATTRIBUTE, 0, 1,
                                                cudaErrorInvalidValue));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_resource_create(&c, &r));
  EXPECT_EQ(nullptr, r);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_POOL_DESTROY));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_GET_DEVICE_COUNT, 0, 1,
                                                cudaErrorNoDevice));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_resource_create(&c, &r));
  EXPECT_EQ(nullptr, r);
}  // the fixture checks that no simulated pool leaked

TEST_F(CudaResource, AsyncTrimGivesCachedMemoryBackAndFootprintIsThePoolReserve) {
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_ASYNC);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 3 << 20, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1 << 20, 0, nullptr, &q));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 3 << 20, 0, nullptr));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(size_t{4} << 20, fp.held_bytes);  // the pool keeps the freed 3 MiB
  EXPECT_EQ(size_t{4} << 20, fp.peak_held_bytes);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(size_t{3} << 20, released);
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(size_t{1} << 20, fp.held_bytes);
  EXPECT_EQ(size_t{4} << 20, fp.peak_held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 1 << 20, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(CudaResource, DeviceKindFootprintCountsRequestedBytes) {
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_DEVICE);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 3000, 0, nullptr, &q));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(3000u, fp.held_bytes);
  EXPECT_EQ(4000u, fp.peak_held_bytes);
  size_t released = 99;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, released);  // nothing cached
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 3000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(CudaResource, CaptureUnsafeKindsRefuseOnACapturingStreamAndKeepTheCapture) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  gmr_cuda_resource *dev = make(GMR_CUDA_KIND_DEVICE);
  gmr_cuda_resource *async = make(GMR_CUDA_KIND_ASYNC);
  gmr_resource *d = gmr_cuda_resource_as_resource(dev);
  gmr_resource *a = gmr_cuda_resource_as_resource(async);
  void *before = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(d, 512, 0, s, &before));

  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(d, 512, 0, s, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "capturing")) << f.message;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_deallocate(d, before, 512, 0, s));
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  // Stream-ordered pool allocation is legal inside a capture.
  void *g = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_allocate(a, 512, 0, s, &g));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(a, g, 512, 0, s));
  gmr_graph graph = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph));  // the capture survived
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));

  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(d, before, 512, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(d));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// cudaMalloc is a potentially unsafe call: in global mode, while another
// stream captures, it would fail and invalidate that capture. The resource
// makes it in relaxed mode (it enqueues nothing), so a request on another
// stream is served and the capture stays valid (docs/stream_ordering.md).
TEST_F(CudaResource, CaptureOnAnotherStreamIsLeftValid) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  gmr_cuda_resource *dev = make(GMR_CUDA_KIND_DEVICE);
  gmr_resource *d = gmr_cuda_resource_as_resource(dev);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_OK, gmr_resource_allocate_ex(d, 512, 0, nullptr, &p, &f)) << f.message;
  EXPECT_EQ(cudaStreamCaptureModeGlobal, gmr_cuda_sim_get_thread_capture_mode());
  gmr_graph graph = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(d, p, 512, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(d));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(CudaResource, AsyncIsUnsupportedWithoutMemoryPools) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_disable());
  gmr_cuda_sim_config c = GMR_CUDA_SIM_CONFIG_DEFAULT;
  c.memory_pools_supported = false;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_enable(&c));
  gmr_cuda_resource_config rc = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  rc.kind = GMR_CUDA_KIND_ASYNC;
  gmr_cuda_resource *r = nullptr;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_cuda_resource_create(&rc, &r));
  EXPECT_EQ(nullptr, r);
}

TEST_F(CudaResource, KindNamesRoundTrip) {
  for (int k = GMR_CUDA_KIND_DEVICE; k <= GMR_CUDA_KIND_PINNED; ++k) {
    gmr_cuda_kind back = GMR_CUDA_KIND_DEVICE;
    ASSERT_EQ(GMR_OK, gmr_cuda_kind_from_name(gmr_cuda_kind_name(static_cast<gmr_cuda_kind>(k)),
                                              &back));
    EXPECT_EQ(k, back);
  }
  gmr_cuda_kind out = GMR_CUDA_KIND_MANAGED;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_kind_from_name("asink", &out));
  EXPECT_EQ(GMR_CUDA_KIND_MANAGED, out);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_kind_from_name(nullptr, &out));
  EXPECT_STREQ("unknown", gmr_cuda_kind_name(static_cast<gmr_cuda_kind>(42)));
}

// Issue 11 §1: allocate_capturing. The simulation refuses cudaMalloc-class
// calls during a global-mode capture unless the calling thread is relaxed.
class CudaCaptureKind : public SimTest, public ::testing::WithParamInterface<gmr_cuda_kind> {};

TEST_P(CudaCaptureKind, AllocatesDuringACaptureAndLeavesItValidAndTheThreadModeAsItWas) {
  gmr_cuda_resource *cr = make(GetParam());
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  // The plain path refuses (it would break the capture) ...
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(r, 4096, 0, s, &p, &f));
  // ... the capturing path allocates in relaxed mode.
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 4096, 0, s, &p, &f)) << f.message;
  ASSERT_NE(nullptr, p);
  std::memset(p, 1, 4096);
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());  // back to global
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(alloc_call(GetParam())));
  // A failing CUDA allocation restores the mode too, and breaks nothing.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(alloc_call(GetParam()), 0, 1,
                                                cudaErrorMemoryAllocation));
  void *q = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_capturing(r, 4096, 0, s, &q, &f));
  EXPECT_EQ(nullptr, q);
  EXPECT_EQ(r, f.where);
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  // A failing mode switch: nothing allocated, the mode untouched.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_THREAD_EXCHANGE_CAPTURE_MODE, 0, 1,
                                                cudaErrorUnknown));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_capturing(r, 4096, 0, s, &q, &f));
  EXPECT_EQ(int{cudaErrorUnknown}, f.cuda_error);
  EXPECT_NE(nullptr, std::strstr(f.message, "cudaThreadExchangeStreamCaptureMode")) << f.message;
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(1u, gmr_cuda_resource_get_live_count(cr));
  // Alignment is checked as for allocate.
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_allocate_capturing(r, 64, 512, s, &q, &f));

  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph));  // the capture stayed valid
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4096, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_P(CudaCaptureKind, WorksWithoutACaptureToo) {
  gmr_cuda_resource *cr = make(GetParam());
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 100, 0, nullptr, &p, nullptr));
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

INSTANTIATE_TEST_SUITE_P(CaptureCapableKinds, CudaCaptureKind,
                         ::testing::Values(GMR_CUDA_KIND_DEVICE, GMR_CUDA_KIND_MANAGED,
                                           GMR_CUDA_KIND_PINNED),
                         [](const ::testing::TestParamInfo<gmr_cuda_kind> &info) {
                           return std::string(gmr_cuda_kind_name(info.param));
                         });

// async during a capture: the block comes from the pool on the resource's own
// stream, synchronised, so the graph gets no memory node and keeps the address
// (MemPool mode: PyTorch asks for a segment while capturing).
TEST_F(CudaResource, AsyncAllocatesForACaptureOnItsOwnStreamAndAddsNoNodeToTheGraph) {
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_ASYNC);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  size_t streams_before = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_CREATE);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 4096, 0, s, &p, &f)) << f.message;
  ASSERT_NE(nullptr, p);
  std::memset(p, 1, 4096);
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_SYNCHRONIZE));
  EXPECT_EQ(streams_before + 1, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_CREATE));
  // A second one reuses the stream.
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 8192, 0, s, &q, &f)) << f.message;
  EXPECT_EQ(streams_before + 1, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_CREATE));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 8192, 0, s));
  // A failed synchronise gives the block back: nothing live, the mode restored.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_SYNCHRONIZE, 0, 1,
                                                cudaErrorLaunchFailure));
  q = nullptr;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_capturing(r, 4096, 0, s, &q, &f));
  EXPECT_EQ(nullptr, q);
  EXPECT_NE(nullptr, std::strstr(f.message, "cudaStreamSynchronize")) << f.message;
  EXPECT_EQ(1u, gmr_cuda_resource_get_live_count(cr));
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  // A failed allocation: out of memory, nothing live.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC, 0, 1,
                                                cudaErrorMemoryAllocation));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_capturing(r, 4096, 0, s, &q, &f));
  EXPECT_EQ(1u, gmr_cuda_resource_get_live_count(cr));
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &graph));  // the capture stayed valid
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4096, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(CudaResource, AsyncCaptureStreamThatCannotBeCreatedChangesNothing) {
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_ASYNC);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_CREATE, 0, 1,
                                                cudaErrorMemoryAllocation));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_NE(GMR_OK, gmr_resource_allocate_capturing(r, 4096, 0, nullptr, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "cudaStreamCreate")) << f.message;
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cr));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 4096, 0, nullptr, &p, &f)) << f.message;
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4096, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// Issue 12 §3: record_stream.
TEST_F(CudaResource, AsyncFreeWaitsForEveryRecordedStream) {
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_ASYNC);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  gmr_stream a = nullptr, b = nullptr, c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&c));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4096, 0, a, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(r, p, b));
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(r, p, c));
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(r, p, b));  // once per stream is enough
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(r, p, a));  // the freeing stream needs no wait
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_record_stream(r, &local, b));
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD));  // nothing until the free
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4096, 0, a));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD));
  EXPECT_EQ(2u, gmr_cuda_sim_get_stream_wait_count(a));  // a waits for b and for c
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(b));
  // Events come from a cache: the second wait reused the first event.
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_CREATE));
  // A freed pointer can no longer be recorded.
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_record_stream(r, p, b));
  // Without recorded streams a free makes no event call.
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4096, 0, a, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4096, 0, a));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));  // destroys the cached event
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(c));
}

TEST_F(CudaResource, AFailedWaitForARecordedStreamReleasesNothing) {
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_ASYNC);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  gmr_stream a = nullptr, b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4096, 0, a, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r, p, b));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_EVENT_RECORD, 0, 1, cudaErrorUnknown));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_deallocate(r, p, 4096, 0, a));
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE_ASYNC));
  EXPECT_EQ(1u, gmr_cuda_resource_get_live_count(cr));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_WAIT_EVENT, 0, 1,
                                                cudaErrorUnknown));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_deallocate(r, p, 4096, 0, a));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_EVENT_CREATE, 0, 1,
                                                cudaErrorMemoryAllocation));
  // The event cache holds one event now, so creation is not needed: free works,
  // and the recorded stream is still waited for.
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4096, 0, a));
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(a));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cr));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b));
}

TEST_F(CudaResource, SynchronousKindsHonourRecordStreamWithoutEvents) {
  for (gmr_cuda_kind kind : {GMR_CUDA_KIND_DEVICE, GMR_CUDA_KIND_MANAGED, GMR_CUDA_KIND_PINNED}) {
    gmr_cuda_resource *cr = make(kind);
    gmr_resource *r = gmr_cuda_resource_as_resource(cr);
    gmr_stream b = nullptr;
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b));
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4096, 0, nullptr, &p));
    EXPECT_EQ(GMR_OK, gmr_resource_record_stream(r, p, b));
    int local = 0;
    EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_record_stream(r, &local, b));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4096, 0, nullptr));
    EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b));
  }
}

// Issue 14 §3: the leaves answer get_memory_info where they can without CUDA.
TEST_F(CudaResource, MemoryInfoIsHeldEqualsLiveExceptForAsync) {
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_DEVICE);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 3000, 0, nullptr, &q));
  gmr_memory_info mi = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &mi));
  EXPECT_EQ(4000u, mi.held_bytes);
  EXPECT_EQ(4000u, mi.live_bytes);
  EXPECT_EQ(0u, mi.free_bytes);
  EXPECT_EQ(0u, mi.largest_free_block_bytes);
  EXPECT_EQ(0u, mi.free_block_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 3000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));

  gmr_cuda_resource *ar = make(GMR_CUDA_KIND_ASYNC);
  uint64_t calls = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_POOL_GET_ATTRIBUTE);
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_get_memory_info(gmr_cuda_resource_as_resource(ar), &mi));
  EXPECT_EQ(calls, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_POOL_GET_ATTRIBUTE));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cuda_resource_as_resource(ar)));
}

class CudaResourceTwoDevices : public SimTest {
 protected:
  CudaResourceTwoDevices() { sim_config_.device_count = 2; }
};

TEST_F(CudaResourceTwoDevices, AllocatesOnItsOwnDeviceAndRestoresTheCallers) {
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_DEVICE);  // created for device 1
  ASSERT_EQ(1, gmr_cuda_resource_get_device(cr));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);

  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1 << 20, 0, nullptr, &p));
  gmr_cuda_sim_usage u0, u1;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u0));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(1, &u1));
  EXPECT_EQ(0u, u0.used_bytes);
  EXPECT_EQ(size_t{1} << 20, u1.used_bytes);
  int current = -1;
  ASSERT_EQ(GMR_OK, gmr_device_get_current(&current));
  EXPECT_EQ(0, current);  // the caller's device is back

  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1 << 20, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_device_get_current(&current));
  EXPECT_EQ(0, current);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(1, &u1));
  EXPECT_EQ(0u, u1.used_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(CudaResourceTwoDevices, AsyncPoolLivesOnTheRequestedDevice) {
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_ASYNC, 1);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1 << 20, 0, nullptr, &p));
  gmr_cuda_sim_usage u1;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(1, &u1));
  EXPECT_EQ(size_t{1} << 20, u1.used_bytes);
  int current = -1;
  ASSERT_EQ(GMR_OK, gmr_device_get_current(&current));
  EXPECT_EQ(0, current);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1 << 20, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(CudaResourceTwoDevices, FailingDeviceSwitchIsReportedAndChangesNothing) {
  gmr_cuda_resource *cr = make(GMR_CUDA_KIND_DEVICE, 1);
  gmr_resource *r = gmr_cuda_resource_as_resource(cr);
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_SET_DEVICE, 0, 1, cudaErrorDevicesUnavailable));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_ex(r, 64, 0, nullptr, &p, &f));
  EXPECT_EQ(int{cudaErrorDevicesUnavailable}, f.cuda_error);
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(0u, gmr_cuda_resource_get_live_count(cr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST(CudaResourceNoGpu, CreateWithoutGpuOrSimulationIsACudaError) {
  int count = -1;
  ASSERT_EQ(GMR_OK, gmr_device_get_count(&count));
  if (count > 0) GTEST_SKIP() << "a CUDA device is present; this test is for machines without one";
  gmr_cuda_resource *r = nullptr;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_cuda_resource_create(nullptr, &r));
  EXPECT_EQ(nullptr, r);
}

}  // namespace
