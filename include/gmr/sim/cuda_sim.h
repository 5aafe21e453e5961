/*
 * gmr/sim/cuda_sim.h: the host simulation of gmr's CUDA layer, for tests and tools
 * on machines without a GPU.
 *
 * Every CUDA call gmr makes goes through one internal layer. While the
 * simulation is enabled that layer does not call CUDA at all:
 *  - devices are numbered 0..device_count-1, each with a memory capacity;
 *    allocations past it fail with cudaErrorMemoryAllocation;
 *  - device, managed and pinned allocations are backed by host memory (so a
 *    test can read and write them, and ASan sees overflows);
 *  - streams and events complete at once, unless a stream is held
 *    (gmr_cuda_sim_stream_hold): then events recorded on it stay pending until
 *    it is released or an event synchronisation waits for them. The order is
 *    transitive, as on a GPU: a stream that waited on a pending event
 *    (cudaStreamWaitEvent) records events that stay pending until that
 *    event's work is done, held or not (marks below ask the order); a stream
 *    held with gmr_cuda_sim_stream_hold_beyond_destroy() keeps its pending
 *    work pending after it is destroyed (as CUDA runs it after
 *    cudaStreamDestroy returns) until a device-wide synchronisation
 *    (cudaDeviceSynchronize, a synchronisation of the legacy default stream,
 *    cudaFree) or an event synchronisation;
 *  - capture follows CUDA's capture modes: calls CUDA calls "potentially
 *    unsafe" (cudaMalloc, cudaFree, cudaHostAlloc, synchronisation, event
 *    queries) fail with
 *    cudaErrorStreamCaptureUnsupported and invalidate the capture when the
 *    calling thread is in global mode and began a capture or another thread
 *    began a global-mode one, or is in thread-local mode and began a capture
 *    (captures begun in relaxed mode forbid nothing); a thread in relaxed
 *    mode (cudaThreadExchangeStreamCaptureMode) is allowed them. Work and
 *    event records on a capturing stream become graph nodes and run nothing;
 *    an event recorded there can be waited on only inside its capture (a
 *    stream that is not capturing joins it) and never queried or
 *    synchronised (cudaErrorCapturedEvent during the capture,
 *    cudaErrorInvalidValue after it, as an H100 answered); a capturing
 *    stream may wait only on events of its own capture
 *    (cudaErrorStreamCaptureIsolation); synchronising a capturing stream, or
 *    the device while any stream captures, is refused in every mode, and so
 *    is cudaStreamGetId on a capturing stream (on any other stream it is
 *    legal during a capture: an H100 showed both). Refused calls invalidate
 *    the captures they concern;
 *  - any call can be made to fail on its Nth use (fault injection);
 *  - every call is counted.
 * Select it explicitly, before creating any resource: a resource keeps the
 * layer (real or simulated) that was active when it was created.
 *
 * Or from the environment, for a program that does not choose (an installed
 * example, Python loading libgmr.so): when no gmr_cuda_sim_enable() or
 * gmr_cuda_sim_disable() came first, the first use of the CUDA layer reads
 * GMR_CUDA_SIM once:
 *   GMR_CUDA_SIM=1 (true, yes, on)          the simulation, default config;
 *   GMR_CUDA_SIM=devices=2,memory=16GiB     the simulation with that config
 *                                           (either key may be left out);
 *   unset, empty, 0 (false, no, off)        the real CUDA runtime.
 * An invalid key or value is reported on stderr and its default kept.
 *
 * Thread-safe: yes (internal mutex). Enable/disable must not race with other
 * use of the layer.
 */
