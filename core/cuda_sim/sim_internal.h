/*
 * core/cuda_sim/sim_internal.h (internal): the state of the host simulation
 * of the CUDA layer and the functions its files share:
 *   sim_ops.c      the gmr__cuda_ops table of the simulation
 *   cuda_sim.c     the control functions of gmr/sim/cuda_sim.h (enable, usage)
 *   sim_state.c    the state, its mutex, live handles, per-thread device and
 *                  capture mode, usage counts
 *   sim_faults.c   counting calls and injecting failures
 *   sim_device.c   devices and memory (cudaMalloc, cudaFree, pinned, managed)
 *   sim_mempool.c  memory pools and stream-ordered allocation
 *   sim_stream.c   streams, events, capture and graphs
 *   sim_order.c    the happens-before order of streams and events (clocks),
 *                  and the marks tests keep of it
 *   sim_graph.c    nodes of graphs being captured, and capturing streams'
 *                  dependencies (cudaStreamGetCaptureInfo, cudaGraphNodeGetDependencies)
 *
 * One mutex guards all simulated state; the simulation is for correctness,
 * not speed. Handles given out (streams, events, pools, graphs) are pointers
 * to the structs below, checked against a table of live objects on every use,
 * so a stale or foreign handle gives cudaErrorInvalidResourceHandle rather
 * than a crash.
 *
 * Thread-safe: the op functions take the mutex themselves; every other
 * function here must be called with it held (gmr__sim_lock).
 */
#ifndef GMR_CORE_CUDA_SIM_SIM_INTERNAL_H_
#define GMR_CORE_CUDA_SIM_SIM_INTERNAL_H_

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "util/u64_map.h"
#include "gmr/sim/cuda_sim.h"

#define GMR__SIM_MAX_DEVICES 16

#define GMR__SIM_ALIGNMENT ((size_t)256)

typedef enum gmr__sim_object_kind {
  GMR__SIM_OBJ_ALLOCATION = 1,
  GMR__SIM_OBJ_STREAM,
  GMR__SIM_OBJ_EVENT,
  GMR__SIM_OBJ_POOL,
  GMR__SIM_OBJ_GRAPH
} gmr__sim_object_kind;

typedef enum gmr__sim_memory_kind {
  GMR__SIM_MEM_DEVICE,
  GMR__SIM_MEM_MANAGED,
  GMR__SIM_MEM_PINNED,
  GMR__SIM_MEM_POOL
} gmr__sim_memory_kind;

typedef struct gmr__sim_pool {
  int device;
  uint64_t release_threshold_bytes;
  size_t used_bytes;     /* live allocations from the pool */
  size_t reserved_bytes; /* what the pool holds from the device */
  size_t used_high_bytes;
  size_t reserved_high_bytes;
} gmr__sim_pool;

typedef struct gmr__sim_allocation {
  size_t bytes;
  bool mapped; /* backed by mmap (large), else by aligned_alloc */
  int device; /* -1 for pinned host memory */
  gmr__sim_memory_kind kind;
  gmr__sim_pool *pool; /* GMR__SIM_MEM_POOL only */
} gmr__sim_allocation;

/* One position of a clock (sim_order.c): the work of stream `key` up to
 * `seq`; in a capture's namespace when capture_id is not 0. */
typedef struct gmr__sim_clock_entry {
  uint64_t key;
  uint64_t seq;
  unsigned long long capture_id;
} gmr__sim_clock_entry;

/* What some work is ordered after: positions of streams, complete ones
 * dropped. */
typedef struct gmr__sim_clock {
  gmr__sim_clock_entry *entries;
  uint32_t count;
  uint32_t capacity;
} gmr__sim_clock;

/* A node of a graph being captured (sim_graph.c). */
typedef struct gmr__sim_node {
  unsigned long long capture_id;
  struct gmr__sim_node **deps;
  uint32_t dep_count;
} gmr__sim_node;

/* The nodes a capturing stream's next work will depend on (or an event's
 * copy of them). */
