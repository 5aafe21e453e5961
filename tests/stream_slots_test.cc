// core/stream_slots: the one stream-slot table of pool_resource,
// fixed_block_resource and vmm's fine placement, over a fake resource
// whose slots hold a count of blocks (tests/stream_slots_probe.h): create,
// the cached hit, a slot retired by another stream id (or taken over when
// empty), reuse of empty slots and the reuse-at threshold, growth,
// slot_return after a capture, the shared slot, and a failed create that
// changes nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/stream_slots_probe.h"

namespace {

const slots_probe_constants kC = slots_probe_constants_get();
const uint32_t kNone = kC.none;
const uint32_t kReuseAt = kC.reuse_at;
const uint64_t kCapture = kC.capture_id;

class StreamSlots : public ::testing::Test {
 protected:
  void Init(bool shared, bool ids = false, uint32_t reuse_at = kReuseAt) {
    p_ = slots_probe_new(shared, ids, reuse_at, false);
    ASSERT_NE(nullptr, p_);
  }
  void TearDown() override {
    if (p_ != nullptr) {
      EXPECT_TRUE(slots_probe_free(p_)) << "every slot made was destroyed";
    }
  }

  uint32_t Of(uintptr_t h, uint64_t id) { return slots_probe_of(p_, h, id); }
  uint32_t Find(uintptr_t h, uint64_t id) { return slots_probe_find(p_, h, id); }
  uint32_t ForHandle(uintptr_t h) { return slots_probe_for_handle(p_, h); }
  slots_probe_slot Slot(uint32_t i) { return slots_probe_slot_at(p_, i); }
  slots_probe_table Table() { return slots_probe_table_of(p_); }
  void Set(uint32_t i, int blocks, int waiting = 0) { slots_probe_set(p_, i, blocks, waiting); }

