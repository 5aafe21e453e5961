// The simulated driver VMM calls (core/cuda_vmm.h): the rules and error codes
// of cuMemAddressReserve / cuMemCreate / cuMemMap / cuMemSetAccess /
// cuMemUnmap / cuMemRelease / cuMemAddressFree, one physical allocation
// mapped at two addresses, device accounting, capture modes, injection.
#include <gtest/gtest.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "tests/support/sim_fixture.h"

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"

namespace {

using gmr_test::SimTest;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kPage = 2 * kMiB;

class CudaVmmSim : public SimTest {
 protected:
  const gmr__cuda_ops *ops() { return gmr__cuda(); }
  const gmr__cuda_vmm_ops *vmm() { return gmr__cuda_vmm(gmr__cuda()); }
  gmr__vmm_prop prop_{0, 0, false};

  CUdeviceptr Reserve(size_t bytes) {
    CUdeviceptr va = 0;
    EXPECT_EQ(CUDA_SUCCESS, vmm()->address_reserve(&va, bytes, 0));
    return va;
  }
  CUmemGenericAllocationHandle Create(size_t bytes) {
    CUmemGenericAllocationHandle h = 0;
    EXPECT_EQ(CUDA_SUCCESS, vmm()->create(&h, bytes, &prop_));
    return h;
  }
  void Access(CUdeviceptr va, size_t bytes) {
    int dev = 0;
    ASSERT_EQ(CUDA_SUCCESS, vmm()->set_access(va, bytes, &dev, 1));
  }
  static unsigned char *Ptr(CUdeviceptr va) { return reinterpret_cast<unsigned char *>(va); }
};

TEST_F(CudaVmmSim, OnePhysicalAllocationMappedTwiceIsOneMemory) {
  ASSERT_EQ(CUDA_SUCCESS, vmm()->init(0));
  size_t gran = 0;
  ASSERT_EQ(CUDA_SUCCESS, vmm()->get_granularity(&gran, &prop_, false));
  EXPECT_EQ(kPage, gran);
  CUdeviceptr va = Reserve(8 * kPage);
  EXPECT_EQ(0u, va % kPage) << "reservations start on the granularity";
  CUmemGenericAllocationHandle h = Create(kPage);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->map(va, kPage, h));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->map(va + 5 * kPage, kPage, h));
  Access(va, kPage);
  Access(va + 5 * kPage, kPage);

  std::memset(Ptr(va), 0x5a, kPage);
  EXPECT_EQ(0x5a, Ptr(va + 5 * kPage)[0]);
  EXPECT_EQ(0x5a, Ptr(va + 5 * kPage)[kPage - 1]);
  Ptr(va + 5 * kPage)[77] = 0x11;
  EXPECT_EQ(0x11, Ptr(va)[77]);

  gmr_cuda_sim_vmm_mapping a, b;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(Ptr(va) + 100, &a));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(Ptr(va + 5 * kPage), &b));
  EXPECT_TRUE(a.mapped);
  EXPECT_EQ(Ptr(va), a.base);
  EXPECT_EQ(kPage, a.bytes);
  EXPECT_EQ(1u, a.access_device_mask);
  EXPECT_EQ(a.physical_id, b.physical_id);
  gmr_cuda_sim_vmm_mapping hole;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(Ptr(va + 2 * kPage), &hole));
  EXPECT_TRUE(hole.reserved);
  EXPECT_FALSE(hole.mapped);

  // The memory is charged once, however often it is mapped.
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(kPage, u.used_bytes);
  gmr_cuda_sim_vmm_usage v;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&v));
  EXPECT_EQ(1u, v.reservation_count);
  EXPECT_EQ(8 * kPage, v.reserved_bytes);
  EXPECT_EQ(1u, v.physical_count);
  EXPECT_EQ(2u, v.mapping_count);
  EXPECT_EQ(2 * kPage, v.mapped_bytes);

  // Release while mapped: the memory lives until its last mapping goes.
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(h));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->unmap(va, kPage));
  EXPECT_EQ(0x11, Ptr(va + 5 * kPage)[77]);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(kPage, u.used_bytes);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->unmap(va + 5 * kPage, kPage));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(0u, u.used_bytes);
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaSuccess, ops()->mem_get_info(&free_bytes, &total_bytes));
  EXPECT_EQ(total_bytes, free_bytes);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->address_free(va, 8 * kPage));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_MAP));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_UNMAP));
  EXPECT_STREQ("cuMemMap", gmr_cuda_call_name(GMR_CUDA_CALL_MEM_MAP));
}

