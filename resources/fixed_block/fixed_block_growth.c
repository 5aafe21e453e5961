/*
 * resources/fixed_block/fixed_block_growth.c (internal): chunks: the
 * registry of every chunk by address, finding a block's shard, adding chunks
 * with the upstream called outside the shard's spin lock, and giving chunks
 * back (trim, destroy) the same way: a chunk is taken out of the books under
 * the spin lock first (RMM #2304: once the upstream has the memory, another
 * shard may receive the same address) and put back, whole, if its upstream
 * free fails. See fixed_block_internal.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "core/failure.h"
#include "core/nvtx_mem.h"
#include "resources/fixed_block/fixed_block_internal.h"

size_t gmr__fb_chunk_bytes(const gmr_fixed_block_resource *r, const gmr__fb_chunk *c) {
  return c->block_count * r->config.block_bytes;
}

/* ---- the registry (only with several shards) --------------------------------- */

static bool registry_reserve(gmr_fixed_block_resource *r) {
  if (r->shard_count == 1) return true;
  pthread_rwlock_wrlock(&r->registry_lock);
  bool ok = true;
  if (r->registry_count + r->registry_reserved == r->registry_capacity) {
    size_t capacity = r->registry_capacity == 0 ? 16 : r->registry_capacity * 2;
    gmr__fb_chunk **items = realloc(r->registry, capacity * sizeof *items);
    if (items == NULL) {
      ok = false;
    } else {
      r->registry = items;
      r->registry_capacity = capacity;
    }
  }
  if (ok) r->registry_reserved++;
  pthread_rwlock_unlock(&r->registry_lock);
  return ok;
}

static void registry_unreserve(gmr_fixed_block_resource *r) {
  if (r->shard_count == 1) return;
  pthread_rwlock_wrlock(&r->registry_lock);
  r->registry_reserved--;
  pthread_rwlock_unlock(&r->registry_lock);
}

static void registry_insert(gmr_fixed_block_resource *r, gmr__fb_chunk *c) {
  if (r->shard_count == 1) return;
  pthread_rwlock_wrlock(&r->registry_lock);
  size_t pos = gmr__fb_position(r->registry, r->registry_count, c->base);
  memmove(&r->registry[pos + 1], &r->registry[pos],
          (r->registry_count - pos) * sizeof *r->registry);
  r->registry[pos] = c;
  r->registry_count++;
  r->registry_reserved--;
  pthread_rwlock_unlock(&r->registry_lock);
}

/* Remove `c`, keeping its place promised (it may come back). */
static void registry_remove(gmr_fixed_block_resource *r, gmr__fb_chunk *c) {
  if (r->shard_count == 1) return;
  pthread_rwlock_wrlock(&r->registry_lock);
  size_t pos = gmr__fb_position(r->registry, r->registry_count, c->base);
  if (pos > 0 && r->registry[pos - 1] == c) {
    memmove(&r->registry[pos - 1], &r->registry[pos],
            (r->registry_count - pos) * sizeof *r->registry);
    r->registry_count--;
    r->registry_reserved++;
  }
  pthread_rwlock_unlock(&r->registry_lock);
}

/* ---- finding blocks ------------------------------------------------------------ */

gmr__fb_block *gmr__fb_find_block_elsewhere(gmr_fixed_block_resource *r, gmr__fb_shard *first,
                                            uintptr_t addr, gmr__fb_shard **shard) {
  if (r->shard_count == 1) return NULL;
  gmr__fb_shard *s = NULL;
  pthread_rwlock_rdlock(&r->registry_lock);
  size_t pos = gmr__fb_position(r->registry, r->registry_count, addr);
  if (pos > 0 && addr - r->registry[pos - 1]->base < gmr__fb_chunk_bytes(r, r->registry[pos - 1])) {
    s = r->registry[pos - 1]->shard;
  }
  pthread_rwlock_unlock(&r->registry_lock);
  if (s == NULL || s == first) return NULL;
  gmr__spin_lock_acquire(&s->lock);
  gmr__fb_block *b = gmr__fb_block_in_shard(s, addr); /* the chunk may have gone meanwhile */
  if (b == NULL) {
    gmr__spin_lock_release(&s->lock);
    return NULL;
  }
  *shard = s;
  return b;
}

bool gmr__fb_in_a_chunk(gmr_fixed_block_resource *r, uintptr_t addr) {
  for (uint32_t i = 0; i < r->shard_count; ++i) {
    gmr__fb_shard *s = r->shards[i];
    gmr__spin_lock_acquire(&s->lock);
    size_t pos = gmr__fb_position(s->chunks, s->chunk_count, addr);
    bool inside = pos > 0 && addr - s->chunks[pos - 1]->base <
                                 gmr__fb_chunk_bytes(r, s->chunks[pos - 1]);
    gmr__spin_lock_release(&s->lock);
    if (inside) return true;
  }
  return false;
}

/* ---- adding chunks -------------------------------------------------------------- */

/* Room for one more chunk of `blocks` blocks in the shard's arrays, so adding
 * it cannot fail half-way. Pre: lock held. */
