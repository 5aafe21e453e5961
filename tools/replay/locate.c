/*
 * tools/replay/locate.c: see locate.h.
 */
#define _POSIX_C_SOURCE 200809L /* access, readlink under -std=c11 */

#include "tools/replay/locate.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATH_BYTES 4096
#define TRACES_DIR "gmr/tools/traces/" /* "gmr" is the workspace name */

/* Try PREFIX + MIDDLE + file_name; append it to `looked` either way. A
 * candidate too long for a path buffer is skipped, never truncated. */
static bool try_path(const char *prefix, const char *middle, const char *file_name,
                     char *out_path, size_t out_bytes, char *looked, size_t looked_bytes) {
  char candidate[PATH_BYTES];
  int n = snprintf(candidate, sizeof candidate, "%s%s%s", prefix, middle, file_name);
  if (n < 0 || (size_t)n >= sizeof candidate) return false;
  if (looked != NULL && looked_bytes > 0) {
    size_t used = strlen(looked);
    if (used < looked_bytes) {
      int m = snprintf(looked + used, looked_bytes - used, "%s%s", used > 0 ? ", " : "",
                       candidate);
      (void)m; /* a cut list of places is still useful */
    }
  }
  if (access(candidate, R_OK) != 0) return false;
  n = snprintf(out_path, out_bytes, "%s", candidate);
  return n >= 0 && (size_t)n < out_bytes;
}

gmr_status replay_locate_bundled_trace(const char *argv0, const char *file_name, char *out_path,
                                       size_t out_bytes, char *looked, size_t looked_bytes) {
  if (looked != NULL && looked_bytes > 0) looked[0] = '\0';
  if (file_name == NULL || out_path == NULL || out_bytes == 0) return GMR_ERR_INVALID_ARGUMENT;
  const char *dirs[] = {getenv("RUNFILES_DIR"), getenv("TEST_SRCDIR")};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; ++i) {
    if (dirs[i] == NULL || dirs[i][0] == '\0') continue;
    if (try_path(dirs[i], "/" TRACES_DIR, file_name, out_path, out_bytes, looked,
                 looked_bytes)) {
      return GMR_OK;
    }
  }
  if (try_path("", "tools/traces/", file_name, out_path, out_bytes, looked, looked_bytes)) {
    return GMR_OK;
  }
  if (argv0 != NULL && argv0[0] != '\0' &&
      try_path(argv0, ".runfiles/" TRACES_DIR, file_name, out_path, out_bytes, looked,
               looked_bytes)) {
    return GMR_OK;
  }
  /* A binary found through PATH has an argv0 without a directory. */
  char exe[PATH_BYTES];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    if (try_path(exe, ".runfiles/" TRACES_DIR, file_name, out_path, out_bytes, looked,
                 looked_bytes)) {
      return GMR_OK;
    }
  }
  return GMR_ERR_INVALID_ARGUMENT;
}
