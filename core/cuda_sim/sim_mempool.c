/*
 * core/cuda_sim/sim_mempool.c (internal): memory pools (cudaMemPoolCreate and
 * its attributes, trimming, the release threshold) and stream-ordered
 * allocation from them (cudaMallocFromPoolAsync, cudaFreeAsync).
 */
#include <stdlib.h>

#include "core/cuda_sim/sim_internal.h"

/* Give a pool's unused reserve above `keep` back to its device. */
static void pool_trim(gmr__sim_pool *p, size_t keep) {
  size_t target = p->used_bytes > keep ? p->used_bytes : keep;
  if (p->reserved_bytes > target) {
    gmr__sim_usage_sub(&gmr__sim.device[p->device], p->reserved_bytes - target, 0);
    p->reserved_bytes = target;
  }
}

/* At a synchronisation, pools release what exceeds their release threshold
 * (cudaMemPoolAttrReleaseThreshold semantics). */
void gmr__sim_pools_release_at_sync(void) {
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&gmr__sim.objects, &cursor, &key, &kind)) {
    if (kind != GMR__SIM_OBJ_POOL) continue;
    gmr__sim_pool *p = (gmr__sim_pool *)(uintptr_t)key;
    size_t keep = p->release_threshold_bytes > SIZE_MAX ? SIZE_MAX
                                                        : (size_t)p->release_threshold_bytes;
    pool_trim(p, keep);
  }
}

