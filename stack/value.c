/*
 * stack/value.c: see value.h.
 */
#include "stack/value.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

size_t gmr__edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 64 || m > 64) return n > m ? n : m; /* names are short; no need to be exact */
  size_t row[65];
  for (size_t j = 0; j <= m; ++j) row[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      size_t up = row[j];
      size_t best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[m];
}

const char *gmr__closest_name(const char *word, const char *const *candidates, size_t count) {
  size_t len = strlen(word);
  size_t limit = len / 2 < 2 ? len / 2 : 2;
  if (limit < 1) limit = 1;
  const char *best = NULL;
  size_t best_distance = limit + 1;
  for (size_t i = 0; i < count; ++i) {
    size_t d = gmr__edit_distance(word, candidates[i]);
    if (d < best_distance) {
      best = candidates[i];
      best_distance = d;
    }
  }
  return best;
}

static void say(char *why, size_t n, const char *fmt, const char *arg) {
  if (why != NULL && n > 0) snprintf(why, n, fmt, arg);
}

typedef struct unit {
  const char *name;
  uint64_t factor;
} unit;

static const unit units[] = {
    {"", 1},
    {"b", 1},
    {"k", (uint64_t)1 << 10},
    {"kib", (uint64_t)1 << 10},
    {"kb", 1000u},
    {"m", (uint64_t)1 << 20},
    {"mib", (uint64_t)1 << 20},
    {"mb", 1000000u},
    {"g", (uint64_t)1 << 30},
    {"gib", (uint64_t)1 << 30},
    {"gb", 1000000000u},
    {"t", (uint64_t)1 << 40},
    {"tib", (uint64_t)1 << 40},
    {"tb", 1000000000000u},
};

