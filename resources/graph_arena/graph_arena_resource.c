/*
 * resources/graph_arena/graph_arena_resource.c: the graph arena as a
 * resource: the vtable (allocate, deallocate, destroy, trim, footprint),
 * forwarding uncaptured requests, create, reserve, stats and the public
 * allocate that returns a block id. See gmr/graph_arena_resource.h for the
 * model and graph_arena_internal.h for the data structures and other files.
 */
#include "gmr/graph_arena_resource.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "core/forward.h"
#include "core/nvtx_mem.h"
#include "core/resource_type.h"
#include "core/stats.h"
#include "resources/graph_arena/graph_arena_internal.h"

static const gmr_resource_vtbl graph_arena_vtbl;

/* Grow a dynamic array to hold `need` items of `size` bytes. */
bool gmr__ga_ensure(void **items, size_t *capacity, size_t need, size_t size) {
  if (need <= *capacity) return true;
  size_t cap = *capacity < 8 ? 8 : *capacity;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) return false;
    cap *= 2;
  }
  if (cap > SIZE_MAX / size) return false;
  void *p = realloc(*items, cap * size);
  if (p == NULL) return false;
  *items = p;
  *capacity = cap;
  return true;
}

static gmr_status forward_allocate(gmr_graph_arena_resource *a, size_t bytes, size_t alignment,
                                   gmr_stream stream, bool capturing, void **out_ptr,
                                   gmr_failure *failure) {
  gmr__ga_count_upstream_call(a);
  /* The dispatch checked the request: call the upstream's slot directly. */
  gmr_status st =
      capturing
          ? gmr_resource_allocate_capturing(a->upstream, bytes, alignment, stream, out_ptr, failure)
          : gmr__forward_allocate(a->upstream, bytes, alignment, stream, out_ptr, failure);
  if (st == GMR_OK) {
    atomic_fetch_add_explicit(&a->forwarded_allocation_count, 1, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&a->forwarded_failure_count, 1, memory_order_relaxed);
  }
  return st;
}

/* Forwarded blocks not yet freed (a snapshot; frees are read first so that a
 * free is never seen without its allocation). */
static size_t forwarded_live(gmr_graph_arena_resource *a) {
  uint64_t frees = atomic_load_explicit(&a->forwarded_free_count, memory_order_acquire);
  uint64_t allocs = atomic_load_explicit(&a->forwarded_allocation_count, memory_order_acquire);
  return allocs > frees ? (size_t)(allocs - frees) : 0;
}

/* `capturing`: the caller says `stream` captures (the allocate_capturing
 * slot): whatever goes below goes through the upstream's allocate_capturing. */
GMR__GA_NOINLINE static gmr_status arena_allocate_impl(gmr_graph_arena_resource *a, size_t bytes,
                                                       size_t alignment,
                                      gmr_stream stream, bool capturing, void **out_ptr,
                                      uint64_t *out_id, gmr_failure *failure) {
  if (out_id != NULL) *out_id = 0;
  gmr__ga_session *s = NULL;
  if (!gmr__ga_no_capture_possible(a)) {
    gmr_status st = gmr__ga_resolve(a, stream, &s, failure);
    if (st != GMR_OK) return st;
  }
  if (s == NULL && a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD) {
    /* The graph pool's common case: no lock taken, one atomic add. */
    return forward_allocate(a, bytes, alignment, stream, capturing, out_ptr, failure);
  }
  gmr_status st;
  gmr__ga_carve_request rq;
  rq.bytes = bytes;
  rq.alignment = alignment > a->cfg.alignment ? alignment : a->cfg.alignment;
  rq.carved_bytes = gmr__align_up(bytes, a->cfg.alignment);
  rq.requested_alignment = alignment;
  rq.stream = stream;
  if (rq.carved_bytes < bytes || rq.alignment > GMR_MAX_ALLOCATION_BYTES) {
    if (s != NULL) gmr__ga_unlock(a);
    snprintf(failure->message, sizeof failure->message, "graph_arena: request too large");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  if (s != NULL) {
    st = gmr__ga_serve_in_session(a, s, &rq, out_ptr, out_id, failure);
    gmr__ga_unlock(a);
    return st;
  }
  gmr__ga_lock(a);
  st = gmr__ga_serve_uncaptured(a, &rq, capturing, out_ptr, out_id, failure);
  gmr__ga_unlock(a);
  return st;
}

static gmr_status arena_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                 gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)self;
  /* The graph pool outside captures: straight to the upstream's slot, no lock,
   * one atomic add. Everything else takes the general path. */
  if (a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD && gmr__ga_no_capture_possible(a)) {
    gmr_status st = gmr__forward_allocate(a->upstream, bytes, alignment, stream, out_ptr, failure);
    atomic_fetch_add_explicit(st == GMR_OK ? &a->forwarded_allocation_count
                                           : &a->forwarded_failure_count,
                              1, memory_order_relaxed);
    return st;
  }
  return arena_allocate_impl(a, bytes, alignment, stream, false, out_ptr, NULL, failure);
}

