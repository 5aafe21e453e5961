/*
 * core/cuda_sim.c (internal): the host simulation of the CUDA layer, and the
 * public control functions of gmr/cuda_sim.h.
 *
 * One mutex guards all simulated state; the simulation is for correctness,
 * not speed. Handles given out (streams, events, pools, graphs) are pointers
 * to the structs below, checked against a table of live objects on every use,
 * so a stale or foreign handle gives cudaErrorInvalidResourceHandle rather
 * than a crash.
 */
/* mmap flags MAP_ANONYMOUS and MAP_NORESERVE are not in strict C11/POSIX. */
#define _DEFAULT_SOURCE

#include <pthread.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_layer.h"
#include "core/cuda_sim_internal.h"
#include "core/u64_map.h"
#include "gmr/cuda_sim.h"

#define SIM_MAX_DEVICES 16
#define SIM_ALIGNMENT ((size_t)256)

typedef enum sim_object_kind {
  SIM_OBJ_ALLOCATION = 1,
  SIM_OBJ_STREAM,
  SIM_OBJ_EVENT,
  SIM_OBJ_POOL,
  SIM_OBJ_GRAPH
} sim_object_kind;

typedef enum sim_memory_kind { SIM_MEM_DEVICE, SIM_MEM_MANAGED, SIM_MEM_PINNED, SIM_MEM_POOL } sim_memory_kind;

typedef struct sim_pool {
  int device;
  uint64_t release_threshold_bytes;
  size_t used_bytes;     /* live allocations from the pool */
  size_t reserved_bytes; /* what the pool holds from the device */
  size_t used_high_bytes;
  size_t reserved_high_bytes;
} sim_pool;

typedef struct sim_allocation {
  size_t bytes;
  bool mapped; /* backed by mmap (large), else by aligned_alloc */
  int device; /* -1 for pinned host memory */
  sim_memory_kind kind;
  sim_pool *pool; /* SIM_MEM_POOL only */
} sim_allocation;

typedef struct sim_stream {
  uint64_t id; /* unique for the process, never reused */
  int device;
  bool held;
  uint64_t recorded_seq;  /* sequence number of the last event recorded */
  uint64_t completed_seq; /* events up to this number have completed */
  uint64_t wait_count;
  enum cudaStreamCaptureStatus capture_status;
  unsigned long long capture_id;
  enum cudaStreamCaptureMode capture_mode; /* of the capture in progress */
  uint64_t capture_thread;                 /* sim thread id of the capturing thread */
} sim_stream;

typedef struct sim_event {
  uint64_t stream_id; /* 0: never recorded, or recorded on the default stream */
  uint64_t seq;
} sim_event;

typedef struct sim_graph {
  unsigned long long capture_id;
} sim_graph;

typedef struct sim_usage {
  size_t used_bytes;
  size_t peak_used_bytes;
  size_t allocation_count;
} sim_usage;

typedef struct sim_fault {
  bool armed;
  uint64_t skip_count;
  uint64_t fail_count;
  cudaError_t error;
} sim_fault;

typedef struct sim_state {
  bool enabled;
  gmr_cuda_sim_config config;
  uint64_t epoch; /* bumped at each enable: resets threads' current device */
  sim_usage device[SIM_MAX_DEVICES];
  sim_usage host;
  gmr__u64_map objects;     /* handle address -> sim_object_kind */
  gmr__u64_map allocations; /* address -> sim_allocation * */
  uint64_t next_stream_id;
  unsigned long long next_capture_id;
  size_t active_capture_count;
  uint64_t stale_handle_count; /* calls that named a stream/event/pool/graph not alive */
  sim_fault faults[GMR_CUDA_CALL_COUNT];
} sim_state;

static pthread_mutex_t sim_mutex = PTHREAD_MUTEX_INITIALIZER;
static sim_state sim;
static _Atomic uint64_t call_counts[GMR_CUDA_CALL_COUNT];

static _Thread_local uint64_t thread_epoch;
static _Thread_local int thread_device;
/* The calling thread's capture interaction mode (CUDA's default: global). */
static _Thread_local enum cudaStreamCaptureMode thread_capture_mode = cudaStreamCaptureModeGlobal;
static _Atomic uint64_t next_thread_id;
static _Thread_local uint64_t thread_id;

static uint64_t this_thread_id(void) {
  if (thread_id == 0) thread_id = ++next_thread_id;
  return thread_id;
}

static void lock(void) { pthread_mutex_lock(&sim_mutex); }
static void unlock(void) { pthread_mutex_unlock(&sim_mutex); }

/* ---- helpers (called with the mutex held) ------------------------------- */

/* Count the call and apply an injected failure, if one is due. */
static cudaError_t enter_call(gmr_cuda_call call) {
  atomic_fetch_add_explicit(&call_counts[call], 1, memory_order_relaxed);
  sim_fault *f = &sim.faults[call];
  if (!f->armed) return cudaSuccess;
  if (f->skip_count > 0) {
    f->skip_count--;
    return cudaSuccess;
  }
  if (f->fail_count == 0) {
    f->armed = false;
    return cudaSuccess;
  }
  if (f->fail_count != UINT64_MAX) f->fail_count--;
  return f->error;
}