#ifndef GMR_CUDA_SIM_H_
#define GMR_CUDA_SIM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* XX(NAME, "cudaFunction"). Every CUDA call of the layer, in one list. */
#define GMR_CUDA_CALL_MAP(XX)                                  \
  XX(GET_DEVICE_COUNT, "cudaGetDeviceCount")                   \
  XX(GET_DEVICE, "cudaGetDevice")                              \
  XX(SET_DEVICE, "cudaSetDevice")                              \
  XX(DEVICE_GET_ATTRIBUTE, "cudaDeviceGetAttribute")           \
  XX(MEM_GET_INFO, "cudaMemGetInfo")                           \
  XX(DEVICE_SYNCHRONIZE, "cudaDeviceSynchronize")              \
  XX(MALLOC, "cudaMalloc")                                     \
  XX(FREE, "cudaFree")                                         \
  XX(MALLOC_MANAGED, "cudaMallocManaged")                      \
  XX(HOST_ALLOC, "cudaHostAlloc")                              \
  XX(FREE_HOST, "cudaFreeHost")                                \
  XX(MEM_POOL_CREATE, "cudaMemPoolCreate")                     \
  XX(MEM_POOL_DESTROY, "cudaMemPoolDestroy")                   \
  XX(MEM_POOL_SET_ATTRIBUTE, "cudaMemPoolSetAttribute")        \
  XX(MEM_POOL_GET_ATTRIBUTE, "cudaMemPoolGetAttribute")        \
  XX(MEM_POOL_TRIM_TO, "cudaMemPoolTrimTo")                    \
  XX(MALLOC_FROM_POOL_ASYNC, "cudaMallocFromPoolAsync")        \
  XX(FREE_ASYNC, "cudaFreeAsync")                              \
  XX(STREAM_CREATE, "cudaStreamCreateWithFlags")               \
  XX(STREAM_DESTROY, "cudaStreamDestroy")                      \
  XX(STREAM_SYNCHRONIZE, "cudaStreamSynchronize")              \
  XX(STREAM_WAIT_EVENT, "cudaStreamWaitEvent")                 \
  XX(STREAM_GET_CAPTURE_INFO, "cudaStreamGetCaptureInfo")      \
  XX(STREAM_BEGIN_CAPTURE, "cudaStreamBeginCapture")           \
  XX(STREAM_END_CAPTURE, "cudaStreamEndCapture")               \
  XX(GRAPH_DESTROY, "cudaGraphDestroy")                        \
  XX(EVENT_CREATE, "cudaEventCreateWithFlags")                 \
  XX(EVENT_DESTROY, "cudaEventDestroy")                        \
  XX(EVENT_RECORD, "cudaEventRecord")                          \
  XX(EVENT_QUERY, "cudaEventQuery")                            \
  XX(EVENT_SYNCHRONIZE, "cudaEventSynchronize")                \
  XX(MEMSET_ASYNC, "cudaMemsetAsync")                          \
  XX(THREAD_EXCHANGE_CAPTURE_MODE, "cudaThreadExchangeStreamCaptureMode") \
  XX(MEMCPY_ASYNC, "cudaMemcpyAsync")                                     \
  XX(HOST_REGISTER, "cudaHostRegister")                                   \
  XX(HOST_UNREGISTER, "cudaHostUnregister")                               \
  XX(MEM_ADDRESS_RESERVE, "cuMemAddressReserve")                          \
  XX(MEM_ADDRESS_FREE, "cuMemAddressFree")                                \
  XX(MEM_CREATE, "cuMemCreate")                                           \
  XX(MEM_RELEASE, "cuMemRelease")                                         \
  XX(MEM_MAP, "cuMemMap")                                                 \
  XX(MEM_UNMAP, "cuMemUnmap")                                             \
  XX(MEM_SET_ACCESS, "cuMemSetAccess")                                    \
  XX(MEM_GET_ALLOCATION_GRANULARITY, "cuMemGetAllocationGranularity")     \
  XX(MEM_RETAIN_ALLOCATION_HANDLE, "cuMemRetainAllocationHandle")         \
  XX(DEVICE_GET_ATTRIBUTE_DRIVER, "cuDeviceGetAttribute")                 \
  XX(DEVICE_CAN_ACCESS_PEER, "cudaDeviceCanAccessPeer")                   \
  XX(STREAM_GET_ID, "cudaStreamGetId")                                    \
  XX(MEM_GET_ADDRESS_RANGE, "cuMemGetAddressRange")                       \
  XX(GRAPH_NODE_GET_DEPENDENCIES, "cudaGraphNodeGetDependencies")

typedef enum gmr_cuda_call {
#define GMR_CUDA_CALL_ENUM_(name, fn) GMR_CUDA_CALL_##name,
  GMR_CUDA_CALL_MAP(GMR_CUDA_CALL_ENUM_)
#undef GMR_CUDA_CALL_ENUM_
  GMR_CUDA_CALL_COUNT
} gmr_cuda_call;