/* The caller (an adaptor above, or a user) allocates while `stream`
 * captures: served as any request (a session when the arena knows of the
 * capture), with every upstream call made through allocate_capturing. */
static gmr_status arena_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                           gmr_stream stream, void **out_ptr,
                                           gmr_failure *failure) {
  return arena_allocate_impl((gmr_graph_arena_resource *)self, bytes, alignment, stream, true,
                             out_ptr, NULL, failure);
}

/* Free block `slot` deallocated on `stream`. Lock held. Fails only for lack
 * of host memory, changing nothing. */
gmr_status gmr__ga_free_block(gmr_graph_arena_resource *a, uint32_t slot, gmr_stream stream) {
  gmr__ga_block *b = &a->blocks[slot];
  if (b->scope == GMR__GA_SCOPE_OPEN) {
    gmr__ga_entry *e = &a->open.items[b->entry];
    e->state = GMR__GA_ENTRY_FREED; /* kept until reset or rewind */
    /* Freed in a capture, the block may still be touched by the graph's
     * replays: its region stays until its bytes come back. */
    if (e->region && gmr__ga_find_session(a, stream) == NULL) {
      gmr__nvtx_mem_region_unregister((void *)e->begin);
      e->region = false;
    }
    gmr__ga_drop_block(a, slot);
    return GMR_OK;
  }
  if (b->scope == GMR__GA_SCOPE_LOOSE) {
    if (!gmr__extent_set_reserve(&a->free, 1)) return GMR_ERR_OUT_OF_MEMORY;
    gmr__extent_set_add(&a->free, (gmr__extent){b->addr, b->addr + b->carved_bytes, 0, b->order});
    if (a->cfg.nvtx_annotate) gmr__nvtx_mem_region_unregister((void *)b->addr);
    gmr__ga_drop_block(a, slot);
    return GMR_OK;
  }
  /* A captured block: its region stays while the memory holds its bytes. */
  gmr_graph_memory *m = b->memory;
  gmr__ga_entry *e = &m->entries.items[b->entry];
  if (b->recorded) {
    /* Other streams may still use it: not reused before they have joined. */
    e->state = GMR__GA_ENTRY_FREED;
    gmr__ga_defer_free(a, m, b, b->entry, stream);
    gmr__ga_drop_block(a, slot);
    return GMR_OK;
  }
  /* Ordered reuse (PyTorch's private pools): the bytes may serve a later
   * request on the stream they were freed on, in this capture or a later one
   * into the same memory; graphs sharing the memory then replay in capture
   * order. Without host memory for the list they simply stay with the memory. */
  if (a->cfg.capture_policy == GMR_GRAPH_ARENA_ORDERED_REUSE &&
      gmr__extent_set_reserve(&m->reuse, 1)) {
    gmr__extent_set_add(&m->reuse, (gmr__extent){e->begin, e->end, (uintptr_t)stream, e->order});
    e->state = GMR__GA_ENTRY_MOVED;
    gmr__ga_region_widen(a, e);
  } else {
    e->state = GMR__GA_ENTRY_FREED; /* kept with the memory until it is released */
  }
  gmr__ga_drop_block(a, slot);
  return GMR_OK;
}

static gmr_status forward_deallocate(gmr_graph_arena_resource *a, void *ptr, size_t bytes,
                                     size_t alignment, gmr_stream stream) {
  if (forwarded_live(a) == 0) return GMR_ERR_UNKNOWN_POINTER; /* nothing of ours is upstream */
  if (!gmr__ga_no_capture_possible(a)) {
    gmr__ga_session *s = NULL;
    gmr_status st = gmr__ga_resolve(a, stream, &s, NULL);
    if (st != GMR_OK) return st;
    if (s != NULL) {
      /* Never call the upstream for a stream that captures: free it after. */
      gmr__ga_unlock(a);
      return GMR_ERR_CAPTURE_UNSAFE;
    }
  }
  gmr__ga_count_upstream_call(a);
  gmr_status st = gmr__forward_deallocate(a->upstream, ptr, bytes, alignment, stream);
  if (st == GMR_OK) {
    atomic_fetch_add_explicit(&a->forwarded_free_count, 1, memory_order_release);
  } else {
    atomic_fetch_add_explicit(&a->forwarded_failure_count, 1, memory_order_relaxed);
  }
  return st;
}

