/*
 * nccl/cumem_resource.c: one physical VMM allocation per allocation,
 * as ncclMemAlloc does (gmr/nccl/cumem_resource.h).
 */
#include "gmr/nccl/cumem_resource.h"

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "core/failure.h"
#include "core/resource_type.h"
#include "core/stats.h"
#include "util/u64_map.h"

#define MAX_ACCESS (1 + GMR_CUMEM_MAX_PEERS)
/* How many freed addresses are remembered to name a double free. */
#define FREED_MEMORY_COUNT ((size_t)1 << 16)

/* One live allocation: its reservation, which is also its mapping. */
typedef struct cumem_block {
  size_t bytes;           /* rounded to the granularity; reserved = mapped = created */
  size_t requested_bytes; /* as asked: a free must name it exactly */
  size_t alignment;       /* as asked (the dispatch made 0 into 256) */
  CUmemGenericAllocationHandle handle;
} cumem_block;

struct gmr_cumem_resource {
  gmr_resource base; /* first */
  const gmr__cuda_ops *cuda;
  const gmr__cuda_vmm_ops *vmm;
  int device;
  int access_devices[MAX_ACCESS]; /* [0] = device, then peers */
  size_t access_count;
  size_t granularity_bytes;
  gmr__vmm_prop prop;         /* what cuMemCreate is asked for; never written after create */
  atomic_bool fabric_refused; /* the driver refused fabric handles: no longer asked for */
  pthread_mutex_t lock;
  /* Under the lock: */
  gmr__u64_map live;  /* address -> cumem_block * */
  gmr__u64_map freed; /* addresses freed and not handed out since */
  size_t live_bytes;
  size_t peak_live_bytes;
  uint64_t create_count;
  uint64_t release_count;
};

static const gmr_resource_vtbl cumem_vtbl;

static gmr_cumem_resource *as_cumem(gmr_resource *r) { return (gmr_cumem_resource *)r; }

/* Reserve, create, map and give access; undone completely on failure. */
static gmr_status map_block(gmr_cumem_resource *r, size_t bytes, size_t alignment,
                            CUdeviceptr *out_addr, CUmemGenericAllocationHandle *out_handle,
                            gmr_failure *failure) {
  char detail[96];
  snprintf(detail, sizeof detail, "%zu bytes on device %d", bytes, r->device);
  CUdeviceptr addr = 0;
  CUresult st = r->vmm->address_reserve(&addr, bytes, alignment);
  if (st != CUDA_SUCCESS) return gmr__cu_fail(r->vmm, failure, "cuMemAddressReserve", st, detail);
  CUmemGenericAllocationHandle h = 0;
  st = gmr__vmm_create_or_drop_fabric(r->vmm, &h, bytes, &r->prop, &r->fabric_refused);
  if (st != CUDA_SUCCESS) {
    (void)r->vmm->address_free(addr, bytes);
    return gmr__cu_fail(r->vmm, failure, "cuMemCreate", st, detail);
  }
  st = r->vmm->map(addr, bytes, h);
  if (st != CUDA_SUCCESS) {
    (void)r->vmm->release(h);
    (void)r->vmm->address_free(addr, bytes);
    return gmr__cu_fail(r->vmm, failure, "cuMemMap", st, detail);
  }
  st = r->vmm->set_access(addr, bytes, r->access_devices, r->access_count);
  if (st != CUDA_SUCCESS) {
    (void)r->vmm->unmap(addr, bytes);
    (void)r->vmm->release(h);
    (void)r->vmm->address_free(addr, bytes);
    return gmr__cu_fail(r->vmm, failure, "cuMemSetAccess", st, detail);
  }
  *out_addr = addr;
  *out_handle = h;
  return GMR_OK;
}

