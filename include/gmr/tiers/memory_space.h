/*
 * gmr/tiers/memory_space.h: memory tiers and memory spaces, the locations a tier
 * manager (gmr/tiers/tier_manager.h) reserves and allocates memory in.
 *
 * A memory space is one location of one tier:
 *   (GPU, device)     device memory of one GPU;
 *   (HOST, numa node) pinned host memory placed on one NUMA node (the index
 *                     names the node unless `numa_node` says otherwise);
 *   (DISK, mount)     space on one file system, accounted for, never allocated.
 * Each has a capacity, a reservation limit (a fraction of the capacity that
 * reservations may take together), downgrade trigger and stop fractions, an
 * allocator stack, a stream pool (gmr/tiers/stream_pool.h) and, through its
 * manager, a notification channel (gmr/tiers/notification_channel.h).
 *
 * Allocator stacks (GPU and HOST; built by the manager, owned by the space):
 *
 *   GPU:  memory_space > [oom(on_oom) >] limiting(per_stream) > STACK
 *         STACK is any gmr stack: a spec (default "cuda(kind=async)", an
 *         async pool on the space's device) or a resource the caller lends.
 *   HOST: memory_space > [oom(on_oom) >] limiting(per_stream) > fixed_block > numa_host
 *         fixed-size blocks (default 1 MiB, chunks of 128, 4 chunks at create)
 *         over pinned host memory bound to the space's NUMA node
 *         (gmr/tiers/numa_host_resource.h).
 *   DISK: no allocator. Allocating from a DISK space returns
 *         GMR_ERR_UNSUPPORTED; a DISK reservation carries a file path.
 *
 * gmr_memory_space_as_resource() is the top of the stack, a gmr_resource like
 * any other. A request on a stream bound to a reservation
 * (gmr_reservation_bind_stream) is charged to that reservation, and a request
 * past it goes to the reservation's limit policy (fail, ignore, increase: the
 * policies of gmr/policy.h, run by the limiting adaptor's per-stream limits);
 * a request on a stream without a reservation is "untracked": allowed, or
 * refused with GMR_ERR_NO_RESERVATION when the space says
 * `require_reservation`. Every request is also held to the space's capacity,
 * a hard limit for everybody. A request on a bound stream that passes both
 * its reservation and the capacity goes to the reservation's policy first
 * (cuCascade's order): `increase` grows the reservation as far as the space's
 * reservation limit allows (the growth is kept and counted as a raise), then
 * the capacity refuses the request; the failure message says both.
 *
 * Accounting (bytes; charged sizes: rounded to 256 bytes on GPU, to whole
 * blocks on HOST):
 *   reserved          sum of the sizes of the space's reservations;
 *   allocated         live allocations through the space;
 *   reserved_allocated  the part of `allocated` made on bound streams;
 *   untracked         allocated - reserved_allocated;
 *   used              untracked + the sum over reservations of
 *                     max(size, allocated on its stream): what the space has
 *                     promised or handed out;
 *   available         reservation limit - used (0 when negative).
 * A reservation fits when used + its size <= the reservation limit.
 *
 * Downgrade thresholds (hysteresis): should_downgrade is true while used is
 * above trigger * capacity; should_stop_downgrading is true once used is at
 * or below stop * capacity; amount_to_downgrade is used - stop * capacity
 * (0 below). gmr_memory_space_poll_downgrade() keeps the state between the
 * two: it starts downgrading above the trigger and keeps saying so until
 * used falls to the stop level, so data is not moved back and forth when
 * use hovers around one threshold.
 *
 * Source: cuCascade's memory_space, gpu/host/disk_memory_space_config
 * (reservation_limit_fraction, downgrade_trigger_fraction,
 * downgrade_stop_fraction, per_stream_reservation), reservation_aware_resource_adaptor,
 * fixed_size_host_memory_resource, disk_access_limiter.
 *
 * Thread-safe: yes. Allocation goes through atomics (and, with
 * require_reservation, a lock-free stream lookup); the accounting queries take
 * the manager's mutex.
 */
#ifndef GMR_MEMORY_SPACE_H_
#define GMR_MEMORY_SPACE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmr/config.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/policy.h"
#include "gmr/resource.h"
#include "gmr/status.h"
#include "gmr/tiers/stream_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Memory tiers, fastest first. */
typedef enum gmr_tier { GMR_TIER_GPU = 0, GMR_TIER_HOST = 1, GMR_TIER_DISK = 2 } gmr_tier;

