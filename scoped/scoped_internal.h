/*
 * scoped/scoped_internal.h (internal): the registry's per-thread state and
 * the pools, shared by scope_registry.c and scoped_pool.c.
 *
 * Ownership and locking: a thread's state and its pools are created and used
 * by that thread only; the registry's mutex guards the list of thread states
 * (creation, thread exit, destroy, stats), the registry's counters, and the
 * giving back of pools (a thread's exit destructor and destroy may race).
 * Pool counters that other threads may read (stats) are atomics. The
 * registry's memory is reference-counted (scope_registry.c says why).
 */
#ifndef GMR_SCOPED_SCOPED_INTERNAL_H_
#define GMR_SCOPED_SCOPED_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/scoped/scoped_pool.h"
#include "gmr/stack.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GMR__SCOPE_MAX_DEVICES 64

typedef struct gmr__scope_mark {
  uint32_t depth; /* the scope depth the mark was set at */
  uint64_t mark;  /* the graph arena's rewind mark */
} gmr__scope_mark;

typedef struct gmr__scope_thread gmr__scope_thread;

struct gmr_scoped_pool {
  gmr_resource base; /* first */
  gmr_scope_registry *registry;
  gmr__scope_thread *owner;
  int device;
  gmr_resource *upstream;
  gmr_graph_arena_resource *arena;
  gmr_resource *arena_resource;
  gmr__scope_mark *marks; /* owner thread only */
  size_t mark_count;
  size_t mark_capacity;
  _Atomic size_t published_mark_count; /* mark_count, for other threads' stats */
  _Atomic uint64_t allocation_count;
  _Atomic uint64_t rewind_count;
  _Atomic uint64_t released_count;
  _Atomic uint64_t orphan_mark_count;
  _Atomic uint64_t reset_count;
  _Atomic uint64_t empty_count;
  _Atomic uint64_t wrong_device_count;
};

struct gmr__scope_thread {
  gmr_scope_registry *registry; /* holds one of its references */
  bool detached;       /* (registry mutex) destroy took its pools; it only waits to be freed */
  uint32_t depth;      /* innermost open scope */
  uint64_t *serials;   /* serials[d - 1]: the serial of open scope d */
  size_t serial_capacity;
  gmr_scoped_pool **pools; /* device_count entries, NULL until used */
  gmr__scope_thread *prev, *next; /* the registry's list (its mutex) */
};

struct gmr_scope_registry {
  const gmr__cuda_ops *cuda;
  pthread_key_t key; /* -> gmr__scope_thread * */
  pthread_mutex_t mutex;
  gmr_resource *upstreams[GMR__SCOPE_MAX_DEVICES];
  gmr_stack *owned_stacks[GMR__SCOPE_MAX_DEVICES];
  size_t device_count;
  gmr_scope_registry_config config;
  gmr__scope_thread *threads; /* (mutex) */
  size_t thread_count;        /* (mutex) */
  size_t pool_count;          /* (mutex) */
  uint64_t pools_created;     /* (mutex) */
  uint64_t pools_retired;     /* (mutex) */
  _Atomic uint64_t orphan_scope_count;
  _Atomic uint64_t next_serial;
  /* The registry's memory (and its key and mutex) lives while the handle or
   * a thread state refers to it: a thread may be in its exit destructor
   * while another thread destroys the registry (a Python thread's join
   * returns before its OS thread runs the destructors). */
  _Atomic size_t references;
};

/* scoped_pool.c */
gmr_status gmr__scoped_pool_create(gmr_scope_registry *registry, gmr__scope_thread *owner,
                                   int device, gmr_scoped_pool **out);
/* Reset and destroy (its memory goes back upstream). */
void gmr__scoped_pool_destroy(gmr_scoped_pool *pool);
/* Rewind the pool to its state when scope `depth` was entered; drop the
 * marks at that depth and deeper. Owner thread only. */
gmr_status gmr__scoped_pool_rewind_to(gmr_scoped_pool *pool, uint32_t depth,
                                      size_t *released_count);
/* Live blocks of the pool now. */
size_t gmr__scoped_pool_live_count(gmr_scoped_pool *pool);

#ifdef __cplusplus
}
#endif

#endif /* GMR_SCOPED_SCOPED_INTERNAL_H_ */
