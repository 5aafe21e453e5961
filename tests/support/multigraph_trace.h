/*
 * tests/support/multigraph_trace.h: writes a synthetic allocation trace with
 * the shape of an LLM server capturing one CUDA graph per batch size into one
 * shared pool (vLLM, SGLang: torch.cuda.graph(g, pool=shared), largest batch
 * first), in the PyTorch snapshot CSV format of tools/traces/README.md, for
 * tests of the replay through the graph pool until a trace recorded on a GPU
 * is bundled.
 *
 * Shape: stream 1 allocates the weights; for each batch size B, largest
 * first, a warm-up on stream 1 outside capture (allocated and freed), then a
 * capture_begin / capture_end window on stream 2 in which every layer
 * allocates its activations and frees them in order, and the graph's output
 * stays live until the end of the trace. Sizes are multiples of 512 bytes,
 * proportional to B.
 *
 * Thread-safe: yes (no shared state).
 */
#ifndef GMR_TESTS_SUPPORT_MULTIGRAPH_TRACE_H_
#define GMR_TESTS_SUPPORT_MULTIGRAPH_TRACE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_multigraph_shape {
  size_t graph_count;   /* batch sizes 2^(graph_count-1) .. 1 */
  size_t layer_count;   /* layers per forward pass */
  size_t unit_bytes;    /* bytes per batch element of the smallest activation */
  size_t weight_count;  /* weight tensors of weight_bytes each */
  size_t weight_bytes;
} gmr_multigraph_shape;

/* 6 graphs (batch 32 .. 1), 4 layers, 8 KiB units, 8 weights of 4 MiB. */
#define GMR_MULTIGRAPH_SHAPE_DEFAULT {6, 4, 8192, 8, (size_t)4 << 20}

/* What the trace holds, for tests to check a replay against. */
typedef struct gmr_multigraph_summary {
  size_t capture_count;
  size_t capture_alloc_count;   /* allocations inside the capture windows */
  size_t capture_bytes;         /* their sizes summed (what monotone keeps) */
  size_t largest_capture_peak_bytes; /* most bytes live at once inside one capture */
  size_t alloc_count;
} gmr_multigraph_summary;

/* Write the trace to `path`. Returns 0, or -1 if the file cannot be written. */
int gmr_multigraph_trace_write(const char *path, const gmr_multigraph_shape *shape,
                               gmr_multigraph_summary *summary);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TESTS_SUPPORT_MULTIGRAPH_TRACE_H_ */
