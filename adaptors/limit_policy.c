/*
 * adaptors/limit_policy.c: the built-in limit policies. Registered names are
 * a context's (stack/context.c). See gmr/policy.h.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "adaptors/policy_internal.h"
#include "gmr/policy.h"

static gmr_limit_action ignore_decide(const gmr_limit_policy *policy,
                                      const gmr_limit_request *request, size_t *new_limit_bytes) {
  (void)policy;
  (void)request;
  (void)new_limit_bytes;
  return GMR_LIMIT_ACTION_ALLOW;
}

gmr_limit_action gmr__limit_policy_increase_total_decide(const gmr_limit_policy *policy,
                                                         const gmr_limit_request *request,
                                                         size_t *new_limit_bytes) {
  size_t needed = request->used_bytes + request->charge_bytes;
  if (needed < request->used_bytes) return GMR_LIMIT_ACTION_FAIL; /* overflow */
  double factor = policy->padding_factor < 1.0 ? 1.0 : policy->padding_factor;
  double padded = ceil((double)needed * factor);
  size_t target = padded >= (double)SIZE_MAX ? SIZE_MAX : (size_t)padded;
  if (target < needed) target = needed; /* rounding of huge values */
  if (policy->cap_bytes != 0 && target > policy->cap_bytes) {
    if (needed > policy->cap_bytes) return GMR_LIMIT_ACTION_FAIL;
    target = policy->cap_bytes;
  }
  *new_limit_bytes = target;
  return GMR_LIMIT_ACTION_RAISE;
}

/* cuCascade's formula: grow by the excess times the padding; when that
 * passes the cap, by exactly the excess; when even that does, fail. */
gmr_limit_action gmr__limit_policy_increase_decide(const gmr_limit_policy *policy,
                                                   const gmr_limit_request *request,
                                                   size_t *new_limit_bytes) {
  size_t needed = request->used_bytes + request->charge_bytes;
  if (needed < request->used_bytes) return GMR_LIMIT_ACTION_FAIL; /* overflow */
  if (needed <= request->limit_bytes) {                          /* raced: fits now */
    *new_limit_bytes = request->limit_bytes;
    return GMR_LIMIT_ACTION_RAISE;
  }
  size_t excess = needed - request->limit_bytes;
  double factor = policy->padding_factor < 1.0 ? 1.0 : policy->padding_factor;
  double padded = floor((double)excess * factor);
  size_t growth = padded >= (double)SIZE_MAX ? SIZE_MAX : (size_t)padded;
  if (growth < excess) growth = excess; /* rounding of huge values */
  size_t target = SIZE_MAX - request->limit_bytes < growth ? SIZE_MAX
                                                           : request->limit_bytes + growth;
  if (policy->cap_bytes != 0 && target > policy->cap_bytes) {
    if (needed > policy->cap_bytes) return GMR_LIMIT_ACTION_FAIL;
    target = needed;
  }
  *new_limit_bytes = target;
  return GMR_LIMIT_ACTION_RAISE;
}

/* The built-in names, the one list of them: specs, messages and the listing
 * read it through gmr__limit_policy_builtin_names(). */
enum { BUILTIN_FAIL, BUILTIN_IGNORE, BUILTIN_INCREASE, BUILTIN_INCREASE_TOTAL, BUILTIN_COUNT };
static const char *const builtin_names[BUILTIN_COUNT] = {
    [BUILTIN_FAIL] = "fail",
    [BUILTIN_IGNORE] = "ignore",
    [BUILTIN_INCREASE] = "increase",
    [BUILTIN_INCREASE_TOTAL] = "increase_total",
};

const char *const *gmr__limit_policy_builtin_names(size_t *count) {
  *count = BUILTIN_COUNT;
  return builtin_names;
}

static gmr_limit_policy base(const char *name) {
  gmr_limit_policy p;
  memset(&p, 0, sizeof p);
  p.version = GMR_LIMIT_POLICY_VERSION;
  p.name = name;
  p.padding_factor = 1.0;
  return p;
}

static gmr_limit_policy make_fail(void) { return base(builtin_names[BUILTIN_FAIL]); }

static gmr_limit_policy make_ignore(void) {
  gmr_limit_policy p = base(builtin_names[BUILTIN_IGNORE]);
  p.decide = ignore_decide;
  return p;
}

static gmr_limit_policy make_increase(double padding_factor, size_t cap_bytes) {
  gmr_limit_policy p = base(builtin_names[BUILTIN_INCREASE]);
  p.decide = gmr__limit_policy_increase_decide;
  p.padding_factor = padding_factor < 1.0 || isnan(padding_factor) ? 1.0 : padding_factor;
  p.cap_bytes = cap_bytes;
  return p;
}

static gmr_limit_policy make_increase_total(double padding_factor, size_t cap_bytes) {
  gmr_limit_policy p = make_increase(padding_factor, cap_bytes);
  p.name = builtin_names[BUILTIN_INCREASE_TOTAL];
  p.decide = gmr__limit_policy_increase_total_decide;
  return p;
}

gmr_status gmr_limit_policy_check(const gmr_limit_policy *policy) {
  if (policy == NULL || policy->version < 1u || policy->name == NULL ||
      strlen(policy->name) > GMR_POLICY_NAME_MAX) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  bool increases = policy->decide == gmr__limit_policy_increase_decide ||
                   policy->decide == gmr__limit_policy_increase_total_decide;
  if (increases && !(policy->padding_factor >= 1.0 && policy->padding_factor < 1e6)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

/* ---- built-ins by name ------------------------------------------------ */

bool gmr__limit_policy_builtin(const char *name, gmr_limit_policy *out) {
  size_t i = 0;
  while (i < BUILTIN_COUNT && strcmp(name, builtin_names[i]) != 0) i++;
  switch (i) {
    case BUILTIN_FAIL:
      *out = make_fail();
      return true;
    case BUILTIN_IGNORE:
      *out = make_ignore();
      return true;
    case BUILTIN_INCREASE:
      *out = make_increase(GMR_LIMIT_DEFAULT_PADDING_FACTOR, 0);
      return true;
    case BUILTIN_INCREASE_TOTAL:
      *out = make_increase_total(GMR_LIMIT_DEFAULT_PADDING_FACTOR, 0);
      return true;
    default:
      return false;
  }
}