typedef struct gmr__sim_frontier {
  gmr__sim_node **nodes;
  uint32_t count;
  uint32_t capacity;
} gmr__sim_frontier;

typedef struct gmr__sim_stream {
  uint64_t id; /* unique for the process, never reused */
  int device;
  bool held;
  bool held_beyond_destroy; /* pending work stays pending after a destroy */
  uint64_t recorded_seq;  /* sequence number of the last event recorded */
  uint64_t completed_seq; /* events up to this number have completed */
  uint64_t wait_count;
  enum cudaStreamCaptureStatus capture_status;
  unsigned long long capture_id;
  enum cudaStreamCaptureMode capture_mode; /* of the capture in progress */
  uint64_t capture_thread;                 /* sim thread id of the thread that began it */
  bool capture_origin; /* began the capture (else joined it by waiting on one of its events) */
  uint64_t capture_seq;  /* positions of its work in captures (sim_order.c) */
  gmr__sim_clock clock;  /* other streams' work its next work is ordered after */
  gmr__sim_frontier frontier; /* while capturing: its next node's dependencies */
} gmr__sim_stream;

typedef struct gmr__sim_event {
  bool recorded;
  /* Non-zero: last recorded on a capturing stream, in this capture (a node of
   * its graph, not work): queries, synchronisations and waits outside that
   * capture are refused (cudaErrorCapturedEvent) until it is recorded again. */
  unsigned long long capture_id;
  gmr__sim_clock clock; /* the work the event waits for (sim_order.c) */
  gmr__sim_frontier frontier; /* recorded in a capture: the stream's frontier then */
} gmr__sim_event;

typedef struct gmr__sim_graph {
  unsigned long long capture_id;
} gmr__sim_graph;

typedef struct gmr__sim_usage {
  size_t used_bytes;
  size_t peak_used_bytes;
  size_t allocation_count;
} gmr__sim_usage;

typedef struct gmr__sim_fault {
  bool armed;
  uint64_t skip_count;
  uint64_t fail_count;
  cudaError_t error;
} gmr__sim_fault;

typedef struct gmr__sim_state {
  bool enabled;
  gmr_cuda_sim_config config;
  uint64_t epoch; /* bumped at each enable: resets threads' current device */
  gmr__sim_usage device[GMR__SIM_MAX_DEVICES];
  gmr__sim_usage host;
  gmr__u64_map objects;     /* handle address -> gmr__sim_object_kind */
  gmr__u64_map allocations; /* address -> gmr__sim_allocation * */
  gmr__u64_map registrations; /* cudaHostRegister'ed address -> bytes */
  /* Streams destroyed while held with work pending (cudaStreamDestroy
   * returns at once; the work still runs): stream id -> the last sequence
   * number completed. Their events stay pending until a device-wide
   * synchronisation, as the stream cannot be released any more. */
  gmr__u64_map draining;
  gmr__u64_map streams_by_id; /* stream id -> gmr__sim_stream *, live streams */
  gmr__u64_map marks;         /* gmr_cuda_sim_mark -> gmr__sim_clock * */
  gmr__u64_map nodes;         /* gmr__sim_node * of every capture -> 1 */
  uint64_t next_mark_id;
  /* gmr_cuda_sim_reuse_stream_handles: the last destroyed stream's memory,
   * given to the next stream created (NULL when none). */
  bool reuse_stream_handles;
  void *recycled_stream;
  uint64_t next_stream_id;
  unsigned long long next_capture_id;
  size_t active_capture_count;
  uint64_t stale_handle_count; /* calls that named a stream/event/pool/graph not alive */
  int capture_breaker;         /* the gmr_cuda_call that last invalidated a capture */
  gmr__sim_fault faults[GMR_CUDA_CALL_COUNT];
} gmr__sim_state;