static int current_device(void) {
  if (thread_epoch != sim.epoch) {
    thread_epoch = sim.epoch;
    thread_device = 0;
  }
  return thread_device;
}

static bool is_object(const void *handle, sim_object_kind kind) {
  uint64_t k = 0;
  return handle != NULL && gmr__u64_map_get(&sim.objects, (uint64_t)(uintptr_t)handle, &k) &&
         k == (uint64_t)kind;
}

/* is_object() for a handle a CUDA call received: a dead or foreign handle is
 * counted, because real CUDA would crash or misbehave on it. */
static bool live_object(const void *handle, sim_object_kind kind) {
  if (is_object(handle, kind)) return true;
  sim.stale_handle_count++;
  return false;
}

/* NULL and the runtime's special handles (cudaStreamLegacy, cudaStreamPerThread)
 * are the default stream; anything else must be a live simulated stream. */
static bool stream_is_default(cudaStream_t s) {
  return s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

static cudaError_t lookup_stream(cudaStream_t s, sim_stream **out) {
  *out = NULL;
  if (stream_is_default(s)) return cudaSuccess;
  if (!live_object(s, SIM_OBJ_STREAM)) return cudaErrorInvalidResourceHandle;
  *out = (sim_stream *)(void *)s;
  return cudaSuccess;
}

static sim_stream *find_stream_by_id(uint64_t id) {
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&sim.objects, &cursor, &key, &kind)) {
    if (kind != SIM_OBJ_STREAM) continue;
    sim_stream *s = (sim_stream *)(uintptr_t)key;
    if (s->id == id) return s;
  }
  return NULL;
}

/* CUDA's capture modes: a potentially unsafe call from a thread that is not
 * in relaxed mode is refused while a global-mode capture is active anywhere,
 * or a thread-local one begun by the calling thread; it invalidates those
 * captures. */
static bool capture_forbids_unsafe_call(void) {
  if (sim.active_capture_count == 0) return false;
  if (thread_capture_mode == cudaStreamCaptureModeRelaxed) return false;
  uint64_t self = this_thread_id();
  bool forbidden = false;
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&sim.objects, &cursor, &key, &kind)) {
    if (kind != SIM_OBJ_STREAM) continue;
    sim_stream *s = (sim_stream *)(uintptr_t)key;
    if (s->capture_status == cudaStreamCaptureStatusNone) continue;
    bool applies = s->capture_mode == cudaStreamCaptureModeGlobal ||
                   (s->capture_mode == cudaStreamCaptureModeThreadLocal && s->capture_thread == self);
    if (!applies) continue;
    forbidden = true;
    if (s->capture_status == cudaStreamCaptureStatusActive) {
      s->capture_status = cudaStreamCaptureStatusInvalidated;
    }
  }
  return forbidden;
}

static bool stream_capturing(const sim_stream *s) {
  return s != NULL && s->capture_status != cudaStreamCaptureStatusNone;
}

static sim_usage *usage_of(int device) { return device < 0 ? &sim.host : &sim.device[device]; }

static void usage_add(sim_usage *u, size_t bytes, long count_delta) {
  u->used_bytes += bytes;
  if (u->used_bytes > u->peak_used_bytes) u->peak_used_bytes = u->used_bytes;
  u->allocation_count = (size_t)((long)u->allocation_count + count_delta);
}

static void usage_sub(sim_usage *u, size_t bytes, long count_delta) {
  u->used_bytes -= bytes;
  u->allocation_count = (size_t)((long)u->allocation_count - count_delta);
}

static size_t round_up(size_t bytes) { return (bytes + SIM_ALIGNMENT - 1) & ~(SIM_ALIGNMENT - 1); }

/* Large simulated allocations are mapped with MAP_NORESERVE: pages cost
 * nothing until touched, so a test can "allocate" tens of GiB of device
 * memory on a machine with less RAM, as replays of real traces do. */
#define SIM_MAP_THRESHOLD_BYTES ((size_t)1 << 20)

