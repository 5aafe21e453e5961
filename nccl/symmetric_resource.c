/*
 * nccl/symmetric_resource.c: deterministic first-fit placement over
 * regions taken from the upstream (gmr/nccl/symmetric_resource.h).
 *
 * Each region keeps its blocks in a list in address order; a block is live
 * or free. A free block carries the set of streams whose frees it holds,
 * and the resource keeps, per stream, one event recorded again at each of
 * that stream's frees (the latest covers all earlier ones on that stream).
 */
#include "gmr/nccl/symmetric_resource.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda_layer.h"
#include "core/failure.h"
#include "core/resource_type.h"
#include "core/stats.h"
#include "util/u64_map.h"

#define DEFAULT_REGION_BYTES ((size_t)256 << 20)
#define DEFAULT_ALIGNMENT_BYTES ((size_t)4096)

typedef struct sym_region sym_region;

typedef struct sym_block {
  size_t offset;
  size_t bytes;           /* rounded to alignment_bytes */
  size_t requested_bytes; /* live: as asked (a free must name it exactly) */
  size_t alignment;       /* live: as asked (the dispatch made 0 into 256) */
  bool free;
  sym_region *region;
  struct sym_block *prev, *next; /* address order within the region */
  gmr_stream *streams;           /* free: streams whose frees it holds */
  size_t stream_count;
} sym_block;

struct sym_region {
  uintptr_t base;
  size_t bytes;
  size_t index;
  sym_block *first;
};

typedef struct sym_stream_event {
  gmr_stream stream;
  cudaEvent_t event;
} sym_stream_event;

struct gmr_symmetric_resource {
  gmr_resource base; /* first */
  gmr_resource *upstream;
  const gmr__cuda_ops *cuda;
  size_t region_bytes;
  size_t alignment_bytes;
  size_t max_region_count;
  pthread_mutex_t lock;
  /* Under the lock: */
  sym_region **regions; /* by index */
  size_t region_count;
  size_t region_capacity;
  gmr__u64_map live;  /* address -> sym_block * */
  gmr__u64_map freed; /* addresses freed and not handed out since */
  sym_stream_event *events;
  size_t event_count;
  size_t held_bytes;
  size_t peak_held_bytes;
  size_t live_bytes;
  uint64_t event_record_count;
  uint64_t stream_wait_count;
};

static const gmr_resource_vtbl symmetric_vtbl;

static gmr_symmetric_resource *as_sym(gmr_resource *r) { return (gmr_symmetric_resource *)r; }

static void block_delete(sym_block *b) {
  if (b == NULL) return;
  free(b->streams);
  free(b);
}

/* Add the streams of `from` to `into` (a set). false: host memory ran out
 * (into unchanged). */
static bool streams_union(sym_block *into, const gmr_stream *from, size_t count) {
  size_t n = into->stream_count;
  gmr_stream *set = realloc(into->streams, (n + count + 1) * sizeof *set);
  if (set == NULL) return false;
  into->streams = set;
  for (size_t i = 0; i < count; ++i) {
    bool seen = false;
    for (size_t j = 0; j < n && !seen; ++j) seen = set[j] == from[i];
    if (!seen) set[n++] = from[i];
  }
  into->stream_count = n;
  return true;
}

static cudaEvent_t event_of(const gmr_symmetric_resource *r, gmr_stream stream) {
  for (size_t i = 0; i < r->event_count; ++i) {
    if (r->events[i].stream == stream) return r->events[i].event;
  }
  return NULL;
}

/* Make `stream` wait for the frees that `b` holds on other streams. */
static cudaError_t wait_for_frees(gmr_symmetric_resource *r, const sym_block *b,
                                  gmr_stream stream) {
  for (size_t i = 0; i < b->stream_count; ++i) {
    if (b->streams[i] == stream) continue;
    cudaError_t err = r->cuda->stream_wait_event(stream, event_of(r, b->streams[i]));
    if (err != cudaSuccess) return err;
    r->stream_wait_count++;
  }
  return cudaSuccess;
}

