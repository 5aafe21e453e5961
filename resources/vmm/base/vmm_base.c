/*
 * resources/vmm/base/vmm_base.c (internal): what every VMM resource's
 * create does first (vmm_base.h): the config's common fields, the device
 * and its VMM properties, the page and VA chunk sizes, the peers; and the
 * messages and steps the resources share.
 */
#include "resources/vmm/base/vmm_base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "resources/vmm/base/vmm_host.h"
#include "resources/vmm/base/vmm_ranges.h"

#define DEFAULT_PAGE_BYTES ((size_t)2 << 20)

gmr_status gmr__vmm_create_fail(gmr_failure *failure, gmr_status st, const char *message) {
  snprintf(failure->message, sizeof failure->message, "%s", message);
  return st;
}

gmr_status gmr__vmm_config_check(const gmr_vmm_pool_resource_config *c, gmr_failure *failure) {
  if ((unsigned)c->peer_access > GMR_VMM_POOL_PEERS_LIST ||
      c->peer_count > GMR_VMM_POOL_MAX_PEERS) {
    char msg[GMR_FAILURE_MESSAGE_BYTES];
    snprintf(msg, sizeof msg,
             "vmm_pool: peer_access must be none, all or a list of at most %d devices",
             GMR_VMM_POOL_MAX_PEERS);
    return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  }
  /* Only streams_outlive_resource changes what a VMM resource does. */
  const gmr_stream_ordered_options *o = &c->streams;
  const char *unsupported = !o->stream_ordered       ? "stream_ordered = false"
                            : o->nvtx_annotate        ? "nvtx_annotate"
                            : o->record_at_every_free ? "record_at_every_free"
                            : o->stream_ids           ? "stream_ids"
                                                      : NULL;
  if (unsupported != NULL) {
    char msg[GMR_FAILURE_MESSAGE_BYTES];
    snprintf(msg, sizeof msg,
             "vmm_pool: streams.%s is not supported (of `streams`, the VMM resources read "
             "streams_outlive_resource only)",
             unsupported);
    return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  }
  return GMR_OK;
}

/* The devices that get access to every page: the pool's, then its peers. */
static gmr_status resolve_peers(gmr_vmm_pool_resource *p, const gmr_vmm_pool_resource_config *c,
                                int device_count, gmr_failure *failure) {
  p->access_devices[0] = p->device;
  p->access_count = 1;
  char msg[GMR_FAILURE_MESSAGE_BYTES];
  if (c->peer_access == GMR_VMM_POOL_PEERS_NONE) return GMR_OK;
  bool all = c->peer_access == GMR_VMM_POOL_PEERS_ALL;
  size_t n = all ? (size_t)device_count : c->peer_count;
  for (size_t i = 0; i < n; ++i) {
    int d = all ? (int)i : c->peers[i];
    if (all && d == p->device) continue;
    if (!all && (d < 0 || d >= device_count || d == p->device)) {
      snprintf(msg, sizeof msg,
               "vmm_pool: peer %d is not another device (devices 0..%d, the pool's is %d)", d,
               device_count - 1, p->device);
      return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
    }
    bool seen = false;
    for (size_t j = 1; j < p->access_count; ++j) seen = seen || p->access_devices[j] == d;
    if (seen) continue;
    int can = 0;
    cudaError_t err = p->vmm->device_can_access_peer(&can, d, p->device);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaDeviceCanAccessPeer", err);
    if (!can) {
      if (all) continue;
      snprintf(msg, sizeof msg, "vmm_pool: device %d cannot access device %d's memory", d,
               p->device);
      return gmr__vmm_create_fail(failure, GMR_ERR_UNSUPPORTED, msg);
    }
    p->access_devices[p->access_count++] = d;
  }
  return GMR_OK;
}

