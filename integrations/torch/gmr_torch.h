/*
 * integrations/torch/gmr_torch.h: PyTorch's CUDA allocator on gmr
 * (libgmr_torch.so, which needs libgmr.so). Python users call
 * gmr.torch.use() (python/gmr/torch.py), which hands these functions to
 * torch.cuda.memory.CUDAPluggableAllocator; docs/frameworks.md says which
 * mode to pick and what works in each.
 *
 * Each device's memory comes from its resource in gmr's per-device registry
 * (gmr/device_resource.h): the spec set with gmr_device_resource_set_spec(),
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
 *    gmr_resource_allocate_capturing().
 *
 * CUDA graphs in direct mode (the graph pool hooks below): PyTorch's private
 * pools, whatever the stack. Each device gets a graph arena of the shim's own
 * over its stack (graph_arena(uncaptured=forward, policy=ordered_reuse,
 * detection=explicit), chunks of 2 MiB), made at the first pool request;
 * a pool is one or more of its graph memories. Memory of a pool serves only
 * that pool until its last user releases it; a released pool's memory goes
 * back at the next safe point (empty_cache, which synchronises the device
 * first, or an out-of-memory retry), as PyTorch's does. Requests outside
 * pools never touch the arena. What the arena needs of the stack during a
 * capture is allocate_capturing (vmm, vmm_pages, pool or fixed_block over
 * cuda(kind=device)); a stack that cannot (cuda(kind=async) at the bottom
 * with no free memory) fails the request with GMR_ERR_CAPTURE_UNSAFE and a
 * message that names the stack and what to use, leaving the capture valid.
 * Over a vmm pool (the default stack `vmm`), the arena's chunks carry the
 * tag GMR_TORCH_GRAPH_POOL_TAG (gmr/vmm_pool_sleep.h), so that sleep can
 * keep, save or discard the memory of CUDA graphs on its own.
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

/* The vmm pool tag of the graph pool arena's chunks (see the banner); the
 * Python name "graphs" (python/gmr/serving.py). */
#define GMR_TORCH_GRAPH_POOL_TAG 63u

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
 * live allocation, is also used on `stream`. Passed to gmr_resource_record_stream();
 * when the stack answers GMR_ERR_UNSUPPORTED the shim remembers the stream
 * and makes the free's stream wait for it at the free (as PyTorch's
 * cudaMallocAsync backend does). An unknown pointer is refused and logged.
 */
GMR_TORCH_API void gmr_torch_record_stream(void *ptr, gmr_stream stream);

/* Per-device counters of the shim in direct and MemPool mode, the figures
 * behind torch.cuda.memory_stats() under gmr (python/gmr/torch.py). Bytes are
 * as PyTorch asked for them. Caller sets size and version. */
typedef struct gmr_torch_device_stats {
  size_t size;
  uint32_t version;
  uint64_t live_count;            /* allocations live now */
  uint64_t peak_live_count;       /* since creation or the last peak reset */
  uint64_t live_bytes;
  uint64_t peak_live_bytes;       /* since creation or the last peak reset */
  uint64_t allocation_count;      /* since the last accumulated reset */
  uint64_t free_count;            /* since the last accumulated reset */
  uint64_t allocated_bytes;       /* sum of allocations since the last accumulated reset */
  uint64_t freed_bytes;           /* sum of frees since the last accumulated reset */
  uint64_t failed_allocation_count; /* since the last accumulated reset (PyTorch's num_ooms) */
  uint64_t retry_count;           /* out-of-memory retries after releasing graph pools */
} gmr_torch_device_stats;

#define GMR_TORCH_DEVICE_STATS_VERSION 1u

/**
 * The counters of `device`. Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (NULL,
 * size smaller than the header, version 0, device outside [0, 64)); on
 * failure *out is unchanged. Thread-safe: yes (each field read atomically;
 * fields may be from different instants). No CUDA call.
 */
GMR_TORCH_API gmr_status gmr_torch_get_device_stats(int device, gmr_torch_device_stats *out);

/**
 * Set the peaks of `device` to the current values
 * (torch.cuda.reset_peak_memory_stats). Returns GMR_OK or
 * GMR_ERR_INVALID_ARGUMENT (device outside [0, 64)). Thread-safe: yes.
 */
GMR_TORCH_API gmr_status gmr_torch_reset_peak_stats(int device);

