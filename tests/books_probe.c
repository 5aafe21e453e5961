/*
 * tests/books_probe.c: see books_probe.h.
 */
#include "tests/books_probe.h"

#include "util/books_inline.h"
#include "util/fence.h"
#include "util/lanes.h"

books_probe_bias books_probe_bias_of(const gmr__books *b, const void *ptr) {
  size_t owner = atomic_load(&gmr__books_shard_of(b, ptr)->owner);
  if (owner == GMR__BOOKS_OWNER_NONE_YET) return BOOKS_PROBE_NONE_YET;
  if (owner == GMR__BOOKS_OWNER_NOBODY) return BOOKS_PROBE_LOCKED;
  return owner == gmr__thread_lane() + 1 ? BOOKS_PROBE_MINE : BOOKS_PROBE_OTHER;
}

bool books_probe_asymmetric(void) { return gmr__fence_asymmetric(); }