/**
 * The CUDA function's name ("cudaMalloc"), or "unknown" for a value outside
 * the map. Ownership: static string. Thread-safe: yes. Never fails; no CUDA
 * call.
 */
GMR_API const char *gmr_cuda_call_name(gmr_cuda_call call);

typedef struct gmr_cuda_sim_config {
  int device_count;              /* 1..16 simulated devices */
  size_t device_memory_bytes;    /* capacity of each device */
  bool memory_pools_supported;   /* cudaDevAttrMemoryPoolsSupported */
} gmr_cuda_sim_config;

/* One device with the memory of an H100 (80 GiB); pools supported. */
#define GMR_CUDA_SIM_CONFIG_DEFAULT {1, (size_t)80 << 30, true}

/**
 * Switch the process's CUDA layer to the simulation, with fresh state: no
 * allocations, zeroed call counts, no injected failures, device 0 current.
 * `config` is copied; NULL means GMR_CUDA_SIM_CONFIG_DEFAULT.
 * Thread-safe: no; call it before other threads use gmr.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT for a device count outside 1..16 or a
 * zero capacity; GMR_ERR_BUSY if the simulation is already enabled and still
 * has live allocations, streams, events, pools or graphs (nothing changes).
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_enable(const gmr_cuda_sim_config *config);

/**
 * The calling thread's simulated capture interaction mode, as the
 * cudaStreamCaptureMode value (0 global, the default; 1 thread-local;
 * 2 relaxed), so a test can check that code which switched to relaxed mode
 * switched back on every path. Thread-safe: yes (thread-local state).
 */
GMR_API int gmr_cuda_sim_get_thread_capture_mode(void);

/**
 * Switch back to the real CUDA runtime (GMR_OK also when the simulation is
 * off already).
 * Thread-safe: no; no other thread may use gmr during the call.
 * Stream/device: no CUDA call; later calls go to the real runtime.
 * Returns GMR_OK; GMR_ERR_BUSY if simulated allocations, streams, events,
 * pools or graphs are still live: then the simulation stays on, unchanged (a
 * test that disables it at its end so finds leaks).
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_disable(void);

/**
 * Make calls of kind `call` fail: after `skip_count` more calls succeed, the
 * next `fail_count` calls (UINT64_MAX: all of them) return `cuda_error`
 * without side effects. One rule per call kind; a new rule replaces the old.
 * Example: the 3rd cudaMalloc from now fails with cudaErrorMemoryAllocation:
 *   gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 2, 1, 2);
 * A failed call has no effect, as a real call that returns an error: in
 * particular a failed cudaThreadExchangeStreamCaptureMode leaves the thread's
 * mode as it was. (The real call refuses only an invalid mode, or fails in a
 * context broken by a sticky error; gmr retries a restore once and otherwise
 * restores the mode at the thread's next relaxed section: core/cuda_layer.h.)
 * Thread-safe: yes (internal mutex); a rule armed while other threads call
 *   applies from their next call of that kind. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT for an unknown call or cuda_error 0;
 * GMR_ERR_UNSUPPORTED if the simulation is not enabled. On failure no rule
 * changes.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_inject_failure(gmr_cuda_call call,
                                                             uint64_t skip_count,
                                                             uint64_t fail_count, int cuda_error);

/**
 * Make every call of kind `call` take `delay_ns` nanoseconds longer (0: no
 * delay), as a slow cudaMalloc or a driver under load does, so a test can
 * show that a slow call in one thread holds up no other thread. The call is
 * counted first and then sleeps without holding any lock of the simulation:
 * other threads' simulated calls go on meanwhile. One delay per call kind; a
 * new one replaces the old; gmr_cuda_sim_enable() and
 * gmr_cuda_sim_clear_failures() remove them all.
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT for an unknown call;
 * GMR_ERR_UNSUPPORTED if the simulation is not enabled. On failure no delay
 * changes.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_inject_delay(gmr_cuda_call call, uint64_t delay_ns);

/**
 * Remove every injected failure and delay.
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK, also when the simulation is not enabled (nothing to
 * remove): it never fails.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_clear_failures(void);

/**
 * Number of calls of kind `call` since enable, successful or not (0 when the
 * simulation is off or `call` is unknown). Thread-safe: yes.
 */