/**
 * Zero the accumulated counters of `device` (allocation, free and failure
 * counts and byte sums; torch.cuda.reset_accumulated_memory_stats). Returns
 * GMR_OK or GMR_ERR_INVALID_ARGUMENT. Thread-safe: yes.
 */
GMR_TORCH_API gmr_status gmr_torch_reset_accumulated_stats(int device);

/* The graph pools of one device, for tests and gmr.torch.stats(). Caller
 * sets size and version. */
typedef struct gmr_torch_graph_pool_info {
  size_t size;
  uint32_t version;
  size_t pool_count;            /* pools with a user (begun and not yet released) */
  size_t active_pool_count;     /* pools that route requests now */
  size_t live_block_count;      /* blocks of pools not yet freed */
  size_t pending_memory_count;  /* memories of released pools waiting for a safe point */
  size_t deferred_free_count;   /* frees waiting for a capture's end */
  size_t arena_held_bytes;      /* what the device's graph pool arena holds of the stack */
} gmr_torch_graph_pool_info;

#define GMR_TORCH_GRAPH_POOL_INFO_VERSION 1u

/**
 * Describe the graph pools of `device`. Returns GMR_OK or
 * GMR_ERR_INVALID_ARGUMENT (NULL, size below the struct, version 0, device
 * outside [0, 64)). Thread-safe: yes (a snapshot under the device's pool
 * lock). No CUDA call.
 */
GMR_TORCH_API gmr_status gmr_torch_get_graph_pool_info(int device,
                                                       gmr_torch_graph_pool_info *out);

/**
 * The blocks of pool (pool_first, pool_second) of `device` that are
 * allocated now, by address: ptrs[i], sizes[i] (bytes as asked) and
 * streams[i] (the allocation's stream) for i < min(capacity, *out_count).
 * *out_count is the number of blocks (call with capacity 0 to size the
 * arrays). PyTorch's checkPoolLiveAllocations and getCheckpointState under
 * gmr (python/gmr/torch.py).
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (device out of range, NULL
 * out_count, NULL arrays with capacity > 0); GMR_ERR_UNKNOWN_POINTER (no
 * such pool, or it was released); GMR_ERR_OUT_OF_MEMORY (host memory).
 * Thread-safe: yes. No CUDA call.
 */
GMR_TORCH_API gmr_status gmr_torch_get_pool_blocks(int device, uint64_t pool_first,
                                                   uint64_t pool_second, uintptr_t *ptrs,
                                                   size_t *sizes, uintptr_t *streams,
                                                   size_t capacity, size_t *out_count);

/**
 * The memories of pool (pool_first, pool_second) of `device` that capture
 * sessions have ended into (one per stream that filled one: a capture's
 * forked streams get their own): streams[i], the stream that first filled
 * it, and held_bytes[i], the bytes it holds, for i < min(capacity,
 * *out_count). The segments of torch.cuda.memory_snapshot() under gmr.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (device out of range, NULL
 * out_count, NULL arrays with capacity > 0); GMR_ERR_UNKNOWN_POINTER (no such
 * pool, or it was released). Thread-safe: yes. No CUDA call.
 */
GMR_TORCH_API gmr_status gmr_torch_get_pool_segments(int device, uint64_t pool_first,
                                                     uint64_t pool_second, uintptr_t *streams,
                                                     size_t *held_bytes, size_t capacity,
                                                     size_t *out_count);

/**
 * The ids of the graph pools of `device` that have a user (begun, not yet
 * released): firsts[i], seconds[i] for i < min(capacity, *out_count);
 * *out_count is their number. Returns GMR_OK or GMR_ERR_INVALID_ARGUMENT
 * (device out of range, NULL out_count, NULL arrays with capacity > 0).
 * Thread-safe: yes. No CUDA call.
 */
GMR_TORCH_API gmr_status gmr_torch_get_pool_ids(int device, uint64_t *firsts, uint64_t *seconds,
                                                size_t capacity, size_t *out_count);

