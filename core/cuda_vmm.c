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
