// tracking_adaptor: exact counters overall and per owner, scopes, every kind
// of bad free, books restored when the upstream refuses a free, leak reports,
// forced destroy, and threads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/host_resource.h"
#include "gmr/tracking_adaptor.h"
#include "tests/support/mock_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/support/user_resource.h"

namespace {

gmr_stream S(uintptr_t v) { return reinterpret_cast<gmr_stream>(v); }

class Tracking : public ::testing::Test {
 protected:
  void SetUp() override {
    mock_ = gmr_mock_resource_create(nullptr);
    ASSERT_NE(nullptr, mock_);
    up_ = gmr_mock_resource_as_resource(mock_);
  }
  void TearDown() override {
    if (trk_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r()));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_));
  }
  void Make(const gmr_tracking_adaptor_config *c = nullptr) {
    ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_create(up_, c, &trk_));
  }
  gmr_resource *r() { return gmr_tracking_adaptor_as_resource(trk_); }
  gmr_tracking_adaptor_stats Stats() {
    gmr_tracking_adaptor_stats s = GMR_TRACKING_ADAPTOR_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(trk_, &s));
    return s;
  }
  gmr_tracking_adaptor_owner_stats Owner(uint64_t key) {
    gmr_tracking_adaptor_owner_stats s = GMR_TRACKING_ADAPTOR_OWNER_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_tracking_adaptor_get_owner_stats(trk_, key, &s));
    return s;
  }

  gmr_mock_resource *mock_ = nullptr;
  gmr_resource *up_ = nullptr;
  gmr_tracking_adaptor *trk_ = nullptr;
};

TEST_F(Tracking, CountsExactBytesAndAllocations) {
  Make();
  EXPECT_STREQ("tracking_adaptor", gmr_resource_get_type_name(r()));
  EXPECT_EQ(trk_, gmr_tracking_adaptor_from_resource(r()));
  EXPECT_EQ(nullptr, gmr_tracking_adaptor_from_resource(up_));
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 100, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 200, 0, nullptr, &b));
  gmr_tracking_adaptor_stats s = Stats();
  EXPECT_EQ(300, s.bytes.current);
  EXPECT_EQ(300, s.bytes.peak);
  EXPECT_EQ(300, s.bytes.total);
  EXPECT_EQ(2, s.allocations.current);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 100, 0, nullptr));
  s = Stats();
  EXPECT_EQ(200, s.bytes.current);
  EXPECT_EQ(300, s.bytes.peak);
  EXPECT_EQ(300, s.bytes.total);
  EXPECT_EQ(1, s.allocations.current);
  EXPECT_EQ(2, s.allocations.peak);
  EXPECT_EQ(2, s.allocations.total);
  EXPECT_EQ(1u, s.deallocation_count);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 200, 0, nullptr));
  EXPECT_EQ(0, Stats().bytes.current);
}

// A remembered-frees count no ring could hold is refused at create (the
// spec fuzzer's recent_frees=8198552921648689606 once wrapped the ring's
// byte count to 0 and wrote past it at the first free); the most is taken.
TEST_F(Tracking, ARecentFreesCountNoRingCanHoldIsRefused) {
  gmr_tracking_adaptor_config c = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  for (size_t n : {static_cast<size_t>(8198552921648689606ull), SIZE_MAX,
                   (static_cast<size_t>(1) << 32) + 1}) {
    c.recent_free_count = n;
    gmr_tracking_adaptor *t = nullptr;
    EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_tracking_adaptor_create(up_, &c, &t)) << n;
    EXPECT_EQ(nullptr, t);
  }
  c.recent_free_count = 8;
  Make(&c);
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 100, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 100, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r(), a, 100, 0, nullptr));
}

TEST_F(Tracking, UpstreamFailureIsCountedAndRecordsNothing) {
  Make();
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *a = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(r(), 100, 0, nullptr, &a));
  gmr_tracking_adaptor_stats s = Stats();
  EXPECT_EQ(1u, s.upstream_failure_count);
  EXPECT_EQ(0, s.allocations.total);
  EXPECT_EQ(0, s.bytes.current);
}