static bool reserve_for_chunk(gmr__fb_shard *s, size_t blocks) {
  if (s->chunk_count == s->chunk_capacity) {
    size_t capacity = s->chunk_capacity == 0 ? 8 : s->chunk_capacity * 2;
    gmr__fb_chunk **chunks = realloc(s->chunks, capacity * sizeof *chunks);
    if (chunks == NULL) return false;
    s->chunks = chunks;
    s->chunk_capacity = capacity;
  }
  size_t need = s->total_blocks + blocks;
  if (need <= s->stack_capacity) return true;
  size_t capacity = s->stack_capacity * 2 > need ? s->stack_capacity * 2 : need;
  for (uint32_t i = 0; i < s->slots.count; ++i) {
    gmr__fb_block **stack = realloc(gmr__fb_slot_at(s, i)->stack, capacity * sizeof *stack);
    if (stack == NULL) return false; /* the slots grown so far just have spare room */
    gmr__fb_slot_at(s, i)->stack = stack;
  }
  s->stack_capacity = capacity;
  return true;
}

/* Link chunk `c` into `s` (sorted) and into the registry. Pre: lock held,
 * room reserved. */
static void link_chunk(gmr__fb_shard *s, gmr__fb_chunk *c) {
  size_t pos = gmr__fb_position(s->chunks, s->chunk_count, c->base);
  memmove(&s->chunks[pos + 1], &s->chunks[pos], (s->chunk_count - pos) * sizeof *s->chunks);
  s->chunks[pos] = c;
  s->chunk_count++;
  s->total_blocks += c->block_count;
  registry_insert(s->r, c);
  if (s->r->config.streams.nvtx_annotate) {
    c->nvtx_heap = gmr__nvtx_mem_heap_register((void *)c->base, gmr__fb_chunk_bytes(s->r, c),
                                               "fixed_block_resource chunk");
  }
}

bool gmr__fb_add_chunk(gmr__fb_shard *s, uint32_t si, void *ptr, size_t blocks) {
  gmr_fixed_block_resource *r = s->r;
  gmr__fb_chunk *c = calloc(1, sizeof *c + blocks * sizeof c->blocks[0]);
  if (c == NULL || !reserve_for_chunk(s, blocks)) {
    free(c);
    return false;
  }
  c->base = (uintptr_t)ptr;
  c->shard = s;
  c->block_count = blocks;
  link_chunk(s, c);
  /* Pushed last to first, so blocks are handed out in address order. */
  for (size_t i = blocks; i-- > 0;) {
    c->blocks[i].addr = c->base + i * r->config.block_bytes;
    c->blocks[i].chunk = c;
    gmr__fb_push_free(s, si, &c->blocks[i]);
  }
  gmr__fb_held_add(r, gmr__fb_chunk_bytes(r, c));
  atomic_fetch_add_explicit(&r->grow_count, 1, memory_order_relaxed);
  /* Upstream memory is ordered on the stream it was taken on (recorded now,
   * while that stream surely exists). */
  if (r->config.streams.stream_ordered) {
    gmr__stream_event_mark_freed(r->cuda, &gmr__fb_slot_at(s, si)->base.ev, true, &r->events);
  }
  return true;
}

gmr_status gmr__fb_grow(gmr__fb_shard *s, gmr__stream_key key, size_t count, gmr_stream stream,
                        bool smaller_chunks, gmr__fb_take_fn *take, void *ctx,
                        gmr_failure *failure) {
  gmr_fixed_block_resource *r = s->r;
  size_t blocks = r->config.blocks_per_chunk;
  size_t max = r->config.max_chunk_count;
  for (;;) {
    gmr__spin_lock_acquire(&s->lock);
    uint32_t si = gmr__fb_slot_of(s, key);
    size_t have = si == UINT32_MAX ? 0 : gmr__fb_slot_at(s, si)->count;
    /* Enough (blocks came back, or the last chunk added): taken now. */
    if (si != UINT32_MAX && have >= count && take != NULL) take(s, si, ctx);
    gmr__spin_lock_release(&s->lock);
    if (si == UINT32_MAX) {
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                              "fixed_block_resource: no host memory for a new stream's free list");
    }
    if (have >= count) return GMR_OK;
    size_t missing = count - have;
    if (max != 0 && atomic_fetch_add(&r->chunk_count, 1) >= max) {
      atomic_fetch_sub(&r->chunk_count, 1);
      return gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                              "fixed_block_resource: all %zu chunks of max_chunk_count are in "
                              "use; raise max_chunk_count (spec option 'max_chunks')",
                              max);
    }
    if (max == 0) atomic_fetch_add(&r->chunk_count, 1);
    void *ptr = NULL;
    bool reserved = registry_reserve(r);
    gmr_status st = reserved ? gmr_resource_allocate_ex(r->upstream, blocks * r->config.block_bytes,
                                                        GMR__FB_UNIT, stream, &ptr, failure)
                             : gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                                                "fixed_block_resource: no host memory for a "
                                                "chunk's records");
    if (st == GMR_OK) {
      gmr__spin_lock_acquire(&s->lock);
      si = gmr__fb_slot_of(s, key);
      bool added = si != UINT32_MAX && gmr__fb_add_chunk(s, si, ptr, blocks);
      bool done = added && gmr__fb_slot_at(s, si)->count >= count;
      if (done && take != NULL) take(s, si, ctx);
      gmr__spin_lock_release(&s->lock);
      if (done) return GMR_OK;
      if (added) continue;
      GMR_IGNORE_STATUS(gmr_resource_deallocate(r->upstream, ptr, blocks * r->config.block_bytes, GMR__FB_UNIT,
                                    stream));
      st = gmr__failure_set(failure, GMR_ERR_OUT_OF_MEMORY,
                            "fixed_block_resource: no host memory for a chunk's records");
    }
    if (reserved) registry_unreserve(r);
    atomic_fetch_sub(&r->chunk_count, 1);
    bool no_memory = st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED;
    size_t floor = missing < r->config.blocks_per_chunk ? missing : 1;
    if (!no_memory || !smaller_chunks || blocks <= floor) return st;
    /* Smaller chunks, down to the blocks the request still needs. */
    blocks = blocks / 2 > floor ? blocks / 2 : floor;
  }
}

