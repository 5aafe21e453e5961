/*
 * gmr/sim/streams.h: streams, graph captures and copies through gmr's CUDA
 * layer, for tests and tools (//:gmr_sim, linked by //:gmr_testing; never in
 * libgmr).
 *
 * Tests and tools (tools/replay, the benchmarks, the fuzzers) create streams,
 * capture graphs and copy buffers with these functions instead of calling
 * the CUDA runtime, so the same code runs on a real GPU and on the host
 * simulation (gmr/sim/cuda_sim.h). With the simulation off, each function is
 * one CUDA runtime call. A program that uses libgmr alone makes these calls
 * with the CUDA runtime itself; libgmr keeps what its own users need
 * (gmr/device.h: devices, synchronisation, stream waits, capture queries).
 *
 * Thread-safe: yes; each function is as thread-safe as the CUDA call it makes.
 */
#ifndef GMR_SIM_STREAMS_H_
#define GMR_SIM_STREAMS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Create a stream on the current device that does not synchronise with the
 * default stream (cudaStreamCreateWithFlags(cudaStreamNonBlocking)).
 * Ownership: the caller destroys it with gmr_cuda_stream_destroy().
 * Thread-safe: yes. Stream/device: one CUDA call on the current device.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (out_stream NULL);
 * GMR_ERR_OUT_OF_MEMORY; GMR_ERR_CUDA. On failure *out_stream is NULL and
 * nothing needs destroying.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_stream_create(gmr_stream *out_stream);

/**
 * Destroy a stream made by gmr_cuda_stream_create() (cudaStreamDestroy);
 * work already queued on it still runs. NULL (the default stream) is a no-op.
 * Thread-safe: yes, but no other thread may use the stream after the call.
 * Stream/device: does not wait for the stream's work.
 * Returns GMR_OK; GMR_ERR_CUDA (an unknown stream, or another failure: the
 * stream is then as it was).
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_stream_destroy(gmr_stream stream);

/**
 * Wait until all work queued on `stream` is done (cudaStreamSynchronize).
 * Thread-safe: yes. Stream/device: synchronises `stream` with the host.
 * Returns GMR_OK; GMR_ERR_CAPTURE_UNSAFE (the stream is capturing: the
 * capture is invalidated, as CUDA does); GMR_ERR_CUDA (an unknown stream, or
 * an asynchronous error of its work). Nothing else changes on failure.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_stream_synchronize(gmr_stream stream);

/**
 * Copy `bytes` bytes from `src` to `dst`, stream-ordered on `stream`
 * (cudaMemcpyAsync with cudaMemcpyDefault: device, pinned host, managed and
 * pageable memory in any direction; the runtime tells the direction from the
 * pointers). With pageable host memory the call may return only once the copy
 * is done. Tools and tests use it to move buffers between memory tiers
 * (gmr/tiers/tier_manager.h) on the GPU and on the simulation alike.
 * Units: bytes.
 * Ownership: none taken; both buffers must stay valid until the copy is done
 *   (synchronise `stream`). Thread-safe: yes.
 * Stream/device: enqueued on `stream`; may synchronise for pageable memory.
 * Returns GMR_OK (also for 0 bytes: nothing is enqueued);
 * GMR_ERR_INVALID_ARGUMENT (dst or src NULL with bytes > 0);
 * GMR_ERR_CAPTURE_UNSAFE; GMR_ERR_CUDA (any other CUDA error). On failure
 * nothing was enqueued.
 * Source: cudaMemcpyAsync (cuda_runtime_api.h).
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_stream_memcpy_async(void *dst, const void *src,
                                                              size_t bytes, gmr_stream stream);

/**
 * Start capturing `stream` into a CUDA graph (cudaStreamBeginCapture, mode
 * global: capture-unsafe calls from any thread in global mode invalidate it).
 * Thread-safe: yes. Stream/device: `stream` enqueues into the graph from now
 *   on instead of running.
 * Returns GMR_OK; GMR_ERR_CUDA (the default stream, a stream that captures
 * already, or another failure; then nothing started).
 * Source: cudaStreamBeginCapture (cuda_runtime_api.h).
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_stream_begin_capture(gmr_stream stream);

/**
 * End the capture of `stream` (cudaStreamEndCapture) and give the graph to
 * the caller.
 * Ownership: *out_graph is the caller's: destroy it with gmr_cuda_graph_destroy().
 * Thread-safe: yes; call it from the thread that began the capture in
 *   thread-local mode. Stream/device: `stream` runs work again from now on.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (out_graph NULL; the capture goes
 * on); GMR_ERR_CUDA (not capturing, or the capture was invalidated by a
 * capture-unsafe call: the capture has ended and no graph was made). On
 * failure *out_graph is NULL.
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_stream_end_capture(gmr_stream stream,
                                                             gmr_graph *out_graph);

/**
 * Destroy a graph from gmr_cuda_stream_end_capture() (cudaGraphDestroy). NULL
 * is a no-op.
 * Ownership: the graph is gone after GMR_OK. Thread-safe: yes, but no other
 *   thread may use the graph. Stream/device: no synchronisation.
 * Returns GMR_OK; GMR_ERR_CUDA (an unknown graph; nothing changed).
 */
GMR_API GMR_NODISCARD gmr_status gmr_cuda_graph_destroy(gmr_graph graph);

#ifdef __cplusplus
}
#endif

#endif /* GMR_SIM_STREAMS_H_ */
