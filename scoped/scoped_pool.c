/*
 * scoped/scoped_pool.c: one thread's pool for one device (see
 * gmr/scoped/scoped_pool.h): a graph arena whose rewind marks are set lazily, at
 * the first allocation inside a scope deeper than the last mark. The calls it
 * passes to its arena go to the arena's slots (core/forward.h), as an
 * adaptor's do: the dispatch above checked them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "core/forward.h"
#include "core/resource_type.h"
#include "scoped/scoped_internal.h"
#include "core/stats.h"

static const gmr_resource_vtbl scoped_pool_vtbl;

static bool is_owner_thread(const gmr_scoped_pool *p) {
  return pthread_getspecific(p->registry->key) == (void *)p->owner;
}

static bool marks_reserve(gmr_scoped_pool *p) {
  if (p->mark_count < p->mark_capacity) return true;
  size_t cap = p->mark_capacity == 0 ? 8 : p->mark_capacity * 2;
  gmr__scope_mark *m = realloc(p->marks, cap * sizeof *m);
  if (m == NULL) return false;
  p->marks = m;
  p->mark_capacity = cap;
  return true;
}

static void set_mark_count(gmr_scoped_pool *p, size_t n) {
  p->mark_count = n;
  atomic_store_explicit(&p->published_mark_count, n, memory_order_relaxed);
}

/* The lazy checkpoint: the pool's state now is its state when the current
 * scope was entered, because nothing was allocated from it since. */
static gmr_status checkpoint_if_needed(gmr_scoped_pool *p, gmr_failure *failure) {
  uint32_t depth = p->owner->depth;
  if (depth == 0 || (p->mark_count > 0 && p->marks[p->mark_count - 1].depth >= depth)) {
    return GMR_OK;
  }
  uint64_t mark = 0;
  gmr_status st = marks_reserve(p)
                      ? gmr_graph_arena_resource_checkpoint_uncaptured(p->arena, &mark)
                      : GMR_ERR_OUT_OF_MEMORY;
  if (st != GMR_OK) {
    snprintf(failure->message, sizeof failure->message,
             "scoped_pool: no host memory for the scope mark at depth %u", depth);
    return st;
  }
  p->marks[p->mark_count] = (gmr__scope_mark){depth, mark};
  set_mark_count(p, p->mark_count + 1);
  return GMR_OK;
}

/* The arena under the pool refused a request itself (not its upstream):
 * the refusal is the pool's. The record names the pool, and a request past
 * the pool's capacity names the option that sets it; other refusals keep the
 * arena's words after the pool's name. The arena's message is kept for the
 * second case only (the record has 192 bytes). */
static void own_failure(gmr_scoped_pool *p, gmr_status st, size_t bytes, size_t alignment,
                        gmr_failure *failure) {
  size_t max = p->registry->config.max_capacity_bytes;
  gmr_graph_arena_resource_stats a = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
  size_t held = gmr_graph_arena_resource_get_stats(p->arena, &a) == GMR_OK ? a.held_bytes : 0;
  size_t granule = alignment > p->registry->config.alignment ? alignment
                                                             : p->registry->config.alignment;
  size_t rounded = (bytes + granule - 1) & ~(granule - 1);
  bool over = st == GMR_ERR_OUT_OF_MEMORY && max != SIZE_MAX &&
              (strstr(failure->message, "max_capacity_bytes") != NULL || rounded < bytes ||
               rounded > max || held > max - rounded);
  /* Truncation is acceptable (the record has 192 bytes); the results are
   * read so that GCC does not warn about it. */
  int n;
  if (over) {
    n = snprintf(failure->message, sizeof failure->message,
                 "scoped_pool (device %d): %zu bytes do not fit under its capacity, "
                 "gmr_scope_registry_config.max_capacity_bytes = %zu (holds %zu); exit "
                 "scopes, reset or raise it",
                 p->device, bytes, max, held);
  } else {
    char arena[GMR_FAILURE_MESSAGE_BYTES];
    snprintf(arena, sizeof arena, "%s", failure->message);
    n = snprintf(failure->message, sizeof failure->message, "scoped_pool (device %d): %s",
                 p->device, arena);
  }
  if (n < 0) failure->message[0] = '\0';
  failure->where = &p->base;
  failure->status = st;
  failure->bytes = bytes;
  failure->alignment = alignment;
}

