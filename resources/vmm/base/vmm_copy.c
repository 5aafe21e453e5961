/*
 * resources/vmm/base/vmm_copy.c (internal): the copies of sleep and wake
 * between device memory and backups (vmm_host.h): pinned backups directly,
 * pageable ones through the staging ring with copy threads.
 *
 * A copy cuts the pieces into chunks (chunk_for), in order (a chunk may
 * hold parts of several pieces), and the ring into as many slots of a chunk
 * as fit, each with an event of the ring; chunk i uses slot i % slots. Only
 * the calling thread makes CUDA calls (it has the device current); the copy
 * threads copy host memory between the ring and the backups, each taking
 * the chunks i with i % threads == its index, in order.
 *
 * Sleep (device to host): the caller queues the copy of a chunk into its
 * slot and records the slot's event as long as the slot's previous chunk
 * was copied out ("done"); then it waits for the oldest queued chunk's event
 * and marks it "ready"; a thread copies a ready chunk to the backups and
 * marks it done.
 * Wake (host to device): a thread fills chunk i's slot from the backups once
 * the slot is "freed" (the copy of chunk i - slot_count reached the device)
 * and marks it "filled"; the caller queues the copy of each filled chunk to
 * the device in order, records the slot's event, waits for the event of the
 * chunk that used the next chunk's slot and marks freed every chunk whose
 * event has completed (queried, not waited for), so that the threads keep
 * filling ahead; at the end it synchronises the stream.
 * With no copy thread (none could start) the caller does the threads' part
 * itself, in the same order.
 */
#define _GNU_SOURCE /* MADV_DONTNEED */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/failure.h"
#include "gmr/device.h"
#include "resources/vmm/base/vmm_host.h"

/* Pageable pieces below this come from malloc (vmm_host.c): never advised. */
#define DISCARD_MIN_BYTES ((size_t)64 << 10)
/* The largest chunk a copy cuts. */
#define MAX_CHUNK_BYTES ((size_t)8 << 20)

/* Chunk states. */
enum { READY = 1, DONE = 2, FILLED = 4, FREED = 8 };

/* A part of a piece in a chunk. */
typedef struct part {
  const gmr__vmm_piece *piece;
  size_t offset;      /* in the piece */
  size_t bytes;
  size_t slot_offset; /* in the chunk's slot */
} part;

typedef enum job_kind { JOB_TO_HOST, JOB_TO_DEVICE, JOB_DISCARD } job_kind;

typedef struct gmr__vmm_copy_job {
  job_kind kind;
  unsigned workers; /* threads taking part */
  /* Chunks (not JOB_DISCARD). */
  char *ring;
  size_t chunk_bytes, slot_count;
  part *parts;
  size_t *first; /* chunk i: parts[first[i] .. first[i + 1]) */
  size_t chunk_count;
  uint8_t *state; /* per chunk, under h->mu */
  bool failed;    /* under h->mu: everybody stops */
  /* JOB_DISCARD: the pieces, split by bytes among the workers. */
  const gmr__vmm_piece *pieces;
  size_t piece_count;
  size_t total_bytes;
} gmr__vmm_copy_job;

/* ---- the threads ----------------------------------------------------------------- */

typedef struct worker_arg {
  gmr__vmm_host *h;
  unsigned index;
  uint64_t generation; /* the last job it need not take part in */
} worker_arg;

/* Copy the host side of chunk i: ring to backups (to_host) or back. */
static void copy_chunk(const gmr__vmm_copy_job *job, size_t i) {
  char *slot = job->ring + (i % job->slot_count) * job->chunk_bytes;
  for (size_t k = job->first[i]; k < job->first[i + 1]; ++k) {
    const part *p = &job->parts[k];
    if (job->kind == JOB_TO_HOST) {
      memcpy(p->piece->host + p->offset, slot + p->slot_offset, p->bytes);
    } else {
      memcpy(slot + p->slot_offset, p->piece->host + p->offset, p->bytes);
    }
  }
}

/* Wait on h->cv (h->mu held) until chunk i's state has `bit` or the job
 * failed; false when it failed. */
