/*
 * core/cuda_sim/sim_graph.c (internal): the nodes of graphs being captured,
 * as far as an allocator sees them: cudaStreamGetCaptureInfo's dependencies
 * of a capturing stream (the nodes its next captured work will depend on,
 * its "frontier") and cudaGraphNodeGetDependencies of a node.
 *
 * Work captured on a stream (a copy, a memset, a stream-ordered allocation
 * or free, a test's mark standing for a kernel) becomes a node that depends
 * on the stream's frontier, and the frontier becomes that node. An event
 * recorded on a capturing stream holds the stream's frontier; a capturing
 * stream that waits on it adds those nodes to its own; a stream that joins a
 * capture by such a wait (a fork) starts from them; a capture begins with an
 * empty frontier. Nodes live until the simulation is enabled or disabled
 * again (the graphs made of them need no more).
 */
#include <stdlib.h>
#include <string.h>

#include "core/cuda_sim/sim_internal.h"

void gmr__sim_frontier_clear(gmr__sim_frontier *f) {
  free(f->nodes);
  memset(f, 0, sizeof *f);
}

static bool frontier_add(gmr__sim_frontier *f, gmr__sim_node *n) {
  for (uint32_t i = 0; i < f->count; ++i) {
    if (f->nodes[i] == n) return true;
  }
  if (f->count == f->capacity) {
    uint32_t capacity = f->capacity == 0 ? 4u : f->capacity * 2u;
    gmr__sim_node **grown = realloc(f->nodes, capacity * sizeof *grown);
    if (grown == NULL) return false;
    f->nodes = grown;
    f->capacity = capacity;
  }
  f->nodes[f->count++] = n;
  return true;
}

bool gmr__sim_frontier_union(gmr__sim_frontier *dst, const gmr__sim_frontier *src) {
  bool ok = true;
  for (uint32_t i = 0; i < src->count; ++i) ok = frontier_add(dst, src->nodes[i]) && ok;
  return ok;
}

bool gmr__sim_frontier_copy(gmr__sim_frontier *dst, const gmr__sim_frontier *src) {
  dst->count = 0;
  return gmr__sim_frontier_union(dst, src);
}

bool gmr__sim_capture_add_node(gmr__sim_stream *s) {
  if (!gmr__sim_stream_capturing(s)) return true;
  gmr__sim_node *n = calloc(1, sizeof *n);
  if (n == NULL) return false;
  n->capture_id = s->capture_id;
  if (s->frontier.count > 0) {
    n->deps = malloc(s->frontier.count * sizeof *n->deps);
    if (n->deps == NULL) {
      free(n);
      return false;
    }
    memcpy(n->deps, s->frontier.nodes, s->frontier.count * sizeof *n->deps);
    n->dep_count = s->frontier.count;
  }
  if (!gmr__u64_map_put(&gmr__sim.nodes, (uint64_t)(uintptr_t)n, 1)) {
    free(n->deps);
    free(n);
    return false;
  }
  s->frontier.count = 0;
  (void)frontier_add(&s->frontier, n); /* room: capacity kept, or the node's deps came from it */
  return true;
}

void gmr__sim_nodes_clear(void) {
  size_t cursor = 0;
  uint64_t key = 0, v = 0;
  while (gmr__u64_map_next(&gmr__sim.nodes, &cursor, &key, &v)) {
    gmr__sim_node *n = (gmr__sim_node *)(uintptr_t)key;
    free(n->deps);
    free(n);
  }
  gmr__u64_map_clear(&gmr__sim.nodes);
}

cudaError_t gmr__sim_stream_get_capture_frontier(cudaStream_t stream,
                                                 enum cudaStreamCaptureStatus *status,
                                                 unsigned long long *capture_id,
                                                 const cudaGraphNode_t **nodes, size_t *count) {
  gmr__sim_lock();
  gmr__sim_stream *s = NULL;
  /* The same CUDA function as the status query: counted as it. */
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_STREAM_GET_CAPTURE_INFO);
  if (err == cudaSuccess) err = gmr__sim_lookup_stream(stream, &s);
  if (err == cudaSuccess) {
    bool capturing = gmr__sim_stream_capturing(s);
    *status = s == NULL ? cudaStreamCaptureStatusNone : s->capture_status;
    if (capture_id != NULL) *capture_id = capturing ? s->capture_id : 0;
    /* Valid until the next call on the stream, as CUDA's array is. */
    *nodes = capturing ? (const cudaGraphNode_t *)(void *)s->frontier.nodes : NULL;
    *count = capturing ? s->frontier.count : 0;
  }
  gmr__sim_unlock();
  return err;
}

cudaError_t gmr__sim_graph_node_get_dependencies(cudaGraphNode_t node, cudaGraphNode_t *deps,
                                                 size_t *count) {
  gmr__sim_lock();
  cudaError_t err = gmr__sim_enter_call(GMR_CUDA_CALL_GRAPH_NODE_GET_DEPENDENCIES);
  if (err == cudaSuccess && (count == NULL || node == NULL ||
                             !gmr__u64_map_get(&gmr__sim.nodes, (uint64_t)(uintptr_t)node, NULL))) {
    err = cudaErrorInvalidValue;
  }
  if (err == cudaSuccess) {
    const gmr__sim_node *n = (const gmr__sim_node *)(const void *)node;
    if (deps != NULL) {
      for (size_t i = 0; i < *count; ++i) {
        deps[i] = i < n->dep_count ? (cudaGraphNode_t)(void *)n->deps[i] : NULL;
      }
      if (*count > n->dep_count) *count = n->dep_count;
    } else {
      *count = n->dep_count;
    }
  }
  gmr__sim_unlock();
  return err;
}