static gmr_status pool_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_scoped_pool *p = (gmr_scoped_pool *)self;
  if (!is_owner_thread(p)) {
    snprintf(failure->message, sizeof failure->message,
             "scoped_pool: this pool belongs to another thread; get the calling thread's own "
             "with gmr_scope_registry_get_pool()");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  int current = -1;
  cudaError_t err = p->registry->cuda->get_device(&current);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaGetDevice", err);
  if (current != p->device) {
    atomic_fetch_add_explicit(&p->wrong_device_count, 1, memory_order_relaxed);
    snprintf(failure->message, sizeof failure->message,
             "scoped_pool: the pool of device %d was asked for %zu bytes while device %d is "
             "current; get device %d's pool with gmr_scope_registry_get_pool()",
             p->device, bytes, current, current);
    return GMR_ERR_WRONG_DEVICE;
  }
  gmr_status st = checkpoint_if_needed(p, failure);
  if (st != GMR_OK) return st;
  /* The real stream: a chunk the arena takes for this request is taken on
   * it, so a stream-ordered upstream orders the new memory there. */
  st = gmr__forward_allocate(p->arena_resource, bytes, alignment, stream, out_ptr, failure);
  if (st == GMR_OK) {
    atomic_fetch_add_explicit(&p->allocation_count, 1, memory_order_relaxed);
  } else if (failure->where == p->arena_resource) {
    own_failure(p, st, bytes, alignment, failure);
  }
  return st;
}

static gmr_status pool_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  gmr_scoped_pool *p = (gmr_scoped_pool *)self;
  return gmr__forward_deallocate(p->arena_resource, ptr, bytes, alignment, stream);
}

/* The registry owns its pools. */
static gmr_status pool_destroy(gmr_resource *self) {
  (void)self;
  return GMR_ERR_UNSUPPORTED;
}

static gmr_resource *pool_get_upstream(const gmr_resource *self) {
  return ((const gmr_scoped_pool *)self)->upstream;
}

/* Only this pool's wholly free chunks: never the shared upstream's cache. */
static gmr_status pool_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_scoped_pool *p = (gmr_scoped_pool *)self;
  return p->arena_resource->vtbl->trim(p->arena_resource, released_bytes);
}

static gmr_status pool_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_scoped_pool *p = (const gmr_scoped_pool *)self;
  return p->arena_resource->vtbl->get_footprint(p->arena_resource, out);
}

static gmr_status pool_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  const gmr_scoped_pool *p = (const gmr_scoped_pool *)self;
  return p->arena_resource->vtbl->get_memory_info(p->arena_resource, out);
}

static const gmr_resource_vtbl scoped_pool_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "scoped_pool",
    .allocate = pool_allocate,
    .deallocate = pool_deallocate,
    .destroy = pool_destroy,
    .get_upstream = pool_get_upstream,
    .trim = pool_trim,
    .get_footprint = pool_get_footprint,
    .get_memory_info = pool_get_memory_info,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type scoped_pool_type = {&scoped_pool_vtbl, NULL};

gmr_status gmr__scoped_pool_create(gmr_scope_registry *r, gmr__scope_thread *owner, int device,
                                   gmr_scoped_pool **out) {
  *out = NULL;
  gmr_scoped_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return GMR_ERR_OUT_OF_MEMORY;
  p->base.vtbl = &scoped_pool_vtbl;
  gmr__resource_type_register(&scoped_pool_type);
  p->registry = r;
  p->owner = owner;
  p->device = device;
  p->upstream = r->upstreams[device];
  gmr_graph_arena_resource_config ac = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
  ac.initial_capacity_bytes = 0;
  ac.chunk_bytes = r->config.chunk_bytes;
  ac.max_capacity_bytes = r->config.max_capacity_bytes;
  ac.alignment = r->config.alignment;
  ac.detection = GMR_GRAPH_ARENA_DETECT_EXPLICIT;  /* no CUDA call when allocating */
  ac.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_ARENA; /* carve, rewind, reset */
  gmr_status st = gmr_graph_arena_resource_create(p->upstream, &ac, &p->arena);
  if (st != GMR_OK) {
    free(p);
    return st;
  }
  p->arena_resource = gmr_graph_arena_resource_as_resource(p->arena);
  *out = p;
  return GMR_OK;
}