/* Why a pointer inside a chunk is no live block: a block started there and
 * was freed (or reset, rewound), or none ever did. Lock held. */
static gmr_status bad_free_status(gmr_graph_arena_resource *a, const void *ptr) {
  uintptr_t addr = (uintptr_t)ptr;
  gmr__ga_chunk *c = gmr__ga_chunk_of(a, addr);
  if (c == NULL || ((addr - c->base) & ((1u << GMR__GA_GRANULE_SHIFT) - 1)) != 0) {
    return GMR_ERR_UNKNOWN_POINTER;
  }
  return c->block_at[(addr - c->base) >> GMR__GA_GRANULE_SHIFT] == GMR__GA_TOMBSTONE
             ? GMR_ERR_DOUBLE_FREE
             : GMR_ERR_UNKNOWN_POINTER;
}

/* The general free path: a block of the arena, a bad free, or a forwarded
 * block while a capture may be under way. Kept out of line so that the fast
 * path of arena_deallocate stays small. */
GMR__GA_NOINLINE static gmr_status deallocate_slow(gmr_graph_arena_resource *a, void *ptr,
                                                   size_t bytes, size_t alignment,
                                                   gmr_stream stream) {
  uintptr_t addr = (uintptr_t)ptr;
  /* Outside every chunk the pointer cannot be one of the arena's blocks: no
   * lock (the graph pool's forwarded frees). */
  if (addr >= atomic_load_explicit(&a->chunks_begin, memory_order_relaxed) &&
      addr < atomic_load_explicit(&a->chunks_end, memory_order_relaxed)) {
    gmr__ga_lock(a);
    uint32_t slot = 0;
    gmr_status st;
    if (gmr__ga_lookup_ptr(a, ptr, &slot)) {
      const gmr__ga_block *b = &a->blocks[slot];
      st = b->bytes == bytes && b->alignment == alignment ? gmr__ga_free_block(a, slot, stream)
                                                          : GMR_ERR_FREE_MISMATCH;
      gmr__ga_unlock(a);
      return st;
    }
    bool in_chunk = gmr__ga_chunk_of(a, addr) != NULL;
    st = in_chunk ? bad_free_status(a, ptr) : GMR_OK;
    gmr__ga_unlock(a);
    if (in_chunk) return st;
  }
  if (a->cfg.uncaptured != GMR_GRAPH_ARENA_UNCAPTURED_FORWARD) return GMR_ERR_UNKNOWN_POINTER;
  return forward_deallocate(a, ptr, bytes, alignment, stream);
}

static gmr_status arena_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                   gmr_stream stream) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)self;
  uintptr_t addr = (uintptr_t)ptr;
  /* The graph pool outside captures: a pointer outside every chunk cannot be
   * one of the arena's blocks, so it goes straight to the upstream's slot
   * (when the arena has anything upstream at all). */
  if (a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD &&
      (addr < atomic_load_explicit(&a->chunks_begin, memory_order_relaxed) ||
       addr >= atomic_load_explicit(&a->chunks_end, memory_order_relaxed)) &&
      gmr__ga_no_capture_possible(a) && forwarded_live(a) > 0) {
    gmr_status st = gmr__forward_deallocate(a->upstream, ptr, bytes, alignment, stream);
    if (st == GMR_OK) {
      atomic_fetch_add_explicit(&a->forwarded_free_count, 1, memory_order_release);
    } else {
      atomic_fetch_add_explicit(&a->forwarded_failure_count, 1, memory_order_relaxed);
    }
    return st;
  }
  return deallocate_slow(a, ptr, bytes, alignment, stream);
}

