/*
 * resources/vmm/base/vmm_host.h (internal): the host side of sleep and wake
 * of a VMM resource (gmr/vmm_pool_sleep.h), one per pool:
 *
 *   backups     host copies of what sleep saves: pinned (cudaHostAlloc) or
 *               pageable (mmap from 64 KiB, 2 MiB aligned and advised for
 *               huge pages from 2 MiB; malloc below), one per allocation or
 *               committed run;
 *   kept        backups a sleep asked to keep (keep_backup), held from the
 *               wake of their allocation to the next sleep, which reuses
 *               those of the same kind and size and frees the rest;
 *   the ring    the pinned staging ring that pageable backups are copied
 *               through (staging_bytes), made by the first sleep that needs
 *               it and kept until destroy or a sleep that asks another size;
 *               a copy cuts its bytes into chunks of 2 to 8 MiB (an eighth
 *               of what each thread copies, so that the last chunk's host
 *               copy, which nothing overlaps, is short; smaller in a small
 *               ring), each in a slot of the ring with an event;
 *   the stream  the pool's own copy stream (non-blocking), made at the first
 *               copy and kept until destroy;
 *   threads     copy threads (copy_threads), started at the first pageable
 *               copy, parked between calls, joined at destroy; they only copy
 *               host memory: every CUDA call is the calling thread's.
 *
 * The copies (vmm_copy.c): pinned backups one cudaMemcpyAsync each on the
 * stream, then one cudaStreamSynchronize. Pageable backups through the ring,
 * in order: sleep queues device-to-ring copies of the next chunks while the
 * threads copy the chunks whose event completed from the ring to the
 * backups; wake has the threads fill ring chunks from the backups while the
 * calling thread queues ring-to-device copies of the filled ones, waiting
 * for a slot's event before its chunk is filled again, and for the stream
 * at the end. Nothing of a failed copy is left in flight: the stream is
 * synchronised (best effort) before the failure returns.
 *
 * Thread-safe: no; everything but the threads' hand-off (mu, cv) belongs to
 * the pool's mutex.
 */
#ifndef GMR_RESOURCES_VMM_BASE_VMM_HOST_H_
#define GMR_RESOURCES_VMM_BASE_VMM_HOST_H_

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/vmm_pool_resource.h"
#include "resources/vmm/base/vmm_unreleased.h"

/* Most copy threads one pool runs. */
#define GMR__VMM_MAX_COPY_THREADS 64u
/* The smallest ring; smaller sizes are rounded up to it. */
#define GMR__VMM_MIN_STAGING_BYTES ((size_t)1 << 20)

/* A backup held for the next sleep. */
typedef struct gmr__vmm_kept_backup {
  void *ptr;
  size_t bytes;
  gmr_vmm_pool_host_kind kind;
} gmr__vmm_kept_backup;

/* One copy: `bytes` between a device address and its backup. */
typedef struct gmr__vmm_piece {
  char *dev;
  char *host;
  size_t bytes;
} gmr__vmm_piece;

struct gmr__vmm_copy_job; /* vmm_copy.c */

typedef struct gmr__vmm_host {
  const gmr__cuda_ops *cuda;
  int device;
  /* Promises of the ring and of kept pinned backups, and what cudaFreeHost
   * refused of them (asked again by the next sleep, wake and destroy). */
  gmr__vmm_unreleased unreleased;
  cudaStream_t stream; /* the copy stream, or NULL before the first copy */
  bool has_stream;
  void *ring; /* the staging ring (pinned), or NULL */
  size_t ring_bytes;
  size_t chunk_bytes;  /* the ring's unit: a copy cuts chunks of a multiple of it */
  size_t slot_count;   /* ring_bytes / chunk_bytes: as many events */
  cudaEvent_t *events; /* one per unit, with the ring */
  gmr__vmm_kept_backup *kept;
  size_t kept_count, kept_capacity;
  size_t kept_pinned_bytes, kept_pageable_bytes;
  /* What the last sleep that succeeded chose, for its wake. */
  gmr_vmm_pool_host_kind kind;
  bool keep_backup;
  uint32_t copy_threads;
  /* The copy threads: started on demand, parked on cv between jobs. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t threads[GMR__VMM_MAX_COPY_THREADS];
  unsigned thread_count;
  uint64_t generation; /* bumped for each job */
  unsigned active;     /* threads still working on the job */
  bool quit;
  struct gmr__vmm_copy_job *job;
} gmr__vmm_host;

/* What a sleep made of the ring and the stream, undone if it fails. */
typedef struct gmr__vmm_host_made {
  bool stream;     /* the stream is new */
  void *old_ring;  /* the ring replaced (freed once the sleep succeeds) */
  size_t old_ring_bytes, old_chunk_bytes, old_slot_count;
  cudaEvent_t *old_events;
  bool ring;       /* a new ring is installed */
} gmr__vmm_host_made;

