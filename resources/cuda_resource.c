/*
 * resources/cuda_resource.c: the leaf resource over the CUDA runtime's four
 * allocation kinds. See gmr/cuda_resource.h.
 *
 * Books (util/books.h) hold every live allocation, so a free is checked
 * before CUDA sees it and the counters come from the books, not from the
 * caller. Streams given to record_stream hang off the allocation's entry
 * (`extra`), and are waited for when an async allocation is freed.
 */
#include "gmr/cuda_resource.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/resource_type.h"
#include "util/books.h"
#include "util/counters.h"
#include "core/cuda_layer.h"
#include "stream_ordered/event_cache.h"
#include "core/failure.h"

#define SHARD_COUNT 16
#define RECENT_FREE_COUNT 1024
/* Events kept for the waits of record_stream: enough for the frees of a few
 * threads at once; more are created and destroyed as needed. */
#define EVENT_CACHE_COUNT 8

/* The streams given to record_stream for one allocation. */
typedef struct recorded_streams {
  size_t count;
  size_t capacity;
  gmr_stream streams[];
} recorded_streams;

struct gmr_cuda_resource {
  gmr_resource base; /* first: the resource is usable as a gmr_resource */
  const gmr__cuda_ops *cuda;
  gmr_cuda_kind kind;
  int device;
  cudaMemPool_t pool; /* async only */
  gmr__books books;
  gmr__byte_counter held;
  pthread_mutex_t events_mutex;
  gmr__event_cache events; /* under events_mutex */
  cudaStream_t side_stream; /* async: capture-time allocations; under events_mutex */
};

static const char *alloc_call_name(gmr_cuda_kind kind) {
  switch (kind) {
    case GMR_CUDA_KIND_ASYNC:
      return "cudaMallocFromPoolAsync";
    case GMR_CUDA_KIND_MANAGED:
      return "cudaMallocManaged";
    case GMR_CUDA_KIND_PINNED:
      return "cudaHostAlloc";
    default:
      return "cudaMalloc";
  }
}

/* Release memory of this resource's kind (the caller made the device current). */
static cudaError_t release(gmr_cuda_resource *r, void *ptr, gmr_stream stream) {
  switch (r->kind) {
    case GMR_CUDA_KIND_ASYNC:
      return r->cuda->free_async(ptr, (cudaStream_t)stream);
    case GMR_CUDA_KIND_PINNED:
      return r->cuda->free_host(ptr);
    default:
      return r->cuda->free(ptr);
  }
}

/* The CUDA call of the kind, then the books; the checks are the caller's. */
static gmr_status allocate_now(gmr_cuda_resource *r, size_t bytes, size_t alignment,
                               gmr_stream stream, bool relaxed_already, void **out_ptr,
                               gmr_failure *failure) {
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(r->cuda, r->device, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  void *ptr = NULL;
  /* cudaMalloc, cudaMallocManaged and cudaHostAlloc are potentially unsafe
   * calls: in global mode they would break a capture another stream (or
   * thread) is making. They enqueue nothing, so relaxed mode is right for
   * them whoever captures (the stream-ordered async kind needs no switch). */
  enum cudaStreamCaptureMode saved_mode = cudaStreamCaptureModeGlobal;
  bool relaxed = r->kind != GMR_CUDA_KIND_ASYNC && !relaxed_already;
  if (relaxed) err = gmr__cuda_capture_relaxed_enter(r->cuda, &saved_mode);
  if (err != cudaSuccess) {
    gmr__cuda_device_leave(r->cuda, saved);
    return gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
  }
  switch (r->kind) {
    case GMR_CUDA_KIND_DEVICE:
      err = r->cuda->malloc(&ptr, bytes);
      break;
    case GMR_CUDA_KIND_ASYNC:
      err = r->cuda->malloc_from_pool_async(&ptr, bytes, r->pool, (cudaStream_t)stream);
      break;
    case GMR_CUDA_KIND_MANAGED:
      err = r->cuda->malloc_managed(&ptr, bytes);
      break;
    case GMR_CUDA_KIND_PINNED:
      err = r->cuda->host_alloc(&ptr, bytes);
      break;
  }
  if (relaxed) gmr__cuda_capture_relaxed_leave(r->cuda, saved_mode);
  gmr_status st = GMR_OK;
  if (err != cudaSuccess) {
    st = gmr__cuda_fail(failure, alloc_call_name(r->kind), err);
  } else {
    gmr__book_entry entry = {bytes, alignment, stream, 0, NULL, 0};
    if (!gmr__books_insert(&r->books, ptr, &entry)) {
      (void)release(r, ptr, stream); /* freshly allocated: nothing else uses it */
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "cuda_resource: no host memory for the books of %zu bytes", bytes);
    }
  }
  gmr__cuda_device_leave(r->cuda, saved);
  if (st != GMR_OK) return st;
  gmr__counter_add(&r->held, bytes);
  *out_ptr = ptr;
  return GMR_OK;
}

