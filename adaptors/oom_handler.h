/*
 * adaptors/oom_handler.h (internal): the OOM policy machinery shared by every
 * adaptor that carries an OOM policy (limiting_adaptor, oom_adaptor).
 *
 * The handler calls the upstream, and on GMR_ERR_OUT_OF_MEMORY or
 * GMR_ERR_LIMIT_EXCEEDED runs the policy and retries while it says so, up to
 * the policy's max_attempts, never re-entrantly (a thread-local guard). It
 * also carries the "a free came through" channel the `wait` policy blocks on:
 * the adaptor calls gmr__oom_handler_note_free() after each successful free,
 * which costs one atomic increment and one atomic load unless a thread waits.
 *
 * Thread-safe: yes (atomics; a mutex and condition variable for waiters).
 */
#ifndef GMR_ADAPTORS_OOM_HANDLER_H_
#define GMR_ADAPTORS_OOM_HANDLER_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "core/events.h"
#include "gmr/policy.h"
#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr__oom_handler {
  gmr_oom_policy policy;
  const gmr_resource *owner; /* the adaptor, named in events */
  gmr_resource *upstream;
  _Atomic uint64_t free_generation; /* bumped by every free through the adaptor */
  _Atomic unsigned waiter_count;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool sync_ready; /* mutex and cond were initialised */
  _Atomic uint64_t failure_count;
  _Atomic uint64_t retry_count;
  _Atomic uint64_t recovered_count;
  _Atomic uint64_t gave_up_count;
  _Atomic uint64_t reentrant_count;
  _Atomic uint64_t trim_count;
  _Atomic uint64_t trimmed_bytes;
  _Atomic uint64_t wait_count;
  _Atomic uint64_t wait_timeout_count;
  /* Listeners registered on the adaptor or a layer above it: its limit and
   * OOM events go to them (gmr_resource_add_event_listener). */
  gmr__event_listeners events; /* events.lock is NULL until initialised */
} gmr__oom_handler;

/* `policy` NULL means fail. The policy is copied; its release runs at deinit.
 * Returns GMR_OK, GMR_ERR_INVALID_ARGUMENT (invalid policy) or
 * GMR_ERR_OUT_OF_MEMORY (mutex/condition variable could not be made). On
 * failure nothing needs deinit and the policy's release has not run. */
gmr_status gmr__oom_handler_init(gmr__oom_handler *h, const gmr_oom_policy *policy,
                                 const gmr_resource *owner, gmr_resource *upstream);

/* Release the policy's ctx and the synchronisation objects. */
void gmr__oom_handler_deinit(gmr__oom_handler *h);

/* The OOM handler of `r` when it is a layer that reports events (a limiting
 * or an OOM adaptor), else NULL (limiting_adaptor.c, oom_adaptor.c). */
gmr__oom_handler *gmr__limiting_oom_handler(gmr_resource *r);
gmr__oom_handler *gmr__oom_adaptor_handler(gmr_resource *r);

/* Allocate from the upstream (its slot, through core/forward.h: the request
 * was checked by the dispatch), running the policy on out-of-memory failures.
 * `failure` is never NULL; each retry starts with a fresh record, and its
 * `attempt` holds the last attempt's number. */
gmr_status gmr__oom_handler_allocate(gmr__oom_handler *h, size_t bytes, size_t alignment,
                                     gmr_stream stream, void **out_ptr, gmr_failure *failure);

/* Whether the handler has a policy that can act (not `fail`). Without one,
 * an adaptor calls its upstream directly and never enters the handler. */
static inline bool gmr__oom_handler_has_policy(const gmr__oom_handler *h) {
  return h->policy.decide != NULL;
}

/* Count a failed upstream call made without the handler (no policy, or a
 * request for a capture), as the handler would have. */
static inline void gmr__oom_handler_note_failure(gmr__oom_handler *h, gmr_status st) {
  if (st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED) {
    atomic_fetch_add_explicit(&h->failure_count, 1, memory_order_relaxed);
  }
}

void gmr__oom_handler_wake_waiters(gmr__oom_handler *h);

/* A deallocation passed through the adaptor successfully: wake waiters. Only
 * a policy waits, so without one this is a single branch. */
static inline void gmr__oom_handler_note_free(gmr__oom_handler *h) {
  if (gmr__oom_handler_has_policy(h)) gmr__oom_handler_wake_waiters(h);
}

/* Fill the whole of *out (a gmr_oom_counts of this library's version, its
 * header included). */
void gmr__oom_handler_get_counts(const gmr__oom_handler *h, gmr_oom_counts *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_ADAPTORS_OOM_HANDLER_H_ */
