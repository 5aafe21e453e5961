/*
 * gmr/limiting_adaptor.h: an adaptor that caps the bytes outstanding through
 * it, with a pluggable limit policy and optional per-stream limits.
 *
 * Accounting: each allocation is charged its size rounded up to
 * `charge_alignment` (256 bytes by default, what RMM's limiting adaptor and
 * cuCascade charge), while the exact size is passed upstream. "Used" is the
 * sum of the charges of live allocations.
 *
 * Allocation: the charge is reserved atomically (compare-and-swap) before the
 * upstream is called, and given back if the upstream fails, so concurrent
 * requests can never jointly pass the limit and no path loses or
 * double-counts a byte. A request that would pass the limit goes to the limit
 * policy (gmr/policy.h): fail (GMR_ERR_LIMIT_EXCEEDED), ignore (allow and
 * count the overage), increase (raise the limit), or the user's own.
 *
 * Per-stream limits (optional, `per_stream`): the adaptor also charges each
 * allocation to its stream, and a stream may not pass its own limit
 * (cuCascade's per-stream reservations); the limit policy decides there too,
 * with `scope_stream` set. A free is charged back to the stream the memory was
 * allocated on, whatever stream the free names: the adaptor keeps a pointer ->
 * stream table for that, in per-stream mode only.
 *
 * Counting and enforcing: while nothing can refuse a request (no global
 * limit and no per-stream limits, the default) the adaptor only counts, in
 * per-thread lanes written after the upstream succeeded, so calls from many
 * threads share no written cache line. used_bytes and the counts are then
 * exact once calls have returned; peak_used_bytes is exact in a program where
 * one thread allocates and frees, otherwise within 1 MiB per other thread.
 * When a limit is set (at create, or by gmr_limiting_adaptor_set_limit()) the
 * adaptor enforces it from then on, with the shared counters described here;
 * what was counted moves into them, exactly, and the switch is never undone.
 *
 * Deallocation: the charge is taken off before the upstream is called (and
 * put back if the upstream refuses), so a bad free gets the upstream's
 * verdict (gmr/resource.h's vocabulary: GMR_ERR_DOUBLE_FREE for a pointer
 * freed before, from any gmr resource below) and changes nothing. The
 * adaptor keeps no table of pointers but in per-stream mode (RMM's
 * limiting_resource_adaptor keeps none), so it cannot tell a double free
 * from a wrong size itself. While enforcing, a free that names more bytes
 * than are outstanding is a bad free for sure: the upstream is asked for its
 * verdict with the books untouched (a second free of the last block
 * outstanding is GMR_ERR_DOUBLE_FREE, as any other). Below a resource that
 * keeps no books (a user's) such a free may release the memory: GMR_OK
 * (counted as a bad free, not a deallocation), and no charge is taken off,
 * since none is known to be that memory's (the count stays high, which can
 * only refuse more, never let a request past the limit). In per-stream mode
 * the pointer table answers first: a pointer not in it is
 * GMR_ERR_UNKNOWN_POINTER (also one freed before: the table forgets freed
 * pointers), one in it with more bytes than are outstanding
 * GMR_ERR_FREE_MISMATCH; neither reaches the upstream. While counting, the
 * adaptor trusts `bytes`. tracking > limiting names every bad free itself,
 * whatever the upstream.
 *
 * OOM policies are the OOM adaptor's (gmr/oom_adaptor.h): this adaptor runs
 * none (since 0.2.0; it took one as `on_oom` before). Put one above it with
 * gmr_oom_adaptor_create(); that layer also runs its policy when this
 * adaptor's limit refuses (GMR_ERR_LIMIT_EXCEEDED), so that `wait` waits for
 * room under the limit. A spec's `limiting(on_oom=P, oom_attempts=N,
 * wait_timeout_ms=T)` builds `oom(policy=P, attempts=N, wait_timeout_ms=T) >
 * limiting(...)` whose OOM layer leaves the limit's refusals to on_limit and
 * retries only failures from below it, as `on_oom` always did
 * (docs/stack_spec.md). This adaptor counts its upstream's failures for lack
 * of memory in its stats' `oom.failure_count`.
 *
 * Peaks (peak_used_bytes, each stream's peak) count allocations that
 * succeeded: a charge given back because the upstream failed never raises
 * them. A peak is the charged total at the moment the request was admitted,
 * so a concurrent request that was admitted but later failed below may still
 * show in another request's peak.
 *
 * Optional slots: allocate_capturing is charged and limited like allocate and
 * forwarded to the upstream's allocate_capturing, whose failure is returned
 * as is. record_stream is forwarded to the upstream;
 * get_memory_info, trim and the footprint are answered from below. extend
 * (gmr_resource_extend, growth in place) is charged the difference between the
 * charges of the new and the old size, against the global limit and, with
 * per_stream, the limit of the stream the allocation is charged to (whatever
 * stream the growth is ordered on; a pointer that is not live there is
 * GMR_ERR_UNKNOWN_POINTER), through the limit policy like an allocation,
 * before the upstream's extend is asked; a refused or failed growth charges
 * nothing. Allocation counts do not change; the later free gives the new
 * size.
 *
 * Events (gmr/events.h): LIMIT_REFUSED, LIMIT_RAISED, LIMIT_OVERAGE.
 *
 * Thread-safe: yes (per-thread lanes while counting, atomics while enforcing;
 * in per-stream mode the pointer table is split in 16 mutex-guarded shards).
 * Source: RMM's limiting_resource_adaptor; cuCascade's
 * reservation_aware_resource_adaptor.
 */