cudaError_t gmr__sim_mem_pool_create(cudaMemPool_t *pool, int device) {
  gmr__sim_lock();
  *pool = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_MEM_POOL_CREATE);
  if (err == cudaSuccess && (device < 0 || device >= gmr__sim.config.device_count)) {
    err = cudaErrorInvalidDevice;
  }
  if (err == cudaSuccess && !gmr__sim.config.memory_pools_supported) err = cudaErrorNotSupported;
  if (err == cudaSuccess) {
    gmr__sim_pool *p = calloc(1, sizeof *p);
    if (p == NULL || !gmr__sim_add_object(p, GMR__SIM_OBJ_POOL)) {
      free(p);
      err = cudaErrorMemoryAllocation;
    } else {
      p->device = device;
      p->release_threshold_bytes = 0; /* CUDA's default */
      *pool = (cudaMemPool_t)(void *)p;
    }
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_mem_pool_destroy(cudaMemPool_t pool) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_MEM_POOL_DESTROY);
  if (err == cudaSuccess && !gmr__sim_live_object(pool, GMR__SIM_OBJ_POOL)) {
    err = cudaErrorInvalidValue;
  }
  if (err == cudaSuccess) {
    gmr__sim_pool *p = (gmr__sim_pool *)(void *)pool;
    if (p->used_bytes != 0) {
      /* CUDA defers the release until the last allocation is freed; the
       * simulation refuses instead, so tests notice the leak. */
      err = cudaErrorInvalidValue;
    } else {
      pool_trim(p, 0);
      gmr__sim_remove_object(p);
      free(p);
    }
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_mem_pool_set_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                            uint64_t value) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_MEM_POOL_SET_ATTRIBUTE);
  if (err == cudaSuccess && !gmr__sim_live_object(pool, GMR__SIM_OBJ_POOL)) {
    err = cudaErrorInvalidValue;
  }
  if (err == cudaSuccess) {
    gmr__sim_pool *p = (gmr__sim_pool *)(void *)pool;
    switch (attr) {
      case cudaMemPoolAttrReleaseThreshold:
        p->release_threshold_bytes = value;
        break;
      case cudaMemPoolAttrReservedMemHigh:
        p->reserved_high_bytes = p->reserved_bytes; /* only a reset is allowed */
        break;
      case cudaMemPoolAttrUsedMemHigh:
        p->used_high_bytes = p->used_bytes;
        break;
      default:
        break; /* reuse policies: accepted, not simulated */
    }
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_mem_pool_get_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                            uint64_t *value) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_MEM_POOL_GET_ATTRIBUTE);
  if (err == cudaSuccess && !gmr__sim_live_object(pool, GMR__SIM_OBJ_POOL)) {
    err = cudaErrorInvalidValue;
  }
  if (err == cudaSuccess) {
    gmr__sim_pool *p = (gmr__sim_pool *)(void *)pool;
    switch (attr) {
      case cudaMemPoolAttrReleaseThreshold:
        *value = p->release_threshold_bytes;
        break;
      case cudaMemPoolAttrReservedMemCurrent:
        *value = p->reserved_bytes;
        break;
      case cudaMemPoolAttrReservedMemHigh:
        *value = p->reserved_high_bytes;
        break;
      case cudaMemPoolAttrUsedMemCurrent:
        *value = p->used_bytes;
        break;
      case cudaMemPoolAttrUsedMemHigh:
        *value = p->used_high_bytes;
        break;
      default:
        *value = 1; /* reuse policies are on by default */
        break;
    }
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_mem_pool_trim_to(cudaMemPool_t pool, size_t keep) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_MEM_POOL_TRIM_TO);
  if (err == cudaSuccess && !gmr__sim_live_object(pool, GMR__SIM_OBJ_POOL)) {
    err = cudaErrorInvalidValue;
  }
  if (err == cudaSuccess) pool_trim((gmr__sim_pool *)(void *)pool, keep);
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_malloc_from_pool_async(void **ptr, size_t bytes, cudaMemPool_t pool,
                                            cudaStream_t stream) {
  gmr__sim_lock();
  *ptr = NULL;
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC);
  if (err == cudaSuccess && !gmr__sim_live_object(pool, GMR__SIM_OBJ_POOL)) {
    err = cudaErrorInvalidValue;
  }
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  if (err == cudaSuccess && bytes == 0) err = cudaErrorInvalidValue;
  if (err == cudaSuccess) {
    /* Stream-ordered allocation is legal during capture (CUDA makes a graph
     * memory node); the simulation hands out memory at once either way. */
    gmr__sim_pool *p = (gmr__sim_pool *)(void *)pool;
    size_t rounded = gmr__sim_round_up(bytes);
    size_t grow = p->used_bytes + rounded > p->reserved_bytes
                      ? p->used_bytes + rounded - p->reserved_bytes
                      : 0;
    if (gmr__sim.device[p->device].used_bytes + grow > gmr__sim.config.device_memory_bytes) {
      /* A real pool first releases its unused reserve; so does the simulation. */
      pool_trim(p, 0);
      grow = p->used_bytes + rounded > p->reserved_bytes
                 ? p->used_bytes + rounded - p->reserved_bytes
                 : 0;
      if (gmr__sim.device[p->device].used_bytes + grow > gmr__sim.config.device_memory_bytes) {
        err = cudaErrorMemoryAllocation;
      }
    }
    if (err == cudaSuccess) err = gmr__sim_alloc(ptr, bytes, p->device, GMR__SIM_MEM_POOL, p);
    if (err == cudaSuccess && !gmr__sim_capture_add_node(s)) {
      (void)gmr__sim_release(*ptr, false, true);
      *ptr = NULL;
      err = cudaErrorMemoryAllocation;
    }
    if (err == cudaSuccess) {
      p->used_bytes += rounded;
      if (p->used_bytes > p->used_high_bytes) p->used_high_bytes = p->used_bytes;
      if (grow > 0) {
        p->reserved_bytes += grow;
        gmr__sim_usage_add(&gmr__sim.device[p->device], grow, 0);
      }
      if (p->reserved_bytes > p->reserved_high_bytes) p->reserved_high_bytes = p->reserved_bytes;
    }
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_free_async(void *ptr, cudaStream_t stream) {
  gmr__sim_lock();
  gmr__sim_stream *s = NULL;
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_FREE_ASYNC);
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  if (err == cudaSuccess && ptr != NULL) err = gmr__sim_release(ptr, false, true);
  if (err == cudaSuccess) (void)gmr__sim_capture_add_node(s); /* the free's node (best effort) */
  gmr__sim_unlock();
  return err;
}