static uint64_t gcd(uint64_t a, uint64_t b) {
  while (b != 0) {
    uint64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/*
 * whole.fraction * factor in bytes, exactly: no double rounding, so that
 * 1.1KiB (1126.4 bytes) is refused and 0.0009765625KiB is 1 byte. `fraction`
 * holds the digits after the point (trailing zeros allowed). Returns false
 * with `why` set when the result is not a whole number of bytes, is less than
 * one byte without being 0, or does not fit.
 */
static bool exact_bytes(const char *text, const char *whole, size_t whole_len,
                        const char *fraction, size_t fraction_len, uint64_t factor, size_t *out,
                        char *why, size_t why_bytes) {
  while (fraction_len > 0 && fraction[fraction_len - 1] == '0') fraction_len--;
  uint64_t w = 0;
  for (size_t i = 0; i < whole_len; ++i) {
    uint64_t digit = (uint64_t)(whole[i] - '0');
    if (w > (UINT64_MAX - digit) / 10) goto too_large;
    w = w * 10 + digit;
  }
  if (w > SIZE_MAX / factor) goto too_large;
  w *= factor;
  uint64_t from_fraction = 0;
  if (fraction_len > 0) {
    /* fraction / 10^k * factor is whole iff 10^k / gcd(factor, 10^k) divides
     * the fraction's digits; 19 digits fit in 64 bits. */
    if (fraction_len > 19) goto not_whole;
    uint64_t digits = 0, scale = 1;
    for (size_t i = 0; i < fraction_len; ++i) {
      digits = digits * 10 + (uint64_t)(fraction[i] - '0');
      scale *= 10;
    }
    uint64_t g = gcd(factor, scale);
    uint64_t scale_g = scale / g, factor_g = factor / g;
    if (digits % scale_g != 0) {
      /* digits * factor < scale, without the product (it may not fit). */
      if (w == 0 && digits <= (scale_g - 1) / factor_g) goto below_one;
      goto not_whole;
    }
    from_fraction = digits / scale_g * factor_g; /* < factor: no overflow */
  }
  if (w > SIZE_MAX - from_fraction) goto too_large;
  *out = (size_t)(w + from_fraction);
  return true;
too_large:
  if (why != NULL && why_bytes > 0) {
    snprintf(why, why_bytes, "'%s' is too large (a size is at most %zu bytes)", text,
             (size_t)SIZE_MAX);
  }
  return false;
not_whole:
  say(why, why_bytes, "'%s' is not a whole number of bytes", text);
  return false;
below_one:
  say(why, why_bytes, "'%s' is less than one byte", text);
  return false;
}

gmr_status gmr__parse_size(const char *text, bool *unlimited, gmr__total_memory_fn *total_memory,
                           void *ctx, size_t *out, char *why, size_t why_bytes) {
  if (unlimited != NULL) *unlimited = false;
  if (strcmp(text, "none") == 0 || strcmp(text, "max") == 0 || strcmp(text, "unlimited") == 0) {
    if (unlimited == NULL) {
      say(why, why_bytes, "'%s' is not allowed here; give a size", text);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    *unlimited = true;
    *out = SIZE_MAX;
    return GMR_OK;
  }
  /* The number: digits with at most one decimal point, no sign, no exponent. */
  const char *c = text;
  const char *dot = NULL;
  size_t digits = 0, dots = 0;
  while (isdigit((unsigned char)*c) || *c == '.') {
    if (*c == '.') {
      dots++;
      dot = c;
    } else {
      digits++;
    }
    c++;
  }
  if (digits == 0 || dots > 1) {
    say(why, why_bytes, "'%s' is not a size (a number with an optional unit, e.g. 8GiB)", text);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  size_t nlen = (size_t)(c - text);
  if (nlen >= 64) {
    say(why, why_bytes, "'%s' is too long a number (at most 63 characters)", text);
    return GMR_ERR_INVALID_ARGUMENT;
  }

  if (strcmp(c, "%") == 0) {
    /* A share of the device: rounded down to whole bytes, as the share of a
     * device whose size the writer does not know exactly must be. */
    char number[64];
    memcpy(number, text, nlen);
    number[nlen] = '\0';
    double value = strtod(number, NULL);
    if (value > 100.0) {
      say(why, why_bytes, "'%s' is more than 100%% of the device's memory", text);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    size_t total = 0;
    gmr_status st = total_memory != NULL ? total_memory(ctx, &total) : GMR_ERR_UNSUPPORTED;
    if (st != GMR_OK) {
      if (why != NULL && why_bytes > 0) {
        snprintf(why, why_bytes,
                 "cannot read the device's memory size for '%s' (%s): give the size in bytes "
                 "instead",
                 text, gmr_status_name(st));
      }
      return st;
    }
    double bytes = floor((double)total * value / 100.0);
    if (bytes < 1.0 && value > 0.0) {
      say(why, why_bytes, "'%s' is less than one byte", text);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    *out = (size_t)bytes; /* at most total */
    return GMR_OK;
  }
  const unit *u = NULL;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; ++i) {
    if (strcasecmp(c, units[i].name) == 0) u = &units[i];
  }
  if (u == NULL) {
    if (why != NULL && why_bytes > 0) {
      snprintf(why, why_bytes,
               "unknown unit '%s' (use B, K, KiB, KB, M, MiB, MB, G, GiB, GB, T, TiB, TB or %%)",
               c);
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  size_t whole_len = dot != NULL ? (size_t)(dot - text) : nlen;
  const char *fraction = dot != NULL ? dot + 1 : c;
  size_t fraction_len = dot != NULL ? (size_t)(c - fraction) : 0;
  if (!exact_bytes(text, text, whole_len, fraction, fraction_len, u->factor, out, why,
                   why_bytes)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

void gmr__format_size(size_t bytes, char *text, size_t text_bytes) {
  static const char *const names[] = {"KiB", "MiB", "GiB", "TiB"};
  int unit_index = -1;
  size_t value = bytes;
  while (unit_index < 3 && value != 0 && value % 1024 == 0) {
    value /= 1024;
    unit_index++;
  }
  if (unit_index >= 0) {
    snprintf(text, text_bytes, "%zu%s", value, names[unit_index]);
  } else {
    snprintf(text, text_bytes, "%zu %s", bytes, bytes == 1 ? "byte" : "bytes");
  }
}

void gmr__format_size_value(size_t bytes, char *text, size_t text_bytes) {
  if (bytes != 0 && bytes % 1024 == 0) {
    gmr__format_size(bytes, text, text_bytes);
  } else {
    snprintf(text, text_bytes, "%zu", bytes);
  }
}

gmr_status gmr__parse_uint(const char *text, uint64_t *out, char *why, size_t why_bytes) {
  const char *c = text;
  int base = 10;
  if (c[0] == '0' && (c[1] == 'x' || c[1] == 'X')) {
    base = 16;
    c += 2;
  }
  bool ok = *c != '\0';
  for (const char *d = c; ok && *d != '\0'; ++d) {
    ok = base == 16 ? isxdigit((unsigned char)*d) != 0 : isdigit((unsigned char)*d) != 0;
  }
  if (!ok) {
    say(why, why_bytes, "'%s' is not a non-negative integer", text);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  errno = 0;
  unsigned long long v = strtoull(c, NULL, base);
  if (errno == ERANGE || v >= ((unsigned long long)1 << 63)) {
    if (why != NULL && why_bytes > 0) {
      snprintf(why, why_bytes, "'%s' is too large (at most %llu)", text,
               ((unsigned long long)1 << 63) - 1);
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  *out = (uint64_t)v;
  return GMR_OK;
}

gmr_status gmr__parse_factor(const char *text, double *out, char *why, size_t why_bytes) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v) || v <= 0.0 ||
      !(isdigit((unsigned char)text[0]) || text[0] == '.')) {
    say(why, why_bytes, "'%s' is not a positive number", text);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  *out = v;
  return GMR_OK;
}

gmr_status gmr__parse_bool(const char *text, bool *out, char *why, size_t why_bytes) {
  static const char *const yes[] = {"true", "yes", "on", "1"};
  static const char *const no[] = {"false", "no", "off", "0"};
  for (size_t i = 0; i < 4; ++i) {
    if (strcmp(text, yes[i]) == 0) {
      *out = true;
      return GMR_OK;
    }
    if (strcmp(text, no[i]) == 0) {
      *out = false;
      return GMR_OK;
    }
  }
  say(why, why_bytes, "'%s' is not a boolean (true/false, yes/no, on/off, 1/0)", text);
  return GMR_ERR_INVALID_ARGUMENT;
}
