/*
 * stream_ordered/capture_reuse.c (internal): free markers and the walk over
 * a capture's graph that tells whether they come before a stream's next
 * work (capture_reuse.h).
 */
#include "stream_ordered/capture_reuse.h"

#include <stdlib.h>
#include <string.h>

static bool add_node(gmr__capture_markers *m, uint32_t *capacity, cudaGraphNode_t n) {
  for (uint32_t i = 0; i < m->count; ++i) {
    if (m->nodes[i] == n) return true;
  }
  if (m->count == *capacity) {
    uint32_t grown_capacity = *capacity == 0 ? 8u : *capacity * 2u;
    cudaGraphNode_t *grown = realloc(m->nodes, grown_capacity * sizeof *grown);
    if (grown == NULL) return false;
    m->nodes = grown;
    *capacity = grown_capacity;
  }
  m->nodes[m->count++] = n;
  return true;
}

/* Add `stream`'s dependencies; false unless it captures in capture `id`
 * (0: any, and *id becomes its capture). */
static bool add_frontier(const gmr__cuda_ops *cuda, gmr_stream stream, unsigned long long *id,
                         gmr__capture_markers *m, uint32_t *capacity) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long capture = 0;
  const cudaGraphNode_t *nodes = NULL;
  size_t count = 0;
  if (cuda->stream_get_capture_frontier((cudaStream_t)stream, &status, &capture, &nodes,
                                        &count) != cudaSuccess ||
      status != cudaStreamCaptureStatusActive || (*id != 0 && capture != *id)) {
    return false;
  }
  *id = capture;
  for (size_t i = 0; i < count; ++i) {
    if (!add_node(m, capacity, nodes[i])) return false;
  }
  return true;
}

bool gmr__capture_markers_take(const gmr__cuda_ops *cuda, gmr_stream freeing,
                               const gmr_stream *uses, size_t use_count,
                               gmr__capture_markers *out) {
  memset(out, 0, sizeof *out);
  unsigned long long id = 0;
  uint32_t capacity = 0;
  bool ok = add_frontier(cuda, freeing, &id, out, &capacity);
  for (size_t i = 0; ok && i < use_count; ++i) {
    if (uses[i] != freeing) ok = add_frontier(cuda, uses[i], &id, out, &capacity);
  }
  /* No captured work at all: nothing in the graph orders the uses. */
  if (!ok || out->count == 0) {
    gmr__capture_markers_release(out);
    return false;
  }
  out->capture_id = id;
  return true;
}

void gmr__capture_markers_release(gmr__capture_markers *m) {
  free(m->nodes);
  memset(m, 0, sizeof *m);
}

void gmr__capture_walks_free(gmr__capture_walks *w) {
  for (uint32_t i = 0; i < GMR__CAPTURE_WALKS; ++i) gmr__u64_map_clear(&w->items[i].seen);
  memset(w, 0, sizeof *w);
}

/* The walk of (capture, stream), a reused or a fresh one. */
static gmr__capture_walk *walk_for(gmr__capture_walks *w, unsigned long long capture,
                                   gmr_stream stream) {
  for (uint32_t i = 0; i < GMR__CAPTURE_WALKS; ++i) {
    gmr__capture_walk *x = &w->items[i];
    if (x->capture_id == capture && x->stream == stream) return x;
  }
  gmr__capture_walk *x = &w->items[w->next];
  w->next = (w->next + 1) % GMR__CAPTURE_WALKS;
  gmr__u64_map_clear(&x->seen);
  x->capture_id = capture;
  x->stream = stream;
  return x;
}

/* Mark every ancestor of `start` (and `start` itself) seen, stopping at
 * nodes seen before: their ancestors were marked with them. */
static bool mark_ancestors(const gmr__cuda_ops *cuda, gmr__capture_walk *x,
                           const cudaGraphNode_t *start, size_t start_count) {
  size_t cap = start_count + 16, top = 0;
  cudaGraphNode_t *todo = malloc(cap * sizeof *todo);
  if (todo == NULL) return false;
  for (size_t i = 0; i < start_count; ++i) todo[top++] = start[i];
  bool ok = true;
  while (ok && top > 0) {
    cudaGraphNode_t n = todo[--top];
    if (gmr__u64_map_get(&x->seen, (uint64_t)(uintptr_t)n, NULL)) continue;
    if (!gmr__u64_map_put(&x->seen, (uint64_t)(uintptr_t)n, 1)) {
      ok = false;
      break;
    }
    size_t count = 0;
    if (cuda->graph_node_get_dependencies(n, NULL, &count) != cudaSuccess) {
      ok = false;
      break;
    }
    if (top + count > cap) {
      cap = (top + count) * 2;
      cudaGraphNode_t *grown = realloc(todo, cap * sizeof *grown);
      if (grown == NULL) {
        ok = false;
        break;
      }
      todo = grown;
    }
    size_t got = count;
    if (count > 0 && cuda->graph_node_get_dependencies(n, todo + top, &got) != cudaSuccess) {
      ok = false;
      break;
    }
    top += got;
  }
  free(todo);
  if (!ok) gmr__u64_map_clear(&x->seen); /* a partial walk would say too little: start over */
  return ok;
}

bool gmr__capture_markers_precede(const gmr__cuda_ops *cuda, gmr__capture_walks *walks,
                                  const gmr__capture_markers *m, gmr_stream stream) {
  if (m->capture_id == 0) return false;
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long capture = 0;
  const cudaGraphNode_t *nodes = NULL;
  size_t count = 0;
  if (cuda->stream_get_capture_frontier((cudaStream_t)stream, &status, &capture, &nodes,
                                        &count) != cudaSuccess ||
      status != cudaStreamCaptureStatusActive || capture != m->capture_id) {
    return false;
  }
  gmr__capture_walk *x = walk_for(walks, capture, stream);
  if (!mark_ancestors(cuda, x, nodes, count)) return false;
  for (uint32_t i = 0; i < m->count; ++i) {
    if (!gmr__u64_map_get(&x->seen, (uint64_t)(uintptr_t)m->nodes[i], NULL)) return false;
  }
  return true;
}
