/*
 * tiers/stream_pool.c: see gmr/tiers/stream_pool.h.
 *
 * The streams sit in one array; `free_stack` holds the indices of those not
 * lent (the top is the most recently returned), and a map from stream to
 * index finds a returned stream in O(1).
 */
#include "gmr/tiers/stream_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_layer.h"
#include "util/u64_map.h"
#include "tiers/tiers_internal.h"
#include "core/stats.h"
#include "tiers/tiers_util.h"

struct gmr_stream_pool {
  const gmr__cuda_ops *cuda;
  int device;
  size_t max_stream_count; /* 0: none */
  pthread_mutex_t mutex;
  pthread_cond_t returned;
  cudaStream_t *streams;
  bool *lent;
  size_t *free_stack;
  size_t count;    /* streams held */
  size_t capacity; /* of the three arrays */
  size_t free_count;
  gmr__u64_map index_of; /* stream -> index */
  bool shut_down;
  size_t waiter_count;
  size_t peak_lent_count;
  uint64_t acquire_count, wait_count, grow_count, timeout_count, shutdown_count, wait_ns;
};

static bool grow_arrays(gmr_stream_pool *p, size_t need) {
  if (need <= p->capacity) return true;
  size_t cap = p->capacity == 0 ? 16 : p->capacity * 2;
  while (cap < need) cap *= 2;
  cudaStream_t *s = realloc(p->streams, cap * sizeof *s);
  if (s == NULL) return false;
  p->streams = s;
  bool *l = realloc(p->lent, cap * sizeof *l);
  if (l == NULL) return false;
  p->lent = l;
  size_t *f = realloc(p->free_stack, cap * sizeof *f);
  if (f == NULL) return false;
  p->free_stack = f;
  p->capacity = cap;
  return true;
}

/* Create one stream on the pool's device and add it, lent or free. Mutex
 * held (or create, before anyone else sees the pool). */
static gmr_status add_stream(gmr_stream_pool *p, bool lend, cudaStream_t *out) {
  if (!grow_arrays(p, p->count + 1) || !gmr__u64_map_reserve(&p->index_of, p->count + 1)) {
    return GMR_ERR_OUT_OF_MEMORY;
  }
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
  cudaStream_t s = NULL;
  if (err == cudaSuccess) {
    err = p->cuda->stream_create(&s);
    gmr__cuda_device_leave(p->cuda, saved);
  }
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  size_t i = p->count++;
  p->streams[i] = s;
  p->lent[i] = lend;
  (void)gmr__u64_map_put(&p->index_of, (uint64_t)(uintptr_t)s, i); /* reserved above */
  if (!lend) p->free_stack[p->free_count++] = i;
  if (out != NULL) *out = s;
  return GMR_OK;
}

/* Destroy every stream (after synchronising them all) and free the pool. */
static gmr_status teardown(gmr_stream_pool *p) {
  int saved = -1;
  cudaError_t err = p->count == 0 ? cudaSuccess : gmr__cuda_device_enter(p->cuda, p->device, &saved);
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  /* All synchronisations first: destroy either succeeds or changes nothing. */
  for (size_t i = 0; i < p->count && err == cudaSuccess; ++i) {
    err = p->cuda->stream_synchronize(p->streams[i]);
  }
  if (err == cudaSuccess) {
    for (size_t i = 0; i < p->count; ++i) (void)p->cuda->stream_destroy(p->streams[i]);
  }
  if (p->count != 0) gmr__cuda_device_leave(p->cuda, saved);
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  gmr__u64_map_clear(&p->index_of);
  free(p->streams);
  free(p->lent);
  free(p->free_stack);
  pthread_cond_destroy(&p->returned);
  pthread_mutex_destroy(&p->mutex);
  free(p);
  return GMR_OK;
}

