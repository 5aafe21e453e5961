// NCCL on gmr memory on two real GPUs (issue 15): one process drives both
// (ncclCommInitAll); an int32 sum all-reduce on buffers from registered gmr
// pools gives the sum at every element, also after a trim gave chunks back
// (deregistered first) and new ones came (registered); vmm_pages memory
// registered per page; symmetric buffers at the same offsets on both GPUs;
// bad input against the real library. NCCL comes from libnccl.so.2
// (GMR_TEST_NCCL_LIBRARY names another file). Skips, saying why, with fewer
// than two GPUs or without NCCL. NVLink multicast stays off
// (NCCL_NVLS_ENABLE=0 before NCCL starts).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gmr/nccl/chunk_listener_adaptor.h"
#include "gmr/nccl/nccl.h"
#include "gmr/resource.h"
#include "gmr/stack.h"
#include "gmr/nccl/symmetric_resource.h"
#include "tests/support/gpu_fixture.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

int32_t Pattern(size_t i, int rank) {
  uint64_t x = uint64_t(i) * 0x9e3779b97f4a7c15u + uint64_t(rank + 1) * 0xbf58476d1ce4e5b9u;
  x ^= x >> 31;
  return int32_t(x & 0x3fffffff);
}

class NcclGpu : public gmr_test::GpuTest {
 protected:
  gmr_nccl_library *lib_ = nullptr;
  gmr_nccl_comm *comms_[2] = {nullptr, nullptr};
  cudaStream_t streams_[2] = {nullptr, nullptr};
  std::vector<gmr_stack *> stacks_;

  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (device_count_ < 2) {
      GTEST_SKIP() << "needs two GPUs (nvidia-h200-x2); this machine has " << device_count_;
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1);  // before NCCL reads its environment
    gmr_failure f = GMR_FAILURE_INIT;
    if (gmr_nccl_library_open(std::getenv("GMR_TEST_NCCL_LIBRARY"), &lib_, &f) != GMR_OK) {
      GTEST_SKIP() << "no NCCL: " << f.message;
    }
    const int devices[2] = {0, 1};
    ASSERT_EQ(GMR_OK, gmr_nccl_comm_init_all(lib_, 2, devices, comms_, &f)) << f.message;
    for (int d = 0; d < 2; ++d) {
      ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
      ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&streams_[d], cudaStreamNonBlocking));
    }
    ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  }
  void TearDown() override {
    for (gmr_stack *s : stacks_) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
    }
    for (int d = 0; d < 2; ++d) {
      if (streams_[d] != nullptr) {
        EXPECT_EQ(cudaSuccess, cudaSetDevice(d));
        EXPECT_EQ(cudaSuccess, cudaStreamDestroy(streams_[d]));
      }
      gmr_failure f = GMR_FAILURE_INIT;
      if (comms_[d] != nullptr) {
        EXPECT_EQ(GMR_OK, gmr_nccl_comm_destroy(comms_[d], &f)) << f.message;
      }
    }
    if (lib_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_nccl_library_close(lib_));
    }
    (void)cudaSetDevice(0);
  }
  // The stack of `spec_format` (%d: the device) on each device.
  void Stacks(const char *spec_format, gmr_resource *out[2]) {
    for (int d = 0; d < 2; ++d) {
      char spec[256];
      std::snprintf(spec, sizeof spec, spec_format, d);
      gmr_stack *s = nullptr;
      gmr_spec_error e;
      ASSERT_EQ(GMR_OK, gmr_stack_create(spec, &s, &e)) << e.message;
      stacks_.push_back(s);
      out[d] = gmr_stack_as_resource(s);
    }
  }
  void *Alloc(int d, gmr_resource *r, size_t bytes) {
    EXPECT_EQ(cudaSuccess, cudaSetDevice(d));
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_ex(r, bytes, 0, streams_[d], &p, &f)) << f.message;
    return p;
  }
  void Free(int d, gmr_resource *r, void *p, size_t bytes) {
    EXPECT_EQ(cudaSuccess, cudaSetDevice(d));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, bytes, 0, streams_[d]));
  }
  // send[d] gets rank d's pattern, recv[d] is poisoned; one all-reduce;
  // every element of both results must be the sum.
  void ExpectAllReduceSums(void *send[2], void *recv[2], size_t count) {
    std::vector<int32_t> host(count);
    for (int d = 0; d < 2; ++d) {
      for (size_t i = 0; i < count; ++i) host[i] = Pattern(i, d);
      ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
      ASSERT_EQ(cudaSuccess, cudaMemcpy(send[d], host.data(), count * 4, cudaMemcpyHostToDevice));
      ASSERT_EQ(cudaSuccess, cudaMemset(recv[d], 0xff, count * 4));
      // cudaMemset is asynchronous, and a pageable cudaMemcpy may return
      // before its DMA lands: the collective's streams do not wait for them.
      ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
    }
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_nccl_group_start(lib_, &f)) << f.message;
    for (int d = 0; d < 2; ++d) {
      ASSERT_EQ(GMR_OK, gmr_nccl_all_reduce(comms_[d], send[d], recv[d], count, GMR_NCCL_INT32,
                                            GMR_NCCL_SUM, streams_[d], &f))
          << f.message;
    }
    ASSERT_EQ(GMR_OK, gmr_nccl_group_end(lib_, &f)) << f.message;
    for (int d = 0; d < 2; ++d) {
      ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
      ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(streams_[d]));
      ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), recv[d], count * 4, cudaMemcpyDeviceToHost));
      size_t wrong = 0, first = count;
      for (size_t i = 0; i < count; ++i) {
        if (host[i] != Pattern(i, 0) + Pattern(i, 1) && wrong++ == 0) first = i;
      }
      EXPECT_EQ(0u, wrong) << "rank " << d << ": first wrong element " << first << " of " << count;
    }
    ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  }
  static gmr_nccl_registration_stats Stats(gmr_nccl_registration *reg) {
    gmr_nccl_registration_stats s = GMR_NCCL_REGISTRATION_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_nccl_registration_get_stats(reg, &s));
    return s;
  }
};