static void *host_backing_alloc(size_t bytes, bool *mapped) {
  *mapped = bytes >= SIM_MAP_THRESHOLD_BYTES;
  if (!*mapped) return aligned_alloc(SIM_ALIGNMENT, bytes);
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void host_backing_free(void *p, size_t bytes, bool mapped) {
  if (p == NULL) return;
  if (mapped) {
    munmap(p, bytes);
  } else {
    free(p);
  }
}

/* Take `bytes` of simulated memory on `device` (-1: pinned host) and back it
 * with host memory. The rounding to 256 bytes mirrors cudaMalloc's alignment. */
static cudaError_t sim_alloc(void **ptr, size_t bytes, int device, sim_memory_kind kind,
                             sim_pool *pool) {
  *ptr = NULL;
  if (bytes == 0) return cudaSuccess; /* cudaMalloc(0) succeeds with NULL */
  if (bytes > sim.config.device_memory_bytes) return cudaErrorMemoryAllocation;
  size_t rounded = round_up(bytes);
  if (device >= 0 && kind != SIM_MEM_POOL &&
      sim.device[device].used_bytes + rounded > sim.config.device_memory_bytes) {
    return cudaErrorMemoryAllocation;
  }
  sim_allocation *a = malloc(sizeof *a);
  bool mapped = false;
  void *mem = host_backing_alloc(rounded, &mapped);
  if (a == NULL || mem == NULL ||
      !gmr__u64_map_put(&sim.allocations, (uint64_t)(uintptr_t)mem, (uint64_t)(uintptr_t)a)) {
    free(a);
    host_backing_free(mem, rounded, mapped);
    return cudaErrorMemoryAllocation;
  }
  a->bytes = rounded;
  a->mapped = mapped;
  a->device = device;
  a->kind = kind;
  a->pool = pool;
  if (kind == SIM_MEM_POOL) {
    sim.device[device].allocation_count++;
  } else {
    usage_add(usage_of(device), rounded, 1);
  }
  *ptr = mem;
  return cudaSuccess;
}

static cudaError_t sim_release(void *ptr, bool pinned, bool from_pool) {
  uint64_t v = 0;
  if (!gmr__u64_map_get(&sim.allocations, (uint64_t)(uintptr_t)ptr, &v)) {
    return cudaErrorInvalidValue;
  }
  sim_allocation *a = (sim_allocation *)(uintptr_t)v;
  if ((a->kind == SIM_MEM_PINNED) != pinned) return cudaErrorInvalidValue;
  if (from_pool && a->kind != SIM_MEM_POOL) return cudaErrorInvalidValue;
  gmr__u64_map_remove(&sim.allocations, (uint64_t)(uintptr_t)ptr, NULL);
  if (a->kind == SIM_MEM_POOL) {
    /* The bytes go back to the pool, which keeps them reserved until trimmed. */
    a->pool->used_bytes -= a->bytes;
    sim.device[a->device].allocation_count--;
  } else {
    usage_sub(usage_of(a->device), a->bytes, 1);
  }
  host_backing_free(ptr, a->bytes, a->mapped);
  free(a);
  return cudaSuccess;
}

/* Give a pool's unused reserve above `keep` back to its device. */
static void pool_trim(sim_pool *p, size_t keep) {
  size_t target = p->used_bytes > keep ? p->used_bytes : keep;
  if (p->reserved_bytes > target) {
    usage_sub(&sim.device[p->device], p->reserved_bytes - target, 0);
    p->reserved_bytes = target;
  }
}

/* At a synchronisation, pools release what exceeds their release threshold
 * (cudaMemPoolAttrReleaseThreshold semantics). */
static void pools_release_at_sync(void) {
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&sim.objects, &cursor, &key, &kind)) {
    if (kind != SIM_OBJ_POOL) continue;
    sim_pool *p = (sim_pool *)(uintptr_t)key;
    size_t keep = p->release_threshold_bytes > SIZE_MAX ? SIZE_MAX
                                                        : (size_t)p->release_threshold_bytes;
    pool_trim(p, keep);
  }
}

static void complete_stream(sim_stream *s) {
  if (s != NULL) s->completed_seq = s->recorded_seq;
}

static void complete_all_streams(void) {
  size_t cursor = 0;
  uint64_t key = 0, kind = 0;
  while (gmr__u64_map_next(&sim.objects, &cursor, &key, &kind)) {
    if (kind == SIM_OBJ_STREAM) complete_stream((sim_stream *)(uintptr_t)key);
  }
}

static bool add_object(void *handle, sim_object_kind kind) {
  return gmr__u64_map_put(&sim.objects, (uint64_t)(uintptr_t)handle, (uint64_t)kind);
}

static void remove_object(void *handle) {
  gmr__u64_map_remove(&sim.objects, (uint64_t)(uintptr_t)handle, NULL);
}

/* ---- the ops ------------------------------------------------------------ */

static cudaError_t sim_get_device_count(int *count) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_GET_DEVICE_COUNT);
  if (err == cudaSuccess) *count = sim.config.device_count;
  unlock();
  return err;
}

static cudaError_t sim_get_device(int *device) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_GET_DEVICE);
  if (err == cudaSuccess) *device = current_device();
  unlock();
  return err;
}

static cudaError_t sim_set_device(int device) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_SET_DEVICE);
  if (err == cudaSuccess) {
    if (device < 0 || device >= sim.config.device_count) {
      err = cudaErrorInvalidDevice;
    } else {
      (void)current_device();
      thread_device = device;
    }
  }
  unlock();
  return err;
}

static cudaError_t sim_device_get_attribute(int *value, enum cudaDeviceAttr attr, int device) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_DEVICE_GET_ATTRIBUTE);
  if (err == cudaSuccess && (device < 0 || device >= sim.config.device_count)) {
    err = cudaErrorInvalidDevice;
  }
  if (err == cudaSuccess) {
    switch (attr) {
      case cudaDevAttrMemoryPoolsSupported:
        *value = sim.config.memory_pools_supported ? 1 : 0;
        break;
      case cudaDevAttrManagedMemory:
      case cudaDevAttrConcurrentManagedAccess:
      case cudaDevAttrUnifiedAddressing:
        *value = 1;
        break;
      default:
        *value = 0;
        break;
    }
  }
  unlock();
  return err;
}