/* Take a new region of at least `need` bytes as one free block. */
static gmr_status add_region(gmr_symmetric_resource *r, size_t need, gmr_stream stream,
                             gmr_failure *failure) {
  if (r->max_region_count != 0 && r->region_count >= r->max_region_count) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "symmetric: %zu bytes fit in no free block and max_region_count "
                            "(%zu regions) are held",
                            need, r->max_region_count);
  }
  size_t bytes = need > r->region_bytes ? gmr__align_up(need, r->alignment_bytes) : r->region_bytes;
  if (r->region_count == r->region_capacity) {
    size_t cap = r->region_capacity == 0 ? 8 : 2 * r->region_capacity;
    sym_region **grown = realloc(r->regions, cap * sizeof *grown);
    if (grown == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "symmetric: host memory");
    r->regions = grown;
    r->region_capacity = cap;
  }
  sym_region *g = calloc(1, sizeof *g);
  sym_block *b = calloc(1, sizeof *b);
  if (g == NULL || b == NULL) {
    free(g);
    free(b);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "symmetric: host memory");
  }
  void *p = NULL;
  gmr_status st =
      gmr_resource_allocate_ex(r->upstream, bytes, r->alignment_bytes, stream, &p, failure);
  if (st != GMR_OK) {
    free(g);
    free(b);
    return st;
  }
  *g = (sym_region){(uintptr_t)p, bytes, r->region_count, b};
  *b = (sym_block){.offset = 0, .bytes = bytes, .free = true, .region = g};
  r->regions[r->region_count++] = g;
  r->held_bytes += bytes;
  if (r->held_bytes > r->peak_held_bytes) r->peak_held_bytes = r->held_bytes;
  return GMR_OK;
}

/* The first free block in (region, offset) order that holds `bytes`. */
static sym_block *first_fit(const gmr_symmetric_resource *r, size_t bytes) {
  for (size_t i = 0; i < r->region_count; ++i) {
    for (sym_block *b = r->regions[i]->first; b != NULL; b = b->next) {
      if (b->free && b->bytes >= bytes) return b;
    }
  }
  return NULL;
}

static gmr_status sym_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                               gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_symmetric_resource *r = as_sym(self);
  *out_ptr = NULL;
  if (alignment > r->alignment_bytes) {
    return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                            "symmetric: alignment %zu is above alignment_bytes (%zu); raise "
                            "alignment_bytes on every rank",
                            alignment, r->alignment_bytes);
  }
  if (gmr__cuda_stream_is_capturing(r->cuda, stream)) {
    return gmr__failure_set(failure, GMR_ERR_CAPTURE_UNSAFE,
                            "symmetric: the stream is capturing (its stream waits would join "
                            "the capture)");
  }
  if (bytes > GMR_MAX_ALLOCATION_BYTES - r->alignment_bytes) {
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "symmetric: %zu bytes is too large",
                            bytes);
  }
  size_t size = gmr__align_up(bytes, r->alignment_bytes);
  sym_block *tail = calloc(1, sizeof *tail);
  if (tail == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "symmetric: host memory");
  pthread_mutex_lock(&r->lock);
  gmr_status st = GMR_OK;
  sym_block *b = first_fit(r, size);
  if (b == NULL) {
    st = add_region(r, size, stream, failure);
    if (st == GMR_OK) b = r->regions[r->region_count - 1]->first;
  }
  uintptr_t addr = b != NULL ? b->region->base + b->offset : 0;
  if (st == GMR_OK && !gmr__u64_map_reserve(&r->live, r->live.count + 1)) {
    st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "symmetric: host memory");
  }
  if (st == GMR_OK && size < b->bytes && b->stream_count > 0) {
    /* The remainder keeps the block's streams. */
    if (!streams_union(tail, b->streams, b->stream_count)) {
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "symmetric: host memory");
    }
  }
  if (st == GMR_OK) {
    cudaError_t err = wait_for_frees(r, b, stream);
    if (err != cudaSuccess) st = gmr__cuda_fail(failure, "cudaStreamWaitEvent", err);
  }
  if (st == GMR_OK) {
    if (size < b->bytes) {
      tail->offset = b->offset + size;
      tail->bytes = b->bytes - size;
      tail->free = true;
      tail->region = b->region;
      tail->prev = b;
      tail->next = b->next;
      if (b->next != NULL) b->next->prev = tail;
      b->next = tail;
      b->bytes = size;
      tail = NULL;
    }
    b->free = false;
    b->requested_bytes = bytes;
    b->alignment = alignment;
    free(b->streams);
    b->streams = NULL;
    b->stream_count = 0;
    (void)gmr__u64_map_put(&r->live, (uint64_t)addr, (uint64_t)(uintptr_t)b); /* reserved */
    (void)gmr__u64_map_remove(&r->freed, (uint64_t)addr, NULL);
    r->live_bytes += size;
  }
  pthread_mutex_unlock(&r->lock);
  block_delete(tail);
  if (st == GMR_OK) *out_ptr = (void *)addr;
  return st;
}

