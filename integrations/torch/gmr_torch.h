/*
 * integrations/torch/gmr_torch.h: PyTorch's CUDA allocator on gmr
 * (libgmr_torch.so, which needs libgmr.so). Python users call
 * gmr.torch.use() (python/gmr/torch.py), which hands these functions to
 * torch.cuda.memory.CUDAPluggableAllocator; docs/frameworks.md says which
 * mode to pick and what works in each.
 *
 * Each device's memory comes from its resource in gmr's per-device registry
 * (gmr/device_resource.h): the spec set with gmr_set_device_resource_spec(),
 * or GMR_STACK, or the default, created at the device's first allocation
 * with that device current.
 *
 * Two pairs of entry points, with the exact types of PyTorch's
 * CUDAPluggableAllocator (torch/csrc/cuda/CUDAPluggableAllocator.h):
 *   alloc  void *(size_t size, int device, cudaStream_t stream)
 *   free   void (void *ptr, size_t size, int device, cudaStream_t stream)
 *  - gmr_torch_alloc / gmr_torch_free: direct mode
 *    (torch.cuda.memory.change_current_allocator): gmr is PyTorch's whole
 *    allocator. PyTorch never checks alloc's result, so a failure cannot be a
 *    NULL: gmr_torch_alloc throws a C++ exception (c10::OutOfMemoryError,
 *    torch.cuda.OutOfMemoryError in Python, for out of memory and refused
 *    limits; c10::Error, RuntimeError, otherwise) carrying gmr's message.
 *    Built without PyTorch's headers (GMR_TORCH_WITH_C10 undefined), the
 *    exceptions are std::runtime_error, which PyTorch reports as RuntimeError.
 *  - gmr_torch_mempool_alloc / gmr_torch_mempool_free: MemPool mode
 *    (torch.cuda.MemPool(allocator)): PyTorch's caching allocator asks for
 *    segments and turns a NULL into torch.cuda.OutOfMemoryError itself, so
 *    failures return NULL (the message: gmr_torch_get_last_error()).
 *    A segment asked for while its stream captures a CUDA graph comes from
 *    gmr_allocate_capturing().
 *
 * Every pointer handed out is recorded (pointer -> device, bytes, stream,
 * resource), so a free of a pointer gmr never gave, or with another size or
 * device, is refused, logged on stderr and counted, and never reaches CUDA.
 * Frees go to the resource that allocated, on the allocation's stream
 * (PyTorch passes that stream back).
 *
 * Errors are logged on stderr with the prefix "gmr.torch:" (the first 16 of
 * each kind, then only counted).
 *
 * Process exit: frees that arrive after exit() began (PyTorch's static
 * destructors) are dropped, since the per-device stacks may be gone by then.
 *
 * Thread-safe: yes (the pointer table is sharded under mutexes; the graph
 * pool routing has one mutex per device, taken only while a capture routes).
 * Source: PyTorch's CUDAPluggableAllocator and its hooks; RMM's torch shim
 *   (python/rmm/rmm/librmm/_torch_allocator.cpp) for the per-device resource
 *   as the hidden context.
 */
#ifndef GMR_INTEGRATIONS_TORCH_GMR_TORCH_H_
#define GMR_INTEGRATIONS_TORCH_GMR_TORCH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/resource.h"

#if defined(__GNUC__)
#define GMR_TORCH_API __attribute__((visibility("default")))
#else
#define GMR_TORCH_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Direct mode alloc: `size` bytes (256-byte aligned) on `device` for use on
 * `stream`, from the device's resource. 0 bytes gives NULL.
 * Throws (see the banner) when the resource cannot be created (a malformed
 * spec: the message has the spec error) or refuses the request; nothing is
 * allocated then. Thread-safe: yes. May call CUDA as the stack does, with
 * `device` current; the caller's device is restored.
 */
GMR_TORCH_API void *gmr_torch_alloc(size_t size, int device, gmr_stream stream);

/**
 * Direct mode free of a pointer from gmr_torch_alloc(), stream-ordered on
 * `stream` (PyTorch passes the allocation's stream). Streams recorded with
 * gmr_torch_record_stream() that the resource could not honour itself are
 * waited for first (the freeing stream waits for their work so far).
 * A pointer gmr did not give, or a size/device that differs from the
 * allocation's, is refused and logged; NULL is a no-op. Never throws.
 */
GMR_TORCH_API void gmr_torch_free(void *ptr, size_t size, int device, gmr_stream stream);

/** MemPool mode alloc: as gmr_torch_alloc(), but NULL on failure (never throws). */
GMR_TORCH_API void *gmr_torch_mempool_alloc(size_t size, int device, gmr_stream stream);

/** MemPool mode free of a pointer from gmr_torch_mempool_alloc(); as gmr_torch_free(). */
GMR_TORCH_API void gmr_torch_mempool_free(void *ptr, size_t size, int device,
                                          gmr_stream stream);

