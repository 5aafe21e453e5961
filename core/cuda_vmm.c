/*
 * core/cuda_vmm.c (internal): status mapping and failure records for the
 * driver calls of the VMM table (cuda_vmm.h), shared by both tables.
 */
#include "core/cuda_vmm.h"

#include <stdio.h>

gmr_status gmr__status_from_cu(CUresult err) {
  switch (err) {
    case CUDA_SUCCESS:
      return GMR_OK;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return GMR_ERR_OUT_OF_MEMORY;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
      return GMR_ERR_CAPTURE_UNSAFE;
    default:
      return GMR_ERR_CUDA;
  }
}

gmr_status gmr__cu_fail(const gmr__cuda_vmm_ops *vmm, gmr_failure *failure, const char *call,
                        CUresult err, const char *detail) {
  if (failure != NULL) {
    failure->cuda_error = (int)err;
    snprintf(failure->message, sizeof failure->message, "%s failed: %s (%d)%s%s", call,
             vmm->error_name(err), (int)err, detail != NULL ? "; " : "",
             detail != NULL ? detail : "");
  }
  return gmr__status_from_cu(err);
}

void gmr__vmm_prop_for_nccl(const gmr__cuda_vmm_ops *vmm, gmr__vmm_prop *prop) {
  int fabric = 0, rdma = 0;
  /* An attribute the driver cannot answer counts as not supported. */
  (void)vmm->device_get_attribute(&fabric, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
                                  prop->device);
  (void)vmm->device_get_attribute(
      &rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, prop->device);
  prop->handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR |
                       (fabric ? (unsigned)CU_MEM_HANDLE_TYPE_FABRIC : 0u);
  prop->gpu_direct_rdma = rdma != 0;
}

CUresult gmr__vmm_create_or_drop_fabric(const gmr__cuda_vmm_ops *vmm,
                                        CUmemGenericAllocationHandle *handle, size_t bytes,
                                        const gmr__vmm_prop *prop, atomic_bool *fabric_refused) {
  gmr__vmm_prop asked = *prop;
  if (atomic_load_explicit(fabric_refused, memory_order_relaxed)) {
    asked.handle_types &= ~(unsigned)CU_MEM_HANDLE_TYPE_FABRIC;
  }
  CUresult st = vmm->create(handle, bytes, &asked);
  if ((st == CUDA_ERROR_NOT_PERMITTED || st == CUDA_ERROR_NOT_SUPPORTED) &&
      (asked.handle_types & CU_MEM_HANDLE_TYPE_FABRIC) != 0) {
    atomic_store_explicit(fabric_refused, true, memory_order_relaxed);
    asked.handle_types &= ~(unsigned)CU_MEM_HANDLE_TYPE_FABRIC;
    st = vmm->create(handle, bytes, &asked);
  }
  return st;
}
