/*
 * adaptors/oom_adaptor.c: see gmr/oom_adaptor.h, and adaptors/oom_internal.h
 * for the shorthand limiting(on_oom=...).
 *
 * The policy runs only on the cold path: without one (`fail`) an allocation
 * is the upstream's slot and one branch. A free costs one atomic increment
 * and one atomic load (the "a free came through" channel `wait` blocks on)
 * unless a thread waits.
 */
#define _POSIX_C_SOURCE 200809L

#include "gmr/oom_adaptor.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adaptors/oom_internal.h"
#include "core/adaptor.h"
#include "core/events.h"
#include "core/forward.h"
#include "core/resource_type.h"
#include "util/clock.h"

struct gmr_oom_adaptor {
  gmr__adaptor base; /* first */
  gmr_oom_policy policy;
  gmr__oom_counters own;
  /* &own, or the counters of the limiting adaptor below when this layer is
   * its on_oom (oom_internal.h): then the limit's own refusals pass, and the
   * failures below are counted by that adaptor. */
  gmr__oom_counters *counts;
  _Atomic size_t live_count;
  _Atomic uint64_t free_generation; /* bumped by every free through the adaptor */
  _Atomic unsigned waiter_count;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  bool sync_ready; /* mutex and cond were initialised */
  /* Listeners registered on the adaptor or a layer above it. */
  gmr__event_listeners events; /* events.lock is NULL until initialised */
};

static const gmr_resource_vtbl oom_vtbl;

/* Depth of OOM policies running in this thread: a policy is never entered
 * while another one (or the same) runs in the thread. */
static _Thread_local unsigned policy_depth;

static bool is_limits_policy(const gmr_oom_adaptor *a) { return a->counts != &a->own; }

static bool has_policy(const gmr_oom_adaptor *a) { return a->policy.decide != NULL; }

/* A failure below that this layer's policy never sees: counted here unless
 * the limiting adaptor below counts its upstream's failures itself. */
static void note_failure(gmr_oom_adaptor *a, gmr_status st) {
  if (!is_limits_policy(a)) gmr__oom_counters_note_failure(a->counts, st);
}

/* ---- the services a policy gets (gmr/policy.h) ----------------------------- */

/* What the services need of one failed request. */
typedef struct call_state {
  gmr_oom_adaptor *adaptor;
  uint64_t start_generation; /* free_generation before the failed attempt */
  size_t bytes;
  gmr_stream stream;
  uint32_t attempt;
} call_state;

static void emit(gmr_oom_adaptor *a, gmr_event_kind kind, const call_state *cs, gmr_status status,
                 size_t value_bytes, uint64_t duration_ns) {
  if (!gmr__events_enabled(&a->events)) return;
  gmr_event e;
  memset(&e, 0, sizeof e);
  e.kind = kind;
  e.source = &a->base.resource;
  e.policy_name = a->policy.name;
  e.bytes = cs->bytes;
  e.stream = cs->stream;
  e.attempt = cs->attempt;
  e.status = status;
  e.value_bytes = value_bytes;
  e.duration_ns = duration_ns;
  gmr__event_emit(&a->events, &e);
}

static gmr_status services_trim(const gmr_oom_services *self, size_t *released_bytes) {
  call_state *cs = self->internal;
  gmr_oom_adaptor *a = cs->adaptor;
  size_t released = 0;
  /* The dispatch on purpose: a trim walks the whole stack below. */
  gmr_status st = gmr_resource_trim(a->base.upstream, &released);
  atomic_fetch_add_explicit(&a->counts->trim_count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->counts->trimmed_bytes, released, memory_order_relaxed);
  emit(a, GMR_EVENT_OOM_TRIM, cs, st, released, 0);
  if (released_bytes != NULL) *released_bytes = released;
  return st;
}