TEST_F(CudaVmmSim, GranularityAndRangeRulesAnswerWithTheDriversCodes) {
  CUmemGenericAllocationHandle h = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->create(&h, kPage + 4096, &prop_));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->create(&h, 0, &prop_));
  EXPECT_EQ(0u, h);
  gmr__vmm_prop bad_device{3, 0, false};
  EXPECT_EQ(CUDA_ERROR_INVALID_DEVICE, vmm()->create(&h, kPage, &bad_device));
  CUdeviceptr va = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->address_reserve(&va, 1000, 0));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->address_reserve(&va, kPage, 3 * 4096));

  va = Reserve(4 * kPage);
  h = Create(2 * kPage);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->map(va + 4096, kPage, h)) << "unaligned address";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->map(va, kPage + 4096, h)) << "unaligned size";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->map(va, 4 * kPage, h)) << "more than the handle";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->map(va + 3 * kPage, 2 * kPage, h))
      << "past the reservation";
  ASSERT_EQ(CUDA_SUCCESS, vmm()->map(va, 2 * kPage, h));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->map(va + kPage, kPage, h)) << "over a mapping";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->unmap(va, kPage)) << "part of a mapping";
  int dev = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->set_access(va, 3 * kPage, &dev, 1))
      << "over unmapped addresses";
  int no_such = 5;
  EXPECT_EQ(CUDA_ERROR_INVALID_DEVICE, vmm()->set_access(va, 2 * kPage, &no_such, 1));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->address_free(va, 4 * kPage)) << "still mapped";
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->address_free(va, 2 * kPage)) << "wrong size";
  ASSERT_EQ(CUDA_SUCCESS, vmm()->unmap(va, 2 * kPage));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(h));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->release(h)) << "released twice";
  expect_stale_handles_ = true;
  EXPECT_EQ(1u, gmr_cuda_sim_get_stale_handle_count());
  ASSERT_EQ(CUDA_SUCCESS, vmm()->address_free(va, 4 * kPage));
  EXPECT_STREQ("CUDA_ERROR_INVALID_VALUE", vmm()->error_name(CUDA_ERROR_INVALID_VALUE));
}

class CudaVmmSimSmallDevice : public CudaVmmSim {
 protected:
  CudaVmmSimSmallDevice() { sim_config_.device_memory_bytes = 3 * kPage; }
};

TEST_F(CudaVmmSimSmallDevice, CreatePastCapacityIsOutOfMemoryAndChangesNothing) {
  CUmemGenericAllocationHandle a = Create(2 * kPage);
  CUmemGenericAllocationHandle b = 0;
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, vmm()->create(&b, 2 * kPage, &prop_));
  EXPECT_EQ(0u, b);
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(2 * kPage, u.used_bytes);
  EXPECT_EQ(1u, u.allocation_count);
  b = Create(kPage);  // what is left still fits
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(a));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(b));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr__status_from_cu(CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_EQ(GMR_ERR_CUDA, gmr__status_from_cu(CUDA_ERROR_INVALID_VALUE));
  EXPECT_EQ(GMR_OK, gmr__status_from_cu(CUDA_SUCCESS));
}

TEST_F(CudaVmmSim, InjectedFailuresChangeNothing) {
  CUdeviceptr va = Reserve(2 * kPage);
  CUmemGenericAllocationHandle h = Create(kPage);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_MAP, 0, 1,
                                                CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, vmm()->map(va, kPage, h));
  gmr_cuda_sim_vmm_usage v;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&v));
  EXPECT_EQ(0u, v.mapping_count);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->map(va, kPage, h));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_UNMAP, 0, 1,
                                                CUDA_ERROR_INVALID_VALUE));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, vmm()->unmap(va, kPage));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&v));
  EXPECT_EQ(1u, v.mapping_count);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->unmap(va, kPage));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(h));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->address_free(va, 2 * kPage));
}

TEST_F(CudaVmmSim, LiveReservationsAndHandlesAreLeaks) {
  CUdeviceptr va = Reserve(kPage);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_cuda_sim_disable());
  ASSERT_EQ(CUDA_SUCCESS, vmm()->address_free(va, kPage));
  CUmemGenericAllocationHandle h = Create(kPage);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_cuda_sim_disable());
  gmr_cuda_sim_vmm_config c = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_cuda_sim_configure_vmm(&c));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(h));
}

