/*
 * tools/replay/measure.h: measure a trace on a stack spec the way a person
 * reads the numbers: per pass, the mean host time per call from a wall clock
 * with no per-call timer inside it, and p50/p99 from per-call timers.
 *
 * Both cannot come from one run: reading the clock twice around each call
 * costs about as much as a pool's fast path, so a mean taken over timed
 * calls is inflated by the timers, and a mean that subtracts an estimated
 * timer cost is a guess. Nor can they come from alternate passes of one
 * stack, or pass 1 (the cold start) would have no percentiles. So the spec
 * is built twice, fresh each time, and the trace replayed pass_count times
 * on each: first with per-call timers (REPLAY_TIMING_PER_CALL: percentiles,
 * the held-bytes curve, the peaks, the memory info at each peak), then with
 * the wall clock only (REPLAY_TIMING_PASS: the means). Pass k of both runs
 * starts from the same state, what k - 1 passes left in a fresh stack, so
 * pass k's mean and percentiles describe the same thing. The replay is
 * deterministic on the simulation; on a GPU only the driver's timing can
 * differ between the two runs, and any failure of either run counts.
 *
 * Thread-safe: no; one measurement at a time (the stacks are used from the
 * calling thread only).
 */
#ifndef GMR_TOOLS_REPLAY_MEASURE_H_
#define GMR_TOOLS_REPLAY_MEASURE_H_

#include <stddef.h>
#include <stdint.h>

#include "gmr/status.h"
#include "tools/replay/replay.h"
#include "tools/replay/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Replay `trace` options->pass_count times on a fresh stack `spec` with
 * per-call timers, then on a second fresh stack of the same spec with the
 * wall clock only, and join the two into *out: the first run's result, with
 * each pass's wall_ns (and so its mean) and its CUDA calls (calls.h) from
 * the second, and the second
 * run's failures in clock_run_failure_count (and its first failure in
 * first_failure when the first had none). options->timing is ignored.
 *
 * Units: timer_overhead_ns as for replay_run().
 * Ownership: `trace`, `spec`, `options` borrowed; *out as for replay_run();
 *   `describe` (describe_bytes, may be NULL/0) gets replay_stack_describe()
 *   of the first stack after its run.
 * Stream/device: as replay_run(), twice; both stacks are destroyed before
 *   returning (a stack that refuses stays allocated and is counted in
 *   destroy_status: the process is expected to end soon).
 * Returns:
 *   GMR_OK                    both runs ran (failed calls are counted in
 *                             *out: check replay_result_ok()).
 *   GMR_ERR_INVALID_ARGUMENT  a NULL argument, or pass_count outside
 *                             1..REPLAY_MAX_PASSES.
 *   a stack creation status   the stack could not be created; `err`
 *                             (err_bytes) says why; *out owns no memory.
 *   a replay_run() status     host memory or a stream ran out.
 */
gmr_status replay_measure(const replay_trace *trace, const char *spec, uint64_t timer_overhead_ns,
                          const replay_options *options, replay_result *out, char *describe,
                          size_t describe_bytes, char *err, size_t err_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_MEASURE_H_ */
