/*
 * gmr/device.h: devices and streams through gmr's CUDA layer.
 *
 * Programs and tools that use gmr (tools/replay, the tests) create streams and
 * query devices with these functions instead of calling the CUDA runtime, so
 * the same code runs on a real GPU and on the host simulation
 * (gmr/cuda_sim.h). With the simulation off, each function is one CUDA
 * runtime call.
 *
 * Thread-safe: yes; each function is as thread-safe as the CUDA call it makes.
 */
#ifndef GMR_DEVICE_H_
#define GMR_DEVICE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The same type as cudaGraph_t. */
typedef struct CUgraph_st *gmr_graph;

/**
 * True when the CUDA layer is the host simulation (gmr_cuda_sim_enable()).
 * Thread-safe: yes.
 */
GMR_API bool gmr_cuda_is_simulated(void);

/**
 * The name of a cudaError_t value ("cudaErrorMemoryAllocation"), or
 * "cudaErrorUnknown(N)"-style text for a value the runtime does not know.
 * Ownership: static or thread-local storage; valid until the next call in the
 * same thread. Thread-safe: yes. Never fails. Needs no GPU.
 */
GMR_API const char *gmr_cuda_error_name(int cuda_error);

/**
 * Number of CUDA devices (cudaGetDeviceCount), 0 when there is no GPU or no
 * driver: that is not an error here, so *out_count is 0 and GMR_OK returned.
 * Returns GMR_ERR_INVALID_ARGUMENT if out_count is NULL, GMR_ERR_CUDA for any
 * other CUDA failure (then *out_count is 0).
 */
GMR_API gmr_status gmr_device_get_count(int *out_count);

/**
 * The calling thread's current device (cudaGetDevice) / make `device` current
 * (cudaSetDevice). Returns GMR_OK, GMR_ERR_INVALID_ARGUMENT (NULL out or a
 * device out of range), or GMR_ERR_CUDA.
 */
GMR_API gmr_status gmr_device_get_current(int *out_device);
GMR_API gmr_status gmr_device_set_current(int device);

/**
 * Free and total memory of the current device in bytes (cudaMemGetInfo).
 * Returns GMR_OK, GMR_ERR_INVALID_ARGUMENT (NULL argument), GMR_ERR_CUDA.
 */
GMR_API gmr_status gmr_device_get_memory_info(size_t *free_bytes, size_t *total_bytes);

/**
 * Wait for all work on the current device (cudaDeviceSynchronize).
 * Returns GMR_OK or GMR_ERR_CUDA.
 */
GMR_API gmr_status gmr_device_synchronize(void);

/**
 * Create a stream on the current device that does not synchronise with the
 * default stream (cudaStreamCreateWithFlags(cudaStreamNonBlocking)).
 * Ownership: the caller destroys it with gmr_stream_destroy().
 * Returns GMR_OK, GMR_ERR_INVALID_ARGUMENT (NULL out), GMR_ERR_OUT_OF_MEMORY,
 * GMR_ERR_CUDA. On failure *out_stream is NULL.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stream_create(gmr_stream *out_stream);

/**
 * Destroy a stream made by gmr_stream_create(); its pending work still runs.
 * NULL (the default stream) is a no-op. Returns GMR_OK or GMR_ERR_CUDA.
 */
GMR_API gmr_status gmr_stream_destroy(gmr_stream stream);

/**
 * Wait until all work on `stream` is done (cudaStreamSynchronize).
 * Returns GMR_OK, GMR_ERR_CAPTURE_UNSAFE (the stream is capturing), GMR_ERR_CUDA.
 */
GMR_API gmr_status gmr_stream_synchronize(gmr_stream stream);

/**
 * Copy `bytes` bytes from `src` to `dst`, stream-ordered on `stream`
 * (cudaMemcpyAsync with cudaMemcpyDefault: device, pinned host, managed and
 * pageable memory in any direction; the runtime tells the direction from the
 * pointers). With pageable host memory the call may return only once the copy
 * is done. Tools and tests use it to move buffers between memory tiers
 * (gmr/tier_manager.h) on the GPU and on the simulation alike.
 * Ownership: none taken; both buffers must stay valid until the copy is done
 * (synchronise `stream`). Thread-safe: yes.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (dst or src NULL with bytes > 0);
 * GMR_ERR_CAPTURE_UNSAFE; GMR_ERR_CUDA (any other CUDA error). 0 bytes: GMR_OK.
 * Source: cudaMemcpyAsync (cuda_runtime_api.h).
 */
GMR_API gmr_status gmr_memcpy_async(void *dst, const void *src, size_t bytes, gmr_stream stream);

/**
 * Make work enqueued on `waiter` from now on wait for the work enqueued on
 * `waited` so far (an event recorded on `waited`, cudaStreamWaitEvent on
 * `waiter`, the event destroyed at once: the wait stays). Used where a block
 * used on several streams is freed and the resource cannot record the other
 * streams itself (PyTorch's CUDAMallocAsyncAllocator does the same for
 * record_stream). Neither stream is synchronised with the host.
 * Thread-safe: yes. Stream/device: creates the event on the current device,
 *   which must be `waited`'s device (CUDA's rule for cudaEventRecord).
 * Returns GMR_OK (also when waiter == waited: nothing to do); GMR_ERR_CUDA or
 * GMR_ERR_CAPTURE_UNSAFE for a failed CUDA call (then no wait was added);
 * GMR_ERR_OUT_OF_MEMORY when no event could be created.
 */
GMR_API gmr_status gmr_stream_wait_stream(gmr_stream waiter, gmr_stream waited);

/**
 * Start capturing `stream` into a CUDA graph (cudaStreamBeginCapture, mode
 * global). Returns GMR_OK, GMR_ERR_CUDA (e.g. the default stream, or already
 * capturing).
 */
GMR_API gmr_status gmr_stream_begin_capture(gmr_stream stream);

/**
 * End the capture of `stream` (cudaStreamEndCapture) and give the graph to the
 * caller in *out_graph (destroy it with gmr_graph_destroy()). Returns GMR_OK,
 * GMR_ERR_INVALID_ARGUMENT (NULL out), GMR_ERR_CUDA (not capturing, or the
 * capture was invalidated by a capture-unsafe call; then *out_graph is NULL).
 */
GMR_API gmr_status gmr_stream_end_capture(gmr_stream stream, gmr_graph *out_graph);

/** Destroy a graph from gmr_stream_end_capture(). NULL is a no-op. */
GMR_API gmr_status gmr_graph_destroy(gmr_graph graph);

/**
 * Whether `stream` is capturing now and the id of that capture
 * (cudaStreamGetCaptureInfo; ids are unique within the process).
 * Either out pointer may be NULL. Returns GMR_OK or GMR_ERR_CUDA; on failure
 * *out_capturing is false and *out_capture_id 0.
 */
GMR_API gmr_status gmr_stream_get_capture_info(gmr_stream stream, bool *out_capturing,
                                               uint64_t *out_capture_id);

#ifdef __cplusplus
}
#endif

#endif /* GMR_DEVICE_H_ */