void gmr__scoped_pool_destroy(gmr_scoped_pool *p) {
  GMR_IGNORE_STATUS(gmr_graph_arena_resource_reset(p->arena, NULL));
  /* After the reset nothing is live: destroy gives every chunk back. */
  GMR_IGNORE_STATUS(gmr_resource_destroy(p->arena_resource));
  free(p->marks);
  free(p);
}

size_t gmr__scoped_pool_live_count(gmr_scoped_pool *p) {
  gmr_graph_arena_resource_stats s = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
  if (gmr_graph_arena_resource_get_stats(p->arena, &s) != GMR_OK) return 0;
  return s.live_count;
}

gmr_status gmr__scoped_pool_rewind_to(gmr_scoped_pool *p, uint32_t depth, size_t *released) {
  *released = 0;
  size_t i = 0;
  while (i < p->mark_count && p->marks[i].depth < depth) ++i;
  if (i == p->mark_count) return GMR_OK; /* the scope never touched this pool */
  /* The oldest mark at this depth or deeper holds the state at the scope's
   * entry; rewinding to it drops the later marks in the arena too. The
   * thread owns every block of its pool, on whatever stream it used them:
   * the rewind that frees every stream's blocks. */
  gmr_status st =
      gmr_graph_arena_resource_rewind_uncaptured(p->arena, p->marks[i].mark, released);
  if (st != GMR_OK) return st;
  uint64_t orphans = 0;
  for (size_t j = i; j < p->mark_count; ++j) {
    if (p->marks[j].depth > depth) orphans++;
  }
  set_mark_count(p, i);
  atomic_fetch_add_explicit(&p->rewind_count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->released_count, *released, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->orphan_mark_count, orphans, memory_order_relaxed);
  return GMR_OK;
}

int gmr_scoped_pool_get_device(const gmr_scoped_pool *p) { return p == NULL ? -1 : p->device; }

gmr_status gmr_scoped_pool_reset(gmr_scoped_pool *p, size_t *out_released_count) {
  if (out_released_count != NULL) *out_released_count = 0;
  if (p == NULL || !is_owner_thread(p)) return GMR_ERR_INVALID_ARGUMENT;
  size_t released = 0;
  gmr_status st = gmr_graph_arena_resource_reset(p->arena, &released);
  if (st != GMR_OK) return st;
  set_mark_count(p, 0); /* the reset dropped the arena's marks */
  atomic_fetch_add_explicit(&p->reset_count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->released_count, released, memory_order_relaxed);
  if (out_released_count != NULL) *out_released_count = released;
  return GMR_OK;
}

gmr_status gmr_scoped_pool_empty(gmr_scoped_pool *p, size_t *out_released_bytes) {
  if (out_released_bytes != NULL) *out_released_bytes = 0;
  gmr_status st = gmr_scoped_pool_reset(p, NULL);
  if (st != GMR_OK) return st;
  size_t bytes = 0;
  st = pool_trim(&p->base, &bytes);
  atomic_fetch_add_explicit(&p->empty_count, 1, memory_order_relaxed);
  if (out_released_bytes != NULL) *out_released_bytes = bytes;
  return st;
}

gmr_status gmr_scoped_pool_get_stats(gmr_scoped_pool *p, gmr_scoped_pool_stats *out) {
  if (p == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_scoped_pool_stats s;
  memset(&s, 0, sizeof s);
  gmr_graph_arena_resource_stats a = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
  gmr_status st = gmr_graph_arena_resource_get_stats(p->arena, &a);
  if (st != GMR_OK) return st;
  s.device = p->device;
  s.held_bytes = a.held_bytes;
  s.peak_held_bytes = a.peak_held_bytes;
  s.live_bytes = a.live_bytes;
  s.live_count = a.live_count;
  s.mark_count = atomic_load_explicit(&p->published_mark_count, memory_order_relaxed);
  s.allocation_count = atomic_load_explicit(&p->allocation_count, memory_order_relaxed);
  s.rewind_count = atomic_load_explicit(&p->rewind_count, memory_order_relaxed);
  s.released_count = atomic_load_explicit(&p->released_count, memory_order_relaxed);
  s.orphan_mark_count = atomic_load_explicit(&p->orphan_mark_count, memory_order_relaxed);
  s.reset_count = atomic_load_explicit(&p->reset_count, memory_order_relaxed);
  s.empty_count = atomic_load_explicit(&p->empty_count, memory_order_relaxed);
  s.wrong_device_count = atomic_load_explicit(&p->wrong_device_count, memory_order_relaxed);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}
