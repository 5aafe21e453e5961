// The graph arena's uncaptured scope as a per-thread pool uses it: growth
// takes each chunk on the requesting stream (so a stream-ordered upstream
// orders it there), and checkpoint_uncaptured / rewind_uncaptured rewind
// blocks of every stream at once, while the stream-checked rewind keeps
// refusing another stream's blocks (graph_arena_resource_test).
#include <gtest/gtest.h>

#include <cstdint>

#include "gmr/graph_arena_resource.h"
#include "tests/support/graph_arena_fixture.h"
#include "tests/support/stream_recorder.h"

namespace {

using gmr_test::GraphArena;
using gmr_test::KiB;
using gmr_test::MiB;

constexpr gmr_stream_recorder_call kAlloc = GMR_STREAM_RECORDER_ALLOCATE;
constexpr gmr_stream_recorder_call kCapturing = GMR_STREAM_RECORDER_ALLOCATE_CAPTURING;
constexpr gmr_stream_recorder_call kFree = GMR_STREAM_RECORDER_DEALLOCATE;

// Arenas over a stream recorder over the fixture's simulated cudaMalloc.
class ArenaUncaptured : public GraphArena {
 protected:
  gmr_stream_recorder *rec_ = nullptr;

  void SetUp() override {
    GraphArena::SetUp();
    rec_ = gmr_stream_recorder_create(up_);
    ASSERT_NE(nullptr, rec_);
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_stream_recorder_as_resource(rec_)));
    GraphArena::TearDown();
  }

  gmr_graph_arena_resource *MakeOverRecorder(size_t initial, size_t chunk,
                                             gmr_graph_arena_detection detection =
                                                 GMR_GRAPH_ARENA_DETECT_AUTO) {
    gmr_graph_arena_resource_config c = Config(initial, chunk);
    c.detection = detection;
    return Make(c, gmr_stream_recorder_as_resource(rec_));
  }
  size_t Count(gmr_stream_recorder_call kind) { return gmr_stream_recorder_count(rec_, kind); }
  gmr_stream Stream(gmr_stream_recorder_call kind, size_t i) {
    return gmr_stream_recorder_stream(rec_, kind, i);
  }
};

// ---- the stream growth takes its chunk on ------------------------------------------------

TEST_F(ArenaUncaptured, GrowthTakesTheChunkOnTheRequestingStream) {
  gmr_graph_arena_resource *a = MakeOverRecorder(64 * KiB, MiB);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  ASSERT_EQ(1u, Count(kAlloc));
  EXPECT_EQ(nullptr, Stream(kAlloc, 0)) << "the initial capacity: no request, no stream";
  gmr_stream s1 = NewStream(), s2 = NewStream();
  void *small = Alloc(r, 4 * KiB, s1);  // fits the initial chunk: no upstream call
  EXPECT_EQ(1u, Count(kAlloc));
  void *big1 = Alloc(r, 512 * KiB, s1);  // grows on s1
  void *big2 = Alloc(r, 768 * KiB, s2);  // grows on s2
  ASSERT_EQ(3u, Count(kAlloc));
  EXPECT_EQ(s1, Stream(kAlloc, 1));
  EXPECT_EQ(s2, Stream(kAlloc, 2));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reserve(a, 8 * MiB));
  ASSERT_EQ(4u, Count(kAlloc));
  EXPECT_EQ(nullptr, Stream(kAlloc, 3)) << "reserve names no stream";
  EXPECT_EQ(0u, Count(kCapturing));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, small, 4 * KiB, 0, s1));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, big1, 512 * KiB, 0, s1));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, big2, 768 * KiB, 0, s2));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(4u, Count(kFree)) << "every chunk went back";
}

TEST_F(ArenaUncaptured, GrowthWhileAnotherStreamCapturesUsesTheRequestsStreamToo) {
  // While a session is open, uncaptured growth goes through
  // allocate_capturing (a plain allocation could break the capture); the
  // chunk is still for the request's stream, not the capturing one's.
  gmr_graph_arena_resource *a = MakeOverRecorder(64 * KiB, MiB, GMR_GRAPH_ARENA_DETECT_EXPLICIT);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream capturing = NewStream(), other = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, capturing, nullptr));
  void *p = Alloc(r, 512 * KiB, other);
  ASSERT_EQ(1u, Count(kCapturing));
  EXPECT_EQ(other, Stream(kCapturing, 0));
  gmr_graph_arena_block_info info{};
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_find_block(a, p, &info));
  EXPECT_FALSE(info.captured) << "served outside the session";
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, capturing, &mem));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 512 * KiB, 0, other));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// ---- checkpoint_uncaptured / rewind_uncaptured --------------------------------------------