static cudaError_t sim_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_MEM_GET_INFO);
  if (err == cudaSuccess) {
    int d = current_device();
    *total_bytes = sim.config.device_memory_bytes;
    *free_bytes = sim.config.device_memory_bytes - sim.device[d].used_bytes;
  }
  unlock();
  return err;
}

static cudaError_t sim_device_synchronize(void) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  if (err == cudaSuccess && capture_forbids_unsafe_call()) err = cudaErrorStreamCaptureUnsupported;
  if (err == cudaSuccess) {
    complete_all_streams();
    pools_release_at_sync();
  }
  unlock();
  return err;
}

static cudaError_t sim_malloc_kind(gmr_cuda_call call, void **ptr, size_t bytes,
                                   sim_memory_kind kind) {
  lock();
  *ptr = NULL;
  cudaError_t err = enter_call(call);
  if (err == cudaSuccess && capture_forbids_unsafe_call()) err = cudaErrorStreamCaptureUnsupported;
  if (err == cudaSuccess) {
    err = sim_alloc(ptr, bytes, kind == SIM_MEM_PINNED ? -1 : current_device(), kind, NULL);
  }
  unlock();
  return err;
}

static cudaError_t sim_malloc(void **ptr, size_t bytes) {
  return sim_malloc_kind(GMR_CUDA_CALL_MALLOC, ptr, bytes, SIM_MEM_DEVICE);
}

static cudaError_t sim_malloc_managed(void **ptr, size_t bytes) {
  return sim_malloc_kind(GMR_CUDA_CALL_MALLOC_MANAGED, ptr, bytes, SIM_MEM_MANAGED);
}

static cudaError_t sim_host_alloc(void **ptr, size_t bytes) {
  return sim_malloc_kind(GMR_CUDA_CALL_HOST_ALLOC, ptr, bytes, SIM_MEM_PINNED);
}

static cudaError_t sim_free_kind(gmr_cuda_call call, void *ptr, bool pinned) {
  lock();
  cudaError_t err = enter_call(call);
  if (err == cudaSuccess && capture_forbids_unsafe_call()) err = cudaErrorStreamCaptureUnsupported;
  if (err == cudaSuccess && ptr != NULL) {
    /* cudaFree synchronises the device first. */
    if (!pinned) complete_all_streams();
    err = sim_release(ptr, pinned, false);
  }
  unlock();
  return err;
}

static cudaError_t sim_free(void *ptr) { return sim_free_kind(GMR_CUDA_CALL_FREE, ptr, false); }

static cudaError_t sim_free_host(void *ptr) {
  return sim_free_kind(GMR_CUDA_CALL_FREE_HOST, ptr, true);
}

static cudaError_t sim_mem_pool_create(cudaMemPool_t *pool, int device) {
  lock();
  *pool = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_MEM_POOL_CREATE);
  if (err == cudaSuccess && (device < 0 || device >= sim.config.device_count)) {
    err = cudaErrorInvalidDevice;
  }
  if (err == cudaSuccess && !sim.config.memory_pools_supported) err = cudaErrorNotSupported;
  if (err == cudaSuccess) {
    sim_pool *p = calloc(1, sizeof *p);
    if (p == NULL || !add_object(p, SIM_OBJ_POOL)) {
      free(p);
      err = cudaErrorMemoryAllocation;
    } else {
      p->device = device;
      p->release_threshold_bytes = 0; /* CUDA's default */
      *pool = (cudaMemPool_t)(void *)p;
    }
  }
  unlock();
  return err;
}

static cudaError_t sim_mem_pool_destroy(cudaMemPool_t pool) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_MEM_POOL_DESTROY);
  if (err == cudaSuccess && !live_object(pool, SIM_OBJ_POOL)) err = cudaErrorInvalidValue;
  if (err == cudaSuccess) {
    sim_pool *p = (sim_pool *)(void *)pool;
    if (p->used_bytes != 0) {
      /* CUDA defers the release until the last allocation is freed; the
       * simulation refuses instead, so tests notice the leak. */
      err = cudaErrorInvalidValue;
    } else {
      pool_trim(p, 0);
      remove_object(p);
      free(p);
    }
  }
  unlock();
  return err;
}

static cudaError_t sim_mem_pool_set_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                              uint64_t value) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_MEM_POOL_SET_ATTRIBUTE);
  if (err == cudaSuccess && !live_object(pool, SIM_OBJ_POOL)) err = cudaErrorInvalidValue;
  if (err == cudaSuccess) {
    sim_pool *p = (sim_pool *)(void *)pool;
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
  unlock();
  return err;
}

static cudaError_t sim_mem_pool_get_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                              uint64_t *value) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_MEM_POOL_GET_ATTRIBUTE);
  if (err == cudaSuccess && !live_object(pool, SIM_OBJ_POOL)) err = cudaErrorInvalidValue;
  if (err == cudaSuccess) {
    sim_pool *p = (sim_pool *)(void *)pool;
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
  unlock();
  return err;
}

static cudaError_t sim_mem_pool_trim_to(cudaMemPool_t pool, size_t keep) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_MEM_POOL_TRIM_TO);
  if (err == cudaSuccess && !live_object(pool, SIM_OBJ_POOL)) err = cudaErrorInvalidValue;
  if (err == cudaSuccess) pool_trim((sim_pool *)(void *)pool, keep);
  unlock();
  return err;
}

