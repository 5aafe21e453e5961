/*
 * resources/pool/pool_blocks.c (internal): free blocks: filing a free block
 * under its stream slot with its neighbours merged (boundary tags), the cache
 * of recent frees, the best fit of a slot, and carving an allocation out of a
 * free block. See pool_internal.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <string.h>

#include "core/failure.h"
#include "resources/pool/pool_internal.h"

/* ---- free blocks -------------------------------------------------------- */

/* Whether a free neighbour filed under `other` may merge into a block being
 * filed under `si`: same slot, or (for a stream slot) the shared slot, whose
 * blocks are free for anyone and so also for that stream. Cached and
 * deferred blocks are filed in no index and stay apart. */
static bool mergeable(uint32_t si, const gmr__pool_block *n) {
  return n != NULL && n->is_free && !n->cached && !n->deferred &&
         (n->slot == si || n->slot == GMR__POOL_SHARED_SLOT);
}

/* File free block `b` under slot `si`, merged with its mergeable neighbours.
 * Neighbours free under another stream stay apart: that stream's work may
 * still use them. Absorbing a shared neighbour can bring a block of `si`
 * beyond it into reach, hence the loops. */
void gmr__pool_file_free(gmr__pool_arena *a, uint32_t si, gmr__pool_block *b) {
  b->request_bytes = 0;
  b->request_alignment_log2 = 0;
  gmr__pool_block *before = b->phys_prev, *after = b->phys_next;
  bool merge_before = mergeable(si, before), merge_after = mergeable(si, after);
  /* Fast paths, the common case: one neighbour, free in this very slot,
   * grows over b in place (no index work unless its size class changes). */
  if (merge_before && !merge_after && before->slot == si && !mergeable(si, before->phys_prev)) {
    size_t old = before->node.bytes;
    before->node.bytes += b->node.bytes;
    before->phys_next = after;
    if (after != NULL) after->phys_prev = before;
    gmr__pool_header_give(a, b);
    gmr__free_index_resized(&gmr__pool_slot_at(a, si)->index, &before->node, old);
    return;
  }
  if (merge_after && !merge_before && after->slot == si && !mergeable(si, after->phys_next)) {
    size_t old = after->node.bytes;
    after->node.addr = b->node.addr;
    after->node.bytes += b->node.bytes;
    after->phys_prev = before;
    if (before != NULL) {
      before->phys_next = after;
    } else {
      b->chunk->first = after;
    }
    gmr__pool_header_give(a, b);
    gmr__free_index_resized(&gmr__pool_slot_at(a, si)->index, &after->node, old);
    return;
  }
  b->is_free = true;
  b->slot = si;
  gmr__pool_block *prev;
  while (mergeable(si, prev = b->phys_prev)) {
    gmr__free_index_remove(&gmr__pool_slot_at(a, prev->slot)->index, &prev->node);
    prev->node.bytes += b->node.bytes;
    prev->phys_next = b->phys_next;
    if (b->phys_next != NULL) b->phys_next->phys_prev = prev;
    prev->slot = si;
    gmr__pool_header_give(a, b);
    b = prev;
  }
  gmr__pool_block *next;
  while (mergeable(si, next = b->phys_next)) {
    gmr__free_index_remove(&gmr__pool_slot_at(a, next->slot)->index, &next->node);
    b->node.bytes += next->node.bytes;
    b->phys_next = next->phys_next;
    if (next->phys_next != NULL) next->phys_next->phys_prev = b;
    gmr__pool_header_give(a, next);
  }
  gmr__free_index_insert(&gmr__pool_slot_at(a, si)->index, &b->node);
}

/* Give every free block of slot `from` to slot `to`, merging as they land. */
void gmr__pool_move_all(gmr__pool_arena *a, uint32_t from, uint32_t to) {
  gmr__free_index *src = &gmr__pool_slot_at(a, from)->index;
  gmr__pool_block *b;
  while ((b = gmr__pool_block_of(gmr__free_index_any(src))) != NULL) {
    gmr__free_index_remove(src, &b->node);
    gmr__pool_file_free(a, to, b);
  }
}

/* ---- the cache of recent frees ------------------------------------------ */

static void cache_remove_at(gmr__pool_slot *s, uint32_t i) {
  uint32_t after = s->cache_count - i - 1;
  if (after > 0) memmove(&s->cache[i], &s->cache[i + 1], after * sizeof s->cache[0]);
  s->cache_count--;
}

void gmr__pool_cache_evict_oldest(gmr__pool_arena *a, uint32_t si) {
  gmr__pool_slot *s = gmr__pool_slot_at(a, si);
  gmr__pool_block *oldest = s->cache[0];
  cache_remove_at(s, 0);
  oldest->cached = false;
  gmr__block_map_remove(&a->live, oldest->node.addr);
  gmr__pool_file_free(a, si, oldest);
}

/* gmr__pool_cache_take (pool_internal.h) past the newest entry: the most
 * recent older entry of exactly `size` bytes, taken out, or NULL. */