#define GMR_TIER_COUNT 3

/**
 * The name of `tier`: "GPU", "HOST", "DISK", or "unknown" for a value
 * outside the enum. Ownership: a static string, never to be freed.
 * Thread-safe: yes (pure). Stream/device: no CUDA call.
 */
GMR_API const char *gmr_tier_name(gmr_tier tier);

/**
 * Parse a tier name ("GPU", "HOST", "DISK"; any case) into *out.
 * Ownership: `name` is read during the call only.
 * Thread-safe: yes (pure). Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is set.
 *   GMR_ERR_INVALID_ARGUMENT  name or out is NULL, or name is no tier's.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tier_from_name(const char *name, gmr_tier *out);

/* One location: (GPU, device), (HOST, numa node), (DISK, mount number). */
typedef struct gmr_memory_space_id {
  gmr_tier tier;
  int index;
} gmr_memory_space_id;

/* Longest spec, mount path: terminating NUL included. */
#define GMR_MEMORY_SPACE_TEXT_BYTES 256

/* The largest capacity a space may be given: INT64_MAX / 2 bytes (4 EiB).
 * Anything above (SIZE_MAX among them) cannot be real memory; it is refused
 * at create, so that the books' sums (used + request, a reservation's size
 * + its growth) never wrap. */
#define GMR_MEMORY_SPACE_MAX_CAPACITY_BYTES ((size_t)(INT64_MAX / 2))

typedef struct gmr_memory_space_config {
  gmr_memory_space_id id;
  size_t capacity_bytes;              /* 0: detect (device memory, node memory, free disk
                                         space); at most GMR_MEMORY_SPACE_MAX_CAPACITY_BYTES,
                                         and for GPU at most the device's memory */
  double reservation_limit_fraction;  /* of capacity, in (0, 1] */
  double downgrade_trigger_fraction;  /* of capacity, in (0, 1] */
  double downgrade_stop_fraction;     /* of capacity, in [0, trigger] */
  bool require_reservation;           /* refuse allocations on streams without one */
  size_t max_stream_slots;            /* distinct streams with their own counters (bound
                                         streams need one); GPU/HOST */
  gmr_limit_policy on_limit;          /* reservations' default limit policy (copied; its
                                         ctx is borrowed, its release never called).
                                         Default `fail`, on purpose (cuCascade: `ignore`):
                                         see gmr_memory_space_config_default() */
  gmr_oom_policy on_oom;              /* the space's OOM policy (owned, as in
                                         gmr_oom_adaptor_create): an oom layer
                                         over the limiting adaptor, which
                                         leaves the limits' refusals to
                                         on_limit (docs/stack_spec.md) */
  size_t stream_count;                /* streams in the space's pool (0: no pool) */
  int stream_device;                  /* HOST/DISK streams' device; -1: current at create */
  /* GPU */
  gmr_resource *upstream;             /* borrowed stack; NULL: build stack_spec */
  char stack_spec[GMR_MEMORY_SPACE_TEXT_BYTES]; /* "" : "cuda(kind=async)" */
  int downgrade_numa_node;            /* HOST space (index = NUMA node) preferred for
                                         downgrades from this GPU; -1: any */
  /* HOST */
  int numa_node;                      /* node to place pages on (default: the index);
                                         -1: no placement */
  size_t block_bytes;                 /* multiple of 256 */
  size_t blocks_per_chunk;
  size_t initial_chunk_count;
  /* DISK */
  char mount_path[GMR_MEMORY_SPACE_TEXT_BYTES]; /* required for DISK */
} gmr_memory_space_config;

/**
 * The defaults for a space of `tier` at `index`: capacity detected,
 * reservation limit 0.85, trigger 0.85, stop 0.65 (cuCascade's example), no
 * reservation required, 1024 stream slots, fail policies, 16 streams (none
 * for DISK), GPU stack "cuda(kind=async)", HOST blocks of 1 MiB in chunks of
 * 128 with 4 chunks at create, DISK mount path "" (set it). An unknown tier
 * gets the GPU defaults with that tier (gmr_tier_manager_create refuses it).
 *
 * The default limit policy of reservations (on_limit) is `fail`, where
 * cuCascade's is `ignore`; gmr keeps `fail` on purpose. With `ignore` a
 * reservation is advice: a stream that underestimated its need takes bytes
 * past its reservation from what the space promised to other reservations,
 * and the space's capacity then refuses one of *them*, inside its own
 * reservation, far from the cause. With `fail` the request past the
 * reservation is refused on the stream that made it
 * (GMR_ERR_LIMIT_EXCEEDED, naming the reservation's limit). Set on_limit to
 * `ignore` (gmr_limit_policy_from_name, or bind with it) for cuCascade's
 * behaviour.
 *
 * Units: bytes. Ownership: returned by value; it holds no pointer to free.
 * Thread-safe: yes (pure). Stream/device: no CUDA call.
 * Source: cuCascade's gpu/host/disk_memory_space_config defaults (except
 *   on_limit, above).
 */
