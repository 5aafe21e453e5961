/*
 * core/events.c: listener lists (core/events.h) and gmr_event_kind_name().
 */
/* pthread_rwlock_* are POSIX, not C11. */
#define _POSIX_C_SOURCE 200809L

#include "core/events.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static pthread_rwlock_t *lock_of(const gmr__event_listeners *l) { return l->lock; }

bool gmr__event_listeners_init(gmr__event_listeners *l) {
  memset(l->items, 0, sizeof l->items);
  atomic_init(&l->count, 0);
  pthread_rwlock_t *lock = malloc(sizeof *lock);
  if (lock == NULL) return false;
  if (pthread_rwlock_init(lock, NULL) != 0) {
    free(lock);
    return false;
  }
  l->lock = lock;
  return true;
}

void gmr__event_listeners_deinit(gmr__event_listeners *l) {
  pthread_rwlock_destroy(lock_of(l));
  free(l->lock);
  l->lock = NULL;
}

bool gmr__event_listeners_has(gmr__event_listeners *l, gmr_event_listener_fn *fn, void *ctx) {
  pthread_rwlock_rdlock(lock_of(l));
  size_t used = atomic_load_explicit(&l->count, memory_order_relaxed);
  bool there = false;
  for (size_t i = 0; i < used; ++i) there |= l->items[i].fn == fn && l->items[i].ctx == ctx;
  pthread_rwlock_unlock(lock_of(l));
  return there;
}

static size_t find(const gmr__event_listeners *l, size_t used, gmr_event_listener_fn *fn,
                   void *ctx) {
  for (size_t i = 0; i < used; ++i) {
    if (l->items[i].fn == fn && l->items[i].ctx == ctx) return i;
  }
  return used;
}

gmr_status gmr__event_listeners_add(gmr__event_listeners *l, gmr_event_listener_fn *fn,
                                    void *ctx) {
  if (fn == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr_status st = GMR_OK;
  pthread_rwlock_wrlock(lock_of(l));
  size_t used = atomic_load_explicit(&l->count, memory_order_relaxed);
  if (find(l, used, fn, ctx) != used) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else if (used == GMR_EVENT_MAX_LISTENERS) {
    st = GMR_ERR_BUSY;
  } else {
    l->items[used].fn = fn;
    l->items[used].ctx = ctx;
    atomic_store_explicit(&l->count, (unsigned)(used + 1), memory_order_relaxed);
  }
  pthread_rwlock_unlock(lock_of(l));
  return st;
}

gmr_status gmr__event_listeners_remove(gmr__event_listeners *l, gmr_event_listener_fn *fn,
                                       void *ctx) {
  gmr_status st = GMR_OK;
  pthread_rwlock_wrlock(lock_of(l));
  size_t used = atomic_load_explicit(&l->count, memory_order_relaxed);
  size_t i = find(l, used, fn, ctx);
  if (fn == NULL || i == used) {
    st = GMR_ERR_INVALID_ARGUMENT;
  } else {
    l->items[i] = l->items[used - 1];
    atomic_store_explicit(&l->count, (unsigned)(used - 1), memory_order_relaxed);
  }
  pthread_rwlock_unlock(lock_of(l));
  return st;
}

void gmr__event_emit(gmr__event_listeners *l, const gmr_event *event) {
  if (l == NULL || atomic_load_explicit(&l->count, memory_order_relaxed) == 0) return;
  pthread_rwlock_rdlock(lock_of(l));
  size_t used = atomic_load_explicit(&l->count, memory_order_relaxed);
  for (size_t i = 0; i < used; ++i) l->items[i].fn(l->items[i].ctx, event);
  pthread_rwlock_unlock(lock_of(l));
}

const char *gmr_event_kind_name(gmr_event_kind kind) {
  switch (kind) {
#define GMR_EVENT_KIND_NAME_(name, value, text) \
  case GMR_EVENT_##name:                        \
    return text;
    GMR_EVENT_KIND_MAP(GMR_EVENT_KIND_NAME_)
#undef GMR_EVENT_KIND_NAME_
    default:
      return "unknown";
  }
}