GMR_API uint64_t gmr_cuda_sim_get_call_count(gmr_cuda_call call);

/** Memory of one simulated device. */
typedef struct gmr_cuda_sim_usage {
  size_t used_bytes;         /* bytes allocated on the device now (pools: reserved) */
  size_t peak_used_bytes;    /* high-water mark of used_bytes */
  size_t allocation_count;   /* live cudaMalloc/Managed/pool allocations */
  size_t capacity_bytes;     /* the configured capacity */
} gmr_cuda_sim_usage;

/**
 * Memory use of simulated `device` in bytes (pinned host allocations are
 * counted on no device; see gmr_cuda_sim_get_host_usage).
 * Thread-safe: yes (a snapshot under the simulation's mutex). Stream/device:
 *   no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL out or no such device);
 * GMR_ERR_UNSUPPORTED (simulation off). On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_get_device_usage(int device, gmr_cuda_sim_usage *out);

/**
 * Pinned host memory (cudaHostAlloc) in use, in bytes.
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL out); GMR_ERR_UNSUPPORTED
 * (simulation off). On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_get_host_usage(gmr_cuda_sim_usage *out);

/**
 * Hold or release `stream` (not NULL): while held, work "enqueued" on it does
 * not complete, so events recorded on it stay pending (cudaEventQuery returns
 * cudaErrorNotReady). Releasing completes everything recorded so far.
 * cudaEventSynchronize / cudaStreamSynchronize on a held stream complete what
 * they wait for (the simulated work "finishes"), the stream stays held.
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT for NULL or an unknown stream;
 * GMR_ERR_UNSUPPORTED (simulation off). On failure nothing changes.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_stream_hold(gmr_stream stream, bool hold);

/**
 * Hold `stream` as gmr_cuda_sim_stream_hold(stream, true) does, and keep its
 * pending work pending even after the stream is destroyed (CUDA runs a
 * destroyed stream's work to completion): events recorded on it before the
 * destroy complete only at a device-wide synchronisation (cudaDeviceSynchronize,
 * a synchronisation of the legacy default stream, cudaFree) or when an event
 * synchronisation waits for them. Lets a test check that a resource never
 * hands a destroyed stream's pending memory to a new stream that got the
 * same handle. Thread-safe: yes. Returns as gmr_cuda_sim_stream_hold().
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_stream_hold_beyond_destroy(gmr_stream stream);

/**
 * With `reuse` true, the next stream created gets the handle of the stream
 * destroyed last (as the CUDA driver often does: it reuses the address), so
 * a test can check that a resource never takes a new stream for a destroyed
 * one that had the same handle. Off after gmr_cuda_sim_enable().
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK, or GMR_ERR_UNSUPPORTED (simulation off; nothing changes).
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_reuse_stream_handles(bool reuse);

/**
 * Number of cudaStreamWaitEvent calls that made `stream` wait (0 for unknown
 * streams or the simulation off). Lets tests check cross-stream ordering.
 * Thread-safe: yes.
 */
GMR_API uint64_t gmr_cuda_sim_get_stream_wait_count(gmr_stream stream);
/**
 * The CUDA call that last invalidated a capture (a potentially unsafe call
 * in the wrong thread mode, a synchronisation during a capture, a wait
 * across its boundary...), so a test can say which call broke a capture;
 * GMR_CUDA_CALL_COUNT when none did since gmr_cuda_sim_enable() or the
 * simulation is off. Thread-safe: yes. Stream/device: no CUDA call.
 */
GMR_API gmr_cuda_call gmr_cuda_sim_get_capture_breaker(void);

/* ---- marks: the order of streams, for tests' oracles ---------------------
 *
 * A mark is a point in one stream's work: everything queued on the stream
 * before it, and everything that work was ordered after (events the stream
 * waited on, transitively). A test marks the stream that used memory when it
 * frees it, and later asks whether the stream that got the memory is ordered
 * after the mark: its work then cannot overlap the old use. Within a graph
 * capture the order is the graph's (events recorded and waited on in the
 * capture: forks and joins), and a stream's captured work counts as after
 * that stream's work before the capture (the convention every stream-ordered
 * allocator keeps: a capturing stream reuses its own earlier frees; launch
 * the graph on a stream ordered after the captured streams' earlier work);
 * a mark made in a capture is a node of the graph (a kernel) and counts as
 * done once the capture is over. Marks make no CUDA call and are not counted
 * as calls.
 */