static gmr_status check_alignment(size_t alignment, gmr_failure *failure) {
  if (alignment <= GMR_DEFAULT_ALIGNMENT) return GMR_OK;
  return gmr__failure_set(failure, GMR_ERR_UNSUPPORTED,
                          "cuda_resource guarantees 256-byte alignment; %zu was asked", alignment);
}

static gmr_status cuda_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_cuda_resource *r = (gmr_cuda_resource *)self;
  gmr_status st = check_alignment(alignment, failure);
  if (st != GMR_OK) return st;
  /* cudaMalloc-family calls during capture would invalidate it: refuse first.
   * Stream-ordered pool allocations are legal in a capture. */
  if (r->kind != GMR_CUDA_KIND_ASYNC && gmr__cuda_stream_is_capturing(r->cuda, stream)) {
    return gmr__failure_set(
        failure, GMR_ERR_CAPTURE_UNSAFE,
        "%s is not allowed while the stream is capturing a CUDA graph; "
        "allocate before capture, call gmr_resource_allocate_capturing, or use a "
        "graph_arena_resource",
        alloc_call_name(r->kind));
  }
  return allocate_now(r, bytes, alignment, stream, false, out_ptr, failure);
}

static gmr_status cuda_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream);

/* async during a capture: cudaMallocFromPoolAsync on the capturing stream
 * would add a memory node to the graph (memory the graph owns). Instead the
 * block comes from the pool on the resource's own non-blocking stream, which
 * is then synchronised, so it is ready for any stream and the graph only
 * keeps its address; it is freed later like any other (cudaFreeAsync on the
 * freeing stream). The caller switched the thread to relaxed capture mode. */
static gmr_status allocate_async_outside(gmr_cuda_resource *r, size_t bytes, size_t alignment,
                                         gmr_stream stream, void **out_ptr,
                                         gmr_failure *failure) {
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(r->cuda, r->device, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaSetDevice", err);
  pthread_mutex_lock(&r->events_mutex);
  if (r->side_stream == NULL) err = r->cuda->stream_create(&r->side_stream);
  cudaStream_t side = r->side_stream;
  pthread_mutex_unlock(&r->events_mutex);
  gmr__cuda_device_leave(r->cuda, saved);
  if (err != cudaSuccess) {
    return gmr__cuda_fail(failure, "cudaStreamCreate (the allocation stream for captures)", err);
  }
  void *ptr = NULL;
  gmr_status st = allocate_now(r, bytes, alignment, (gmr_stream)side, true, &ptr, failure);
  if (st != GMR_OK) return st;
  err = r->cuda->stream_synchronize(side);
  if (err != cudaSuccess) {
    /* Give the block back as any free would (books, device, counters). */
    (void)cuda_deallocate(&r->base, ptr, bytes, alignment, (gmr_stream)side);
    return gmr__cuda_fail(failure, "cudaStreamSynchronize (the allocation stream for captures)",
                          err);
  }
  (void)stream; /* the books keep the side stream; frees name their own */
  *out_ptr = ptr;
  return GMR_OK;
}

/* cudaMalloc / cudaMallocManaged / cudaHostAlloc with the calling thread in
 * relaxed capture mode (PyTorch's cudaMallocMaybeCapturing): a capture in
 * progress stays valid and the graph keeps the address. The mode is restored
 * on every path. */
static gmr_status cuda_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                          gmr_stream stream, void **out_ptr,
                                          gmr_failure *failure) {
  gmr_cuda_resource *r = (gmr_cuda_resource *)self;
  gmr_status st = check_alignment(alignment, failure);
  if (st != GMR_OK) return st;
  enum cudaStreamCaptureMode saved;
  cudaError_t err = gmr__cuda_capture_relaxed_enter(r->cuda, &saved);
  if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaThreadExchangeStreamCaptureMode", err);
  st = r->kind == GMR_CUDA_KIND_ASYNC
           ? allocate_async_outside(r, bytes, alignment, stream, out_ptr, failure)
           : allocate_now(r, bytes, alignment, stream, true, out_ptr, failure);
  gmr__cuda_capture_relaxed_leave(r->cuda, saved);
  return st;
}