GMR_API gmr_memory_space_config gmr_memory_space_config_default(gmr_tier tier, int index);

typedef struct gmr_memory_space gmr_memory_space;

/**
 * The space's allocator: allocate and free through it as through any
 * resource (see the banner for reservations and untracked requests).
 * Allocation statuses beyond the stack's own: GMR_ERR_NO_RESERVATION (the
 * space requires a reservation and the stream has none), GMR_ERR_UNSUPPORTED
 * (a DISK space), GMR_ERR_LIMIT_EXCEEDED (past the reservation, by its
 * policy, which may have grown the reservation part of the way: the growth
 * stays; past the capacity, after the policy of a bound stream's
 * reservation was asked). Nothing is allocated on failure. A free of a pointer that is not live in the
 * space returns GMR_ERR_UNKNOWN_POINTER, a second free included (the space
 * keeps no record of past frees); a free with another size or alignment is
 * named by the stack below (GMR_ERR_FREE_MISMATCH); nothing is released
 * then. The space keeps a table of its live allocations (16 mutex-guarded
 * shards), so that a free knows which reservation, if any, the memory was
 * charged to. gmr_resource_destroy() on it returns GMR_ERR_UNSUPPORTED: the
 * manager owns the space.
 * Ownership: borrowed from the manager; valid until the manager is destroyed.
 * Thread-safe: yes. NULL for NULL.
 * Stream/device: this call makes none; allocations are stream-ordered as
 *   the stack below makes them (gmr/resource.h).
 * Source: cuCascade's reservation_aware_resource_adaptor.
 * A cast (the gmr_memory_space starts with its gmr_resource), so no call.
 */
static inline gmr_resource *gmr_memory_space_as_resource(gmr_memory_space *space) {
  return (gmr_resource *)(void *)space;
}

/**
 * The gmr_memory_space behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "memory_space") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_memory_space *gmr_memory_space_from_resource(gmr_resource *r) {
  return (gmr_memory_space *)gmr_resource_downcast(r, "memory_space");
}

/**
 * The space's id (tier and index), as configured.
 * pre: space is not NULL (there is no id to return for NULL).
 * Thread-safe: yes (fixed at create). Stream/device: no CUDA call.
 */
GMR_API gmr_memory_space_id gmr_memory_space_get_id(const gmr_memory_space *space);

/**
 * The capacity in bytes (as configured, or detected at create); 0 for NULL.
 * Thread-safe: yes (fixed at create). Stream/device: no CUDA call.
 */
GMR_API size_t gmr_memory_space_get_capacity_bytes(const gmr_memory_space *space);

/**
 * The space's stream pool (NULL when stream_count was 0, or for NULL).
 * Acquire and release its streams with gmr/tiers/stream_pool.h.
 * Ownership: borrowed: the manager destroys it.
 * Thread-safe: yes (fixed at create). Stream/device: no CUDA call.
 */
GMR_API gmr_stream_pool *gmr_memory_space_get_stream_pool(gmr_memory_space *space);

/**
 * The limiting adaptor of the space's stack (NULL for a DISK space or
 * NULL), for its counters (gmr_limiting_adaptor_get_stats).
 * Ownership: borrowed: the manager destroys it.
 * Thread-safe: yes (fixed at create). Stream/device: no CUDA call.
 */
GMR_API gmr_limiting_adaptor *gmr_memory_space_get_limiting_adaptor(gmr_memory_space *space);

/**
 * Bytes a new reservation may take now: reservation limit - used (0 below);
 * 0 for NULL.
 * Thread-safe: yes (under the manager's mutex; allocations in flight may not
 *   be counted). Stream/device: no CUDA call.
 */
GMR_API size_t gmr_memory_space_get_available_bytes(gmr_memory_space *space);

