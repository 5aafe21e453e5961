/*
 * adaptors/oom_handler.c: see oom_handler.h.
 */
#define _POSIX_C_SOURCE 200809L

#include "adaptors/oom_handler.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "core/events.h"
#include "core/forward.h"

/* Depth of OOM policies running in this thread: a policy is never entered
 * while another one (or the same) runs in the thread. */
static _Thread_local unsigned policy_depth;

/* What the services need of one failed request. */
typedef struct call_state {
  gmr__oom_handler *handler;
  uint64_t start_generation; /* free_generation before the failed attempt */
  size_t bytes;
  gmr_stream stream;
  uint32_t attempt;
} call_state;

static void emit(gmr__oom_handler *h, gmr_event_kind kind, const call_state *cs,
                 gmr_status status, size_t value_bytes, uint64_t duration_ns) {
  gmr__event_listeners *listeners = &h->events;
  if (!gmr__events_enabled(listeners)) return;
  gmr_event e;
  memset(&e, 0, sizeof e);
  e.kind = kind;
  e.source = h->owner;
  e.policy_name = h->policy.name;
  e.bytes = cs->bytes;
  e.stream = cs->stream;
  e.attempt = cs->attempt;
  e.status = status;
  e.value_bytes = value_bytes;
  e.duration_ns = duration_ns;
  gmr__event_emit(listeners, &e);
}

static gmr_status services_trim(const gmr_oom_services *self, size_t *released_bytes) {
  call_state *cs = self->internal;
  gmr__oom_handler *h = cs->handler;
  size_t released = 0;
  gmr_status st = gmr_resource_trim(h->upstream, &released);
  atomic_fetch_add_explicit(&h->trim_count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->trimmed_bytes, released, memory_order_relaxed);
  emit(h, GMR_EVENT_OOM_TRIM, cs, st, released, 0);
  if (released_bytes != NULL) *released_bytes = released;
  return st;
}

static gmr_status services_wait(const gmr_oom_services *self, uint64_t timeout_ns, int *freed) {
  call_state *cs = self->internal;
  gmr__oom_handler *h = cs->handler;
  uint64_t start = gmr__monotonic_ns();
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  uint64_t nsec = (uint64_t)deadline.tv_nsec + timeout_ns % 1000000000u;
  /* Cap absurd timeouts at about a century rather than overflow time_t. */
  uint64_t secs = timeout_ns / 1000000000u;
  if (secs > 3153600000u) secs = 3153600000u;
  deadline.tv_sec += (time_t)(secs + nsec / 1000000000u);
  deadline.tv_nsec = (long)(nsec % 1000000000u);

  pthread_mutex_lock(&h->mutex);
  /* Announce the waiter before looking at the generation: a free that
   * bumps the generation after this load then sees the waiter and signals. */
  atomic_fetch_add(&h->waiter_count, 1);
  bool timed_out = false;
  while (atomic_load(&h->free_generation) == cs->start_generation && !timed_out) {
    if (pthread_cond_timedwait(&h->cond, &h->mutex, &deadline) == ETIMEDOUT) timed_out = true;
  }
  bool came = atomic_load(&h->free_generation) != cs->start_generation;
  atomic_fetch_sub(&h->waiter_count, 1);
  pthread_mutex_unlock(&h->mutex);

  atomic_fetch_add_explicit(&h->wait_count, 1, memory_order_relaxed);
  if (!came) atomic_fetch_add_explicit(&h->wait_timeout_count, 1, memory_order_relaxed);
  emit(h, GMR_EVENT_OOM_WAIT, cs, GMR_OK, came ? 1u : 0u, gmr__monotonic_ns() - start);
  *freed = came ? 1 : 0;
  return GMR_OK;
}

