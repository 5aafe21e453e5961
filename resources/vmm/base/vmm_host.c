/*
 * resources/vmm/base/vmm_host.c (internal): the host memory of sleep and
 * wake (vmm_host.h): backups, kept backups, the staging ring and the copy
 * stream. The copies themselves are vmm_copy.c's.
 */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MADV_HUGEPAGE, sched_getaffinity */

#include "resources/vmm/base/vmm_host.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/failure.h"
#include "gmr/device.h"

/* Pageable backups this large come from mmap (given back to the system at
 * once when freed), smaller ones from malloc; from HUGE_BYTES they are
 * aligned and advised for transparent huge pages (a page fault then fills
 * 2 MiB, not 4 KiB: sleep writes every byte of a fresh backup). */
#define PAGEABLE_MMAP_BYTES ((size_t)64 << 10)
#define HUGE_BYTES ((size_t)2 << 20)
/* The ring's unit (the smallest chunk a copy cuts, one event each): at
 * most UNIT_BYTES, at least MIN_UNIT_BYTES, at least 16 of them a ring. */
#define UNIT_BYTES ((size_t)2 << 20)
#define MIN_UNIT_BYTES ((size_t)64 << 10)

static atomic_size_t live_pageable;

size_t gmr__vmm_host_live_pageable_bytes(void) {
  return atomic_load_explicit(&live_pageable, memory_order_relaxed);
}

void gmr__vmm_host_init(gmr__vmm_host *h, const gmr__cuda_ops *cuda, const gmr__cuda_vmm_ops *vmm,
                        int device) {
  memset(h, 0, sizeof *h);
  h->cuda = cuda;
  h->device = device;
  gmr__vmm_unreleased_init(&h->unreleased, cuda, vmm);
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  h->kind = GMR_VMM_POOL_HOST_PAGEABLE;
}

uint32_t gmr__vmm_default_copy_threads(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  long n = cpus;
  if (n < 1) n = 1;
  if (n > 16) n = 16;
  return (uint32_t)n;
}

/* ---- pageable memory ---------------------------------------------------------- */

static void *pageable_alloc(size_t bytes) {
  void *p = NULL;
  if (bytes < PAGEABLE_MMAP_BYTES) {
    p = malloc(bytes);
  } else if (bytes < HUGE_BYTES) {
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = NULL;
  } else {
    /* Over-map by a huge page, keep the aligned part. */
    size_t span = bytes + HUGE_BYTES;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw != MAP_FAILED) {
      size_t page = (size_t)sysconf(_SC_PAGESIZE);
      char *aligned = (char *)gmr__align_up((size_t)raw, HUGE_BYTES);
      char *end = aligned + gmr__align_up(bytes, page);
      if (aligned > raw) (void)munmap(raw, (size_t)(aligned - raw));
      if (raw + span > end) (void)munmap(end, (size_t)(raw + span - end));
#ifdef MADV_HUGEPAGE
      (void)madvise(aligned, (size_t)(end - aligned), MADV_HUGEPAGE);
#endif
      p = aligned;
    }
  }
  if (p != NULL) atomic_fetch_add_explicit(&live_pageable, bytes, memory_order_relaxed);
  return p;
}

static void pageable_free(void *p, size_t bytes) {
  if (p == NULL) return;
  if (bytes < PAGEABLE_MMAP_BYTES) {
    free(p);
  } else {
    (void)munmap(p, bytes);
  }
  atomic_fetch_sub_explicit(&live_pageable, bytes, memory_order_relaxed);
}

cudaError_t gmr__vmm_host_free(gmr__vmm_unreleased *u, gmr_vmm_pool_host_kind kind, void *host,
                               size_t bytes) {
  if (host == NULL) return cudaSuccess;
  if (kind == GMR_VMM_POOL_HOST_PINNED) return gmr__vmm_free_pinned_or_keep(u, host, bytes);
  pageable_free(host, bytes);
  return cudaSuccess;
}