TEST_F(CudaVmmSim, PageMappingIsUnsafeInGlobalCaptureAndFineInRelaxedMode) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaSuccess, ops()->stream_create(&s));
  CUdeviceptr va = Reserve(kPage);
  CUmemGenericAllocationHandle h = Create(kPage);
  ASSERT_EQ(cudaSuccess, ops()->stream_begin_capture(s, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, vmm()->map(va, kPage, h));
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaErrorStreamCaptureInvalidated, ops()->stream_end_capture(s, &g));

  ASSERT_EQ(cudaSuccess, ops()->stream_begin_capture(s, cudaStreamCaptureModeGlobal));
  enum cudaStreamCaptureMode saved;
  ASSERT_EQ(cudaSuccess, gmr__cuda_capture_relaxed_enter(ops(), &saved));
  EXPECT_EQ(CUDA_SUCCESS, vmm()->map(va, kPage, h));
  EXPECT_EQ(CUDA_SUCCESS, vmm()->unmap(va, kPage));
  gmr__cuda_capture_relaxed_leave(ops(), saved);
  ASSERT_EQ(cudaSuccess, ops()->stream_end_capture(s, &g));
  ASSERT_EQ(cudaSuccess, ops()->graph_destroy(g));
  ASSERT_EQ(cudaSuccess, ops()->stream_destroy(s));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(h));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->address_free(va, kPage));
}

TEST_F(CudaVmmSim, ExportHandleTypesAndPeersFollowTheDeviceAttributes) {
  int value = -1;
  ASSERT_EQ(CUDA_SUCCESS, vmm()->device_get_attribute(
                              &value, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  EXPECT_EQ(1, value);
  ASSERT_EQ(CUDA_SUCCESS,
            vmm()->device_get_attribute(&value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0));
  EXPECT_EQ(0, value);
  CUmemGenericAllocationHandle h = 0;
  gmr__vmm_prop fabric{0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC,
                       false};
  EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, vmm()->create(&h, kPage, &fabric));
  gmr__vmm_prop rdma{0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, true};
  EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, vmm()->create(&h, kPage, &rdma));

  gmr_cuda_sim_vmm_config c = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  c.fabric_handles_supported = true;
  c.gpu_direct_rdma_supported = true;
  c.recommended_granularity_bytes = 2 * kPage;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&c));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->create(&h, kPage, &fabric));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(h));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->create(&h, kPage, &rdma));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(h));
  size_t rec = 0;
  ASSERT_EQ(CUDA_SUCCESS, vmm()->get_granularity(&rec, &prop_, true));
  EXPECT_EQ(2 * kPage, rec);
  c.granularity_bytes = 3 * 4096;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_configure_vmm(&c));
}

class CudaVmmSimTwoDevices : public CudaVmmSim {
 protected:
  CudaVmmSimTwoDevices() { sim_config_.device_count = 2; }
};

TEST_F(CudaVmmSimTwoDevices, PeerAccessIsPerMappingAndNeedsPeerSupport) {
  int can = -1;
  ASSERT_EQ(cudaSuccess, vmm()->device_can_access_peer(&can, 0, 1));
  EXPECT_EQ(1, can);
  CUdeviceptr va = Reserve(kPage);
  CUmemGenericAllocationHandle h = Create(kPage);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->map(va, kPage, h));
  int both[] = {0, 1};
  ASSERT_EQ(CUDA_SUCCESS, vmm()->set_access(va, kPage, both, 2));
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(Ptr(va), &m));
  EXPECT_EQ(3u, m.access_device_mask);
  // Retain gives the same handle with one more reference.
  CUmemGenericAllocationHandle r = 0;
  ASSERT_EQ(CUDA_SUCCESS, vmm()->retain_allocation_handle(&r, va + 4096));
  EXPECT_EQ(h, r);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->unmap(va, kPage));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(h));
  gmr_cuda_sim_vmm_usage v;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&v));
  EXPECT_EQ(1u, v.physical_count) << "the retained reference keeps it";
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(r));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->address_free(va, kPage));

  gmr_cuda_sim_vmm_config c = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  c.peer_access_supported = false;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&c));
  va = Reserve(kPage);
  h = Create(kPage);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->map(va, kPage, h));
  EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, vmm()->set_access(va, kPage, both, 2));
  ASSERT_EQ(cudaSuccess, vmm()->device_can_access_peer(&can, 0, 1));
  EXPECT_EQ(0, can);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->unmap(va, kPage));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(h));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->address_free(va, kPage));
}

using CudaVmmSimDeathTest = CudaVmmSim;

TEST_F(CudaVmmSimDeathTest, MappingAloneGivesNoAccess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CUdeviceptr va = Reserve(kPage);
  CUmemGenericAllocationHandle h = Create(kPage);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->map(va, kPage, h));
  volatile unsigned char *p = Ptr(va);
  EXPECT_DEATH(p[0] = 1, "");
  Access(va, kPage);
  p[0] = 1;
  EXPECT_EQ(1, p[0]);
  ASSERT_EQ(CUDA_SUCCESS, vmm()->unmap(va, kPage));
  EXPECT_DEATH(p[0] = 2, "");
  ASSERT_EQ(CUDA_SUCCESS, vmm()->release(h));
  ASSERT_EQ(CUDA_SUCCESS, vmm()->address_free(va, kPage));
}

}  // namespace
