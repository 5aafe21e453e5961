/*
 * adaptors/oom_internal.h (internal): `limiting(on_oom=P)`, the shorthand for
 * `oom(policy=P) > limiting(...)` that a spec and a memory space build, and
 * the OOM counters and event lists it shares. Its OOM layer leaves the
 * limit's own refusals to the limit policy and counts into the limiting
 * adaptor's gmr__oom_counters, whose failure_count that adaptor keeps itself
 * (docs/stack_spec.md says why). C++ (tests) sees the shorthand only: the
 * rest is C11 atomics. Thread-safe: yes (atomics).
 */
#ifndef GMR_ADAPTORS_OOM_INTERNAL_H_
#define GMR_ADAPTORS_OOM_INTERNAL_H_

#include "core/extension.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/policy.h"
#include "gmr/resource.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * `limiting(config) > upstream`, with `oom(on_oom)` above it when on_oom can
 * act (a policy other than `fail`; on_oom NULL: none). *limiting is the
 * limiting adaptor, *top the layer to use (the OOM layer, or *limiting);
 * destroy *top first, then *limiting when they differ.
 * Ownership: as gmr_limiting_adaptor_create and gmr_oom_adaptor_create: the
 * policies are released on every failure except an invalid policy, and a
 * `fail` on_oom is released at once (no layer holds it).
 * Thread-safe: yes (creates independent objects). Stream/device: no CUDA call.
 * Returns their statuses; on failure *limiting and *top are NULL and nothing
 * needs destroying.
 */
GMR_EXTENSION_API
gmr_status gmr__limiting_with_oom_create(gmr_resource *upstream,
                                         const gmr_limiting_adaptor_config *config,
                                         const gmr_oom_policy *on_oom,
                                         gmr_limiting_adaptor **limiting, gmr_resource **top);

#ifdef __cplusplus
}
#else

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/events.h"

/* What an OOM policy did: gmr_oom_counts, as atomics. */
typedef struct gmr__oom_counters {
  _Atomic uint64_t failure_count; /* lack-of-memory failures from below, every attempt */
  _Atomic uint64_t retry_count;
  _Atomic uint64_t recovered_count;
  _Atomic uint64_t gave_up_count;
  _Atomic uint64_t reentrant_count;
  _Atomic uint64_t trim_count;
  _Atomic uint64_t trimmed_bytes;
  _Atomic uint64_t wait_count;
  _Atomic uint64_t wait_timeout_count;
} gmr__oom_counters;

/* Fill the whole of *out (a gmr_oom_counts of this library's version, its
 * header included) from `c`. */
void gmr__oom_counters_read(const gmr__oom_counters *c, gmr_oom_counts *out);

static inline bool gmr__is_lack_of_memory(gmr_status st) {
  return st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED;
}

/* Count a failure of the layer below when it is for lack of memory. */
static inline void gmr__oom_counters_note_failure(gmr__oom_counters *c, gmr_status st) {
  if (gmr__is_lack_of_memory(st)) {
    atomic_fetch_add_explicit(&c->failure_count, 1, memory_order_relaxed);
  }
}

/* The OOM counters a limiting adaptor keeps for the shorthand (limiting_control.c). */
gmr__oom_counters *gmr__limiting_oom_counters(gmr_limiting_adaptor *a);

/* The event listeners of `r` when it is a layer that reports events (a
 * limiting adaptor, an OOM adaptor), else NULL (event_listeners.c). */
gmr__event_listeners *gmr__limiting_events(gmr_resource *r);
gmr__event_listeners *gmr__oom_adaptor_events(gmr_resource *r);

#endif /* __cplusplus */

#endif /* GMR_ADAPTORS_OOM_INTERNAL_H_ */
