/*
 * stream_ordered/free_index.h (internal): free ranges of device memory indexed by size
 * for a good fit in O(1): the one two-level segregated-fit index (TLSF,
 * Masmano et al. 2004) of gmr, used by pool_resource (one per stream slot of
 * an arena, over its free blocks) and by vmm (one per stream slot of an
 * engine, over its free regions).
 *
 * Sizes are counted in 256-byte units; below 32 units every size has its own
 * class (exact fit); above, each power of two is split into 32 classes, so a
 * class spans at most 1/32 (3%) of its sizes. Two bitmaps say which classes
 * are non-empty, so finding the first non-empty class at or above a size is
 * a couple of bit scans, whatever the number of free ranges.
 *
 * Placement (gmr__free_index_find): first the request's own class, whose
 * ranges may be smaller or larger than the request, is scanned for the best
 * fit, an exact fit ending the scan; if none fits, the first non-empty larger
 * class, where every range is large enough (alignment aside: with an
 * alignment above 256 bytes the next classes are tried until one has a range
 * that fits once aligned). Within a class, the smaller range wins, then the
 * lower address: the free space of a chunk stays towards its end, where it
 * merges. At most GMR__FREE_INDEX_SCAN_LIMIT ranges of a class are looked at,
 * so a search costs a bounded number of steps however many ranges of similar
 * sizes are free; the fit is then within the class's 3% of the best.
 *
 * The owner embeds a gmr__free_node as the first member of its header (a
 * pool block, a vmm region), so a node converts back to its header with a
 * cast; the node's addr and bytes are the header's, and its links are used
 * by nothing else while the range is in an index (the owners reuse them for
 * their other lists: deferred blocks, spare headers, blocked regions).
 *
 * Thread-safe: no; the owner's lock guards an index and its nodes.
 */
#ifndef GMR_STREAM_ORDERED_FREE_INDEX_H_
#define GMR_STREAM_ORDERED_FREE_INDEX_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every size and address in an index is a multiple of this. */
#define GMR__FREE_INDEX_UNIT ((size_t)256)
#define GMR__FREE_INDEX_UNIT_LOG2 8u
#define GMR__FREE_INDEX_SL_LOG2 5u
#define GMR__FREE_INDEX_SL_COUNT (1u << GMR__FREE_INDEX_SL_LOG2)
/* Any size_t: units below 2^56, first levels 0..51. */
#define GMR__FREE_INDEX_FL_COUNT 52u
/* Ranges of one class looked at by a search (see the banner). */
#define GMR__FREE_INDEX_SCAN_LIMIT 32u

/* A free range as an index files it. */
typedef struct gmr__free_node gmr__free_node;
struct gmr__free_node {
  uintptr_t addr;            /* device address, a multiple of 256 */
  size_t bytes;              /* a multiple of 256, > 0 while filed */
  gmr__free_node *free_prev; /* the class's list while filed; the owner's lists otherwise */
  gmr__free_node *free_next;
};

typedef struct gmr__free_index {
  uint64_t fl_bitmap;                           /* bit f: sl_bitmap[f] != 0 */
  uint32_t sl_bitmap[GMR__FREE_INDEX_FL_COUNT]; /* bit s: heads[f][s] != NULL */
  gmr__free_node *heads[GMR__FREE_INDEX_FL_COUNT][GMR__FREE_INDEX_SL_COUNT];
  size_t block_count; /* nodes filed */
  size_t bytes;       /* their bytes */
} gmr__free_index;

/* An empty index. */
void gmr__free_index_init(gmr__free_index *index);

/* File node `n` (n->bytes a multiple of 256, > 0; not in any index). */
void gmr__free_index_insert(gmr__free_index *index, gmr__free_node *n);

/* Take `n`, which must be in this index with the size it was filed (or last
 * resized) with, out of it; its links are cleared. */
void gmr__free_index_remove(gmr__free_index *index, gmr__free_node *n);

/* `n`, in this index, changed size from `old_bytes` to n->bytes (and maybe
 * address): move it to its new class, or leave it in place when the class is
 * the same (the common case when a large free range is split or grows by a
 * small one). */
void gmr__free_index_resized(gmr__free_index *index, gmr__free_node *n, size_t old_bytes);

/* A node of at least `bytes` (a multiple of 256, > 0) from which `bytes`
 * aligned to `alignment` (a power of two; up to 256 means none) can be cut,
 * as described in the banner, or NULL. The node stays in the index. */
gmr__free_node *gmr__free_index_find(const gmr__free_index *index, size_t bytes, size_t alignment);

/* Any node of the index (NULL when empty): for draining it. */
gmr__free_node *gmr__free_index_any(const gmr__free_index *index);

/* The class of a size: exact below 32 units, then 32 classes per power of two. */
static inline void gmr__free_index_class(size_t bytes, unsigned *fl, unsigned *sl) {
  uint64_t units = (uint64_t)bytes >> GMR__FREE_INDEX_UNIT_LOG2;
  if (units < GMR__FREE_INDEX_SL_COUNT) {
    *fl = 0;
    *sl = (unsigned)units;
  } else {
    unsigned f = 63u - (unsigned)__builtin_clzll(units);
    *fl = f - (GMR__FREE_INDEX_SL_LOG2 - 1u);
    *sl = (unsigned)(units >> (f - GMR__FREE_INDEX_SL_LOG2)) - GMR__FREE_INDEX_SL_COUNT;
  }
}

/* Every node in turn: the first for `n` NULL, then the one after `n`; NULL
 * at the end. Classes in increasing size, each list in its order. The index
 * must not change during a walk. Inline: slow paths walk large indexes. */
static inline gmr__free_node *gmr__free_index_next(const gmr__free_index *index,
                                                   const gmr__free_node *n) {
  unsigned fl = 0, sl = 0;
  if (n != NULL) {
    if (n->free_next != NULL) return n->free_next;
    gmr__free_index_class(n->bytes, &fl, &sl);
    sl++; /* the classes after n's */
  }
  uint32_t sl_map = sl < GMR__FREE_INDEX_SL_COUNT ? index->sl_bitmap[fl] & (~0u << sl) : 0u;
  if (sl_map == 0) {
    /* Nothing left in first level fl: the first class of the next non-empty one. */
    uint64_t fl_map = fl + 1u < 64u ? index->fl_bitmap & (~(uint64_t)0 << (fl + 1u)) : 0u;
    if (fl_map == 0) return NULL;
    fl = (unsigned)__builtin_ctzll(fl_map);
    sl_map = index->sl_bitmap[fl];
  }
  return index->heads[fl][__builtin_ctz(sl_map)];
}

/* The size of the largest node, 0 when empty. O(nodes of the top class). */
size_t gmr__free_index_largest(const gmr__free_index *index);

/* Check the bitmaps, the counts, the classes and the links against the
 * lists; calls `visit` (may be NULL) for each node. Returns false at the
 * first inconsistency or when `visit` does. */
bool gmr__free_index_check(const gmr__free_index *index,
                           bool (*visit)(void *ctx, const gmr__free_node *n), void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* GMR_STREAM_ORDERED_FREE_INDEX_H_ */