/* ---- record_stream ------------------------------------------------------ */

static gmr_status record_visit(gmr__book_entry *entry, void *ctx) {
  gmr_stream stream = *(gmr_stream *)ctx;
  recorded_streams *rs = entry->extra;
  for (size_t i = 0; rs != NULL && i < rs->count; ++i) {
    if (rs->streams[i] == stream) return GMR_OK;
  }
  if (rs == NULL || rs->count == rs->capacity) {
    size_t capacity = rs == NULL ? 2 : rs->capacity * 2;
    recorded_streams *grown = realloc(rs, sizeof *grown + capacity * sizeof(gmr_stream));
    if (grown == NULL) return GMR_ERR_OUT_OF_MEMORY;
    if (rs == NULL) grown->count = 0;
    grown->capacity = capacity;
    rs = grown;
    entry->extra = rs;
  }
  rs->streams[rs->count++] = stream;
  return GMR_OK;
}

static gmr_status live_visit(gmr__book_entry *entry, void *ctx) {
  (void)entry;
  (void)ctx;
  return GMR_OK;
}

static gmr_status cuda_record_stream(gmr_resource *self, void *ptr, gmr_stream stream) {
  gmr_cuda_resource *r = (gmr_cuda_resource *)self;
  /* cudaFree and cudaFreeHost synchronise the device before they release, so
   * every stream's earlier work is done by then: nothing to remember. */
  if (r->kind != GMR_CUDA_KIND_ASYNC) return gmr__books_visit(&r->books, ptr, live_visit, NULL);
  return gmr__books_visit(&r->books, ptr, record_visit, &stream);
}

static cudaError_t take_event(gmr_cuda_resource *r, cudaEvent_t *event) {
  pthread_mutex_lock(&r->events_mutex);
  cudaError_t err = gmr__event_cache_take(&r->events, r->cuda, event);
  pthread_mutex_unlock(&r->events_mutex);
  return err;
}

/* An event may be recorded again as soon as a wait on it is enqueued: the
 * wait keeps the record it saw (cudaStreamWaitEvent). */
static void give_event(gmr_cuda_resource *r, cudaEvent_t event) {
  pthread_mutex_lock(&r->events_mutex);
  (void)gmr__event_cache_give(&r->events, r->cuda, event);
  pthread_mutex_unlock(&r->events_mutex);
}