static bool wait_state(gmr__vmm_host *h, gmr__vmm_copy_job *job, size_t i, uint8_t bit) {
  while (!job->failed && (job->state[i] & bit) == 0) pthread_cond_wait(&h->cv, &h->mu);
  return !job->failed;
}

/* Set `bit` on chunks [first, end) and wake the waiters. */
static void set_state(gmr__vmm_host *h, gmr__vmm_copy_job *job, size_t first, size_t end,
                      uint8_t bit) {
  pthread_mutex_lock(&h->mu);
  for (size_t i = first; i < end; ++i) job->state[i] |= bit;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

/* MADV_DONTNEED over worker `w`'s share of the pieces' bytes. */
static void discard_share(const gmr__vmm_copy_job *job, unsigned w) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t lo = job->total_bytes / job->workers * w;
  size_t hi = w + 1 == job->workers ? job->total_bytes : job->total_bytes / job->workers * (w + 1);
  size_t at = 0;
  for (size_t k = 0; k < job->piece_count && at < hi; ++k) {
    const gmr__vmm_piece *p = &job->pieces[k];
    size_t a = lo > at ? lo - at : 0, b = hi - at < p->bytes ? hi - at : p->bytes;
    at += p->bytes;
    if (p->bytes < DISCARD_MIN_BYTES || a >= b) continue;
    /* Whole pages only; the piece starts on a page (mmap). */
    a = gmr__align_up(a, page);
    b = b == p->bytes ? gmr__align_up(b, page) : b / page * page;
    if (a < b) (void)madvise(p->host + a, b - a, MADV_DONTNEED);
  }
}

/* A worker's part of a job. */
static void work(gmr__vmm_host *h, gmr__vmm_copy_job *job, unsigned w) {
  if (job->kind == JOB_DISCARD) {
    discard_share(job, w);
    return;
  }
  for (size_t i = w; i < job->chunk_count; i += job->workers) {
    pthread_mutex_lock(&h->mu);
    bool go = job->kind == JOB_TO_HOST
                  ? wait_state(h, job, i, READY)
                  : i < job->slot_count || wait_state(h, job, i - job->slot_count, FREED);
    pthread_mutex_unlock(&h->mu);
    if (!go) return;
    copy_chunk(job, i);
    set_state(h, job, i, i + 1, job->kind == JOB_TO_HOST ? DONE : FILLED);
  }
}

