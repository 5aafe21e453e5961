/*
 * adaptors/policy_registry.h (internal): a table of named values of one
 * policy type (gmr_oom_policy or gmr_limit_policy), behind one mutex. Both
 * policy kinds keep their registered names in one of these, so add, remove
 * and look-up behave the same for both.
 *
 * Thread-safe: yes (internal mutex).
 */
#ifndef GMR_ADAPTORS_POLICY_REGISTRY_H_
#define GMR_ADAPTORS_POLICY_REGISTRY_H_

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "adaptors/policy_internal.h"
#include "gmr/policy.h"
#include "gmr/status.h"

/* Room for a value of either policy type. */
typedef union gmr__policy_value {
  gmr_oom_policy oom;
  gmr_limit_policy limit;
} gmr__policy_value;

typedef struct gmr__policy_registry {
  pthread_mutex_t mutex;
  size_t count;
  char names[GMR__POLICY_REGISTRY_CAPACITY][GMR_POLICY_NAME_MAX + 1];
  gmr__policy_value values[GMR__POLICY_REGISTRY_CAPACITY];
} gmr__policy_registry;

#define GMR__POLICY_REGISTRY_INIT {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}, {{{0}}}}

/* Add `name` (checked by the caller) with a copy of `value`. Returns GMR_OK,
 * GMR_ERR_INVALID_ARGUMENT (the name is taken) or GMR_ERR_BUSY (full). */
gmr_status gmr__policy_registry_add(gmr__policy_registry *r, const char *name,
                                    const gmr__policy_value *value);

/* Remove `name`. Returns GMR_OK or GMR_ERR_INVALID_ARGUMENT (not there). */
gmr_status gmr__policy_registry_remove(gmr__policy_registry *r, const char *name);

/* Copy the value of `name` into *out. false if there is none. */
bool gmr__policy_registry_get(gmr__policy_registry *r, const char *name, gmr__policy_value *out);

#endif /* GMR_ADAPTORS_POLICY_REGISTRY_H_ */