/* A new backup; a pinned one gets its slot among `u`'s unreleased first, so
 * that a cudaFreeHost refused later can keep it without host memory. */
static bool backup_alloc(gmr__vmm_unreleased *u, gmr_vmm_pool_host_kind kind, size_t bytes,
                         void **out, cudaError_t *err) {
  *out = NULL;
  *err = cudaSuccess;
  if (kind == GMR_VMM_POOL_HOST_PINNED) {
    if (!gmr__vmm_kept_promise(&u->hosts)) {
      *err = cudaErrorMemoryAllocation;
      return false;
    }
    *err = u->cuda->host_alloc(out, bytes);
    if (*err != cudaSuccess) {
      *out = NULL;
      gmr__vmm_kept_unpromise(&u->hosts);
    }
    return *err == cudaSuccess;
  }
  *out = pageable_alloc(bytes);
  if (*out == NULL) *err = cudaErrorMemoryAllocation;
  return *out != NULL;
}

/* ---- kept backups -------------------------------------------------------------- */

static void kept_count_bytes(gmr__vmm_host *h, gmr_vmm_pool_host_kind kind, size_t bytes,
                             bool add) {
  size_t *n = kind == GMR_VMM_POOL_HOST_PINNED ? &h->kept_pinned_bytes : &h->kept_pageable_bytes;
  *n = add ? *n + bytes : *n - bytes;
}

/* Move the pinned promise of one backup from `from` to `to`. false: no
 * host memory for the new slot (nothing moved). */
static bool move_promise(gmr__vmm_unreleased *from, gmr__vmm_unreleased *to) {
  if (!gmr__vmm_kept_promise(&to->hosts)) return false;
  gmr__vmm_kept_unpromise(&from->hosts);
  return true;
}

/* Append a kept backup (its pinned promise is in h->unreleased already).
 * false: no host memory for the list. */
static bool kept_add(gmr__vmm_host *h, gmr_vmm_pool_host_kind kind, void *ptr, size_t bytes) {
  if (h->kept_count == h->kept_capacity) {
    size_t n = h->kept_capacity < 16 ? 16 : h->kept_capacity * 2;
    gmr__vmm_kept_backup *grown = realloc(h->kept, n * sizeof *grown);
    if (grown == NULL) return false;
    h->kept = grown;
    h->kept_capacity = n;
  }
  h->kept[h->kept_count++] = (gmr__vmm_kept_backup){ptr, bytes, kind};
  kept_count_bytes(h, kind, bytes, true);
  return true;
}

bool gmr__vmm_backup_take(gmr__vmm_host *h, gmr__vmm_unreleased *u, gmr_vmm_pool_host_kind kind,
                          size_t bytes, void **out, bool *from_kept, cudaError_t *err) {
  *from_kept = false;
  for (size_t i = 0; i < h->kept_count; ++i) {
    gmr__vmm_kept_backup k = h->kept[i];
    if (k.kind != kind || k.bytes != bytes) continue;
    if (kind == GMR_VMM_POOL_HOST_PINNED && !move_promise(&h->unreleased, u)) break;
    h->kept[i] = h->kept[--h->kept_count];
    kept_count_bytes(h, kind, bytes, false);
    *out = k.ptr;
    *from_kept = true;
    *err = cudaSuccess;
    return true;
  }
  return backup_alloc(u, kind, bytes, out, err);
}

void gmr__vmm_backup_untake(gmr__vmm_host *h, gmr__vmm_unreleased *u,
                            gmr_vmm_pool_host_kind kind, void *ptr, size_t bytes) {
  bool moved = kind != GMR_VMM_POOL_HOST_PINNED || move_promise(u, &h->unreleased);
  if (moved && kept_add(h, kind, ptr, bytes)) return;
  /* No host memory to keep it: it goes (the promise where it is). */
  if (moved && kind == GMR_VMM_POOL_HOST_PINNED) (void)move_promise(&h->unreleased, u);
  (void)gmr__vmm_host_free(u, kind, ptr, bytes);
}

