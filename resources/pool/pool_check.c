/*
 * resources/pool/pool_check.c (internal): the invariant walk of a pool's
 * books, which gmr_resource_check() runs on every pool of a stack (the pool's
 * type registers it: core/resource_type.h). See gmr/pool_resource.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>

#include "resources/pool/pool_internal.h"

typedef struct check_state {
  char *err;
  size_t err_bytes;
} check_state;

static bool violated(check_state *cs, const char *fmt, ...) {
  if (cs->err != NULL && cs->err_bytes > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cs->err, cs->err_bytes, fmt, ap);
    va_end(ap);
  }
  return false;
}

typedef struct index_visit {
  const gmr__pool_arena *arena;
  uint32_t slot;
  size_t count;
} index_visit;

static bool visit_free_block(void *ctx, const gmr__free_node *n) {
  index_visit *v = ctx;
  const gmr__pool_block *b = (const gmr__pool_block *)(const void *)n; /* its first member */
  v->count++;
  return b->is_free && !b->cached && !b->deferred && b->slot == v->slot && b->chunk != NULL &&
         b->chunk->arena == v->arena;
}

/* A free block may touch a free block of another slot, but never one of the
 * same slot: they would have been merged. Cached and deferred blocks are not
 * merged yet. */
static bool touching_allowed(const gmr__pool_block *a, const gmr__pool_block *b) {
  return !a->is_free || !b->is_free || a->cached || b->cached || a->deferred || b->deferred ||
         a->slot != b->slot;
}

static bool in_deferred(const gmr__pool_arena *a, const gmr__pool_block *b) {
  for (const gmr__pool_block *d = a->deferred; d != NULL;
       d = gmr__pool_block_of(d->node.free_next)) {
    if (d == b) return true;
  }
  return false;
}

static bool in_cache(const gmr__pool_slot *s, const gmr__pool_block *b) {
  for (uint32_t i = 0; i < s->cache_count; ++i) {
    if (s->cache[i] == b) return true;
  }
  return false;
}

static bool check_chunk(const gmr__pool_arena *a, uint32_t ai, const gmr__pool_chunk *c,
                        size_t *live, size_t *in_use, size_t *requested, size_t *free_blocks,
                        size_t *cached, check_state *cs) {
  if (c->arena != a) {
    return violated(cs, "arena %u: chunk %#zx names another arena", ai, (size_t)c->base);
  }
  if (c->next != NULL && c->next->prev != c) return violated(cs, "arena %u: chunk list links", ai);
  uintptr_t expect = c->base;
  const gmr__pool_block *prev = NULL;
  for (const gmr__pool_block *b = c->first; b != NULL; b = b->phys_next) {
    if (b->node.addr != expect || b->chunk != c || b->phys_prev != prev || b->node.bytes == 0 ||
        b->node.bytes % GMR__POOL_UNIT != 0) {
      return violated(cs, "arena %u: block %#zx breaks the tiling of chunk %#zx", ai,
                      (size_t)b->node.addr, (size_t)c->base);
    }
    if (prev != NULL && !touching_allowed(prev, b)) {
      return violated(cs, "arena %u: free blocks %#zx (slot %u) and %#zx (slot %u) were not merged",
                      ai, (size_t)prev->node.addr, prev->slot, (size_t)b->node.addr, b->slot);
    }
    bool mapped = gmr__block_map_find(&a->live, b->node.addr) == b;
    if (b->is_free) {
      if (b->slot >= a->slots.count) return violated(cs, "arena %u: free block in no slot", ai);
      if (b->deferred) {
        if (b->cached || b->uses == NULL || !in_deferred(a, b)) {
          return violated(cs, "arena %u: deferred block %#zx is not in the deferred list", ai,
                          (size_t)b->node.addr);
        }
      } else if (b->cached) {
        if (!in_cache(gmr__pool_slot_at(a, b->slot), b) || !mapped) {
          return violated(cs, "arena %u: cached block %#zx is not in its slot's cache and the "
                          "live map", ai, (size_t)b->node.addr);
        }
        ++*cached;
      } else {
        ++*free_blocks;
      }
      if (mapped && !b->cached) {
        return violated(cs, "arena %u: free block %#zx is in the live map", ai,
                        (size_t)b->node.addr);
      }
    } else {
      ++*live;
      *in_use += b->node.bytes;
      *requested += b->request_bytes;
      if (b->request_bytes == 0 || b->request_bytes > b->node.bytes || !mapped) {
        return violated(cs, "arena %u: allocated block %#zx is not mapped or has no request", ai,
                        (size_t)b->node.addr);
      }
    }
    expect = b->node.addr + b->node.bytes;
    prev = b;
  }
  if (expect != c->base + c->size) {
    return violated(cs, "arena %u: the blocks of chunk %#zx end at %#zx, not at its end", ai,
                    (size_t)c->base, (size_t)expect);
  }
  return true;
}

