/*
 * core/cuda_sim_internal.h (internal): what the simulation's parts share.
 *
 * The simulation keeps one lock and one state (cuda_sim.c). The VMM part
 * (cuda_vmm_sim.c) reaches them through these hooks, so it can count calls,
 * inject failures, honour capture modes and charge device memory exactly as
 * the runtime part does. Functions marked "lock held" must be called between
 * gmr__sim_lock() and gmr__sim_unlock().
 *
 * Thread-safe: yes, through the simulation's lock.
 */
#ifndef GMR_CORE_CUDA_SIM_INTERNAL_H_
#define GMR_CORE_CUDA_SIM_INTERNAL_H_

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>

#include "gmr/cuda_sim.h"

#ifdef __cplusplus
extern "C" {
#endif

void gmr__sim_lock(void);
void gmr__sim_unlock(void);

/* Lock held. Whether the simulation is enabled. */
bool gmr__sim_enabled(void);

/* Lock held. Count a call of kind `call` and apply an injected failure if
 * one is due (returns its error, else cudaSuccess). */
cudaError_t gmr__sim_enter_call(gmr_cuda_call call);

/* Lock held. True when a potentially unsafe call from this thread must fail
 * because of a capture in progress (and invalidates that capture). */
bool gmr__sim_capture_forbids_unsafe_call(void);

/* Lock held. The calling thread's current device, the device count, and the
 * capacity of each device. */
int gmr__sim_current_device(void);
int gmr__sim_device_count(void);
size_t gmr__sim_device_capacity_bytes(void);

/* Lock held. Take `bytes` of `device`'s memory (false, nothing taken, past
 * its capacity) or give them back; counted as one allocation. */
bool gmr__sim_device_charge(int device, size_t bytes);
void gmr__sim_device_uncharge(int device, size_t bytes);

/* Lock held. Check a stream handle as every call naming a stream does
 * (cudaErrorInvalidResourceHandle for a dead one, counted as stale);
 * *capturing says whether it captures now. */
cudaError_t gmr__sim_stream_check(cudaStream_t stream, bool *capturing);

/* Lock held. Count a call that named a dead or unknown handle. */
void gmr__sim_count_stale_handle(void);

/* Defined in cuda_vmm_sim.c, called by cuda_sim.c with the lock held: drop
 * every VMM object (at enable), and count the live ones (leak checks). */
void gmr__sim_vmm_reset(void);
size_t gmr__sim_vmm_live_count(void);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_CUDA_SIM_INTERNAL_H_ */