cudaError_t gmr__vmm_backup_done(gmr__vmm_host *h, gmr__vmm_unreleased *u,
                                 gmr_vmm_pool_host_kind kind, void *ptr, size_t bytes) {
  if (ptr == NULL) return cudaSuccess;
  if (h->keep_backup) {
    bool moved = kind != GMR_VMM_POOL_HOST_PINNED || move_promise(u, &h->unreleased);
    if (moved && kept_add(h, kind, ptr, bytes)) return cudaSuccess;
    if (moved && kind == GMR_VMM_POOL_HOST_PINNED) (void)move_promise(&h->unreleased, u);
  }
  return gmr__vmm_host_free(u, kind, ptr, bytes);
}

cudaError_t gmr__vmm_host_drop_kept(gmr__vmm_host *h) {
  cudaError_t refused = cudaSuccess;
  while (h->kept_count > 0) {
    gmr__vmm_kept_backup k = h->kept[--h->kept_count];
    kept_count_bytes(h, k.kind, k.bytes, false);
    cudaError_t err = gmr__vmm_host_free(&h->unreleased, k.kind, k.ptr, k.bytes);
    if (refused == cudaSuccess) refused = err;
  }
  return refused;
}

/* ---- the ring and the stream ------------------------------------------------------ */

/* Destroy `count` events (best effort: a refusal leaks an event, nothing
 * the books count). */
static void destroy_events(const gmr__cuda_ops *cuda, cudaEvent_t *events, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (events[i] != NULL) (void)cuda->event_destroy(events[i]);
  }
  free(events);
}

/* Free a ring: its events, then its pinned memory (a refusal keeps it). */
static void free_ring(gmr__vmm_host *h, void *ring, size_t bytes, cudaEvent_t *events,
                      size_t count) {
  if (events != NULL) destroy_events(h->cuda, events, count);
  if (ring != NULL) (void)gmr__vmm_free_pinned_or_keep(&h->unreleased, ring, bytes);
}

static gmr_status ring_fail(gmr_failure *failure, const char *call, cudaError_t err,
                            size_t bytes) {
  gmr_status st = gmr__cuda_fail(failure, call, err);
  if (failure != NULL && st == GMR_ERR_OUT_OF_MEMORY) {
    (void)gmr__failure_set(failure, st,
                           "sleep: %s of the %zu-byte staging ring for pageable backups failed "
                           "(%s); ask for a smaller staging_bytes, or for pinned backups",
                           call, bytes, gmr_cuda_error_name((int)err));
    failure->cuda_error = (int)err;
  }
  return st;
}

/* A new ring of `bytes` with its events into *ring and *events. */
static gmr_status make_ring(gmr__vmm_host *h, size_t bytes, size_t chunk, void **ring,
                            cudaEvent_t **events, gmr_failure *failure) {
  size_t slots = bytes / chunk;
  *ring = NULL;
  *events = calloc(slots, sizeof **events);
  if (*events == NULL || !gmr__vmm_kept_promise(&h->unreleased.hosts)) {
    free(*events);
    *events = NULL;
    return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "sleep: host memory ran out");
  }
  cudaError_t err = h->cuda->host_alloc(ring, bytes);
  if (err != cudaSuccess) {
    *ring = NULL;
    gmr__vmm_kept_unpromise(&h->unreleased.hosts);
    free(*events);
    *events = NULL;
    return ring_fail(failure, "cudaHostAlloc", err, bytes);
  }
  for (size_t i = 0; i < slots; ++i) {
    err = h->cuda->event_create(&(*events)[i]);
    if (err != cudaSuccess) {
      (*events)[i] = NULL;
      free_ring(h, *ring, bytes, *events, slots);
      *ring = NULL;
      *events = NULL;
      return ring_fail(failure, "cudaEventCreateWithFlags", err, bytes);
    }
  }
  return GMR_OK;
}

