/*
 * core/events.c: the listener list of gmr/events.h.
 *
 * A read-write lock guards a small fixed array: emitters take it for reading
 * (many at once), add/remove for writing, so remove() returning means no
 * emitter still runs the removed listener.
 */
/* pthread_rwlock_* are POSIX, not C11. */
#define _POSIX_C_SOURCE 200809L

#include "core/events.h"

#include <pthread.h>
#include <stddef.h>

typedef struct listener {
  gmr_event_listener_fn *fn;
  void *ctx;
} listener;

_Atomic unsigned gmr__event_listener_count = 0;

static pthread_rwlock_t listeners_lock = PTHREAD_RWLOCK_INITIALIZER;
static listener listeners[GMR_EVENT_MAX_LISTENERS];
static size_t listeners_used; /* guarded by listeners_lock */

static size_t find(gmr_event_listener_fn *fn, void *ctx) {
  for (size_t i = 0; i < listeners_used; ++i) {
    if (listeners[i].fn == fn && listeners[i].ctx == ctx) return i;
  }
  return listeners_used;
}

gmr_status gmr_event_listener_add(gmr_event_listener_fn *fn, void *ctx) {
  if (fn == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr_status st = GMR_OK;
  pthread_rwlock_wrlock(&listeners_lock);
  if (find(fn, ctx) != listeners_used) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (listeners_used == GMR_EVENT_MAX_LISTENERS) {
    st = GMR_ERR_BUSY;
  } else {
    listeners[listeners_used].fn = fn;
    listeners[listeners_used].ctx = ctx;
    listeners_used++;
    atomic_store_explicit(&gmr__event_listener_count, (unsigned)listeners_used,
                          memory_order_relaxed);
  }
  pthread_rwlock_unlock(&listeners_lock);
  return st;
}

gmr_status gmr_event_listener_remove(gmr_event_listener_fn *fn, void *ctx) {
  gmr_status st = GMR_OK;
  pthread_rwlock_wrlock(&listeners_lock);
  size_t i = find(fn, ctx);
  if (fn == NULL || i == listeners_used) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else {
    listeners[i] = listeners[listeners_used - 1];
    listeners_used--;
    atomic_store_explicit(&gmr__event_listener_count, (unsigned)listeners_used,
                          memory_order_relaxed);
  }
  pthread_rwlock_unlock(&listeners_lock);
  return st;
}

void gmr__event_emit(const gmr_event *event) {
  if (!gmr__events_enabled()) return;
  pthread_rwlock_rdlock(&listeners_lock);
  for (size_t i = 0; i < listeners_used; ++i) listeners[i].fn(listeners[i].ctx, event);
  pthread_rwlock_unlock(&listeners_lock);
}

const char *gmr_event_kind_name(gmr_event_kind kind) {
  switch (kind) {
#define GMR_EVENT_KIND_NAME_(name, value, text) \
  case GMR_EVENT_##name:                        \
    return text;
    GMR_EVENT_KIND_MAP(GMR_EVENT_KIND_NAME_)
#undef GMR_EVENT_KIND_NAME_
    default:
      return "unknown";
  }
}
