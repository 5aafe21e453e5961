/*
 * gmr/tracking_adaptor.h: an adaptor that keeps the books of every live
 * allocation through it, counts per stream or per thread, and refuses bad
 * frees before they reach the upstream.
 *
 * Counters: current, peak and total bytes and allocations, overall and per
 * owner, where an owner is the allocation's stream (default) or the
 * allocating thread (cuCascade's two tracking modes). A free is charged back
 * to the owner recorded at allocation, whatever thread or stream frees.
 * Bytes are counted exactly as requested (no rounding). Scopes (push/pop)
 * count what happens within a stretch of a program, from zero, as RMM's
 * statistics_resource_adaptor push_counters/pop_counters do.
 *
 * Table: pointer -> {bytes, alignment, stream, sequence number, owner} for
 * every live allocation. A deallocation is checked against it and refused,
 * counted and never forwarded when it is bad:
 *   GMR_ERR_UNKNOWN_POINTER  never allocated through this adaptor;
 *   GMR_ERR_DOUBLE_FREE      freed already (the adaptor remembers, for each
 *                            64 MiB address region's shard of the table, its
 *                            last `recent_free_count` frees to tell these
 *                            apart; an older double free reads as unknown
 *                            pointer);
 *   GMR_ERR_FREE_MISMATCH    bytes or alignment differ from the allocation's,
 *                            or (with `check_stream`) the stream does.
 * The books are updated before the memory goes back upstream, and restored
 * if the upstream refuses, so another thread that receives the same address
 * can never be recorded first (RMM #2304).
 *
 * Zero bytes never reach the adaptor (see gmr/resource.h), so nothing records
 * a zero-byte allocation.
 *
 * Optional slots: allocate_capturing is forwarded to the upstream's
 * allocate_capturing and recorded and counted like an allocation (freed with
 * the ordinary deallocate). record_stream refuses a pointer that is not live
 * here with GMR_ERR_UNKNOWN_POINTER (the upstream never sees it) and forwards
 * the others. get_memory_info, trim and the footprint are answered from
 * below. extend (gmr_resource_extend) checks the live entry first (not live:
 * GMR_ERR_UNKNOWN_POINTER; another size or alignment: GMR_ERR_FREE_MISMATCH;
 * the upstream never sees either), forwards to the upstream's extend, and on
 * success records the new size (the free must then give it) and counts the
 * bytes added to the allocation's owner, the overall counters and an open
 * scope, as bytes allocated; allocation counts do not change.
 * pre: no free of an allocation runs while it is being extended.
 *
 * Thread-safe: yes. The overall counters and each owner's are kept per
 * thread (see gmr_tracking_adaptor_get_stats), so a thread on a stream of
 * its own makes no locked instruction for them; the table is split in 256
 * shards by 64 MiB address region (so threads whose memory comes from chunks
 * of their own rarely share one), each under a spin lock held only for one
 * table operation, which a shard used by one thread only does not take (it
 * is biased to that thread; the first other thread ends that for good with
 * one membarrier system call). Scopes take a mutex, and only while one is
 * open.
 * Source: RMM's tracking_resource_adaptor and statistics_resource_adaptor;
 * cuCascade's per-stream and per-thread allocation trackers.
 */
#ifndef GMR_TRACKING_ADAPTOR_H_
#define GMR_TRACKING_ADAPTOR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gmr/config.h"
#include "gmr/resource.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gmr_tracking_scope {
  GMR_TRACKING_PER_STREAM = 0, /* owners are streams */
  GMR_TRACKING_PER_THREAD = 1  /* owners are allocating threads */
} gmr_tracking_scope;

typedef struct gmr_tracking_adaptor_config {
  gmr_tracking_scope per;    /* what an owner is */
  bool check_stream;         /* refuse a free on another stream than the allocation's */
  size_t max_owners;         /* owners with counters of their own (then shared), 0 = 256 */
  size_t recent_free_count;  /* frees remembered to detect double frees, 0 = 4096; at most
                              * 2^32 (above: create fails, GMR_ERR_OUT_OF_MEMORY) */
} gmr_tracking_adaptor_config;

#define GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT {GMR_TRACKING_PER_STREAM, true, 256u, 4096u}

typedef struct gmr_tracking_adaptor gmr_tracking_adaptor;

/* current / peak / total of one quantity (style: mimalloc's mi_stat_count). */
typedef struct gmr_stat_count {
  int64_t current;
  int64_t peak;
  int64_t total;
} gmr_stat_count;

/* Counters of a tracking adaptor, or of one scope. The caller sets `size` and
 * `version` (GMR_TRACKING_ADAPTOR_STATS_INIT); the adaptor fills what both know. */