/* Make `stream` wait for the work each recorded stream has queued so far. */
static cudaError_t wait_for_recorded(gmr_cuda_resource *r, const recorded_streams *rs,
                                     gmr_stream stream) {
  for (size_t i = 0; rs != NULL && i < rs->count; ++i) {
    if (rs->streams[i] == stream) continue;
    cudaEvent_t event = NULL;
    cudaError_t err = take_event(r, &event);
    if (err != cudaSuccess) return err;
    err = r->cuda->event_record(event, (cudaStream_t)rs->streams[i]);
    if (err == cudaSuccess) err = r->cuda->stream_wait_event((cudaStream_t)stream, event);
    give_event(r, event);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

/* ---- deallocate, destroy ------------------------------------------------ */

static gmr_status cuda_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                  gmr_stream stream) {
  gmr_cuda_resource *r = (gmr_cuda_resource *)self;
  if (r->kind != GMR_CUDA_KIND_ASYNC && gmr__cuda_stream_is_capturing(r->cuda, stream)) {
    return GMR_ERR_CAPTURE_UNSAFE; /* nothing freed: free it after the capture */
  }
  gmr__book_entry entry;
  gmr__book_verdict verdict = gmr__books_take(&r->books, ptr, bytes, alignment, NULL, &entry);
  if (verdict != GMR__BOOK_OK) return gmr__book_verdict_status(verdict);
  int saved = -1;
  cudaError_t err = gmr__cuda_device_enter(r->cuda, r->device, &saved);
  if (err == cudaSuccess) {
    err = wait_for_recorded(r, entry.extra, stream);
    if (err == cudaSuccess) err = release(r, ptr, stream);
    gmr__cuda_device_leave(r->cuda, saved);
  }
  if (err != cudaSuccess) {
    /* Nothing was released: the allocation is live again, as it was (the
     * counters never moved; see gmr__books_restore for the one way the
     * record itself could be lost). */
    (void)gmr__books_restore(&r->books, ptr, &entry);
    return gmr__status_from_cuda(err);
  }
  free(entry.extra);
  gmr__counter_sub(&r->held, entry.bytes);
  return GMR_OK;
}

static void drop_events(gmr_cuda_resource *r) {
  /* At destroy: an event that cannot be destroyed is left behind. */
  while (gmr__event_cache_clear(&r->events, r->cuda) != cudaSuccess) r->events.count--;
}

static void free_resource(gmr_cuda_resource *r) {
  gmr__books_deinit(&r->books);
  free(r->events.events); /* NULL after drop_events emptied it */
  pthread_mutex_destroy(&r->events_mutex);
  free(r);
}

static gmr_status cuda_destroy(gmr_resource *self) {
  gmr_cuda_resource *r = (gmr_cuda_resource *)self;
  if (atomic_load(&r->held.live_count) != 0) return GMR_ERR_BUSY;
  if (r->pool != NULL || r->events.count > 0 || r->side_stream != NULL) {
    int saved = -1;
    cudaError_t err = gmr__cuda_device_enter(r->cuda, r->device, &saved);
    if (err != cudaSuccess) return gmr__status_from_cuda(err);
    if (r->pool != NULL) err = r->cuda->mem_pool_destroy(r->pool);
    if (err == cudaSuccess && r->side_stream != NULL) {
      (void)r->cuda->stream_destroy(r->side_stream); /* idle: every use was synchronised */
      r->side_stream = NULL;
    }
    if (err == cudaSuccess) drop_events(r);
    gmr__cuda_device_leave(r->cuda, saved);
    if (err != cudaSuccess) return gmr__status_from_cuda(err); /* nothing destroyed */
  }
  free_resource(r);
  return GMR_OK;
}

static gmr_status cuda_trim(gmr_resource *self, size_t *released_bytes) {
  gmr_cuda_resource *r = (gmr_cuda_resource *)self;
  *released_bytes = 0;
  if (r->kind != GMR_CUDA_KIND_ASYNC) return GMR_OK; /* nothing cached */
  uint64_t before = 0, after = 0;
  cudaError_t err =
      r->cuda->mem_pool_get_attribute(r->pool, cudaMemPoolAttrReservedMemCurrent, &before);
  if (err == cudaSuccess) err = r->cuda->mem_pool_trim_to(r->pool, 0);
  if (err == cudaSuccess) {
    err = r->cuda->mem_pool_get_attribute(r->pool, cudaMemPoolAttrReservedMemCurrent, &after);
  }
  if (err != cudaSuccess) return gmr__status_from_cuda(err);
  *released_bytes = before > after ? (size_t)(before - after) : 0;
  return GMR_OK;
}

static gmr_status cuda_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_cuda_resource *r = (const gmr_cuda_resource *)self;
  if (r->kind == GMR_CUDA_KIND_ASYNC) {
    /* The pool's reserve is what the device gave it, including cached blocks. */
    uint64_t current = 0, high = 0;
    cudaError_t err =
        r->cuda->mem_pool_get_attribute(r->pool, cudaMemPoolAttrReservedMemCurrent, &current);
    if (err == cudaSuccess) {
      err = r->cuda->mem_pool_get_attribute(r->pool, cudaMemPoolAttrReservedMemHigh, &high);
    }
    if (err != cudaSuccess) return gmr__status_from_cuda(err);
    out->held_bytes = (size_t)current;
    out->peak_held_bytes = (size_t)high;
    return GMR_OK;
  }
  gmr__counter_footprint(&r->held, out);
  return GMR_OK;
}

