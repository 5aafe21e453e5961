// The pool's live map (resources/pool/pool_block_map.h): a removal by the
// slot a lookup found must remove that block even when the map changed in
// between. A free looks its block up, then files the free under its
// stream's slot; a new stream's first free can move another slot's cached
// blocks out of the map, and backward-shift deletion then moves the entries
// after them, so the slot found may hold another block's entry. The pool
// once removed that other block (a live one: its later free was refused as
// an unknown pointer; stream_order_property_test, Captures/pool_stream_ids,
// seed 131445, about one run in two as addresses fell).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "resources/pool/pool_block_map.h"

namespace {

// Addresses (256-byte aligned, as the pool's) whose home slot in `map` is
// `home`, until `count` are found.
std::vector<uintptr_t> Colliding(const gmr__block_map &map, size_t home, size_t count) {
  std::vector<uintptr_t> out;
  for (uintptr_t a = 0x10000; out.size() < count; a += 256) {
    if (gmr__u64_map_home(&map, a) == home) out.push_back(a);
  }
  return out;
}

TEST(PoolBlockMap, ARemovalByAStaleHitRemovesItsOwnBlock) {
  gmr__block_map map = GMR__BLOCK_MAP_INIT;
  ASSERT_TRUE(gmr__u64_map_reserve(&map, 8));
  // Three blocks in one probe run: a at its home slot, b and c after it.
  const std::vector<uintptr_t> addrs = Colliding(map, 3, 3);
  std::vector<gmr__pool_block> blocks(3);
  for (size_t i = 0; i < 3; ++i) {
    blocks[i] = gmr__pool_block{};
    blocks[i].node.addr = addrs[i];
    ASSERT_TRUE(gmr__block_map_reserve_one(&map));
    gmr__block_map_insert(&map, &blocks[i]);
  }
  gmr__block_map_hit hit = gmr__block_map_lookup(&map, addrs[1]);
  ASSERT_EQ(&blocks[1], hit.block);
  // Another removal shifts b into a's slot and c into b's.
  gmr__block_map_remove(&map, addrs[0]);
  gmr__block_map_remove_hit(&map, hit);
  EXPECT_EQ(nullptr, gmr__block_map_find(&map, addrs[1])) << "b is gone";
  EXPECT_EQ(&blocks[2], gmr__block_map_find(&map, addrs[2])) << "c, live, stays";
  EXPECT_EQ(1u, map.count);
  // And a hit whose slot still holds its block removes it there.
  hit = gmr__block_map_lookup(&map, addrs[2]);
  gmr__block_map_remove_hit(&map, hit);
  EXPECT_EQ(0u, map.count);
  gmr__u64_map_clear(&map);
}

}  // namespace