typedef uint64_t gmr_cuda_sim_mark;

/**
 * Mark `stream`'s work up to now into *out (a new mark; the stream's
 * position advances by one, as at an event record).
 * Ownership: the caller releases it with gmr_cuda_sim_mark_release();
 * gmr_cuda_sim_enable() and gmr_cuda_sim_disable() drop every mark.
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL out, a default stream, or
 * not a live simulated stream); GMR_ERR_OUT_OF_MEMORY (host memory);
 * GMR_ERR_UNSUPPORTED (simulation off). On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_mark_stream(gmr_stream stream,
                                                          gmr_cuda_sim_mark *out);

/**
 * Whether work queued on `stream` from now runs after all the work of
 * `mark`: that work is done, or `stream` is ordered after it (the same
 * stream, or waits on events recorded after it, transitively; in a capture,
 * the graph's edges). Into *out_ordered.
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL out, an unknown mark, a
 * default stream or not a live simulated stream); GMR_ERR_UNSUPPORTED
 * (simulation off). On failure *out_ordered is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_mark_ordered_before(gmr_cuda_sim_mark mark,
                                                                  gmr_stream stream,
                                                                  bool *out_ordered);

/**
 * Whether all the work of `mark` is done, into *out_complete.
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL out or an unknown mark);
 * GMR_ERR_UNSUPPORTED (simulation off). On failure *out_complete is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_mark_query(gmr_cuda_sim_mark mark,
                                                         bool *out_complete);

/**
 * Release `mark`. Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (an unknown mark: nothing
 * changes); GMR_ERR_UNSUPPORTED (simulation off).
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_mark_release(gmr_cuda_sim_mark mark);

/**
 * Number of CUDA calls since enable that named a stream, event, pool or graph
 * that is not alive (destroyed, or never created by the simulation). Real CUDA
 * may crash on such a call (seen on an H100 with a destroyed stream), so the
 * test fixture fails a test whose code under test made one. 0 when off.
 * Thread-safe: yes.
 */
GMR_API uint64_t gmr_cuda_sim_get_stale_handle_count(void);

/* ---- virtual memory management (the driver's cuMem* calls) ---------------
 *
 * The simulation backs each device's physical memory with one memfd the size
 * of the device: cuMemCreate takes a range of it, cuMemAddressReserve a
 * PROT_NONE range of host addresses, cuMemMap maps the range there
 * (mmap MAP_FIXED|MAP_SHARED, still without access), cuMemSetAccess makes it
 * readable and writable, cuMemUnmap turns it back into reserved addresses.
 * A physical allocation mapped at two addresses is one memory: a write
 * through one address is read through the other, as on a GPU. Touching a
 * mapping before cuMemSetAccess, or an unmapped address, faults (SIGSEGV),
 * as an illegal address would on a device. The driver's rules are checked
 * and answered with its error codes (CUresult): sizes and addresses a
 * multiple of the granularity, cuMemMap from offset 0 into reserved and
 * unmapped addresses only, cuMemUnmap of a whole mapping only, cuMemSetAccess
 * over mapped ranges only, cuMemCreate past the device's capacity
 * CUDA_ERROR_OUT_OF_MEMORY. Physical memory counts in the device's usage
 * (gmr_cuda_sim_get_device_usage, cudaMemGetInfo) from cuMemCreate until the
 * last mapping of a released allocation is gone. The calls that map, unmap,
 * create or release are "potentially unsafe" during a global capture, like
 * cudaMalloc (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED unless the thread is in
 * relaxed mode). Where CUDA leaves a misuse undefined (cuMemAddressFree of a
 * range that is still mapped, cuMemRelease of an unknown handle), the
 * simulation refuses with CUDA_ERROR_INVALID_VALUE so tests notice.
 * Work that may still run counts too: a cudaMemcpyAsync or cudaMemsetAsync
 * queued on a held stream (or on a stream ordered after pending work) stays
 * a pending use of the addresses it touched until that stream's work is
 * complete, and a cuMemUnmap over a pending use is counted
 * (unmap_under_work_count of gmr_cuda_sim_vmm_usage): on a GPU the work
 * would fault on the unmapped addresses. The unmap itself goes ahead, as
 * the driver's does.
 */