static gmr_status arena_destroy(gmr_resource *self) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)self;
  gmr__ga_lock(a);
  if (a->session_count > 0 || a->memory_count > 0 || a->live_count > 0 || forwarded_live(a) > 0) {
    gmr__ga_unlock(a);
    return GMR_ERR_BUSY;
  }
  /* Freed uncaptured blocks go back first, so every chunk is wholly free. */
  if (a->open.count > 0) {
    gmr__extent *scratch = malloc(a->open.count * sizeof *scratch);
    if (scratch == NULL || !gmr__extent_set_reserve(&a->free, a->open.count)) {
      free(scratch);
      gmr__ga_unlock(a);
      return GMR_ERR_OUT_OF_MEMORY;
    }
    gmr__ga_clear_open_from(a, 0, scratch);
    free(scratch);
    a->open_marks.count = 0;
  }
  while (a->chunk_count > 0) {
    bool released = false;
    gmr_status st = gmr__ga_release_chunk(a, a->chunk_count - 1, NULL, &released);
    if (st != GMR_OK || !released) {
      /* The arena stays valid with the chunks it still has. */
      gmr__ga_unlock(a);
      return st != GMR_OK ? st : GMR_ERR_INTERNAL;
    }
  }
  gmr__ga_unlock(a);
  free(a->chunks);
  gmr__extent_set_clear(&a->free);
  free(a->blocks);
  gmr__capture_walks_free(&a->capture_walks);
  free(a->sessions);
  free(a->memories);
  free(a->open.items);
  free(a->open_marks.items);
  free(a->spare_entries.items);
  free(a);
  return GMR_OK;
}

static gmr_resource *arena_get_upstream(const gmr_resource *self) {
  return ((const gmr_graph_arena_resource *)self)->upstream;
}

static gmr_status arena_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)self;
  *released_bytes = 0;
  gmr__ga_lock(a);
  /* Giving memory back is an upstream call: never during a capture. */
  if (a->session_count > 0) {
    gmr__ga_unlock(a);
    return GMR_OK;
  }
  gmr_status st = GMR_OK;
  for (size_t i = a->chunk_count; i-- > 0;) {
    if (a->chunks[i].origin == GMR__GA_CHUNK_INITIAL) continue;
    size_t bytes = a->chunks[i].bytes;
    bool released = false;
    st = gmr__ga_release_chunk(a, i, NULL, &released);
    if (st != GMR_OK) break;
    if (released) *released_bytes += bytes;
  }
  gmr__ga_unlock(a);
  return st;
}

static gmr_status arena_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)(uintptr_t)self;
  /* Forwarding, the arena is a part of what its upstream holds: the stack's
   * footprint is the upstream's, when it can say. */
  if (a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD &&
      gmr_resource_get_footprint(a->upstream, out) == GMR_OK) {
    return GMR_OK;
  }
  gmr__ga_lock(a);
  out->held_bytes = a->held_bytes;
  out->peak_held_bytes = a->peak_held_bytes;
  gmr__ga_unlock(a);
  return GMR_OK;
}

static gmr_status arena_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  gmr_graph_arena_resource *a = (gmr_graph_arena_resource *)(uintptr_t)self;
  /* Forwarding, as for the footprint: the stack's memory is the upstream's. */
  if (a->cfg.uncaptured == GMR_GRAPH_ARENA_UNCAPTURED_FORWARD &&
      gmr_resource_get_memory_info(a->upstream, out) == GMR_OK) {
    return GMR_OK;
  }
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  gmr__ga_lock(a);
  info.held_bytes = a->held_bytes;
  info.live_bytes = a->live_bytes;
  gmr__ga_describe_free(a, &info.free_bytes, &info.largest_free_block_bytes,
                        &info.free_block_count);
  gmr__ga_unlock(a);
  gmr__stats_copy_out(out, &info, sizeof info);
  return GMR_OK;
}

static const gmr_resource_vtbl graph_arena_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "graph_arena_resource",
    .allocate = arena_allocate,
    .deallocate = arena_deallocate,
    .destroy = arena_destroy,
    .get_upstream = arena_get_upstream,
    .trim = arena_trim,
    .get_footprint = arena_get_footprint,
    .get_memory_info = arena_get_memory_info,
    .record_stream = gmr__ga_record_stream,
    .allocate_capturing = arena_allocate_capturing,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type graph_arena_type = {&graph_arena_vtbl, NULL};

