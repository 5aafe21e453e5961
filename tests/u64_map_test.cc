// The internal pointer map: checked against std::unordered_map under random
// insertions and removals (backward-shift deletion is easy to get wrong).
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "core/u64_map.h"

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

}  // namespace
