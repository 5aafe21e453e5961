/*
 * core/events.h (internal): emitting gmr_events (gmr/events.h).
 *
 * Adaptors build an event only when gmr__events_enabled() says a listener is
 * registered, so the hot path costs one relaxed atomic load.
 *
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

/* Number of registered listeners; read with a relaxed load. */
extern _Atomic unsigned gmr__event_listener_count;

static inline bool gmr__events_enabled(void) {
  return atomic_load_explicit(&gmr__event_listener_count, memory_order_relaxed) != 0;
}

/* Deliver `event` to every listener (cheap no-op when there is none). */
void gmr__event_emit(const gmr_event *event);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_EVENTS_H_ */
