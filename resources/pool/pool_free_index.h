/*
 * resources/pool/pool_free_index.h (internal): the free blocks of one stream slot
 * of a pool_resource arena, indexed by size for good fit in O(1).
 *
 * A two-level segregated-fit index (TLSF, Masmano et al. 2004): sizes are
 * counted in 256-byte units; below 32 units every size has its own class
 * (exact fit); above, each power of two is split into 32 classes, so a class
 * spans at most 1/32 (3%) of its sizes. Two bitmaps say which classes are
 * non-empty, so finding the first non-empty class at or above a size is a
 * couple of bit scans, whatever the number of free blocks.
 *
 * Placement: first the request's own class is scanned (a bounded number of
 * blocks) for the best fit, an exact fit ending the scan; if none fits, the
 * first non-empty larger class is taken, where every block fits, and the
 * smallest of its first few blocks is used. That keeps close to best fit
 * (which keeps fragmentation low) at TLSF's constant cost.
 *
 * Thread-safe: no; the arena's lock guards it.
 */
#ifndef GMR_RESOURCES_POOL_POOL_FREE_INDEX_H_
#define GMR_RESOURCES_POOL_POOL_FREE_INDEX_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resources/pool/pool_block.h"

#define GMR__FREE_INDEX_UNIT_LOG2 8u /* 256-byte units */
#define GMR__FREE_INDEX_SL_LOG2 5u
#define GMR__FREE_INDEX_SL_COUNT (1u << GMR__FREE_INDEX_SL_LOG2)
/* Sizes up to 2^62 bytes: units up to 2^54, first levels 0..50. */
#define GMR__FREE_INDEX_FL_COUNT 51u

typedef struct gmr__free_index {
  uint64_t fl_bitmap;                               /* bit f: sl_bitmap[f] != 0 */
  uint32_t sl_bitmap[GMR__FREE_INDEX_FL_COUNT];     /* bit s: heads[f][s] != NULL */
  gmr__pool_block *heads[GMR__FREE_INDEX_FL_COUNT][GMR__FREE_INDEX_SL_COUNT];
  size_t block_count;
  size_t bytes;
} gmr__free_index;

/* An empty index. */
void gmr__free_index_init(gmr__free_index *index);

/* Add free block `b` (b->size a multiple of 256, > 0). */
void gmr__free_index_insert(gmr__free_index *index, gmr__pool_block *b);

/* Take `b`, which must be in this index, out of it. */
void gmr__free_index_remove(gmr__free_index *index, gmr__pool_block *b);

/* `b`, in this index, changed size from `old_size` to b->size: move it to
 * its new class, or leave it in place when the class is the same (the common
 * case when a large free block is split or grows by a small one). */
void gmr__free_index_resized(gmr__free_index *index, gmr__pool_block *b, size_t old_size);

/* A block of at least `bytes` (a multiple of 256, > 0) as described above, or
 * NULL. The block stays in the index. */
gmr__pool_block *gmr__free_index_find(const gmr__free_index *index, size_t bytes);

/* Any block of the index (NULL when empty): for draining it. */
gmr__pool_block *gmr__free_index_any(const gmr__free_index *index);

/* The size of the largest block, 0 when empty. O(blocks of the top class). */
size_t gmr__free_index_largest(const gmr__free_index *index);

/* Check the bitmaps, counts and links against the lists; calls `visit` for
 * each block. Returns false at the first inconsistency. */
bool gmr__free_index_check(const gmr__free_index *index,
                           bool (*visit)(void *ctx, const gmr__pool_block *b), void *ctx);

#endif /* GMR_RESOURCES_POOL_POOL_FREE_INDEX_H_ */
