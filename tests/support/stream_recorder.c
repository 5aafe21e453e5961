/*
 * tests/support/stream_recorder.c: see stream_recorder.h.
 */
#include "tests/support/stream_recorder.h"

#include <pthread.h>
#include <stdlib.h>

#define KEPT 64

struct gmr_stream_recorder {
  gmr_resource base; /* first */
  gmr_resource *upstream;
  pthread_mutex_t mutex;
  size_t count[3];
  gmr_stream streams[3][KEPT];
};

static void note(gmr_stream_recorder *r, gmr_stream_recorder_call kind, gmr_stream stream) {
  pthread_mutex_lock(&r->mutex);
  if (r->count[kind] < KEPT) r->streams[kind][r->count[kind]] = stream;
  r->count[kind]++;
  pthread_mutex_unlock(&r->mutex);
}

static gmr_status rec_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                               gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_stream_recorder *r = (gmr_stream_recorder *)self;
  note(r, GMR_STREAM_RECORDER_ALLOCATE, stream);
  return gmr_resource_allocate_ex(r->upstream, bytes, alignment, stream, out_ptr, failure);
}

static gmr_status rec_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                         gmr_stream stream, void **out_ptr,
                                         gmr_failure *failure) {
  gmr_stream_recorder *r = (gmr_stream_recorder *)self;
  note(r, GMR_STREAM_RECORDER_ALLOCATE_CAPTURING, stream);
  return gmr_resource_allocate_ex(r->upstream, bytes, alignment, stream, out_ptr, failure);
}

static gmr_status rec_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                 gmr_stream stream) {
  gmr_stream_recorder *r = (gmr_stream_recorder *)self;
  note(r, GMR_STREAM_RECORDER_DEALLOCATE, stream);
  return gmr_resource_deallocate(r->upstream, ptr, bytes, alignment, stream);
}

static gmr_status rec_destroy(gmr_resource *self) {
  gmr_stream_recorder *r = (gmr_stream_recorder *)self;
  pthread_mutex_destroy(&r->mutex);
  free(r);
  return GMR_OK;
}

static gmr_resource *rec_get_upstream(const gmr_resource *self) {
  return ((const gmr_stream_recorder *)self)->upstream;
}

static const gmr_resource_vtbl recorder_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "stream_recorder",
    .allocate = rec_allocate,
    .deallocate = rec_deallocate,
    .destroy = rec_destroy,
    .get_upstream = rec_get_upstream,
    .allocate_capturing = rec_allocate_capturing,
};

gmr_stream_recorder *gmr_stream_recorder_create(gmr_resource *upstream) {
  gmr_stream_recorder *r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  if (pthread_mutex_init(&r->mutex, NULL) != 0) {
    free(r);
    return NULL;
  }
  r->base.vtbl = &recorder_vtbl;
  r->upstream = upstream;
  return r;
}

gmr_resource *gmr_stream_recorder_as_resource(gmr_stream_recorder *r) { return &r->base; }

size_t gmr_stream_recorder_count(gmr_stream_recorder *r, gmr_stream_recorder_call kind) {
  pthread_mutex_lock(&r->mutex);
  size_t n = r->count[kind];
  pthread_mutex_unlock(&r->mutex);
  return n;
}

gmr_stream gmr_stream_recorder_stream(gmr_stream_recorder *r, gmr_stream_recorder_call kind,
                                      size_t index) {
  pthread_mutex_lock(&r->mutex);
  gmr_stream s = index < r->count[kind] && index < KEPT ? r->streams[kind][index] : NULL;
  pthread_mutex_unlock(&r->mutex);
  return s;
}