gmr_status gmr_graph_arena_resource_create(gmr_resource *upstream,
                                           const gmr_graph_arena_resource_config *config,
                                           gmr_graph_arena_resource **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (gmr__resource_check_vtbl(upstream) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  gmr_graph_arena_resource_config cfg = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  if (!gmr__is_power_of_two(cfg.alignment) || cfg.alignment < GMR_DEFAULT_ALIGNMENT ||
      cfg.alignment > GMR_MAX_ALLOCATION_BYTES ||
      cfg.initial_capacity_bytes > cfg.max_capacity_bytes ||
      cfg.initial_capacity_bytes > GMR_MAX_ALLOCATION_BYTES ||
      (cfg.capture_policy != GMR_GRAPH_ARENA_MONOTONE &&
       cfg.capture_policy != GMR_GRAPH_ARENA_ORDERED_REUSE) ||
      (cfg.detection != GMR_GRAPH_ARENA_DETECT_AUTO &&
       cfg.detection != GMR_GRAPH_ARENA_DETECT_EXPLICIT &&
       cfg.detection != GMR_GRAPH_ARENA_DETECT_HINTED) ||
      (cfg.uncaptured != GMR_GRAPH_ARENA_UNCAPTURED_ARENA &&
       cfg.uncaptured != GMR_GRAPH_ARENA_UNCAPTURED_FORWARD)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  /* Sizes are whole granules, so every carve stays aligned. */
  cfg.initial_capacity_bytes = gmr__align_up(cfg.initial_capacity_bytes, cfg.alignment);
  cfg.chunk_bytes = cfg.chunk_bytes > GMR_MAX_ALLOCATION_BYTES
                        ? GMR_MAX_ALLOCATION_BYTES
                        : gmr__align_up(cfg.chunk_bytes, cfg.alignment);
  if (cfg.initial_capacity_bytes > cfg.max_capacity_bytes) return GMR_ERR_INVALID_ARGUMENT;

  /* Aligned for the cache line of the forwarded counters. */
  size_t size = gmr__align_up(sizeof(gmr_graph_arena_resource), 64);
  gmr_graph_arena_resource *a = aligned_alloc(64, size);
  if (a == NULL) return GMR_ERR_OUT_OF_MEMORY;
  memset(a, 0, size);
  atomic_init(&a->lock.locked, 0);
  atomic_init(&a->chunks_begin, UINTPTR_MAX);
  atomic_init(&a->chunks_end, 0);
  a->base.vtbl = &graph_arena_vtbl;
  gmr__resource_type_register(&graph_arena_type);
  a->upstream = upstream;
  a->cuda = gmr__cuda();
  a->cfg = cfg;
  a->free_slot = GMR__GA_NO_SLOT;
  a->next_mark_id = 1;
  if (cfg.initial_capacity_bytes > 0) {
    gmr_failure failure = GMR_FAILURE_INIT;
    gmr_status st = gmr__extent_set_reserve(&a->free, 1)
                        ? gmr__ga_add_chunk(a, cfg.initial_capacity_bytes, GMR__GA_CHUNK_INITIAL,
                                            GMR__GA_GROW_PLAIN, NULL, &failure)
                        : GMR_ERR_OUT_OF_MEMORY;
    if (st != GMR_OK) {
      free(a->chunks);
      gmr__extent_set_clear(&a->free);
      free(a);
      return st;
    }
  }
  *out = a;
  return GMR_OK;
}

gmr_status gmr_graph_arena_resource_reserve(gmr_graph_arena_resource *a, size_t capacity_bytes) {
  if (a == NULL || capacity_bytes == 0 || capacity_bytes > GMR_MAX_ALLOCATION_BYTES) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr__ga_lock(a);
  gmr_status st = GMR_OK;
  if (a->session_count > 0) {
    st = GMR_ERR_CAPTURE_UNSAFE;
  } else if (capacity_bytes > a->held_bytes) {
    size_t grow = gmr__align_up(capacity_bytes - a->held_bytes, GMR_DEFAULT_ALIGNMENT);
    gmr_failure failure = GMR_FAILURE_INIT;
    if (grow > a->cfg.max_capacity_bytes - a->held_bytes || !gmr__extent_set_reserve(&a->free, 1)) {
      st = GMR_ERR_OUT_OF_MEMORY;
    } else {
      st = gmr__ga_add_chunk(a, grow, GMR__GA_CHUNK_RESERVED, GMR__GA_GROW_PLAIN, NULL, &failure);
    }
  }
  gmr__ga_unlock(a);
  return st;
}

static gmr_status graph_arena_resource_allocate_impl(gmr_graph_arena_resource *a, size_t bytes,
                                                     size_t alignment, gmr_stream stream,
                                                     void **out_ptr, uint64_t *out_id,
                                                     gmr_failure *failure) {
  /* The dispatch's checks and failure record, for the entry point that also
   * returns an id (the vtable slot has no room for one). */
  gmr__failure_reset(failure);
  if (out_id != NULL) *out_id = 0;
  if (out_ptr != NULL) *out_ptr = NULL;
  const gmr_resource *self = a == NULL ? NULL : &a->base;
  if (a == NULL || out_ptr == NULL || out_id == NULL) {
    snprintf(failure->message, sizeof failure->message, "arena, out_ptr or out_id is NULL");
    return gmr__failure_record(failure, GMR_ERR_INVALID_ARGUMENT, self, bytes, alignment, stream);
  }
  gmr_status done = GMR_OK;
  if (!gmr__request_check(self, bytes, &alignment, stream, out_ptr, failure, &done)) return done;
  void *p = NULL;
  gmr_status st = arena_allocate_impl(a, bytes, alignment, stream, false, &p, out_id, failure);
  if (st != GMR_OK) {
    *out_id = 0;
    return gmr__failure_record(failure, st, self, bytes, alignment, stream);
  }
  *out_ptr = p;
  return GMR_OK;
}

gmr_status gmr_graph_arena_resource_allocate(gmr_graph_arena_resource *a, size_t bytes,
                                             size_t alignment, gmr_stream stream, void **out_ptr,
                                             uint64_t *out_id, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  gmr_status st =
      graph_arena_resource_allocate_impl(a, bytes, alignment, stream, out_ptr, out_id, f);
  return gmr__failure_end(failure, f, st);
}

gmr_status gmr_graph_arena_resource_get_stats(gmr_graph_arena_resource *a,
                                              gmr_graph_arena_resource_stats *out) {
  if (a == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_graph_arena_resource_stats s;
  memset(&s, 0, sizeof s);
  gmr__ga_lock(a);
  s.held_bytes = a->held_bytes;
  s.peak_held_bytes = a->peak_held_bytes;
  s.chunk_count = a->chunk_count;
  s.in_use_bytes = gmr__ga_in_use_bytes(a);
  s.peak_in_use_bytes = a->peak_in_use_bytes;
  s.live_bytes = a->live_bytes;
  s.peak_live_bytes = a->peak_live_bytes;
  s.live_count = a->live_count;
  s.allocation_count = a->allocation_count;
  s.capture_allocation_count = a->capture_allocation_count;
  s.capture_refusal_count = a->capture_refusal_count;
  s.capture_shortfall_bytes = a->capture_shortfall_bytes;
  s.open_session_count = a->session_count;
  s.graph_memory_count = a->memory_count;
  s.capture_growth_count = a->capture_growth_count;
  s.upstream_call_in_session_count = a->chunk_call_in_session_count;
  s.adopted_chunk_count = a->adopted_chunk_count;
  s.adopted_bytes = a->adopted_bytes;
  s.returned_chunk_count = a->returned_chunk_count;
  s.returned_bytes = a->returned_bytes;
  uint64_t chunk_calls = a->chunk_call_count;
  gmr__ga_unlock(a);
  uint64_t frees = atomic_load(&a->forwarded_free_count);
  s.forwarded_allocation_count = atomic_load(&a->forwarded_allocation_count);
  s.forwarded_live_count = s.forwarded_allocation_count > frees
                               ? (size_t)(s.forwarded_allocation_count - frees)
                               : 0;
  s.upstream_call_count = chunk_calls + s.forwarded_allocation_count + frees +
                          atomic_load(&a->forwarded_failure_count);
  s.upstream_call_during_capture_count = atomic_load(&a->upstream_call_during_capture_count);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}

gmr_graph_arena_resource_config gmr_graph_arena_resource_get_config(
    const gmr_graph_arena_resource *a) {
  return a->cfg;
}

static const char *const policy_names[] = {"monotone", "ordered_reuse"};

const char *gmr_graph_arena_resource_policy_name(gmr_graph_arena_policy policy) {
  if ((int)policy < 0 || (size_t)policy >= sizeof policy_names / sizeof policy_names[0]) {
    return "unknown";
  }
  return policy_names[policy];
}

gmr_status gmr_graph_arena_resource_policy_from_name(const char *name,
                                                     gmr_graph_arena_policy *out) {
  if (name == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < sizeof policy_names / sizeof policy_names[0]; ++i) {
    if (strcmp(name, policy_names[i]) == 0) {
      *out = (gmr_graph_arena_policy)i;
      return GMR_OK;
    }
  }
  return GMR_ERR_INVALID_ARGUMENT;
}
