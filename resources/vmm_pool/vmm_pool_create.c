/*
 * resources/vmm_pool/vmm_pool_create.c: gmr_vmm_pool_resource_create(): the
 * device's VMM properties, the page and VA chunk sizes, peers, the first VA
 * chunk and the eager pages (gmr/vmm_pool_resource.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/failure.h"
#include "core/resource_type.h"
#include "resources/vmm_pool/vmm_pool_internal.h"

/* gmr_resource_downcast() knows the type by this, and gmr_resource_check()
 * its books (core/resource_type.h). */
static const gmr__resource_type vmm_pool_type = {&gmr__vmm_pool_vtbl, gmr__vmm_pool_check_books};

#define DEFAULT_PAGE_BYTES ((size_t)2 << 20)
/* FINE: when the live peak has not grown since memory last moved, a request
 * may hold up to this much more (percent of the live peak) instead of
 * moving memory again, so that a repeating program settles without moves. */
#define FINE_STEADY_PERCENT 1u

static gmr_status create_fail(gmr_failure *failure, gmr_status st, const char *message) {
  snprintf(failure->message, sizeof failure->message, "%s", message);
  return st;
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
      return create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
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
      return create_fail(failure, GMR_ERR_UNSUPPORTED, msg);
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
    return create_fail(failure, GMR_ERR_UNSUPPORTED, msg);
  }
  p->prop = (gmr__vmm_prop){p->device, 0, false};
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
    return create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  }
  p->va_chunk_bytes = c->va_chunk_bytes;
  if (p->va_chunk_bytes == 0) {
    size_t free_bytes = 0, total_bytes = 0;
    int saved = -1;
    cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
    if (err == cudaSuccess) {
      err = p->cuda->mem_get_info(&free_bytes, &total_bytes);
      gmr__cuda_device_leave(p->cuda, saved);
    }
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaMemGetInfo", err);
    p->va_chunk_bytes = gmr__align_up(total_bytes, p->page_bytes);
  } else if (p->va_chunk_bytes % p->page_bytes != 0) {
    snprintf(msg, sizeof msg, "vmm_pool: va_chunk_bytes %zu is not a multiple of the page, %zu",
             p->va_chunk_bytes, p->page_bytes);
    return create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  }
  return GMR_OK;
}

/* initial_pages that cannot be mapped (st OUT_OF_MEMORY): the message says
 * what was asked, how many pages the device has room for and the option to
 * lower; the driver's code stays in the record. Pre: nothing mapped. */