static gmr_status services_wait(const gmr_oom_services *self, uint64_t timeout_ns, int *freed) {
  call_state *cs = self->internal;
  gmr_oom_adaptor *a = cs->adaptor;
  uint64_t start = gmr__monotonic_ns();
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  uint64_t nsec = (uint64_t)deadline.tv_nsec + timeout_ns % 1000000000u;
  /* Cap absurd timeouts at about a century rather than overflow time_t. */
  uint64_t secs = timeout_ns / 1000000000u;
  if (secs > 3153600000u) secs = 3153600000u;
  deadline.tv_sec += (time_t)(secs + nsec / 1000000000u);
  deadline.tv_nsec = (long)(nsec % 1000000000u);

  pthread_mutex_lock(&a->mutex);
  /* Announce the waiter before looking at the generation: a free that
   * bumps the generation after this load then sees the waiter and signals. */
  atomic_fetch_add(&a->waiter_count, 1);
  bool timed_out = false;
  while (atomic_load(&a->free_generation) == cs->start_generation && !timed_out) {
    if (pthread_cond_timedwait(&a->cond, &a->mutex, &deadline) == ETIMEDOUT) timed_out = true;
  }
  bool came = atomic_load(&a->free_generation) != cs->start_generation;
  atomic_fetch_sub(&a->waiter_count, 1);
  pthread_mutex_unlock(&a->mutex);

  atomic_fetch_add_explicit(&a->counts->wait_count, 1, memory_order_relaxed);
  if (!came) atomic_fetch_add_explicit(&a->counts->wait_timeout_count, 1, memory_order_relaxed);
  emit(a, GMR_EVENT_OOM_WAIT, cs, GMR_OK, came ? 1u : 0u, gmr__monotonic_ns() - start);
  *freed = came ? 1 : 0;
  return GMR_OK;
}

static void wake_waiters(gmr_oom_adaptor *a) {
  atomic_fetch_add(&a->free_generation, 1);
  if (atomic_load(&a->waiter_count) != 0) {
    pthread_mutex_lock(&a->mutex);
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->mutex);
  }
}

/* ---- vtable ---------------------------------------------------------------- */

/* The policy's loop: retry while it says so, up to its max_attempts. */
static gmr_status allocate_with_policy(gmr_oom_adaptor *a, size_t bytes, size_t alignment,
                                       gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_resource *up = a->base.upstream;
  gmr__oom_counters *c = a->counts;
  for (uint32_t attempt = 0;; ++attempt) {
    uint64_t generation = atomic_load_explicit(&a->free_generation, memory_order_acquire);
    /* Each attempt starts with a fresh record, as a call of the dispatch would. */
    if (attempt > 0) gmr__failure_reset(failure);
    gmr_status st = gmr__forward_allocate(up, bytes, alignment, stream, out_ptr, failure);
    if (st == GMR_OK) {
      if (attempt > 0) atomic_fetch_add_explicit(&c->recovered_count, 1, memory_order_relaxed);
      return GMR_OK;
    }
    failure->attempt = attempt;
    if (!gmr__is_lack_of_memory(st)) return st;
    /* The limit's own refusal is its limit policy's to decide (oom_internal.h). */
    if (is_limits_policy(a) && failure->where == up) return st;
    note_failure(a, st);
    if (policy_depth > 0) {
      atomic_fetch_add_explicit(&c->reentrant_count, 1, memory_order_relaxed);
      return st;
    }
    call_state cs = {a, generation, bytes, stream, attempt};
    gmr_oom_action action = GMR_OOM_ACTION_FAIL;
    if (attempt < a->policy.max_attempts) {
      gmr_oom_services services = {GMR_OOM_SERVICES_VERSION, up, &a->base.resource,
                                   services_trim, services_wait, &cs};
      policy_depth++;
      action = a->policy.decide(&a->policy, failure, &services);
      policy_depth--;
    }
    if (action != GMR_OOM_ACTION_RETRY) {
      atomic_fetch_add_explicit(&c->gave_up_count, 1, memory_order_relaxed);
      emit(a, GMR_EVENT_OOM_GAVE_UP, &cs, st, 0, 0);
      return st;
    }
    cs.attempt = attempt + 1;
    atomic_fetch_add_explicit(&c->retry_count, 1, memory_order_relaxed);
    emit(a, GMR_EVENT_OOM_RETRY, &cs, st, 0, 0);
  }
}

static gmr_status oom_allocate(gmr_resource *self, size_t bytes, size_t alignment,
                               gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  gmr_oom_adaptor *a = (gmr_oom_adaptor *)self;
  gmr_status st;
  if (has_policy(a)) {
    st = allocate_with_policy(a, bytes, alignment, stream, out_ptr, failure);
  } else {
    st = gmr__forward_allocate(a->base.upstream, bytes, alignment, stream, out_ptr, failure);
    note_failure(a, st);
  }
  if (st == GMR_OK) atomic_fetch_add_explicit(&a->live_count, 1, memory_order_relaxed);
  return st;
}

