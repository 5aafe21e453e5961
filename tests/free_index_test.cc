// core/free_index: the one TLSF index of gmr (pool_resource's free blocks,
// vmm's fine placement): size classes at their edges, best fit with an
// exact fit first, ties to the lower address, the first larger class,
// alignment, the scan bound, resizing, walking, and check() finding what is
// inconsistent.
#include "stream_ordered/free_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <set>
#include <vector>

namespace {

constexpr size_t kUnit = GMR__FREE_INDEX_UNIT;

class FreeIndex : public ::testing::Test {
 protected:
  void SetUp() override { gmr__free_index_init(&index_); }

  // A node of `bytes` at `addr`, filed (nodes_ keeps it alive).
  gmr__free_node *Add(uintptr_t addr, size_t bytes) {
    nodes_.push_back(gmr__free_node{addr, bytes, nullptr, nullptr});
    gmr__free_node *n = &nodes_.back();
    gmr__free_index_insert(&index_, n);
    return n;
  }

  gmr__free_node *Find(size_t bytes, size_t alignment = kUnit) const {
    return gmr__free_index_find(&index_, bytes, alignment);
  }

  bool Check() const { return gmr__free_index_check(&index_, nullptr, nullptr); }

  static std::pair<unsigned, unsigned> Class(size_t bytes) {
    unsigned fl = 0, sl = 0;
    gmr__free_index_class(bytes, &fl, &sl);
    return {fl, sl};
  }

