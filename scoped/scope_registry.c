/*
 * scoped/scope_registry.c: the registry of per-thread pools and the scopes
 * (see gmr/scoped/scoped_pool.h).
 *
 * Each registry has a pthread key whose value in a thread is that thread's
 * state (its scope depth and its pools, one per device); the key's
 * destructor retires the state when the thread exits. The registry keeps
 * every state in a list so that destroy can give back the pools of threads
 * still running.
 *
 * Lifetime: a thread's exit destructor may run while another thread
 * destroys the registry (nothing orders them: a Python thread's join()
 * returns before its OS thread runs its destructors). So the registry's
 * memory, key and mutex are reference-counted: one reference for the handle
 * and one per thread state. Destroy gives back every thread's pools under
 * the mutex and marks their states detached, frees the calling thread's
 * own state, and drops the handle's reference; a detached state is freed by
 * its thread's destructor, which drops the last references. Pools are
 * always given back under the mutex, so a destructor and destroy never both
 * give back the same pool.
 */
#include <stdlib.h>
#include <string.h>

#include "core/resource_type.h"
#include "core/stats.h"
#include "scoped/scoped_internal.h"

/* Drop one reference; the last one frees the key, the mutex and the memory
 * (pthread_key_delete may be called from the key's own destructor). */
static void registry_release(gmr_scope_registry *r) {
  if (atomic_fetch_sub_explicit(&r->references, 1, memory_order_acq_rel) != 1) return;
  pthread_key_delete(r->key);
  pthread_mutex_destroy(&r->mutex);
  free(r);
}

/* Give back (destroy) every pool of `t`. Registry mutex held. */
static void free_pools_locked(gmr_scope_registry *r, gmr__scope_thread *t) {
  for (size_t d = 0; d < r->device_count; ++d) {
    if (t->pools[d] == NULL) continue;
    gmr__scoped_pool_destroy(t->pools[d]);
    t->pools[d] = NULL;
    r->pool_count--;
  }
}

static void free_state(gmr__scope_thread *t) {
  free(t->pools);
  free(t->serials);
  free(t);
}

static void unlink_thread(gmr_scope_registry *r, gmr__scope_thread *t) {
  if (t->prev != NULL) t->prev->next = t->next;
  if (t->next != NULL) t->next->prev = t->prev;
  if (r->threads == t) r->threads = t->next;
  t->prev = t->next = NULL;
  r->thread_count--;
}

/* The key's destructor: the thread is exiting; its pools give their memory
 * back upstream (unless destroy did already). */
static void retire_thread(void *value) {
  gmr__scope_thread *t = value;
  gmr_scope_registry *r = t->registry;
  pthread_mutex_lock(&r->mutex);
  if (!t->detached) {
    unlink_thread(r, t);
    for (size_t d = 0; d < r->device_count; ++d) {
      if (t->pools[d] != NULL) r->pools_retired++;
    }
    free_pools_locked(r, t);
  }
  pthread_mutex_unlock(&r->mutex);
  free_state(t);
  registry_release(r);
}