TEST_F(Tracking, PerStreamOwnersGetTheirOwnCounters) {
  Make();
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1000, 0, S(1), &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 3000, 0, S(2), &b));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 500, 0, S(2), &c));
  EXPECT_EQ(1000, Owner(1).bytes.current);
  EXPECT_EQ(3500, Owner(2).bytes.current);
  EXPECT_EQ(2, Owner(2).allocations.current);
  EXPECT_EQ(2u, Stats().owner_count);
  uint64_t owners[4] = {0, 0, 0, 0};
  size_t n = 0;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_list_owners(trk_, owners, 4, &n));
  ASSERT_EQ(2u, n);
  EXPECT_EQ(3u, owners[0] + owners[1]);
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_list_owners(trk_, nullptr, 0, &n));
  EXPECT_EQ(2u, n);
  gmr_tracking_adaptor_owner_stats none = GMR_TRACKING_ADAPTOR_OWNER_STATS_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tracking_adaptor_get_owner_stats(trk_, 77, &none));
  EXPECT_EQ(77u, none.owner);
  EXPECT_EQ(0, none.bytes.current);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 3000, 0, S(2)));
  gmr_tracking_adaptor_owner_stats two = Owner(2);
  EXPECT_EQ(500, two.bytes.current);
  EXPECT_EQ(3500, two.bytes.peak);
  EXPECT_EQ(3500, two.bytes.total);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 1000, 0, S(1)));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), c, 500, 0, S(2)));
}

TEST_F(Tracking, PerThreadOwnersAreChargedBackWhoeverFrees) {
  gmr_tracking_adaptor_config c = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  c.per = GMR_TRACKING_PER_THREAD;
  Make(&c);
  void *p1 = nullptr, *p2 = nullptr;
  uint64_t id1 = 0, id2 = 0;
  std::thread t1([&] {
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r(), 111, 0, nullptr, &p1));
    id1 = Owner(GMR_TRACKING_OWNER_CALLING_THREAD).owner;
  });
  t1.join();
  std::thread t2([&] {
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r(), 222, 0, nullptr, &p2));
    gmr_tracking_adaptor_owner_stats mine = Owner(GMR_TRACKING_OWNER_CALLING_THREAD);
    id2 = mine.owner;
    EXPECT_EQ(222, mine.bytes.current);
    // Stable in a thread.
    EXPECT_EQ(id2, Owner(GMR_TRACKING_OWNER_CALLING_THREAD).owner);
  });
  t2.join();
  EXPECT_NE(id1, id2);
  EXPECT_NE(0u, id1);
  EXPECT_NE(GMR_TRACKING_OWNER_CALLING_THREAD, id1);
  // A thread that made no allocation: refused, and named.
  gmr_tracking_adaptor_owner_stats main_thread = GMR_TRACKING_ADAPTOR_OWNER_STATS_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tracking_adaptor_get_owner_stats(
                                          trk_, GMR_TRACKING_OWNER_CALLING_THREAD, &main_thread));
  EXPECT_NE(0u, main_thread.owner);
  EXPECT_NE(id1, main_thread.owner);
  EXPECT_NE(GMR_TRACKING_OWNER_CALLING_THREAD, main_thread.owner);
  EXPECT_EQ(111, Owner(id1).bytes.current);
  EXPECT_EQ(222, Owner(id2).bytes.current);
  // The main thread frees both; each owner's count goes back to zero.
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), p1, 111, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), p2, 222, 0, nullptr));
  EXPECT_EQ(0, Owner(id1).bytes.current);
  EXPECT_EQ(111, Owner(id1).bytes.peak);
  EXPECT_EQ(0, Owner(id2).allocations.current);
}

TEST_F(Tracking, EveryKindOfBadFreeIsRefusedCountedAndNotForwarded) {
  Make();
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 100, 0, S(1), &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 100, 512, S(1), &b));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r(), &local, 100, 0, S(1)));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r(), a, 99, 0, S(1)));  // size
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH,
            gmr_resource_deallocate(r(), b, 100, 0, S(1)));  // alignment 256 != 512
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r(), a, 100, 0, S(2)));  // stream
  EXPECT_EQ(0u, gmr_mock_resource_called_deallocate(mock_));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 100, 0, S(1)));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r(), a, 100, 0, S(1)));
  EXPECT_EQ(1u, gmr_mock_resource_called_deallocate(mock_));
  gmr_tracking_adaptor_stats s = Stats();
  EXPECT_EQ(1u, s.unknown_pointer_count);
  EXPECT_EQ(2u, s.size_mismatch_count);
  EXPECT_EQ(1u, s.stream_mismatch_count);
  EXPECT_EQ(1u, s.double_free_count);
  EXPECT_EQ(100, s.bytes.current);  // b is still live, untouched by the bad frees
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 100, 512, S(1)));
}

