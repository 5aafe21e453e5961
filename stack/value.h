/*
 * stack/value.h (internal): option values of specs (sizes, numbers,
 * booleans) and the "did you mean" suggestions for misspelt names.
 */
#ifndef GMR_STACK_VALUE_H_
#define GMR_STACK_VALUE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/extension.h"
#include "gmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Levenshtein distance between two strings. */
size_t gmr__edit_distance(const char *a, const char *b);

/* The candidate closest to `word` if it is close enough to be a likely typo
 * (distance <= 2 and less than half the word's length, at least 1), else NULL. */
const char *gmr__closest_name(const char *word, const char *const *candidates, size_t count);

/* Total memory of the current device, asked for only when a `%` size appears. */
typedef gmr_status gmr__total_memory_fn(void *ctx, size_t *total_bytes);

/*
 * Parse a size (see gmr/stack.h). `unlimited` (may be NULL: then `none`,
 * `max` and `unlimited` are refused) is set when the value is one of them and
 * *out is SIZE_MAX. On failure `why` (why_bytes long) says what is wrong,
 * e.g. "unknown unit 'GX'". With a unit, the value must be a whole number of
 * bytes (1.5KiB is; 1.1KiB and 0.5 are not); `N%` of the device's memory is
 * rounded down, and must come to at least one byte unless N is 0. Returns GMR_OK, GMR_ERR_INVALID_ARGUMENT, or the
 * status of total_memory().
 */
gmr_status gmr__parse_size(const char *text, bool *unlimited, gmr__total_memory_fn *total_memory,
                           void *ctx, size_t *out, char *why, size_t why_bytes);

/* "1 byte", "1000 bytes", "256MiB", "3TiB": a size as a person writes it,
 * with the largest binary unit that divides it (at most TiB). */
void gmr__format_size(size_t bytes, char *text, size_t text_bytes);

/* The same as a spec value: "0", "1000", "256MiB" (parsed back to `bytes`). */
GMR_EXTENSION_API
void gmr__format_size_value(size_t bytes, char *text, size_t text_bytes);

/* A non-negative integer below 2^63 (decimal, or 0x hex). */
gmr_status gmr__parse_uint(const char *text, uint64_t *out, char *why, size_t why_bytes);

/* A finite positive decimal number. */
gmr_status gmr__parse_factor(const char *text, double *out, char *why, size_t why_bytes);

/* true/false, yes/no, on/off, 1/0. */
gmr_status gmr__parse_bool(const char *text, bool *out, char *why, size_t why_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STACK_VALUE_H_ */