gmr_status gmr__oom_handler_init(gmr__oom_handler *h, const gmr_oom_policy *policy,
                                 const gmr_resource *owner, gmr_resource *upstream) {
  memset(h, 0, sizeof *h);
  if (policy != NULL && gmr_oom_policy_check(policy) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  h->policy = policy != NULL ? *policy : (gmr_oom_policy)GMR_OOM_POLICY_FAIL_INIT;
  h->owner = owner;
  h->upstream = upstream;
  if (!gmr__cond_init_monotonic(&h->cond)) return GMR_ERR_OUT_OF_MEMORY;
  if (pthread_mutex_init(&h->mutex, NULL) != 0) {
    pthread_cond_destroy(&h->cond);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  h->sync_ready = true;
  if (!gmr__event_listeners_init(&h->events)) {
    pthread_cond_destroy(&h->cond);
    pthread_mutex_destroy(&h->mutex);
    h->sync_ready = false;
    return GMR_ERR_OUT_OF_MEMORY;
  }
  return GMR_OK;
}

void gmr__oom_handler_deinit(gmr__oom_handler *h) {
  if (h->policy.release != NULL) h->policy.release(h->policy.ctx);
  h->policy.release = NULL;
  if (h->sync_ready) {
    pthread_cond_destroy(&h->cond);
    pthread_mutex_destroy(&h->mutex);
    h->sync_ready = false;
  }
  if (h->events.lock != NULL) gmr__event_listeners_deinit(&h->events);
}

static bool is_lack_of_memory(gmr_status st) {
  return st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED;
}

gmr_status gmr__oom_handler_allocate(gmr__oom_handler *h, size_t bytes, size_t alignment,
                                     gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  if (!gmr__oom_handler_has_policy(h)) {
    gmr_status st = gmr__forward_allocate(h->upstream, bytes, alignment, stream, out_ptr, failure);
    gmr__oom_handler_note_failure(h, st);
    return st;
  }
  uint32_t attempt = 0;
  for (;;) {
    uint64_t generation = atomic_load_explicit(&h->free_generation, memory_order_acquire);
    /* Each attempt starts with a fresh record, as a call of the dispatch would. */
    if (attempt > 0) gmr__failure_reset(failure);
    gmr_status st = gmr__forward_allocate(h->upstream, bytes, alignment, stream, out_ptr, failure);
    if (st == GMR_OK) {
      if (attempt > 0) atomic_fetch_add_explicit(&h->recovered_count, 1, memory_order_relaxed);
      return GMR_OK;
    }
    failure->attempt = attempt;
    if (!is_lack_of_memory(st)) return st;
    atomic_fetch_add_explicit(&h->failure_count, 1, memory_order_relaxed);
    if (policy_depth > 0) {
      atomic_fetch_add_explicit(&h->reentrant_count, 1, memory_order_relaxed);
      return st;
    }
    call_state cs = {h, generation, bytes, stream, attempt};
    if (attempt >= h->policy.max_attempts) {
      atomic_fetch_add_explicit(&h->gave_up_count, 1, memory_order_relaxed);
      emit(h, GMR_EVENT_OOM_GAVE_UP, &cs, st, 0, 0);
      return st;
    }
    gmr_oom_services services = {GMR_OOM_SERVICES_VERSION, h->upstream, h->owner,
                                 services_trim, services_wait, &cs};
    policy_depth++;
    gmr_oom_action action = h->policy.decide(&h->policy, failure, &services);
    policy_depth--;
    if (action != GMR_OOM_ACTION_RETRY) {
      atomic_fetch_add_explicit(&h->gave_up_count, 1, memory_order_relaxed);
      emit(h, GMR_EVENT_OOM_GAVE_UP, &cs, st, 0, 0);
      return st;
    }
    attempt++;
    cs.attempt = attempt;
    atomic_fetch_add_explicit(&h->retry_count, 1, memory_order_relaxed);
    emit(h, GMR_EVENT_OOM_RETRY, &cs, st, 0, 0);
  }
}

void gmr__oom_handler_wake_waiters(gmr__oom_handler *h) {
  atomic_fetch_add(&h->free_generation, 1);
  if (atomic_load(&h->waiter_count) != 0) {
    pthread_mutex_lock(&h->mutex);
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->mutex);
  }
}

void gmr__oom_handler_get_counts(const gmr__oom_handler *h, gmr_oom_counts *out) {
  out->size = sizeof *out;
  out->version = GMR_OOM_COUNTS_VERSION;
  out->failure_count = atomic_load_explicit(&h->failure_count, memory_order_relaxed);
  out->retry_count = atomic_load_explicit(&h->retry_count, memory_order_relaxed);
  out->recovered_count = atomic_load_explicit(&h->recovered_count, memory_order_relaxed);
  out->gave_up_count = atomic_load_explicit(&h->gave_up_count, memory_order_relaxed);
  out->reentrant_count = atomic_load_explicit(&h->reentrant_count, memory_order_relaxed);
  out->trim_count = atomic_load_explicit(&h->trim_count, memory_order_relaxed);
  out->trimmed_bytes = atomic_load_explicit(&h->trimmed_bytes, memory_order_relaxed);
  out->wait_count = atomic_load_explicit(&h->wait_count, memory_order_relaxed);
  out->wait_timeout_count = atomic_load_explicit(&h->wait_timeout_count, memory_order_relaxed);
}
