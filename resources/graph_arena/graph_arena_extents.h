/*
 * resources/graph_arena/graph_arena_extents.h (internal): an address-ordered set of
 * disjoint free byte ranges, the free space of the graph arena and the reuse
 * lists of its graph memories.
 *
 * Ranges are ordered by (order, begin): `order` is the creation number of
 * the chunk a range lies in, so searches go through chunks in the order they
 * were made, whatever addresses the upstream gave them. That makes first fit
 * deterministic across growth: a request that once made a new chunk lands in
 * the same place when the chunk already exists (reset, rewind).
 *
 * Each range also carries a tag (the graph arena stores the stream a range was
 * freed on; 0 for the arena's free space). Two ranges merge only when they
 * touch and have the same order (chunk) and tag, so a whole chunk can always
 * be found and given back.
 *
 * Operations that may need more room take it in gmr__extent_set_reserve()
 * first; carving and adding then never allocate, so a caller can reserve,
 * check every other failure, and only then change anything.
 *
 * Thread-safe: no; the arena holds its lock.
 */
#ifndef GMR_RESOURCES_GRAPH_ARENA_GRAPH_ARENA_EXTENTS_H_
#define GMR_RESOURCES_GRAPH_ARENA_GRAPH_ARENA_EXTENTS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gmr__extent {
  uintptr_t begin;
  uintptr_t end; /* exclusive; end > begin */
  uintptr_t tag;
  uint64_t order; /* the chunk's creation number */
} gmr__extent;

/* A position in the set's order. */
typedef struct gmr__extent_pos {
  uint64_t order;
  uintptr_t addr;
} gmr__extent_pos;

typedef struct gmr__extent_set {
  gmr__extent *items; /* sorted by (order, begin) */
  size_t count;
  size_t capacity;
  size_t total_bytes; /* sum of the ranges' sizes */
  uint64_t version;   /* bumped whenever ranges move to other indices */
} gmr__extent_set;

/* Free the storage; the set is empty. */
void gmr__extent_set_clear(gmr__extent_set *set);

/* Room for `extra` more ranges. false: host allocation failed, set unchanged. */
bool gmr__extent_set_reserve(gmr__extent_set *set, size_t extra);

/* Index of the first range that ends after `pos` (count if none). */
size_t gmr__extent_set_lower_bound(const gmr__extent_set *set, gmr__extent_pos pos);

/*
 * Where a block of `bytes` aligned to `alignment` (a power of two) would
 * start in range `e`, not below `from`; false if it does not fit.
 */
bool gmr__extent_fit(const gmr__extent *e, size_t bytes, size_t alignment, uintptr_t from,
                     uintptr_t *out_addr);

/*
 * First range with tag `tag` at or after `from` that fits the block (in the
 * range holding `from`, not below it); then, if `wrap`, first from the start.
 * On success sets *out_index and *out_addr.
 */
bool gmr__extent_set_next_fit(const gmr__extent_set *set, gmr__extent_pos from, bool wrap,
                              size_t bytes, size_t alignment, uintptr_t tag, size_t *out_index,
                              uintptr_t *out_addr);

/*
 * Best fit over two sets at once: the ranges of `a` tagged `tag_a` and those
 * of `b` tagged `tag_b`, where touching ranges of the same order join into
 * one run (only across the sets when `join`; within one set touching ranges
 * of one tag are merged already). The smallest run that fits wins (ties: the
 * first in (order, begin)); the block starts as low in it as alignment
 * allows. On success sets *out_order and *out_addr. The arena's ordered
 * reuse: a capture's request is served from its own freed bytes and the free
 * space as if they were one, so a freed block next to free space is not cut
 * off from it.
 */
bool gmr__extent_sets_joined_best_fit(const gmr__extent_set *a, uintptr_t tag_a,
                                      const gmr__extent_set *b, uintptr_t tag_b, bool join,
                                      size_t bytes, size_t alignment, uint64_t *out_order,
                                      uintptr_t *out_addr);

/* A tag that matches every range (gmr__extent_set_take_span). */
#define GMR__EXTENT_ANY_TAG UINTPTR_MAX

/*
 * Take every byte of [begin, end) in chunk `order` that lies in `set` out of
 * it; returns how many. The ranges it touches must all have tag `tag` (or
 * `tag` is GMR__EXTENT_ANY_TAG). Needs
 * at most one extra range (only a range holding all of [begin, end) splits):
 * reserve it first.
 */
size_t gmr__extent_set_take_span(gmr__extent_set *set, uint64_t order, uintptr_t begin,
                                 uintptr_t end, uintptr_t tag);

/*
 * Take [addr, addr + bytes) out of range `index`, which must contain it. May
 * split the range in two: reserve one extra range first.
 */
void gmr__extent_set_carve(gmr__extent_set *set, size_t index, uintptr_t addr, size_t bytes);

/*
 * Put `e` back, merging with its neighbours. It must not overlap any range of
 * the set. Reserve one extra range first.
 */
void gmr__extent_set_add(gmr__extent_set *set, gmr__extent e);

/*
 * Put `count` ranges back at once (sorted here; `ranges` is reordered), in
 * O((n + count) log) rather than O(n * count). Reserve `count` extra ranges
 * first. None may overlap another or the set.
 */
void gmr__extent_set_add_many(gmr__extent_set *set, gmr__extent *ranges, size_t count);

/* How many bytes of [begin, end) in chunk `order` lie in `set`. */
size_t gmr__extent_set_covered_bytes(const gmr__extent_set *set, uint64_t order, uintptr_t begin,
                                     uintptr_t end);

/* Remove range `index` entirely. */
void gmr__extent_set_remove(gmr__extent_set *set, size_t index);

/* Index of a range exactly `e` (order, begin, end, tag), or SIZE_MAX. */
size_t gmr__extent_set_find_exact(const gmr__extent_set *set, gmr__extent e);

#endif /* GMR_RESOURCES_GRAPH_ARENA_GRAPH_ARENA_EXTENTS_H_ */
