// cuMemGetAddressRange in the simulated VMM layer (core/cuda_vmm.h): the
// extent of one cuMemMap mapping, of a cudaMalloc allocation from its start
// or inside it, and CUDA_ERROR_NOT_FOUND for freed, unmapped, pinned host
// or unknown addresses; counted and injectable like every call.
#include <gtest/gtest.h>

#include <cuda.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/sim/cuda_sim.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

class AddressRange : public gmr_test::SimTest {
 protected:
  const gmr__cuda_ops *cuda_ = nullptr;
  const gmr__cuda_vmm_ops *vmm_ = nullptr;
  void SetUp() override {
    SimTest::SetUp();
    cuda_ = gmr__cuda();
    vmm_ = gmr__cuda_vmm(cuda_);
    ASSERT_EQ(CUDA_SUCCESS, vmm_->init(0));
  }
  CUresult Range(const void *p, uintptr_t *base, size_t *bytes) {
    CUdeviceptr b = 0;
    CUresult st = vmm_->get_address_range(&b, bytes, reinterpret_cast<CUdeviceptr>(p));
    *base = static_cast<uintptr_t>(b);
    return st;
  }
};

TEST_F(AddressRange, EachMappingIsItsOwnExtent) {
  CUdeviceptr va = 0;
  ASSERT_EQ(CUDA_SUCCESS, vmm_->address_reserve(&va, 8 * kMiB, 0));
  gmr__vmm_prop prop = {0, 0, false};
  CUmemGenericAllocationHandle h[2] = {0, 0};
  ASSERT_EQ(CUDA_SUCCESS, vmm_->create(&h[0], 2 * kMiB, &prop));
  ASSERT_EQ(CUDA_SUCCESS, vmm_->create(&h[1], 4 * kMiB, &prop));
  ASSERT_EQ(CUDA_SUCCESS, vmm_->map(va, 2 * kMiB, h[0]));
  ASSERT_EQ(CUDA_SUCCESS, vmm_->map(va + 2 * kMiB, 4 * kMiB, h[1]));
  uintptr_t base = 0;
  size_t bytes = 0;
  const char *v = reinterpret_cast<const char *>(va);
  ASSERT_EQ(CUDA_SUCCESS, Range(v + 100, &base, &bytes));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v), base);
  EXPECT_EQ(2 * kMiB, bytes) << "one mapping, not the reservation";
  ASSERT_EQ(CUDA_SUCCESS, Range(v + 5 * kMiB, &base, &bytes));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v) + 2 * kMiB, base);
  EXPECT_EQ(4 * kMiB, bytes);
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, Range(v + 7 * kMiB, &base, &bytes)) << "reserved, unmapped";
  ASSERT_EQ(CUDA_SUCCESS, vmm_->unmap(va, 2 * kMiB));
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, Range(v, &base, &bytes)) << "unmapped";
  ASSERT_EQ(CUDA_SUCCESS, vmm_->unmap(va + 2 * kMiB, 4 * kMiB));
  ASSERT_EQ(CUDA_SUCCESS, vmm_->release(h[0]));
  ASSERT_EQ(CUDA_SUCCESS, vmm_->release(h[1]));
  ASSERT_EQ(CUDA_SUCCESS, vmm_->address_free(va, 8 * kMiB));
}

TEST_F(AddressRange, CudaMallocMemoryIsOneExtentAndPinnedHostMemoryNone) {
  void *p = nullptr, *h = nullptr;
  ASSERT_EQ(cudaSuccess, cuda_->malloc(&p, 3 * kMiB));
  ASSERT_EQ(cudaSuccess, cuda_->host_alloc(&h, kMiB));
  uintptr_t base = 0;
  size_t bytes = 0;
  ASSERT_EQ(CUDA_SUCCESS, Range(static_cast<char *>(p) + kMiB, &base, &bytes));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p), base);
  EXPECT_GE(bytes, 3 * kMiB);
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, Range(h, &base, &bytes));
  int local = 0;
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, Range(&local, &base, &bytes));
  ASSERT_EQ(cudaSuccess, cuda_->free(p));
  EXPECT_EQ(CUDA_ERROR_NOT_FOUND, Range(p, &base, &bytes)) << "freed";
  ASSERT_EQ(cudaSuccess, cuda_->free_host(h));
  uint64_t calls = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_GET_ADDRESS_RANGE);
  EXPECT_EQ(4u, calls);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_GET_ADDRESS_RANGE, 0, 1,
                                                CUDA_ERROR_INVALID_CONTEXT));
  EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, Range(&local, &base, &bytes));
  EXPECT_STREQ("cuMemGetAddressRange", gmr_cuda_call_name(GMR_CUDA_CALL_MEM_GET_ADDRESS_RANGE));
}

}  // namespace