static cudaError_t sim_malloc_from_pool_async(void **ptr, size_t bytes, cudaMemPool_t pool,
                                              cudaStream_t stream) {
  lock();
  *ptr = NULL;
  sim_stream *s = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC);
  if (err == cudaSuccess && !live_object(pool, SIM_OBJ_POOL)) err = cudaErrorInvalidValue;
  if (err == cudaSuccess) err = lookup_stream(stream, &s);
  if (err == cudaSuccess && bytes == 0) err = cudaErrorInvalidValue;
  if (err == cudaSuccess) {
    /* Stream-ordered allocation is legal during capture (CUDA makes a graph
     * memory node); the simulation hands out memory at once either way. */
    sim_pool *p = (sim_pool *)(void *)pool;
    size_t rounded = round_up(bytes);
    size_t grow = p->used_bytes + rounded > p->reserved_bytes
                      ? p->used_bytes + rounded - p->reserved_bytes
                      : 0;
    if (sim.device[p->device].used_bytes + grow > sim.config.device_memory_bytes) {
      /* A real pool first releases its unused reserve; so does the simulation. */
      pool_trim(p, 0);
      grow = p->used_bytes + rounded > p->reserved_bytes ? p->used_bytes + rounded - p->reserved_bytes
                                                         : 0;
      if (sim.device[p->device].used_bytes + grow > sim.config.device_memory_bytes) {
        err = cudaErrorMemoryAllocation;
      }
    }
    if (err == cudaSuccess) err = sim_alloc(ptr, bytes, p->device, SIM_MEM_POOL, p);
    if (err == cudaSuccess) {
      p->used_bytes += rounded;
      if (p->used_bytes > p->used_high_bytes) p->used_high_bytes = p->used_bytes;
      if (grow > 0) {
        p->reserved_bytes += grow;
        usage_add(&sim.device[p->device], grow, 0);
      }
      if (p->reserved_bytes > p->reserved_high_bytes) p->reserved_high_bytes = p->reserved_bytes;
    }
  }
  unlock();
  return err;
}

static cudaError_t sim_free_async(void *ptr, cudaStream_t stream) {
  lock();
  sim_stream *s = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_FREE_ASYNC);
  if (err == cudaSuccess) err = lookup_stream(stream, &s);
  if (err == cudaSuccess && ptr != NULL) err = sim_release(ptr, false, true);
  unlock();
  return err;
}

static cudaError_t sim_stream_create(cudaStream_t *stream) {
  lock();
  *stream = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_STREAM_CREATE);
  if (err == cudaSuccess) {
    sim_stream *s = calloc(1, sizeof *s);
    if (s == NULL || !add_object(s, SIM_OBJ_STREAM)) {
      free(s);
      err = cudaErrorMemoryAllocation;
    } else {
      s->id = ++sim.next_stream_id;
      s->device = current_device();
      s->capture_status = cudaStreamCaptureStatusNone;
      *stream = (cudaStream_t)(void *)s;
    }
  }
  unlock();
  return err;
}

static cudaError_t sim_stream_destroy(cudaStream_t stream) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_STREAM_DESTROY);
  if (err == cudaSuccess && !live_object(stream, SIM_OBJ_STREAM)) {
    err = cudaErrorInvalidResourceHandle;
  }
  if (err == cudaSuccess) {
    sim_stream *s = (sim_stream *)(void *)stream;
    if (s->capture_status != cudaStreamCaptureStatusNone) sim.active_capture_count--;
    remove_object(s); /* events recorded on it now count as complete */
    free(s);
  }
  unlock();
  return err;
}

static cudaError_t sim_stream_synchronize(cudaStream_t stream) {
  lock();
  sim_stream *s = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_STREAM_SYNCHRONIZE);
  if (err == cudaSuccess) err = lookup_stream(stream, &s);
  if (err == cudaSuccess && capture_forbids_unsafe_call()) err = cudaErrorStreamCaptureUnsupported;
  if (err == cudaSuccess) {
    if (s == NULL) {
      complete_all_streams(); /* the legacy default stream waits for all */
    } else {
      complete_stream(s);
    }
    pools_release_at_sync();
  }
  unlock();
  return err;
}

static cudaError_t sim_stream_wait_event(cudaStream_t stream, cudaEvent_t event) {
  lock();
  sim_stream *s = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_STREAM_WAIT_EVENT);
  if (err == cudaSuccess) err = lookup_stream(stream, &s);
  if (err == cudaSuccess && !live_object(event, SIM_OBJ_EVENT)) err = cudaErrorInvalidResourceHandle;
  if (err == cudaSuccess && s != NULL) s->wait_count++;
  unlock();
  return err;
}

static cudaError_t sim_stream_get_capture_info(cudaStream_t stream,
                                               enum cudaStreamCaptureStatus *status,
                                               unsigned long long *capture_id) {
  lock();
  sim_stream *s = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  if (err == cudaSuccess) err = lookup_stream(stream, &s);
  if (err == cudaSuccess) {
    *status = s == NULL ? cudaStreamCaptureStatusNone : s->capture_status;
    if (capture_id != NULL) *capture_id = stream_capturing(s) ? s->capture_id : 0;
  }
  unlock();
  return err;
}