/* Merge b with its free neighbours. Pre: b free; lock held. On a failure
 * to grow a stream set the blocks stay apart (still correct, less merged). */
static void coalesce(sym_block *b) {
  sym_block *n = b->next;
  if (n != NULL && n->free && streams_union(b, n->streams, n->stream_count)) {
    b->bytes += n->bytes;
    b->next = n->next;
    if (n->next != NULL) n->next->prev = b;
    block_delete(n);
  }
  sym_block *p = b->prev;
  if (p != NULL && p->free && streams_union(p, b->streams, b->stream_count)) {
    p->bytes += b->bytes;
    p->next = b->next;
    if (b->next != NULL) b->next->prev = p;
    block_delete(b);
  }
}

/* The per-stream event of `stream`, created if it has none. */
static cudaError_t stream_event(gmr_symmetric_resource *r, gmr_stream stream, cudaEvent_t *out) {
  *out = event_of(r, stream);
  if (*out != NULL) return cudaSuccess;
  sym_stream_event *grown = realloc(r->events, (r->event_count + 1) * sizeof *grown);
  if (grown == NULL) return cudaErrorMemoryAllocation;
  r->events = grown;
  cudaError_t err = r->cuda->event_create(out);
  if (err != cudaSuccess) return err;
  r->events[r->event_count++] = (sym_stream_event){stream, *out};
  return cudaSuccess;
}

static gmr_status sym_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                 gmr_stream stream) {
  gmr_symmetric_resource *r = as_sym(self);
  uint64_t key = (uint64_t)(uintptr_t)ptr;
  uint64_t value = 0;
  pthread_mutex_lock(&r->lock);
  gmr_status st = GMR_OK;
  sym_block *b = NULL;
  gmr_stream *set = NULL;
  if (!gmr__u64_map_get(&r->live, key, &value)) {
    st = gmr__u64_map_get(&r->freed, key, NULL) ? GMR_ERR_DOUBLE_FREE : GMR_ERR_UNKNOWN_POINTER;
  } else {
    b = (sym_block *)(uintptr_t)value;
    if (bytes != b->requested_bytes || alignment != b->alignment) {
      st = GMR_ERR_FREE_MISMATCH; /* exactly as asked, not what it rounds to */
    } else if (gmr__cuda_stream_is_capturing(r->cuda, stream)) {
      st = GMR_ERR_CAPTURE_UNSAFE;
    } else if ((set = malloc(sizeof *set)) == NULL) {
      st = GMR_ERR_OUT_OF_MEMORY;
    }
  }
  cudaEvent_t event = NULL;
  if (st == GMR_OK && stream_event(r, stream, &event) != cudaSuccess) st = GMR_ERR_CUDA;
  if (st == GMR_OK && r->cuda->event_record(event, stream) != cudaSuccess) st = GMR_ERR_CUDA;
  if (st == GMR_OK) {
    r->event_record_count++;
    (void)gmr__u64_map_remove(&r->live, key, NULL);
    (void)gmr__u64_map_put(&r->freed, key, 1); /* a lost entry only weakens DOUBLE_FREE */
    r->live_bytes -= b->bytes;
    set[0] = stream;
    b->streams = set;
    b->stream_count = 1;
    b->free = true;
    set = NULL;
    coalesce(b);
  }
  pthread_mutex_unlock(&r->lock);
  free(set);
  return st;
}