typedef struct gmr_cuda_sim_vmm_config {
  bool supported;                       /* CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
  size_t granularity_bytes;             /* CU_MEM_ALLOC_GRANULARITY_MINIMUM */
  size_t recommended_granularity_bytes; /* CU_MEM_ALLOC_GRANULARITY_RECOMMENDED */
  bool fabric_handles_supported;        /* CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED */
  bool gpu_direct_rdma_supported;       /* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED */
  bool peer_access_supported;           /* cudaDeviceCanAccessPeer between any two devices */
} gmr_cuda_sim_vmm_config;

/* What an H100 reports: VMM supported, 2 MiB granularities, no fabric
 * handles, no GPUDirect RDMA with VMM, peers reachable. */
#define GMR_CUDA_SIM_VMM_CONFIG_DEFAULT \
  {true, (size_t)2 << 20, (size_t)2 << 20, false, false, true}

/**
 * Change the simulated devices' VMM properties (gmr_cuda_sim_enable() resets
 * them to GMR_CUDA_SIM_VMM_CONFIG_DEFAULT). `config` is copied.
 * Thread-safe: yes (internal mutex); call it before creating resources.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL, a granularity that is not a
 * power of two and a multiple of the host page size, or a recommended
 * granularity that is not a multiple of the minimum); GMR_ERR_BUSY while
 * reservations or physical allocations are live; GMR_ERR_UNSUPPORTED
 * (simulation off). On failure nothing changes. Stream/device: no CUDA call.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_configure_vmm(const gmr_cuda_sim_vmm_config *config);

/** What the simulation knows about one address. */
typedef struct gmr_cuda_sim_vmm_mapping {
  bool reserved;               /* inside a cuMemAddressReserve range */
  bool mapped;                 /* inside a cuMemMap mapping */
  void *base;                  /* the mapping's first address (mapped only) */
  size_t bytes;                /* the mapping's size */
  int device;                  /* the physical allocation's device */
  uint32_t access_device_mask; /* bit d: cuMemSetAccess gave device d read-write access */
  uint64_t physical_id;        /* the physical allocation, unique for the process */
  unsigned handle_types;       /* CUmemAllocationHandleType bits cuMemCreate was asked for */
} gmr_cuda_sim_vmm_mapping;

/**
 * Describe `ptr`: reserved or not, mapped or not, and for a mapping its
 * extent, device, access and physical allocation (two addresses with the same
 * physical_id are one memory mapped twice). Thread-safe: yes.
 * Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL out); GMR_ERR_UNSUPPORTED
 * (simulation off). On failure *out is zeroed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_vmm_query(const void *ptr,
                                                        gmr_cuda_sim_vmm_mapping *out);

/** Totals of the simulated VMM objects, all devices. */
typedef struct gmr_cuda_sim_vmm_usage {
  size_t reservation_count;
  size_t reserved_bytes;
  size_t physical_count; /* physical allocations alive (created, or released but still mapped) */
  size_t physical_bytes;
  size_t mapping_count;
  size_t mapped_bytes;   /* a physical allocation mapped twice counts twice */
  /* cuMemUnmap calls that unmapped memory which work still pending on a
   * stream used (a copy or memset queued on a held stream, or on a stream
   * ordered after such work, and not yet complete): on a GPU that work
   * faults (an illegal address). SimTest fails a test that made one. */
  size_t unmap_under_work_count;
} gmr_cuda_sim_vmm_usage;

/**
 * Fill *out with the totals of the simulated VMM objects of all devices.
 * Thread-safe: yes (a snapshot). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL out); GMR_ERR_UNSUPPORTED
 * (simulation off). On failure *out is zeroed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_sim_get_vmm_usage(gmr_cuda_sim_vmm_usage *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CUDA_SIM_H_ */