TEST_F(Tracking, StreamCheckCanBeTurnedOff) {
  gmr_tracking_adaptor_config c = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  c.check_stream = false;
  Make(&c);
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 100, 0, S(1), &a));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 100, 0, S(2)));
  EXPECT_EQ(0, Owner(1).bytes.current);  // charged back to the allocation's stream
}

TEST_F(Tracking, OldDoubleFreesAgeOutToUnknownPointer) {
  gmr_tracking_adaptor_config c = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  c.recent_free_count = 16;  // one per shard
  Make(&c);
  std::vector<void *> ps(1000);
  for (auto &p : ps) ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 256, 0, nullptr, &p));
  for (auto p : ps) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), p, 256, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r(), ps[0], 256, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r(), ps.back(), 256, 0, nullptr));
}

TEST(TrackingArena, AReusedAddressIsLiveAgainNotAFreedOne) {
  // The user arena starts over when its last allocation is freed, so the
  // next allocation gets the same address.
  alignas(256) static unsigned char buffer[4096];
  user_arena *arena = user_arena_create(buffer, sizeof buffer);
  ASSERT_NE(nullptr, arena);
  gmr_tracking_adaptor *trk = nullptr;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_create(user_arena_resource(arena), nullptr, &trk));
  gmr_resource *r = gmr_tracking_adaptor_as_resource(trk);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 64, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 64, 0, nullptr, &q));
  ASSERT_EQ(p, q);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 64, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, q, 64, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(user_arena_resource(arena)));
}

class TrackingSim : public gmr_test::SimTest {};

TEST_F(TrackingSim, FreeRefusedUpstreamLeavesTheAllocationLiveInTheBooks) {
  gmr_cuda_resource_config cc = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  cc.kind = GMR_CUDA_KIND_ASYNC;
  gmr_cuda_resource *cuda = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&cc, &cuda));
  gmr_tracking_adaptor *trk = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_tracking_adaptor_create(gmr_cuda_resource_as_resource(cuda), nullptr, &trk));
  gmr_resource *r = gmr_tracking_adaptor_as_resource(trk);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4096, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_FREE_ASYNC, 0, 1, 700));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_deallocate(r, p, 4096, 0, nullptr));
  gmr_tracking_adaptor_stats s = GMR_TRACKING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(trk, &s));
  EXPECT_EQ(4096, s.bytes.current);
  EXPECT_EQ(1, s.allocations.current);
  EXPECT_EQ(0u, s.deallocation_count);
  // Not a double free: the allocation is live again, and the free works now.
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4096, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(trk, &s));
  EXPECT_EQ(0, s.bytes.current);
  EXPECT_EQ(0u, s.double_free_count);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cuda_resource_as_resource(cuda)));
}

// Issue 13 §5: a scope counts what happens inside it, from zero, as RMM's
// statistics_resource_adaptor push_counters/pop_counters do (a free of memory
// allocated before the scope makes its current negative), and a closed
// scope's counts are added to the enclosing one's.
TEST_F(Tracking, ScopesCountWhatHappensInsideThemAsRmmDoes) {
  Make();
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 5000, 0, nullptr, &a));  // before any scope
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_push_scope(trk_));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 100, 0, nullptr, &b));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 5000, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_push_scope(trk_));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 300, 0, nullptr, &c));
  gmr_tracking_adaptor_stats inner = GMR_TRACKING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_pop_scope(trk_, &inner));
  EXPECT_EQ(300, inner.bytes.current);
  EXPECT_EQ(300, inner.bytes.peak);
  EXPECT_EQ(300, inner.bytes.total);
  EXPECT_EQ(1, inner.allocations.current);
  EXPECT_EQ(1, inner.allocations.peak);
  EXPECT_EQ(1, inner.allocations.total);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), c, 300, 0, nullptr));
  gmr_tracking_adaptor_stats outer = GMR_TRACKING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_pop_scope(trk_, &outer));
  EXPECT_EQ(-4900, outer.bytes.current);  // +100 +300 -5000 -300
  EXPECT_EQ(100, outer.bytes.peak);       // the inner peak came at -4900 + 300
  EXPECT_EQ(400, outer.bytes.total);
  EXPECT_EQ(0, outer.allocations.current);
  EXPECT_EQ(1, outer.allocations.peak);
  EXPECT_EQ(2, outer.allocations.total);
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_tracking_adaptor_pop_scope(trk_, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 100, 0, nullptr));
  // Overall counters are unaffected by scopes.
  gmr_tracking_adaptor_stats all = Stats();
  EXPECT_EQ(5400, all.bytes.total);
  EXPECT_EQ(5100, all.bytes.peak);
  EXPECT_EQ(0, all.bytes.current);
}

