/*
 * nccl/chunk_listener_adaptor.c: tells listeners about every chunk that
 * passes between a pool and its upstream (gmr/nccl/chunk_listener_adaptor.h).
 * An adaptor (core/adaptor.h): its upstream is called through core/forward.h.
 */
#include "gmr/nccl/chunk_listener_adaptor.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/adaptor.h"
#include "core/failure.h"
#include "core/forward.h"
#include "core/resource_type.h"
#include "core/stats.h"
#include "util/u64_map.h"

typedef struct attached {
  uint32_t id;
  gmr_chunk_listener listener;
} attached;

struct gmr_chunk_listener_adaptor {
  gmr__adaptor base; /* first */
  pthread_mutex_t lock;
  /* Under the lock: */
  attached listeners[GMR_CHUNK_LISTENER_MAX];
  size_t listener_count;
  uint32_t next_id;
  gmr__u64_map chunks;     /* address -> bytes */
  gmr__u64_map alignments; /* address -> alignment (a bad free must reach no listener) */
  gmr__u64_map freed;      /* chunk addresses given back and not handed out since */
  size_t chunk_bytes;
  uint64_t acquired_count;
  uint64_t released_count;
  uint64_t refused_acquire_count;
  uint64_t refused_release_count;
};

static const gmr_resource_vtbl listener_vtbl;

static gmr_chunk_listener_adaptor *as_adaptor(gmr_resource *r) {
  return (gmr_chunk_listener_adaptor *)r;
}

/* Tell listeners [0, count) that the chunk goes, newest first; refusals
 * are ignored (this only ever undoes an acquire the same call made). */
static void undo_acquired(gmr_chunk_listener_adaptor *a, size_t count, void *addr, size_t bytes) {
  gmr_failure ignored = GMR_FAILURE_INIT;
  for (size_t i = count; i-- > 0;) {
    const gmr_chunk_listener *l = &a->listeners[i].listener;
    gmr__failure_reset(&ignored);
    (void)l->on_releasing(l->ctx, addr, bytes, &ignored);
  }
}

/* Tell every listener of a new chunk. Pre: lock held. On a refusal the
 * listeners that accepted are told it goes, and the status returned. */
static gmr_status tell_acquired(gmr_chunk_listener_adaptor *a, void *addr, size_t bytes,
                                gmr_failure *failure) {
  for (size_t i = 0; i < a->listener_count; ++i) {
    const gmr_chunk_listener *l = &a->listeners[i].listener;
    gmr_status st = l->on_acquired(l->ctx, addr, bytes, failure);
    if (st != GMR_OK) {
      undo_acquired(a, i, addr, bytes);
      return st;
    }
  }
  return GMR_OK;
}

/* Tell every listener that a chunk goes; on a refusal the listeners told
 * so far hear on_acquired again. Pre: lock held. */
static gmr_status tell_releasing(gmr_chunk_listener_adaptor *a, void *addr, size_t bytes,
                                 gmr_failure *failure) {
  for (size_t i = 0; i < a->listener_count; ++i) {
    const gmr_chunk_listener *l = &a->listeners[i].listener;
    gmr_status st = l->on_releasing(l->ctx, addr, bytes, failure);
    if (st != GMR_OK) {
      gmr_failure ignored = GMR_FAILURE_INIT;
      for (size_t j = 0; j < i; ++j) {
        const gmr_chunk_listener *k = &a->listeners[j].listener;
        gmr__failure_reset(&ignored);
        (void)k->on_acquired(k->ctx, addr, bytes, &ignored);
      }
      return st;
    }
  }
  return GMR_OK;
}