void gmr__vmm_host_init(gmr__vmm_host *h, const gmr__cuda_ops *cuda, const gmr__cuda_vmm_ops *vmm,
                        int device);
/* Give back everything (kept backups, the ring, its events, the stream,
 * the threads) and what was refused before. GMR_OK when nothing is held any
 * more; else GMR_ERR_CUDA (what the driver refused stays kept, a later call
 * goes on). Device current. */
gmr_status gmr__vmm_host_release(gmr__vmm_host *h);
/* Free the host arrays (after a release that succeeded). */
void gmr__vmm_host_deinit(gmr__vmm_host *h);

/* The copy threads when the options say 0: the CPUs this process may run
 * on, at least 1, at most 16 (a sleep or wake blocks its caller; on an
 * H100 host of 16 CPUs, 16 threads copied 1 GiB 30-40% faster than 8). */
uint32_t gmr__vmm_default_copy_threads(void);

/* Make what the copies of a sleep of kind `kind` need: the stream and, for
 * pageable copies, a ring of staging_bytes (0: the default; replaced when
 * its size differs). `made` says what, for gmr__vmm_host_settle. GMR_OK;
 * GMR_ERR_OUT_OF_MEMORY (cudaHostAlloc of the ring) or a CUDA failure,
 * described, with nothing made. Device current. */
gmr_status gmr__vmm_host_prepare(gmr__vmm_host *h, gmr_vmm_pool_host_kind kind,
                                 size_t staging_bytes, gmr__vmm_host_made *made,
                                 gmr_failure *failure);
/* After the sleep: `ok` keeps what prepare made (and frees a ring it
 * replaced); else what it made goes and the old ring stays. */
void gmr__vmm_host_settle(gmr__vmm_host *h, const gmr__vmm_host_made *made, bool ok);

/* A backup of `bytes` of `kind` for a participant whose pinned copies are
 * promised in `u`: a kept one of that kind and size (*from_kept), else a new
 * one. false: host memory ran out (*err says cudaHostAlloc's answer). */
bool gmr__vmm_backup_take(gmr__vmm_host *h, gmr__vmm_unreleased *u, gmr_vmm_pool_host_kind kind,
                          size_t bytes, void **out, bool *from_kept, cudaError_t *err);
/* Give a backup taken from the kept ones back to them (a failed sleep). */
void gmr__vmm_backup_untake(gmr__vmm_host *h, gmr__vmm_unreleased *u,
                            gmr_vmm_pool_host_kind kind, void *ptr, size_t bytes);
/* A backup no longer needed after a wake: kept for the next sleep when the
 * sleep asked for it (h->keep_backup), else freed. Returns cudaFreeHost's
 * answer (a refused copy is kept in `u`), cudaSuccess when kept. */
cudaError_t gmr__vmm_backup_done(gmr__vmm_host *h, gmr__vmm_unreleased *u,
                                 gmr_vmm_pool_host_kind kind, void *ptr, size_t bytes);
/* After a sleep: free the kept backups it did not reuse. Returns the first
 * cudaFreeHost refusal (kept), or cudaSuccess. */
cudaError_t gmr__vmm_host_drop_kept(gmr__vmm_host *h);

/* Free one backup of `bytes` made as `kind` (NULL: nothing); a pinned one
 * cudaFreeHost refuses is kept in `u`. Returns cudaFreeHost's answer
 * (cudaSuccess for pageable backups). */
cudaError_t gmr__vmm_host_free(gmr__vmm_unreleased *u, gmr_vmm_pool_host_kind kind, void *host,
                               size_t bytes);

/* Pageable host bytes every pool's backups hold in this process (made and
 * not freed), for tests. */
size_t gmr__vmm_host_live_pageable_bytes(void);

/* ---- vmm_copy.c ------------------------------------------------------------ */

/* Copy the pieces device-to-host (`to_host`, sleep) or back (wake) for
 * backups of `kind`, pageable ones through the ring with `threads` copy
 * threads. `verb` ("sleep", "wake") names the call in messages. GMR_OK, or
 * the failed call described (GMR_ERR_CAPTURE_UNSAFE when a capture refused
 * it); nothing is in flight after either. Device current. */
gmr_status gmr__vmm_copy(gmr__vmm_host *h, bool to_host, gmr_vmm_pool_host_kind kind,
                         const gmr__vmm_piece *pieces, size_t count, uint32_t threads,
                         const char *verb, gmr_failure *failure);
/* Give the pages of pageable pieces back to the system at once (in
 * parallel: madvise MADV_DONTNEED), before they are unmapped. */
void gmr__vmm_discard(gmr__vmm_host *h, const gmr__vmm_piece *pieces, size_t count,
                      uint32_t threads);
/* Stop and join the copy threads. */
void gmr__vmm_threads_stop(gmr__vmm_host *h);

#endif /* GMR_RESOURCES_VMM_BASE_VMM_HOST_H_ */