/* What the device supports, and the page and VA chunk sizes. */
static gmr_status query_device(gmr_vmm_pool_resource *p, const gmr_vmm_pool_resource_config *c,
                               gmr_failure *failure) {
  char msg[GMR_FAILURE_MESSAGE_BYTES];
  CUresult cu = p->vmm->init(p->device);
  if (cu != CUDA_SUCCESS) return gmr__cu_fail(p->vmm, failure, "cuInit (driver entry points)", cu, NULL);
  int supported = 0;
  cu = p->vmm->device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                    p->device);
  if (cu != CUDA_SUCCESS) return gmr__cu_fail(p->vmm, failure, "cuDeviceGetAttribute", cu, NULL);
  if (!supported) {
    snprintf(msg, sizeof msg,
             "vmm_pool: device %d has no virtual memory management support; use cuda(kind=async)",
             p->device);
    return gmr__vmm_create_fail(failure, GMR_ERR_UNSUPPORTED, msg);
  }
  p->prop = (gmr__vmm_prop){p->device, 0, false};
  atomic_init(&p->fabric_refused, false);
  if (c->nccl_ready) gmr__vmm_prop_for_nccl(p->vmm, &p->prop);
  cu = p->vmm->get_granularity(&p->granularity_bytes, &p->prop, c->nccl_ready);
  if (cu != CUDA_SUCCESS) {
    return gmr__cu_fail(p->vmm, failure, "cuMemGetAllocationGranularity", cu, NULL);
  }
  size_t g = p->granularity_bytes;
  p->page_bytes = c->page_bytes != 0 ? c->page_bytes
                                     : (DEFAULT_PAGE_BYTES > g ? gmr__align_up(DEFAULT_PAGE_BYTES, g)
                                                               : g);
  if (p->page_bytes % g != 0 || (p->page_bytes & (p->page_bytes - 1)) != 0) {
    snprintf(msg, sizeof msg,
             "vmm_pool: page_bytes %zu must be a power of two and a multiple of device %d's VMM "
             "granularity, %zu bytes",
             p->page_bytes, p->device, g);
    return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  }
  size_t free_bytes = 0, total_bytes = 0;
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
  if (err == cudaSuccess) {
    err = p->cuda->mem_get_info(&free_bytes, &total_bytes);
    gmr__cuda_device_leave(p->cuda, saved);
  }
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaMemGetInfo", err);
  p->device_total_bytes = total_bytes;
  p->va_chunk_bytes = c->va_chunk_bytes;
  if (p->va_chunk_bytes == 0) {
    p->va_chunk_bytes = gmr__align_up(total_bytes, p->page_bytes);
  } else if (p->va_chunk_bytes % p->page_bytes != 0) {
    snprintf(msg, sizeof msg, "vmm_pool: va_chunk_bytes %zu is not a multiple of the page, %zu",
             p->va_chunk_bytes, p->page_bytes);
    return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  }
  return GMR_OK;
}

