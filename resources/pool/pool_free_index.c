/*
 * resources/pool/pool_free_index.c (internal): see pool_free_index.h.
 */
#include "resources/pool/pool_free_index.h"

#include <string.h>

/* Blocks examined per class for a best fit; bounds the cost of a search when
 * many blocks of similar sizes are free. */
#define SCAN_LIMIT 100000u

static inline unsigned msb64(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }
static inline unsigned lsb64(uint64_t x) { return (unsigned)__builtin_ctzll(x); }
static inline unsigned lsb32(uint32_t x) { return (unsigned)__builtin_ctz(x); }

static inline void mapping(size_t bytes, unsigned *fl, unsigned *sl) {
  uint64_t units = (uint64_t)bytes >> GMR__FREE_INDEX_UNIT_LOG2;
  if (units < GMR__FREE_INDEX_SL_COUNT) {
    *fl = 0;
    *sl = (unsigned)units;
  } else {
    unsigned f = msb64(units);
    *fl = f - (GMR__FREE_INDEX_SL_LOG2 - 1u);
    *sl = (unsigned)(units >> (f - GMR__FREE_INDEX_SL_LOG2)) - GMR__FREE_INDEX_SL_COUNT;
  }
}

void gmr__free_index_init(gmr__free_index *index) { memset(index, 0, sizeof *index); }

static void insert_at(gmr__free_index *index, gmr__pool_block *b, unsigned fl, unsigned sl) {
  gmr__pool_block *head = index->heads[fl][sl];
  b->free_prev = NULL;
  b->free_next = head;
  if (head != NULL) head->free_prev = b;
  index->heads[fl][sl] = b;
  index->sl_bitmap[fl] |= 1u << sl;
  index->fl_bitmap |= (uint64_t)1 << fl;
}

static void remove_at(gmr__free_index *index, gmr__pool_block *b, unsigned fl, unsigned sl) {
  if (b->free_prev != NULL) {
    b->free_prev->free_next = b->free_next;
  } else {
    index->heads[fl][sl] = b->free_next;
    if (b->free_next == NULL) {
      index->sl_bitmap[fl] &= ~(1u << sl);
      if (index->sl_bitmap[fl] == 0) index->fl_bitmap &= ~((uint64_t)1 << fl);
    }
  }
  if (b->free_next != NULL) b->free_next->free_prev = b->free_prev;
  b->free_prev = NULL;
  b->free_next = NULL;
}

void gmr__free_index_insert(gmr__free_index *index, gmr__pool_block *b) {
  unsigned fl, sl;
  mapping(b->size, &fl, &sl);
  insert_at(index, b, fl, sl);
  index->block_count++;
  index->bytes += b->size;
}

void gmr__free_index_remove(gmr__free_index *index, gmr__pool_block *b) {
  unsigned fl, sl;
  mapping(b->size, &fl, &sl);
  remove_at(index, b, fl, sl);
  index->block_count--;
  index->bytes -= b->size;
}

void gmr__free_index_resized(gmr__free_index *index, gmr__pool_block *b, size_t old_size) {
  unsigned old_fl, old_sl, fl, sl;
  mapping(old_size, &old_fl, &old_sl);
  mapping(b->size, &fl, &sl);
  index->bytes = index->bytes - old_size + b->size;
  if (fl == old_fl && sl == old_sl) return;
  remove_at(index, b, old_fl, old_sl);
  insert_at(index, b, fl, sl);
}

/* Smaller first, then lower address: among equal sizes the lower address
 * keeps the free space of a chunk towards its end, where it merges. */
static inline bool better(const gmr__pool_block *a, const gmr__pool_block *best) {
  return best == NULL || a->size < best->size || (a->size == best->size && a->addr < best->addr);
}

gmr__pool_block *gmr__free_index_find(const gmr__free_index *index, size_t bytes) {
  unsigned fl, sl;
  mapping(bytes, &fl, &sl);
  /* The request's own class: its blocks may be smaller than the request. */
  gmr__pool_block *best = NULL;
  unsigned seen = 0;
  for (gmr__pool_block *b = index->heads[fl][sl]; b != NULL && seen < SCAN_LIMIT;
       b = b->free_next, ++seen) {
    if (b->size == bytes) return b;
    if (b->size > bytes && better(b, best)) best = b;
  }
  if (best != NULL) return best;
  /* The first non-empty larger class: every block there fits. */
  uint32_t sl_map =
      sl + 1u < GMR__FREE_INDEX_SL_COUNT ? index->sl_bitmap[fl] & (~0u << (sl + 1u)) : 0u;
  if (sl_map == 0) {
    uint64_t fl_map = fl + 1u < 64u ? index->fl_bitmap & (~(uint64_t)0 << (fl + 1u)) : 0u;
    if (fl_map == 0) return NULL;
    fl = lsb64(fl_map);
    sl_map = index->sl_bitmap[fl];
  }
  sl = lsb32(sl_map);
  seen = 0;
  for (gmr__pool_block *b = index->heads[fl][sl]; b != NULL && seen < SCAN_LIMIT;
       b = b->free_next, ++seen) {
    if (better(b, best)) best = b;
  }
  return best;
}

gmr__pool_block *gmr__free_index_any(const gmr__free_index *index) {
  if (index->fl_bitmap == 0) return NULL;
  unsigned fl = lsb64(index->fl_bitmap);
  return index->heads[fl][lsb32(index->sl_bitmap[fl])];
}

size_t gmr__free_index_largest(const gmr__free_index *index) {
  if (index->fl_bitmap == 0) return 0;
  unsigned fl = msb64(index->fl_bitmap);
  unsigned sl = 31u - (unsigned)__builtin_clz(index->sl_bitmap[fl]);
  size_t largest = 0;
  for (const gmr__pool_block *b = index->heads[fl][sl]; b != NULL; b = b->free_next) {
    if (b->size > largest) largest = b->size;
  }
  return largest;
}

bool gmr__free_index_check(const gmr__free_index *index,
                           bool (*visit)(void *ctx, const gmr__pool_block *b), void *ctx) {
  size_t count = 0, bytes = 0;
  for (unsigned fl = 0; fl < GMR__FREE_INDEX_FL_COUNT; ++fl) {
    bool fl_bit = (index->fl_bitmap >> fl) & 1u;
    if (fl_bit != (index->sl_bitmap[fl] != 0)) return false;
    for (unsigned sl = 0; sl < GMR__FREE_INDEX_SL_COUNT; ++sl) {
      const gmr__pool_block *head = index->heads[fl][sl];
      if (((index->sl_bitmap[fl] >> sl) & 1u) != (head != NULL)) return false;
      const gmr__pool_block *prev = NULL;
      for (const gmr__pool_block *b = head; b != NULL; b = b->free_next) {
        unsigned f, s;
        if (b->size == 0 || b->size % 256u != 0) return false;
        mapping(b->size, &f, &s);
        if (f != fl || s != sl || b->free_prev != prev || !b->is_free) return false;
        if (visit != NULL && !visit(ctx, b)) return false;
        count++;
        bytes += b->size;
        prev = b;
      }
    }
  }
  return count == index->block_count && bytes == index->bytes;
}