static gmr_status config_check(const gmr_scope_registry_config *c) {
  if (c->chunk_bytes == 0 || c->alignment < 256 || (c->alignment & (c->alignment - 1)) != 0 ||
      c->max_capacity_bytes == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

static gmr_status registry_new(const gmr_scope_registry_config *config, size_t device_count,
                               gmr_scope_registry **out) {
  gmr_scope_registry_config cfg = GMR_SCOPE_REGISTRY_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (config_check(&cfg) != GMR_OK || device_count == 0 ||
      device_count > GMR__SCOPE_MAX_DEVICES) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_scope_registry *r = calloc(1, sizeof *r);
  if (r == NULL) return GMR_ERR_OUT_OF_MEMORY;
  if (pthread_mutex_init(&r->mutex, NULL) != 0) {
    free(r);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  if (pthread_key_create(&r->key, retire_thread) != 0) {
    pthread_mutex_destroy(&r->mutex);
    free(r);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  r->cuda = gmr__cuda();
  r->config = cfg;
  r->device_count = device_count;
  atomic_init(&r->next_serial, 1);
  atomic_init(&r->references, 1); /* the handle's */
  *out = r;
  return GMR_OK;
}

/* A registry that never served a thread (a failed create): free it all. */
static void registry_free_unused(gmr_scope_registry *r) {
  for (size_t d = 0; d < r->device_count; ++d) {
    if (r->owned_stacks[d] != NULL) GMR_IGNORE_STATUS(gmr_stack_destroy(r->owned_stacks[d]));
  }
  registry_release(r);
}

gmr_status gmr_scope_registry_create(gmr_resource *const *upstreams, size_t device_count,
                                     const gmr_scope_registry_config *config,
                                     gmr_scope_registry **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (upstreams == NULL || device_count == 0 || device_count > GMR__SCOPE_MAX_DEVICES) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  for (size_t d = 0; d < device_count; ++d) {
    if (upstreams[d] != NULL && gmr__resource_check_vtbl(upstreams[d]) != GMR_OK) {
      return GMR_ERR_INVALID_ARGUMENT;
    }
  }
  gmr_scope_registry *r = NULL;
  gmr_status st = registry_new(config, device_count, &r);
  if (st != GMR_OK) return st;
  for (size_t d = 0; d < device_count; ++d) r->upstreams[d] = upstreams[d];
  *out = r;
  return GMR_OK;
}

gmr_status gmr_scope_registry_create_from_spec(const char *spec,
                                               const gmr_scope_registry_config *config,
                                               gmr_scope_registry **out, gmr_spec_error *error) {
  if (out != NULL) *out = NULL;
  if (spec == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  const gmr__cuda_ops *cuda = gmr__cuda();
  int count = 0;
  cudaError_t err = cuda->get_device_count(&count);
  if (err != cudaSuccess) return GMR_ERR_CUDA;
  if (count <= 0) return GMR_ERR_UNSUPPORTED;
  if (count > GMR__SCOPE_MAX_DEVICES) count = GMR__SCOPE_MAX_DEVICES;
  gmr_scope_registry *r = NULL;
  gmr_status st = registry_new(config, (size_t)count, &r);
  if (st != GMR_OK) return st;
  for (int d = 0; d < count && st == GMR_OK; ++d) {
    int saved = -1;
    err = gmr__cuda_device_enter(cuda, d, &saved);
    if (err != cudaSuccess) {
      st = gmr__status_from_cuda(err);
      break;
    }
    st = gmr_stack_create(spec, &r->owned_stacks[d], error);
    gmr__cuda_device_leave(cuda, saved);
    r->upstreams[d] = gmr_stack_as_resource(r->owned_stacks[d]);
  }
  if (st != GMR_OK) {
    registry_free_unused(r);
    return st;
  }
  *out = r;
  return GMR_OK;
}

gmr_status gmr_scope_registry_destroy(gmr_scope_registry *r) {
  if (r == NULL) return GMR_OK;
  pthread_mutex_lock(&r->mutex);
  bool busy = false;
  for (gmr__scope_thread *t = r->threads; t != NULL && !busy; t = t->next) {
    busy = t->depth != 0;
    for (size_t d = 0; d < r->device_count && !busy; ++d) {
      busy = t->pools[d] != NULL && gmr__scoped_pool_live_count(t->pools[d]) != 0;
    }
  }
  if (busy) {
    pthread_mutex_unlock(&r->mutex);
    return GMR_ERR_BUSY;
  }
  /* Every pool goes back before the stacks below them go. */
  while (r->threads != NULL) {
    gmr__scope_thread *t = r->threads;
    unlink_thread(r, t);
    free_pools_locked(r, t);
    t->detached = true;
  }
  pthread_mutex_unlock(&r->mutex);
  /* The caller's own state is not in an exit destructor: free it now (a
   * main thread never runs its destructors). Other threads' states go with
   * their threads. */
  gmr__scope_thread *self = pthread_getspecific(r->key);
  if (self != NULL) {
    (void)pthread_setspecific(r->key, NULL);
    free_state(self);
    registry_release(r);
  }
  for (size_t d = 0; d < r->device_count; ++d) {
    if (r->owned_stacks[d] != NULL) GMR_IGNORE_STATUS(gmr_stack_destroy(r->owned_stacks[d]));
    r->owned_stacks[d] = NULL;
  }
  registry_release(r); /* the handle's */
  return GMR_OK;
}

/* The calling thread's state, made on first use. */
static gmr_status thread_state(gmr_scope_registry *r, gmr__scope_thread **out) {
  gmr__scope_thread *t = pthread_getspecific(r->key);
  if (t != NULL) {
    *out = t;
    return GMR_OK;
  }
  t = calloc(1, sizeof *t);
  if (t == NULL) return GMR_ERR_OUT_OF_MEMORY;
  t->pools = calloc(r->device_count, sizeof *t->pools);
  if (t->pools == NULL || pthread_setspecific(r->key, t) != 0) {
    free(t->pools);
    free(t);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  t->registry = r;
  atomic_fetch_add_explicit(&r->references, 1, memory_order_relaxed);
  pthread_mutex_lock(&r->mutex);
  t->next = r->threads;
  if (r->threads != NULL) r->threads->prev = t;
  r->threads = t;
  r->thread_count++;
  pthread_mutex_unlock(&r->mutex);
  *out = t;
  return GMR_OK;
}

gmr_status gmr_scope_registry_get_pool_for_device(gmr_scope_registry *r, int device,
                                                  gmr_scoped_pool **out_pool) {
  if (out_pool != NULL) *out_pool = NULL;
  if (r == NULL || out_pool == NULL || device < 0 || (size_t)device >= r->device_count) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (r->upstreams[device] == NULL) return GMR_ERR_UNSUPPORTED;
  gmr__scope_thread *t = NULL;
  gmr_status st = thread_state(r, &t);
  if (st != GMR_OK) return st;
  if (t->pools[device] == NULL) {
    gmr_scoped_pool *p = NULL;
    st = gmr__scoped_pool_create(r, t, device, &p);
    if (st != GMR_OK) return st;
    t->pools[device] = p;
    pthread_mutex_lock(&r->mutex);
    r->pool_count++;
    r->pools_created++;
    pthread_mutex_unlock(&r->mutex);
  }
  *out_pool = t->pools[device];
  return GMR_OK;
}

gmr_status gmr_scope_registry_get_pool(gmr_scope_registry *r, gmr_scoped_pool **out_pool) {
  if (out_pool != NULL) *out_pool = NULL;
  if (r == NULL || out_pool == NULL) return GMR_ERR_INVALID_ARGUMENT;
  int device = -1;
  cudaError_t err = r->cuda->get_device(&device);
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  if (device < 0 || (size_t)device >= r->device_count) return GMR_ERR_UNSUPPORTED;
  return gmr_scope_registry_get_pool_for_device(r, device, out_pool);
}

gmr_status gmr_scope_enter(gmr_scope_registry *r, gmr_scope *out_scope) {
  if (r == NULL || out_scope == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__scope_thread *t = NULL;
  gmr_status st = thread_state(r, &t);
  if (st != GMR_OK) return st;
  if (t->depth == t->serial_capacity) {
    size_t cap = t->serial_capacity == 0 ? 16 : t->serial_capacity * 2;
    uint64_t *s = realloc(t->serials, cap * sizeof *s);
    if (s == NULL) return GMR_ERR_OUT_OF_MEMORY;
    t->serials = s;
    t->serial_capacity = cap;
  }
  uint64_t serial = atomic_fetch_add_explicit(&r->next_serial, 1, memory_order_relaxed);
  t->serials[t->depth++] = serial;
  out_scope->depth = t->depth;
  out_scope->serial = serial;
  return GMR_OK;
}

gmr_status gmr_scope_exit(gmr_scope_registry *r, gmr_scope scope, size_t *out_released_count) {
  if (out_released_count != NULL) *out_released_count = 0;
  if (r == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__scope_thread *t = pthread_getspecific(r->key);
  if (t == NULL || scope.depth == 0 || scope.depth > t->depth ||
      t->serials[scope.depth - 1] != scope.serial) {
    return GMR_ERR_INVALID_ARGUMENT; /* not open in this thread */
  }
  size_t released = 0;
  for (size_t d = 0; d < r->device_count; ++d) {
    if (t->pools[d] == NULL) continue;
    size_t n = 0;
    gmr_status st = gmr__scoped_pool_rewind_to(t->pools[d], scope.depth, &n);
    if (st != GMR_OK) return st; /* pools before this one stay rewound; the scope stays open */
    released += n;
  }
  uint32_t orphans = t->depth - scope.depth;
  if (orphans > 0) {
    atomic_fetch_add_explicit(&r->orphan_scope_count, orphans, memory_order_relaxed);
  }
  t->depth = scope.depth - 1;
  if (out_released_count != NULL) *out_released_count = released;
  return GMR_OK;
}

uint32_t gmr_scope_get_depth(gmr_scope_registry *r) {
  if (r == NULL) return 0;
  gmr__scope_thread *t = pthread_getspecific(r->key);
  return t == NULL ? 0 : t->depth;
}

gmr_status gmr_scope_registry_get_stats(gmr_scope_registry *r, gmr_scope_registry_stats *out) {
  if (r == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_scope_registry_stats s;
  memset(&s, 0, sizeof s);
  s.device_count = r->device_count;
  pthread_mutex_lock(&r->mutex);
  s.thread_count = r->thread_count;
  s.pool_count = r->pool_count;
  s.pools_created = r->pools_created;
  s.pools_retired = r->pools_retired;
  pthread_mutex_unlock(&r->mutex);
  s.orphan_scope_count = atomic_load_explicit(&r->orphan_scope_count, memory_order_relaxed);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}