gmr_status gmr__vmm_host_prepare(gmr__vmm_host *h, gmr_vmm_pool_host_kind kind,
                                 size_t staging_bytes, gmr__vmm_host_made *made,
                                 gmr_failure *failure) {
  memset(made, 0, sizeof *made);
  if (!h->has_stream) {
    cudaError_t err = h->cuda->stream_create(&h->stream);
    if (err != cudaSuccess) return gmr__cuda_fail(failure, "cudaStreamCreateWithFlags", err);
    h->has_stream = true;
    made->stream = true;
  }
  if (kind != GMR_VMM_POOL_HOST_PAGEABLE) return GMR_OK;
  size_t bytes = staging_bytes == 0 ? GMR_VMM_POOL_STAGING_DEFAULT_BYTES : staging_bytes;
  if (bytes < GMR__VMM_MIN_STAGING_BYTES) bytes = GMR__VMM_MIN_STAGING_BYTES;
  size_t chunk = bytes / 16;
  if (chunk > UNIT_BYTES) chunk = UNIT_BYTES;
  chunk = chunk / MIN_UNIT_BYTES * MIN_UNIT_BYTES;
  if (chunk < MIN_UNIT_BYTES) chunk = MIN_UNIT_BYTES;
  bytes = bytes / chunk * chunk;
  if (h->ring != NULL && h->ring_bytes == bytes) return GMR_OK;
  void *ring = NULL;
  cudaEvent_t *events = NULL;
  gmr_status st = make_ring(h, bytes, chunk, &ring, &events, failure);
  if (st != GMR_OK) {
    gmr__vmm_host_settle(h, made, false);
    return st;
  }
  made->old_ring = h->ring;
  made->old_ring_bytes = h->ring_bytes;
  made->old_chunk_bytes = h->chunk_bytes;
  made->old_slot_count = h->slot_count;
  made->old_events = h->events;
  made->ring = true;
  h->ring = ring;
  h->ring_bytes = bytes;
  h->chunk_bytes = chunk;
  h->slot_count = bytes / chunk;
  h->events = events;
  return GMR_OK;
}

void gmr__vmm_host_settle(gmr__vmm_host *h, const gmr__vmm_host_made *made, bool ok) {
  if (ok) {
    if (made->ring) {
      free_ring(h, made->old_ring, made->old_ring_bytes, made->old_events, made->old_slot_count);
    }
    return;
  }
  if (made->ring) {
    free_ring(h, h->ring, h->ring_bytes, h->events, h->slot_count);
    h->ring = made->old_ring;
    h->ring_bytes = made->old_ring_bytes;
    h->chunk_bytes = made->old_chunk_bytes;
    h->slot_count = made->old_slot_count;
    h->events = made->old_events;
  }
  if (made->stream) {
    (void)h->cuda->stream_destroy(h->stream);
    h->stream = NULL;
    h->has_stream = false;
  }
}

gmr_status gmr__vmm_host_release(gmr__vmm_host *h) {
  gmr__vmm_threads_stop(h);
  (void)gmr__vmm_host_drop_kept(h);
  if (h->ring != NULL) {
    free_ring(h, h->ring, h->ring_bytes, h->events, h->slot_count);
    h->ring = NULL;
    h->events = NULL;
    h->ring_bytes = h->chunk_bytes = h->slot_count = 0;
  }
  if (h->has_stream) {
    if (h->cuda->stream_destroy(h->stream) != cudaSuccess) return GMR_ERR_CUDA;
    h->stream = NULL;
    h->has_stream = false;
  }
  size_t bytes = 0, count = 0;
  return gmr__vmm_unreleased_retry(&h->unreleased, &bytes, &count, NULL);
}

void gmr__vmm_host_deinit(gmr__vmm_host *h) {
  gmr__vmm_threads_stop(h);
  free(h->kept);
  h->kept = NULL;
  h->kept_count = h->kept_capacity = 0;
  gmr__vmm_unreleased_deinit(&h->unreleased);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
}
