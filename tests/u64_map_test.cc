// The internal pointer map: checked against std::unordered_map under random
// insertions and removals (backward-shift deletion is easy to get wrong).
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "util/u64_map.h"

namespace {

TEST(U64Map, MatchesAReferenceMapUnderRandomOperations) {
  gmr__u64_map map = GMR__U64_MAP_INIT;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200000; ++i) {
    // Few distinct keys, 256-byte aligned like pointers, plus key 0.
    uint64_t key = (rng() % 5000) * 256;
    uint64_t op = rng() % 3;
    if (op < 2) {
      ASSERT_TRUE(gmr__u64_map_put(&map, key, i));
      ref[key] = i;
    } else {
      uint64_t v = 0;
      bool had = ref.erase(key) > 0;
      ASSERT_EQ(had, gmr__u64_map_remove(&map, key, &v));
    }
    ASSERT_EQ(ref.size(), map.count);
  }
  for (auto &kv : ref) {
    uint64_t v = 0;
    ASSERT_TRUE(gmr__u64_map_get(&map, kv.first, &v));
    EXPECT_EQ(kv.second, v);
  }
  size_t cursor = 0, seen = 0;
  uint64_t k = 0, v = 0;
  while (gmr__u64_map_next(&map, &cursor, &k, &v)) {
    EXPECT_EQ(ref.at(k), v);
    seen++;
  }
  EXPECT_EQ(ref.size(), seen);
  gmr__u64_map_clear(&map);
  EXPECT_EQ(0u, map.count);
  EXPECT_FALSE(gmr__u64_map_get(&map, 0, nullptr));
}

// Keys that are not pointers (stream values, small indices, any 64 bits),
// with enough entries to grow the table several times and shrink by removal.
TEST(U64Map, AnyKeysGrowAndShrinkAndIterateOnce) {
  gmr__u64_map map = GMR__U64_MAP_INIT;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    uint64_t key = (i % 3 == 0) ? rng() : (i % 3 == 1 ? rng() % 64 : rng() % 20000);
    if (rng() % 4 != 0) {
      ASSERT_TRUE(gmr__u64_map_put(&map, key, key ^ 0x5a5a));
      ref[key] = key ^ 0x5a5a;
    } else {
      bool had = ref.erase(key) > 0;
      ASSERT_EQ(had, gmr__u64_map_remove(&map, key, nullptr));
    }
  }
  ASSERT_EQ(ref.size(), map.count);
  std::unordered_map<uint64_t, int> seen;
  size_t cursor = 0;
  uint64_t k = 0, v = 0;
  while (gmr__u64_map_next(&map, &cursor, &k, &v)) {
    EXPECT_EQ(ref.at(k), v);
    seen[k]++;
  }
  EXPECT_EQ(ref.size(), seen.size());
  for (auto &kv : seen) EXPECT_EQ(1, kv.second);
  // Reserved room: puts of new keys up to the count cannot fail or move.
  ASSERT_TRUE(gmr__u64_map_reserve(&map, map.count + 100));
  size_t capacity = map.capacity;
  for (uint64_t n = 1; n <= 100; ++n) ASSERT_TRUE(gmr__u64_map_put(&map, n << 40, n));
  EXPECT_EQ(capacity, map.capacity);
  gmr__u64_map_clear(&map);
}

}  // namespace

// The inline forms a pool's live map uses on its hot path (has_room,
// put_new, find, remove_at), mixed with the functions, against a reference.
TEST(U64Map, InlineHotOperationsAgreeWithTheFunctions) {
  gmr__u64_map map = GMR__U64_MAP_INIT;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(11);
  EXPECT_FALSE(gmr__u64_map_has_room(&map));  // no table before the first reservation
  EXPECT_EQ(SIZE_MAX, gmr__u64_map_find(&map, 256));
  for (int i = 0; i < 200000; ++i) {
    uint64_t key = ((rng() % 3000) + 1) * 256;  // never 0: the inline forms' precondition
    size_t at = gmr__u64_map_find(&map, key);
    ASSERT_EQ(ref.count(key) > 0, at != SIZE_MAX);
    if (at != SIZE_MAX) {
      ASSERT_EQ(ref[key], map.slots[at].value);
    }
    if (at == SIZE_MAX) {
      if (!gmr__u64_map_has_room(&map)) {
        ASSERT_TRUE(gmr__u64_map_reserve(&map, map.count + 1));
      }
      ASSERT_TRUE(gmr__u64_map_has_room(&map));
      size_t capacity = map.capacity;
      if (i % 2 == 0) {
        gmr__u64_map_put_new(&map, key, key + 1);
      } else {
        ASSERT_TRUE(gmr__u64_map_put(&map, key, key + 1));
      }
      EXPECT_EQ(capacity, map.capacity);  // room meant no growth
      ref[key] = key + 1;
    } else if (i % 2 == 0) {
      gmr__u64_map_remove_at(&map, at);
      ref.erase(key);
    } else {
      uint64_t v = 0;
      ASSERT_TRUE(gmr__u64_map_remove(&map, key, &v));
      EXPECT_EQ(key + 1, v);
      ref.erase(key);
    }
    ASSERT_EQ(ref.size(), map.count);
  }
  for (auto &kv : ref) {
    uint64_t v = 0;
    ASSERT_TRUE(gmr__u64_map_get(&map, kv.first, &v));
    EXPECT_EQ(kv.second, v);
  }
  gmr__u64_map_clear(&map);
}
