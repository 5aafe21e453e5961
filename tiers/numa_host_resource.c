/*
 * tiers/numa_host_resource.c: see gmr/tiers/numa_host_resource.h.
 *
 * The books (util/books.h) hold every live mapping, so a free is checked
 * before munmap sees it: munmap of a foreign range, or of the wrong length,
 * would unmap memory someone else uses, and the counters would drift.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include "gmr/tiers/numa_host_resource.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/resource_type.h"
#include "util/books.h"
#include "util/counters.h"
#include "core/cuda_layer.h"
#include "core/failure.h"
#include "tiers/numa.h"
#include "core/stats.h"
#include "tiers/tiers_util.h"

#define SYSFS_ROOT "/sys"
#define SHARD_COUNT 16
#define RECENT_FREE_COUNT 1024

struct gmr_numa_host_resource {
  gmr_resource base; /* first */
  const gmr__cuda_ops *cuda;
  int numa_node;
  bool pin;
  bool numa_machine;
  size_t page_bytes;
  gmr__books books;
  gmr__byte_counter held;
  _Atomic uint64_t placed_count;
  _Atomic uint64_t unplaced_count;
  _Atomic int last_placement_errno;
};

static const gmr_resource_vtbl numa_host_vtbl;

static size_t pages_of(const gmr_numa_host_resource *r, size_t bytes) {
  return (bytes + r->page_bytes - 1) & ~(r->page_bytes - 1);
}

static gmr_status numa_host_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                                     gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  (void)stream;
  gmr_numa_host_resource *r = (gmr_numa_host_resource *)self;
  if (alignment > r->page_bytes) {
    snprintf(failure->message, sizeof failure->message,
             "numa_host_resource: alignment %zu is above the page size %zu", alignment,
             r->page_bytes);
    return GMR_ERR_UNSUPPORTED;
  }
  size_t len = pages_of(r, bytes);
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    snprintf(failure->message, sizeof failure->message,
             "numa_host_resource: mmap of %zu bytes failed", len);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  /* Bind before the first touch: pinning faults every page in. */
  if (r->numa_node >= 0 && r->numa_machine) {
    int err = gmr__numa_bind(p, len, r->numa_node);
    if (err == 0) {
      atomic_fetch_add_explicit(&r->placed_count, 1, memory_order_relaxed);
    } else {
      atomic_fetch_add_explicit(&r->unplaced_count, 1, memory_order_relaxed);
      atomic_store_explicit(&r->last_placement_errno, err, memory_order_relaxed);
    }
  } else {
    atomic_fetch_add_explicit(&r->placed_count, 1, memory_order_relaxed);
  }
  if (r->pin) {
    cudaError_t err = r->cuda->host_register(p, len);
    if (err != cudaSuccess) {
      munmap(p, len);
      return gmr__cuda_fail(failure, "cudaHostRegister", err);
    }
  }
  gmr__book_entry entry = {bytes, alignment, stream, 0, NULL, 0};
  if (!gmr__books_insert(&r->books, p, &entry)) {
    if (r->pin) (void)r->cuda->host_unregister(p);
    munmap(p, len);
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "numa_host_resource: no host memory for the books of %zu bytes",
                            bytes);
  }
  gmr__counter_add(&r->held, len);
  *out_ptr = p;
  return GMR_OK;
}

static gmr_status numa_host_deallocate(gmr_resource *self, void *ptr, size_t bytes,
                                       size_t alignment, gmr_stream stream) {
  gmr_numa_host_resource *r = (gmr_numa_host_resource *)self;
  gmr__book_entry entry;
  /* Books first: once unmapped, the range may be mapped again by anyone. */
  gmr__book_verdict verdict = gmr__books_take(&r->books, ptr, bytes, alignment, NULL, &entry);
  if (verdict != GMR__BOOK_OK) return gmr__book_verdict_status(verdict);
  size_t len = pages_of(r, entry.bytes);
  if (r->pin) {
    /* The pages go away now: no queued copy on `stream` may still read them. */
    cudaError_t err = r->cuda->stream_synchronize(stream);
    if (err == cudaSuccess) err = r->cuda->host_unregister(ptr);
    if (err != cudaSuccess) {
      (void)gmr__books_restore(&r->books, ptr, &entry); /* see books.h for its one failure */
      return gmr__status_from_cuda(err);
    }
  }
  gmr__counter_sub(&r->held, len);
  munmap(ptr, len);
  return GMR_OK;
}