TEST_F(ArenaUncaptured, RewindUncapturedFreesTheBlocksOfEveryStream) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s1 = NewStream(), s2 = NewStream();
  void *kept = Alloc(r, 300, s2);  // before the mark: stays
  uint64_t mark = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint_uncaptured(a, &mark));
  EXPECT_NE(0u, mark);
  void *a1 = Alloc(r, 1000, s1);
  void *a2 = Alloc(r, 5000, s2);
  void *a3 = Alloc(r, 700, nullptr);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a3, 700, 0, nullptr));  // freed already: not counted
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind_uncaptured(a, mark, &released));
  EXPECT_EQ(2u, released);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, a1, 1000, 0, s1));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, a2, 5000, 0, s2));
  EXPECT_EQ(1u, Stats(a).live_count);
  // The same requests get the same addresses, whatever their streams now.
  EXPECT_EQ(a1, Alloc(r, 1000, s2));
  EXPECT_EQ(a2, Alloc(r, 5000, s1));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_rewind_uncaptured(a, mark, nullptr))
      << "a mark is used once";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, kept, 300, 0, s2));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaUncaptured, MarksOfBothKindsAreTheSameAndNestLifo) {
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream s1 = NewStream(), s2 = NewStream();
  uint64_t outer = 0, inner = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, s1, &outer));  // no session: uncaptured
  void *b = Alloc(r, 256, s2);
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint_uncaptured(a, &inner));
  void *c = Alloc(r, 256, s1);
  size_t released = 0;
  // The stream-checked rewind takes an uncaptured mark too (only s1 holds
  // blocks after it).
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, s1, inner, &released));
  EXPECT_EQ(1u, released);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, c, 256, 0, s1));
  // A mark the other call set: rewound here without the stream check.
  EXPECT_EQ(GMR_ERR_BUSY, gmr_graph_arena_resource_rewind(a, s1, outer, &released))
      << "s2's block: the checked rewind refuses";
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind_uncaptured(a, outer, &released));
  EXPECT_EQ(1u, released);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, b, 256, 0, s2));
  EXPECT_EQ(0u, Stats(a).in_use_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaUncaptured, AnOpenSessionIsNotTheUncapturedScope) {
  gmr_graph_arena_resource_config c = Config(MiB);
  c.detection = GMR_GRAPH_ARENA_DETECT_EXPLICIT;
  gmr_graph_arena_resource *a = Make(c);
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  gmr_stream cap = NewStream(), other = NewStream();
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, cap, nullptr));
  uint64_t session_mark = 0, open_mark = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, cap, &session_mark));
  // checkpoint_uncaptured on no stream: the uncaptured scope, even now.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint_uncaptured(a, &open_mark));
  void *in_capture = Alloc(r, 4096, cap);
  void *outside = Alloc(r, 4096, other);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_rewind_uncaptured(a, session_mark, nullptr))
      << "a session's mark is not one of the uncaptured scope";
  EXPECT_EQ(2u, Stats(a).live_count) << "nothing changed";
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind_uncaptured(a, open_mark, &released));
  EXPECT_EQ(1u, released) << "only the uncaptured block";
  gmr_graph_arena_block_info info{};
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_find_block(a, in_capture, &info));
  EXPECT_TRUE(info.captured);
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_graph_arena_resource_find_block(a, outside, &info));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, in_capture, 4096, 0, cap));
  gmr_graph_memory *mem = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, cap, &mem));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, mem));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(ArenaUncaptured, BadCallsChangeNothing) {
  uint64_t mark = 9;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_checkpoint_uncaptured(nullptr, &mark));
  EXPECT_EQ(0u, mark);
  size_t released = 9;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_rewind_uncaptured(nullptr, 1, &released));
  EXPECT_EQ(0u, released);
  gmr_graph_arena_resource *a = Make(Config(MiB));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_checkpoint_uncaptured(a, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint_uncaptured(a, &mark));
  void *p = Alloc(r, 512);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_graph_arena_resource_rewind_uncaptured(a, 0, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_graph_arena_resource_rewind_uncaptured(a, mark + 1000, nullptr));
  EXPECT_EQ(1u, Stats(a).live_count) << "nothing changed";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 512, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_rewind_uncaptured(a, mark, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));

  // Forwarding arenas serve nothing outside sessions: there is no scope.
  gmr_graph_arena_resource_config fc = Config(MiB);
  fc.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  gmr_graph_arena_resource *f = Make(fc);
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_graph_arena_resource_checkpoint_uncaptured(f, &mark));
  EXPECT_EQ(0u, mark);
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_graph_arena_resource_rewind_uncaptured(f, 1, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(f)));
}

}  // namespace
