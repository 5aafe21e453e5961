/*
 * tools/tiers_replay/tiers_replay.h: replay an allocation trace under a GPU
 * reservation smaller than the trace's peak, moving buffers to pinned host
 * memory when the GPU side is full, and report what had to move.
 *
 * The replay builds a tier manager with a GPU space (the trace's stack, a
 * spec) and a HOST space (pinned, NUMA-placed fixed-size blocks), reserves
 * `gpu_reservation_bytes` on the GPU (the space requires a reservation, with
 * the fail limit policy) and a HOST reservation, binds both to one stream of
 * the GPU space's pool, and runs the trace's requests in order on that
 * stream (the trace's streams are folded into it; capture markers are
 * skipped). Before an allocation would take the reservation's use past
 * `trigger` x reservation, the oldest live GPU buffers are downgraded (HOST
 * block allocated, contents copied, GPU buffer freed) until use plus the
 * request is at or below `stop` x reservation: the hysteresis of
 * gmr/tiers/memory_space.h applied to the reservation. A request the reservation
 * still refuses (or the stack below cannot serve) downgrades more; one
 * larger than the whole reservation is served from HOST at once. With
 * `upgrade`, a free that brings use below the stop level moves the most
 * recently downgraded buffers back while they fit under it. A free of a
 * downgraded buffer frees its HOST block.
 *
 * Timing: copy_ns counts the copies and their synchronisation alone; taking
 * HOST blocks (host_alloc_ns) is apart, because a block from a fresh chunk
 * costs mapping, NUMA binding and pinning the chunk (cudaHostRegister of
 * blocks_per_chunk x block bytes), which dwarfs the copy. `host_prepin` pins
 * the whole HOST space while building instead (build_ns).
 *
 * Thread-safe: yes for distinct runs (each builds its own manager).
 */
#ifndef GMR_TOOLS_TIERS_REPLAY_TIERS_REPLAY_H_
#define GMR_TOOLS_TIERS_REPLAY_TIERS_REPLAY_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gmr/status.h"
#include "tools/replay/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tiers_replay_options {
  size_t gpu_reservation_bytes; /* 0: gpu_fraction of the trace's peak live bytes */
  double gpu_fraction;          /* default 0.5 */
  const char *gpu_stack;        /* spec of the GPU space's stack; NULL: "pool > cuda(kind=async)" */
  size_t host_bytes;            /* HOST space and reservation; 0: the trace's peak + 64 MiB */
  size_t host_block_bytes;      /* HOST block size; 0: 1 MiB */
  double trigger;               /* fraction of the reservation; default 0.85 */
  double stop;                  /* fraction of the reservation; default 0.65 */
  bool upgrade;                 /* move buffers back up when use falls below the stop level */
  bool copy;                    /* copy buffer contents when moving (else accounting only) */
  bool host_prepin;             /* pin the whole HOST space when building it (cuCascade pins
                                   its host pool up front); else chunks are pinned on demand */
} tiers_replay_options;

#define TIERS_REPLAY_OPTIONS_DEFAULT {0, 0.5, NULL, 0, 0, 0.85, 0.65, false, true, false}

typedef struct tiers_replay_result {
  uint64_t peak_live_bytes;         /* the trace's */
  size_t reservation_bytes;         /* the GPU reservation */
  size_t alloc_count, free_count;   /* requests replayed */
  uint64_t episode_count;           /* times the trigger fired (or a refusal forced a move) */
  uint64_t downgraded_count;        /* buffers moved GPU -> HOST */
  uint64_t downgraded_bytes;
  uint64_t largest_downgraded_bytes;
  uint64_t upgraded_count;          /* buffers moved HOST -> GPU */
  uint64_t upgraded_bytes;
  uint64_t host_born_count;         /* requests larger than the reservation: served from HOST */
  uint64_t host_born_bytes;
  uint64_t refusal_count;           /* allocations the GPU side refused before moves made room */
  uint64_t freed_on_host_count;     /* frees of buffers that lived on HOST */
  size_t peak_gpu_bytes;            /* highest use of the GPU reservation (charged) */
  size_t peak_host_bytes;           /* highest allocated bytes in the HOST space */
  uint64_t copied_bytes;
  uint64_t copy_ns;                 /* time in copies and their synchronisations, nothing else */
  uint64_t host_alloc_ns;           /* time taking HOST blocks (fresh chunks pinned there) */
  uint64_t host_chunk_count;        /* pinned chunks the HOST space mapped, in all */
  size_t host_pinned_bytes;         /* pinned host memory held at the end, before teardown */
  uint64_t build_ns;                /* building the manager (the prepinning included) */
  uint64_t wall_ns;                 /* the whole replay */
} tiers_replay_result;

/**
 * Replay `trace` as the banner says. Needs the CUDA layer (real or
 * simulated) active; builds and destroys its own tier manager.
 * Returns GMR_OK with *out filled; on failure a status and `err` (err_bytes,
 * one line) saying what failed at which line of the trace; *out holds the
 * counts up to the failure. Nothing stays allocated either way.
 */
gmr_status tiers_replay_run(const replay_trace *trace, const tiers_replay_options *options,
                            tiers_replay_result *out, char *err, size_t err_bytes);

/** Print the result in `key: value` lines (one block). */
void tiers_replay_print(FILE *out, const replay_trace *trace, const tiers_replay_options *options,
                        const tiers_replay_result *result);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_TIERS_REPLAY_TIERS_REPLAY_H_ */