static gmr_status initial_pages_fail(gmr_vmm_pool_resource *p, size_t pages, gmr_status st,
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

/* Map `pages` pages as the first free region (VPMM_PAGES). */
static gmr_status map_initial_pages(gmr_vmm_pool_resource *p, size_t pages, gmr_failure *failure) {
  if (pages == 0) return GMR_OK;
  if (pages > GMR_MAX_ALLOCATION_BYTES / p->page_bytes) {
    return initial_pages_fail(p, pages, GMR_ERR_OUT_OF_MEMORY, failure);
  }
  size_t bytes = pages * p->page_bytes;
  vmm_region *hole = p->roots->first;
  if (hole->bytes < bytes) {
    vmm_root *root = NULL;
    CUresult cu = gmr__vmm_root_add(p, bytes, &root);
    if (cu != CUDA_SUCCESS) return gmr__cu_fail(p->vmm, failure, "cuMemAddressReserve", cu, NULL);
    hole = root->first;
  }
  vmm_region *tail = gmr__vmm_region_new();
  if (tail == NULL) return create_fail(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory");
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
  if (err != cudaSuccess) {
    gmr__vmm_region_delete(tail);
    return gmr__cuda_fail(failure, "cudaSetDevice", err);
  }
  gmr_status st = gmr__vmm_map_new_pages(p, hole->root, hole->addr, pages, failure);
  gmr__cuda_device_leave(p->cuda, saved);
  if (st != GMR_OK) {
    gmr__vmm_region_delete(tail);
    /* The driver's out of memory (not the host's): the device is too small. */
    bool device_full = st == GMR_ERR_OUT_OF_MEMORY && failure->cuda_error != 0;
    return device_full ? initial_pages_fail(p, pages, st, failure) : st;
  }
  if (bytes < hole->bytes) {
    gmr__vmm_region_split(p, hole, bytes, tail);
  } else {
    gmr__vmm_region_delete(tail);
  }
  hole->stream = NULL;
  hole->id = p->next_id++;
  gmr__vmm_set_state(p, hole, VMM_FREE);
  return GMR_OK;
}

vmf_engine *gmr__vmm_engine_new(gmr_vmm_pool_resource *p) {
  /* Cache-line aligned (sizeof is a multiple of the line): one shard's
   * writes never touch a line another shard's lock or counters sit on. */
  vmf_engine *e = aligned_alloc(_Alignof(vmf_engine), sizeof *e);
  if (e == NULL) return NULL;
  memset(e, 0, sizeof *e);
  e->cuda = p->cuda;
  e->vmm = p->vmm;
  gmr__vmm_unreleased_init(&e->unreleased, p->cuda, p->vmm);
  e->device = p->device;
  e->access_devices = p->access_devices;
  e->access_count = p->access_count;
  e->prop = &p->prop;
  e->page_bytes = p->page_bytes;
  e->streams_outlive = p->config.streams_outlive_resource;
  e->min_growth_bytes = p->page_bytes;
  return e;
}

gmr_status gmr__vmm_shard_new(gmr_vmm_pool_resource *p, bool prefill, vmf_engine **out,
                              gmr_failure *failure) {
  const gmr_vmm_pool_resource_config *c = &p->config;
  *out = NULL;
  vmf_engine *e = gmr__vmm_engine_new(p);
  if (e == NULL) return create_fail(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory");
  e->va_chunk_bytes = p->va_chunk_bytes;
  e->growth_percent = c->growth_percent;
  e->remap_permille = c->remap_permille;
  e->handle_divisor = c->handle_divisor;
  e->steady_percent = FINE_STEADY_PERCENT;
  e->max_growth_bytes = SIZE_MAX;
  e->total = &p->total;
  e->default_tag = p->default_tag;
  if (!gmr__vmf_init(e)) {
    free(e);
    return create_fail(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory");
  }
  gmr_status st = gmr__vmf_native_create(e, failure);
  if (st == GMR_OK && prefill && c->initial_pages > 0) {
    if (c->initial_pages > GMR_MAX_ALLOCATION_BYTES / p->page_bytes) {
      st = initial_pages_fail(p, c->initial_pages, GMR_ERR_OUT_OF_MEMORY, failure);
    } else {
      int saved = -1;
      cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
      if (err != cudaSuccess) {
        st = gmr__cuda_fail(failure, "cudaSetDevice", err);
      } else {
        st = gmr__vmf_native_prefill(e, c->initial_pages * p->page_bytes, failure);
        gmr__cuda_device_leave(p->cuda, saved);
        if (st == GMR_ERR_OUT_OF_MEMORY && failure->cuda_error != 0) {
          st = initial_pages_fail(p, c->initial_pages, st, failure); /* the device is too small */
        }
      }
    }
  }
  if (st != GMR_OK) {
    (void)gmr__vmf_native_destroy(e);
    gmr__vmf_free_host(e);
    free(e);
    return st;
  }
  *out = e;
  return GMR_OK;
}

/* Shards when the config says 0: one per CPU, at most this many (each made
 * only when a thread first uses it). */
#define FINE_DEFAULT_MAX_SHARDS 16u

gmr_status gmr__vmm_fine_create(gmr_vmm_pool_resource *p, gmr_failure *failure) {
  uint32_t shards = p->config.shard_count;
  if (shards == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    shards = cpus < 1 ? 1u : cpus > (long)FINE_DEFAULT_MAX_SHARDS ? FINE_DEFAULT_MAX_SHARDS
                                                                   : (uint32_t)cpus;
  }
  p->shard_count = shards;
  atomic_init(&p->total.held_bytes, 0);
  atomic_init(&p->total.peak_held_bytes, 0);
  atomic_init(&p->sleeping, false);
  atomic_init(&p->shards_made, 1u);
  for (uint32_t i = 0; i < GMR_VMM_POOL_MAX_SHARDS; ++i) atomic_init(&p->shards[i], NULL);
  vmf_engine *e = NULL;
  gmr_status st = gmr__vmm_shard_new(p, true, &e, failure);
  if (st != GMR_OK) return st;
  p->fine = e;
  atomic_store_explicit(&p->shards[0], e, memory_order_release);
  return GMR_OK;
}

static gmr_status vmm_pool_resource_create_impl(const gmr_vmm_pool_resource_config *config,
                                                gmr_vmm_pool_resource **out, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out == NULL) return create_fail(failure, GMR_ERR_INVALID_ARGUMENT, "vmm_pool: out is NULL");
  *out = NULL;
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) c = *config;
  if ((unsigned)c.peer_access > GMR_VMM_POOL_PEERS_LIST || c.peer_count > GMR_VMM_POOL_MAX_PEERS) {
    char msg[GMR_FAILURE_MESSAGE_BYTES];
    snprintf(msg, sizeof msg,
             "vmm_pool: peer_access must be none, all or a list of at most %d devices",
             GMR_VMM_POOL_MAX_PEERS);
    return create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  }
  if ((unsigned)c.placement > GMR_VMM_POOL_PLACEMENT_FINE) {
    return create_fail(failure, GMR_ERR_INVALID_ARGUMENT,
                       "vmm_pool: placement must be GMR_VMM_POOL_PLACEMENT_PAGES or _FINE");
  }
  if (c.shard_count > GMR_VMM_POOL_MAX_SHARDS) {
    char msg[GMR_FAILURE_MESSAGE_BYTES];
    snprintf(msg, sizeof msg, "vmm_pool: shard_count %u is above the most, %d", c.shard_count,
             GMR_VMM_POOL_MAX_SHARDS);
    return create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  }
  if (c.growth_percent > 1000 ||
      (c.remap_permille > 10000 && c.remap_permille != GMR_VMM_POOL_REMAP_NEVER)) {
    return create_fail(failure, GMR_ERR_INVALID_ARGUMENT,
                       "vmm_pool: growth_percent is at most 1000 and remap_permille at most 10000 "
                       "(or GMR_VMM_POOL_REMAP_NEVER)");
  }
  gmr_vmm_pool_resource *p = calloc(1, sizeof *p);
  if (p == NULL) return create_fail(failure, GMR_ERR_OUT_OF_MEMORY, "vmm_pool: host memory");
  p->base.vtbl = &gmr__vmm_pool_vtbl;
  gmr__resource_type_register(&vmm_pool_type);
  p->event_cache = (gmr__event_cache)GMR__EVENT_CACHE_INIT(256);
  p->config = c;
  p->cuda = gmr__cuda();
  p->vmm = gmr__cuda_vmm(p->cuda);
  gmr__vmm_unreleased_init(&p->unreleased, p->cuda, p->vmm);
  pthread_mutex_init(&p->lock, NULL);
  p->small_pool_enabled = c.small_pool;
  atomic_init(&p->small, NULL);

  int device_count = 0;
  cudaError_t err = p->cuda->get_device_count(&device_count);
  gmr_status st = GMR_OK;
  if (err != cudaSuccess) {
    st = gmr__cuda_fail(failure, "cudaGetDeviceCount", err);
  } else if (c.device == GMR_VMM_POOL_CURRENT_DEVICE) {
    err = p->cuda->get_device(&p->device);
    if (err != cudaSuccess) st = gmr__cuda_fail(failure, "cudaGetDevice", err);
  } else if (c.device < 0 || c.device >= device_count) {
    char msg[GMR_FAILURE_MESSAGE_BYTES];
    snprintf(msg, sizeof msg, "vmm_pool: device %d does not exist (devices 0..%d)", c.device,
             device_count - 1);
    st = create_fail(failure, GMR_ERR_INVALID_ARGUMENT, msg);
  } else {
    p->device = c.device;
  }
  if (st == GMR_OK) st = query_device(p, &c, failure);
  if (st == GMR_OK) st = resolve_peers(p, &c, device_count, failure);
  if (st == GMR_OK && c.placement == GMR_VMM_POOL_PLACEMENT_FINE) {
    st = gmr__vmm_fine_create(p, failure);
    if (st == GMR_OK) {
      *out = p;
      return GMR_OK;
    }
  } else if (st == GMR_OK) {
    vmm_root *root = NULL;
    CUresult cu = gmr__vmm_root_add(p, p->va_chunk_bytes, &root);
    if (cu != CUDA_SUCCESS) st = gmr__cu_fail(p->vmm, failure, "cuMemAddressReserve", cu, NULL);
    if (st == GMR_OK) st = map_initial_pages(p, c.initial_pages, failure);
  }
  if (st != GMR_OK) {
    while (p->last_root != NULL) {
      if (!gmr__vmm_root_remove_last(p)) break; /* cannot happen: nothing is mapped */
    }
    gmr__vmm_free_host_side(p);
    return st;
  }
  *out = p;
  return GMR_OK;
}

gmr_status gmr_vmm_pool_resource_create(const gmr_vmm_pool_resource_config *config,
                                        gmr_vmm_pool_resource **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, vmm_pool_resource_create_impl(config, out, f));
}