#ifndef GMR_LIMITING_ADAPTOR_H_
#define GMR_LIMITING_ADAPTOR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/policy.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A limit that never refuses anything. */
#define GMR_LIMIT_NONE SIZE_MAX

/* 0.2.0 removed `on_oom` (after on_limit): wrap the adaptor in gmr_oom_adaptor_create(). */
typedef struct gmr_limiting_adaptor_config {
  size_t limit_bytes;          /* global limit; GMR_LIMIT_NONE for none */
  size_t charge_alignment;     /* charges are rounded up to this; a power of two, 0 = 256 */
  gmr_limit_policy on_limit;   /* copied; see gmr/policy.h */
  bool per_stream;             /* account and limit per stream as well */
  size_t stream_limit_bytes;   /* per_stream: each stream's limit unless set otherwise */
  size_t max_streams;          /* per_stream: streams with their own counters (then shared), 0 = 64 */
} gmr_limiting_adaptor_config;

/* No limit, 256-byte charges, fail on limit, no per-stream limits. */
#define GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT \
  {GMR_LIMIT_NONE, 256u, GMR_LIMIT_POLICY_FAIL_INIT, false, GMR_LIMIT_NONE, 64u}

typedef struct gmr_limiting_adaptor gmr_limiting_adaptor;

/**
 * Create a limiting adaptor over `upstream`.
 *
 * Units: bytes.
 * Ownership: `upstream` is borrowed: it must outlive the adaptor and must not
 *   be moved. `config` is copied (NULL = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT),
 *   its limit policy by value. The policy's `release` runs when the adaptor
 *   is destroyed, and on every failure of create except an invalid policy
 *   (so a caller never has to release a checked policy itself).
 * Thread-safe: yes (creates an independent object).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  upstream invalid (no vtable with the required slots), out NULL,
 *                             charge_alignment not a power of two, or a limit
 *                             policy that fails gmr_limit_policy_check().
 *   GMR_ERR_OUT_OF_MEMORY     the host allocation for the adaptor (or its
 *                             listeners' lock) failed.
 * On failure *out is NULL and nothing needs to be destroyed.
 */
GMR_API GMR_NODISCARD gmr_status gmr_limiting_adaptor_create(
    gmr_resource *upstream, const gmr_limiting_adaptor_config *config,
    gmr_limiting_adaptor **out);

/**
 * The gmr_limiting_adaptor's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `a`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_limiting_adaptor_as_resource(gmr_limiting_adaptor *a) {
  return (gmr_resource *)(void *)a;
}

/**
 * The gmr_limiting_adaptor behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "limiting_adaptor") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_limiting_adaptor *gmr_limiting_adaptor_from_resource(gmr_resource *r) {
  return (gmr_limiting_adaptor *)gmr_resource_downcast(r, "limiting_adaptor");
}

/**
 * The global limit now, in bytes (GMR_LIMIT_NONE for none).
 * pre: a is not NULL. Thread-safe: yes.
 */
GMR_API size_t gmr_limiting_adaptor_get_limit(const gmr_limiting_adaptor *a);

/**
 * Change the global limit. Lowering it below the bytes in use refuses new
 * requests (per the limit policy) until frees bring use under it; nothing
 * already allocated is affected. The first limit other than GMR_LIMIT_NONE
 * on an adaptor that was counting switches it to enforcing: the call waits
 * (briefly: no thread holds it across an upstream call) until no thread is
 * inside a counter update, and moves the counts over.
 * Thread-safe: yes (requests in flight may be judged against either value;
 * one admitted while counting is charged even if it passes the new limit).
 * Stream/device: no CUDA call.
 * Returns GMR_OK or GMR_ERR_INVALID_ARGUMENT (a is NULL; nothing changes).
 */
