/*
 * adaptors/limit_policy.c: the built-in limit policies and the registry of
 * named ones. See gmr/policy.h.
 */
#include <math.h>
#include <pthread.h>
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

gmr_limit_action gmr__limit_policy_increase_decide(const gmr_limit_policy *policy,
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

static gmr_limit_policy base(const char *name) {
  gmr_limit_policy p;
  memset(&p, 0, sizeof p);
  p.version = GMR_LIMIT_POLICY_VERSION;
  p.name = name;
  p.padding_factor = 1.0;
  return p;
}

gmr_limit_policy gmr_limit_policy_fail(void) { return base("fail"); }

gmr_limit_policy gmr_limit_policy_ignore(void) {
  gmr_limit_policy p = base("ignore");
  p.decide = ignore_decide;
  return p;
}

gmr_limit_policy gmr_limit_policy_increase(double padding_factor, size_t cap_bytes) {
  gmr_limit_policy p = base("increase");
  p.decide = gmr__limit_policy_increase_decide;
  p.padding_factor = padding_factor < 1.0 || isnan(padding_factor) ? 1.0 : padding_factor;
  p.cap_bytes = cap_bytes;
  return p;
}

gmr_status gmr_limit_policy_check(const gmr_limit_policy *policy) {
  if (policy == NULL || policy->version < 1u || policy->name == NULL ||
      strlen(policy->name) > GMR_POLICY_NAME_MAX) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (policy->decide == gmr__limit_policy_increase_decide &&
      !(policy->padding_factor >= 1.0 && policy->padding_factor < 1e6)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  return GMR_OK;
}

/* ---- registry ----------------------------------------------------------- */

typedef struct entry {
  char name[GMR_POLICY_NAME_MAX + 1];
  gmr_limit_policy policy;
} entry;

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static entry registry[GMR__POLICY_REGISTRY_CAPACITY];
static size_t registry_count;

static bool builtin(const char *name, gmr_limit_policy *out) {
  if (strcmp(name, "fail") == 0) {
    *out = gmr_limit_policy_fail();
  } else if (strcmp(name, "ignore") == 0) {
    *out = gmr_limit_policy_ignore();
  } else if (strcmp(name, "increase") == 0) {
    *out = gmr_limit_policy_increase(GMR_LIMIT_DEFAULT_PADDING_FACTOR, 0);
  } else {
    return false;
  }
  return true;
}

static size_t find(const char *name) {
  for (size_t i = 0; i < registry_count; ++i) {
    if (strcmp(registry[i].name, name) == 0) return i;
  }
  return registry_count;
}

gmr_status gmr_limit_policy_register(const char *name, const gmr_limit_policy *policy) {
  gmr_limit_policy ignored;
  if (!gmr__policy_name_is_valid(name) || builtin(name, &ignored) ||
      gmr_limit_policy_check(policy) != GMR_OK) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  gmr_status st = GMR_OK;
  pthread_mutex_lock(&registry_mutex);
  if (find(name) != registry_count) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (registry_count == GMR__POLICY_REGISTRY_CAPACITY) {
    st = GMR_ERR_BUSY;
  } else {
    entry *e = &registry[registry_count++];
    strcpy(e->name, name);
    e->policy = *policy;
    e->policy.release = NULL;
  }
  pthread_mutex_unlock(&registry_mutex);
  return st;
}

gmr_status gmr_limit_policy_unregister(const char *name) {
  if (name == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr_status st = GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&registry_mutex);
  size_t i = find(name);
  if (i != registry_count) {
    registry[i] = registry[--registry_count];
    st = GMR_OK;
  }
  pthread_mutex_unlock(&registry_mutex);
  return st;
}

gmr_status gmr_limit_policy_from_name(const char *name, gmr_limit_policy *out) {
  if (name == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  if (builtin(name, out)) return GMR_OK;
  gmr_status st = GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&registry_mutex);
  size_t i = find(name);
  if (i != registry_count) {
    *out = registry[i].policy;
    st = GMR_OK;
  }
  pthread_mutex_unlock(&registry_mutex);
  return st;
}
