/*
 * stack/policy_registry.h (internal): a table of named values of one
 * policy type (gmr_oom_policy or gmr_limit_policy), behind one mutex. A
 * context (stack/context.c) keeps its registered names of both kinds in two
 * of these, so add, remove and look-up behave the same for both.
 *
 * Thread-safe: yes (internal mutex).
 */
#ifndef GMR_STACK_POLICY_REGISTRY_H_
#define GMR_STACK_POLICY_REGISTRY_H_

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "gmr/policy.h"
#include "gmr/status.h"

/* [A-Za-z_][A-Za-z0-9_]*, 1..GMR_POLICY_NAME_MAX characters. */
bool gmr__policy_name_is_valid(const char *name);

/* Names a registry may hold at once. */
#define GMR__POLICY_REGISTRY_CAPACITY 64

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

/* A registry made at run time (GMR__POLICY_REGISTRY_INIT for static ones).
 * False when its mutex cannot be made (nothing to deinit then). */
bool gmr__policy_registry_init(gmr__policy_registry *r);
void gmr__policy_registry_deinit(gmr__policy_registry *r);

/* Add `name` (checked by the caller) with a copy of `value`. Returns GMR_OK,
 * GMR_ERR_INVALID_ARGUMENT (the name is taken) or GMR_ERR_BUSY (full). */
gmr_status gmr__policy_registry_add(gmr__policy_registry *r, const char *name,
                                    const gmr__policy_value *value);

/* Remove `name`. Returns GMR_OK or GMR_ERR_INVALID_ARGUMENT (not there). */
gmr_status gmr__policy_registry_remove(gmr__policy_registry *r, const char *name);

/* Copy the value of `name` into *out. false if there is none. */
bool gmr__policy_registry_get(gmr__policy_registry *r, const char *name, gmr__policy_value *out);

#endif /* GMR_STACK_POLICY_REGISTRY_H_ */
