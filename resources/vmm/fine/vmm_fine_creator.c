/*
 * resources/vmm/fine/vmm_fine_creator.c (internal): the threads that create
 * a growth's physical allocations beside the allocating thread
 * (vmm_fine_creator.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "resources/vmm/fine/vmm_fine_creator.h"

#include "resources/vmm/base/vmm_base.h"

#include <signal.h>
#include <string.h>

static void run_job(gmr_vmm_pool_resource *pool, gmr__vmf_create_job *job) {
  job->result = gmr__vmm_create_handle(pool, &job->handle, job->bytes);
}

static void *creator_main(void *arg) {
  gmr__vmf_creator *c = arg;
  /* Relaxed for the thread's whole life (it ends with the thread): its
   * cuMemCreate calls must not break another thread's global capture. */
  enum cudaStreamCaptureMode previous = cudaStreamCaptureModeGlobal;
  if (gmr__cuda_capture_relaxed_enter(c->cuda, &previous) != cudaSuccess) return NULL;
  pthread_mutex_lock(&c->mutex);
  for (;;) {
    while (!c->stop && c->head == NULL) pthread_cond_wait(&c->work, &c->mutex);
    if (c->head == NULL) break; /* stop, and nothing queued */
    gmr__vmf_create_job *job = c->head;
    c->head = job->next;
    if (c->head == NULL) c->tail = NULL;
    job->next = NULL;
    job->taken = true;
    pthread_mutex_unlock(&c->mutex);
    run_job(c->pool, job);
    pthread_mutex_lock(&c->mutex);
    job->done = true;
    c->thread_job_count++;
    pthread_cond_broadcast(&c->done);
  }
  pthread_mutex_unlock(&c->mutex);
  return NULL;
}

bool gmr__vmf_creator_init(gmr__vmf_creator *c, const gmr__cuda_ops *cuda,
                           gmr_vmm_pool_resource *pool, uint32_t thread_count) {
  memset(c, 0, sizeof *c);
  c->cuda = cuda;
  c->pool = pool;
  c->wanted_count =
      thread_count > GMR_VMM_POOL_MAX_CREATOR_THREADS ? GMR_VMM_POOL_MAX_CREATOR_THREADS : thread_count;
  if (pthread_mutex_init(&c->mutex, NULL) != 0) return false;
  if (pthread_cond_init(&c->work, NULL) != 0) {
    pthread_mutex_destroy(&c->mutex);
    return false;
  }
  if (pthread_cond_init(&c->done, NULL) != 0) {
    pthread_cond_destroy(&c->work);
    pthread_mutex_destroy(&c->mutex);
    return false;
  }
  return true;
}

void gmr__vmf_creator_deinit(gmr__vmf_creator *c) {
  pthread_mutex_lock(&c->mutex);
  c->stop = true;
  pthread_cond_broadcast(&c->work);
  uint32_t n = c->thread_count;
  pthread_mutex_unlock(&c->mutex);
  for (uint32_t i = 0; i < n; ++i) (void)pthread_join(c->threads[i], NULL);
  pthread_cond_destroy(&c->done);
  pthread_cond_destroy(&c->work);
  pthread_mutex_destroy(&c->mutex);
}

/* Start the threads (mutex held). Signals stay with the program's threads:
 * every signal is blocked in the new ones. false: not even one started. */
static bool start_threads(gmr__vmf_creator *c) {
  sigset_t all, saved;
  sigfillset(&all);
  bool masked = pthread_sigmask(SIG_SETMASK, &all, &saved) == 0;
  while (c->thread_count < c->wanted_count &&
         pthread_create(&c->threads[c->thread_count], NULL, creator_main, c) == 0) {
    c->thread_count++;
  }
  if (masked) (void)pthread_sigmask(SIG_SETMASK, &saved, NULL);
  if (c->thread_count == 0) c->start_failed = true;
  return c->thread_count > 0;
}

bool gmr__vmf_creator_submit(gmr__vmf_creator *c, gmr__vmf_create_job *jobs, size_t count) {
  if (c->wanted_count == 0 || count == 0) return false;
  pthread_mutex_lock(&c->mutex);
  bool ready = !c->start_failed && (c->thread_count > 0 || start_threads(c));
  if (ready) {
    for (size_t i = 0; i < count; ++i) {
      gmr__vmf_create_job *job = &jobs[i];
      job->done = false;
      job->taken = false;
      job->next = NULL;
      if (c->tail != NULL) {
        c->tail->next = job;
      } else {
        c->head = job;
      }
      c->tail = job;
    }
    pthread_cond_broadcast(&c->work);
  }
  pthread_mutex_unlock(&c->mutex);
  return ready;
}

/* Take `job` out of the queue (mutex held; it is queued). */
static void unlink_job(gmr__vmf_creator *c, gmr__vmf_create_job *job) {
  gmr__vmf_create_job *prev = NULL;
  for (gmr__vmf_create_job *at = c->head; at != NULL; prev = at, at = at->next) {
    if (at != job) continue;
    if (prev != NULL) {
      prev->next = at->next;
    } else {
      c->head = at->next;
    }
    if (c->tail == at) c->tail = prev;
    at->next = NULL;
    return;
  }
}

void gmr__vmf_creator_finish(gmr__vmf_creator *c, gmr__vmf_create_job *jobs, size_t count) {
  pthread_mutex_lock(&c->mutex);
  for (size_t i = 0; i < count; ++i) {
    gmr__vmf_create_job *job = &jobs[i];
    if (job->taken) continue;
    job->taken = true;
    unlink_job(c, job);
    pthread_mutex_unlock(&c->mutex);
    run_job(c->pool, job);
    pthread_mutex_lock(&c->mutex);
    job->done = true;
  }
  for (size_t i = 0; i < count; ++i) {
    while (!jobs[i].done) pthread_cond_wait(&c->done, &c->mutex);
  }
  pthread_mutex_unlock(&c->mutex);
}

uint64_t gmr__vmf_creator_thread_jobs(gmr__vmf_creator *c) {
  pthread_mutex_lock(&c->mutex);
  uint64_t n = c->thread_job_count;
  pthread_mutex_unlock(&c->mutex);
  return n;
}