TEST_F(NcclGpu, AnAllReduceOnRegisteredGmrPoolsGivesTheSum) {
  gmr_resource *pool[2];
  Stacks("pool > chunk_listener > cumem(device=%d, nccl_ready=true, peer_access=all)", pool);
  gmr_nccl_registration *reg[2];
  for (int d = 0; d < 2; ++d) {
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[d], pool[d], &reg[d], &f)) << f.message;
  }
  for (size_t count : {size_t{1}, size_t{1000}, 3 * kMiB / 4 + 7, 64 * kMiB / 4}) {
    SCOPED_TRACE(count);
    void *send[2], *recv[2];
    for (int d = 0; d < 2; ++d) {
      send[d] = Alloc(d, pool[d], count * 4);
      recv[d] = Alloc(d, pool[d], count * 4);
      EXPECT_TRUE(gmr_nccl_registration_covers(reg[d], send[d], count * 4));
      EXPECT_TRUE(gmr_nccl_registration_covers(reg[d], recv[d], count * 4));
    }
    ExpectAllReduceSums(send, recv, count);
    for (int d = 0; d < 2; ++d) {
      Free(d, pool[d], send[d], count * 4);
      Free(d, pool[d], recv[d], count * 4);
    }
  }
  // Trim while registered: the chunks are deregistered, then given back.
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(streams_[d]));
    uint64_t before = Stats(reg[d]).deregister_count;
    ASSERT_EQ(GMR_OK, gmr_resource_trim(pool[d], nullptr));
    EXPECT_GT(Stats(reg[d]).deregister_count, before);
    EXPECT_EQ(0u, Stats(reg[d]).chunk_count);
  }
  // New chunks are registered and work.
  void *send[2], *recv[2];
  for (int d = 0; d < 2; ++d) {
    send[d] = Alloc(d, pool[d], 32 * kMiB);
    recv[d] = Alloc(d, pool[d], 32 * kMiB);
  }
  ExpectAllReduceSums(send, recv, 32 * kMiB / 4);
  for (int d = 0; d < 2; ++d) {
    Free(d, pool[d], send[d], 32 * kMiB);
    Free(d, pool[d], recv[d], 32 * kMiB);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(streams_[d]));
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_nccl_deregister(reg[d], &f)) << f.message;
  }
}

