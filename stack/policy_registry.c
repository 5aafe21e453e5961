/*
 * stack/policy_registry.c (internal): see policy_registry.h.
 */
#include "stack/policy_registry.h"

#include <string.h>

bool gmr__policy_name_is_valid(const char *name) {
  if (name == NULL || name[0] == '\0') return false;
  size_t n = 0;
  for (const char *c = name; *c != '\0'; ++c, ++n) {
    bool alpha = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || *c == '_';
    bool digit = *c >= '0' && *c <= '9';
    if (!alpha && !(digit && n > 0)) return false;
  }
  return n <= GMR_POLICY_NAME_MAX;
}

/* Index of `name`, or r->count. Pre: mutex held. */
static size_t find(const gmr__policy_registry *r, const char *name) {
  for (size_t i = 0; i < r->count; ++i) {
    if (strcmp(r->names[i], name) == 0) return i;
  }
  return r->count;
}

gmr_status gmr__policy_registry_add(gmr__policy_registry *r, const char *name,
                                    const gmr__policy_value *value) {
  gmr_status st = GMR_OK;
  pthread_mutex_lock(&r->mutex);
  if (find(r, name) != r->count) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (r->count == GMR__POLICY_REGISTRY_CAPACITY) {
    st = GMR_ERR_BUSY;
  } else {
    strcpy(r->names[r->count], name); /* the caller checked its length */
    r->values[r->count] = *value;
    r->count++;
  }
  pthread_mutex_unlock(&r->mutex);
  return st;
}

gmr_status gmr__policy_registry_remove(gmr__policy_registry *r, const char *name) {
  gmr_status st = GMR_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&r->mutex);
  size_t i = find(r, name);
  if (i != r->count) {
    /* The last entry fills the hole, unless it is the one removed. */
    r->count--;
    if (i != r->count) {
      memcpy(r->names[i], r->names[r->count], sizeof r->names[i]);
      r->values[i] = r->values[r->count];
    }
    st = GMR_OK;
  }
  pthread_mutex_unlock(&r->mutex);
  return st;
}

bool gmr__policy_registry_get(gmr__policy_registry *r, const char *name, gmr__policy_value *out) {
  pthread_mutex_lock(&r->mutex);
  size_t i = find(r, name);
  bool found = i != r->count;
  if (found) *out = r->values[i];
  pthread_mutex_unlock(&r->mutex);
  return found;
}

bool gmr__policy_registry_init(gmr__policy_registry *r) {
  memset(r, 0, sizeof *r);
  return pthread_mutex_init(&r->mutex, NULL) == 0;
}

void gmr__policy_registry_deinit(gmr__policy_registry *r) { pthread_mutex_destroy(&r->mutex); }