/* A request for a capture goes straight to the upstream: the policy's trim
 * or wait could synchronise or stall the capture. */
static gmr_status oom_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                         gmr_stream stream, void **out_ptr,
                                         gmr_failure *failure) {
  gmr_oom_adaptor *a = (gmr_oom_adaptor *)self;
  gmr_status st = gmr__forward_allocate_capturing(a->base.upstream, bytes, alignment, stream,
                                                  out_ptr, failure);
  note_failure(a, st);
  if (st == GMR_OK) atomic_fetch_add_explicit(&a->live_count, 1, memory_order_relaxed);
  return st;
}

static gmr_status oom_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                                 gmr_stream stream) {
  gmr_oom_adaptor *a = (gmr_oom_adaptor *)self;
  gmr_status st = gmr__forward_deallocate(a->base.upstream, ptr, bytes, alignment, stream);
  if (st != GMR_OK) return st;
  atomic_fetch_sub_explicit(&a->live_count, 1, memory_order_relaxed);
  if (has_policy(a)) wake_waiters(a); /* only a policy waits */
  return GMR_OK;
}

/* Release the policy's ctx and what create made. */
static void free_adaptor(gmr_oom_adaptor *a) {
  if (a->policy.release != NULL) a->policy.release(a->policy.ctx);
  if (a->sync_ready) {
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->mutex);
  }
  if (a->events.lock != NULL) gmr__event_listeners_deinit(&a->events);
  free(a);
}

static gmr_status oom_destroy(gmr_resource *self) {
  gmr_oom_adaptor *a = (gmr_oom_adaptor *)self;
  if (atomic_load(&a->live_count) != 0) return GMR_ERR_BUSY;
  free_adaptor(a);
  return GMR_OK;
}

/* Growth in place is forwarded without the policy (gmr__adaptor_extend): a
 * caller whose extend fails allocates elsewhere instead (the pool takes a
 * new chunk), and that allocation runs the policy. live_count stays. */
static const gmr_resource_vtbl oom_vtbl = {
    .version = GMR_RESOURCE_VTBL_VERSION,
    .type_name = "oom_adaptor",
    .allocate = oom_allocate,
    .deallocate = oom_deallocate,
    .destroy = oom_destroy,
    .get_upstream = gmr__adaptor_get_upstream,
    .record_stream = gmr__adaptor_record_stream,
    .allocate_capturing = oom_allocate_capturing,
    .extend = gmr__adaptor_extend,
};

/* gmr_resource_downcast() knows the type by this (core/resource_type.h). */
static const gmr__resource_type oom_type = {&oom_vtbl, NULL};

/* gmr_oom_adaptor_create, counting into `shared` when it is the on_oom of
 * the limiting adaptor `upstream` (oom_internal.h). */
