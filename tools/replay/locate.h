/*
 * tools/replay/locate.h: find a trace bundled with the tool
 * (//tools/traces) in Bazel's runfiles, wherever the binary was started from.
 *
 * Thread-safe: yes (reads the environment and the file system only).
 */
#ifndef GMR_TOOLS_REPLAY_LOCATE_H_
#define GMR_TOOLS_REPLAY_LOCATE_H_

#include <stddef.h>

#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Find tools/traces/`file_name` (e.g. "gpt2_train.csv.gz"). Tried in order,
 * the first readable file wins:
 *   $RUNFILES_DIR/gmr/tools/traces/NAME   (bazel run, bazel test)
 *   $TEST_SRCDIR/gmr/tools/traces/NAME    (bazel test)
 *   tools/traces/NAME                     (cwd: the runfiles tree under bazel
 *                                          run, or the workspace root)
 *   ARGV0.runfiles/gmr/tools/traces/NAME  (the binary started by its path)
 *   EXE.runfiles/gmr/tools/traces/NAME    (EXE from /proc/self/exe)
 *
 * Units: buffer sizes in bytes. `argv0` may be NULL.
 * Returns GMR_OK with the path in `out_path` (out_bytes); or
 * GMR_ERR_INVALID_ARGUMENT (NULL arguments, or not found), with every path
 * tried listed in `looked` (looked_bytes, may be NULL/0), separated by ", ".
 */
gmr_status replay_locate_bundled_trace(const char *argv0, const char *file_name, char *out_path,
                                       size_t out_bytes, char *looked, size_t looked_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_LOCATE_H_ */
