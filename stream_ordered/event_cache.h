/*
 * stream_ordered/event_cache.h (internal): spare CUDA events kept for reuse, so a
 * resource that records events on frees (record_stream, stream-ordered
 * reuse) does not create and destroy one each time. One cache for the
 * resources that need it: pool (per arena), fixed_block (per shard),
 * vmm_pages (per pool) and cuda_resource (async's record_stream waits).
 * Events are created without timing (the CUDA layer's event_create).
 *
 * Thread-safe: no; the owner's lock guards it.
 */
#ifndef GMR_STREAM_ORDERED_EVENT_CACHE_H_
#define GMR_STREAM_ORDERED_EVENT_CACHE_H_

#include <stddef.h>

#include "core/cuda_layer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr__event_cache {
  cudaEvent_t *events; /* spare events, count of them; NULL before the first give */
  size_t count;
  size_t capacity;
  size_t max; /* keep at most this many; more are destroyed */
} gmr__event_cache;

/* An empty cache that keeps at most `max` events. */
#define GMR__EVENT_CACHE_INIT(max) {NULL, 0, 0, (max)}

/* A spare event, or a new one. cudaSuccess and *out set, or the error of
 * cudaEventCreate (*out unchanged). */
cudaError_t gmr__event_cache_take(gmr__event_cache *c, const gmr__cuda_ops *cuda,
                                  cudaEvent_t *out);

/* Keep `event` for reuse; when the cache is full or cannot grow, destroy it
 * and return cudaEventDestroy's error (cudaSuccess when kept). */
cudaError_t gmr__event_cache_give(gmr__event_cache *c, const gmr__cuda_ops *cuda,
                                  cudaEvent_t event);

/* Destroy every spare event, last first; on a failure stop and return it,
 * keeping that event and the ones before it (so a destroy can be retried).
 * The storage is freed when the cache ends empty. */
cudaError_t gmr__event_cache_clear(gmr__event_cache *c, const gmr__cuda_ops *cuda);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STREAM_ORDERED_EVENT_CACHE_H_ */
