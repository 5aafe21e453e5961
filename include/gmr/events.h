/*
 * gmr/events.h: observe what limit and OOM policies do.
 *
 * The limiting adaptor, the OOM adaptor and the OOM policies report each
 * action they take (a refusal, a raised limit, an allowed overage, a retry, a
 * trim, a wait, giving up) as a gmr_event to the listeners registered on
 * that adaptor or on a layer above it in its stack
 * (gmr_resource_add_event_listener): a listener hears only the stack it
 * registered on. Profiling layers (an NVTX adaptor) and tests turn events
 * into marks or counts.
 *
 * Cost: with no listener, emitting an event is one relaxed atomic load;
 * adaptors pay nothing else on their hot paths.
 *
 * Listeners run synchronously, in the thread that took the action, while a
 * read lock of the listener list is held: they must be quick, must not block
 * on other threads that allocate through gmr, and must not add or remove
 * listeners (that would deadlock). They may allocate through gmr stacks.
 *
 * Thread-safe: yes (internal read-write lock).
 */
#ifndef GMR_EVENTS_H_
#define GMR_EVENTS_H_

#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* XX(NAME, value, "name"). Kinds are only ever appended. */
#define GMR_EVENT_KIND_MAP(XX)                    \
  XX(LIMIT_REFUSED, 1, "limit_refused")           \
  XX(LIMIT_RAISED, 2, "limit_raised")             \
  XX(LIMIT_OVERAGE, 3, "limit_overage")           \
  XX(OOM_RETRY, 4, "oom_retry")                   \
  XX(OOM_TRIM, 5, "oom_trim")                     \
  XX(OOM_WAIT, 6, "oom_wait")                     \
  XX(OOM_GAVE_UP, 7, "oom_gave_up")

typedef enum gmr_event_kind {
#define GMR_EVENT_KIND_ENUM_(name, value, text) GMR_EVENT_##name = value,
  GMR_EVENT_KIND_MAP(GMR_EVENT_KIND_ENUM_)
#undef GMR_EVENT_KIND_ENUM_
} gmr_event_kind;

/**
 * One policy action. Fields that do not apply to a kind are 0.
 *
 *   LIMIT_REFUSED  a request would pass the limit and the limit policy
 *                  refused it. limit_bytes: the limit; used_bytes: charged
 *                  bytes outstanding before the request.
 *   LIMIT_RAISED   the limit policy raised the limit. limit_bytes: the old
 *                  limit; value_bytes: the new one.
 *   LIMIT_OVERAGE  the limit policy let a request pass the limit.
 *                  value_bytes: bytes by which the total now exceeds the limit.
 *   OOM_RETRY      an OOM policy asked for another attempt (attempt: its number, 1 first).
 *   OOM_TRIM       an OOM policy trimmed the stack below; value_bytes: bytes
 *                  released; status: the trim's status.
 *   OOM_WAIT       an OOM policy waited for a free; value_bytes: 1 if a free
 *                  came, 0 if the wait timed out; duration_ns: time waited.
 *   OOM_GAVE_UP    an OOM policy (not `fail`) gave up; status: the failure returned.
 *
 * `scope_stream` is true when the limit concerned is a per-stream limit of
 * `stream` rather than the adaptor's global one.
 */
typedef struct gmr_event {
  gmr_event_kind kind;
  const gmr_resource *source; /* the adaptor that acted; borrowed */
  const char *policy_name;    /* "increase", "trim_retry", ...; static or owned by the adaptor */
  size_t bytes;               /* bytes of the request (limiting: the bytes charged) */
  gmr_stream stream;          /* stream of the request */
  uint32_t attempt;           /* OOM events: attempt number (0 = the first try) */
  gmr_status status;          /* OOM_TRIM / OOM_GAVE_UP, see above */
  size_t limit_bytes;         /* limit events, see above */
  size_t used_bytes;          /* limit events, see above */
  size_t value_bytes;         /* see above */
  uint64_t duration_ns;       /* OOM_WAIT */
  int scope_stream;           /* limit events: 1 for a per-stream limit */
} gmr_event;

/* A listener. `ctx` is what was given at registration. */
typedef void gmr_event_listener_fn(void *ctx, const gmr_event *event);

/* At most this many listeners at once. */
#define GMR_EVENT_MAX_LISTENERS 16

/**
 * Register `fn` with `ctx` on `r`: it receives every event that `r` or a
 * layer below it (its upstream, and so on down) reports from now on. Layers
 * that report events: limiting and OOM adaptors (with their policies); a
 * stack without one reports nothing, and registering on it is allowed.
 * The same (fn, ctx) pair may be registered once per layer.
 * Ownership: `ctx` is borrowed until gmr_resource_remove_event_listener()
 * returns; call it before destroying `r` or a layer below it.
 * Thread-safe: yes; waits for listeners running in other threads. Must not
 * be called from a listener. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (r invalid, fn NULL, the upstream
 * links loop back up the stack, or the pair is already registered on a layer
 * below r); GMR_ERR_BUSY (a layer has
 * GMR_EVENT_MAX_LISTENERS listeners). Nothing changes on failure.
 * Source: gmr's own (RMM has no event hook).
 */
GMR_API GMR_NODISCARD gmr_status gmr_resource_add_event_listener(gmr_resource *r,
                                                                 gmr_event_listener_fn *fn,
                                                                 void *ctx);

/**
 * Unregister the pair (fn, ctx) from `r` and every layer below it. When it
 * returns, no thread runs `fn` with `ctx` for those layers any more, so
 * `ctx` may be freed. Not concurrently with an add or remove of the same
 * pair. Thread-safe: yes; waits for running listeners. Must not be called
 * from a listener. Stream/device: no CUDA call.
 * Returns GMR_OK, or GMR_ERR_INVALID_ARGUMENT (r invalid, fn NULL, the
 * upstream links loop back up the stack, or a reporting layer at or below r
 * lacks the pair; nothing changes).
 * Source: gmr's own.
 */
GMR_API gmr_status gmr_resource_remove_event_listener(gmr_resource *r, gmr_event_listener_fn *fn,
                                                      void *ctx);

/** "limit_refused", ..., or "unknown". Static string. Thread-safe: yes. */
GMR_API const char *gmr_event_kind_name(gmr_event_kind kind);

#ifdef __cplusplus
}
#endif

#endif /* GMR_EVENTS_H_ */
