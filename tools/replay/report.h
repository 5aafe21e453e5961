/*
 * tools/replay/report.h: print what a replay measured, compactly: one line
 * about the trace, then one table with a row per stack and a reference row
 * for the allocator that recorded the trace.
 *
 * Sizes are printed in MiB with one decimal (the size range in exact bytes,
 * since its small end is often below 0.1 MiB), ratios with three decimals,
 * host times in whole nanoseconds.
 *
 * Thread-safe: yes for distinct FILEs.
 */
#ifndef GMR_TOOLS_REPLAY_REPORT_H_
#define GMR_TOOLS_REPLAY_REPORT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "tools/replay/replay.h"
#include "tools/replay/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Print the one-line summary of `trace` (requests, allocs, frees, unmatched
 * frees, streams, size range, peak live bytes, live at end; captures, RMM
 * allocate-failure rows and skipped malformed lines when there are any) to
 * `out`. A second line gives the first skipped malformed line, if any.
 */
void replay_report_print_summary(FILE *out, const replay_trace *trace);

/**
 * Print the table for `count` stacks: stack_names[i] replayed into results[i],
 * one row per pass (the stack named on its first). Columns: the pass ("1
 * cold", "2 warm", ...), allocate and deallocate calls, failures,
 * allocations live at the end of the pass, the mean host ns per call (wall
 * clock; "n/a" without one), host ns per allocate and per deallocate (p50,
 * p99), the pass's peak bytes held from below in MiB and its ratio to the
 * trace's peak live bytes, the fragmentation at that peak ("n/a" when the
 * stack does not answer get_memory_info); then the recording allocator's
 * reserved peak and ratio ("n/a" without segment rows), footnotes on the
 * method, and the first failure of each stack that had any. A result with no
 * passes gets one row from its run totals.
 */
void replay_report_print_table(FILE *out, const replay_trace *trace,
                               const char *const *stack_names, const replay_result *results,
                               size_t count);

/**
 * Print the driver calls table for `count` stacks: one row per pass (the
 * stack named on its first), a column per kind of calls.h (create, map,
 * unmap, release, access, reserve, malloc, free, record, query, wait, sync)
 * and their total, counted while the pass's events replayed; then a
 * footnote naming the CUDA functions of each column and where the counts
 * came from (`simulated`: the simulation's counts; else the CUDA layer's
 * counting view). Results without passes are left out.
 */
void replay_report_print_calls(FILE *out, const char *const *stack_names,
                               const replay_result *results, size_t count, bool simulated);

/** `bytes` in MiB, as printed ("7344.6"), into buf (buf_bytes). Returns buf. */
const char *replay_report_format_mib(unsigned long long bytes, char *buf, size_t buf_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_REPORT_H_ */
