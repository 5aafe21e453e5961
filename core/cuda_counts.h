/*
 * core/cuda_counts.h (internal): a counting view of the one CUDA layer: how
 * many times the library called a CUDA function, process-wide, so that a
 * tool can say what a piece of work cost in driver calls (tools/replay's
 * driver calls per pass).
 *
 * The simulation counts every call of its own (gmr_cuda_sim_get_call_count,
 * gmr/sim/cuda_sim.h). The real layer (cuda_real.c, cuda_vmm_real.c) counts
 * the calls that take, map, give back, order or wait for memory (the list
 * in cuda_counts.c: gmr__cuda_counted_by_real) while counting is on. It is
 * off until a tool switches it on: a counted call then costs a function call
 * and one relaxed load of a flag nobody writes (nothing beside the CUDA call
 * itself); while on, one relaxed atomic add more. Calls are counted when
 * made, whatever they return. The kinds are the simulation's
 * (gmr_cuda_call), so one name means one CUDA function in both.
 *
 * Thread-safe: yes (atomics). A count read while other threads call CUDA may
 * miss calls in flight; switching counting on or off never loses a count
 * already made.
 */
#ifndef GMR_CORE_CUDA_COUNTS_H_
#define GMR_CORE_CUDA_COUNTS_H_

#include <stdbool.h>
#include <stdint.h>

#include "gmr/sim/cuda_sim.h" /* gmr_cuda_call: the layer's calls, one list */

#ifdef __cplusplus
extern "C" {
#endif

/* Count one call of `call` if counting is on (the real layer's slots). A
 * function, not inline: it costs nothing beside the CUDA call it counts. */
void gmr__cuda_count(gmr_cuda_call call);

/* Switch the real layer's counting on or off (the counts are kept). */
void gmr__cuda_counting_set(bool on);

/* The real layer's count of `call` since the process started (only while
 * counting was on); 0 for a call outside the map or one it does not count. */
uint64_t gmr__cuda_real_count(gmr_cuda_call call);

/* Whether the real layer counts `call` at all (the list in cuda_counts.c). */
bool gmr__cuda_counted_by_real(gmr_cuda_call call);

#ifdef __cplusplus
}
#endif

#endif /* GMR_CORE_CUDA_COUNTS_H_ */