  gmr__free_index index_;
  std::deque<gmr__free_node> nodes_;  // stable addresses
};

TEST_F(FreeIndex, SizeClassesAreExactBelow32UnitsThen32PerPowerOfTwo) {
  // Below 32 units, one class per size.
  for (size_t u = 1; u < 32; ++u) EXPECT_EQ(std::make_pair(0u, unsigned(u)), Class(u * kUnit));
  // 32 units starts the first level 1; each power of two splits into 32.
  EXPECT_EQ(std::make_pair(1u, 0u), Class(32 * kUnit));
  EXPECT_EQ(std::make_pair(1u, 31u), Class(63 * kUnit));
  EXPECT_EQ(std::make_pair(2u, 0u), Class(64 * kUnit));
  EXPECT_EQ(std::make_pair(2u, 0u), Class(65 * kUnit));  // 2 units per class there
  EXPECT_EQ(std::make_pair(2u, 1u), Class(66 * kUnit));
  // A class spans at most 1/32 of its sizes: the edges of a class at 1 MiB.
  size_t mib = size_t{1} << 20;
  EXPECT_EQ(Class(mib), Class(mib + mib / 32 - kUnit));
  EXPECT_NE(Class(mib), Class(mib + mib / 32));
  EXPECT_NE(Class(mib - kUnit), Class(mib));
  // The largest size_t multiple of 256 has a class inside the index.
  auto top = Class(SIZE_MAX & ~(kUnit - 1));
  EXPECT_LT(top.first, GMR__FREE_INDEX_FL_COUNT);
  EXPECT_LT(top.second, GMR__FREE_INDEX_SL_COUNT);
}

TEST_F(FreeIndex, NodesAtClassEdgesAreFiledCountedAndFound) {
  const size_t sizes[] = {kUnit,           31 * kUnit,      32 * kUnit,
                          63 * kUnit,      64 * kUnit,      (1 << 20) - kUnit,
                          size_t{1} << 20, size_t{1} << 40, SIZE_MAX & ~(kUnit - 1)};
  size_t bytes = 0;
  uintptr_t addr = 0;
  for (size_t s : sizes) {
    Add(addr, s);
    addr += kUnit;
    bytes += s;
  }
  EXPECT_TRUE(Check());
  EXPECT_EQ(sizeof sizes / sizeof sizes[0], index_.block_count);
  EXPECT_EQ(bytes, index_.bytes);  // wraps like size_t: the same sum either way
  for (size_t s : sizes) {
    gmr__free_node *n = Find(s);
    ASSERT_NE(nullptr, n) << s;
    EXPECT_EQ(s, n->bytes) << "an exact fit for every size";
  }
  EXPECT_EQ(SIZE_MAX & ~(kUnit - 1), gmr__free_index_largest(&index_));
}

TEST_F(FreeIndex, AnEmptyIndexHasNothing) {
  EXPECT_EQ(nullptr, Find(kUnit));
  EXPECT_EQ(nullptr, Find(kUnit, 4096));
  EXPECT_EQ(nullptr, gmr__free_index_any(&index_));
  EXPECT_EQ(nullptr, gmr__free_index_next(&index_, nullptr));
  EXPECT_EQ(0u, gmr__free_index_largest(&index_));
  EXPECT_TRUE(Check());
}

TEST_F(FreeIndex, TheOwnClassGivesTheBestFitAndAnExactFitFirst) {
  size_t mib = size_t{1} << 20;  // its class holds sizes mib .. mib + 31 * 128 units
  Add(0x100000, mib + 20 * kUnit);
  Add(0x200000, mib);  // smaller than the request: does not fit
  Add(0x300000, mib + 8 * kUnit);
  Add(0x400000, mib + 12 * kUnit);
  EXPECT_EQ(mib + 8 * kUnit, Find(mib + 4 * kUnit)->bytes) << "the smallest that fits";
  gmr__free_node *exact = Add(0x500000, mib + 4 * kUnit);
  EXPECT_EQ(exact, Find(mib + 4 * kUnit));
  EXPECT_EQ(mib + 20 * kUnit, Find(mib + 16 * kUnit)->bytes);
  EXPECT_TRUE(Check());
}

TEST_F(FreeIndex, TiesGoToTheLowerAddress) {
  size_t mib = size_t{1} << 20;
  Add(0x900000, mib + 8 * kUnit);
  Add(0x100000, mib + 8 * kUnit);
  Add(0x500000, mib + 8 * kUnit);
  EXPECT_EQ(0x100000u, Find(mib + 4 * kUnit)->addr) << "own class";
  // In a larger class too.
  EXPECT_EQ(0x100000u, Find(mib - 64 * kUnit)->addr) << "first larger class";
}

TEST_F(FreeIndex, WithoutAFitInItsClassTheFirstLargerClassServes) {
  size_t mib = size_t{1} << 20;
  Add(0x100000, 4 * mib);  // a class far above
  Add(0x200000, 2 * mib + 2 * kUnit);
  Add(0x300000, 2 * mib);  // the first non-empty larger class holds these two
  Add(0x400000, mib);      // the request's class, too small
  gmr__free_node *n = Find(mib + 4 * kUnit);
  ASSERT_NE(nullptr, n);
  EXPECT_EQ(2 * mib, n->bytes) << "the smallest of the first larger class";
  EXPECT_EQ(nullptr, Find(8 * mib));
}

TEST_F(FreeIndex, AnAlignmentSkipsNodesThatDoNotFitOnceAligned) {
  const size_t align = 64 * 1024;
  // 64 KiB at an address 256 past a boundary: 64 KiB aligned does not fit.
  Add(0x10100, align);
  EXPECT_EQ(align, Find(align)->bytes) << "fits without the alignment";
  EXPECT_EQ(nullptr, Find(align, align));
  // A larger node with the room to align, in a later class.
  gmr__free_node *roomy = Add(0x20100, 2 * align);
  EXPECT_EQ(roomy, Find(align, align));
  // An aligned node of exactly the size: found, and preferred (smaller).
  gmr__free_node *exact = Add(0x40000, align);
  EXPECT_EQ(exact, Find(align, align));
  // Up to 256 bytes is no alignment at all.
  EXPECT_EQ(Find(align, 1), Find(align, kUnit));
}

TEST_F(FreeIndex, AClassIsScannedUpToTheBound) {
  // One class, more nodes than a search looks at: the best one filed first
  // (the list's last) is beyond the bound; a node within it is returned.
  size_t mib = size_t{1} << 20;
  Add(0x1000000, mib + 1 * kUnit);
  for (unsigned i = 0; i < GMR__FREE_INDEX_SCAN_LIMIT; ++i) {
    Add(0x2000000 + i * 0x100000, mib + 20 * kUnit);
  }
  gmr__free_node *n = Find(mib);
  ASSERT_NE(nullptr, n);
  EXPECT_EQ(mib + 20 * kUnit, n->bytes) << "within 1/32 of the best, at a bounded cost";
  // Removing one puts the best within the bound.
  gmr__free_index_remove(&index_, n);
  EXPECT_EQ(mib + kUnit, Find(mib)->bytes);
}

TEST_F(FreeIndex, ResizedMovesANodeOnlyAcrossClasses) {
  gmr__free_node *a = Add(0x100000, 40 * kUnit);
  gmr__free_node *b = Add(0x200000, 40 * kUnit);  // the list's head now
  size_t old = a->bytes;
  a->bytes = 41 * kUnit;  // the next class (one unit per class up to 64 units)
  gmr__free_index_resized(&index_, a, old);
  EXPECT_TRUE(Check());
  EXPECT_EQ(81 * kUnit, index_.bytes);
  old = b->bytes;
  b->bytes = 2000 * kUnit;  // another class
  b->addr = 0x300000;
  gmr__free_index_resized(&index_, b, old);
  EXPECT_TRUE(Check());
  EXPECT_EQ(2041 * kUnit, index_.bytes);
  EXPECT_EQ(b, Find(1000 * kUnit));
  EXPECT_EQ(2000 * kUnit, gmr__free_index_largest(&index_));
  // Within one wide class (2^17 units at 1 GiB) a size change leaves the
  // node where it is: at the head, before one filed earlier.
  size_t gib = size_t{1} << 30;
  gmr__free_node *d = Add(0x500000, gib + 32 * kUnit);
  gmr__free_node *c = Add(0x400000, gib + 64 * kUnit);
  old = c->bytes;
  c->bytes -= 16 * kUnit;
  ASSERT_EQ(Class(old), Class(c->bytes));
  gmr__free_index_resized(&index_, c, old);
  EXPECT_TRUE(Check());
  EXPECT_EQ(d, c->free_next) << "not moved";
  EXPECT_EQ(c, Find(gib + 40 * kUnit));
}

TEST_F(FreeIndex, RemoveAnyAndNextVisitEveryNodeOnce) {
  std::set<gmr__free_node *> all;
  for (size_t i = 0; i < 200; ++i) all.insert(Add(0x1000000 + i * 0x10000, (1 + i % 70) * kUnit));
  std::set<gmr__free_node *> walked;
  size_t last = 0;
  for (gmr__free_node *n = gmr__free_index_next(&index_, nullptr); n != nullptr;
       n = gmr__free_index_next(&index_, n)) {
    EXPECT_TRUE(walked.insert(n).second);
    EXPECT_LE(Class(last), Class(n->bytes)) << "classes in increasing size";
    last = n->bytes;
  }
  EXPECT_EQ(all, walked);
  size_t removed = 0;
  for (gmr__free_node *n; (n = gmr__free_index_any(&index_)) != nullptr; ++removed) {
    gmr__free_index_remove(&index_, n);
    EXPECT_EQ(nullptr, n->free_next);
    EXPECT_EQ(nullptr, n->free_prev);
  }
  EXPECT_EQ(200u, removed);
  EXPECT_EQ(0u, index_.block_count);
  EXPECT_EQ(0u, index_.bytes);
  EXPECT_TRUE(Check());
}

struct Visits {
  size_t count = 0;
  const gmr__free_node *refuse = nullptr;
};

bool Visit(void *ctx, const gmr__free_node *n) {
  Visits *v = static_cast<Visits *>(ctx);
  v->count++;
  return n != v->refuse;
}

TEST_F(FreeIndex, CheckFindsWhatIsInconsistent) {
  gmr__free_node *a = Add(0x100000, 40 * kUnit);
  gmr__free_node *b = Add(0x200000, 40 * kUnit);
  Add(0x300000, 3000 * kUnit);
  Visits v;
  EXPECT_TRUE(gmr__free_index_check(&index_, Visit, &v));
  EXPECT_EQ(3u, v.count);
  v = Visits{0, b};
  EXPECT_FALSE(gmr__free_index_check(&index_, Visit, &v)) << "the owner's visit said no";

  index_.block_count++;
  EXPECT_FALSE(Check()) << "a count off";
  index_.block_count--;
  index_.bytes += kUnit;
  EXPECT_FALSE(Check()) << "bytes off";
  index_.bytes -= kUnit;
  ASSERT_TRUE(Check());

  a->bytes = 50 * kUnit;  // changed without resized(): in the wrong class
  EXPECT_FALSE(Check());
  a->bytes = 40 * kUnit + 1;  // not a unit multiple
  EXPECT_FALSE(Check());
  a->bytes = 40 * kUnit;
  a->addr += 8;  // not on the unit
  EXPECT_FALSE(Check());
  a->addr -= 8;
  ASSERT_TRUE(Check());

  gmr__free_node *saved = a->free_prev;
  a->free_prev = a;  // a broken back link
  EXPECT_FALSE(Check());
  a->free_prev = saved;
  ASSERT_TRUE(Check());

  unsigned fl = Class(3000 * kUnit).first;
  index_.fl_bitmap ^= uint64_t{1} << fl;
  EXPECT_FALSE(Check()) << "a first-level bit off";
  index_.fl_bitmap ^= uint64_t{1} << fl;
  index_.sl_bitmap[0] |= 1u << 3;  // a class marked non-empty that is empty
  EXPECT_FALSE(Check());
  index_.sl_bitmap[0] &= ~(1u << 3);
  EXPECT_TRUE(Check());
}

}  // namespace
