/*
 * gmr/device.h: devices and streams through gmr's CUDA layer, what gmr's own
 * users need of it: the PyTorch shim (the current device, memory,
 * synchronisation, stream waits, capture queries), the Python package
 * (device count, memory, whether the layer is simulated), and the names of
 * the CUDA errors that failure records carry.
 *
 * They call gmr's CUDA layer instead of the CUDA runtime, so the same code
 * runs on a real GPU and on the host simulation (gmr/sim/cuda_sim.h). With
 * the simulation off, each function is one CUDA runtime call. Creating and
 * destroying streams and graphs, captures and copies, which only tests and
 * tools need, are in gmr/sim/streams.h (//:gmr_sim).
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
 * True when the CUDA layer is the host simulation (gmr_cuda_sim_enable(), or
 * GMR_CUDA_SIM=1 at the first use).
 * Thread-safe: yes. Stream/device: no CUDA call; the first call of the
 * process may choose the layer from the environment. Never fails.
 */
GMR_API bool gmr_cuda_is_simulated(void);

/**
 * The name of a cudaError_t value ("cudaErrorMemoryAllocation"), as
 * cudaGetErrorName gives it ("unrecognized error code" for a value the
 * runtime does not know).
 * Ownership: static storage of the runtime; never free it.
 * Thread-safe: yes. Stream/device: a table lookup, needs no GPU. Never fails.
 * Source: cudaGetErrorName (cuda_runtime_api.h).
 */
GMR_API const char *gmr_cuda_error_name(int cuda_error);

/**
 * Count the CUDA devices (cudaGetDeviceCount) into *out_count.
 * Thread-safe: yes. Stream/device: one CUDA call; never synchronises.
 * Returns:
 *   GMR_OK                    *out_count is set; 0 when there is no GPU or no
 *                             driver (cudaErrorNoDevice, cudaErrorInsufficientDriver
 *                             are no error here).
 *   GMR_ERR_INVALID_ARGUMENT  out_count is NULL.
 *   GMR_ERR_CUDA              any other CUDA failure.
 * On failure *out_count is 0 (when out_count is not NULL).
 */
GMR_API GMR_NODISCARD gmr_status gmr_device_get_count(int *out_count);

/**
 * Read the calling thread's current device (cudaGetDevice) into *out_device.
 * Thread-safe: yes (the current device is per thread). Stream/device: one
 *   CUDA call; never synchronises.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (out_device NULL); GMR_ERR_CUDA
 * (the runtime failed). On failure *out_device is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_device_get_current(int *out_device);

/**
 * Make `device` the calling thread's current device (cudaSetDevice).
 * Thread-safe: yes (per thread). Stream/device: one CUDA call; may create the
 *   device's primary context on first use; never synchronises.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (no such device); GMR_ERR_CUDA (any
 * other failure). On failure the current device is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_device_set_current(int device);

/**
 * Free and total memory of the current device in bytes (cudaMemGetInfo).
 * Thread-safe: yes. Stream/device: one CUDA call; never synchronises.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (a NULL argument); GMR_ERR_CUDA.
 * On failure the outputs are unspecified.
 */
GMR_API GMR_NODISCARD gmr_status gmr_device_get_memory_info(size_t *free_bytes,
                                                            size_t *total_bytes);

/**
 * Wait for all work on the current device (cudaDeviceSynchronize).
 * Thread-safe: yes. Stream/device: synchronises the whole device.
 * Returns GMR_OK; GMR_ERR_CAPTURE_UNSAFE (a stream of the device captures:
 * the capture is invalidated, as CUDA does); GMR_ERR_CUDA (an earlier
 * asynchronous error, or any other failure). Changes nothing on failure but
 * what CUDA itself did.
 */
GMR_API GMR_NODISCARD gmr_status gmr_device_synchronize(void);

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
 * GMR_ERR_CAPTURE_UNSAFE for a failed CUDA call; GMR_ERR_OUT_OF_MEMORY when
 * no event could be created. On failure no wait was added.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stream_wait_stream(gmr_stream waiter, gmr_stream waited);

/**
 * Whether `stream` is capturing now and the id of that capture
 * (cudaStreamGetCaptureInfo; ids are unique within the process). Either out
 * pointer may be NULL.
 * Thread-safe: yes. Stream/device: one CUDA call, legal during a capture.
 * Returns GMR_OK; GMR_ERR_CUDA (an unknown stream, or another failure); on
 * failure *out_capturing is false and *out_capture_id 0.
 */
GMR_API GMR_NODISCARD gmr_status gmr_stream_get_capture_info(gmr_stream stream, bool *out_capturing,
                                                             uint64_t *out_capture_id);

#ifdef __cplusplus
}
#endif

#endif /* GMR_DEVICE_H_ */