bool gmr__pool_check_arena(const gmr__pool_arena *a, uint32_t ai, char *err, size_t err_bytes) {
  check_state cs = {err, err_bytes};
  size_t held = 0, chunks = 0, live = 0, in_use = 0, requested = 0, free_blocks = 0, cached = 0;
  for (const gmr__pool_chunk *c = a->chunks; c != NULL; c = c->next) {
    chunks++;
    held += c->size;
    if (!check_chunk(a, ai, c, &live, &in_use, &requested, &free_blocks, &cached, &cs)) {
      return false;
    }
  }
  size_t indexed = 0, deferred = 0, deferred_bytes = 0;
  for (const gmr__pool_block *d = a->deferred; d != NULL;
       d = gmr__pool_block_of(d->node.free_next)) {
    if (!d->deferred || !d->is_free || d->slot >= a->slots.count) {
      return violated(&cs, "arena %u: the deferred list holds a block that is not deferred", ai);
    }
    deferred++;
    deferred_bytes += d->node.bytes;
  }
  if (deferred != a->deferred_count || deferred_bytes != a->deferred_bytes) {
    return violated(&cs, "arena %u: %zu deferred blocks of %zu bytes, %zu counted", ai, deferred,
                    deferred_bytes, a->deferred_count);
  }
  size_t per_slot = 0;
  for (uint32_t i = 0; i < a->slots.count; ++i) per_slot += gmr__pool_slot_at(a, i)->deferred_count;
  if (per_slot != deferred) {
    return violated(&cs, "arena %u: the slots count %zu deferred blocks, the list %zu", ai,
                    per_slot, deferred);
  }
  for (uint32_t i = 0; i < a->slots.count; ++i) {
    const gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    for (uint32_t k = 0; k < s->cache_count; ++k) {
      const gmr__pool_block *b = s->cache[k];
      if (!b->is_free || !b->cached || b->slot != i || b->chunk == NULL || b->chunk->arena != a) {
        return violated(&cs, "arena %u: slot %u caches a block that is not a free block of it", ai,
                        i);
      }
    }
    index_visit v = {a, i, 0};
    if (!gmr__free_index_check(&gmr__pool_slot_at(a, i)->index, visit_free_block, &v)) {
      return violated(&cs, "arena %u: the free index of slot %u is inconsistent", ai, i);
    }
    indexed += v.count;
  }
  if (indexed != free_blocks) {
    return violated(&cs, "arena %u: %zu free blocks in chunks but %zu in the indexes", ai,
                    free_blocks, indexed);
  }
  if (live + cached != a->live.count || live != a->in_use_count || in_use != a->in_use_bytes ||
      requested != a->requested_bytes) {
    return violated(
        &cs, "arena %u: %zu allocated blocks of %zu bytes, but %zu counted (%zu mapped) of %zu", ai,
        live, in_use, a->in_use_count, a->live.count, a->in_use_bytes);
  }
  if (held != a->held_bytes || chunks != a->chunk_count) {
    return violated(&cs, "arena %u: chunks hold %zu bytes, %zu counted", ai, held, a->held_bytes);
  }
  return true;
}

gmr_status gmr__pool_check_books(gmr_resource *self, char *err, size_t err_bytes) {
  if (err != NULL && err_bytes > 0) err[0] = '\0';
  if (self == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr_pool_resource *pool = (gmr_pool_resource *)self;
  bool ok = true;
  size_t held = 0, chunks = 0;
  for (uint32_t i = 0; i < pool->arena_count && ok; ++i) {
    gmr__pool_arena *a = pool->arenas[i];
    gmr__spin_lock_acquire(&a->lock);
    ok = gmr__pool_check_arena(a, i, err, err_bytes);
    held += a->held_bytes;
    chunks += a->chunk_count;
    gmr__spin_lock_release(&a->lock);
  }
  if (ok && held != atomic_load(&pool->held_bytes)) {
    if (err != NULL) {
      snprintf(err, err_bytes, "the arenas hold %zu bytes, the pool counts %zu", held,
               atomic_load(&pool->held_bytes));
    }
    ok = false;
  }
  if (ok && pool->arena_count > 1) {
    pthread_rwlock_rdlock(&pool->registry.lock);
    if (pool->registry.count != chunks) {
      if (err != NULL) {
        snprintf(err, err_bytes, "%zu chunks, but %zu in the chunk table", chunks,
                 pool->registry.count);
      }
      ok = false;
    }
    for (size_t i = 1; ok && i < pool->registry.count; ++i) {
      const gmr__pool_chunk *p = pool->registry.items[i - 1], *c = pool->registry.items[i];
      if (p->base + p->size > c->base) {
        if (err != NULL) {
          snprintf(err, err_bytes, "chunks %#zx and %#zx overlap", (size_t)p->base,
                   (size_t)c->base);
        }
        ok = false;
      }
    }
    pthread_rwlock_unlock(&pool->registry.lock);
  }
  return ok ? GMR_OK : GMR_ERR_INTERNAL;
}