static gmr_status cumem_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                 gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_cumem_resource *r = as_cumem(self);
  *out_ptr = NULL;
  if (gmr__cuda_stream_is_capturing(r->cuda, stream)) {
    return gmr__failure_set(failure, GMR_ERR_CAPTURE_UNSAFE,
                            "cumem: the stream is capturing; cuMemCreate and cuMemMap would "
                            "join no graph (allocate before the capture)");
  }
  size_t g = r->granularity_bytes;
  if (bytes > GMR_MAX_ALLOCATION_BYTES - g) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "cumem: %zu bytes is too large",
                            bytes);
  }
  size_t size = gmr__align_up(bytes, g);
  cumem_block *b = malloc(sizeof *b);
  if (b == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "cumem: host memory");
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(r->cuda, r->device, &saved);
  if (err != cudaSuccess) {
    free(b);
    return gmr__cuda_fail(failure, "cudaSetDevice", err);
  }
  CUdeviceptr addr = 0;
  gmr_status st = map_block(r, size, alignment > g ? alignment : g, &addr, &b->handle, failure);
  if (st == GMR_OK) {
    b->bytes = size;
    b->requested_bytes = bytes;
    b->alignment = alignment;
    pthread_mutex_lock(&r->lock);
    bool stored = gmr__u64_map_put(&r->live, (uint64_t)addr, (uint64_t)(uintptr_t)b);
    if (stored) {
      (void)gmr__u64_map_remove(&r->freed, (uint64_t)addr, NULL);
      r->live_bytes += size;
      if (r->live_bytes > r->peak_live_bytes) r->peak_live_bytes = r->live_bytes;
      r->create_count++;
    }
    pthread_mutex_unlock(&r->lock);
    if (!stored) {
      (void)r->vmm->unmap(addr, size);
      (void)r->vmm->release(b->handle);
      (void)r->vmm->address_free(addr, size);
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "cumem: host memory");
    }
  }
  gmr__cuda_device_leave(r->cuda, saved);
  if (st != GMR_OK) {
    free(b);
    return st;
  }
  *out_ptr = (void *)(uintptr_t)addr;
  return GMR_OK;
}

/* Unmap, release and free the addresses of b at addr. On a refused call
 * what was undone is redone, so the block stays live and usable. */
static gmr_status unmap_block(gmr_cumem_resource *r, CUdeviceptr addr, const cumem_block *b) {
  if (r->vmm->unmap(addr, b->bytes) != CUDA_SUCCESS) return GMR_ERR_CUDA;
  if (r->vmm->release(b->handle) != CUDA_SUCCESS) {
    if (r->vmm->map(addr, b->bytes, b->handle) == CUDA_SUCCESS) {
      (void)r->vmm->set_access(addr, b->bytes, r->access_devices, r->access_count);
    }
    return GMR_ERR_CUDA;
  }
  /* The physical memory is gone; a refused address free only keeps the
   * addresses reserved, which the next reservation does not need. */
  (void)r->vmm->address_free(addr, b->bytes);
  return GMR_OK;
}

/* Remember that `key` was freed, to name a second free a double free (lock
 * held). Only the latest frees are kept: each allocation reserves new
 * addresses, so the set would otherwise grow for ever; older double frees
 * then read as unknown pointers. A lost entry (no host memory) only weakens
 * DOUBLE_FREE the same way. */
static void remember_freed(gmr_cumem_resource *r, uint64_t key) {
  if (r->freed.count >= FREED_MEMORY_COUNT) gmr__u64_map_clear(&r->freed);
  (void)gmr__u64_map_put(&r->freed, key, 1);
}

static gmr_status cumem_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                   gmr_stream stream) {
  gmr_cumem_resource *r = as_cumem(self);
  uint64_t key = (uint64_t)(uintptr_t)ptr;
  uint64_t value = 0;
  /* Asked before the books: a CUDA call, not to be made under the lock. */
  bool capturing = gmr__cuda_stream_is_capturing(r->cuda, stream);
  /* Check and claim in one step, so that a racing second free of the same
   * pointer is refused instead of unmapping twice, and the block is read
   * only while it is certainly live. */
  pthread_mutex_lock(&r->lock);
  gmr_status st = GMR_OK;
  cumem_block *b = NULL;
  if (!gmr__u64_map_get(&r->live, key, &value)) {
    st = gmr__u64_map_get(&r->freed, key, NULL) ? GMR_ERR_DOUBLE_FREE : GMR_ERR_UNKNOWN_POINTER;
  } else {
    b = (cumem_block *)(uintptr_t)value;
    if (bytes != b->requested_bytes || alignment != b->alignment) {
      st = GMR_ERR_FREE_MISMATCH; /* exactly as asked, not what it rounds to */
    } else if (capturing) {
      st = GMR_ERR_CAPTURE_UNSAFE;
    } else {
      (void)gmr__u64_map_remove(&r->live, key, NULL);
      remember_freed(r, key); /* a racing second free is named a double free */
    }
  }
  pthread_mutex_unlock(&r->lock);
  if (st != GMR_OK) return st;
  int saved = -1;
  if (gmr__cuda_device_enter(r->cuda, r->device, &saved) != cudaSuccess) {
    st = GMR_ERR_CUDA;
  } else {
    /* cuMemUnmap does not wait for kernels that still use the memory. */
    st = r->cuda->device_synchronize() == cudaSuccess ? unmap_block(r, (CUdeviceptr)key, b)
                                                      : GMR_ERR_CUDA;
    gmr__cuda_device_leave(r->cuda, saved);
  }
  pthread_mutex_lock(&r->lock);
  if (st == GMR_OK) {
    r->live_bytes -= b->bytes;
    r->release_count++;
  } else {
    /* Put it back: the map had room for it a moment ago. */
    (void)gmr__u64_map_put(&r->live, key, value);
    (void)gmr__u64_map_remove(&r->freed, key, NULL);
  }
  pthread_mutex_unlock(&r->lock);
  if (st == GMR_OK) free(b);
  return st;
}