/**
 * Whether used > trigger * capacity now (no hysteresis: see
 * gmr_memory_space_poll_downgrade()); false for NULL.
 * Thread-safe: yes (under the manager's mutex). Stream/device: no CUDA call.
 * Source: cuCascade's memory_space::should_downgrade_memory.
 */
GMR_API bool gmr_memory_space_should_downgrade(gmr_memory_space *space);

/**
 * Whether used <= stop * capacity now; true for NULL.
 * Thread-safe: yes (under the manager's mutex). Stream/device: no CUDA call.
 * Source: cuCascade's memory_space::should_stop_downgrading_memory.
 */
GMR_API bool gmr_memory_space_should_stop_downgrading(gmr_memory_space *space);

/**
 * Bytes to move to a slower tier to reach the stop level: used - stop *
 * capacity, 0 when not above; 0 for NULL.
 * Thread-safe: yes (under the manager's mutex). Stream/device: no CUDA call.
 * Source: cuCascade's memory_space::get_amount_to_downgrade.
 */
GMR_API size_t gmr_memory_space_get_amount_to_downgrade(gmr_memory_space *space);

/**
 * The downgrade state with hysteresis: becomes true when used passes the
 * trigger, stays true until used is at or below the stop level, then false
 * until the trigger is passed again. *out_amount (may be NULL) receives
 * amount_to_downgrade while downgrading, 0 otherwise.
 * Units: bytes. Ownership: the outputs are the caller's.
 * Thread-safe: yes (the state changes under the manager's mutex; two
 *   pollers see one transition between them).
 * Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out_downgrading (and *out_amount) are set.
 *   GMR_ERR_INVALID_ARGUMENT  space or out_downgrading is NULL.
 * On failure the state is unchanged and *out_amount (when given) is 0.
 */
GMR_API GMR_NODISCARD gmr_status gmr_memory_space_poll_downgrade(gmr_memory_space *space,
                                                                 bool *out_downgrading,
                                                                 size_t *out_amount);

/* Counters and accounting of a space; the caller sets size and version. */
typedef struct gmr_memory_space_stats {
  size_t size;
  uint32_t version;
  gmr_memory_space_id id;
  size_t capacity_bytes;
  size_t reservation_limit_bytes;
  size_t downgrade_trigger_bytes;
  size_t downgrade_stop_bytes;
  size_t reserved_bytes;             /* sum of reservation sizes */
  size_t peak_reserved_bytes;
  size_t reservation_count;          /* live reservations */
  size_t bound_stream_count;         /* reservations bound to a stream */
  size_t allocated_bytes;            /* live allocations (charged bytes) */
  size_t peak_allocated_bytes;
  size_t reserved_allocated_bytes;   /* of those, on bound streams */
  size_t untracked_bytes;            /* of those, on streams without a reservation */
  size_t used_bytes;                 /* promised or handed out (see the banner) */
  size_t available_bytes;            /* reservation limit - used */
  bool downgrading;                  /* the hysteresis state */
  uint64_t downgrade_start_count;    /* times the trigger was passed (poll) */
  uint64_t no_reservation_count;     /* allocations refused for want of a reservation */
  uint64_t reservation_raise_count;  /* reservations grown by their limit policy */
  uint64_t reservation_overage_count;/* requests let past a reservation (ignore) */
  uint64_t reservation_refusal_count;/* requests a reservation's policy refused */
} gmr_memory_space_stats;

#define GMR_MEMORY_SPACE_STATS_VERSION 1u
#define GMR_MEMORY_SPACE_STATS_INIT                                                          \
  {sizeof(gmr_memory_space_stats), GMR_MEMORY_SPACE_STATS_VERSION, {GMR_TIER_GPU, 0}, 0, 0, \
   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, 0, 0, 0, 0, 0}

/**
 * Fill *out with a snapshot of the space's accounting (the caller set size
 * and version: GMR_MEMORY_SPACE_STATS_INIT; fields past `size` are left
 * alone).
 * Units: bytes, unless a field is named _count.
 * Thread-safe: yes (under the manager's mutex; the allocation counters may
 *   miss requests in flight). Stream/device: no CUDA call.
 * Returns:
 *   GMR_OK                    *out is filled.
 *   GMR_ERR_INVALID_ARGUMENT  space or out is NULL, out->size is smaller
 *                             than the size+version header, or
 *                             out->version is 0.
 * On failure *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_memory_space_get_stats(gmr_memory_space *space,
                                                            gmr_memory_space_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* GMR_MEMORY_SPACE_H_ */