TEST_F(Tracking, AnInnerPeakAboveTheOuterOneRaisesIt) {
  Make();
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_push_scope(trk_));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1000, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_push_scope(trk_));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 2000, 0, nullptr, &b));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 2000, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 500, 0, nullptr, &c));
  gmr_tracking_adaptor_stats inner = GMR_TRACKING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_pop_scope(trk_, &inner));
  EXPECT_EQ(500, inner.bytes.current);
  EXPECT_EQ(2000, inner.bytes.peak);
  EXPECT_EQ(2500, inner.bytes.total);
  gmr_tracking_adaptor_stats outer = GMR_TRACKING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_pop_scope(trk_, &outer));
  EXPECT_EQ(1500, outer.bytes.current);
  EXPECT_EQ(3000, outer.bytes.peak);  // 1000 + the inner scope's 2000
  EXPECT_EQ(3500, outer.bytes.total);
  EXPECT_EQ(2, outer.allocations.peak);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 1000, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), c, 500, 0, nullptr));
}

TEST_F(Tracking, ScopesNestToALimit) {
  Make();
  for (int i = 0; i < GMR_TRACKING_MAX_SCOPE_DEPTH; ++i) {
    ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_push_scope(trk_));
  }
  EXPECT_EQ(GMR_ERR_BUSY, gmr_tracking_adaptor_push_scope(trk_));
  for (int i = 0; i < GMR_TRACKING_MAX_SCOPE_DEPTH; ++i) {
    ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_pop_scope(trk_, nullptr));
  }
}

std::string ReadAll(FILE *f) {
  std::string s;
  rewind(f);
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

std::string Hex(const void *p) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%llx",
           static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
  return buf;
}

// Allocations are numbered per owner (a counter of their own, so threads on
// streams of their own share no cache line), and listed owner by owner.
TEST_F(Tracking, LeakReportListsLiveAllocationsOwnerByOwnerOldestFirst) {
  Make();
  void *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 512, 0, S(0x10), &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 64, 0, nullptr, &b));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1024, 1024, S(0x20), &c));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 32, 0, S(0x10), &d));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 64, 0, nullptr));
  FILE *f = tmpfile();
  ASSERT_NE(nullptr, f);
  size_t n = 0;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_report_leaks(trk_, f, &n));
  EXPECT_EQ(3u, n);
  std::string expected = "gmr tracking_adaptor: 3 live allocations, 1568 bytes\n"
                         "  #1 ptr=" + Hex(a) + " bytes=512 alignment=256 stream=0x10 owner=0x10\n"
                         "  #2 ptr=" + Hex(d) + " bytes=32 alignment=256 stream=0x10 owner=0x10\n"
                         "  #1 ptr=" + Hex(c) + " bytes=1024 alignment=1024 stream=0x20 owner=0x20\n";
  EXPECT_EQ(expected, ReadAll(f));
  fclose(f);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tracking_adaptor_report_leaks(trk_, nullptr, &n));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 512, 0, S(0x10)));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), d, 32, 0, S(0x10)));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), c, 1024, 1024, S(0x20)));
}

TEST_F(Tracking, DestroyIsBusyWithLiveAllocationsUnlessForced) {
  Make();
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 100, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 200, 0, S(4), &b));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r()));
  FILE *f = tmpfile();
  ASSERT_NE(nullptr, f);
  EXPECT_EQ(GMR_OK, gmr_tracking_adaptor_destroy_force(trk_, f));
  trk_ = nullptr;
  EXPECT_EQ(0u, gmr_mock_resource_live_bytes(mock_));  // given back upstream
  EXPECT_EQ(2u, gmr_mock_resource_called_deallocate(mock_));
  EXPECT_NE(std::string::npos, ReadAll(f).find("2 live allocations, 300 bytes"));
  fclose(f);
}

