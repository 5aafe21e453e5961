/*
 * core/events.h (internal): lists of gmr_event listeners (gmr/events.h).
 * Each layer that reports events (the limiting and OOM adaptors) owns one
 * list; a listener registers on a resource and
 * lands in the list of every such layer at or below it
 * (gmr_resource_add_event_listener); there is no process-wide list.
 * Adaptors build an event only when gmr__events_enabled() says their list
 * has a listener, so the hot path costs one relaxed atomic load.
 * Thread-safe: yes.
 */
#ifndef GMR_CORE_EVENTS_H_
#define GMR_CORE_EVENTS_H_

#include <stdatomic.h>
#include <stdbool.h>

#include "gmr/events.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr__event_listener {
  gmr_event_listener_fn *fn;
  void *ctx;
} gmr__event_listener;

/* A read-write lock guards a small fixed array: emitters read (many at
 * once, recursively when a listener allocates), add/remove write, so remove
 * returning means no emitter still runs the removed listener. The lock is a
 * pthread_rwlock_t owned by events.c (a pointer: this header is included by
 * files compiled without POSIX's feature macros). */
typedef struct gmr__event_listeners {
  _Atomic unsigned count; /* read relaxed on the hot path */
  void *lock;
  gmr__event_listener items[GMR_EVENT_MAX_LISTENERS];
} gmr__event_listeners;

/* False when the lock cannot be made (nothing to deinit then). */
bool gmr__event_listeners_init(gmr__event_listeners *l);
void gmr__event_listeners_deinit(gmr__event_listeners *l);

/* GMR_OK; GMR_ERR_INVALID_ARGUMENT (fn NULL, or the pair is there already);
 * GMR_ERR_BUSY (full). Nothing changes on failure. */
gmr_status gmr__event_listeners_add(gmr__event_listeners *l, gmr_event_listener_fn *fn,
                                    void *ctx);
/* GMR_OK, or GMR_ERR_INVALID_ARGUMENT when the pair is not there. */
gmr_status gmr__event_listeners_remove(gmr__event_listeners *l, gmr_event_listener_fn *fn,
                                       void *ctx);

/* Whether the pair is in `l`. */
bool gmr__event_listeners_has(gmr__event_listeners *l, gmr_event_listener_fn *fn, void *ctx);

/* Whether `l` (may be NULL) has a listener. */
static inline bool gmr__events_enabled(gmr__event_listeners *l) {
  return l != NULL && atomic_load_explicit(&l->count, memory_order_relaxed) != 0;
}

/* Deliver `event` to `l`'s listeners (l may be NULL: nobody hears it). */
void gmr__event_emit(gmr__event_listeners *l, const gmr_event *event);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_EVENTS_H_ */