/* Allocate from the upstream through `allocate`, then tell the listeners. */
static gmr_status acquire(gmr_chunk_listener_adaptor *a, gmr__forward_allocate_fn *allocate,
                          size_t bytes, size_t alignment, gmr_stream stream, void **out_ptr,
                          gmr_failure *failure) {
  void *p = NULL;
  gmr_status st = allocate(a->base.upstream, bytes, alignment, stream, &p, failure);
  if (st != GMR_OK) {
    *out_ptr = NULL;
    return st;
  }
  gmr__failure_reset(failure); /* a refusal below is this layer's own */
  pthread_mutex_lock(&a->lock);
  if (!gmr__u64_map_reserve(&a->chunks, a->chunks.count + 1) ||
      !gmr__u64_map_reserve(&a->alignments, a->alignments.count + 1)) {
    st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "chunk_listener: host memory");
  } else {
    st = tell_acquired(a, p, bytes, failure);
  }
  if (st == GMR_OK) {
    (void)gmr__u64_map_put(&a->chunks, (uint64_t)(uintptr_t)p, bytes); /* room reserved */
    (void)gmr__u64_map_put(&a->alignments, (uint64_t)(uintptr_t)p, alignment);
    (void)gmr__u64_map_remove(&a->freed, (uint64_t)(uintptr_t)p, NULL);
    a->chunk_bytes += bytes;
    a->acquired_count++;
  } else {
    a->refused_acquire_count++;
    /* Nobody but this call has seen the chunk: give it straight back. */
    GMR_IGNORE_STATUS(gmr__forward_deallocate(a->base.upstream, p, bytes, alignment, stream));
  }
  pthread_mutex_unlock(&a->lock);
  *out_ptr = st == GMR_OK ? p : NULL;
  return st;
}

static gmr_status listener_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                    gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return acquire(as_adaptor(self), gmr__forward_allocate, bytes, alignment, stream, out_ptr,
                 failure);
}

static gmr_status listener_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                              gmr_stream stream, void **out_ptr,
                                              gmr_failure *failure) {
  return acquire(as_adaptor(self), gmr__forward_allocate_capturing, bytes, alignment, stream,
                 out_ptr, failure);
}

static gmr_status listener_deallocate(gmr_resource *self, void *ptr, size_t bytes,
                                      size_t alignment, gmr_stream stream) {
  gmr_chunk_listener_adaptor *a = as_adaptor(self);
  uint64_t key = (uint64_t)(uintptr_t)ptr;
  uint64_t known_bytes = 0, known_alignment = 0;
  pthread_mutex_lock(&a->lock);
  gmr_status st = GMR_OK;
  if (!gmr__u64_map_get(&a->chunks, key, &known_bytes)) {
    st = gmr__u64_map_get(&a->freed, key, NULL) ? GMR_ERR_DOUBLE_FREE : GMR_ERR_UNKNOWN_POINTER;
  } else if (known_bytes != bytes || (gmr__u64_map_get(&a->alignments, key, &known_alignment) &&
                                      known_alignment != alignment)) {
    st = GMR_ERR_FREE_MISMATCH; /* refused here: no listener hears of a bad free */
  } else {
    gmr_failure failure = GMR_FAILURE_INIT;
    gmr__failure_reset(&failure);
    st = tell_releasing(a, ptr, bytes, &failure);
    if (st == GMR_OK) {
      st = gmr__forward_deallocate(a->base.upstream, ptr, bytes, alignment, stream);
      if (st != GMR_OK) {
        /* Still ours: the listeners hear it back. */
        gmr__failure_reset(&failure);
        (void)tell_acquired(a, ptr, bytes, &failure);
      }
    } else {
      a->refused_release_count++;
    }
    if (st == GMR_OK) {
      (void)gmr__u64_map_remove(&a->chunks, key, NULL);
      (void)gmr__u64_map_remove(&a->alignments, key, NULL);
      (void)gmr__u64_map_put(&a->freed, key, 1); /* a lost entry only weakens DOUBLE_FREE */
      a->chunk_bytes -= bytes;
      a->released_count++;
    }
  }
  pthread_mutex_unlock(&a->lock);
  return st;
}

static gmr_status listener_destroy(gmr_resource *self) {
  gmr_chunk_listener_adaptor *a = as_adaptor(self);
  pthread_mutex_lock(&a->lock);
  bool busy = a->chunks.count != 0 || a->listener_count != 0;
  pthread_mutex_unlock(&a->lock);
  if (busy) return GMR_ERR_BUSY;
  gmr__u64_map_clear(&a->chunks);
  gmr__u64_map_clear(&a->alignments);
  gmr__u64_map_clear(&a->freed);
  pthread_mutex_destroy(&a->lock);
  free(a);
  return GMR_OK;
}

