// The graph arena's record_stream slot (a captured block used on another
// stream is reused only after its session ends, or after its memory is
// released) and gmr_graph_arena_resource_allocate_at (a block of a graph
// memory at a given address: checkpoint restore), with every refusal.
#include <gtest/gtest.h>

#include "gmr/gmr.h"
#include "tests/support/graph_arena_fixture.h"

namespace {

using gmr_test::addr;
using gmr_test::MiB;

class ArenaStreams : public gmr_test::GraphArenaPolicy {
 protected:
  gmr_graph_arena_resource *a_ = nullptr;
  gmr_resource *r_ = nullptr;
  gmr_stream s_ = nullptr;
  gmr_stream side_ = nullptr;

  void SetUp() override {
    GraphArenaPolicy::SetUp();
    a_ = Make(Config(8 * MiB, 0, GetParam()));
    r_ = gmr_graph_arena_resource_as_resource(a_);
    s_ = NewStream();
    side_ = NewStream();
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    GraphArenaPolicy::TearDown();
  }
  gmr_graph_memory *EndSession() {
    gmr_graph_memory *m = nullptr;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a_, s_, &m));
    return m;
  }
};

INSTANTIATE_TEST_SUITE_P(Policies, ArenaStreams,
                         ::testing::Values(GMR_GRAPH_ARENA_MONOTONE,
                                           GMR_GRAPH_ARENA_ORDERED_REUSE));

TEST_P(ArenaStreams, ABlockUsedOnAnotherStreamWaitsForTheSessionsEnd) {
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a_, s_, nullptr));
  void *p = Alloc(r_, MiB, s_);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, side_));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, MiB, 0, s_));
  void *q = Alloc(r_, MiB, s_);
  EXPECT_NE(p, q) << "the side stream may still read it until the capture joins it";
  void *plain = Alloc(r_, MiB, s_);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, plain, MiB, 0, s_));
  void *again = Alloc(r_, MiB, s_);
  EXPECT_EQ(reuse(), again == plain) << "no other stream: ordered reuse at once";
  gmr_graph_memory *m = EndSession();
  // A later session appending to the memory gets the bytes (ordered reuse).
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a_, s_, m));
  void *later = Alloc(r_, MiB, s_);
  EXPECT_EQ(reuse(), later == p);
  gmr_graph_memory *m2 = EndSession();
  EXPECT_EQ(m, m2);
  for (void *b : {q, again, later}) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, b, MiB, 0, s_));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a_, m));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a_, m));
}

TEST_P(ArenaStreams, AFreeAfterTheSessionKeepsTheBytesUntilTheMemoryIsReleased) {
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a_, s_, nullptr));
  void *p = Alloc(r_, MiB, s_);
  gmr_graph_memory *m = EndSession();
  // Used eagerly on a side stream after the capture, then freed: no session
  // can tell when the side stream is done.
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, side_));
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, s_));  // its own stream: nothing to wait for
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, MiB, 0, s_));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a_, s_, m));
  void *q = Alloc(r_, MiB, s_);
  EXPECT_NE(p, q);
  EndSession();
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, MiB, 0, s_));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a_, m));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a_, m));
  EXPECT_EQ(0u, Stats(a_).in_use_bytes) << "released: every byte is free again";
}

TEST_P(ArenaStreams, RecordStreamOfSomethingElseIsRefusedOrForwarded) {
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_record_stream(r_, reinterpret_cast<void *>(0x1000), s_));
  void *open = Alloc(r_, 4096, s_);  // uncaptured block of the arena
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(r_, open, side_));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_record_stream(r_, static_cast<char *>(open) + 256, side_));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, open, 4096, 0, s_));
  // Forwarded blocks are the upstream's (cuda_resource keeps record_stream).
  gmr_graph_arena_resource_config c = Config(0, MiB, GetParam());
  c.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *fwd = Make(c);
  gmr_resource *f = gmr_graph_arena_resource_as_resource(fwd);
  void *p = Alloc(f, 4096, s_);
  EXPECT_EQ(gmr_resource_record_stream(up_, p, side_), gmr_resource_record_stream(f, p, side_));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_record_stream(f, reinterpret_cast<void *>(0x2000), side_));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(f, p, 4096, 0, s_));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(f));
}

TEST_P(ArenaStreams, AllocateAtRestoresABlockWhereItWas) {
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a_, s_, nullptr));
  void *p = Alloc(r_, MiB, s_);
  void *q = Alloc(r_, MiB / 2, s_);
  gmr_graph_memory *m = EndSession();
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, MiB, 0, s_));
  uint64_t id = 0;
  // Live bytes are refused, changing nothing.
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_allocate_at(a_, m, q, MiB / 2, s_, &id));
  EXPECT_EQ(0u, id);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_allocate_at(a_, m, p, 2 * MiB, s_, &id))
      << "part of the range is q";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_allocate_at(a_, m, p, MiB, s_, &id));
  EXPECT_NE(0u, id);
  gmr_graph_arena_block_info info;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_get_block(a_, id, &info));
  EXPECT_EQ(p, info.ptr);
  EXPECT_EQ(m, info.memory);
  EXPECT_TRUE(info.captured);
  // A block used on another stream and freed after its session is kept
  // whole (not reusable): allocate_at takes it back all the same.
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, q, side_));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, MiB / 2, 0, s_));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_allocate_at(a_, m, q, MiB / 2, s_, nullptr));
  // Bad input.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_allocate_at(nullptr, m, p, MiB, s_, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_allocate_at(a_, nullptr, p, MiB, s_, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_allocate_at(a_, m, nullptr, MiB, s_, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_allocate_at(a_, m, p, 0, s_, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_allocate_at(a_, m, static_cast<char *>(p) + 16, 256, s_,
                                                 nullptr))
      << "not a multiple of the alignment";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_allocate_at(a_, m, reinterpret_cast<void *>(0x100000), 256,
                                                 s_, nullptr))
      << "outside every chunk";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_allocate_at(a_, m, p, 64 * MiB, s_, nullptr))
      << "past the end of its chunk";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, MiB, 0, s_));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, MiB / 2, 0, s_));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a_, m));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_allocate_at(a_, m, p, MiB, s_, nullptr))
      << "a released memory";
}

TEST_P(ArenaStreams, AllocateAtNeverTakesAnotherMemorysBytes) {
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a_, s_, nullptr));
  void *p = Alloc(r_, MiB, s_);
  gmr_graph_memory *m1 = EndSession();
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, MiB, 0, s_));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a_, s_, nullptr));
  gmr_graph_memory *m2 = EndSession();
  // p's bytes belong to m1 (freed into it): m2 may not take them.
  EXPECT_EQ(GMR_ERR_BUSY,
            gmr_graph_arena_resource_allocate_at(a_, m2, p, MiB, s_, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_allocate_at(a_, m1, p, MiB, s_, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, MiB, 0, s_));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a_, m1));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a_, m2));
}

}  // namespace
