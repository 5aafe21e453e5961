/*
 * tools/replay/calls.h: the CUDA calls a replayed stack made, by kind, so
 * that a pass's cost can be told in driver calls (what a cold pass pays
 * for growing: cuMemCreate, cuMemMap, cuMemSetAccess, ...).
 *
 * The counts come from the one CUDA layer: on the host simulation from its
 * own counts of every call (gmr_cuda_sim_get_call_count), on a GPU from the
 * real layer's counting view (core/cuda_counts.h), which
 * replay_calls_start() switches on. Both count process-wide: calls made by
 * a pool's helper threads count too, and so would the calls of anything
 * else the process runs meanwhile (a replay runs nothing else).
 *
 * Thread-safe: yes (reads of atomic counters).
 */
#ifndef GMR_TOOLS_REPLAY_CALLS_H_
#define GMR_TOOLS_REPLAY_CALLS_H_

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kinds a replay reports; each is one or a few CUDA functions
 * (replay_call_kind_functions). */
typedef enum replay_call_kind {
  REPLAY_CALL_CREATE = 0, /* cuMemCreate */
  REPLAY_CALL_MAP,        /* cuMemMap */
  REPLAY_CALL_UNMAP,      /* cuMemUnmap */
  REPLAY_CALL_RELEASE,    /* cuMemRelease */
  REPLAY_CALL_ACCESS,     /* cuMemSetAccess */
  REPLAY_CALL_RESERVE,    /* cuMemAddressReserve, cuMemAddressFree */
  REPLAY_CALL_MALLOC,     /* cudaMalloc, cudaMallocFromPoolAsync, cudaMallocManaged, cudaHostAlloc */
  REPLAY_CALL_FREE,       /* cudaFree, cudaFreeAsync, cudaFreeHost, cudaMemPoolTrimTo */
  REPLAY_CALL_RECORD,     /* cudaEventRecord */
  REPLAY_CALL_QUERY,      /* cudaEventQuery */
  REPLAY_CALL_WAIT,       /* cudaStreamWaitEvent */
  REPLAY_CALL_SYNC,       /* cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize */
  REPLAY_CALL_KIND_COUNT
} replay_call_kind;

/* Calls by kind. */
typedef struct replay_calls {
  uint64_t count[REPLAY_CALL_KIND_COUNT];
} replay_calls;

/** Switch the real CUDA layer's counting on (nothing changes on the
 * simulation, which always counts). Call it before the first replay. */
void replay_calls_start(void);

/** The calls made so far in the process, by kind, from the active layer. */
void replay_calls_read(replay_calls *out);

/** *out = what was made since *before (read with replay_calls_read). */
void replay_calls_since(const replay_calls *before, replay_calls *out);

/** The sum over every kind. */
uint64_t replay_calls_total(const replay_calls *calls);

/** The kind's column name ("create"), or "?" outside the enum. */
const char *replay_call_kind_name(replay_call_kind kind);

/** The CUDA functions the kind counts ("cuMemCreate"), or "?". */
const char *replay_call_kind_functions(replay_call_kind kind);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_CALLS_H_ */