/* device, managed, pinned: everything held is live (nothing cached). async:
 * its free memory sits inside the cudaMemPool_t, and reading it takes CUDA
 * calls, which get_memory_info promises not to make. */
static gmr_status cuda_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  const gmr_cuda_resource *r = (const gmr_cuda_resource *)self;
  if (r->kind == GMR_CUDA_KIND_ASYNC) return GMR_ERR_UNSUPPORTED;
  out->held_bytes = atomic_load(&r->held.current_bytes);
  out->live_bytes = out->held_bytes;
  return GMR_OK;
}

static const gmr_resource_vtbl cuda_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "cuda_resource",
    .allocate = cuda_allocate,
    .deallocate = cuda_deallocate,
    .destroy = cuda_destroy,
    .get_upstream = NULL,
    .trim = cuda_trim,
    .get_footprint = cuda_get_footprint,
    .get_memory_info = cuda_get_memory_info,
    .record_stream = cuda_record_stream,
    .allocate_capturing = cuda_allocate_capturing,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type cuda_type = {&cuda_vtbl, NULL};

/* ---- create ------------------------------------------------------------- */

/* Fill the record of a failed create (may be NULL) and return `status`. */
static gmr_status create_failed(gmr_failure *failure, gmr_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static gmr_status create_failed(gmr_failure *failure, gmr_status status, const char *fmt, ...) {
  if (failure == NULL) return status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(failure->message, sizeof failure->message, fmt, ap);
  va_end(ap);
  failure->status = status;
  return status;
}

static gmr_status create_cuda_failed(gmr_failure *failure, const char *call, cudaError_t err) {
  gmr_status st = gmr__cuda_fail(failure, call, err);
  if (failure != NULL) failure->status = st;
  return st;
}

/* Create the pool an async resource allocates from, keeping what it reserves
 * up to the release threshold (the device is current). */
static gmr_status create_pool(gmr_cuda_resource *r, uint64_t release_threshold_bytes,
                              gmr_failure *failure) {
  int supported = 0;
  cudaError_t err =
      r->cuda->device_get_attribute(&supported, cudaDevAttrMemoryPoolsSupported, r->device);
  if (err != cudaSuccess) return create_cuda_failed(failure, "cudaDeviceGetAttribute", err);
  if (!supported) {
    return create_failed(failure, GMR_ERR_UNSUPPORTED,
                         "cuda_resource: device %d has no memory pools "
                         "(cudaDevAttrMemoryPoolsSupported is 0): use kind device",
                         r->device);
  }
  err = r->cuda->mem_pool_create(&r->pool, r->device);
  if (err != cudaSuccess) {
    r->pool = NULL;
    gmr_status st = create_cuda_failed(failure, "cudaMemPoolCreate", err);
    if (err != cudaErrorNotSupported) return st;
    if (failure != NULL) failure->status = GMR_ERR_UNSUPPORTED;
    return GMR_ERR_UNSUPPORTED;
  }
  err = r->cuda->mem_pool_set_attribute(r->pool, cudaMemPoolAttrReleaseThreshold,
                                        release_threshold_bytes);
  if (err != cudaSuccess) {
    (void)r->cuda->mem_pool_destroy(r->pool);
    r->pool = NULL;
    return create_cuda_failed(failure, "cudaMemPoolSetAttribute", err);
  }
  return GMR_OK;
}

/* Check the config and find the device; *device is set on GMR_OK. */
static gmr_status resolve_device(const gmr__cuda_ops *cuda, const gmr_cuda_resource_config *cfg,
                                 int *device, gmr_failure *failure) {
  if ((int)cfg->kind < GMR_CUDA_KIND_DEVICE || cfg->kind > GMR_CUDA_KIND_PINNED) {
    return create_failed(failure, GMR_ERR_INVALID_ARGUMENT,
                         "cuda_resource: unknown kind %d: use device (0), async (1), "
                         "managed (2) or pinned (3)",
                         (int)cfg->kind);
  }
  int device_count = 0;
  cudaError_t err = cuda->get_device_count(&device_count);
  if (err != cudaSuccess) return create_cuda_failed(failure, "cudaGetDeviceCount", err);
  *device = cfg->device;
  if (*device == GMR_CURRENT_DEVICE) {
    err = cuda->get_device(device);
    if (err != cudaSuccess) return create_cuda_failed(failure, "cudaGetDevice", err);
  }
  if (*device < 0 || *device >= device_count) {
    return create_failed(failure, GMR_ERR_INVALID_ARGUMENT,
                         "cuda_resource: device %d was asked, but the machine has %d device%s "
                         "(ordinals 0 to %d); set device to one of them or to "
                         "GMR_CURRENT_DEVICE (-1)",
                         *device, device_count, device_count == 1 ? "" : "s", device_count - 1);
  }
  return GMR_OK;
}

static gmr_status cuda_resource_create_ex_impl(const gmr_cuda_resource_config *config,
                                               gmr_cuda_resource **out, gmr_failure *failure) {
  if (failure != NULL) {
    gmr__failure_reset(failure);
    failure->status = GMR_OK;
    failure->bytes = 0;
    failure->alignment = 0;
    failure->stream = NULL;
  }
  if (out == NULL) return create_failed(failure, GMR_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  gmr_cuda_resource_config cfg = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  const gmr__cuda_ops *cuda = gmr__cuda();
  int device = 0;
  gmr_status st = resolve_device(cuda, &cfg, &device, failure);
  if (st != GMR_OK) return st;

  gmr_cuda_resource *r = calloc(1, sizeof *r);
  if (r == NULL) {
    return create_failed(failure, GMR_ERR_OUT_OF_MEMORY, "cuda_resource: no host memory for it");
  }
  r->events = (gmr__event_cache)GMR__EVENT_CACHE_INIT(EVENT_CACHE_COUNT);
  if (!gmr__books_init(&r->books, SHARD_COUNT, RECENT_FREE_COUNT)) {
    free(r);
    return create_failed(failure, GMR_ERR_OUT_OF_MEMORY,
                         "cuda_resource: no host memory for its books");
  }
  pthread_mutex_init(&r->events_mutex, NULL);
  r->base.vtbl = &cuda_vtbl;
  gmr__resource_type_register(&cuda_type);
  r->cuda = cuda;
  r->kind = cfg.kind;
  r->device = device;
  if (cfg.kind == GMR_CUDA_KIND_ASYNC) {
    int saved = -1;
    cudaError_t err = gmr__cuda_device_enter(cuda, device, &saved);
    st = err == cudaSuccess ? create_pool(r, cfg.release_threshold_bytes, failure)
                            : create_cuda_failed(failure, "cudaSetDevice", err);
    if (err == cudaSuccess) gmr__cuda_device_leave(cuda, saved);
    if (st != GMR_OK) {
      free_resource(r);
      return st;
    }
  }
  *out = r;
  return GMR_OK;
}

gmr_status gmr_cuda_resource_create_ex(const gmr_cuda_resource_config *config,
                                       gmr_cuda_resource **out, gmr_failure *failure) {
  gmr_failure local;
  gmr_failure *f = gmr__failure_begin(failure, &local);
  return gmr__failure_end(failure, f, cuda_resource_create_ex_impl(config, out, f));
}

gmr_status gmr_cuda_resource_create(const gmr_cuda_resource_config *config,
                                    gmr_cuda_resource **out) {
  return gmr_cuda_resource_create_ex(config, out, NULL);
}

int gmr_cuda_resource_get_device(const gmr_cuda_resource *r) { return r->device; }

gmr_cuda_kind gmr_cuda_resource_get_kind(const gmr_cuda_resource *r) { return r->kind; }

size_t gmr_cuda_resource_get_live_count(const gmr_cuda_resource *r) {
  return atomic_load(&r->held.live_count);
}

static const char *const kind_names[] = {"device", "async", "managed", "pinned"};

const char *gmr_cuda_kind_name(gmr_cuda_kind kind) {
  if ((int)kind < 0 || (size_t)kind >= sizeof kind_names / sizeof kind_names[0]) return "unknown";
  return kind_names[kind];
}

gmr_status gmr_cuda_kind_from_name(const char *name, gmr_cuda_kind *out) {
  if (name == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; ++i) {
    if (strcmp(name, kind_names[i]) == 0) {
      *out = (gmr_cuda_kind)i;
      return GMR_OK;
    }
  }
  return GMR_ERR_INVALID_ARGUMENT;
}
