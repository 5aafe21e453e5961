/*
 * tests/support/extend_leaf.c: see extend_leaf.h.
 */
#include "tests/support/extend_leaf.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct live_entry {
  uintptr_t ptr;
  size_t bytes; /* rounded to 256 */
} live_entry;

struct gmr_extend_leaf {
  gmr_resource base; /* first */
  pthread_mutex_t mutex;
  char *buffer;
  size_t capacity;
  size_t used; /* the bump: bytes carved from the start */
  live_entry *live;
  size_t live_count;
  size_t max_live_count;
  gmr_status refuse; /* GMR_OK: extend when possible */
  unsigned long allocate_count;
  unsigned long extend_count;
};

static size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* Index of `ptr` in the books, or live_count. Mutex held. */
static size_t find(const gmr_extend_leaf *l, const void *ptr) {
  size_t i = 0;
  while (i < l->live_count && l->live[i].ptr != (uintptr_t)ptr) ++i;
  return i;
}

static gmr_status leaf_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  (void)stream;
  (void)failure;
  gmr_extend_leaf *l = (gmr_extend_leaf *)self;
  if (alignment > 256) return GMR_ERR_UNSUPPORTED;
  size_t rounded = round_up(bytes);
  pthread_mutex_lock(&l->mutex);
  gmr_status st = GMR_ERR_OUT_OF_MEMORY;
  if (l->used + rounded <= l->capacity && l->live_count < l->max_live_count) {
    *out_ptr = l->buffer + l->used;
    l->live[l->live_count++] = (live_entry){(uintptr_t)*out_ptr, rounded};
    l->used += rounded;
    l->allocate_count++;
    st = GMR_OK;
  }
  pthread_mutex_unlock(&l->mutex);
  return st;
}

static gmr_status leaf_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  (void)alignment;
  (void)stream;
  gmr_extend_leaf *l = (gmr_extend_leaf *)self;
  pthread_mutex_lock(&l->mutex);
  size_t i = find(l, ptr);
  gmr_status st = GMR_OK;
  if (i == l->live_count) {
    st = GMR_ERR_UNKNOWN_POINTER;
  } else if (l->live[i].bytes != round_up(bytes)) {
    st = GMR_ERR_FREE_MISMATCH;
  } else {
    if ((char *)ptr + l->live[i].bytes == l->buffer + l->used) {
      l->used = (size_t)((char *)ptr - l->buffer); /* the top: reusable */
    }
    l->live[i] = l->live[--l->live_count];
  }
  pthread_mutex_unlock(&l->mutex);
  return st;
}

static gmr_status leaf_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                              size_t alignment, gmr_stream stream, gmr_failure *failure) {
  (void)alignment;
  (void)stream;
  (void)failure;
  gmr_extend_leaf *l = (gmr_extend_leaf *)self;
  pthread_mutex_lock(&l->mutex);
  size_t i = find(l, ptr);
  size_t grown = round_up(new_bytes);
  gmr_status st = GMR_OK;
  if (i == l->live_count) {
    st = GMR_ERR_UNKNOWN_POINTER;
  } else if (l->live[i].bytes != round_up(bytes)) {
    st = GMR_ERR_FREE_MISMATCH;
  } else if (l->refuse != GMR_OK) {
    st = l->refuse;
  } else if ((char *)ptr + l->live[i].bytes != l->buffer + l->used) {
    st = GMR_ERR_UNSUPPORTED; /* carved after it */
  } else if (l->used + (grown - l->live[i].bytes) > l->capacity) {
    st = GMR_ERR_OUT_OF_MEMORY;
  } else {
    l->used += grown - l->live[i].bytes;
    l->live[i].bytes = grown;
    l->extend_count++;
  }
  pthread_mutex_unlock(&l->mutex);
  return st;
}

static gmr_status leaf_destroy(gmr_resource *self) {
  gmr_extend_leaf *l = (gmr_extend_leaf *)self;
  if (l->live_count != 0) return GMR_ERR_BUSY;
  pthread_mutex_destroy(&l->mutex);
  free(l->live);
  free(l->buffer);
  free(l);
  return GMR_OK;
}

static const gmr_resource_vtbl leaf_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "extend_leaf",
    .allocate = leaf_allocate,
    .deallocate = leaf_deallocate,
    .destroy = leaf_destroy,
    .extend = leaf_extend,
};

gmr_extend_leaf *gmr_extend_leaf_create(size_t capacity_bytes, size_t max_live_count) {
  gmr_extend_leaf *l = calloc(1, sizeof *l);
  if (l == NULL) return NULL;
  l->capacity = round_up(capacity_bytes);
  l->buffer = aligned_alloc(256, l->capacity);
  l->live = calloc(max_live_count, sizeof *l->live);
  if (l->buffer == NULL || l->live == NULL || pthread_mutex_init(&l->mutex, NULL) != 0) {
    free(l->live);
    free(l->buffer);
    free(l);
    return NULL;
  }
  l->max_live_count = max_live_count;
  l->base.vtbl = &leaf_vtbl;
  return l;
}

gmr_resource *gmr_extend_leaf_as_resource(gmr_extend_leaf *leaf) { return &leaf->base; }

void gmr_extend_leaf_refuse_extend(gmr_extend_leaf *leaf, gmr_status status) {
  pthread_mutex_lock(&leaf->mutex);
  leaf->refuse = status;
  pthread_mutex_unlock(&leaf->mutex);
}

uintptr_t gmr_extend_leaf_base(const gmr_extend_leaf *leaf) { return (uintptr_t)leaf->buffer; }

unsigned long gmr_extend_leaf_allocate_count(const gmr_extend_leaf *leaf) {
  gmr_extend_leaf *l = (gmr_extend_leaf *)leaf;
  pthread_mutex_lock(&l->mutex);
  unsigned long n = l->allocate_count;
  pthread_mutex_unlock(&l->mutex);
  return n;
}

unsigned long gmr_extend_leaf_extend_count(const gmr_extend_leaf *leaf) {
  gmr_extend_leaf *l = (gmr_extend_leaf *)leaf;
  pthread_mutex_lock(&l->mutex);
  unsigned long n = l->extend_count;
  pthread_mutex_unlock(&l->mutex);
  return n;
}

size_t gmr_extend_leaf_live_count(const gmr_extend_leaf *leaf) {
  gmr_extend_leaf *l = (gmr_extend_leaf *)leaf;
  pthread_mutex_lock(&l->mutex);
  size_t n = l->live_count;
  pthread_mutex_unlock(&l->mutex);
  return n;
}

size_t gmr_extend_leaf_size_of(const gmr_extend_leaf *leaf, const void *ptr) {
  gmr_extend_leaf *l = (gmr_extend_leaf *)leaf;
  pthread_mutex_lock(&l->mutex);
  size_t i = find(l, ptr);
  size_t bytes = i < l->live_count ? l->live[i].bytes : 0;
  pthread_mutex_unlock(&l->mutex);
  return bytes;
}