gmr__pool_block *gmr__pool_cache_take_older(gmr__pool_slot *s, size_t size) {
  for (uint32_t i = s->cache_count - 1; i-- > 0;) {
    gmr__pool_block *b = s->cache[i];
    if (b->node.bytes == size) {
      cache_remove_at(s, i);
      b->cached = false;
      return b;
    }
  }
  return NULL;
}

/* Merge every cached block of the arena into its slot's index. */
void gmr__pool_flush_caches(gmr__pool_arena *a) {
  for (uint32_t i = 0; i < a->slots.count; ++i) {
    gmr__pool_slot *s = gmr__pool_slot_at(a, i);
    while (s->cache_count > 0) {
      gmr__pool_block *b = s->cache[--s->cache_count];
      b->cached = false;
      gmr__block_map_remove(&a->live, b->node.addr);
      gmr__pool_file_free(a, i, b);
    }
  }
}

/* Take free block `b` out of wherever it is filed (its cache, and the live
 * map, its index, or the deferred list). */
void gmr__pool_unfile(gmr__pool_arena *a, gmr__pool_block *b) {
  if (b->deferred) {
    gmr__pool_deferred_drop(a, b);
    return;
  }
  gmr__pool_slot *s = gmr__pool_slot_at(a, b->slot);
  if (!b->cached) {
    gmr__free_index_remove(&s->index, &b->node);
    return;
  }
  for (uint32_t i = 0; i < s->cache_count; ++i) {
    if (s->cache[i] == b) {
      cache_remove_at(s, i);
      break;
    }
  }
  b->cached = false;
  gmr__block_map_remove(&a->live, b->node.addr);
}

/* The better of the best fits of slot `si` and the shared slot. */
gmr__pool_block *gmr__pool_find_fit(const gmr__pool_arena *a, uint32_t si, size_t need) {
  const gmr__free_index *shared_index = &gmr__pool_slot_at(a, GMR__POOL_SHARED_SLOT)->index;
  gmr__pool_block *own = gmr__pool_block_of(
      gmr__free_index_find(&gmr__pool_slot_at(a, si)->index, need, GMR__POOL_UNIT));
  if (si == GMR__POOL_SHARED_SLOT || (own != NULL && own->node.bytes == need) ||
      shared_index->block_count == 0) {
    return own;
  }
  gmr__pool_block *shared =
      gmr__pool_block_of(gmr__free_index_find(shared_index, need, GMR__POOL_UNIT));
  if (own == NULL) return shared;
  return shared != NULL && shared->node.bytes < own->node.bytes ? shared : own;
}

/* Split `b` after its first `size` bytes: b keeps them, and a new header,
 * returned, takes the rest. Pre: a header is reserved, size < b->node.bytes. */
static gmr__pool_block *split_after(gmr__pool_arena *a, gmr__pool_block *b, size_t size) {
  gmr__pool_block *rest = gmr__pool_header_take(a);
  rest->node.addr = b->node.addr + size;
  rest->node.bytes = b->node.bytes - size;
  rest->chunk = b->chunk;
  rest->phys_prev = b;
  rest->phys_next = b->phys_next;
  if (b->phys_next != NULL) b->phys_next->phys_prev = rest;
  b->phys_next = rest;
  b->node.bytes = size;
  return rest;
}

/* Take free block `b` for a request of `size` bytes (a multiple of 256)
 * aligned to `alignment`: cut off the padding in front and the rest behind,
 * which stay free in b's slot (they cannot touch another free block of that
 * slot, since those are always merged). b's header keeps the part that stays
 * free where it can, so the index only changes when a size class does.
 * Pre: two headers reserved and `b` large enough. Returns the allocated block. */
gmr__pool_block *gmr__pool_take(gmr__pool_arena *a, gmr__pool_block *b, size_t size,
                                size_t alignment) {
  uint32_t si = b->slot;
  gmr__free_index *index = &gmr__pool_slot_at(a, si)->index;
  size_t pad =
      alignment > GMR__POOL_UNIT ? gmr__align_up(b->node.addr, alignment) - b->node.addr : 0;
  if (pad == 0) {
    if (b->node.bytes == size) {
      gmr__free_index_remove(index, &b->node);
      b->is_free = false;
      return b;
    }
    /* A new header in front of b for the allocation; b keeps the rest. */
    gmr__pool_block *x = gmr__pool_header_take(a);
    x->node.addr = b->node.addr;
    x->node.bytes = size;
    x->chunk = b->chunk;
    x->phys_prev = b->phys_prev;
    x->phys_next = b;
    if (b->phys_prev != NULL) {
      b->phys_prev->phys_next = x;
    } else {
      b->chunk->first = x;
    }
    b->phys_prev = x;
    size_t old = b->node.bytes;
    b->node.addr += size;
    b->node.bytes -= size;
    gmr__free_index_resized(index, &b->node, old);
    return x;
  }
  /* b keeps the padding; the allocation and the rest get new headers. */
  size_t old = b->node.bytes;
  gmr__pool_block *x = split_after(a, b, pad);
  gmr__free_index_resized(index, &b->node, old);
  if (x->node.bytes > size) {
    gmr__pool_block *rest = split_after(a, x, size);
    rest->is_free = true;
    rest->slot = si;
    gmr__free_index_insert(index, &rest->node);
  }
  return x;
}
