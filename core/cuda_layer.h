/*
 * core/cuda_layer.h (internal): the one place gmr calls CUDA through.
 *
 * Every CUDA runtime call of the library goes through a gmr__cuda_ops table.
 * There are two: the real one (cuda_real.c, one runtime call per slot) and
 * the host simulation (cuda_sim/). gmr__cuda() returns the active table;
 * a resource stores that pointer when it is created and uses it for its whole
 * life, so switching the simulation on or off never mixes the two for one
 * object.
 *
 * Thread-safe: yes; every slot is as thread-safe as the CUDA call it stands for.
 */
#ifndef GMR_CORE_CUDA_LAYER_H_
#define GMR_CORE_CUDA_LAYER_H_

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/extension.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gmr__cuda_vmm_ops; /* core/cuda_vmm.h */

typedef struct gmr__cuda_ops {
  const char *name; /* "cuda" or "simulation" */
  bool simulated;
  /* The driver's virtual memory calls that go with this table (cuda_vmm.h):
   * real with real, simulated with simulated. */
  const struct gmr__cuda_vmm_ops *vmm;

  cudaError_t (*get_device_count)(int *count);
  cudaError_t (*get_device)(int *device);
  cudaError_t (*set_device)(int device);
  cudaError_t (*device_get_attribute)(int *value, enum cudaDeviceAttr attr, int device);
  cudaError_t (*mem_get_info)(size_t *free_bytes, size_t *total_bytes);
  cudaError_t (*device_synchronize)(void);

  cudaError_t (*malloc)(void **ptr, size_t bytes);
  cudaError_t (*free)(void *ptr);
  cudaError_t (*malloc_managed)(void **ptr, size_t bytes);
  cudaError_t (*host_alloc)(void **ptr, size_t bytes);
  cudaError_t (*free_host)(void *ptr);

  /* A pinned device-memory pool on `device`, as cudaMemPoolCreate. */
  cudaError_t (*mem_pool_create)(cudaMemPool_t *pool, int device);
  cudaError_t (*mem_pool_destroy)(cudaMemPool_t pool);
  cudaError_t (*mem_pool_set_attribute)(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                        uint64_t value);
  cudaError_t (*mem_pool_get_attribute)(cudaMemPool_t pool, enum cudaMemPoolAttr attr,
                                        uint64_t *value);
  cudaError_t (*mem_pool_trim_to)(cudaMemPool_t pool, size_t min_bytes_to_keep);
  cudaError_t (*malloc_from_pool_async)(void **ptr, size_t bytes, cudaMemPool_t pool,
                                        cudaStream_t stream);
  cudaError_t (*free_async)(void *ptr, cudaStream_t stream);

  /* Non-blocking stream (cudaStreamNonBlocking) on the current device. */
  cudaError_t (*stream_create)(cudaStream_t *stream);
  cudaError_t (*stream_destroy)(cudaStream_t stream);
  cudaError_t (*stream_synchronize)(cudaStream_t stream);
  cudaError_t (*stream_wait_event)(cudaStream_t stream, cudaEvent_t event);
  cudaError_t (*stream_get_capture_info)(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                         unsigned long long *capture_id);
  /* cudaStreamGetCaptureInfo with the dependencies of the stream's next
   * captured work (its "frontier"): *nodes is valid until the next call on
   * the stream; NULL and 0 when it does not capture. */
  cudaError_t (*stream_get_capture_frontier)(cudaStream_t stream,
                                             enum cudaStreamCaptureStatus *status,
                                             unsigned long long *capture_id,
                                             const cudaGraphNode_t **nodes, size_t *count);
  /* cudaGraphNodeGetDependencies: deps NULL asks the count; else up to *count
   * are written and *count becomes the number written. */
  cudaError_t (*graph_node_get_dependencies)(cudaGraphNode_t node, cudaGraphNode_t *deps,
                                             size_t *count);
  cudaError_t (*stream_begin_capture)(cudaStream_t stream, enum cudaStreamCaptureMode mode);
  cudaError_t (*stream_end_capture)(cudaStream_t stream, cudaGraph_t *graph);
  cudaError_t (*graph_destroy)(cudaGraph_t graph);
  /* cudaThreadExchangeStreamCaptureMode: the calling thread's capture
   * interaction mode is set to *mode and *mode receives the previous one. */
  cudaError_t (*thread_exchange_capture_mode)(enum cudaStreamCaptureMode *mode);

  /* Events without timing (cudaEventDisableTiming). */
  cudaError_t (*event_create)(cudaEvent_t *event);
  cudaError_t (*event_destroy)(cudaEvent_t event);
  cudaError_t (*event_record)(cudaEvent_t event, cudaStream_t stream);
  cudaError_t (*event_query)(cudaEvent_t event);
  cudaError_t (*event_synchronize)(cudaEvent_t event);

  cudaError_t (*memset_async)(void *ptr, int value, size_t bytes, cudaStream_t stream);

  /* cudaMemcpyAsync(cudaMemcpyDefault): the runtime tells the direction from
   * the pointers (unified addressing). Moves data between memory tiers. */
  cudaError_t (*memcpy_async)(void *dst, const void *src, size_t bytes, cudaStream_t stream);
  /* cudaHostRegister(cudaHostRegisterPortable) / cudaHostUnregister: pin host
   * memory the caller placed itself (NUMA-bound pages, tiers/numa_host). */
  cudaError_t (*host_register)(void *ptr, size_t bytes);
  cudaError_t (*host_unregister)(void *ptr);
  /* cudaStreamGetId (CUDA 12.0+): an id unique for the process's lifetime,
   * never reused, so a new stream that happens to get a destroyed stream's
   * handle is told apart from it. For cudaStreamPerThread, the calling
   * thread's own per-thread stream. A getter: no stream-ordered work. */
  cudaError_t (*stream_get_id)(cudaStream_t stream, unsigned long long *id);
} gmr__cuda_ops;