static void free_host_side(gmr_cumem_resource *r) {
  gmr__u64_map_clear(&r->live);
  gmr__u64_map_clear(&r->freed);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

static gmr_status cumem_destroy(gmr_resource *self) {
  gmr_cumem_resource *r = as_cumem(self);
  pthread_mutex_lock(&r->lock);
  size_t live = r->live.count;
  pthread_mutex_unlock(&r->lock);
  if (live != 0) return GMR_ERR_BUSY;
  free_host_side(r);
  return GMR_OK;
}

static gmr_status cumem_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  gmr_cumem_resource *r = as_cumem((gmr_resource *)self);
  pthread_mutex_lock(&r->lock);
  out->held_bytes = r->live_bytes;
  out->peak_held_bytes = r->peak_live_bytes;
  pthread_mutex_unlock(&r->lock);
  return GMR_OK;
}

static gmr_status cumem_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  gmr_cumem_resource *r = as_cumem((gmr_resource *)self);
  pthread_mutex_lock(&r->lock);
  out->held_bytes = r->live_bytes;
  out->live_bytes = r->live_bytes; /* a leaf keeps nothing free */
  pthread_mutex_unlock(&r->lock);
  out->free_bytes = 0;
  out->largest_free_block_bytes = 0;
  out->free_block_count = 0;
  return GMR_OK;
}

static const gmr_resource_vtbl cumem_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "cumem_resource",
    .allocate = cumem_allocate,
    .deallocate = cumem_deallocate,
    .destroy = cumem_destroy,
    .get_footprint = cumem_get_footprint,
    .get_memory_info = cumem_get_memory_info,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type cumem_type = {&cumem_vtbl, NULL};

/* ---- create ---------------------------------------------------------------- */

static gmr_status resolve_peers(gmr_cumem_resource *r, const gmr_cumem_resource_config *c,
                                int device_count, gmr_failure *failure) {
  r->access_devices[0] = r->device;
  r->access_count = 1;
  if (c->peer_access == GMR_CUMEM_PEERS_NONE) return GMR_OK;
  bool all = c->peer_access == GMR_CUMEM_PEERS_ALL;
  size_t n = all ? (size_t)device_count : c->peer_count;
  for (size_t i = 0; i < n; ++i) {
    int d = all ? (int)i : c->peers[i];
    if (all && d == r->device) continue;
    if (!all && (d < 0 || d >= device_count || d == r->device)) {
      return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                         "cumem: peer %d is not another device (devices 0..%d, the resource's "
                         "is %d)",
                         d, device_count - 1, r->device);
    }
    bool seen = false;
    for (size_t j = 1; j < r->access_count; ++j) seen = seen || r->access_devices[j] == d;
    if (seen) continue;
    int can = 0;
    cudaError_t err = r->vmm->device_can_access_peer(&can, d, r->device);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaDeviceCanAccessPeer", err);
    if (!can) {
      if (all) continue;
      return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                         "cumem: device %d cannot access device %d's memory", d, r->device);
    }
    r->access_devices[r->access_count++] = d;
  }
  return GMR_OK;
}