static const gmr_resource_vtbl listener_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "chunk_listener_adaptor",
    .allocate = listener_allocate,
    .deallocate = listener_deallocate,
    .destroy = listener_destroy,
    .get_upstream = gmr__adaptor_get_upstream,
    .record_stream = gmr__adaptor_record_stream,
    .allocate_capturing = listener_allocate_capturing,
    .extend = NULL, /* a chunk never grows (see the header) */
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type listener_type = {&listener_vtbl, NULL};

gmr_status gmr_chunk_listener_adaptor_create(gmr_resource *upstream,
                                             gmr_chunk_listener_adaptor **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (gmr__resource_check_vtbl(upstream) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  gmr_chunk_listener_adaptor *a = calloc(1, sizeof *a);
  if (a == NULL) return GMR_ERR_OUT_OF_MEMORY;
  gmr__adaptor_init(&a->base, &listener_vtbl, upstream);
  gmr__resource_type_register(&listener_type);
  a->next_id = 1;
  pthread_mutex_init(&a->lock, NULL);
  *out = a;
  return GMR_OK;
}

static int by_address(const void *x, const void *y) {
  uintptr_t a = (uintptr_t)((const gmr_chunk *)x)->addr;
  uintptr_t b = (uintptr_t)((const gmr_chunk *)y)->addr;
  return a < b ? -1 : a > b;
}

/* The live chunks in address order, in a new array (NULL with *count 0 when
 * there are none; NULL with *count > 0 when host memory ran out).
 * Pre: lock held. */
static gmr_chunk *sorted_chunks(gmr_chunk_listener_adaptor *a, size_t *count) {
  *count = a->chunks.count;
  if (*count == 0) return NULL;
  gmr_chunk *list = malloc(*count * sizeof *list);
  if (list == NULL) return NULL;
  size_t cursor = 0, n = 0;
  uint64_t key = 0, value = 0;
  while (gmr__u64_map_next(&a->chunks, &cursor, &key, &value)) {
    list[n++] = (gmr_chunk){(void *)(uintptr_t)key, (size_t)value};
  }
  qsort(list, n, sizeof *list, by_address);
  return list;
}

static gmr_status chunk_listener_adaptor_add_listener_impl(gmr_chunk_listener_adaptor *a,
                                                           const gmr_chunk_listener *listener,
                                                           uint32_t *out_id, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (a == NULL || listener == NULL || listener->version == 0 || listener->on_acquired == NULL ||
      listener->on_releasing == NULL) {
    return gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                            "chunk_listener: a listener needs a version, on_acquired and "
                            "on_releasing");
  }
  pthread_mutex_lock(&a->lock);
  gmr_status st = GMR_OK;
  size_t count = 0;
  gmr_chunk *chunks = NULL;
  if (a->listener_count == GMR_CHUNK_LISTENER_MAX) {
    st = gmr__failure_set(failure, GMR_ERR_BUSY, "chunk_listener: %d listeners are attached already",
                          GMR_CHUNK_LISTENER_MAX);
  } else {
    chunks = sorted_chunks(a, &count);
    if (count > 0 && chunks == NULL) {
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "chunk_listener: host memory");
    }
  }
  size_t told = 0;
  for (; st == GMR_OK && told < count; ++told) {
    st = listener->on_acquired(listener->ctx, chunks[told].addr, chunks[told].bytes, failure);
  }
  if (st != GMR_OK) {
    gmr_failure ignored = GMR_FAILURE_INIT;
    for (size_t i = told > 0 ? told - 1 : 0; i-- > 0;) {
      gmr__failure_reset(&ignored);
      (void)listener->on_releasing(listener->ctx, chunks[i].addr, chunks[i].bytes, &ignored);
    }
  } else {
    uint32_t id = a->next_id++;
    a->listeners[a->listener_count++] = (attached){id, *listener};
    if (out_id != NULL) *out_id = id;
  }
  pthread_mutex_unlock(&a->lock);
  free(chunks);
  return st;
}