static gmr_status numa_host_destroy(gmr_resource *self) {
  gmr_numa_host_resource *r = (gmr_numa_host_resource *)self;
  if (atomic_load(&r->held.live_count) != 0) return GMR_ERR_BUSY;
  gmr__books_deinit(&r->books);
  free(r);
  return GMR_OK;
}

static gmr_status numa_host_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  const gmr_numa_host_resource *r = (const gmr_numa_host_resource *)self;
  gmr__counter_footprint(&r->held, out);
  return GMR_OK;
}

static const gmr_resource_vtbl numa_host_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "numa_host_resource",
    .allocate = numa_host_allocate,
    .deallocate = numa_host_deallocate,
    .destroy = numa_host_destroy,
    .get_footprint = numa_host_get_footprint,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type numa_host_type = {&numa_host_vtbl, NULL};

gmr_status gmr_numa_host_resource_get_node_count(int *out_count, int *out_max_node) {
  int count = 1, max = 0;
  gmr__numa_online(SYSFS_ROOT, &count, &max);
  if (out_count != NULL) *out_count = count;
  if (out_max_node != NULL) *out_max_node = max;
  return GMR_OK;
}

size_t gmr_numa_host_resource_get_node_memory_bytes(int node) {
  return node < 0 ? 0 : gmr__numa_node_memory_bytes(SYSFS_ROOT, node);
}

gmr_status gmr_numa_host_resource_create(const gmr_numa_host_resource_config *config,
                                         gmr_numa_host_resource **out) {
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  *out = NULL;
  gmr_numa_host_resource_config cfg = GMR_NUMA_HOST_RESOURCE_CONFIG_DEFAULT;
  if (config != NULL) cfg = *config;
  int count = 1, max = 0;
  gmr__numa_online(SYSFS_ROOT, &count, &max);
  if (cfg.numa_node < -1 || cfg.numa_node > max) return GMR_ERR_INVALID_ARGUMENT;
  if (cfg.numa_node >= 0 && count > 1) {
    char path[128];
    snprintf(path, sizeof path, SYSFS_ROOT "/devices/system/node/node%d", cfg.numa_node);
    if (access(path, F_OK) != 0) return GMR_ERR_INVALID_ARGUMENT; /* a hole in the list */
  }
  gmr_numa_host_resource *r = calloc(1, sizeof *r);
  if (r == NULL) return GMR_ERR_OUT_OF_MEMORY;
  if (!gmr__books_init(&r->books, SHARD_COUNT, RECENT_FREE_COUNT)) {
    free(r);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  r->base.vtbl = &numa_host_vtbl;
  gmr__resource_type_register(&numa_host_type);
  r->cuda = gmr__cuda();
  r->numa_node = cfg.numa_node;
  r->pin = cfg.pin;
  r->numa_machine = count > 1;
  long page = sysconf(_SC_PAGESIZE);
  r->page_bytes = page > 0 ? (size_t)page : 4096u;
  *out = r;
  return GMR_OK;
}

gmr_status gmr_numa_host_resource_get_stats(const gmr_numa_host_resource *r,
                                            gmr_numa_host_resource_stats *out) {
  if (r == NULL || !gmr__stats_header_ok(out)) return GMR_ERR_INVALID_ARGUMENT;
  gmr_numa_host_resource_stats s;
  memset(&s, 0, sizeof s);
  s.numa_node = r->numa_node;
  s.numa_machine = r->numa_machine;
  s.held_bytes = atomic_load_explicit(&r->held.current_bytes, memory_order_relaxed);
  s.peak_held_bytes = atomic_load_explicit(&r->held.peak_bytes, memory_order_relaxed);
  s.live_count = atomic_load_explicit(&r->held.live_count, memory_order_relaxed);
  s.placed_count = atomic_load_explicit(&r->placed_count, memory_order_relaxed);
  s.unplaced_count = atomic_load_explicit(&r->unplaced_count, memory_order_relaxed);
  s.last_placement_errno = atomic_load_explicit(&r->last_placement_errno, memory_order_relaxed);
  gmr__stats_copy_out(out, &s, sizeof s);
  return GMR_OK;
}
