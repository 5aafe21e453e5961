/*
 * tools/replay/measure.c: see measure.h.
 */
#include "tools/replay/measure.h"

#include <stdio.h>
#include <string.h>

#include "tools/replay/stacks.h"

/* Create the stack, run, describe (when asked), destroy. */
static gmr_status run_once(const replay_trace *trace, const char *spec, uint64_t overhead_ns,
                           const replay_options *options, replay_result *out, char *describe,
                           size_t describe_bytes, char *err, size_t err_bytes) {
  replay_stack *stack = NULL;
  gmr_status st = replay_stack_create(spec, &stack, err, err_bytes);
  if (st != GMR_OK) {
    memset(out, 0, sizeof *out);
    return st;
  }
  st = replay_run_with(trace, replay_stack_top(stack), overhead_ns, options, out);
  if (describe != NULL && describe_bytes > 0) {
    replay_stack_describe(stack, describe, describe_bytes);
  }
  /* A stack that refused to be destroyed stays allocated: the process is
   * about to end, and freeing it under live allocations would be worse. */
  replay_result_set_destroy_status(out, replay_stack_destroy(stack));
  return st;
}

gmr_status replay_measure(const replay_trace *trace, const char *spec, uint64_t timer_overhead_ns,
                          const replay_options *options, replay_result *out, char *describe,
                          size_t describe_bytes, char *err, size_t err_bytes) {
  if (err != NULL && err_bytes > 0) err[0] = '\0';
  if (out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  if (trace == NULL || spec == NULL || options == NULL) {
    if (err != NULL && err_bytes > 0) snprintf(err, err_bytes, "replay_measure: NULL argument");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (options->pass_count < 1 || options->pass_count > REPLAY_MAX_PASSES) {
    if (err != NULL && err_bytes > 0) {
      snprintf(err, err_bytes, "%zu passes asked; give 1 to %d", options->pass_count,
               REPLAY_MAX_PASSES);
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  replay_options timed = *options;
  timed.timing = REPLAY_TIMING_PER_CALL;
  gmr_status st = run_once(trace, spec, timer_overhead_ns, &timed, out, describe, describe_bytes,
                           err, err_bytes);
  if (st != GMR_OK) return st;

  replay_options clocked = *options;
  clocked.timing = REPLAY_TIMING_PASS;
  replay_result clock;
  st = run_once(trace, spec, timer_overhead_ns, &clocked, &clock, NULL, 0, err, err_bytes);
  if (st != GMR_OK) {
    /* Not even the second stack ran: the measurement has no means. */
    out->clock_run_failure_count = 1;
    if (out->first_failure[0] == '\0') {
      snprintf(out->first_failure, sizeof out->first_failure, "the wall-clock run: %s",
               err != NULL && err[0] != '\0' ? err : gmr_status_name(st));
    }
    replay_result_free(&clock);
    return GMR_OK;
  }
  for (size_t k = 0; k < out->pass_count && k < clock.pass_count; ++k) {
    /* Same calls, same state: the counts agree unless a call failed in one
     * run only; the mean is over the calls the clocked run made. */
    out->passes[k].wall_ns = clock.passes[k].wall_ns;
    out->passes[k].wall_call_count = clock.passes[k].wall_call_count;
    out->passes[k].calls = clock.passes[k].calls; /* the calls behind the mean */
    if (clock.passes[k].failure_count > out->passes[k].failure_count) {
      out->passes[k].failure_count = clock.passes[k].failure_count;
    }
  }
  out->clock_run_failure_count = replay_result_failure_count(&clock);
  if (out->first_failure[0] == '\0' && clock.first_failure[0] != '\0') {
    /* Cut to fit after the prefix (one line for people). */
    snprintf(out->first_failure, sizeof out->first_failure, "wall-clock run: %.*s",
             (int)(sizeof out->first_failure - sizeof "wall-clock run: "), clock.first_failure);
  }
  replay_result_free(&clock);
  return GMR_OK;
}
