/*
 * resources/graph_arena/graph_arena_blocks.c (internal): the block table: one slot per live
 * allocation, found by id (slot and generation) or by pointer (a per-chunk
 * table, one entry per 256-byte granule), and the public block queries.
 */
#include <stdlib.h>
#include <string.h>

#include "resources/graph_arena/graph_arena_internal.h"

uint64_t gmr__ga_block_id(const gmr_graph_arena_resource *a, uint32_t slot) {
  return ((uint64_t)a->blocks[slot].generation << 32) | slot;
}

/* Make sure one more slot and one more pointer entry can be had without
 * failing. */
bool gmr__ga_blocks_reserve(gmr_graph_arena_resource *a) {
  if (a->free_slot == GMR__GA_NO_SLOT && a->block_count == a->block_capacity) {
    if (a->block_capacity >= GMR__GA_NO_SLOT / 2) return false;
    uint32_t cap = a->block_capacity < 64 ? 64 : a->block_capacity * 2;
    gmr__ga_block *b = realloc(a->blocks, (size_t)cap * sizeof *b);
    if (b == NULL) return false;
    a->blocks = b;
    a->block_capacity = cap;
  }
  return true;
}

uint32_t gmr__ga_take_slot(gmr_graph_arena_resource *a) {
  uint32_t slot;
  if (a->free_slot != GMR__GA_NO_SLOT) {
    slot = a->free_slot;
    a->free_slot = a->blocks[slot].next_free;
  } else {
    slot = a->block_count++;
    a->blocks[slot].generation = 1;
  }
  return slot;
}

/* The block is gone: forget its pointer, retire its id, update the counts. */
void gmr__ga_drop_block(gmr_graph_arena_resource *a, uint32_t slot) {
  gmr__ga_block *b = &a->blocks[slot];
  gmr__ga_chunk *c = gmr__ga_chunk_of(a, b->addr);
  c->block_at[(b->addr - c->base) >> GMR__GA_GRANULE_SHIFT] = GMR__GA_TOMBSTONE;
  a->live_bytes -= b->carved_bytes;
  a->live_count--;
  if (b->scope == GMR__GA_SCOPE_MEMORY) {
    b->memory->live_bytes -= b->carved_bytes;
    b->memory->live_count--;
  }
  b->scope = GMR__GA_SCOPE_NONE;
  b->memory = NULL;
  b->generation = b->generation == UINT32_MAX ? 1 : b->generation + 1;
  b->next_free = a->free_slot;
  a->free_slot = slot;
}

/* The live block with id `id`: GMR_OK and *out_slot; GMR_ERR_DOUBLE_FREE for
 * an id the arena gave out and whose block is gone (an older generation of a
 * slot); GMR_ERR_UNKNOWN_POINTER for an id it never gave out. */
static gmr_status lookup_id(const gmr_graph_arena_resource *a, uint64_t id, uint32_t *out_slot) {
  uint32_t slot = (uint32_t)(id & 0xffffffffu);
  uint32_t generation = (uint32_t)(id >> 32);
  if (generation == 0 || slot >= a->block_count) return GMR_ERR_UNKNOWN_POINTER;
  const gmr__ga_block *b = &a->blocks[slot];
  if (b->scope != GMR__GA_SCOPE_NONE && b->generation == generation) {
    *out_slot = slot;
    return GMR_OK;
  }
  /* Generations only grow (wrapping after 2^32 - 1 reuses of one slot). */
  bool older = generation < b->generation;
  return older ? GMR_ERR_DOUBLE_FREE : GMR_ERR_UNKNOWN_POINTER;
}

bool gmr__ga_lookup_ptr(gmr_graph_arena_resource *a, const void *ptr, uint32_t *out_slot) {
  uintptr_t addr = (uintptr_t)ptr;
  gmr__ga_chunk *c = gmr__ga_chunk_of(a, addr);
  if (c == NULL || ((addr - c->base) & ((1u << GMR__GA_GRANULE_SHIFT) - 1)) != 0) return false;
  uint32_t v = c->block_at[(addr - c->base) >> GMR__GA_GRANULE_SHIFT];
  if (v == 0 || v == GMR__GA_TOMBSTONE || a->blocks[v - 1].scope == GMR__GA_SCOPE_NONE ||
      a->blocks[v - 1].addr != addr) {
    return false;
  }
  *out_slot = v - 1;
  return true;
}

static void fill_block_info(const gmr_graph_arena_resource *a, uint32_t slot,
                            gmr_graph_arena_block_info *out) {
  const gmr__ga_block *b = &a->blocks[slot];
  out->id = gmr__ga_block_id(a, slot);
  out->ptr = (void *)b->addr;
  out->bytes = b->bytes;
  out->carved_bytes = b->carved_bytes;
  out->stream = b->stream;
  out->memory = b->scope == GMR__GA_SCOPE_MEMORY ? b->memory : NULL;
  out->captured = b->captured;
}

/* The block info of the live block with id `id` or, when `by_id` is false,
 * at `ptr`: the one body behind get_block and find_block. */
static gmr_status describe_block(gmr_graph_arena_resource *a, bool by_id, uint64_t id,
                                 const void *ptr, gmr_graph_arena_block_info *out) {
  if (out != NULL) memset(out, 0, sizeof *out);
  if (a == NULL || out == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_lock(a);
  uint32_t slot = 0;
  bool found = by_id ? lookup_id(a, id, &slot) == GMR_OK : gmr__ga_lookup_ptr(a, ptr, &slot);
  if (found) fill_block_info(a, slot, out);
  gmr__ga_unlock(a);
  return found ? GMR_OK : GMR_ERR_UNKNOWN_POINTER;
}

gmr_status gmr_graph_arena_resource_get_block(gmr_graph_arena_resource *a, uint64_t id,
                                              gmr_graph_arena_block_info *out) {
  return describe_block(a, true, id, NULL, out);
}

gmr_status gmr_graph_arena_resource_find_block(gmr_graph_arena_resource *a, const void *ptr,
                                               gmr_graph_arena_block_info *out) {
  return describe_block(a, false, 0, ptr, out);
}

gmr_status gmr_graph_arena_resource_return_block(gmr_graph_arena_resource *a, uint64_t id,
                                                 gmr_stream stream) {
  if (a == NULL) return GMR_ERR_INVALID_ARGUMENT;
  gmr__ga_lock(a);
  uint32_t slot = 0;
  gmr_status st = lookup_id(a, id, &slot);
  if (st == GMR_OK) st = gmr__ga_free_block(a, slot, stream);
  gmr__ga_unlock(a);
  return st;
}