GMR_API GMR_NODISCARD gmr_status gmr_limiting_adaptor_set_limit(gmr_limiting_adaptor *a,
                                                                size_t limit_bytes);

/**
 * Charged bytes outstanding now. pre: a is not NULL.
 * Thread-safe: yes; may miss requests in flight.
 */
GMR_API size_t gmr_limiting_adaptor_get_used_bytes(const gmr_limiting_adaptor *a);

/**
 * Set the limit of `stream` (per-stream mode only), in bytes.
 * Thread-safe: yes. Stream/device: no CUDA call (the stream is a key only).
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (a NULL); GMR_ERR_UNSUPPORTED (not
 * in per-stream mode); GMR_ERR_BUSY (max_streams streams already have
 * counters of their own: this one shares the overflow counters, whose limit
 * is not changed). Nothing changes on failure.
 */
GMR_API GMR_NODISCARD gmr_status gmr_limiting_adaptor_set_stream_limit(gmr_limiting_adaptor *a,
                                                                       gmr_stream stream,
                                                                       size_t limit_bytes);

/**
 * Charged bytes outstanding on `stream` and its limit (per-stream mode).
 * Either out pointer may be NULL. A stream never seen reports 0 and the
 * default stream limit. Units: bytes.
 * Thread-safe: yes; may miss requests in flight. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (a NULL); GMR_ERR_UNSUPPORTED (not
 * in per-stream mode). On failure the outputs are unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_limiting_adaptor_get_stream_usage(
    const gmr_limiting_adaptor *a, gmr_stream stream, size_t *used_bytes, size_t *limit_bytes);

/* Counters of a limiting adaptor. The caller sets `size` and `version`
 * (GMR_LIMITING_ADAPTOR_STATS_INIT); the adaptor fills what both versions know. */
typedef struct gmr_limiting_adaptor_stats {
  size_t size;                     /* sizeof the caller's struct */
  uint32_t version;                /* GMR_LIMITING_ADAPTOR_STATS_VERSION of the caller */
  size_t limit_bytes;              /* the global limit now */
  size_t used_bytes;               /* charged bytes outstanding */
  size_t peak_used_bytes;          /* high-water mark of used_bytes */
  uint64_t allocation_count;       /* successful allocations */
  uint64_t deallocation_count;     /* successful deallocations */
  uint64_t refused_count;          /* requests the limit policy refused */
  uint64_t upstream_failure_count; /* requests the upstream failed (each attempt) */
  uint64_t overage_count;          /* requests let past the limit (ignore) */
  size_t max_overage_bytes;        /* largest excess of used over limit allowed */
  uint64_t raise_count;            /* times the limit policy raised a limit */
  uint64_t bad_free_count;         /* bad frees it saw: more bytes than outstanding, unknown ptr */
  /* failure_count: the upstream's failures for lack of memory (every
   * attempt). The other counters: what the OOM policy of `limiting(on_oom=...)`
   * did, counted by the OOM layer that shorthand puts above this adaptor (the
   * same numbers as gmr_oom_adaptor_get_counts() of that layer); 0 without one
   * (a gmr_oom_adaptor created by hand counts in its own gmr_oom_counts).
   * Version 2: a gmr_oom_counts with its own header (version 1 had the same
   * counters without it); the adaptor fills that header with the size and
   * version of the gmr_oom_counts it wrote. */
  gmr_oom_counts oom;
} gmr_limiting_adaptor_stats;

/* Version 1: `oom` without its header; a version-1 caller still gets
 * that layout. */
#define GMR_LIMITING_ADAPTOR_STATS_VERSION 2u
/* Every field spelled out: C++ warns about partial initialisers. */
#define GMR_LIMITING_ADAPTOR_STATS_INIT                                                            \
  {sizeof(gmr_limiting_adaptor_stats), GMR_LIMITING_ADAPTOR_STATS_VERSION, 0, 0, 0, 0, 0, 0, 0, 0, \
   0, 0, 0, GMR_OOM_COUNTS_INIT}

/**
 * Snapshot the counters into `*out` (size and version set by the caller).
 * Thread-safe: yes; counters are read one by one and may be from slightly
 * different moments while other threads allocate. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL, or size smaller than the
 * size+version header, or version 0). On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_limiting_adaptor_get_stats(const gmr_limiting_adaptor *a,
                                                                gmr_limiting_adaptor_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_LIMITING_ADAPTOR_H_ */