/* The real CUDA runtime and the simulation (defined in cuda_real.c / cuda_sim/sim_ops.c). */
extern const gmr__cuda_ops gmr__cuda_real_ops;
extern const gmr__cuda_ops gmr__cuda_sim_ops;

/* The active layer (an atomic load). Never NULL. */
GMR_EXTENSION_API
const gmr__cuda_ops *gmr__cuda(void);

/* Make `ops` the active layer (used by gmr_cuda_sim_enable/disable). */
void gmr__cuda_set_active(const gmr__cuda_ops *ops);

/*
 * Called once, at the first use of the layer when no program chose one: reads
 * GMR_CUDA_SIM and enables the simulation as it asks (gmr/sim/cuda_sim.h), or
 * does nothing (then the real runtime is used). Defined in cuda_sim/sim_env.c;
 * libraries without the simulation get cuda_layer.c's weak empty definition.
 */
void gmr__cuda_sim_enable_from_env(void);

/*
 * Make `device` current for the calling thread if it is not, remembering the
 * caller's device in *saved (-1 when nothing had to change). Pair every
 * successful enter with gmr__cuda_device_leave(). Returns the CUDA error of
 * cudaGetDevice / cudaSetDevice, cudaSuccess otherwise.
 * Report a failure with gmr__cuda_fail(failure, "cudaSetDevice", err), as
 * every caller does: the enter remembers (per thread, until that report or
 * the thread's next enter) which of the two calls failed, and the message
 * names it ("cudaGetDevice failed: ..." when reading the caller's device
 * was refused).
 */
GMR_EXTENSION_API
cudaError_t gmr__cuda_device_enter(const gmr__cuda_ops *ops, int device, int *saved);
GMR_EXTENSION_API
void gmr__cuda_device_leave(const gmr__cuda_ops *ops, int saved);

/*
 * For a caller that writes its own message instead of gmr__cuda_fail: the
 * name of the call that failed in this thread's last gmr__cuda_device_enter
 * that returned `err` ("cudaGetDevice" or "cudaSetDevice"; "cudaSetDevice"
 * when that enter's failure was already reported or `err` differs). No CUDA
 * call; thread-safe (the record is per thread).
 */
GMR_EXTENSION_API
const char *gmr__cuda_device_enter_failed_call(cudaError_t err);

/*
 * Switch the calling thread to relaxed capture mode, so that calls global
 * capture mode forbids (cudaMalloc, page mapping, event queries) neither fail
 * nor invalidate a capture in progress; *saved receives the mode to restore.
 * Pair every successful enter with gmr__cuda_capture_relaxed_leave(), on
 * every path. This is what PyTorch's cudaMallocMaybeCapturing does.
 *
 * Restoring cannot fail in the real runtime (it refuses only an invalid mode,
 * and the mode restored is one it returned), except with a context already
 * broken by a sticky error. Still, leave retries once, and if the mode is not
 * back it remembers it per thread: the thread's next enter hands it out as
 * *saved, so the next leave restores the program's mode and not relaxed.
 * Such failures are counted (gmr__cuda_capture_mode_unrestored_count). The
 * simulation's injected failures of the call model exactly that: a call that
 * fails and changes nothing.
 */
cudaError_t gmr__cuda_capture_relaxed_enter(const gmr__cuda_ops *ops,
                                            enum cudaStreamCaptureMode *saved);
void gmr__cuda_capture_relaxed_leave(const gmr__cuda_ops *ops, enum cudaStreamCaptureMode saved);

/* Leaves that could not restore a thread's mode, in the whole process. */
uint64_t gmr__cuda_capture_mode_unrestored_count(void);

/* True when `stream` is capturing now (any error counts as "not capturing"). */
GMR_EXTENSION_API
bool gmr__cuda_stream_is_capturing(const gmr__cuda_ops *ops, cudaStream_t stream);

/*
 * Map a CUDA error to a gmr status: cudaErrorMemoryAllocation ->
 * GMR_ERR_OUT_OF_MEMORY, stream-capture errors -> GMR_ERR_CAPTURE_UNSAFE,
 * cudaSuccess -> GMR_OK, anything else -> GMR_ERR_CUDA.
 */
GMR_EXTENSION_API
gmr_status gmr__status_from_cuda(cudaError_t err);

/* Record a CUDA failure in `failure` (cuda_error and a message naming `call`).
 * Returns the mapped status. `failure` may be NULL. `call` "cudaSetDevice"
 * with the error of the calling thread's last, failed
 * gmr__cuda_device_enter() names the call that failed there instead. */
GMR_EXTENSION_API
gmr_status gmr__cuda_fail(gmr_failure *failure, const char *call, cudaError_t err);

/* Streams, captures and copies for tests and tools: the bodies of
 * gmr/sim/streams.h (core/cuda_sim/sim_streams.c), which says what each
 * does and returns. */
gmr_status gmr__stream_create(gmr_stream *out_stream);
gmr_status gmr__stream_destroy(gmr_stream stream);
gmr_status gmr__stream_synchronize(gmr_stream stream);
gmr_status gmr__stream_memcpy_async(void *dst, const void *src, size_t bytes, gmr_stream stream);
gmr_status gmr__stream_begin_capture(gmr_stream stream);
gmr_status gmr__stream_end_capture(gmr_stream stream, gmr_graph *out_graph);
gmr_status gmr__graph_destroy(gmr_graph graph);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_CUDA_LAYER_H_ */