/* ---- giving chunks back ------------------------------------------------------ */

static bool chunk_settled(const gmr__fb_shard *s, const gmr__fb_chunk *c) {
  if (c->live_count != 0) return false;
  for (size_t i = 0; i < c->block_count; ++i) {
    const gmr__fb_block *b = &c->blocks[i];
    if (b->deferred) return false;
    if (s->r->config.streams.stream_ordered &&
        !gmr__stream_event_settled(&gmr__fb_slot_at(s, b->slot)->base.ev)) {
      return false;
    }
  }
  return true;
}

/* Take chunk `c` (index `pos`) out of the shard's books. Pre: lock held. */
static void detach_chunk(gmr__fb_shard *s, size_t pos) {
  gmr_fixed_block_resource *r = s->r;
  gmr__fb_chunk *c = s->chunks[pos];
  memmove(&s->chunks[pos], &s->chunks[pos + 1], (s->chunk_count - pos - 1) * sizeof *s->chunks);
  s->chunk_count--;
  for (uint32_t i = 0; i < s->slots.count; ++i) {
    gmr__fb_slot *slot = gmr__fb_slot_at(s, i);
    size_t kept = 0;
    for (size_t j = 0; j < slot->count; ++j) {
      if (slot->stack[j]->chunk != c) slot->stack[kept++] = slot->stack[j];
    }
    slot->count = kept;
  }
  s->total_blocks -= c->block_count;
  registry_remove(r, c);
  gmr__fb_held_sub(r, gmr__fb_chunk_bytes(r, c));
  if (r->config.streams.nvtx_annotate) gmr__nvtx_mem_heap_unregister(c->nvtx_heap);
}

/* A detached chunk whose upstream free failed: back, its blocks on the
 * stacks they were on. Pre: lock held. */
static void reattach_chunk(gmr__fb_shard *s, gmr__fb_chunk *c) {
  gmr_fixed_block_resource *r = s->r;
  (void)reserve_for_chunk(s, 0); /* the chunk array has room: it just left it */
  link_chunk(s, c);
  for (size_t i = c->block_count; i-- > 0;) gmr__fb_push_free(s, c->blocks[i].slot, &c->blocks[i]);
  gmr__fb_held_add(r, gmr__fb_chunk_bytes(r, c));
}

gmr_status gmr__fb_release_chunks(gmr__fb_shard *s, bool all, size_t *released_bytes) {
  gmr_fixed_block_resource *r = s->r;
  for (size_t pos = 0;;) {
    gmr__spin_lock_acquire(&s->lock);
    while (pos < s->chunk_count && !all && !chunk_settled(s, s->chunks[pos])) pos++;
    if (pos >= s->chunk_count) {
      gmr__spin_lock_release(&s->lock);
      return GMR_OK;
    }
    gmr__fb_chunk *c = s->chunks[pos];
    detach_chunk(s, pos);
    gmr__spin_lock_release(&s->lock);
    /* The default stream: the streams that used the chunk are done. */
    size_t bytes = gmr__fb_chunk_bytes(r, c);
    gmr_status st =
        gmr_resource_deallocate(r->upstream, (void *)c->base, bytes, GMR__FB_UNIT, NULL);
    gmr__spin_lock_acquire(&s->lock);
    if (st != GMR_OK) {
      reattach_chunk(s, c);
      gmr__spin_lock_release(&s->lock);
      return st;
    }
    gmr__spin_lock_release(&s->lock);
    registry_unreserve(r);
    atomic_fetch_sub(&r->chunk_count, 1);
    atomic_fetch_add_explicit(&r->release_count, 1, memory_order_relaxed);
    *released_bytes += bytes;
    for (size_t k = 0; k < c->block_count; ++k) {
      gmr__stream_uses_free(&c->blocks[k].uses, NULL, NULL);
    }
    free(c);
  }
}
