/*
 * resources/vmm/fine/vmm_fine_creator.h (internal): the threads that create
 * a `vmm` growth's physical allocations (cuMemCreate) beside the allocating
 * thread (the config's creator_thread_count, gmr/vmm_resource.h).
 *
 * A growth that needs several handles queues all but its first as jobs,
 * creates its first itself, then takes back whatever job no thread has
 * started yet and runs it too, and waits only for the jobs a thread is
 * running. It then maps every handle itself, in order (vmm_fine_growth.c).
 * So the allocating thread never waits for a thread to wake up, and nothing
 * is created that the growth did not ask for: the handles, their sizes, the
 * bytes held and the footprint are exactly those of a growth without
 * threads; only cuMemCreate calls may run at the same time. cuMemCreate needs
 * no current context (the device is in its properties), so the threads
 * never set a device. Each thread switches itself to relaxed capture mode
 * once, at its start, so that its calls never break a global-mode capture
 * another thread makes (a growth during a capture runs relaxed for the same
 * reason, gmr/vmm_pool_resource.h "Capture"); a thread that cannot switch
 * ends at once, and its jobs run on the allocating thread. Whether the driver runs several at once is the
 * driver's business: where it serialises them, the growth costs what it
 * cost without threads, plus one wake-up.
 *
 * The threads start at the first batch (pthread_create; a refusal leaves
 * the pool creating every handle itself, for its whole life) and end at
 * gmr__vmf_creator_deinit (the pool's destroy).
 *
 * Thread-safe: yes (the creator's mutex). Callers may hold an engine lock
 * while calling in; the creator takes no other lock.
 */
#ifndef GMR_RESOURCES_VMM_FINE_VMM_FINE_CREATOR_H_
#define GMR_RESOURCES_VMM_FINE_VMM_FINE_CREATOR_H_

#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/vmm_resource.h"

/* One cuMemCreate to make. The caller owns the job and reads handle and
 * result once gmr__vmf_creator_wait returned for it. */
typedef struct gmr__vmf_create_job {
  size_t bytes;
  CUmemGenericAllocationHandle handle;
  CUresult result;
  bool done;                        /* under the creator's mutex */
  bool taken;                       /* a thread (or the caller) runs it */
  struct gmr__vmf_create_job *next; /* the queue */
} gmr__vmf_create_job;

typedef struct gmr__vmf_creator {
  pthread_mutex_t mutex;
  pthread_cond_t work; /* a job was queued, or stop */
  pthread_cond_t done; /* a job is done */
  const gmr__cuda_ops *cuda; /* for the capture mode of the threads */
  gmr_vmm_pool_resource *pool; /* whose handles the jobs create */
  uint32_t wanted_count;  /* threads asked for (0: none) */
  uint32_t thread_count;  /* threads running */
  bool start_failed;      /* pthread_create refused: no thread, ever */
  bool stop;
  gmr__vmf_create_job *head, *tail; /* queued, not taken */
  uint64_t thread_job_count;        /* jobs the threads ran */
  pthread_t threads[GMR_VMM_POOL_MAX_CREATOR_THREADS];
} gmr__vmf_creator;

/* Set up a creator of `thread_count` threads (none started yet) for `pool`
 * (gmr__vmm_create_handle) over the CUDA layer `cuda`. false: the mutex or a condition
 * could not be made (nothing to deinit). */
bool gmr__vmf_creator_init(gmr__vmf_creator *c, const gmr__cuda_ops *cuda,
                           gmr_vmm_pool_resource *pool, uint32_t thread_count);
/* Stop and join the threads (idle: no growth is running), free the rest. */
void gmr__vmf_creator_deinit(gmr__vmf_creator *c);

/* Queue `count` jobs (their bytes set), starting the threads at
 * the first call. false: there are no threads (none asked for, or they
 * could not start): nothing was queued, the caller creates every handle. */
bool gmr__vmf_creator_submit(gmr__vmf_creator *c, gmr__vmf_create_job *jobs, size_t count);
/* Run, on the calling thread, every job of jobs[0..count) that no thread
 * has taken yet, then wait until each one is done. */
void gmr__vmf_creator_finish(gmr__vmf_creator *c, gmr__vmf_create_job *jobs, size_t count);

/* Jobs the threads ran so far (the rest ran on allocating threads). */
uint64_t gmr__vmf_creator_thread_jobs(gmr__vmf_creator *c);

#endif /* GMR_RESOURCES_VMM_FINE_VMM_FINE_CREATOR_H_ */
