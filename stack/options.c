/*
 * stack/options.c: one option value of a spec, parsed for its type and
 * checked against the range its layer accepts (see options.h).
 */
#include "stack/options.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "adaptors/policy_internal.h"
#include "gmr/device.h"
#include "stack/value.h"

/* "a, b, c or d" into buf. */
void gmr__join_names(char *buf, size_t n, const char *const *names, size_t count,
                     const char *last_sep) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < count && used < n; ++i) {
    const char *sep = i == 0 ? "" : (i + 1 == count ? last_sep : ", ");
    int w = snprintf(buf + used, n - used, "%s%s", sep, names[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* A bound of a SIZE or UINT option as a person reads it. */
static void format_bound(const gmr__option_def *def, uint64_t value, char *text, size_t bytes) {
  if (def->type == GMR__OPTION_SIZE) {
    gmr__format_size((size_t)value, text, bytes);
  } else {
    snprintf(text, bytes, "%" PRIu64, value);
  }
}

static bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

/* Check a parsed SIZE or UINT against the def's range; `why` says the rule
 * broken and, for powers and multiples, the nearest values that keep it. */
static gmr_status check_range(const gmr__option_def *def, uint64_t v, char *why, size_t why_bytes) {
  char a[48], b[48];
  if (v < def->min_value) {
    format_bound(def, def->min_value, a, sizeof a);
    snprintf(why, why_bytes, "at least %s", a);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (def->max_value != 0 && v > def->max_value) {
    format_bound(def, def->max_value, a, sizeof a);
    snprintf(why, why_bytes, "at most %s", a);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (def->power_of_two && !is_power_of_two(v)) {
    uint64_t below = 1;
    while (below <= v / 2) below *= 2;
    format_bound(def, below, a, sizeof a);
    if (below <= UINT64_MAX / 2) {
      format_bound(def, below * 2, b, sizeof b);
      snprintf(why, why_bytes, "not a power of two (%s and %s are)", a, b);
    } else {
      snprintf(why, why_bytes, "not a power of two (%s is)", a);
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (def->multiple_of > 1 && v % def->multiple_of != 0) {
    uint64_t below = v - v % def->multiple_of;
    char m[48];
    format_bound(def, def->multiple_of, m, sizeof m);
    format_bound(def, below, a, sizeof a);
    if (below <= UINT64_MAX - def->multiple_of) {
      format_bound(def, below + def->multiple_of, b, sizeof b);
      snprintf(why, why_bytes, "not a multiple of %s (%s and %s are)", m, a, b);
    } else {
      snprintf(why, why_bytes, "not a multiple of %s (%s is)", m, a);
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

static gmr_status parse_device(const char *text, bool check_only, int *out, char *why,
                               size_t why_bytes) {
  if (strcmp(text, "current") == 0) {
    *out = -1;
    return GMR_OK;
  }
  uint64_t d = 0;
  if (gmr__parse_uint(text, &d, why, why_bytes) != GMR_OK) {
    snprintf(why, why_bytes, "expected a device ordinal (0, 1, ...) or 'current'");
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (d > INT_MAX) {
    snprintf(why, why_bytes, "'%s' is too large for a device ordinal", text);
    return GMR_ERR_INVALID_ARGUMENT;
  }
  /* The machine's count, unless only checking (no CUDA call then) or the
   * count is unknown (no device layer at all: the layer's create says so). */
  int count = 0;
  if (!check_only && gmr_device_get_count(&count) == GMR_OK && d >= (uint64_t)count) {
    if (count == 0) {
      snprintf(why, why_bytes, "there is no CUDA device");
    } else if (count == 1) {
      snprintf(why, why_bytes, "there is 1 CUDA device (ordinals 0 to 0)");
    } else {
      snprintf(why, why_bytes, "there are %d CUDA devices (ordinals 0 to %d)", count, count - 1);
    }
    return GMR_ERR_INVALID_ARGUMENT;
  }
  *out = (int)d;
  return GMR_OK;
}

static gmr_status parse_choice(const gmr__option_def *def, const char *text, int *out, char *why,
                               size_t why_bytes) {
  size_t n = 0;
  while (def->choices[n] != NULL) n++;
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(text, def->choices[i]) == 0) {
      *out = (int)i;
      return GMR_OK;
    }
  }
  char list[160];
  gmr__join_names(list, sizeof list, def->choices, n, " or ");
  const char *near = gmr__closest_name(text, def->choices, n);
  if (near != NULL) {
    snprintf(why, why_bytes, "expected %s (did you mean '%s'?)", list, near);
  } else {
    snprintf(why, why_bytes, "expected %s", list);
  }
  return GMR_ERR_INVALID_ARGUMENT;
}

gmr_status gmr__option_parse(const gmr__option_def *def, const char *text,
                             const gmr__option_env *env, gmr__option_value *v, char *why,
                             size_t why_bytes) {
  gmr_status st = GMR_ERR_INVALID_ARGUMENT;
  switch (def->type) {
    case GMR__OPTION_SIZE:
      st = gmr__parse_size(text, def->allow_unlimited ? &v->unlimited : NULL, env->total_memory,
                           env->total_memory_ctx, &v->size, why, why_bytes);
      /* A share of the device is not resolved when only checking: its range
       * is the create's to check. */
      if (st == GMR_OK && !v->unlimited && !(env->check_only && strchr(text, '%') != NULL)) {
        st = check_range(def, v->size, why, why_bytes);
      }
      break;
    case GMR__OPTION_UINT:
      st = gmr__parse_uint(text, &v->uint, why, why_bytes);
      if (st == GMR_OK) st = check_range(def, v->uint, why, why_bytes);
      break;
    case GMR__OPTION_FACTOR:
      st = gmr__parse_factor(text, &v->factor, why, why_bytes);
      if (st == GMR_OK && def->min_factor > 0.0 && v->factor < def->min_factor) {
        snprintf(why, why_bytes, "at least %g", def->min_factor);
        st = GMR_ERR_INVALID_ARGUMENT;
      } else if (st == GMR_OK && def->below_factor > 0.0 && v->factor >= def->below_factor) {
        snprintf(why, why_bytes, "below %.0f", def->below_factor);
        st = GMR_ERR_INVALID_ARGUMENT;
      }
      break;
    case GMR__OPTION_BOOL:
      st = gmr__parse_bool(text, &v->boolean, why, why_bytes);
      break;
    case GMR__OPTION_DEVICE:
      st = parse_device(text, env->check_only, &v->device, why, why_bytes);
      break;
    case GMR__OPTION_CHOICE:
      st = parse_choice(def, text, &v->choice, why, why_bytes);
      break;
    case GMR__OPTION_STRING: {
      size_t len = strlen(text);
      if (len == 0) {
        snprintf(why, why_bytes, "expected a non-empty text");
      } else if (def->max_bytes != 0 && len > def->max_bytes) {
        snprintf(why, why_bytes, "%zu bytes of text, at most %zu allowed", len, def->max_bytes);
      } else {
        v->string = text; /* borrowed: the spec outlives the create functions */
        st = GMR_OK;
      }
      break;
    }
    case GMR__OPTION_OOM_POLICY:
    case GMR__OPTION_LIMIT_POLICY:
      snprintf(why, why_bytes, "policies are parsed by the builder");
      st = GMR_ERR_INTERNAL;
      break;
  }
  return st;
}

void gmr__option_describe_range(const gmr__option_def *def, char *text, size_t text_bytes) {
  char a[48] = "", b[48] = "";
  text[0] = '\0';
  if (def->type == GMR__OPTION_FACTOR) {
    if (def->min_factor > 0.0 && def->below_factor > 0.0) {
      snprintf(text, text_bytes, "from %g to below %.0f", def->min_factor, def->below_factor);
    } else if (def->min_factor > 0.0) {
      snprintf(text, text_bytes, "at least %g", def->min_factor);
    }
    return;
  }
  if (def->type != GMR__OPTION_SIZE && def->type != GMR__OPTION_UINT) return;
  /* Every power of two is at least 1: say nothing of a minimum of 1 then. */
  if (def->min_value > (def->power_of_two ? 1u : 0u)) format_bound(def, def->min_value, a, sizeof a);
  if (def->max_value > 0) format_bound(def, def->max_value, b, sizeof b);
  if (def->multiple_of > 1) {
    format_bound(def, def->multiple_of, a, sizeof a);
    /* The least value is the multiple itself, or 0 is allowed. */
    snprintf(text, text_bytes, "a %smultiple of %s",
             def->min_value == def->multiple_of ? "positive " : "", a);
  } else if (def->power_of_two) {
    if (a[0] != '\0' && b[0] != '\0') {
      snprintf(text, text_bytes, "a power of two from %s to %s", a, b);
    } else {
      snprintf(text, text_bytes, "a power of two%s%s", a[0] != '\0' ? " of at least " : "", a);
    }
  } else if (a[0] != '\0' && b[0] != '\0') {
    snprintf(text, text_bytes, "from %s to %s", a, b);
  } else if (a[0] != '\0') {
    snprintf(text, text_bytes, "at least %s", a);
  } else if (b[0] != '\0') {
    snprintf(text, text_bytes, "at most %s", b);
  }
}

void gmr__option_help(const gmr__option_def *def, char *text, size_t text_bytes) {
  const char *help = def->help != NULL ? def->help : "";
  if (def->type != GMR__OPTION_OOM_POLICY && def->type != GMR__OPTION_LIMIT_POLICY) {
    snprintf(text, text_bytes, "%s", help);
    return;
  }
  size_t n = 0;
  const char *const *names = def->type == GMR__OPTION_OOM_POLICY
                                 ? gmr__oom_policy_builtin_names(&n)
                                 : gmr__limit_policy_builtin_names(&n);
  char list[160];
  gmr__join_names(list, sizeof list, names, n, ", ");
  snprintf(text, text_bytes, "%s%s%s, a registered name, or plugin:PATH:SYMBOL", help,
           help[0] != '\0' ? ": " : "", list);
}