/**
 * The calling thread's next direct-mode allocation must return exactly `ptr`,
 * a block that pool (pool_first, pool_second) of `device` holds free: how a
 * checkpoint of the pool is restored (PyTorch's setCheckpointPoolState, which
 * CUDA graph trees call; python/gmr/torch.py allocates through
 * torch._C._cuda_cudaCachingAllocator_raw_alloc so that PyTorch records the
 * block too). That allocation fails (an exception, as any failed request)
 * when the pool does not hold those bytes free. The expectation is used up
 * by the next allocation on this thread, whatever its outcome.
 * Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (device out of range, ptr NULL;
 * nothing changed). Thread-safe: yes (per thread). No CUDA call.
 */
GMR_TORCH_API gmr_status gmr_torch_expect_address(int device, uint64_t pool_first,
                                                  uint64_t pool_second, void *ptr);

/**
 * Give the storage at `storage_impl` (a c10::StorageImpl *, as
 * torch.UntypedStorage._cdata gives it) an owning data pointer with the
 * current CUDA allocator's deleter, for a block a checkpoint restore
 * allocated again (what PyTorch's setCheckpointPoolState binding does for
 * CUDA graph trees). Returns 0; -1 when the storage owns its memory already
 * (PyTorch's " Not expecting deleter function"); -2 when this build has no
 * PyTorch headers (libgmr_torch.so: use libgmr_torch_c10.so,
 * gmr.torch.build_shim()). Thread-safe: as PyTorch's storages (the caller
 * holds the GIL). No CUDA call.
 */
GMR_TORCH_API int gmr_torch_storage_adopt(int64_t storage_impl);

/**
 * Take the allocator's deleter away from the storage at `storage_impl`,
 * whose block a checkpoint restore freed (PyTorch's stale storages).
 * Returns 0; -1 when its deleter is not the current allocator's ("Unexpected
 * deleter function on storage"); -2 without PyTorch headers. Thread-safe: as
 * gmr_torch_storage_adopt().
 */
GMR_TORCH_API int gmr_torch_storage_disown(int64_t storage_impl);

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

/* ---- allocation history (history.cc) ------------------------------------
 * What PyTorch's torch.cuda.memory._record_memory_history() keeps, for the
 * allocations that reach the shim (both modes, every device):
 * gmr.torch.record_memory_history() and gmr.torch.dump_snapshot()
 * (python/gmr/memory_viz.py) turn it into PyTorch's snapshot layout. Off
 * by default: then each alloc and free pays one relaxed atomic load. */

/* What an entry records; the names are PyTorch's TraceEntry actions
 * (c10/cuda/CUDACachingAllocator.h). */
typedef enum gmr_torch_history_action {
  GMR_TORCH_HISTORY_ALLOC = 0,          /* "alloc": a pointer handed to PyTorch */
  GMR_TORCH_HISTORY_FREE_REQUESTED = 1, /* "free_requested": PyTorch freed it */
  GMR_TORCH_HISTORY_FREE_COMPLETED = 2, /* "free_completed": the stack has it back */
  GMR_TORCH_HISTORY_OOM = 3             /* "oom": an allocation found no memory or passed a
                                           limit (other failures are not recorded) */
} gmr_torch_history_action;

/* One entry; every field 64 bits or 32 so that the layout has no padding. */
typedef struct gmr_torch_history_entry {
  uint64_t time_us;     /* wall clock when it was recorded: microseconds since the Unix epoch */
  uint64_t addr;        /* the pointer; 0 for OOM */
  uint64_t size;        /* bytes as PyTorch asked for them */
  uint64_t stream;      /* the allocation's cudaStream_t, as an integer (0: default stream) */
  uint64_t context;     /* what the context function returned at the allocation (0: none) */
  uint64_t device_free; /* OOM: the device's free bytes then (cudaMemGetInfo), else 0 */
  int32_t device;
  int32_t action;       /* a gmr_torch_history_action */
} gmr_torch_history_entry;

/* Called at each allocation while recording with a context function; what
 * it returns is kept in the allocation's entries (gmr.torch keeps Python
 * frames under that number). It runs on the allocating thread, with no lock
 * of the shim or the stack held; it may allocate and free through the shim. */
typedef uint64_t (*gmr_torch_context_fn)(void);