static cudaError_t sim_stream_begin_capture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  lock();
  sim_stream *s = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_STREAM_BEGIN_CAPTURE);
  if (err == cudaSuccess) err = lookup_stream(stream, &s);
  /* The legacy default stream cannot be captured. */
  if (err == cudaSuccess && s == NULL) err = cudaErrorStreamCaptureUnsupported;
  if (err == cudaSuccess && stream_capturing(s)) err = cudaErrorIllegalState;
  if (err == cudaSuccess) {
    s->capture_mode = mode;
    s->capture_thread = this_thread_id();
    s->capture_status = cudaStreamCaptureStatusActive;
    s->capture_id = ++sim.next_capture_id;
    sim.active_capture_count++;
  }
  unlock();
  return err;
}

static cudaError_t sim_thread_exchange_capture_mode(enum cudaStreamCaptureMode *mode) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_THREAD_EXCHANGE_CAPTURE_MODE);
  if (err == cudaSuccess && mode == NULL) err = cudaErrorInvalidValue;
  if (err == cudaSuccess && *mode != cudaStreamCaptureModeGlobal &&
      *mode != cudaStreamCaptureModeThreadLocal && *mode != cudaStreamCaptureModeRelaxed) {
    err = cudaErrorInvalidValue;
  }
  if (err == cudaSuccess) {
    enum cudaStreamCaptureMode previous = thread_capture_mode;
    thread_capture_mode = *mode;
    *mode = previous;
  }
  unlock();
  return err;
}

int gmr_cuda_sim_get_thread_capture_mode(void) { return (int)thread_capture_mode; }

static cudaError_t sim_stream_end_capture(cudaStream_t stream, cudaGraph_t *graph) {
  lock();
  *graph = NULL;
  sim_stream *s = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_STREAM_END_CAPTURE);
  if (err == cudaSuccess) err = lookup_stream(stream, &s);
  if (err == cudaSuccess && !stream_capturing(s)) err = cudaErrorIllegalState;
  if (err == cudaSuccess) {
    bool invalidated = s->capture_status == cudaStreamCaptureStatusInvalidated;
    s->capture_status = cudaStreamCaptureStatusNone;
    sim.active_capture_count--;
    if (invalidated) {
      err = cudaErrorStreamCaptureInvalidated;
    } else {
      sim_graph *g = calloc(1, sizeof *g);
      if (g == NULL || !add_object(g, SIM_OBJ_GRAPH)) {
        free(g);
        err = cudaErrorMemoryAllocation;
      } else {
        g->capture_id = s->capture_id;
        *graph = (cudaGraph_t)(void *)g;
      }
    }
    s->capture_id = 0;
  }
  unlock();
  return err;
}

static cudaError_t sim_graph_destroy(cudaGraph_t graph) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_GRAPH_DESTROY);
  if (err == cudaSuccess && !live_object(graph, SIM_OBJ_GRAPH)) err = cudaErrorInvalidValue;
  if (err == cudaSuccess) {
    remove_object(graph);
    free(graph);
  }
  unlock();
  return err;
}

static cudaError_t sim_event_create(cudaEvent_t *event) {
  lock();
  *event = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_EVENT_CREATE);
  if (err == cudaSuccess) {
    sim_event *e = calloc(1, sizeof *e);
    if (e == NULL || !add_object(e, SIM_OBJ_EVENT)) {
      free(e);
      err = cudaErrorMemoryAllocation;
    } else {
      *event = (cudaEvent_t)(void *)e;
    }
  }
  unlock();
  return err;
}

static cudaError_t sim_event_destroy(cudaEvent_t event) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_EVENT_DESTROY);
  if (err == cudaSuccess && !live_object(event, SIM_OBJ_EVENT)) err = cudaErrorInvalidResourceHandle;
  if (err == cudaSuccess) {
    remove_object(event);
    free(event);
  }
  unlock();
  return err;
}

static cudaError_t sim_event_record(cudaEvent_t event, cudaStream_t stream) {
  lock();
  sim_stream *s = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_EVENT_RECORD);
  if (err == cudaSuccess && !live_object(event, SIM_OBJ_EVENT)) err = cudaErrorInvalidResourceHandle;
  if (err == cudaSuccess) err = lookup_stream(stream, &s);
  if (err == cudaSuccess) {
    sim_event *e = (sim_event *)(void *)event;
    if (s == NULL) {
      e->stream_id = 0;
      e->seq = 0;
    } else {
      e->stream_id = s->id;
      e->seq = ++s->recorded_seq;
      if (!s->held) s->completed_seq = s->recorded_seq;
    }
  }
  unlock();
  return err;
}

static bool event_complete(const sim_event *e) {
  if (e->stream_id == 0) return true;
  sim_stream *s = find_stream_by_id(e->stream_id);
  return s == NULL || e->seq <= s->completed_seq;
}