TEST_F(NcclGpu, VmmPoolMemoryRegisteredPerPageGivesTheSum) {
  gmr_resource *pool[2];
  Stacks("pool > chunk_listener > vmm_pages(device=%d, nccl_ready=true, peer_access=all)", pool);
  gmr_nccl_registration *reg[2];
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[d], pool[d], &reg[d], nullptr));
  }
  for (size_t bytes : {kMiB, 40 * kMiB}) {  // inside a page; over many pages
    void *send[2], *recv[2];
    for (int d = 0; d < 2; ++d) {
      send[d] = Alloc(d, pool[d], bytes);
      recv[d] = Alloc(d, pool[d], bytes);
    }
    if (bytes > 2 * kMiB) {
      EXPECT_FALSE(gmr_nccl_registration_covers(reg[0], send[0], bytes))
          << "not registered as one segment: NCCL copies instead";
    }
    ExpectAllReduceSums(send, recv, bytes / 4);
    for (int d = 0; d < 2; ++d) {
      Free(d, pool[d], send[d], bytes);
      Free(d, pool[d], recv[d], bytes);
    }
  }
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(streams_[d]));
    EXPECT_EQ(GMR_OK, gmr_resource_trim(pool[d], nullptr));
    EXPECT_EQ(GMR_OK, gmr_nccl_deregister(reg[d], nullptr));
  }
}

TEST_F(NcclGpu, SymmetricBuffersSitAtTheSameOffsetsOnBothGpus) {
  gmr_resource *sym[2];
  Stacks("symmetric(region_size=64MiB) > chunk_listener > cumem(device=%d, nccl_ready=true, "
         "peer_access=all)",
         sym);
  gmr_nccl_registration *reg[2];
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[d], sym[d], &reg[d], nullptr));
  }
  const size_t sizes[] = {5 * kMiB, 4096, 100 * kMiB, 3 * kMiB, 12 * kMiB};
  void *p[2][5];
  for (int d = 0; d < 2; ++d) {
    for (int i = 0; i < 5; ++i) {
      p[d][i] = Alloc(d, sym[d], sizes[i]);
    }
    Free(d, sym[d], p[d][3], sizes[3]);
    p[d][3] = Alloc(d, sym[d], 2 * kMiB);
  }
  for (int i = 0; i < 5; ++i) {
    size_t r0 = 0, o0 = 0, r1 = 0, o1 = 0;
    ASSERT_EQ(GMR_OK, gmr_symmetric_resource_get_offset(gmr_symmetric_resource_from_resource(sym[0]),
                                                        p[0][i], &r0, &o0));
    ASSERT_EQ(GMR_OK, gmr_symmetric_resource_get_offset(gmr_symmetric_resource_from_resource(sym[1]),
                                                        p[1][i], &r1, &o1));
    EXPECT_EQ(r0, r1) << i;
    EXPECT_EQ(o0, o1) << i;
  }
  void *send[2] = {p[0][2], p[1][2]}, *recv[2] = {p[0][4], p[1][4]};
  ExpectAllReduceSums(send, recv, 12 * kMiB / 4);
  for (int d = 0; d < 2; ++d) {
    for (int i = 0; i < 5; ++i) {
      Free(d, sym[d], p[d][i], i == 3 ? 2 * kMiB : sizes[i]);
    }
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(streams_[d]));
    EXPECT_EQ(GMR_OK, gmr_nccl_deregister(reg[d], nullptr));
  }
}

TEST_F(NcclGpu, BadInputGetsAClearStatusFromTheRealLibrary) {
  gmr_resource *leaf[2];
  Stacks("cumem(device=%d, nccl_ready=true)", leaf);
  void *p = Alloc(0, leaf[0], 4 * kMiB);
  Free(0, leaf[0], p, 4 * kMiB);
  gmr_nccl_registration *reg = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_nccl_register_buffer(comms_[0], p, 4 * kMiB, &reg, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "freed")) << f.message;
  gmr_resource *pool[2];
  Stacks("pool > chunk_listener > cumem(device=%d, nccl_ready=true)", pool);
  ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[1], pool[1], &reg, &f)) << f.message;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_nccl_comm_destroy(comms_[1], &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "registration")) << f.message;
  EXPECT_EQ(GMR_OK, gmr_nccl_deregister(reg, &f)) << f.message;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nccl_register_pool(comms_[0], leaf[0], &reg, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "chunk_listener")) << f.message;
  gmr_nccl_library *missing = nullptr;
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_library_open("libnccl-missing.so.2", &missing, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "libnccl.so.2")) << f.message;
}

}  // namespace
