/*
 * tools/replay/numbers.c: see numbers.h.
 */
#include "tools/replay/numbers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIGITS 19 /* 10^19 - 1 < 2^64 */

static bool say(char *why, size_t why_bytes, const char *text) {
  if (why != NULL && why_bytes > 0) snprintf(why, why_bytes, "%s", text);
  return false;
}

/* Digits with an optional fraction: *mantissa = all digits as one integer,
 * *fraction_digits = how many came after the '.'. Returns the end, or NULL. */
static const char *read_digits(const char *s, uint64_t *mantissa, unsigned *fraction_digits) {
  uint64_t m = 0;
  unsigned digits = 0, fraction = 0;
  bool dot = false;
  for (; *s != '\0'; ++s) {
    if (*s == '.' && !dot) {
      dot = true;
      continue;
    }
    if (*s < '0' || *s > '9') break;
    if (digits == MAX_DIGITS) return NULL;
    m = m * 10u + (uint64_t)(*s - '0');
    digits++;
    if (dot) fraction++;
  }
  if (digits == 0 || (dot && fraction == 0)) return NULL;
  *mantissa = m;
  *fraction_digits = fraction;
  return s;
}

bool replay_parse_bytes(const char *text, size_t *out, char *why, size_t why_bytes) {
  uint64_t mantissa = 0;
  unsigned fraction = 0;
  const char *end = text == NULL ? NULL : read_digits(text, &mantissa, &fraction);
  if (end == NULL) return say(why, why_bytes, "not a number of bytes (digits, then K/M/G/T)");
  unsigned shift = 0;
  switch (*end) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
  }
  if (shift != 0) {
    end++;
    if (*end == 'i') end++;
  }
  if (*end == 'B') end++;
  if (*end != '\0') return say(why, why_bytes, "not a number of bytes (digits, then K/M/G/T)");
  uint64_t scale = 1;
  for (unsigned i = 0; i < fraction; ++i) scale *= 10u;
  uint64_t unit = (uint64_t)1 << shift;
  if (mantissa > UINT64_MAX / unit) return say(why, why_bytes, "too large");
  uint64_t scaled = mantissa * unit;
  if (scaled % scale != 0) return say(why, why_bytes, "not a whole number of bytes");
  uint64_t bytes = scaled / scale;
  if (bytes > SIZE_MAX) return say(why, why_bytes, "too large");
  *out = (size_t)bytes;
  return true;
}

bool replay_parse_count(const char *text, uint64_t min, uint64_t max, uint64_t *out, char *why,
                        size_t why_bytes) {
  uint64_t value = 0;
  unsigned fraction = 0;
  const char *end = text == NULL ? NULL : read_digits(text, &value, &fraction);
  if (end == NULL || *end != '\0' || fraction != 0) {
    return say(why, why_bytes, "not a whole number");
  }
  char bound[64];
  if (value < min) {
    snprintf(bound, sizeof bound, "below the smallest allowed, %llu", (unsigned long long)min);
    return say(why, why_bytes, bound);
  }
  if (value > max) {
    snprintf(bound, sizeof bound, "above the largest allowed, %llu", (unsigned long long)max);
    return say(why, why_bytes, bound);
  }
  *out = value;
  return true;
}

bool replay_parse_decimal(const char *text, double min, double max, double *out, char *why,
                          size_t why_bytes) {
  if (text == NULL) return say(why, why_bytes, "not a decimal number");
  if (text[0] == '-' && !(min < 0)) {
    return say(why, why_bytes, "negative (also -0), and the value must be >= 0");
  }
  const char *digits = text[0] == '-' ? text + 1 : text;
  uint64_t mantissa = 0;
  unsigned fraction = 0;
  const char *end = read_digits(digits, &mantissa, &fraction);
  if (end == NULL || *end != '\0') return say(why, why_bytes, "not a decimal number");
  double value = strtod(text, NULL); /* the text is plain decimal: strtod is exact enough */
  char bound[64];
  if (!(value >= min)) {
    snprintf(bound, sizeof bound, "below the smallest allowed, %g", min);
    return say(why, why_bytes, bound);
  }
  if (!(value <= max)) {
    snprintf(bound, sizeof bound, "above the largest allowed, %g", max);
    return say(why, why_bytes, bound);
  }
  *out = value;
  return true;
}