/* The simulated devices (sim_state.c); guarded by the mutex. */
extern gmr__sim_state gmr__sim;
/* Calls per gmr_cuda_call (sim_faults.c); atomic, read without the mutex. */
extern _Atomic uint64_t gmr__sim_call_counts[GMR_CUDA_CALL_COUNT];
/* The calling thread's current device, valid while its epoch is the state's. */
extern _Thread_local int gmr__sim_thread_device;
/* The calling thread's capture interaction mode (CUDA's default: global). */
extern _Thread_local enum cudaStreamCaptureMode gmr__sim_thread_capture_mode;
/* The gmr_cuda_call the calling thread is making (sim_faults.c), for the
 * record of which call invalidated a capture. */
extern _Thread_local int gmr__sim_thread_call;

/* ---- sim_state.c ---- */
uint64_t gmr__sim_this_thread_id(void);
void gmr__sim_lock(void);
void gmr__sim_unlock(void);
int gmr__sim_current_device(void);
bool gmr__sim_is_object(const void *handle, gmr__sim_object_kind kind);
/* gmr__sim_is_object() for a handle a CUDA call received: a dead or foreign handle is
 * counted, because real CUDA would crash or misbehave on it. */
bool gmr__sim_live_object(const void *handle, gmr__sim_object_kind kind);
/* NULL and the runtime's special handles (cudaStreamLegacy, cudaStreamPerThread)
 * are the default stream; anything else must be a live simulated stream. */
bool gmr__sim_stream_is_default(cudaStream_t s);
cudaError_t gmr__sim_lookup_stream(cudaStream_t s, gmr__sim_stream **out);
/* The live stream with id `id`, or NULL (a map lookup). */
gmr__sim_stream *gmr__sim_stream_by_id(uint64_t id);
/* CUDA's capture modes (cudaThreadExchangeStreamCaptureMode): a potentially
 * unsafe call is refused to a thread in global mode while it began a capture
 * that is not relaxed, or another thread began a global-mode one; to a thread
 * in thread-local mode only while it began a capture that is not relaxed; never
 * to a thread in relaxed mode. A refused call invalidates those captures. */
bool gmr__sim_capture_forbids_unsafe_call(void);
/* A call that conflicts with capture in every thread mode (synchronising the
 * device while a stream captures): true, and every capture invalidated, when
 * any capture is in progress. */
bool gmr__sim_capture_conflicts_with_any(void);
/* Invalidate capture `capture_id` on every stream that takes part in it. */
void gmr__sim_invalidate_capture(unsigned long long capture_id);
/* Whether capture `capture_id` is still in progress (on any stream). */
bool gmr__sim_capture_in_progress(unsigned long long capture_id);
bool gmr__sim_stream_capturing(const gmr__sim_stream *s);
gmr__sim_usage *gmr__sim_usage_of(int device);
void gmr__sim_usage_add(gmr__sim_usage *u, size_t bytes, long count_delta);
void gmr__sim_usage_sub(gmr__sim_usage *u, size_t bytes, long count_delta);
size_t gmr__sim_round_up(size_t bytes);
void gmr__sim_complete_stream(gmr__sim_stream *s);
void gmr__sim_complete_all_streams(void);
bool gmr__sim_add_object(void *handle, gmr__sim_object_kind kind);
void gmr__sim_remove_object(void *handle);
/* Called with the mutex held. */
bool gmr__sim_has_live_objects(void);

/* ---- sim_faults.c ---- */
/* Count the call, apply an injected delay (sleeping with the mutex released:
 * callers make this the first thing they do after taking it, before reading
 * any state), then an injected failure, if one is due. */
cudaError_t gmr__sim_enter_call(gmr_cuda_call call);
/* Remove every injected delay (enable, clear_failures). */
void gmr__sim_clear_delays(void);

/* ---- sim_device.c ---- */
/* Take `bytes` of simulated memory on `device` (-1: pinned host) and back it
 * with host memory. The rounding to 256 bytes mirrors cudaMalloc's alignment. */
cudaError_t gmr__sim_alloc(void **ptr, size_t bytes, int device, gmr__sim_memory_kind kind,
                           gmr__sim_pool *pool);