static gmr_status create(gmr_resource *upstream, const gmr_oom_policy *policy,
                         gmr__oom_counters *shared, gmr_oom_adaptor **out) {
  if (out != NULL) *out = NULL;
  if (policy != NULL && gmr_oom_policy_check(policy) != GMR_OK) return GMR_ERR_INVALID_ARGUMENT;
  gmr_oom_adaptor *a = NULL;
  gmr_status st = GMR_ERR_INVALID_ARGUMENT;
  /* From here on the policy is ours: every failure releases it. */
  if (out != NULL && gmr__resource_check_vtbl(upstream) == GMR_OK) {
    a = calloc(1, sizeof *a);
    st = GMR_ERR_OUT_OF_MEMORY;
  }
  if (a == NULL) {
    if (policy != NULL && policy->release != NULL) policy->release(policy->ctx);
    return st;
  }
  gmr__adaptor_init(&a->base, &oom_vtbl, upstream);
  gmr__resource_type_register(&oom_type);
  a->policy = policy != NULL ? *policy : (gmr_oom_policy)GMR_OOM_POLICY_FAIL_INIT;
  a->counts = shared != NULL ? shared : &a->own;
  if (!gmr__cond_init_monotonic(&a->cond)) {
    free_adaptor(a);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  if (pthread_mutex_init(&a->mutex, NULL) != 0) {
    pthread_cond_destroy(&a->cond);
    free_adaptor(a);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  a->sync_ready = true;
  if (!gmr__event_listeners_init(&a->events)) {
    free_adaptor(a);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  *out = a;
  return GMR_OK;
}

gmr_status gmr_oom_adaptor_create(gmr_resource *upstream, const gmr_oom_policy *policy,
                                  gmr_oom_adaptor **out) {
  return create(upstream, policy, NULL, out);
}

gmr_status gmr__limiting_with_oom_create(gmr_resource *upstream,
                                         const gmr_limiting_adaptor_config *config,
                                         const gmr_oom_policy *on_oom,
                                         gmr_limiting_adaptor **limiting, gmr_resource **top) {
  *limiting = NULL;
  *top = NULL;
  if ((on_oom != NULL && gmr_oom_policy_check(on_oom) != GMR_OK) ||
      (config != NULL && gmr_limit_policy_check(&config->on_limit) != GMR_OK)) {
    return GMR_ERR_INVALID_ARGUMENT; /* nothing taken over yet */
  }
  gmr_limiting_adaptor *lim = NULL;
  gmr_status st = gmr_limiting_adaptor_create(upstream, config, &lim);
  bool acts = on_oom != NULL && on_oom->decide != NULL;
  if ((st != GMR_OK || !acts) && on_oom != NULL && on_oom->release != NULL) {
    on_oom->release(on_oom->ctx); /* no layer will hold it */
  }
  if (st != GMR_OK) return st;
  gmr_resource *lr = gmr_limiting_adaptor_as_resource(lim);
  gmr_oom_adaptor *oom = NULL;
  if (acts) {
    st = create(lr, on_oom, gmr__limiting_oom_counters(lim), &oom);
    if (st != GMR_OK) {
      GMR_IGNORE_STATUS(gmr_resource_destroy(lr)); /* nothing was allocated through it */
      return st;
    }
  }
  *limiting = lim;
  *top = oom != NULL ? gmr_oom_adaptor_as_resource(oom) : lr;
  return GMR_OK;
}

gmr__event_listeners *gmr__oom_adaptor_events(gmr_resource *r) {
  /* The vtable itself: this file owns it (no need for the table of types). */
  return r != NULL && r->vtbl == &oom_vtbl ? &((gmr_oom_adaptor *)(void *)r)->events : NULL;
}

void gmr__oom_counters_read(const gmr__oom_counters *c, gmr_oom_counts *out) {
  out->size = sizeof *out;
  out->version = GMR_OOM_COUNTS_VERSION;
  out->failure_count = atomic_load_explicit(&c->failure_count, memory_order_relaxed);
  out->retry_count = atomic_load_explicit(&c->retry_count, memory_order_relaxed);
  out->recovered_count = atomic_load_explicit(&c->recovered_count, memory_order_relaxed);
  out->gave_up_count = atomic_load_explicit(&c->gave_up_count, memory_order_relaxed);
  out->reentrant_count = atomic_load_explicit(&c->reentrant_count, memory_order_relaxed);
  out->trim_count = atomic_load_explicit(&c->trim_count, memory_order_relaxed);
  out->trimmed_bytes = atomic_load_explicit(&c->trimmed_bytes, memory_order_relaxed);
  out->wait_count = atomic_load_explicit(&c->wait_count, memory_order_relaxed);
  out->wait_timeout_count = atomic_load_explicit(&c->wait_timeout_count, memory_order_relaxed);
}

gmr_status gmr_oom_adaptor_get_counts(const gmr_oom_adaptor *a, gmr_oom_counts *out) {
  const size_t header = offsetof(gmr_oom_counts, version) + sizeof out->version;
  if (a == NULL || out == NULL || out->size < header || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_oom_counts c = GMR_OOM_COUNTS_INIT;
  gmr__oom_counters_read(a->counts, &c);
  /* The header stays the caller's; nothing past out->size is written. */
  size_t n = out->size < sizeof c ? out->size : sizeof c;
  if (n > header) memcpy((char *)out + header, (const char *)&c + header, n - header);
  return GMR_OK;
}

size_t gmr_oom_adaptor_get_live_count(const gmr_oom_adaptor *a) {
  return atomic_load_explicit(&a->live_count, memory_order_relaxed);
}