  slots_probe *p_ = nullptr;
};

TEST_F(StreamSlots, TheFirstLookupCreatesASlotAndTheNextHitsTheCache) {
  Init(true);
  EXPECT_EQ(1u, Table().count) << "the shared slot";
  EXPECT_EQ(1u, Table().first);
  EXPECT_TRUE(Slot(0).lazy);
  uint32_t a = Of(0x1000, 7);
  EXPECT_EQ(1u, a);
  EXPECT_EQ(a, Table().cached);
  EXPECT_EQ(1u, Table().active);
  EXPECT_EQ(1, Table().started);
  EXPECT_EQ(7u, Slot(a).id);
  EXPECT_FALSE(Slot(a).lazy);
  EXPECT_EQ(kC.eager_frees, Slot(a).eager_left) << "the table's mode: on demand";
  int creates = Table().creates;
  EXPECT_EQ(a, Of(0x1000, 7));
  EXPECT_EQ(creates, Table().creates);
  EXPECT_EQ(1, Table().started) << "a hit starts nothing";
  // Another stream: its own slot, and the cache follows it.
  uint32_t b = Of(0x2000, 8);
  EXPECT_EQ(2u, b);
  EXPECT_EQ(b, Table().cached);
  EXPECT_EQ(a, Of(0x1000, 7));
  EXPECT_EQ(a, Table().cached);
  EXPECT_EQ(2u, Table().active);
  EXPECT_EQ(a, Find(0x1000, 7));
  EXPECT_EQ(kNone, Find(0x1000, 8));
  EXPECT_EQ(kNone, Find(0x3000, 7));
  EXPECT_EQ(b, ForHandle(0x2000));
  EXPECT_EQ(b, Table().cached);
}

TEST_F(StreamSlots, TheSharedSlotIsNeverAStreamsSlot) {
  Init(true);
  // The legacy default stream's key is the shared slot's: it still gets a slot of its own.
  EXPECT_EQ(kNone, ForHandle(0));
  EXPECT_EQ(kNone, Find(0, 0));
  uint32_t d = Of(0, 0);
  EXPECT_EQ(1u, d);
  EXPECT_EQ(d, ForHandle(0));
  EXPECT_TRUE(Slot(d).lazy) << "a process-wide stream is recorded on lazily";
}

TEST_F(StreamSlots, WithoutASharedSlotSlotZeroServesAStream) {
  Init(false);
  EXPECT_EQ(0u, Table().count);
  EXPECT_EQ(kNone, ForHandle(0x1000));
  EXPECT_EQ(0u, Of(0x1000, 0));
  EXPECT_EQ(0u, ForHandle(0x1000));
  EXPECT_EQ(1u, Of(0x2000, 0));
}

TEST_F(StreamSlots, ASlotLearnsItsStreamsIdByHandle) {
  Init(true);
  uint32_t a = Of(0x1000, 0);  // id not asked
  EXPECT_EQ(a, Of(0x1000, 7));
  EXPECT_EQ(7u, Slot(a).id) << "adopted";
  EXPECT_EQ(a, Of(0x1000, kCapture)) << "by handle a capture is the slot's stream";
  EXPECT_EQ(7u, Slot(a).id);
  EXPECT_EQ(a, ForHandle(0x1000));
  EXPECT_EQ(1, Table().creates - 1) << "one stream slot besides the shared one";
}

TEST_F(StreamSlots, AnotherStreamIdRetiresASlotThatHoldsMemory) {
  Init(true);
  uint32_t a = Of(0x1000, 7);
  Set(a, 3);
  uint32_t b = Of(0x1000, 9);  // stream 7 was destroyed; 9 got its handle
  EXPECT_NE(a, b);
  EXPECT_TRUE(Slot(a).retired);
  EXPECT_EQ(3, Slot(a).blocks) << "the old stream's memory stays with its slot";
  EXPECT_EQ(0, Slot(b).blocks);
  EXPECT_EQ(1u, Table().active);
  EXPECT_EQ(b, ForHandle(0x1000));
  EXPECT_EQ(kNone, Find(0x1000, 7));
  // Once empty (its memory went to others), the retired slot serves a new stream.
  Set(a, 0);
  int creates = Table().creates;
  EXPECT_EQ(a, Of(0x2000, 11));
  EXPECT_EQ(creates, Table().creates);
  EXPECT_FALSE(Slot(a).retired);
  EXPECT_EQ(11u, Slot(a).id);
  EXPECT_EQ(0x2000u, Slot(a).handle);
  EXPECT_EQ(2u, Table().active);
}

TEST_F(StreamSlots, AnEmptySlotChangesHandsWithoutRetiring) {
  Init(true);
  uint32_t a = Of(0x1000, 7);
  Set(a, 0, 1);  // blocks waiting for events are memory too: not empty
  uint32_t b = Of(0x1000, 9);
  EXPECT_NE(a, b);
  EXPECT_TRUE(Slot(a).retired);
  int started = Table().started;
  uint32_t c = Of(0x1000, 12);
  EXPECT_EQ(b, c) << "empty: taken over in place";
  EXPECT_FALSE(Slot(c).retired);
  EXPECT_EQ(12u, Slot(c).id);
  EXPECT_EQ(started + 1, Table().started);
  EXPECT_EQ(1u, Table().active);
}

TEST_F(StreamSlots, WithStreamIdsAnUnprovenIdIsAnotherStream) {
  Init(true, /*ids=*/true);
  uint32_t a = Of(0x1000, 0);
  Set(a, 1);
  uint32_t b = Of(0x1000, 7);
  EXPECT_NE(a, b);
  EXPECT_TRUE(Slot(a).retired);
}

// A stream keyed by its capture while its slot holds memory (stream_ids):
// after the capture the stream's calls give it its slot back, with what its
// capture freed, in stream order (slot_return).
TEST_F(StreamSlots, AStreamGetsItsSlotBackAfterItsCapture) {
  Init(true, /*ids=*/true);
  uint32_t own = Of(0x1000, 7);
  Set(own, 2);
  uint64_t seq = Slot(own).free_seq;
  uint32_t cap = Of(0x1000, kCapture);
  EXPECT_NE(own, cap);
  EXPECT_TRUE(Slot(own).retired);
  Set(cap, 1);  // freed during the capture
  int started = Table().started;
  EXPECT_EQ(own, Of(0x1000, 7));
  EXPECT_FALSE(Slot(own).retired);
  EXPECT_TRUE(Slot(cap).retired);
  EXPECT_EQ(3, Slot(own).blocks);
  EXPECT_EQ(0, Slot(cap).blocks);
  EXPECT_EQ(seq + 1, Slot(own).free_seq) << "the moved frees are not covered by its event";
  EXPECT_EQ(7u, Slot(own).id);
  EXPECT_EQ(started, Table().started) << "given back, not restarted";
  EXPECT_EQ(own, Table().cached);
  EXPECT_EQ(1u, Table().active);
  EXPECT_EQ(1, Table().moves);
  EXPECT_EQ(cap, Table().last_move_from);
  EXPECT_EQ(own, Table().last_move_to);
  // Again, with nothing freed during the capture: the event state is kept.
  EXPECT_EQ(cap, Of(0x1000, kCapture)) << "the empty retired slot serves the capture";
  seq = Slot(own).free_seq;
  EXPECT_EQ(own, Of(0x1000, 7));
  EXPECT_EQ(seq, Slot(own).free_seq);
  EXPECT_EQ(2, Table().moves);
}

TEST_F(StreamSlots, TheTableGrowsAndKeepsItsSlots) {
  Init(true);
  std::vector<const void *> seen;
  for (uint32_t i = 1; i <= 20; ++i) {
    uint32_t s = Of(0x1000 * i, i);
    EXPECT_EQ(i, s);
    seen.push_back(Slot(s).identity);
    Set(s, 1);  // not empty: never reused
  }
  EXPECT_EQ(21u, Table().count);
  EXPECT_GE(Table().capacity, 21u);
  for (uint32_t i = 1; i <= 20; ++i) {
    EXPECT_EQ(i, Find(0x1000 * i, i));
    EXPECT_EQ(seen[i - 1], Slot(i).identity);
  }
}

TEST_F(StreamSlots, EmptySlotsGoToNewStreamsOnlyFromTheReuseThresholdOn) {
  Init(true, false, /*reuse_at=*/4);
  Of(0x1000, 1);  // empty, not retired
  Of(0x2000, 2);
  EXPECT_EQ(3u, Of(0x3000, 3)) << "below the threshold: a new slot";
  EXPECT_EQ(4u, Table().count);
  int creates = Table().creates;
  EXPECT_EQ(1u, Of(0x4000, 4)) << "at the threshold: the first empty slot";
  EXPECT_EQ(creates, Table().creates);
  EXPECT_EQ(kNone, Find(0x1000, 1)) << "its stream gets a new slot if it comes back";
  EXPECT_EQ(3u, Table().active);
  // The default threshold of pool and fixed_block.
  ASSERT_TRUE(slots_probe_free(p_));
  Init(true);
  for (uint32_t i = 1; i < kReuseAt; ++i) Of(0x1000 * i, i);
  EXPECT_EQ(kReuseAt, Table().count);
  EXPECT_EQ(1u, Of(0x100000, 99));
  EXPECT_EQ(kReuseAt, Table().count);
}

TEST_F(StreamSlots, NeverReusedUnlessRetired) {
  Init(true, false, kC.reuse_never);  // vmm's fine placement
  for (uint32_t i = 1; i <= 40; ++i) Of(0x1000 * i, i);
  EXPECT_EQ(41u, Table().count);
  EXPECT_EQ(40u, Table().active);
}

TEST_F(StreamSlots, AFailedCreateChangesNothing) {
  Init(true);
  uint32_t a = Of(0x1000, 7);
  slots_probe_fail_create(p_, true);
  EXPECT_EQ(kNone, Of(0x2000, 8));
  EXPECT_EQ(2u, Table().count);
  EXPECT_EQ(a, Table().cached);
  EXPECT_EQ(1u, Table().active);
  EXPECT_EQ(a, Of(0x1000, 7));
  slots_probe_fail_create(p_, false);
  EXPECT_EQ(2u, Of(0x2000, 8));
}

TEST(StreamSlotsInit, ASharedSlotThatCannotBeMadeFailsTheInit) {
  EXPECT_EQ(nullptr, slots_probe_new(true, false, kReuseAt, /*fail_create=*/true));
  slots_probe *p = slots_probe_new(false, false, kReuseAt, true);  // nothing to make yet
  ASSERT_NE(nullptr, p);
  EXPECT_TRUE(slots_probe_free(p));
}

}  // namespace