/** init hook (set_init_fn): PyTorch's device count. Creates nothing (devices are lazy). */
GMR_TORCH_API void gmr_torch_init(int device_count);

/**
 * reset hook (set_reset_fn, torch.cuda.empty_cache()): trim the resource of
 * every device this shim allocated on (gmr_resource_trim), giving cached free
 * memory back to CUDA. Failures are logged. May synchronise streams.
 */
GMR_TORCH_API void gmr_torch_reset(void);

/**
 * memory fraction hook (set_memory_fraction_fn,
 * torch.cuda.set_per_process_memory_fraction): set the limit of the topmost
 * limiting adaptor of `device`'s stack to `fraction` of the device's total
 * memory. Throws (RuntimeError in Python) when the stack has no limiting
 * layer, the fraction is outside [0, 1], or the device cannot be read.
 */
GMR_TORCH_API void gmr_torch_set_memory_fraction(double fraction, int device);

/**
 * record_stream hook (set_record_stream_fn, Tensor.record_stream): `ptr`, a
 * live allocation, is also used on `stream`. Passed to gmr_record_stream();
 * when the stack answers GMR_ERR_UNSUPPORTED the shim remembers the stream
 * and makes the free's stream wait for it at the free (as PyTorch's
 * cudaMallocAsync backend does). An unknown pointer is refused and logged.
 */
GMR_TORCH_API void gmr_torch_record_stream(void *ptr, gmr_stream stream);

/* Counters of the shim (all devices). Caller sets size and version. */
typedef struct gmr_torch_counters {
  size_t size;
  uint32_t version;
  uint64_t live_count;                   /* allocations handed out and not freed */
  uint64_t live_bytes;                   /* their bytes, as asked */
  uint64_t allocation_count;             /* successful allocations */
  uint64_t failed_allocation_count;      /* allocations that failed */
  uint64_t refused_free_count;           /* frees refused: unknown pointer, size or device */
  uint64_t failed_free_count;            /* frees the resource refused (logged) */
  uint64_t record_stream_count;          /* record_stream calls on live pointers */
  uint64_t record_stream_fallback_count; /* of them, kept by the shim (stack UNSUPPORTED) */
  uint64_t capture_allocation_count;     /* allocations routed to a graph pool or capture path */
} gmr_torch_counters;

#define GMR_TORCH_COUNTERS_VERSION 1u

/**
 * Snapshot the counters. Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (NULL,
 * size smaller than the header, or version 0). Thread-safe: yes.
 */
GMR_TORCH_API gmr_status gmr_torch_get_counters(gmr_torch_counters *out);

/**
 * The calling thread's last failure message of an alloc, free or hook
 * ("" if none), copied into `buffer` (NUL-terminated, truncated to fit).
 * Returns the message's full length. Thread-safe: yes (per thread).
 */
GMR_TORCH_API size_t gmr_torch_get_last_error(char *buffer, size_t buffer_bytes);

/** True when this build throws PyTorch's own exception types (GMR_TORCH_WITH_C10). */
GMR_TORCH_API bool gmr_torch_raises_torch_errors(void);

#ifdef __cplusplus
}  /* extern "C" */

#include <functional>
#include <utility>

/* PyTorch's c10::cuda::MempoolId_t. */
typedef std::pair<unsigned long long, unsigned long long> gmr_torch_mempool_id;

extern "C" {
/**
 * Graph pool hooks (set_begin_allocate_to_pool, set_end_allocate_to_pool_fn,
 * set_release_pool), called by torch.cuda.graph around a capture:
 *  - begin: from now on, allocations on `device` whose stream `filter`
 *    accepts (and that is capturing) belong to pool `id`: with a graph_arena
 *    in the device's stack, each such stream gets an explicit arena session
 *    (gmr_graph_arena_resource_begin_capture) that appends to the pool's graph memory;
 *    without one they come from gmr_allocate_capturing().
 *  - end: the sessions of `id` end; the pool keeps one reference to their
 *    graph memory.
 *  - release: the pool's graph memory is released (its blocks go back to the
 *    arena as they are freed).
 * Hook failures are logged (they have no way to report).
 * C++ only: `filter` is a std::function taken by value, as PyTorch's hook
 * type (void(int, MempoolId_t, std::function<bool(cudaStream_t)>)) is.
 */
GMR_TORCH_API void gmr_torch_begin_allocate_to_pool(int device, gmr_torch_mempool_id id,
                                                    std::function<bool(gmr_stream)> filter);
GMR_TORCH_API void gmr_torch_end_allocate_to_pool(int device, gmr_torch_mempool_id id);
GMR_TORCH_API void gmr_torch_release_pool(int device, gmr_torch_mempool_id id);
}
#endif /* __cplusplus */

#endif /* GMR_INTEGRATIONS_TORCH_GMR_TORCH_H_ */
