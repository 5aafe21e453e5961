/*
 * tools/replay/plot.h: a picture of memory over a replay, as one
 * self-contained SVG image or HTML page (the same SVG inside), that a
 * browser opens with no network and no script.
 *
 * x: the replay's events in trace order (allocations, frees and capture
 * markers; passes one after another). y: bytes, in B, KiB, MiB or GiB as the
 * largest value needs. Drawn: the trace's live bytes (the sum of the sizes
 * allocated and not yet freed: the lower bound of any allocator) as a grey
 * area; the bytes each stack held from below after every event (one line per
 * stack, from REPLAY_TIMING_PER_CALL's held_bytes); capture windows shaded;
 * pass boundaries; the peak of each series marked and labelled; a legend
 * naming the stacks (as given: alias or spec) with their peaks. Long traces
 * are reduced to the minimum and maximum of each pixel column, so every peak
 * survives. Both formats are well-formed XML (the HTML is polyglot XHTML).
 *
 * Each drawn series is a <polyline> (the live area a <polygon>) with
 * class="series held" and data-stack="NAME" (class="series live" for the
 * trace), so a script or test can find them.
 *
 * Thread-safe: yes for distinct FILEs.
 */
#ifndef GMR_TOOLS_REPLAY_PLOT_H_
#define GMR_TOOLS_REPLAY_PLOT_H_

#include <stddef.h>
#include <stdio.h>

#include "gmr/status.h"
#include "tools/replay/replay.h"
#include "tools/replay/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum replay_plot_format {
  REPLAY_PLOT_UNKNOWN = 0,
  REPLAY_PLOT_SVG = 1,
  REPLAY_PLOT_HTML = 2
} replay_plot_format;

/** The format a path asks for by its extension: ".svg", ".html" or ".htm"
 * (any case); REPLAY_PLOT_UNKNOWN otherwise (NULL included). */
replay_plot_format replay_plot_format_of_path(const char *path);

/**
 * Write the picture of `count` stacks (names[i] replayed into results[i]) over
 * `trace` to `out` in `format`.
 *
 * A result without held_bytes (a stack that reports no footprint, or a run
 * without per-call timing) is named in the legend as not drawn. All results
 * must come from the same trace; the pass count is the largest of theirs.
 * Ownership: everything borrowed; `out` is written, not closed.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (NULL argument, unknown format);
 * GMR_ERR_OUT_OF_MEMORY (host memory for the live-bytes curve); or
 * GMR_ERR_INTERNAL when writing to `out` failed (disk full: see ferror). `err`
 * (err_bytes, may be NULL/0) says which.
 */
gmr_status replay_plot_write(FILE *out, replay_plot_format format, const replay_trace *trace,
                             const char *const *names, const replay_result *results, size_t count,
                             char *err, size_t err_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_PLOT_H_ */
