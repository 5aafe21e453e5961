/*
 * resources/graph_arena/graph_arena_extents.c (internal): see graph_arena_extents.h.
 */
#include "resources/graph_arena/graph_arena_extents.h"

#include <stdlib.h>
#include <string.h>

void gmr__extent_set_clear(gmr__extent_set *set) {
  free(set->items);
  set->items = NULL;
  set->count = 0;
  set->capacity = 0;
  set->total_bytes = 0;
}

bool gmr__extent_set_reserve(gmr__extent_set *set, size_t extra) {
  if (extra > SIZE_MAX / 2 - set->count) return false;
  size_t need = set->count + extra;
  if (need <= set->capacity) return true;
  size_t cap = set->capacity < 16 ? 16 : set->capacity;
  while (cap < need) cap *= 2;
  if (cap > SIZE_MAX / sizeof(gmr__extent)) return false;
  gmr__extent *items = realloc(set->items, cap * sizeof *items);
  if (items == NULL) return false;
  set->items = items;
  set->capacity = cap;
  return true;
}

/* Does range `e` end at or before `pos`? */
static bool ends_before(const gmr__extent *e, gmr__extent_pos pos) {
  return e->order < pos.order || (e->order == pos.order && e->end <= pos.addr);
}

size_t gmr__extent_set_lower_bound(const gmr__extent_set *set, gmr__extent_pos pos) {
  size_t lo = 0, hi = set->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ends_before(&set->items[mid], pos)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

bool gmr__extent_fit(const gmr__extent *e, size_t bytes, size_t alignment, uintptr_t from,
                     uintptr_t *out_addr) {
  uintptr_t start = e->begin > from ? e->begin : from;
  if (start >= e->end) return false;
  uintptr_t mask = (uintptr_t)alignment - 1;
  if (start > UINTPTR_MAX - mask) return false;
  uintptr_t addr = (start + mask) & ~mask;
  if (addr >= e->end || e->end - addr < bytes) return false;
  *out_addr = addr;
  return true;
}

bool gmr__extent_set_next_fit(const gmr__extent_set *set, gmr__extent_pos from, bool wrap,
                              size_t bytes, size_t alignment, uintptr_t tag, size_t *out_index,
                              uintptr_t *out_addr) {
  size_t first = gmr__extent_set_lower_bound(set, from);
  for (size_t i = first; i < set->count; ++i) {
    const gmr__extent *e = &set->items[i];
    /* Only the range that holds `from` starts later than its beginning. */
    uintptr_t floor = e->order == from.order ? from.addr : 0;
    if (e->tag == tag && gmr__extent_fit(e, bytes, alignment, floor, out_addr)) {
      *out_index = i;
      return true;
    }
  }
  if (!wrap) return false;
  for (size_t i = 0; i < set->count; ++i) {
    const gmr__extent *e = &set->items[i];
    if (e->tag == tag && gmr__extent_fit(e, bytes, alignment, 0, out_addr)) {
      *out_index = i;
      return true;
    }
  }
  return false;
}

/* Position order: (order, begin). */
static bool precedes(const gmr__extent *x, const gmr__extent *y) {
  return x->order < y->order || (x->order == y->order && x->begin < y->begin);
}

/* The next range of `set` tagged `tag` at or after index *i, or NULL. */
static const gmr__extent *next_tagged(const gmr__extent_set *set, uintptr_t tag, size_t *i) {
  while (*i < set->count && set->items[*i].tag != tag) (*i)++;
  return *i < set->count ? &set->items[*i] : NULL;
}

bool gmr__extent_sets_joined_best_fit(const gmr__extent_set *a, uintptr_t tag_a,
                                      const gmr__extent_set *b, uintptr_t tag_b, bool join,
                                      size_t bytes, size_t alignment, uint64_t *out_order,
                                      uintptr_t *out_addr) {
  size_t i = 0, j = 0;
  bool found = false, open = false;
  size_t best_size = 0;
  gmr__extent run = {0, 0, 0, 0};
  int run_set = 0; /* 0: a, 1: b, 2: both */
  for (;;) {
    const gmr__extent *x = next_tagged(a, tag_a, &i);
    const gmr__extent *y = next_tagged(b, tag_b, &j);
    const gmr__extent *e = NULL;
    int from = 0;
    if (x != NULL && (y == NULL || precedes(x, y))) {
      e = x;
      i++;
    } else if (y != NULL) {
      e = y;
      from = 1;
      j++;
    }
    bool extends = open && e != NULL && e->order == run.order && e->begin == run.end &&
                   (join || run_set == from);
    if (extends) {
      run.end = e->end;
      if (run_set != from) run_set = 2;
      continue;
    }
    /* The run ends here: judge it. */
    uintptr_t addr = 0;
    size_t size = run.end - run.begin;
    if (open && (!found || size < best_size) && gmr__extent_fit(&run, bytes, alignment, 0, &addr)) {
      found = true;
      best_size = size;
      *out_order = run.order;
      *out_addr = addr;
    }
    if (e == NULL) return found;
    run = *e;
    run_set = from;
    open = true;
  }
}

size_t gmr__extent_set_take_span(gmr__extent_set *set, uint64_t order, uintptr_t begin,
                                 uintptr_t end, uintptr_t tag) {
  size_t taken = 0;
  while (begin < end) {
    size_t i = gmr__extent_set_lower_bound(set, (gmr__extent_pos){order, begin});
    if (i >= set->count) break;
    const gmr__extent *e = &set->items[i];
    if (e->order != order || e->begin >= end || (tag != GMR__EXTENT_ANY_TAG && e->tag != tag)) {
      break;
    }
    uintptr_t lo = e->begin > begin ? e->begin : begin;
    uintptr_t hi = e->end < end ? e->end : end;
    gmr__extent_set_carve(set, i, lo, hi - lo);
    taken += hi - lo;
    begin = hi;
  }
  return taken;
}

size_t gmr__extent_set_covered_bytes(const gmr__extent_set *set, uint64_t order, uintptr_t begin,
                                     uintptr_t end) {
  size_t covered = 0;
  for (size_t i = gmr__extent_set_lower_bound(set, (gmr__extent_pos){order, begin});
       i < set->count; ++i) {
    const gmr__extent *e = &set->items[i];
    if (e->order != order || e->begin >= end) break;
    uintptr_t lo = e->begin > begin ? e->begin : begin;
    uintptr_t hi = e->end < end ? e->end : end;
    if (hi > lo) covered += hi - lo;
  }
  return covered;
}

static void insert_at(gmr__extent_set *set, size_t index, gmr__extent e) {
  memmove(&set->items[index + 1], &set->items[index], (set->count - index) * sizeof e);
  set->items[index] = e;
  set->count++;
  set->version++;
}

void gmr__extent_set_remove(gmr__extent_set *set, size_t index) {
  set->total_bytes -= set->items[index].end - set->items[index].begin;
  memmove(&set->items[index], &set->items[index + 1],
          (set->count - index - 1) * sizeof set->items[0]);
  set->count--;
  set->version++;
}

void gmr__extent_set_carve(gmr__extent_set *set, size_t index, uintptr_t addr, size_t bytes) {
  gmr__extent *e = &set->items[index];
  uintptr_t end = addr + bytes;
  bool keep_front = addr > e->begin;
  bool keep_back = end < e->end;
  if (keep_front && keep_back) {
    gmr__extent back = {end, e->end, e->tag, e->order};
    e->end = addr;
    insert_at(set, index + 1, back);
  } else if (keep_front) {
    e->end = addr;
  } else if (keep_back) {
    e->begin = end; /* the common case: carving from the front */
  } else {
    gmr__extent_set_remove(set, index);
    return; /* remove() took the bytes off the total */
  }
  set->total_bytes -= bytes;
}

static bool can_merge(const gmr__extent *left, const gmr__extent *right) {
  return left->end == right->begin && left->tag == right->tag && left->order == right->order;
}

void gmr__extent_set_add(gmr__extent_set *set, gmr__extent e) {
  gmr__extent_pos pos = {e.order, e.begin};
  size_t i = gmr__extent_set_lower_bound(set, pos); /* the first range after e */
  set->total_bytes += e.end - e.begin;
  bool merge_left = i > 0 && can_merge(&set->items[i - 1], &e);
  bool merge_right = i < set->count && can_merge(&e, &set->items[i]);
  if (merge_left && merge_right) {
    set->items[i - 1].end = set->items[i].end;
    memmove(&set->items[i], &set->items[i + 1], (set->count - i - 1) * sizeof e);
    set->count--;
    set->version++;
  } else if (merge_left) {
    set->items[i - 1].end = e.end;
  } else if (merge_right) {
    set->items[i].begin = e.begin;
  } else {
    insert_at(set, i, e);
  }
}

static int compare_position(const void *a, const void *b) {
  const gmr__extent *x = a, *y = b;
  if (x->order != y->order) return x->order < y->order ? -1 : 1;
  return x->begin < y->begin ? -1 : x->begin > y->begin;
}

void gmr__extent_set_add_many(gmr__extent_set *set, gmr__extent *ranges, size_t count) {
  if (count == 0) return;
  if (count == 1) {
    gmr__extent_set_add(set, ranges[0]);
    return;
  }
  /* Append, sort the whole array, then merge neighbours in one pass. */
  memcpy(&set->items[set->count], ranges, count * sizeof *ranges);
  set->count += count;
  for (size_t i = 0; i < count; ++i) set->total_bytes += ranges[i].end - ranges[i].begin;
  qsort(set->items, set->count, sizeof *set->items, compare_position);
  size_t out = 0;
  for (size_t i = 1; i < set->count; ++i) {
    if (can_merge(&set->items[out], &set->items[i])) {
      set->items[out].end = set->items[i].end;
    } else {
      set->items[++out] = set->items[i];
    }
  }
  set->count = out + 1;
  set->version++;
}

size_t gmr__extent_set_find_exact(const gmr__extent_set *set, gmr__extent e) {
  gmr__extent_pos pos = {e.order, e.begin};
  size_t i = gmr__extent_set_lower_bound(set, pos);
  if (i < set->count && set->items[i].order == e.order && set->items[i].begin == e.begin &&
      set->items[i].end == e.end && set->items[i].tag == e.tag) {
    return i;
  }
  return SIZE_MAX;
}