static cudaError_t sim_event_query(cudaEvent_t event) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_EVENT_QUERY);
  if (err == cudaSuccess && !live_object(event, SIM_OBJ_EVENT)) err = cudaErrorInvalidResourceHandle;
  if (err == cudaSuccess && capture_forbids_unsafe_call()) err = cudaErrorStreamCaptureUnsupported;
  if (err == cudaSuccess && !event_complete((const sim_event *)(void *)event)) {
    err = cudaErrorNotReady;
  }
  unlock();
  return err;
}

static cudaError_t sim_event_synchronize(cudaEvent_t event) {
  lock();
  cudaError_t err = enter_call(GMR_CUDA_CALL_EVENT_SYNCHRONIZE);
  if (err == cudaSuccess && !live_object(event, SIM_OBJ_EVENT)) err = cudaErrorInvalidResourceHandle;
  if (err == cudaSuccess && capture_forbids_unsafe_call()) err = cudaErrorStreamCaptureUnsupported;
  if (err == cudaSuccess) {
    const sim_event *e = (const sim_event *)(void *)event;
    sim_stream *s = e->stream_id == 0 ? NULL : find_stream_by_id(e->stream_id);
    /* Waiting "finishes" the simulated work up to the event. */
    if (s != NULL && s->completed_seq < e->seq) s->completed_seq = e->seq;
  }
  unlock();
  return err;
}

static cudaError_t sim_memset_async(void *ptr, int value, size_t bytes, cudaStream_t stream) {
  lock();
  sim_stream *s = NULL;
  cudaError_t err = enter_call(GMR_CUDA_CALL_MEMSET_ASYNC);
  if (err == cudaSuccess) err = lookup_stream(stream, &s);
  /* During capture the memset becomes a graph node and runs at replay. */
  if (err == cudaSuccess && !stream_capturing(s) && bytes > 0) memset(ptr, value, bytes);
  unlock();
  return err;
}

const gmr__cuda_ops gmr__cuda_sim_ops = {
    .name = "simulation",
    .simulated = true,
    .get_device_count = sim_get_device_count,
    .get_device = sim_get_device,
    .set_device = sim_set_device,
    .device_get_attribute = sim_device_get_attribute,
    .mem_get_info = sim_mem_get_info,
    .device_synchronize = sim_device_synchronize,
    .malloc = sim_malloc,
    .free = sim_free,
    .malloc_managed = sim_malloc_managed,
    .host_alloc = sim_host_alloc,
    .free_host = sim_free_host,
    .mem_pool_create = sim_mem_pool_create,
    .mem_pool_destroy = sim_mem_pool_destroy,
    .mem_pool_set_attribute = sim_mem_pool_set_attribute,
    .mem_pool_get_attribute = sim_mem_pool_get_attribute,
    .mem_pool_trim_to = sim_mem_pool_trim_to,
    .malloc_from_pool_async = sim_malloc_from_pool_async,
    .free_async = sim_free_async,
    .stream_create = sim_stream_create,
    .stream_destroy = sim_stream_destroy,
    .stream_synchronize = sim_stream_synchronize,
    .stream_wait_event = sim_stream_wait_event,
    .stream_get_capture_info = sim_stream_get_capture_info,
    .stream_begin_capture = sim_stream_begin_capture,
    .stream_end_capture = sim_stream_end_capture,
    .graph_destroy = sim_graph_destroy,
    .thread_exchange_capture_mode = sim_thread_exchange_capture_mode,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_query = sim_event_query,
    .event_synchronize = sim_event_synchronize,
    .memset_async = sim_memset_async,
};

/* ---- gmr/cuda_sim.h ----------------------------------------------------- */

const char *gmr_cuda_call_name(gmr_cuda_call call) {
  switch (call) {
#define GMR_CUDA_CALL_NAME_(name, fn) \
  case GMR_CUDA_CALL_##name:          \
    return fn;
    GMR_CUDA_CALL_MAP(GMR_CUDA_CALL_NAME_)
#undef GMR_CUDA_CALL_NAME_
    default:
      return "unknown";
  }
}

/* Called with the mutex held. */
static bool has_live_objects(void) {
  return sim.objects.count > 0 || sim.allocations.count > 0 || gmr__sim_vmm_live_count() > 0;
}

