/*
 * resources/vmm_pool/vmm_sleep_common.c (internal): what both placements'
 * sleep and wake share (vmm_sleep_common.h).
 */
#include "resources/vmm_pool/vmm_sleep_common.h"

#include "core/failure.h"

gmr_status gmr__vmm_sleep_synchronize(const gmr__cuda_ops *cuda, int device, int *saved_device,
                                      bool *entered, gmr_failure *failure) {
  cudaError_t err = gmr__cuda_device_enter(cuda, device, saved_device);
  *entered = err == cudaSuccess;
  if (!*entered) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  err = cuda->device_synchronize();
  return err == cudaSuccess ? GMR_OK : gmr__cuda_fail(failure, "cudaDeviceSynchronize", err);
}

bool gmr__vmm_sleep_saves(const gmr_vmm_pool_sleep_options *o, uint32_t tag) {
  return o->save_all || ((o->save_tag_mask >> tag) & 1u) != 0;
}

void gmr__vmm_copies_drop(const gmr__cuda_ops *cuda, gmr__vmm_copy *copies, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (copies[i].host != NULL) (void)cuda->free_host(copies[i].host);
    copies[i].host = NULL;
  }
}

/* Wait for the copies queued on the default stream, if any were. */
static gmr_status wait_copies(const gmr__cuda_ops *cuda, bool any, gmr_failure *failure) {
  if (!any) return GMR_OK;
  cudaError_t err = cuda->stream_synchronize(NULL);
  return err == cudaSuccess ? GMR_OK : gmr__cuda_fail(failure, "cudaStreamSynchronize", err);
}

gmr_status gmr__vmm_copies_save(const gmr__cuda_ops *cuda, gmr__vmm_copy *copies, size_t count,
                                gmr_failure *failure) {
  bool any = false;
  gmr_status st = GMR_OK;
  for (size_t i = 0; i < count && st == GMR_OK; ++i) {
    gmr__vmm_copy *c = &copies[i];
    if (c->bytes == 0) continue;
    cudaError_t err = cuda->host_alloc(&c->host, c->bytes);
    if (err != cudaSuccess) {
      c->host = NULL;
      st = gmr__cuda_fail(failure, "cudaHostAlloc", err);
      break;
    }
    any = true;
    err = cuda->memcpy_async(c->host, (const void *)c->addr, c->bytes, NULL);
    if (err != cudaSuccess) st = gmr__cuda_fail(failure, "cudaMemcpyAsync", err);
  }
  if (st == GMR_OK) st = wait_copies(cuda, any, failure);
  if (st != GMR_OK) gmr__vmm_copies_drop(cuda, copies, count);
  return st;
}

gmr_status gmr__vmm_copies_restore(const gmr__cuda_ops *cuda, const gmr__vmm_copy *copies,
                                   size_t count, gmr_failure *failure) {
  bool any = false;
  for (size_t i = 0; i < count; ++i) {
    if (copies[i].host == NULL) continue;
    any = true;
    cudaError_t err =
        cuda->memcpy_async((void *)copies[i].addr, copies[i].host, copies[i].bytes, NULL);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaMemcpyAsync", err);
  }
  return wait_copies(cuda, any, failure);
}
