/*
 * tools/replay/numbers.h: the numbers the tools take on their command lines
 * (byte sizes, counts, times), parsed strictly.
 *
 * strtod and strtoull accept what a person did not mean as a number: "nan",
 * "inf", "-0", "0x1p4", a leading '-' that wraps around, trailing garbage when
 * the end pointer is not checked. Casting a NaN or an infinity to an integer
 * is undefined behaviour in C. These parsers take plain decimal text only and
 * say what is wrong, so every tool refuses bad values the same way.
 *
 * Thread-safe: yes (no shared state).
 */
#ifndef GMR_TOOLS_REPLAY_NUMBERS_H_
#define GMR_TOOLS_REPLAY_NUMBERS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A byte count: decimal digits with an optional fraction, then an optional
 * binary unit K, M, G or T (also KiB, MiB, ..., KB, ..., any case for the
 * letter) and an optional B: "4096", "600MiB", "1.5G". The result must be a
 * whole number of bytes ("0.5", "0.3K" are refused) and fit in size_t.
 * Returns true with *out set; false with `why` (why_bytes, may be NULL/0)
 * saying what is wrong ("not a number", "not a whole number of bytes",
 * "too large"); *out is then unchanged.
 */
bool replay_parse_bytes(const char *text, size_t *out, char *why, size_t why_bytes);

/**
 * A whole number in [min, max], decimal digits only (no sign, no spaces).
 * Returns true with *out set; false with `why` set ("not a whole number",
 * "below MIN", "above MAX"); *out is then unchanged.
 */
bool replay_parse_count(const char *text, uint64_t min, uint64_t max, uint64_t *out, char *why,
                        size_t why_bytes);

/**
 * A finite decimal number in [min, max]: digits with an optional fraction
 * and an optional leading '-' (nothing else: no exponent, "nan" or "inf").
 * Returns true with *out set; false with `why` set; *out is then unchanged.
 */
bool replay_parse_decimal(const char *text, double min, double max, double *out, char *why,
                          size_t why_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GMR_TOOLS_REPLAY_NUMBERS_H_ */