/* Give the last region back if it has no live block; false otherwise (or
 * when the upstream refused: *st says so). Pre: lock held. */
static bool give_back_last(gmr_symmetric_resource *r, size_t *released_bytes, gmr_status *st) {
  if (r->region_count == 0) return false;
  sym_region *g = r->regions[r->region_count - 1];
  for (const sym_block *b = g->first; b != NULL; b = b->next) {
    if (!b->free) return false;
  }
  /* The upstream's free goes on the default stream, after every free. */
  for (size_t i = 0; i < r->event_count; ++i) {
    if (r->cuda->stream_wait_event(NULL, r->events[i].event) != cudaSuccess) {
      *st = GMR_ERR_CUDA;
      return false;
    }
  }
  *st = gmr_resource_deallocate(r->upstream, (void *)g->base, g->bytes, r->alignment_bytes, NULL);
  if (*st != GMR_OK) return false;
  r->held_bytes -= g->bytes;
  if (released_bytes != NULL) *released_bytes += g->bytes;
  sym_block *next = NULL;
  for (sym_block *b = g->first; b != NULL; b = next) {
    next = b->next;
    block_delete(b);
  }
  free(g);
  r->region_count--;
  return true;
}

static gmr_status sym_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_symmetric_resource *r = as_sym(self);
  pthread_mutex_lock(&r->lock);
  gmr_status st = GMR_OK;
  while (give_back_last(r, released_bytes, &st)) {
  }
  pthread_mutex_unlock(&r->lock);
  return st;
}

static void free_host_side(gmr_symmetric_resource *r) {
  free(r->regions);
  free(r->events);
  gmr__u64_map_clear(&r->live);
  gmr__u64_map_clear(&r->freed);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

static gmr_status sym_destroy(gmr_resource *self) {
  gmr_symmetric_resource *r = as_sym(self);
  if (r->live.count != 0) return GMR_ERR_BUSY;
  gmr_status st = GMR_OK;
  while (give_back_last(r, NULL, &st)) {
  }
  if (st != GMR_OK) return st; /* what is left stays, with the resource */
  for (size_t i = 0; i < r->event_count; ++i) (void)r->cuda->event_destroy(r->events[i].event);
  free_host_side(r);
  return GMR_OK;
}

static gmr_resource *sym_get_upstream(const gmr_resource *self) {
  return ((const gmr_symmetric_resource *)self)->upstream;
}

static gmr_status sym_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  gmr_symmetric_resource *r = as_sym((gmr_resource *)self);
  pthread_mutex_lock(&r->lock);
  out->held_bytes = r->held_bytes;
  out->peak_held_bytes = r->peak_held_bytes;
  pthread_mutex_unlock(&r->lock);
  return GMR_OK;
}

/* Free blocks: count and largest. Pre: lock held. */
static void free_blocks(const gmr_symmetric_resource *r, size_t *count, size_t *largest) {
  *count = 0;
  *largest = 0;
  for (size_t i = 0; i < r->region_count; ++i) {
    for (const sym_block *b = r->regions[i]->first; b != NULL; b = b->next) {
      if (!b->free) continue;
      (*count)++;
      if (b->bytes > *largest) *largest = b->bytes;
    }
  }
}

static gmr_status sym_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  gmr_symmetric_resource *r = as_sym((gmr_resource *)self);
  pthread_mutex_lock(&r->lock);
  out->held_bytes = r->held_bytes;
  out->live_bytes = r->live_bytes;
  out->free_bytes = r->held_bytes - r->live_bytes;
  free_blocks(r, &out->free_block_count, &out->largest_free_block_bytes);
  pthread_mutex_unlock(&r->lock);
  return GMR_OK;
}

static const gmr_resource_vtbl symmetric_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "symmetric_resource",
    .allocate = sym_allocate,
    .deallocate = sym_deallocate,
    .destroy = sym_destroy,
    .get_upstream = sym_get_upstream,
    .trim = sym_trim,
    .get_footprint = sym_get_footprint,
    .get_memory_info = sym_get_memory_info,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type symmetric_type = {&symmetric_vtbl, NULL};

