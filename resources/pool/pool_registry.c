/*
 * resources/pool/pool_registry.c (internal): the chunks of every arena sorted by
 * address, so that a thread frees a pointer another arena handed out. Kept
 * only with more than one arena. See pool_internal.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "resources/pool/pool_internal.h"

/* ---- registry ----------------------------------------------------------- */

static size_t registry_position(const gmr__pool_registry *r, uintptr_t addr) {
  size_t lo = 0, hi = r->count; /* the first item with base > addr */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->items[mid]->base <= addr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

bool gmr__pool_registry_reserve_one(gmr__pool_registry *r) {
  pthread_rwlock_wrlock(&r->lock);
  bool ok = true;
  if (r->count + r->reserved == r->capacity) {
    size_t capacity = r->capacity == 0 ? 16 : r->capacity * 2;
    gmr__pool_chunk **items = realloc(r->items, capacity * sizeof *items);
    if (items == NULL) {
      ok = false;
    } else {
      r->items = items;
      r->capacity = capacity;
    }
  }
  if (ok) r->reserved++;
  pthread_rwlock_unlock(&r->lock);
  return ok;
}

void gmr__pool_registry_unreserve(gmr__pool_registry *r) {
  pthread_rwlock_wrlock(&r->lock);
  r->reserved--;
  pthread_rwlock_unlock(&r->lock);
}

void gmr__pool_registry_insert(gmr__pool_registry *r, gmr__pool_chunk *c) {
  pthread_rwlock_wrlock(&r->lock);
  size_t pos = registry_position(r, c->base);
  memmove(&r->items[pos + 1], &r->items[pos], (r->count - pos) * sizeof *r->items);
  r->items[pos] = c;
  r->count++;
  r->reserved--;
  pthread_rwlock_unlock(&r->lock);
}

void gmr__pool_registry_remove(gmr__pool_registry *r, gmr__pool_chunk *c, bool keep_place) {
  pthread_rwlock_wrlock(&r->lock);
  size_t pos = registry_position(r, c->base);
  if (pos > 0 && r->items[pos - 1] == c) {
    memmove(&r->items[pos - 1], &r->items[pos], (r->count - pos) * sizeof *r->items);
    r->count--;
    if (keep_place) r->reserved++;
  }
  pthread_rwlock_unlock(&r->lock);
}

/* The arena owning the chunk that contains `addr`, or NULL. Arenas live as
 * long as the pool, so the pointer stays valid after the lock is dropped. */
gmr__pool_arena *gmr__pool_registry_find_arena(gmr__pool_registry *r, uintptr_t addr) {
  gmr__pool_arena *found = NULL;
  pthread_rwlock_rdlock(&r->lock);
  size_t pos = registry_position(r, addr);
  if (pos > 0 && addr - r->items[pos - 1]->base < r->items[pos - 1]->size) {
    found = r->items[pos - 1]->arena;
  }
  pthread_rwlock_unlock(&r->lock);
  return found;
}

void gmr__pool_registry_resize(gmr__pool_registry *r, gmr__pool_chunk *c, size_t size,
                               bool registered) {
  /* Lookups read the size under the read lock: written under the write lock. */
  if (registered) pthread_rwlock_wrlock(&r->lock);
  c->size = size;
  if (registered) pthread_rwlock_unlock(&r->lock);
}
