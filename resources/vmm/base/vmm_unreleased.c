/*
 * resources/vmm/base/vmm_unreleased.c (internal): physical allocations and
 * pinned copies the driver refused to give back, kept and asked for again
 * (vmm_unreleased.h).
 */
#include "resources/vmm/base/vmm_unreleased.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "gmr/device.h"

void gmr__vmm_unreleased_init(gmr__vmm_unreleased *u, const gmr__cuda_ops *cuda,
                              const gmr__cuda_vmm_ops *vmm) {
  memset(u, 0, sizeof *u);
  u->cuda = cuda;
  u->vmm = vmm;
}

void gmr__vmm_unreleased_deinit(gmr__vmm_unreleased *u) {
  free(u->handles.items);
  free(u->hosts.items);
  u->handles = (gmr__vmm_kept_list){NULL, 0, 0, 0, 0};
  u->hosts = (gmr__vmm_kept_list){NULL, 0, 0, 0, 0};
}

bool gmr__vmm_kept_promise(gmr__vmm_kept_list *l) {
  if (l->promised == l->capacity) {
    size_t n = l->capacity < 16 ? 16 : l->capacity * 2;
    gmr__vmm_kept_item *grown = realloc(l->items, n * sizeof *grown);
    if (grown == NULL) return false;
    l->items = grown;
    l->capacity = n;
  }
  l->promised++;
  return true;
}

void gmr__vmm_kept_unpromise(gmr__vmm_kept_list *l) { l->promised--; }

/* Keep one item in its promised slot. */
static void keep(gmr__vmm_kept_list *l, uint64_t id, size_t bytes) {
  l->items[l->count++] = (gmr__vmm_kept_item){id, bytes};
  l->bytes += bytes;
}

/* Drop items[i] (given back at last) and its promise. */
static void forget(gmr__vmm_kept_list *l, size_t i) {
  l->bytes -= l->items[i].bytes;
  l->items[i] = l->items[--l->count];
  l->promised--;
}

CUresult gmr__vmm_release_or_keep(gmr__vmm_unreleased *u, CUmemGenericAllocationHandle h,
                                  size_t bytes) {
  CUresult cu = u->vmm->release(h);
  if (cu == CUDA_SUCCESS) {
    gmr__vmm_kept_unpromise(&u->handles);
  } else {
    keep(&u->handles, (uint64_t)h, bytes);
  }
  return cu;
}

cudaError_t gmr__vmm_free_pinned_or_keep(gmr__vmm_unreleased *u, void *host, size_t bytes) {
  cudaError_t err = u->cuda->free_host(host);
  if (err == cudaSuccess) {
    gmr__vmm_kept_unpromise(&u->hosts);
  } else {
    keep(&u->hosts, (uint64_t)(uintptr_t)host, bytes);
  }
  return err;
}

gmr_status gmr__vmm_unreleased_fail(gmr_failure *failure, const char *call, const char *code_name,
                                    int code, const char *done, size_t kept_device_bytes,
                                    size_t kept_host_bytes) {
  if (failure == NULL) return GMR_ERR_CUDA;
  (void)gmr__failure_set(failure, GMR_ERR_CUDA,
                         "%s failed: %s (%d)%s%s; %zu device and %zu pinned host bytes are kept "
                         "and given back at the next trim, sleep, wake or destroy",
                         call, code_name, code, done != NULL ? "; " : "", done != NULL ? done : "",
                         kept_device_bytes, kept_host_bytes);
  failure->cuda_error = code;
  return GMR_ERR_CUDA;
}

gmr_status gmr__vmm_unreleased_retry(gmr__vmm_unreleased *u, size_t *released_bytes,
                                     size_t *released_count, gmr_failure *failure) {
  CUresult cu_refused = CUDA_SUCCESS;
  for (size_t i = u->handles.count; i-- > 0;) {
    gmr__vmm_kept_item it = u->handles.items[i];
    CUresult cu = u->vmm->release((CUmemGenericAllocationHandle)it.id);
    if (cu != CUDA_SUCCESS) {
      if (cu_refused == CUDA_SUCCESS) cu_refused = cu;
      continue;
    }
    forget(&u->handles, i);
    *released_bytes += it.bytes;
    (*released_count)++;
  }
  cudaError_t err_refused = cudaSuccess;
  for (size_t i = u->hosts.count; i-- > 0;) {
    cudaError_t err = u->cuda->free_host((void *)(uintptr_t)u->hosts.items[i].id);
    if (err != cudaSuccess) {
      if (err_refused == cudaSuccess) err_refused = err;
      continue;
    }
    forget(&u->hosts, i);
  }
  if (cu_refused != CUDA_SUCCESS) {
    return gmr__vmm_unreleased_fail(failure, "cuMemRelease", u->vmm->error_name(cu_refused),
                                    (int)cu_refused, "refused again", u->handles.bytes,
                                    u->hosts.bytes);
  }
  if (err_refused != cudaSuccess) {
    return gmr__vmm_unreleased_fail(failure, "cudaFreeHost",
                                    gmr_cuda_error_name((int)err_refused), (int)err_refused,
                                    "refused again", u->handles.bytes, u->hosts.bytes);
  }
  return GMR_OK;
}