static gmr_status symmetric_resource_create_impl(gmr_resource *upstream,
                                                 const gmr_symmetric_resource_config *config,
                                                 gmr_symmetric_resource **out,
                                                 gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (out == NULL || gmr__resource_check_vtbl(upstream) != GMR_OK) {
    if (out != NULL) *out = NULL;
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "symmetric: needs a valid upstream and an out pointer");
  }
  *out = NULL;
  gmr_symmetric_resource_config c = GMR_SYMMETRIC_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) c = *config;
  size_t align = c.alignment_bytes != 0 ? c.alignment_bytes : DEFAULT_ALIGNMENT_BYTES;
  size_t region = c.region_bytes != 0 ? c.region_bytes : DEFAULT_REGION_BYTES;
  if (align < GMR_DEFAULT_ALIGNMENT || !gmr__is_power_of_two(align)) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "symmetric: alignment_bytes %zu must be a power of two of 256 or more",
                            align);
  }
  if (region % align != 0 || region > GMR_MAX_ALLOCATION_BYTES) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "symmetric: region_bytes %zu must be a multiple of alignment_bytes "
                            "(%zu)",
                            region, align);
  }
  gmr_symmetric_resource *r = calloc(1, sizeof *r);
  if (r == NULL) return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "symmetric: host memory");
  r->base.vtbl = &symmetric_vtbl;
  gmr__resource_type_register(&symmetric_type);
  r->upstream = upstream;
  r->cuda = gmr__cuda();
  r->region_bytes = region;
  r->alignment_bytes = align;
  r->max_region_count = c.max_region_count;
  pthread_mutex_init(&r->lock, NULL);
  *out = r;
  return GMR_OK;
}

gmr_status gmr_symmetric_resource_create(gmr_resource *upstream,
                                         const gmr_symmetric_resource_config *config,
                                         gmr_symmetric_resource **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, symmetric_resource_create_impl(upstream, config, out, f));
}

gmr_status gmr_symmetric_resource_get_offset(gmr_symmetric_resource *r, const void *ptr,
                                             size_t *region_index, size_t *offset_bytes) {
  if (r == NULL || region_index == NULL || offset_bytes == NULL) return GMR_ERR_INVALID_ARGUMENT;
  uint64_t value = 0;
  pthread_mutex_lock(&r->lock);
  bool known = gmr__u64_map_get(&r->live, (uint64_t)(uintptr_t)ptr, &value);
  if (known) {
    const sym_block *b = (const sym_block *)(uintptr_t)value;
    *region_index = b->region->index;
    *offset_bytes = b->offset;
  }
  pthread_mutex_unlock(&r->lock);
  return known ? GMR_OK : GMR_ERR_UNKNOWN_POINTER;
}

gmr_status gmr_symmetric_resource_get_region(gmr_symmetric_resource *r, size_t region_index,
                                             void **base, size_t *bytes) {
  if (r == NULL || base == NULL || bytes == NULL) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&r->lock);
  bool known = region_index < r->region_count;
  if (known) {
    *base = (void *)r->regions[region_index]->base;
    *bytes = r->regions[region_index]->bytes;
  }
  pthread_mutex_unlock(&r->lock);
  return known ? GMR_OK : GMR_ERR_INVALID_ARGUMENT;
}

gmr_status gmr_symmetric_resource_get_stats(gmr_symmetric_resource *r,
                                            gmr_symmetric_resource_stats *out) {
  if (r == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_symmetric_resource_stats s;
  memset(&s, 0, sizeof s);
  pthread_mutex_lock(&r->lock);
  s.region_count = r->region_count;
  s.held_bytes = r->held_bytes;
  s.peak_held_bytes = r->peak_held_bytes;
  s.live_bytes = r->live_bytes;
  s.live_count = r->live.count;
  free_blocks(r, &s.free_block_count, &s.largest_free_block_bytes);
  s.event_record_count = r->event_record_count;
  s.stream_wait_count = r->stream_wait_count;
  pthread_mutex_unlock(&r->lock);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}