TEST_F(Tracking, StatsArgumentsAreChecked) {
  Make();
  gmr_tracking_adaptor_stats s = GMR_TRACKING_ADAPTOR_STATS_INIT;
  s.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tracking_adaptor_get_stats(trk_, &s));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tracking_adaptor_get_stats(nullptr, &s));
  // An older, shorter struct gets only what it has room for.
  struct Old {
    size_t size;
    uint32_t version;
    gmr_stat_count bytes;
  };
  struct {
    Old old;
    int64_t canary;
  } out;
  out.old.size = sizeof(Old);
  out.old.version = 1;
  out.canary = 42;
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 10, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(
                        trk_, reinterpret_cast<gmr_tracking_adaptor_stats *>(&out)));
  EXPECT_EQ(10, out.old.bytes.current);
  EXPECT_EQ(42, out.canary);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 10, 0, nullptr));
  gmr_tracking_adaptor *t = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tracking_adaptor_create(nullptr, nullptr, &t));
  gmr_tracking_adaptor_config bad = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  bad.per = static_cast<gmr_tracking_scope>(7);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tracking_adaptor_create(up_, &bad, &t));
  EXPECT_EQ(nullptr, t);
}

TEST(TrackingThreads, CountersStayExactUnderConcurrentUse) {
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_tracking_adaptor_config c = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  c.per = GMR_TRACKING_PER_THREAD;
  gmr_tracking_adaptor *trk = nullptr;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_create(gmr_host_resource_as_resource(host), &c, &trk));
  gmr_resource *r = gmr_tracking_adaptor_as_resource(trk);
  const int kThreads = 8, kOps = 4000;
  std::vector<int64_t> bytes_by_thread(kThreads), count_by_thread(kThreads);
  std::vector<uint64_t> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      std::vector<std::pair<void *, size_t>> mine;
      for (int i = 0; i < kOps; ++i) {
        if (mine.size() < 20 && rng() % 2 == 0) {
          size_t n = 1 + rng() % 5000;
          void *p = nullptr;
          ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, n, 0, nullptr, &p));
          mine.emplace_back(p, n);
          bytes_by_thread[t] += static_cast<int64_t>(n);
          count_by_thread[t]++;
        } else if (!mine.empty()) {
          auto b = mine.front();
          mine.erase(mine.begin());
          ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b.first, b.second, 0, nullptr));
        }
      }
      for (auto &b : mine)
        ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b.first, b.second, 0, nullptr));
      // The thread's own counters name its id.
      gmr_tracking_adaptor_owner_stats self = GMR_TRACKING_ADAPTOR_OWNER_STATS_INIT;
      ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_owner_stats(trk, GMR_TRACKING_OWNER_CALLING_THREAD,
                                                             &self));
      ids[t] = self.owner;
    });
  }
  for (auto &th : threads) th.join();
  gmr_tracking_adaptor_stats s = GMR_TRACKING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(trk, &s));
  int64_t all_bytes = 0, all_count = 0;
  for (int t = 0; t < kThreads; ++t) {
    all_bytes += bytes_by_thread[t];
    all_count += count_by_thread[t];
    gmr_tracking_adaptor_owner_stats o = GMR_TRACKING_ADAPTOR_OWNER_STATS_INIT;
    ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_owner_stats(trk, ids[t], &o));
    EXPECT_EQ(bytes_by_thread[t], o.bytes.total);
    EXPECT_EQ(count_by_thread[t], o.allocations.total);
    EXPECT_EQ(0, o.bytes.current);
  }
  EXPECT_EQ(all_bytes, s.bytes.total);
  EXPECT_EQ(all_count, s.allocations.total);
  EXPECT_EQ(static_cast<uint64_t>(all_count), s.deallocation_count);
  EXPECT_EQ(0, s.bytes.current);
  EXPECT_EQ(0, s.allocations.current);
  EXPECT_LE(s.allocations.peak, 8 * 20);
  EXPECT_EQ(static_cast<uint64_t>(kThreads), s.owner_count);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_host_resource_as_resource(host)));
}

}  // namespace