cudaError_t gmr__sim_release(void *ptr, bool pinned, bool from_pool);
cudaError_t gmr__sim_get_device_count(int *count);
cudaError_t gmr__sim_get_device(int *device);
cudaError_t gmr__sim_set_device(int device);
cudaError_t gmr__sim_device_get_attribute(int *value, enum cudaDeviceAttr attr, int device);
cudaError_t gmr__sim_mem_get_info(size_t *free_bytes, size_t *total_bytes);
cudaError_t gmr__sim_device_synchronize(void);
cudaError_t gmr__sim_malloc(void **ptr, size_t bytes);
cudaError_t gmr__sim_malloc_managed(void **ptr, size_t bytes);
cudaError_t gmr__sim_host_alloc(void **ptr, size_t bytes);
cudaError_t gmr__sim_free(void *ptr);
cudaError_t gmr__sim_free_host(void *ptr);

/* ---- sim_mempool.c ---- */
/* At a synchronisation, pools release what exceeds their release threshold
 * (cudaMemPoolAttrReleaseThreshold semantics). */
void gmr__sim_pools_release_at_sync(void);
cudaError_t gmr__sim_mem_pool_create(cudaMemPool_t *pool, int device);
cudaError_t gmr__sim_mem_pool_destroy(cudaMemPool_t pool);
cudaError_t gmr__sim_mem_pool_set_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                            uint64_t value);
cudaError_t gmr__sim_mem_pool_get_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                            uint64_t *value);
cudaError_t gmr__sim_mem_pool_trim_to(cudaMemPool_t pool, size_t keep);
cudaError_t gmr__sim_malloc_from_pool_async(void **ptr, size_t bytes, cudaMemPool_t pool,
                                            cudaStream_t stream);
cudaError_t gmr__sim_free_async(void *ptr, cudaStream_t stream);

/* ---- sim_stream.c ---- */
cudaError_t gmr__sim_stream_create(cudaStream_t *stream);
cudaError_t gmr__sim_stream_destroy(cudaStream_t stream);
cudaError_t gmr__sim_stream_synchronize(cudaStream_t stream);
cudaError_t gmr__sim_stream_wait_event(cudaStream_t stream, cudaEvent_t event);
cudaError_t gmr__sim_stream_get_capture_info(cudaStream_t stream,
                                             enum cudaStreamCaptureStatus *status,
                                             unsigned long long *capture_id);
cudaError_t gmr__sim_stream_begin_capture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t gmr__sim_thread_exchange_capture_mode(enum cudaStreamCaptureMode *mode);
cudaError_t gmr__sim_stream_end_capture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t gmr__sim_graph_destroy(cudaGraph_t graph);
cudaError_t gmr__sim_event_create(cudaEvent_t *event);
cudaError_t gmr__sim_event_destroy(cudaEvent_t event);
cudaError_t gmr__sim_event_record(cudaEvent_t event, cudaStream_t stream);
cudaError_t gmr__sim_event_query(cudaEvent_t event);
cudaError_t gmr__sim_event_synchronize(cudaEvent_t event);
cudaError_t gmr__sim_memset_async(void *ptr, int value, size_t bytes, cudaStream_t stream);
cudaError_t gmr__sim_memcpy_async(void *dst, const void *src, size_t bytes, cudaStream_t stream);