gmr_status gmr_stream_pool_create(const gmr_stream_pool_config *config, gmr_stream_pool **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  gmr_stream_pool_config cfg = GMR_STREAM_POOL_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (cfg.max_stream_count != 0 && cfg.max_stream_count < cfg.stream_count) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  const gmr__cuda_ops *cuda = gmr__cuda();
  int device = cfg.device;
  cudaError_t err = device < 0 ? cuda->get_device(&device) : cudaSuccess;
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  int device_count = 0;
  err = cuda->get_device_count(&device_count);
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  if (device >= device_count) return GMR_ERR_INVALID_ARGUMENT;

  gmr_stream_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return GMR_ERR_OUT_OF_MEMORY;
  p->cuda = cuda;
  p->device = device;
  p->max_stream_count = cfg.max_stream_count;
  gmr__u64_map empty = GMR__U64_MAP_INIT;
  p->index_of = empty;
  if (pthread_mutex_init(&p->mutex, NULL) != 0) {
    free(p);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  if (!gmr__cond_init_monotonic(&p->returned)) {
    pthread_mutex_destroy(&p->mutex);
    free(p);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr_status st = GMR_OK;
  for (size_t i = 0; i < cfg.stream_count && st == GMR_OK; ++i) st = add_stream(p, false, NULL);
  if (st != GMR_OK) {
    if (teardown(p) != GMR_OK) {
      /* The new streams have no work: a failed synchronisation means the
       * device is gone; destroy them without waiting. */
      for (size_t i = 0; i < p->count; ++i) (void)cuda->stream_destroy(p->streams[i]);
      p->count = 0;
      (void)teardown(p);
    }
    return st;
  }
  *out = p;
  return GMR_OK;
}

gmr_status gmr_stream_pool_destroy(gmr_stream_pool *p) {
  if (p == NULL) return GMR_OK;
  pthread_mutex_lock(&p->mutex);
  bool busy = p->free_count != p->count || p->waiter_count != 0;
  pthread_mutex_unlock(&p->mutex);
  if (busy) return GMR_ERR_BUSY;
  return teardown(p);
}

static cudaStream_t lend_top(gmr_stream_pool *p) {
  size_t i = p->free_stack[--p->free_count];
  p->lent[i] = true;
  return p->streams[i];
}

static void note_lent(gmr_stream_pool *p) {
  size_t lent = p->count - p->free_count;
  if (lent > p->peak_lent_count) p->peak_lent_count = lent;
  p->acquire_count++;
}

gmr_status gmr_stream_pool_acquire(gmr_stream_pool *p, gmr_stream_acquire_policy policy,
                                   uint64_t timeout_ns, gmr_stream *out_stream) {
  if (out_stream != NULL) *out_stream = NULL;
  if (p == NULL || out_stream == NULL ||
      (policy != GMR_STREAM_ACQUIRE_BLOCK && policy != GMR_STREAM_ACQUIRE_GROW)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  uint64_t deadline = gmr__deadline_after(timeout_ns);
  uint64_t wait_start = 0;
  gmr_status st = GMR_OK;
  cudaStream_t s = NULL;
  pthread_mutex_lock(&p->mutex);
  for (;;) {
    if (p->shut_down) {
      p->shutdown_count++;
      st = GMR_ERR_SHUTDOWN;
      break;
    }
    if (p->free_count > 0) {
      s = lend_top(p);
      break;
    }
    if (policy == GMR_STREAM_ACQUIRE_GROW &&
        (p->max_stream_count == 0 || p->count < p->max_stream_count)) {
      st = add_stream(p, true, &s);
      if (st == GMR_OK) p->grow_count++;
      break;
    }
    if (wait_start == 0) {
      wait_start = gmr__monotonic_ns();
      p->wait_count++;
    }
    bool in_time = timeout_ns != 0;
    if (in_time) {
      p->waiter_count++;
      in_time = gmr__cond_wait_until(&p->returned, &p->mutex, deadline);
      p->waiter_count--;
    }
    if (!in_time && p->free_count == 0 && !p->shut_down) {
      p->timeout_count++;
      st = GMR_ERR_TIMEOUT;
      break;
    }
  }
  if (wait_start != 0) p->wait_ns += gmr__monotonic_ns() - wait_start;
  if (st == GMR_OK) note_lent(p);
  pthread_mutex_unlock(&p->mutex);
  if (st == GMR_OK) *out_stream = (gmr_stream)s;
  return st;
}

gmr_status gmr_stream_pool_release(gmr_stream_pool *p, gmr_stream stream) {
  if (p == NULL) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&p->mutex);
  uint64_t i = 0;
  gmr_status st = GMR_OK;
  if (stream == NULL || !gmr__u64_map_get(&p->index_of, (uint64_t)(uintptr_t)stream, &i)) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (!p->lent[i]) {
    st = GMR_ERR_DOUBLE_FREE;
  } else {
    p->lent[i] = false;
    p->free_stack[p->free_count++] = (size_t)i;
    pthread_cond_signal(&p->returned);
  }
  pthread_mutex_unlock(&p->mutex);
  return st;
}

gmr_status gmr_stream_pool_shutdown(gmr_stream_pool *p) {
  if (p == NULL) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&p->mutex);
  p->shut_down = true;
  pthread_cond_broadcast(&p->returned);
  pthread_mutex_unlock(&p->mutex);
  return GMR_OK;
}

int gmr_stream_pool_get_device(const gmr_stream_pool *p) { return p == NULL ? -1 : p->device; }

gmr_status gmr_stream_pool_get_stats(gmr_stream_pool *p, gmr_stream_pool_stats *out) {
  if (p == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_stream_pool_stats s;
  memset(&s, 0, sizeof s);
  pthread_mutex_lock(&p->mutex);
  s.stream_count = p->count;
  s.lent_count = p->count - p->free_count;
  s.peak_lent_count = p->peak_lent_count;
  s.waiter_count = p->waiter_count;
  s.acquire_count = p->acquire_count;
  s.wait_count = p->wait_count;
  s.grow_count = p->grow_count;
  s.timeout_count = p->timeout_count;
  s.shutdown_count = p->shutdown_count;
  s.wait_ns = p->wait_ns;
  pthread_mutex_unlock(&p->mutex);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}

gmr_status gmr__stream_pool_synchronize(gmr_stream_pool *p) {
  if (p == NULL || p->count == 0) return GMR_OK;
  pthread_mutex_lock(&p->mutex);
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(p->cuda, p->device, &saved);
  for (size_t i = 0; i < p->count && err == cudaSuccess; ++i) {
    err = p->cuda->stream_synchronize(p->streams[i]);
  }
  gmr__cuda_device_leave(p->cuda, saved); /* no-op when nothing was changed */
  pthread_mutex_unlock(&p->mutex);
  return gmr__status_from_cuda(err);
}