gmr_status gmr__vmm_base_init(gmr_vmm_pool_resource *p, const gmr_vmm_pool_resource_config *c,
                              const gmr_resource_vtbl *vtbl, const gmr__vmm_engine_ops *ops,
                              gmr_failure *failure) {
  p->base.vtbl = vtbl;
  p->ops = ops;
  p->config = *c;
  p->cuda = gmr__cuda();
  p->vmm = gmr__cuda_vmm(p->cuda);
  pthread_mutex_init(&p->lock, NULL);
  atomic_init(&p->sleeping, false);
  atomic_init(&p->default_tag, 0u);

  int device_count = 0;
  cudaError_t err = p->cuda->get_device_count(&device_count);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaGetDeviceCount", err);
  if (c->device == GMR_VMM_POOL_CURRENT_DEVICE) {
    err = p->cuda->get_device(&p->device);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaGetDevice", err);
  } else if (c->device < 0 || c->device >= device_count) {
    char msg[GMR_FAILURE_MESSAGE_BYTES];
    snprintf(msg, sizeof msg, "vmm_pool: device %d does not exist (devices 0..%d)", c->device,
             device_count - 1);
    return gmr__vmm_create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  } else {
    p->device = c->device;
  }
  gmr_status st = query_device(p, c, failure);
  if (st == GMR_OK) st = resolve_peers(p, c, device_count, failure);
  if (st == GMR_OK) {
    p->host = calloc(1, sizeof *p->host);
    p->ranges = calloc(1, sizeof *p->ranges);
    if (p->host == NULL || p->ranges == NULL) {
      return gmr__vmm_create_fail(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory");
    }
    gmr__vmm_host_init(p->host, p->cuda, p->vmm, p->device);
    gmr__vmm_ranges_init(p->ranges, p);
  }
  return st;
}

void gmr__vmm_base_deinit(gmr_vmm_pool_resource *p) {
  if (p->host != NULL && p->host->cuda != NULL) gmr__vmm_host_deinit(p->host);
  if (p->ranges != NULL && p->ranges->pool != NULL) gmr__vmm_ranges_deinit(p->ranges);
  free(p->host);
  free(p->ranges);
  p->host = NULL;
  p->ranges = NULL;
  pthread_mutex_destroy(&p->lock);
}

gmr_status gmr__vmm_base_release(gmr_vmm_pool_resource *p) {
  pthread_mutex_lock(&p->lock);
  gmr_status st = p->ranges->count > 0 ? GMR_ERR_BUSY : GMR_OK;
  if (st == GMR_OK) {
    int saved = -1;
    if (gmr__cuda_device_enter(p->cuda, p->device, &saved) != cudaSuccess) {
      st = GMR_ERR_CUDA;
    } else {
      st = gmr__vmm_host_release(p->host);
      if (st == GMR_OK) st = gmr__vmm_ranges_retry(p->ranges, NULL);
      gmr__cuda_device_leave(p->cuda, saved);
    }
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}

gmr_status gmr__vmm_base_check(gmr_vmm_pool_resource *p, char *err, size_t err_bytes) {
  pthread_mutex_lock(&p->lock);
  gmr_status st = gmr__vmm_ranges_check(p->ranges, err, err_bytes);
  pthread_mutex_unlock(&p->lock);
  return st;
}

gmr_status gmr__vmm_initial_pages_fail(gmr_vmm_pool_resource *p, size_t pages, gmr_status st,
                                       gmr_failure *failure) {
  size_t limit = GMR_MAX_ALLOCATION_BYTES / p->page_bytes;
  size_t free_bytes = 0, total_bytes = 0;
  int saved = -1;
  if (gmr__cuda_device_enter(p->cuda, p->device, &saved) == cudaSuccess) {
    if (p->cuda->mem_get_info(&free_bytes, &total_bytes) == cudaSuccess &&
        free_bytes / p->page_bytes < limit) {
      limit = free_bytes / p->page_bytes;
    }
    gmr__cuda_device_leave(p->cuda, saved);
  }
  snprintf(failure->message, sizeof failure->message,
           "vmm_pool: initial_pages=%zu pages of %zu bytes cannot be mapped: device %d has room "
           "for %zu pages; lower initial_pages",
           pages, p->page_bytes, p->device, limit);
  return st;
}

cudaError_t gmr__vmm_synchronize_device(gmr_vmm_pool_resource *p) {
  int saved_device = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved_device);
  if (err != cudaSuccess) return err;
  err = p->cuda->device_synchronize();
  gmr__cuda_device_leave(p->cuda, saved_device);
  return err;
}

gmr_status gmr__vmm_busy_asleep(gmr_failure *failure, const char *doing) {
  return gmr__failure_set(failure, GMR_ERR_BUSY,
                          "vmm_pool is asleep (gmr_vmm_pool_resource_sleep): wake it before %s",
                          doing);
}

gmr_status gmr__vmm_violation(char *err, size_t err_bytes, const char *fmt, ...) {
  if (err != NULL && err_bytes > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_bytes, fmt, ap);
    va_end(ap);
  }
  return GMR_ERR_INTERNAL;
}

CUresult gmr__vmm_create_handle(gmr_vmm_pool_resource *p, CUmemGenericAllocationHandle *handle,
                                size_t bytes) {
  return gmr__vmm_create_or_drop_fabric(p->vmm, handle, bytes, &p->prop, &p->fabric_refused);
}

gmr_status gmr__vmm_refuse_beyond_device(const gmr_vmm_pool_resource *p, size_t bytes,
                                         gmr_failure *failure) {
  if (bytes <= p->device_total_bytes) return GMR_OK;
  return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                          "vmm_pool: %zu bytes asked for, more than device %d's memory in all "
                          "(%zu bytes)",
                          bytes, p->device, p->device_total_bytes);
}