/**
 * Start or stop recording the allocation history.
 * enabled != 0: record from now on into a ring of the `max_entries` most
 * recent entries (older ones are dropped and counted), calling `context`
 * (may be NULL) at each allocation. Called while recording, it changes the
 * ring's size (keeping the newest entries) and the context function.
 * enabled == 0: stop recording (max_entries and context are ignored); the
 * entries stay for gmr_torch_get_history() until cleared.
 * Units: max_entries in entries (GMR_TORCH_HISTORY_MAX_ENTRIES at most;
 *   entries take sizeof(gmr_torch_history_entry) = 56 bytes each, grown as
 *   needed).
 * Ownership: `context` must stay callable for as long as the shim may
 *   allocate, also after another function replaced it or recording stopped:
 *   a thread that read it just before may still call it once (gmr.torch
 *   keeps every function it passes).
 * Thread-safe: yes (the ring's mutex). No CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (enabled with max_entries 0 or
 * above GMR_TORCH_HISTORY_MAX_ENTRIES: nothing changed).
 * Source: PyTorch's torch.cuda.memory._record_memory_history(enabled,
 *   context, max_entries) (c10/cuda/CUDACachingAllocator.cpp recordHistory).
 */
GMR_TORCH_API gmr_status gmr_torch_record_history(int enabled, size_t max_entries,
                                                  gmr_torch_context_fn context);

/* The most entries a history ring may keep (2^26: 3.5 GiB of host memory). */
#define GMR_TORCH_HISTORY_MAX_ENTRIES ((size_t)1 << 26)

/**
 * Copy the history, oldest first: up to `capacity` entries into `out` (may
 * be NULL with capacity 0), the number held into *out_count (may exceed
 * capacity: call again with a larger array), and into *out_dropped (may be
 * NULL) the entries dropped since the last clear because the ring was full.
 * Thread-safe: yes (a consistent copy under the ring's mutex). No CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL out_count, or NULL out
 * with capacity > 0; nothing written).
 */
GMR_TORCH_API gmr_status gmr_torch_get_history(gmr_torch_history_entry *out, size_t capacity,
                                               size_t *out_count, uint64_t *out_dropped);

/**
 * Forget every entry and the dropped count (recording goes on if it was on).
 * Thread-safe: yes. No CUDA call. Always GMR_OK.
 * Source: PyTorch's _record_memory_history(clear_history=True).
 */
GMR_TORCH_API gmr_status gmr_torch_clear_history(void);

/**
 * The allocations of `device` that PyTorch holds now, by address: ptrs[i],
 * sizes[i] (bytes as asked), streams[i] and contexts[i] (the context
 * function's number at the allocation, 0 when none) for i < min(capacity,
 * *out_count); *out_count is their number (call with capacity 0 to size the
 * arrays). Both modes; blocks of graph pools included. The blocks of
 * gmr.torch.snapshot()'s segments.
 * Thread-safe: yes (each shard of the table is copied under its mutex, so
 *   allocations made or freed meanwhile by other threads may be missed).
 * No CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (device outside [0, 64), NULL
 * out_count, a NULL array with capacity > 0; nothing written);
 * GMR_ERR_OUT_OF_MEMORY (host memory for sorting; nothing written).
 */
GMR_TORCH_API gmr_status gmr_torch_get_live_allocations(int device, uintptr_t *ptrs,
                                                        size_t *sizes, uintptr_t *streams,
                                                        uint64_t *contexts, size_t capacity,
                                                        size_t *out_count);

#ifdef __cplusplus
}  /* extern "C" */

#include <functional>
#include <utility>

/* PyTorch's c10::cuda::MempoolId_t. */
typedef std::pair<unsigned long long, unsigned long long> gmr_torch_mempool_id;

extern "C" {
/**
 * Graph pool hooks (set_begin_allocate_to_pool, set_end_allocate_to_pool_fn,
 * set_release_pool), called by torch.cuda.graph around a capture and by CUDA
 * graph trees around warm-up (see the banner):
 *  - begin: from now on, allocations on `device` whose stream `filter`
 *    accepts (capturing or not; the latest begin first, as PyTorch's
 *    get_pool) belong to pool `id`: each such stream gets an explicit session
 *    of the device's graph pool arena that appends to the pool's memory
 *    (forked streams of one capture get memories of their own). Begins of
 *    the same id count as users (torch.cuda.graph(pool=...)).
 *  - end: the pool stops routing and its sessions end; frees that waited for
 *    the capture (an ordinary block freed on a capturing stream) are made.
 *  - release: one user fewer; at none the pool's memories wait for the next
 *    safe point (gmr_torch_reset, an out-of-memory retry) to go back.
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