typedef struct gmr_tracking_adaptor_stats {
  size_t size;
  uint32_t version;
  gmr_stat_count bytes;        /* bytes live / high-water mark / allocated in all */
  gmr_stat_count allocations;  /* allocations live / high-water mark / made in all */
  uint64_t deallocation_count;          /* successful frees */
  uint64_t upstream_failure_count;      /* allocations the upstream failed */
  uint64_t unknown_pointer_count;       /* frees refused with GMR_ERR_UNKNOWN_POINTER */
  uint64_t double_free_count;           /* ... GMR_ERR_DOUBLE_FREE */
  uint64_t size_mismatch_count;         /* ... GMR_ERR_FREE_MISMATCH for bytes/alignment */
  uint64_t stream_mismatch_count;       /* ... GMR_ERR_FREE_MISMATCH for the stream */
  uint64_t owner_count;                 /* streams or threads seen */
} gmr_tracking_adaptor_stats;

#define GMR_TRACKING_ADAPTOR_STATS_VERSION 1u
/* Every field spelled out: C++ warns about partial initialisers. */
#define GMR_TRACKING_ADAPTOR_STATS_INIT                                                            \
  {sizeof(gmr_tracking_adaptor_stats), GMR_TRACKING_ADAPTOR_STATS_VERSION, {0, 0, 0}, {0, 0, 0},   \
   0, 0, 0, 0, 0, 0, 0}

/* Counters of one owner (a stream or a thread). */
typedef struct gmr_tracking_adaptor_owner_stats {
  size_t size;
  uint32_t version;
  uint64_t owner;             /* the stream's value, or the thread's id (from 1) */
  gmr_stat_count bytes;
  gmr_stat_count allocations;
} gmr_tracking_adaptor_owner_stats;

#define GMR_TRACKING_ADAPTOR_OWNER_STATS_VERSION 1u
#define GMR_TRACKING_ADAPTOR_OWNER_STATS_INIT                                                      \
  {sizeof(gmr_tracking_adaptor_owner_stats), GMR_TRACKING_ADAPTOR_OWNER_STATS_VERSION, 0,          \
   {0, 0, 0}, {0, 0, 0}}

/**
 * Create a tracking adaptor over `upstream`.
 * Ownership: `upstream` is borrowed: it must outlive the adaptor. `config` is
 *   copied (NULL = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT).
 * Thread-safe: yes. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (upstream invalid, out NULL, unknown
 * scope); GMR_ERR_OUT_OF_MEMORY (host allocation, or recent_free_count above
 * 2^32). On failure *out is NULL.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tracking_adaptor_create(
    gmr_resource *upstream, const gmr_tracking_adaptor_config *config,
    gmr_tracking_adaptor **out);

/**
 * The gmr_tracking_adaptor's gmr_resource, for the generic calls (NULL for NULL);
 * borrowed, it lives as long as `a`. A cast: every gmr handle has its
 * gmr_resource as its first member (gmr_resource_downcast()).
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_resource *gmr_tracking_adaptor_as_resource(gmr_tracking_adaptor *a) {
  return (gmr_resource *)(void *)a;
}

/**
 * The gmr_tracking_adaptor behind `r`, or NULL if `r` is NULL or not one:
 * gmr_resource_downcast(r, "tracking_adaptor") (the vtable's identity decides);
 * borrowed like `r`.
 * Thread-safe: yes. Stream/device: no CUDA call.
 */
static inline gmr_tracking_adaptor *gmr_tracking_adaptor_from_resource(gmr_resource *r) {
  return (gmr_tracking_adaptor *)gmr_resource_downcast(r, "tracking_adaptor");
}

/**
 * Snapshot the overall counters. The overall counters are kept per thread
 * and summed here (core/lanes: no cache line shared by threads is written on
 * the common path): current and total are exact once calls have returned;
 * the peak is exact in a program where one thread allocates and frees, and
 * otherwise within 1 MiB (256 allocations) per other thread that allocated
 * or freed of the true high-water mark. Owner counters
 * (gmr_tracking_adaptor_get_owner_stats) are kept the same way: exact for an
 * owner one thread uses (a stream of its own, or per-thread tracking), the
 * peak otherwise within a batch per other thread. Scopes are exact always.
 * Thread-safe: yes; counters are read one by one, so a snapshot taken while
 * other threads allocate may mix moments. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL, size below the header,
 * version 0; on failure *out is unchanged).
 */
GMR_API GMR_NODISCARD gmr_status gmr_tracking_adaptor_get_stats(const gmr_tracking_adaptor *a,
                                                                gmr_tracking_adaptor_stats *out);

/* In per-thread mode, the owner that gmr_tracking_adaptor_get_owner_stats()
 * reads as the calling thread (no stream has this address). */
#define GMR_TRACKING_OWNER_CALLING_THREAD UINT64_MAX

