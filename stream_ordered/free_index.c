/*
 * stream_ordered/free_index.c (internal): see free_index.h.
 */
#include "stream_ordered/free_index.h"

#include <string.h>

static inline unsigned msb64(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }
static inline unsigned lsb64(uint64_t x) { return (unsigned)__builtin_ctzll(x); }
static inline unsigned msb32(uint32_t x) { return 31u - (unsigned)__builtin_clz(x); }
static inline unsigned lsb32(uint32_t x) { return (unsigned)__builtin_ctz(x); }

static inline void mapping(size_t bytes, unsigned *fl, unsigned *sl) {
  gmr__free_index_class(bytes, fl, sl);
}

void gmr__free_index_init(gmr__free_index *index) { memset(index, 0, sizeof *index); }

static void insert_at(gmr__free_index *index, gmr__free_node *n, unsigned fl, unsigned sl) {
  gmr__free_node *head = index->heads[fl][sl];
  n->free_prev = NULL;
  n->free_next = head;
  if (head != NULL) head->free_prev = n;
  index->heads[fl][sl] = n;
  index->sl_bitmap[fl] |= 1u << sl;
  index->fl_bitmap |= (uint64_t)1 << fl;
}

static void remove_at(gmr__free_index *index, gmr__free_node *n, unsigned fl, unsigned sl) {
  if (n->free_prev != NULL) {
    n->free_prev->free_next = n->free_next;
  } else {
    index->heads[fl][sl] = n->free_next;
    if (n->free_next == NULL) {
      index->sl_bitmap[fl] &= ~(1u << sl);
      if (index->sl_bitmap[fl] == 0) index->fl_bitmap &= ~((uint64_t)1 << fl);
    }
  }
  if (n->free_next != NULL) n->free_next->free_prev = n->free_prev;
  n->free_prev = NULL;
  n->free_next = NULL;
}

void gmr__free_index_insert(gmr__free_index *index, gmr__free_node *n) {
  unsigned fl, sl;
  mapping(n->bytes, &fl, &sl);
  insert_at(index, n, fl, sl);
  index->block_count++;
  index->bytes += n->bytes;
}

void gmr__free_index_remove(gmr__free_index *index, gmr__free_node *n) {
  unsigned fl, sl;
  mapping(n->bytes, &fl, &sl);
  remove_at(index, n, fl, sl);
  index->block_count--;
  index->bytes -= n->bytes;
}

void gmr__free_index_resized(gmr__free_index *index, gmr__free_node *n, size_t old_bytes) {
  unsigned old_fl, old_sl, fl, sl;
  mapping(old_bytes, &old_fl, &old_sl);
  mapping(n->bytes, &fl, &sl);
  index->bytes = index->bytes - old_bytes + n->bytes;
  if (fl == old_fl && sl == old_sl) return;
  remove_at(index, n, old_fl, old_sl);
  insert_at(index, n, fl, sl);
}

/* Whether `bytes` aligned to `alignment` can be cut from n. */
static inline bool fits(const gmr__free_node *n, size_t bytes, size_t alignment) {
  if (alignment <= GMR__FREE_INDEX_UNIT) return n->bytes >= bytes;
  uintptr_t start = (n->addr + alignment - 1) & ~(uintptr_t)(alignment - 1);
  return start - n->addr <= n->bytes && n->bytes - (start - n->addr) >= bytes;
}

/* Smaller first, then lower address: among equal sizes the lower address
 * keeps the free space of a chunk towards its end, where it merges. */
static inline bool better(const gmr__free_node *a, const gmr__free_node *best) {
  return best == NULL || a->bytes < best->bytes ||
         (a->bytes == best->bytes && a->addr < best->addr);
}

/* The best fitting node among the first GMR__FREE_INDEX_SCAN_LIMIT of a
 * class; an exact fit (no alignment to make) ends the scan. */
__attribute__((always_inline)) static inline gmr__free_node *scan(gmr__free_node *head,
                                                                  size_t bytes, size_t alignment) {
  gmr__free_node *best = NULL;
  unsigned seen = 0;
  for (gmr__free_node *n = head; n != NULL && seen < GMR__FREE_INDEX_SCAN_LIMIT;
       n = n->free_next, ++seen) {
    if (!fits(n, bytes, alignment)) continue;
    if (n->bytes == bytes && alignment <= GMR__FREE_INDEX_UNIT) return n;
    if (better(n, best)) best = n;
  }
  return best;
}

