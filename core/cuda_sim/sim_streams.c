/*
 * core/cuda_sim/sim_streams.c: gmr/sim/streams.h, streams, captures and
 * copies through the CUDA layer (real or simulated) for tests and tools. The
 * bodies are the core's (core/cuda_layer.c).
 */
#include "gmr/sim/streams.h"

#include "core/cuda_layer.h"

gmr_status gmr_cuda_stream_create(gmr_stream *out_stream) { return gmr__stream_create(out_stream); }

gmr_status gmr_cuda_stream_destroy(gmr_stream stream) { return gmr__stream_destroy(stream); }

gmr_status gmr_cuda_stream_synchronize(gmr_stream stream) {
  return gmr__stream_synchronize(stream);
}

gmr_status gmr_cuda_stream_memcpy_async(void *dst, const void *src, size_t bytes,
                                        gmr_stream stream) {
  return gmr__stream_memcpy_async(dst, src, bytes, stream);
}

gmr_status gmr_cuda_stream_begin_capture(gmr_stream stream) {
  return gmr__stream_begin_capture(stream);
}

gmr_status gmr_cuda_stream_end_capture(gmr_stream stream, gmr_graph *out_graph) {
  return gmr__stream_end_capture(stream, out_graph);
}

gmr_status gmr_cuda_graph_destroy(gmr_graph graph) { return gmr__graph_destroy(graph); }