/**
 * Counters of one owner: `owner` is (uint64_t)(uintptr_t)stream in per-stream
 * mode; in per-thread mode, a thread's id (what out->owner and
 * gmr_tracking_adaptor_list_owners give: gmr numbers threads from 1, never
 * reusing a number) or GMR_TRACKING_OWNER_CALLING_THREAD for the calling
 * thread, whose id out->owner then names. Owners past max_owners share one
 * set of counters, reported for each of them.
 * Thread-safe: yes. Stream/device: no CUDA call (a stream is a key only).
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL, bad header, or an owner
 * never seen: on that failure *out holds zeros and the owner).
 */
GMR_API GMR_NODISCARD gmr_status gmr_tracking_adaptor_get_owner_stats(
    const gmr_tracking_adaptor *a, uint64_t owner, gmr_tracking_adaptor_owner_stats *out);

/**
 * The owners seen so far, in no particular order: up to `capacity` keys in
 * `owners`, their number in *count (which may exceed capacity).
 * Thread-safe: yes; owners appearing meanwhile may be missed. Stream/device:
 *   no CUDA call.
 * Returns GMR_OK or GMR_ERR_INVALID_ARGUMENT (NULL a or count, or NULL owners
 * with capacity > 0; on failure nothing is written).
 */
GMR_API GMR_NODISCARD gmr_status gmr_tracking_adaptor_list_owners(const gmr_tracking_adaptor *a,
                                                                  uint64_t *owners, size_t capacity,
                                                                  size_t *count);

/* Scopes nest at most this deep. */
#define GMR_TRACKING_MAX_SCOPE_DEPTH 64

/**
 * Open a scope: counters that start at zero and count, until the matching
 * pop, the bytes and allocations made and freed through the adaptor (RMM's
 * statistics_resource_adaptor::push_counters). Scopes nest: calls count in
 * the innermost open scope only, and a closed scope's counts are added to
 * the enclosing one's at pop.
 * Thread-safe: yes (an internal mutex, also taken by every allocation and
 * free while a scope is open); calls racing with the push may count on
 * either side of it. Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL); GMR_ERR_BUSY
 * (GMR_TRACKING_MAX_SCOPE_DEPTH scopes are open). On failure no scope is
 * opened.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tracking_adaptor_push_scope(gmr_tracking_adaptor *a);

/**
 * Close the innermost scope and report it in `out` (may be NULL), relative to
 * the scope (RMM's statistics_resource_adaptor::pop_counters): for bytes and
 * for allocations, `current` is what was allocated minus what was freed in
 * it (below zero when memory allocated before the scope was freed in it),
 * `peak` the highest `current` reached in it, `total` what was allocated in
 * it; the other counters are as gmr_tracking_adaptor_get_stats gives them.
 * The enclosing scope then adds the closed one: its current grows by the
 * closed current, its total by the closed total, and its peak becomes at
 * least its current at the push plus the closed peak. The overall counters
 * of gmr_tracking_adaptor_get_stats never depend on scopes.
 * Thread-safe: yes (the scope mutex). Stream/device: no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL a, bad header);
 * GMR_ERR_UNSUPPORTED (no scope is open). On failure no scope is closed and
 * *out is unchanged.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tracking_adaptor_pop_scope(gmr_tracking_adaptor *a,
                                                                gmr_tracking_adaptor_stats *out);

/**
 * Write every live allocation to `out`, one per line, owner by owner
 * (smallest owner key first) and oldest first within an owner; `#N` is the
 * allocation's number on its owner, from 1 (numbers count per owner and are
 * reserved by each thread in batches, so that threads share no counter on
 * the common path: an owner one thread uses is numbered 1, 2, 3...; one that
 * several threads use gets numbers unique on it, increasing per thread):
 *   gmr tracking_adaptor: 2 live allocations, 1536 bytes
 *     #3 ptr=0x7f.. bytes=512 alignment=256 stream=0x0 owner=0x0
 * and the number of live allocations in *out_count (may be NULL).
 * Thread-safe: yes (each shard is locked while it is copied). Stream/device:
 *   no CUDA call.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL a or out);
 * GMR_ERR_OUT_OF_MEMORY (no host memory for the copy). On failure nothing is
 * written and *out_count (when not NULL) is 0.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tracking_adaptor_report_leaks(const gmr_tracking_adaptor *a,
                                                                   FILE *out, size_t *out_count);

/**
 * Destroy the adaptor even with live allocations: report them to `report`
 * (may be NULL), give each back to the upstream on the stream it was
 * allocated on, then destroy. The caller promises nothing uses them any more.
 * Thread-safe: no. Stream/device: as the upstream's deallocate.
 * Returns GMR_OK (destroyed); GMR_ERR_INVALID_ARGUMENT (NULL); or the first
 * failure of an upstream deallocate: then the adaptor is not destroyed and
 * keeps the allocations not yet given back.
 */
GMR_API GMR_NODISCARD gmr_status gmr_tracking_adaptor_destroy_force(gmr_tracking_adaptor *a,
                                                                    FILE *report);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TRACKING_ADAPTOR_H_ */