/* ---- sim_order.c ---- */
void gmr__sim_clock_clear(gmr__sim_clock *c);
/* dst orders after src too. False when host memory ran out (less strict). */
bool gmr__sim_clock_merge(gmr__sim_clock *dst, const gmr__sim_clock *src);
/* Whether all the work of c is done. */
bool gmr__sim_clock_complete(const gmr__sim_clock *c);
/* Finish the work of c (an event synchronisation: the host waited for it). */
void gmr__sim_clock_finish(const gmr__sim_clock *c);
/* *out = s's work up to now, advancing s by one position (a record, a mark). */
bool gmr__sim_clock_snapshot(gmr__sim_stream *s, gmr__sim_clock *out);
/* Whether work queued on t from now runs after all the work of `mark`. */
bool gmr__sim_stream_ordered_after(const gmr__sim_stream *t, const gmr__sim_clock *mark);
/* Drop every mark (enable, disable). */
void gmr__sim_marks_clear(void);
/* Work queued on s now touches [a, a + a_bytes) and [b, b + b_bytes) (either
 * may be NULL): remembered while it is pending (s held, or ordered after
 * pending work), advancing s by one position. */
void gmr__sim_uses_record(gmr__sim_stream *s, const void *a, size_t a_bytes, const void *b,
                          size_t b_bytes);
/* Whether pending work touches [addr, addr + bytes). */
bool gmr__sim_uses_pending_over(uintptr_t addr, size_t bytes);
/* Forget every pending use (enable, disable). */
void gmr__sim_uses_clear(void);

/* ---- sim_graph.c ---- */
void gmr__sim_frontier_clear(gmr__sim_frontier *f);
bool gmr__sim_frontier_copy(gmr__sim_frontier *dst, const gmr__sim_frontier *src);
bool gmr__sim_frontier_union(gmr__sim_frontier *dst, const gmr__sim_frontier *src);
/* Captured work on s (no-op unless s captures): a node after s's frontier,
 * which becomes the frontier. False when host memory ran out. */
bool gmr__sim_capture_add_node(gmr__sim_stream *s);
/* Drop every node (enable, disable). */
void gmr__sim_nodes_clear(void);
cudaError_t gmr__sim_stream_get_capture_frontier(cudaStream_t stream,
                                                 enum cudaStreamCaptureStatus *status,
                                                 unsigned long long *capture_id,
                                                 const cudaGraphNode_t **nodes, size_t *count);
cudaError_t gmr__sim_graph_node_get_dependencies(cudaGraphNode_t node, cudaGraphNode_t *deps,
                                                 size_t *count);

/* ---- hooks for the VMM part (sim_vmm.c); lock held ---- */
/* Whether the simulation is enabled. */
bool gmr__sim_enabled(void);
/* The device count, and the capacity of each device. */
int gmr__sim_device_count(void);
size_t gmr__sim_device_capacity_bytes(void);
/* Take `bytes` of `device`'s memory (false, nothing taken, past its
 * capacity) or give them back; counted as one allocation. */
bool gmr__sim_device_charge(int device, size_t bytes);
void gmr__sim_device_uncharge(int device, size_t bytes);
/* Check a stream handle as every call naming a stream does
 * (cudaErrorInvalidResourceHandle for a dead one, counted as stale);
 * *capturing says whether it captures now. */
cudaError_t gmr__sim_stream_check(cudaStream_t stream, bool *capturing);
/* Count a call that named a dead or unknown handle. */
void gmr__sim_count_stale_handle(void);
/* Defined in sim_vmm.c: drop every VMM object (at enable), and count the
 * live ones (leak checks). */
void gmr__sim_vmm_reset(void);
size_t gmr__sim_vmm_live_count(void);
/* The cuMemMap mapping that holds `addr`, if any (sim_vmm.c). */
bool gmr__sim_vmm_mapping_extent(uintptr_t addr, uintptr_t *base, size_t *bytes);
/* cuMemGetAddressRange of the simulation (sim_address_range.c): takes the
 * lock itself. */
CUresult gmr__sim_get_address_range(CUdeviceptr *base, size_t *bytes, CUdeviceptr ptr);

/* ---- sim_host_register.c ---- */
cudaError_t gmr__sim_host_register(void *ptr, size_t bytes);
cudaError_t gmr__sim_host_unregister(void *ptr);
cudaError_t gmr__sim_stream_get_id(cudaStream_t stream, unsigned long long *id);

#endif /* GMR_CORE_CUDA_SIM_SIM_INTERNAL_H_ */