gmr_status gmr_chunk_listener_adaptor_add_listener(gmr_chunk_listener_adaptor *a,
                                                   const gmr_chunk_listener *listener,
                                                   uint32_t *out_id, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  gmr_status st = chunk_listener_adaptor_add_listener_impl(a, listener, out_id, f);
  return gmr__failure_end(failure, f, st);
}

static gmr_status chunk_listener_adaptor_remove_listener_impl(gmr_chunk_listener_adaptor *a,
                                                              uint32_t id, gmr_failure *failure) {
  gmr__failure_reset(failure);
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&a->lock);
  size_t index = a->listener_count;
  for (size_t i = 0; i < a->listener_count; ++i) {
    if (a->listeners[i].id == id) index = i;
  }
  gmr_status st = GMR_OK;
  size_t count = 0;
  gmr_chunk *chunks = NULL;
  if (index == a->listener_count) {
    st = gmr__failure_set(failure, GMR_ERR_INVALID_ARGUMENT,
                          "chunk_listener: no listener has id %u", (unsigned)id);
  } else {
    chunks = sorted_chunks(a, &count);
    if (count > 0 && chunks == NULL) {
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "chunk_listener: host memory");
    }
  }
  const gmr_chunk_listener *l = st == GMR_OK ? &a->listeners[index].listener : NULL;
  size_t told = 0;
  for (; st == GMR_OK && told < count; ++told) {
    st = l->on_releasing(l->ctx, chunks[told].addr, chunks[told].bytes, failure);
  }
  if (st != GMR_OK && l != NULL) {
    gmr_failure ignored = GMR_FAILURE_INIT;
    for (size_t i = 0; i + 1 < told; ++i) {
      gmr__failure_reset(&ignored);
      (void)l->on_acquired(l->ctx, chunks[i].addr, chunks[i].bytes, &ignored);
    }
  } else if (st == GMR_OK) {
    memmove(&a->listeners[index], &a->listeners[index + 1],
            (a->listener_count - index - 1) * sizeof a->listeners[0]);
    a->listener_count--;
  }
  pthread_mutex_unlock(&a->lock);
  free(chunks);
  return st;
}

gmr_status gmr_chunk_listener_adaptor_remove_listener(gmr_chunk_listener_adaptor *a, uint32_t id,
                                                      gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, chunk_listener_adaptor_remove_listener_impl(a, id, f));
}

gmr_status gmr_chunk_listener_adaptor_get_chunks(gmr_chunk_listener_adaptor *a, gmr_chunk *out,
                                                 size_t capacity, size_t *count) {
  if (a == NULL || count == NULL || (out == NULL && capacity > 0)) return GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&a->lock);
  size_t n = 0;
  gmr_chunk *chunks = sorted_chunks(a, &n);
  pthread_mutex_unlock(&a->lock);
  if (n > 0 && chunks == NULL) return GMR_ERR_OUT_OF_MEMORY;
  for (size_t i = 0; i < n && i < capacity; ++i) out[i] = chunks[i];
  *count = n;
  free(chunks);
  return GMR_OK;
}

gmr_status gmr_chunk_listener_adaptor_get_stats(gmr_chunk_listener_adaptor *a,
                                                gmr_chunk_listener_adaptor_stats *out) {
  if (a == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_chunk_listener_adaptor_stats s;
  memset(&s, 0, sizeof s);
  pthread_mutex_lock(&a->lock);
  s.chunk_count = a->chunks.count;
  s.chunk_bytes = a->chunk_bytes;
  s.listener_count = a->listener_count;
  s.acquired_count = a->acquired_count;
  s.released_count = a->released_count;
  s.refused_acquire_count = a->refused_acquire_count;
  s.refused_release_count = a->refused_release_count;
  pthread_mutex_unlock(&a->lock);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}
