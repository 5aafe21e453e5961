/*
 * tools/replay/calls.c: see calls.h.
 */
#include "tools/replay/calls.h"

#include <stddef.h>
#include <string.h>

#include "core/cuda_counts.h"
#include "core/cuda_layer.h"
#include "gmr/sim/cuda_sim.h"

/* Which CUDA calls each kind sums (the layer's names, gmr/sim/cuda_sim.h). */
typedef struct kind_def {
  const char *name;
  const char *functions;
  gmr_cuda_call calls[4];
  size_t call_count;
} kind_def;

static const kind_def kKinds[REPLAY_CALL_KIND_COUNT] = {
    [REPLAY_CALL_CREATE] = {"create", "cuMemCreate", {GMR_CUDA_CALL_MEM_CREATE}, 1},
    [REPLAY_CALL_MAP] = {"map", "cuMemMap", {GMR_CUDA_CALL_MEM_MAP}, 1},
    [REPLAY_CALL_UNMAP] = {"unmap", "cuMemUnmap", {GMR_CUDA_CALL_MEM_UNMAP}, 1},
    [REPLAY_CALL_RELEASE] = {"release", "cuMemRelease", {GMR_CUDA_CALL_MEM_RELEASE}, 1},
    [REPLAY_CALL_ACCESS] = {"access", "cuMemSetAccess", {GMR_CUDA_CALL_MEM_SET_ACCESS}, 1},
    [REPLAY_CALL_RESERVE] = {"reserve",
                             "cuMemAddressReserve, cuMemAddressFree",
                             {GMR_CUDA_CALL_MEM_ADDRESS_RESERVE, GMR_CUDA_CALL_MEM_ADDRESS_FREE},
                             2},
    [REPLAY_CALL_MALLOC] = {"malloc",
                            "cudaMalloc, cudaMallocFromPoolAsync, cudaMallocManaged, cudaHostAlloc",
                            {GMR_CUDA_CALL_MALLOC, GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC,
                             GMR_CUDA_CALL_MALLOC_MANAGED, GMR_CUDA_CALL_HOST_ALLOC},
                            4},
    [REPLAY_CALL_FREE] = {"free",
                          "cudaFree, cudaFreeAsync, cudaFreeHost, cudaMemPoolTrimTo",
                          {GMR_CUDA_CALL_FREE, GMR_CUDA_CALL_FREE_ASYNC, GMR_CUDA_CALL_FREE_HOST,
                           GMR_CUDA_CALL_MEM_POOL_TRIM_TO},
                          4},
    [REPLAY_CALL_RECORD] = {"record", "cudaEventRecord", {GMR_CUDA_CALL_EVENT_RECORD}, 1},
    [REPLAY_CALL_QUERY] = {"query", "cudaEventQuery", {GMR_CUDA_CALL_EVENT_QUERY}, 1},
    [REPLAY_CALL_WAIT] = {"wait", "cudaStreamWaitEvent", {GMR_CUDA_CALL_STREAM_WAIT_EVENT}, 1},
    [REPLAY_CALL_SYNC] = {"sync",
                          "cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize",
                          {GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, GMR_CUDA_CALL_STREAM_SYNCHRONIZE,
                           GMR_CUDA_CALL_EVENT_SYNCHRONIZE},
                          3},
};

void replay_calls_start(void) { gmr__cuda_counting_set(true); }

void replay_calls_read(replay_calls *out) {
  const bool simulated = gmr__cuda()->simulated;
  memset(out, 0, sizeof *out);
  for (size_t k = 0; k < REPLAY_CALL_KIND_COUNT; ++k) {
    for (size_t i = 0; i < kKinds[k].call_count; ++i) {
      gmr_cuda_call call = kKinds[k].calls[i];
      out->count[k] += simulated ? gmr_cuda_sim_get_call_count(call) : gmr__cuda_real_count(call);
    }
  }
}

void replay_calls_since(const replay_calls *before, replay_calls *out) {
  replay_calls now;
  replay_calls_read(&now);
  for (size_t k = 0; k < REPLAY_CALL_KIND_COUNT; ++k) {
    /* The simulation's counts restart when it is enabled again: never
     * report a wrapped difference. */
    out->count[k] = now.count[k] >= before->count[k] ? now.count[k] - before->count[k] : 0;
  }
}

uint64_t replay_calls_total(const replay_calls *calls) {
  uint64_t total = 0;
  for (size_t k = 0; k < REPLAY_CALL_KIND_COUNT; ++k) total += calls->count[k];
  return total;
}

const char *replay_call_kind_name(replay_call_kind kind) {
  return (int)kind >= 0 && kind < REPLAY_CALL_KIND_COUNT ? kKinds[kind].name : "?";
}

const char *replay_call_kind_functions(replay_call_kind kind) {
  return (int)kind >= 0 && kind < REPLAY_CALL_KIND_COUNT ? kKinds[kind].functions : "?";
}
