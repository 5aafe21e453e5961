/*
 * stack/options.h (internal): the value of one option of a spec, parsed for
 * its type (sizes, integers, numbers, booleans, choices, device ordinals,
 * texts) and checked against the range its layer accepts, so that a refusal
 * names the value, the limit and the option before any layer is created.
 * Policies are not parsed here: they may load plugins (see build.c).
 */
#ifndef GMR_STACK_OPTIONS_H_
#define GMR_STACK_OPTIONS_H_

#include <stdbool.h>
#include <stddef.h>

#include "gmr/status.h"
#include "stack/registry.h"
#include "stack/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What parsing may ask of the builder. */
typedef struct gmr__option_env {
  gmr__total_memory_fn *total_memory; /* for `N%` sizes */
  void *total_memory_ctx;
  bool check_only; /* gmr_stack_check: no CUDA call (no device count) */
} gmr__option_env;

/*
 * Parse `text` as a value of `def` into *v. Returns GMR_OK, or
 * GMR_ERR_INVALID_ARGUMENT (or the status of env->total_memory) with `why`
 * saying what is wrong: "at most 64", "not a power of two (512 bytes and 1KiB
 * are)", "there is 1 CUDA device (ordinals 0 to 0)", ...
 */
gmr_status gmr__option_parse(const gmr__option_def *def, const char *text,
                             const gmr__option_env *env, gmr__option_value *v, char *why,
                             size_t why_bytes);

/* The range of `def` for the listing ("at most 64", "a power of two from 256
 * bytes to 1TiB"), or "" when any value of its type is accepted. */
void gmr__option_describe_range(const gmr__option_def *def, char *text, size_t text_bytes);

/* The meaning of `def` for messages and the listing: its help, and for a
 * policy option the built-in policy names and the other forms. */
void gmr__option_help(const gmr__option_def *def, char *text, size_t text_bytes);

/* "a, b, c<last_sep>d" into buf (n bytes). */
void gmr__join_names(char *buf, size_t n, const char *const *names, size_t count,
                     const char *last_sep);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STACK_OPTIONS_H_ */