gmr_status gmr_cuda_sim_enable(const gmr_cuda_sim_config *config) {
  gmr_cuda_sim_config cfg = GMR_CUDA_SIM_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (cfg.device_count < 1 || cfg.device_count > SIM_MAX_DEVICES || cfg.device_memory_bytes == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  lock();
  if (sim.enabled && has_live_objects()) {
    unlock();
    return GMR_ERR_BUSY;
  }
  uint64_t epoch = sim.epoch + 1;
  uint64_t next_stream_id = sim.next_stream_id;
  unsigned long long next_capture_id = sim.next_capture_id;
  gmr__u64_map_clear(&sim.objects);
  gmr__u64_map_clear(&sim.allocations);
  gmr__sim_vmm_reset();
  memset(&sim, 0, sizeof sim);
  sim.enabled = true;
  sim.config = cfg;
  sim.epoch = epoch;
  /* Ids stay unique across enables: an event from an earlier run can never
   * match a new stream. */
  sim.next_stream_id = next_stream_id;
  sim.next_capture_id = next_capture_id;
  for (int i = 0; i < GMR_CUDA_CALL_COUNT; ++i) atomic_store(&call_counts[i], 0);
  unlock();
  gmr__cuda_set_active(&gmr__cuda_sim_ops);
  return GMR_OK;
}

gmr_status gmr_cuda_sim_disable(void) {
  lock();
  if (!sim.enabled) {
    unlock();
    gmr__cuda_set_active(&gmr__cuda_real_ops);
    return GMR_OK;
  }
  if (has_live_objects()) {
    unlock();
    return GMR_ERR_BUSY;
  }
  sim.enabled = false;
  unlock();
  gmr__cuda_set_active(&gmr__cuda_real_ops);
  return GMR_OK;
}

gmr_status gmr_cuda_sim_inject_failure(gmr_cuda_call call, uint64_t skip_count,
                                       uint64_t fail_count, int cuda_error) {
  if ((int)call < 0 || call >= GMR_CUDA_CALL_COUNT || cuda_error == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  lock();
  if (!sim.enabled) {
    unlock();
    return GMR_ERR_UNSUPPORTED;
  }
  sim.faults[call].armed = fail_count > 0;
  sim.faults[call].skip_count = skip_count;
  sim.faults[call].fail_count = fail_count;
  sim.faults[call].error = (cudaError_t)cuda_error;
  unlock();
  return GMR_OK;
}

gmr_status gmr_cuda_sim_clear_failures(void) {
  lock();
  memset(sim.faults, 0, sizeof sim.faults);
  unlock();
  return GMR_OK;
}

uint64_t gmr_cuda_sim_get_call_count(gmr_cuda_call call) {
  if ((int)call < 0 || call >= GMR_CUDA_CALL_COUNT) return 0;
  return atomic_load_explicit(&call_counts[call], memory_order_relaxed);
}

static gmr_status copy_usage(const sim_usage *u, gmr_cuda_sim_usage *out) {
  out->used_bytes = u->used_bytes;
  out->peak_used_bytes = u->peak_used_bytes;
  out->allocation_count = u->allocation_count;
  out->capacity_bytes = sim.config.device_memory_bytes;
  return GMR_OK;
}

gmr_status gmr_cuda_sim_get_device_usage(int device, gmr_cuda_sim_usage *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock();
  gmr_status st;
  if (!sim.enabled) {
    st = GMR_ERR_UNSUPPORTED;
  } else if (device < 0 || device >= sim.config.device_count) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else {
    st = copy_usage(&sim.device[device], out);
  }
  unlock();
  return st;
}

gmr_status gmr_cuda_sim_get_host_usage(gmr_cuda_sim_usage *out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  lock();
  gmr_status st = sim.enabled ? copy_usage(&sim.host, out) : GMR_ERR_UNSUPPORTED;
  unlock();
  return st;
}

gmr_status gmr_cuda_sim_stream_hold(gmr_stream stream, bool hold) {
  lock();
  gmr_status st = GMR_OK;
  if (!sim.enabled) {
    st = GMR_ERR_UNSUPPORTED;
  } else if (stream_is_default((cudaStream_t)stream) ||
             !is_object((const void *)stream, SIM_OBJ_STREAM)) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else {
    sim_stream *s = (sim_stream *)(void *)stream;
    s->held = hold;
    if (!hold) complete_stream(s);
  }
  unlock();
  return st;
}

uint64_t gmr_cuda_sim_get_stale_handle_count(void) {
  lock();
  uint64_t n = sim.enabled ? sim.stale_handle_count : 0;
  unlock();
  return n;
}

uint64_t gmr_cuda_sim_get_stream_wait_count(gmr_stream stream) {
  lock();
  uint64_t n = 0;
  if (sim.enabled && is_object((const void *)stream, SIM_OBJ_STREAM)) {
    n = ((const sim_stream *)(const void *)stream)->wait_count;
  }
  unlock();
  return n;
}

/* ---- hooks for the VMM part (core/cuda_sim_internal.h) ------------------ */

void gmr__sim_lock(void) { lock(); }
void gmr__sim_unlock(void) { unlock(); }
bool gmr__sim_enabled(void) { return sim.enabled; }
cudaError_t gmr__sim_enter_call(gmr_cuda_call call) { return enter_call(call); }
bool gmr__sim_capture_forbids_unsafe_call(void) { return capture_forbids_unsafe_call(); }
int gmr__sim_current_device(void) { return current_device(); }
int gmr__sim_device_count(void) { return sim.config.device_count; }
size_t gmr__sim_device_capacity_bytes(void) { return sim.config.device_memory_bytes; }

bool gmr__sim_device_charge(int device, size_t bytes) {
  if (sim.device[device].used_bytes + bytes > sim.config.device_memory_bytes) return false;
  usage_add(&sim.device[device], bytes, 1);
  return true;
}

void gmr__sim_device_uncharge(int device, size_t bytes) {
  usage_sub(&sim.device[device], bytes, 1);
}

cudaError_t gmr__sim_stream_check(cudaStream_t stream, bool *capturing) {
  sim_stream *s = NULL;
  cudaError_t err = lookup_stream(stream, &s);
  *capturing = err == cudaSuccess && stream_capturing(s);
  return err;
}

void gmr__sim_count_stale_handle(void) { sim.stale_handle_count++; }