static void *worker_main(void *arg) {
  worker_arg a = *(worker_arg *)arg;
  free(arg);
  gmr__vmm_host *h = a.h;
  uint64_t seen = a.generation;
  pthread_mutex_lock(&h->mu);
  for (;;) {
    while (!h->quit && h->generation == seen) pthread_cond_wait(&h->cv, &h->mu);
    if (h->quit) break;
    seen = h->generation;
    gmr__vmm_copy_job *job = h->job;
    if (job == NULL || a.index >= job->workers) continue;
    pthread_mutex_unlock(&h->mu);
    work(h, job, a.index);
    pthread_mutex_lock(&h->mu);
    if (--h->active == 0) pthread_cond_broadcast(&h->cv);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

/* At least `want` threads running (as many as could start). */
static unsigned threads_start(gmr__vmm_host *h, unsigned want) {
  if (want > GMR__VMM_MAX_COPY_THREADS) want = GMR__VMM_MAX_COPY_THREADS;
  pthread_mutex_lock(&h->mu);
  h->quit = false;
  while (h->thread_count < want) {
    worker_arg *arg = malloc(sizeof *arg);
    if (arg == NULL) break;
    *arg = (worker_arg){h, h->thread_count, h->generation};
    if (pthread_create(&h->threads[h->thread_count], NULL, worker_main, arg) != 0) {
      free(arg);
      break;
    }
    h->thread_count++;
  }
  unsigned n = h->thread_count < want ? h->thread_count : want;
  pthread_mutex_unlock(&h->mu);
  return n;
}

void gmr__vmm_threads_stop(gmr__vmm_host *h) {
  pthread_mutex_lock(&h->mu);
  unsigned n = h->thread_count;
  h->quit = true;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  for (unsigned i = 0; i < n; ++i) pthread_join(h->threads[i], NULL);
  pthread_mutex_lock(&h->mu);
  h->thread_count = 0;
  h->quit = false;
  pthread_mutex_unlock(&h->mu);
}

/* Hand `job` to its workers (job->workers > 0). */
static void job_begin(gmr__vmm_host *h, gmr__vmm_copy_job *job) {
  pthread_mutex_lock(&h->mu);
  h->job = job;
  h->active = job->workers;
  h->generation++;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

/* Wait until every worker has left `job`. */
static void job_end(gmr__vmm_host *h, gmr__vmm_copy_job *job) {
  pthread_mutex_lock(&h->mu);
  if (job->workers > 0) {
    while (h->active > 0) pthread_cond_wait(&h->cv, &h->mu);
  }
  h->job = NULL;
  pthread_mutex_unlock(&h->mu);
}

/* ---- failures ---------------------------------------------------------------------- */

static gmr_status copy_fail(gmr_failure *failure, const char *verb, const char *call,
                            cudaError_t err) {
  gmr_status st = gmr__cuda_fail(failure, call, err);
  if (failure != NULL && st == GMR_ERR_CAPTURE_UNSAFE) {
    (void)gmr__failure_set(failure, st,
                           "%s during a CUDA graph capture: %s refused (%s); end the capture "
                           "first",
                           verb, call, gmr_cuda_error_name((int)err));
    failure->cuda_error = (int)err;
  }
  return st;
}

/* Mark the job failed so that every thread stops. */
static void job_fail(gmr__vmm_host *h, gmr__vmm_copy_job *job) {
  pthread_mutex_lock(&h->mu);
  job->failed = true;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

/* ---- pinned backups ------------------------------------------------------------------ */

static gmr_status copy_direct(gmr__vmm_host *h, bool to_host, const gmr__vmm_piece *pieces,
                              size_t count, const char *verb, gmr_failure *failure) {
  for (size_t i = 0; i < count; ++i) {
    const gmr__vmm_piece *p = &pieces[i];
    if (p->bytes == 0) continue;
    cudaError_t err = to_host ? h->cuda->memcpy_async(p->host, p->dev, p->bytes, h->stream)
                              : h->cuda->memcpy_async(p->dev, p->host, p->bytes, h->stream);
    if (err != cudaSuccess) {
      (void)h->cuda->stream_synchronize(h->stream); /* nothing left in flight */
      return copy_fail(failure, verb, "cudaMemcpyAsync", err);
    }
  }
  cudaError_t err = h->cuda->stream_synchronize(h->stream);
  return err == cudaSuccess ? GMR_OK : copy_fail(failure, verb, "cudaStreamSynchronize", err);
}

/* ---- pageable backups: the ring ------------------------------------------------------ */

/* Cut the pieces into chunks of at most chunk_bytes. false: host memory. */
static bool cut(gmr__vmm_copy_job *job, const gmr__vmm_piece *pieces, size_t count) {
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += pieces[i].bytes;
  size_t chunks = (total + job->chunk_bytes - 1) / job->chunk_bytes;
  job->parts = malloc((count + chunks + 1) * sizeof *job->parts);
  job->first = malloc((chunks + 1) * sizeof *job->first);
  job->state = calloc(chunks + 1, 1);
  if (job->parts == NULL || job->first == NULL || job->state == NULL) return false;
  size_t n = 0, chunk = 0, used = 0;
  job->first[0] = 0;
  for (size_t i = 0; i < count; ++i) {
    for (size_t off = 0; off < pieces[i].bytes;) {
      size_t take = pieces[i].bytes - off;
      if (take > job->chunk_bytes - used) take = job->chunk_bytes - used;
      job->parts[n++] = (part){&pieces[i], off, take, used};
      off += take;
      used += take;
      if (used == job->chunk_bytes) {
        job->first[++chunk] = n;
        used = 0;
      }
    }
  }
  if (used > 0) job->first[++chunk] = n;
  job->chunk_count = chunk;
  return true;
}

/* Queue chunk i's copies between its slot and the device and record the
 * slot's event. */
static cudaError_t queue_chunk(gmr__vmm_host *h, const gmr__vmm_copy_job *job, size_t i,
                               const char **call) {
  char *slot = job->ring + (i % job->slot_count) * job->chunk_bytes;
  *call = "cudaMemcpyAsync";
  for (size_t k = job->first[i]; k < job->first[i + 1]; ++k) {
    const part *p = &job->parts[k];
    cudaError_t err =
        job->kind == JOB_TO_HOST
            ? h->cuda->memcpy_async(slot + p->slot_offset, p->piece->dev + p->offset, p->bytes,
                                    h->stream)
            : h->cuda->memcpy_async(p->piece->dev + p->offset, slot + p->slot_offset, p->bytes,
                                    h->stream);
    if (err != cudaSuccess) return err;
  }
  *call = "cudaEventRecord";
  return h->cuda->event_record(h->events[i % job->slot_count], h->stream);
}

/* The caller's part of a sleep: queue what the slots allow, wait for the
 * oldest queued chunk's event and mark it ready; with no worker also copy
 * it out. */
static cudaError_t run_to_host(gmr__vmm_host *h, gmr__vmm_copy_job *job, const char **call) {
  size_t n = job->chunk_count, slots = job->slot_count, queued = 0, synced = 0;
  cudaError_t err = cudaSuccess;
  while (synced < n && err == cudaSuccess) {
    /* Chunks [queued, can) have free slots (their slot's chunk is done). */
    pthread_mutex_lock(&h->mu);
    size_t can = queued;
    for (;;) {
      while (can < n && (can < slots || (job->state[can - slots] & DONE) != 0)) can++;
      if (job->failed || can > queued || synced < queued) break;
      pthread_cond_wait(&h->cv, &h->mu); /* every queued chunk is ready: wait for a done */
    }
    bool stop = job->failed;
    pthread_mutex_unlock(&h->mu);
    if (stop) break;
    for (; queued < can && err == cudaSuccess; ++queued) err = queue_chunk(h, job, queued, call);
    if (err != cudaSuccess || synced == queued) continue;
    *call = "cudaEventSynchronize";
    err = h->cuda->event_synchronize(h->events[synced % slots]);
    if (err != cudaSuccess) break;
    if (job->workers == 0) {
      copy_chunk(job, synced);
      job->state[synced] |= READY | DONE;
    } else {
      set_state(h, job, synced, synced + 1, READY);
    }
    synced++;
  }
  if (err == cudaSuccess) {
    /* Every chunk copied out before the backups are used. */
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < n && !job->failed; ++i) (void)wait_state(h, job, i, DONE);
    pthread_mutex_unlock(&h->mu);
  }
  return err;
}

/* The caller's part of a wake: queue filled chunks in order, free slots;
 * with no worker also fill them. */
static cudaError_t run_to_device(gmr__vmm_host *h, gmr__vmm_copy_job *job, const char **call) {
  size_t n = job->chunk_count, slots = job->slot_count;
  size_t freed = 0; /* chunks [0, freed) reached the device, marked FREED */
  cudaError_t err = cudaSuccess;
  for (size_t i = 0; i < n && err == cudaSuccess; ++i) {
    if (job->workers == 0) {
      copy_chunk(job, i); /* its slot was freed below */
    } else {
      pthread_mutex_lock(&h->mu);
      bool go = wait_state(h, job, i, FILLED);
      pthread_mutex_unlock(&h->mu);
      if (!go) break;
    }
    err = queue_chunk(h, job, i, call);
    if (err != cudaSuccess) continue;
    size_t marked = freed;
    /* Chunk i + 1 reuses the slot of chunk i + 1 - slots: wait for it. */
    if (i + 1 >= slots) {
      *call = "cudaEventSynchronize";
      err = h->cuda->event_synchronize(h->events[(i + 1 - slots) % slots]);
      if (err != cudaSuccess) continue;
      /* One stream: every earlier chunk is on the device too. */
      if (freed < i + 2 - slots) freed = i + 2 - slots;
    }
    /* Free every slot whose copy already reached the device, so that the
     * threads can fill chunks ahead of the next one; freeing one slot per
     * chunk queued let one thread at a time fill once the ring wrapped. */
    while (freed <= i && h->cuda->event_query(h->events[freed % slots]) == cudaSuccess) {
      freed++;
    }
    if (freed > marked) set_state(h, job, marked, freed, FREED);
  }
  if (err == cudaSuccess) {
    *call = "cudaStreamSynchronize";
    err = h->cuda->stream_synchronize(h->stream);
  }
  return err;
}

/* Chunks of an eighth of what each thread copies, in [the ring's unit,
 * min(8 MiB, a quarter of the ring)], a multiple of the unit: the last
 * chunk's host copy, which no device copy overlaps, stays short, and the
 * calling thread's calls per chunk stay few next to the device's time. */
static size_t chunk_for(const gmr__vmm_host *h, size_t total, unsigned threads) {
  const size_t unit = h->chunk_bytes;
  size_t most = h->ring_bytes / 4 < MAX_CHUNK_BYTES ? h->ring_bytes / 4 : MAX_CHUNK_BYTES;
  most = most / unit * unit;
  if (most < unit) most = unit;
  size_t chunk = total / ((size_t)threads * 8u);
  if (chunk > most) chunk = most;
  chunk = chunk / unit * unit;
  return chunk < unit ? unit : chunk;
}

static gmr_status copy_ring(gmr__vmm_host *h, bool to_host, const gmr__vmm_piece *pieces,
                            size_t count, uint32_t threads, const char *verb,
                            gmr_failure *failure) {
  gmr__vmm_copy_job job;
  memset(&job, 0, sizeof job);
  job.kind = to_host ? JOB_TO_HOST : JOB_TO_DEVICE;
  job.ring = h->ring;
  unsigned want = threads == 0 ? gmr__vmm_default_copy_threads() : threads;
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += pieces[i].bytes;
  job.chunk_bytes = chunk_for(h, total, want);
  job.slot_count = h->ring_bytes / job.chunk_bytes; /* at most h->slot_count: one event each */
  gmr_status st = GMR_OK;
  if (!cut(&job, pieces, count)) {
    st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY, "%s: host memory ran out", verb);
  } else if (job.chunk_count > 0) {
    if (want > job.chunk_count) want = (unsigned)job.chunk_count;
    job.workers = threads_start(h, want);
    if (job.workers > 0) job_begin(h, &job);
    const char *call = "cudaMemcpyAsync";
    cudaError_t err = to_host ? run_to_host(h, &job, &call) : run_to_device(h, &job, &call);
    if (err != cudaSuccess) job_fail(h, &job);
    job_end(h, &job);
    if (err != cudaSuccess) {
      (void)h->cuda->stream_synchronize(h->stream); /* nothing left in flight */
      st = copy_fail(failure, verb, call, err);
    }
  }
  free(job.parts);
  free(job.first);
  free(job.state);
  return st;
}

gmr_status gmr__vmm_copy(gmr__vmm_host *h, bool to_host, gmr_vmm_pool_host_kind kind,
                         const gmr__vmm_piece *pieces, size_t count, uint32_t threads,
                         const char *verb, gmr_failure *failure) {
  if (count == 0) return GMR_OK;
  if (kind == GMR_VMM_POOL_HOST_PINNED || h->ring == NULL) {
    return copy_direct(h, to_host, pieces, count, verb, failure);
  }
  return copy_ring(h, to_host, pieces, count, threads, verb, failure);
}

void gmr__vmm_discard(gmr__vmm_host *h, const gmr__vmm_piece *pieces, size_t count,
                      uint32_t threads) {
  gmr__vmm_copy_job job;
  memset(&job, 0, sizeof job);
  job.kind = JOB_DISCARD;
  job.pieces = pieces;
  job.piece_count = count;
  for (size_t i = 0; i < count; ++i) job.total_bytes += pieces[i].bytes;
  if (job.total_bytes < ((size_t)64 << 20)) return; /* munmap alone is as quick */
  unsigned want = threads == 0 ? gmr__vmm_default_copy_threads() : threads;
  job.workers = threads_start(h, want);
  if (job.workers == 0) return;
  job_begin(h, &job);
  job_end(h, &job);
}
