/*
 * stream_ordered/event_cache.c (internal): see event_cache.h.
 */
#include "stream_ordered/event_cache.h"

#include <stdlib.h>

cudaError_t gmr__event_cache_take(gmr__event_cache *c, const gmr__cuda_ops *cuda,
                                  cudaEvent_t *out) {
  if (c->count > 0) {
    *out = c->events[--c->count];
    return cudaSuccess;
  }
  cudaEvent_t made = NULL;
  cudaError_t err = cuda->event_create(&made);
  if (err == cudaSuccess) *out = made;
  return err;
}

cudaError_t gmr__event_cache_give(gmr__event_cache *c, const gmr__cuda_ops *cuda,
                                  cudaEvent_t event) {
  if (c->count == c->capacity && c->capacity < c->max) {
    size_t capacity = c->capacity == 0 ? 8 : c->capacity * 2;
    if (capacity > c->max) capacity = c->max;
    cudaEvent_t *grown = realloc(c->events, capacity * sizeof *grown);
    if (grown != NULL) {
      c->events = grown;
      c->capacity = capacity;
    }
  }
  if (c->count < c->capacity) {
    c->events[c->count++] = event;
    return cudaSuccess;
  }
  return cuda->event_destroy(event);
}

cudaError_t gmr__event_cache_clear(gmr__event_cache *c, const gmr__cuda_ops *cuda) {
  while (c->count > 0) {
    cudaError_t err = cuda->event_destroy(c->events[c->count - 1]);
    if (err != cudaSuccess) return err;
    c->count--;
  }
  free(c->events);
  c->events = NULL;
  c->capacity = 0;
  return cudaSuccess;
}
