/*
 * tests/support/multigraph_trace.c: see multigraph_trace.h.
 */
#include "tests/support/multigraph_trace.h"

#include <stdio.h>
#include <string.h>

typedef struct writer {
  FILE *f;
  uint64_t next_addr;
  uint64_t time_us;
  gmr_multigraph_summary *sum;
  int capturing;
  size_t live_in_capture;
  size_t peak_in_capture;
} writer;

static uint64_t emit_alloc(writer *w, size_t bytes, int stream) {
  uint64_t addr = w->next_addr;
  w->next_addr += bytes + 4096; /* distinct recorded addresses */
  fprintf(w->f, "alloc,%llu,%zu,%d,%llu\r\n", (unsigned long long)addr, bytes, stream,
          (unsigned long long)++w->time_us);
  w->sum->alloc_count++;
  if (w->capturing) {
    w->sum->capture_alloc_count++;
    w->sum->capture_bytes += bytes;
    w->live_in_capture += bytes;
    if (w->live_in_capture > w->peak_in_capture) w->peak_in_capture = w->live_in_capture;
  }
  return addr;
}

static void emit_free(writer *w, uint64_t addr, size_t bytes, int stream) {
  fprintf(w->f, "free_requested,%llu,%zu,%d,%llu\r\n", (unsigned long long)addr, bytes, stream,
          (unsigned long long)++w->time_us);
  if (w->capturing) w->live_in_capture -= bytes;
}

static void emit_marker(writer *w, const char *action, int stream) {
  fprintf(w->f, "%s,0,0,%d,%llu\r\n", action, stream, (unsigned long long)++w->time_us);
}

/* One forward pass at batch `batch`: per layer qkv, attention, mlp. Returns
 * the address of the output, left live. */
static uint64_t forward(writer *w, const gmr_multigraph_shape *s, size_t batch, int stream,
                        size_t *out_bytes) {
  size_t u = s->unit_bytes * batch;
  for (size_t l = 0; l < s->layer_count; ++l) {
    uint64_t qkv = emit_alloc(w, 3 * u, stream);
    uint64_t attn = emit_alloc(w, u, stream);
    emit_free(w, qkv, 3 * u, stream);
    uint64_t mlp = emit_alloc(w, 4 * u, stream);
    emit_free(w, attn, u, stream);
    emit_free(w, mlp, 4 * u, stream);
  }
  *out_bytes = u;
  return emit_alloc(w, u, stream);
}

int gmr_multigraph_trace_write(const char *path, const gmr_multigraph_shape *shape,
                               gmr_multigraph_summary *summary) {
  gmr_multigraph_shape s = GMR_MULTIGRAPH_SHAPE_DEFAULT;
  if (shape != NULL) s = *shape;
  gmr_multigraph_summary sum;
  memset(&sum, 0, sizeof sum);
  if (s.graph_count == 0 || s.graph_count > 16) return -1;
  FILE *f = fopen(path, "wb");
  if (f == NULL) return -1;
  writer w = {f, 1u << 20, 1700000000000000ull, &sum, 0, 0, 0};
  fprintf(f, "action,addr,size,stream,time_us\r\n");
  uint64_t weights[64];
  size_t weight_count = s.weight_count < 64 ? s.weight_count : 64;
  for (size_t i = 0; i < weight_count; ++i) weights[i] = emit_alloc(&w, s.weight_bytes, 1);
  uint64_t outputs[16];
  size_t output_bytes[16];
  for (size_t g = 0; g < s.graph_count; ++g) {
    size_t batch = (size_t)1 << (s.graph_count - 1 - g);
    size_t warm_bytes = 0;
    uint64_t warm = forward(&w, &s, batch, 1, &warm_bytes); /* warm-up, outside capture */
    emit_free(&w, warm, warm_bytes, 1);
    emit_marker(&w, "capture_begin", 2);
    w.capturing = 1;
    w.live_in_capture = 0;
    w.peak_in_capture = 0;
    sum.capture_count++;
    outputs[g] = forward(&w, &s, batch, 2, &output_bytes[g]);
    if (w.peak_in_capture > sum.largest_capture_peak_bytes) {
      sum.largest_capture_peak_bytes = w.peak_in_capture;
    }
    w.capturing = 0;
    emit_marker(&w, "capture_end", 2);
  }
  for (size_t g = 0; g < s.graph_count; ++g) emit_free(&w, outputs[g], output_bytes[g], 2);
  for (size_t i = 0; i < weight_count; ++i) emit_free(&w, weights[i], s.weight_bytes, 1);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) return -1;
  if (summary != NULL) *summary = sum;
  return 0;
}