static gmr_status query_device(gmr_cumem_resource *r, bool nccl_ready, gmr_failure *failure) {
  CUresult cu = r->vmm->init(r->device);
  if (cu != CUDA_SUCCESS) {
    return gmr__cu_fail(r->vmm, failure, "cuInit (driver entry points)", cu, NULL);
  }
  int supported = 0;
  cu = r->vmm->device_get_attribute(
      &supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, r->device);
  if (cu != CUDA_SUCCESS) return gmr__cu_fail(r->vmm, failure, "cuDeviceGetAttribute", cu, NULL);
  if (!supported) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                       "cumem: device %d has no virtual memory management support; use "
                       "cuda(kind=device)",
                       r->device);
  }
  r->prop = (gmr__vmm_prop){r->device, 0, false};
  atomic_init(&r->fabric_refused, false);
  if (nccl_ready) gmr__vmm_prop_for_nccl(r->vmm, &r->prop);
  cu = r->vmm->get_granularity(&r->granularity_bytes, &r->prop, nccl_ready);
  if (cu != CUDA_SUCCESS) {
    return gmr__cu_fail(r->vmm, failure, "cuMemGetAllocationGranularity", cu, NULL);
  }
  return GMR_OK;
}

static gmr_status cumem_resource_create_impl(const gmr_cumem_resource_config *config,
                                             gmr_cumem_resource **out, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out == NULL) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT, "cumem: out is NULL");
  }
  *out = NULL;
  gmr_cumem_resource_config c = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) c = *config;
  if ((unsigned)c.peer_access > GMR_CUMEM_PEERS_LIST || c.peer_count > GMR_CUMEM_MAX_PEERS) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                       "cumem: peer_access must be none, all or a list of at most %d "
                       "devices",
                       GMR_CUMEM_MAX_PEERS);
  }
  gmr_cumem_resource *r = calloc(1, sizeof *r);
  if (r == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "cumem: host memory");
  r->base.vtbl = &cumem_vtbl;
  gmr__resource_type_register(&cumem_type);
  r->cuda = gmr__cuda();
  r->vmm = gmr__cuda_vmm(r->cuda);
  pthread_mutex_init(&r->lock, NULL);
  int device_count = 0;
  gmr_status st = GMR_OK;
  cudaError_t err = r->cuda->get_device_count(&device_count);
  if (err != cudaSuccess) {
    st = gmr__cuda_fail(failure, "cudaGetDeviceCount", err);
  } else if (c.device == GMR_CUMEM_CURRENT_DEVICE) {
    err = r->cuda->get_device(&r->device);
    if (err != cudaSuccess) st = gmr__cuda_fail(failure, "cudaGetDevice", err);
  } else if (c.device < 0 || c.device >= device_count) {
    st = gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                     "cumem: device %d does not exist (devices 0..%d)", c.device,
                     device_count - 1);
  } else {
    r->device = c.device;
  }
  if (st == GMR_OK) st = query_device(r, c.nccl_ready, failure);
  if (st == GMR_OK) st = resolve_peers(r, &c, device_count, failure);
  if (st != GMR_OK) {
    free_host_side(r);
    return st;
  }
  *out = r;
  return GMR_OK;
}

gmr_status gmr_cumem_resource_create(const gmr_cumem_resource_config *config,
                                     gmr_cumem_resource **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, cumem_resource_create_impl(config, out, f));
}

gmr_status gmr_cumem_resource_get_stats(gmr_cumem_resource *r, gmr_cumem_resource_stats *out) {
  if (r == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_cumem_resource_stats s;
  memset(&s, 0, sizeof s);
  pthread_mutex_lock(&r->lock);
  s.device = r->device;
  s.granularity_bytes = r->granularity_bytes;
  s.handle_types = r->prop.handle_types;
  if (atomic_load_explicit(&r->fabric_refused, memory_order_relaxed)) {
    s.handle_types &= ~(unsigned)CU_MEM_HANDLE_TYPE_FABRIC;
  }
  s.gpu_direct_rdma = r->prop.gpu_direct_rdma;
  s.access_device_count = r->access_count;
  s.live_count = r->live.count;
  s.live_bytes = r->live_bytes;
  s.peak_live_bytes = r->peak_live_bytes;
  s.create_count = r->create_count;
  s.release_count = r->release_count;
  pthread_mutex_unlock(&r->lock);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}