__attribute__((always_inline)) static inline gmr__free_node *find(const gmr__free_index *index,
                                                                  size_t bytes, size_t alignment) {
  if (index->fl_bitmap == 0) return NULL;
  unsigned fl, sl;
  mapping(bytes, &fl, &sl);
  /* The request's own class: its nodes may be smaller than the request. */
  gmr__free_node *best = scan(index->heads[fl][sl], bytes, alignment);
  if (best != NULL) return best;
  /* The next non-empty larger classes: every node there is large enough, so
   * the first one serves unless an alignment rules its nodes out. */
  for (;;) {
    uint32_t sl_map =
        sl + 1u < GMR__FREE_INDEX_SL_COUNT ? index->sl_bitmap[fl] & (~0u << (sl + 1u)) : 0u;
    if (sl_map == 0) {
      uint64_t fl_map = fl + 1u < 64u ? index->fl_bitmap & (~(uint64_t)0 << (fl + 1u)) : 0u;
      if (fl_map == 0) return NULL;
      fl = lsb64(fl_map);
      sl_map = index->sl_bitmap[fl];
    }
    sl = lsb32(sl_map);
    best = scan(index->heads[fl][sl], bytes, alignment);
    /* Without an alignment to make, the class's first node fits. */
    if (best != NULL || alignment <= GMR__FREE_INDEX_UNIT) return best;
  }
}

/* The search with an alignment to make, apart, so that the common one below
 * compiles to a leaf function without the alignment arithmetic. */
__attribute__((noinline)) static gmr__free_node *find_aligned(const gmr__free_index *index,
                                                              size_t bytes, size_t alignment) {
  return find(index, bytes, alignment);
}

gmr__free_node *gmr__free_index_find(const gmr__free_index *index, size_t bytes, size_t alignment) {
  if (alignment > GMR__FREE_INDEX_UNIT) return find_aligned(index, bytes, alignment);
  return find(index, bytes, GMR__FREE_INDEX_UNIT);
}

gmr__free_node *gmr__free_index_any(const gmr__free_index *index) {
  if (index->fl_bitmap == 0) return NULL;
  unsigned fl = lsb64(index->fl_bitmap);
  return index->heads[fl][lsb32(index->sl_bitmap[fl])];
}

size_t gmr__free_index_largest(const gmr__free_index *index) {
  if (index->fl_bitmap == 0) return 0;
  unsigned fl = msb64(index->fl_bitmap);
  unsigned sl = msb32(index->sl_bitmap[fl]);
  size_t largest = 0;
  for (const gmr__free_node *n = index->heads[fl][sl]; n != NULL; n = n->free_next) {
    if (n->bytes > largest) largest = n->bytes;
  }
  return largest;
}

bool gmr__free_index_check(const gmr__free_index *index,
                           bool (*visit)(void *ctx, const gmr__free_node *n), void *ctx) {
  size_t count = 0, bytes = 0;
  if ((index->fl_bitmap >> GMR__FREE_INDEX_FL_COUNT) != 0) return false;
  for (unsigned fl = 0; fl < GMR__FREE_INDEX_FL_COUNT; ++fl) {
    bool fl_bit = (index->fl_bitmap >> fl) & 1u;
    if (fl_bit != (index->sl_bitmap[fl] != 0)) return false;
    for (unsigned sl = 0; sl < GMR__FREE_INDEX_SL_COUNT; ++sl) {
      const gmr__free_node *head = index->heads[fl][sl];
      if (((index->sl_bitmap[fl] >> sl) & 1u) != (head != NULL)) return false;
      const gmr__free_node *prev = NULL;
      for (const gmr__free_node *n = head; n != NULL; n = n->free_next) {
        unsigned f, s;
        if (n->bytes == 0 || n->bytes % GMR__FREE_INDEX_UNIT != 0 ||
            n->addr % GMR__FREE_INDEX_UNIT != 0) {
          return false;
        }
        mapping(n->bytes, &f, &s);
        if (f != fl || s != sl || n->free_prev != prev) return false;
        if (visit != NULL && !visit(ctx, n)) return false;
        count++;
        bytes += n->bytes;
        prev = n;
      }
    }
  }
  return count == index->block_count && bytes == index->bytes;
}
