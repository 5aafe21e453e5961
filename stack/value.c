/*
 * stack/value.c: see value.h.
 */
#include "stack/value.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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
  double factor;
} unit;

static const unit units[] = {
    {"", 1.0},
    {"b", 1.0},
    {"k", 1024.0},
    {"kib", 1024.0},
    {"kb", 1e3},
    {"m", 1048576.0},
    {"mib", 1048576.0},
    {"mb", 1e6},
    {"g", 1073741824.0},
    {"gib", 1073741824.0},
    {"gb", 1e9},
    {"t", 1099511627776.0},
    {"tib", 1099511627776.0},
    {"tb", 1e12},
};

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
  size_t digits = 0, dots = 0;
  while (isdigit((unsigned char)*c) || *c == '.') {
    if (*c == '.') dots++;
    else digits++;
    c++;
  }
  if (digits == 0 || dots > 1) {
    say(why, why_bytes, "'%s' is not a size (a number with an optional unit, e.g. 8GiB)", text);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  char number[64];
  size_t nlen = (size_t)(c - text);
  if (nlen >= sizeof number) {
    say(why, why_bytes, "'%s' is too long a number", text);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  memcpy(number, text, nlen);
  number[nlen] = '\0';
  double value = strtod(number, NULL);

  double bytes = 0.0;
  if (strcmp(c, "%") == 0) {
    if (value > 100.0) {
      say(why, why_bytes, "'%s' is more than 100%% of the device's memory", text);
      return GMR_ERR_INVALID_ARGUMENT;
    }
    size_t total = 0;
    gmr_status st = total_memory != NULL ? total_memory(ctx, &total) : GMR_ERR_UNSUPPORTED;
    if (st != GMR_OK) {
      say(why, why_bytes, "cannot read the device's memory size for '%s'", text);
      return st;
    }
    bytes = floor((double)total * value / 100.0);
  } else {
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
    if (dots == 0) {
      /* Whole numbers stay exact past 2^53, where a double would round. */
      errno = 0;
      unsigned long long whole = strtoull(number, NULL, 10);
      unsigned long long factor = (unsigned long long)u->factor;
      if (errno == ERANGE || (factor != 0 && whole > SIZE_MAX / factor)) {
        say(why, why_bytes, "'%s' is too large", text);
        return GMR_ERR_INVALID_ARGUMENT;
      }
      *out = (size_t)(whole * factor);
      return GMR_OK;
    }
    bytes = floor(value * u->factor);
  }
  /* 2^64 as a double; anything at or past it does not fit. */
  if (!(bytes < 18446744073709551616.0) || bytes > (double)SIZE_MAX) {
    say(why, why_bytes, "'%s' is too large", text);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  *out = (size_t)bytes;
  return GMR_OK;
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
    say(why, why_bytes, "'%s' is too large", text);
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
