/*
 * gmr/oom_adaptor.h: an adaptor that gives any stack an OOM policy.
 *
 * It forwards every call to its upstream; when the upstream fails a request
 * for lack of memory (GMR_ERR_OUT_OF_MEMORY, or GMR_ERR_LIMIT_EXCEEDED from a
 * limiting adaptor below), its policy (gmr/policy.h) may trim the stack below,
 * wait for a free that passes through this adaptor, or call a user callback,
 * then retry, at most max_attempts times and never re-entrantly. With `wait`
 * above a limiting adaptor (`oom(policy=wait) > limiting(limit=8GiB) > ...`)
 * requests block until the limit admits them or the timeout passes. It is
 * the one place an OOM policy runs: the spec shorthand `limiting(on_oom=P)`
 * builds `oom(policy=P) > limiting(...)`, whose OOM layer leaves the limit's
 * own refusals to the limit policy and counts into the limiting adaptor's
 * stats (gmr/limiting_adaptor.h, docs/stack_spec.md).
 *
 * Optional slots: record_stream is forwarded to the upstream;
 * allocate_capturing is forwarded to the upstream's allocate_capturing
 * without running the policy (a trim or a wait could synchronise or stall
 * the capture; the failure is returned as is); get_memory_info, trim and the
 * footprint are answered from below. extend (gmr_resource_extend, growth in place) is
 * forwarded to the upstream's without the policy: a caller whose extend fails
 * allocates elsewhere, and that allocation runs it; the live count does not
 * change. With the `fail` policy the adaptor calls its upstream directly
 * and never enters the policy machinery.
 *
 * Events (gmr/events.h): OOM_RETRY, OOM_TRIM, OOM_WAIT, OOM_GAVE_UP.
 * Thread-safe: yes (atomics; a mutex and condition variable for waiters).
 * Source: RMM's failure_callback_resource_adaptor; cuCascade's OOM handling
 * policies and notification channel.
 */
#ifndef GMR_OOM_ADAPTOR_H_
#define GMR_OOM_ADAPTOR_H_

#include <stddef.h>

#include "gmr/config.h"
#include "gmr/policy.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gmr_oom_adaptor gmr_oom_adaptor;

/**
 * Create an OOM adaptor over `upstream` with `policy` (NULL = fail).
 * Ownership: `upstream` is borrowed: it must outlive the adaptor. `policy` is
 *   copied; its `release` runs when the adaptor is destroyed, and on every
 *   failure of create except an invalid policy.
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (upstream invalid, out NULL, policy
 * fails gmr_oom_policy_check); GMR_ERR_OUT_OF_MEMORY (host allocation).
 * On failure *out is NULL and nothing needs to be destroyed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_oom_adaptor_create(gmr_resource *upstream,
                                                        const gmr_oom_policy *policy,
                                                        gmr_oom_adaptor **out);

/**
 * The gmr_oom_adaptor's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `a`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_oom_adaptor_as_resource(gmr_oom_adaptor *a) {
  return (gmr_resource *)(void *)a;
}

/**
 * The gmr_oom_adaptor behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "oom_adaptor") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_oom_adaptor *gmr_oom_adaptor_from_resource(gmr_resource *r) {
  return (gmr_oom_adaptor *)gmr_resource_downcast(r, "oom_adaptor");
}

/**
 * Copy what the policy did so far into *out, whose header the caller set
 * (GMR_OOM_COUNTS_INIT): the fields that fit in out->size, never the header
 * and nothing past out->size. The OOM layer of a spec's `limiting(on_oom=...)`
 * answers with the limiting adaptor's counts (its stats' `oom`), whose
 * failure_count the limiting adaptor counts itself.
 * Ownership: *out is the caller's.
 * Thread-safe: yes; counters are read one by one. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (a NULL argument, out->size
 * smaller than the header, or out->version 0; on failure *out is unchanged).
 */
GMR_API GMR_NODISCARD gmr_status gmr_oom_adaptor_get_counts(const gmr_oom_adaptor *a,
                                                            gmr_oom_counts *out);

/**
 * Live allocations made through the adaptor (destroy returns GMR_ERR_BUSY
 * while > 0). pre: a is not NULL. Thread-safe: yes; may miss calls in flight.
 */
GMR_API size_t gmr_oom_adaptor_get_live_count(const gmr_oom_adaptor *a);

#ifdef __cplusplus
}
#endif

#endif /* GMR_OOM_ADAPTOR_H_ */
