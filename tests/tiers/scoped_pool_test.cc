// Scoped per-thread pools (AdaptiveArrayPools' model on gmr's graph arena),
// on the simulation: one pool per thread and device made lazily, the same
// addresses every iteration, nested scopes, orphan cleanup, lazy checkpoints
// of pools made inside a scope, reset vs empty, device mismatch with two
// simulated devices, misuse from other threads, many threads each with its
// own pool, pools retired at thread exit, and destroy refused while scopes
// are open or blocks live.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "gmr/scoped/scoped_pool.h"
#include "gmr/sim/streams.h"
#include "tests/support/sim_fixture.h"
#include "tests/support/stream_recorder.h"

namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = size_t{1} << 20;

class Scoped : public gmr_test::SimTest {
 protected:
  Scoped() { sim_config_.device_count = 2; }
  void SetUp() override {
    SimTest::SetUp();
    for (int d = 0; d < 2; ++d) {
      gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
      c.device = d;
      ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &cuda_[d]));
      up_[d] = gmr_cuda_resource_as_resource(cuda_[d]);
    }
    gmr_scope_registry_config rc = GMR_SCOPE_REGISTRY_CONFIG_DEFAULT;
    rc.chunk_bytes = 1 * MiB;
    ASSERT_EQ(GMR_OK, gmr_scope_registry_create(up_, 2, &rc, &reg_));
  }
  void TearDown() override {
    if (reg_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_scope_registry_destroy(reg_));
    }
    for (gmr_resource *u : up_) EXPECT_EQ(GMR_OK, gmr_resource_destroy(u));
    for (gmr_stream s : streams_) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    SimTest::TearDown();
  }
  gmr_scoped_pool *Pool() {
    gmr_scoped_pool *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_scope_registry_get_pool(reg_, &p));
    return p;
  }
  gmr_scope Enter() {
    gmr_scope s{};
    EXPECT_EQ(GMR_OK, gmr_scope_enter(reg_, &s));
    return s;
  }
  size_t Exit(gmr_scope s) {
    size_t released = 0;
    EXPECT_EQ(GMR_OK, gmr_scope_exit(reg_, s, &released));
    return released;
  }
  void *Alloc(gmr_scoped_pool *p, size_t bytes, gmr_stream stream = nullptr) {
    void *ptr = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK,
              gmr_resource_allocate_ex(gmr_scoped_pool_as_resource(p), bytes, 0, stream, &ptr, &f))
        << f.message;
    return ptr;
  }
  gmr_stream NewStream() {
    gmr_stream s = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
    streams_.push_back(s);
    return s;
  }
  gmr_scoped_pool_stats PoolStats(gmr_scoped_pool *p) {
    gmr_scoped_pool_stats s = GMR_SCOPED_POOL_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_scoped_pool_get_stats(p, &s));
    return s;
  }
  gmr_scope_registry_stats RegStats() {
    gmr_scope_registry_stats s = GMR_SCOPE_REGISTRY_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_scope_registry_get_stats(reg_, &s));
    return s;
  }

  gmr_cuda_resource *cuda_[2] = {};
  gmr_resource *up_[2] = {};
  gmr_scope_registry *reg_ = nullptr;
  std::vector<gmr_stream> streams_;
};

TEST_F(Scoped, OnePoolPerThreadAndDeviceMadeOnFirstUse) {
  EXPECT_EQ(0u, RegStats().pool_count);
  gmr_scoped_pool *a = Pool();
  EXPECT_EQ(a, Pool());  // the same pool again
  EXPECT_EQ(0, gmr_scoped_pool_get_device(a));
  EXPECT_STREQ("scoped_pool", gmr_resource_get_type_name(gmr_scoped_pool_as_resource(a)));
  EXPECT_EQ(up_[0], gmr_resource_get_upstream(gmr_scoped_pool_as_resource(a)));
  gmr_scoped_pool *other = nullptr;
  std::thread t([&] { ASSERT_EQ(GMR_OK, gmr_scope_registry_get_pool(reg_, &other)); });
  t.join();
  EXPECT_NE(a, other);
  gmr_scope_registry_stats s = RegStats();
  EXPECT_EQ(2u, s.pools_created);
  EXPECT_EQ(1u, s.pools_retired);  // the thread's pool went with its thread
  EXPECT_EQ(1u, s.pool_count);
  EXPECT_EQ(1u, s.thread_count);
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_destroy(gmr_scoped_pool_as_resource(a)));  // the registry's
}

TEST_F(Scoped, TheSameRequestsGetTheSameAddressesEveryIteration) {
  gmr_scoped_pool *p = Pool();
  std::vector<void *> first;
  for (int iteration = 0; iteration < 3; ++iteration) {
    gmr_scope s = Enter();
    std::vector<void *> got;
    for (size_t bytes : {1000u, 4096u, 300u, 65536u}) got.push_back(Alloc(p, bytes));
    if (iteration == 0) {
      first = got;
      std::set<void *> distinct(got.begin(), got.end());
      EXPECT_EQ(got.size(), distinct.size());
    } else {
      EXPECT_EQ(first, got) << "iteration " << iteration;
    }
    EXPECT_EQ(4u, Exit(s));
  }
  gmr_scoped_pool_stats st = PoolStats(p);
  EXPECT_EQ(0u, st.live_count);
  EXPECT_EQ(3u, st.rewind_count);
  EXPECT_EQ(12u, st.released_count);
  EXPECT_EQ(1u, st.peak_held_bytes / MiB);  // one chunk served every iteration
  EXPECT_EQ(0u, gmr_scope_get_depth(reg_));
}

TEST_F(Scoped, NestedScopesGiveBackOnlyTheirOwnBlocks) {
  gmr_scoped_pool *p = Pool();
  gmr_scope outer = Enter();
  void *a = Alloc(p, 1 * KiB);
  gmr_scope inner = Enter();
  EXPECT_EQ(2u, gmr_scope_get_depth(reg_));
  void *b = Alloc(p, 1 * KiB);
  void *c = Alloc(p, 1 * KiB);
  EXPECT_EQ(2u, Exit(inner));
  EXPECT_EQ(1u, PoolStats(p).live_count);  // a is still there
  void *b2 = Alloc(p, 1 * KiB);
  EXPECT_EQ(b, b2);  // inner space reused
  (void)c;
  EXPECT_EQ(2u, Exit(outer));
  EXPECT_EQ(0u, PoolStats(p).live_count);
  (void)a;
  // Blocks allocated outside any scope are not touched by scopes.
  void *kept = Alloc(p, 1 * KiB);
  gmr_scope s = Enter();
  Alloc(p, 1 * KiB);
  EXPECT_EQ(1u, Exit(s));
  EXPECT_EQ(1u, PoolStats(p).live_count);
  ASSERT_EQ(GMR_OK,
            gmr_resource_deallocate(gmr_scoped_pool_as_resource(p), kept, 1 * KiB, 0, nullptr));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_scoped_pool_reset(p, &released));
  EXPECT_EQ(0u, released);  // freed already
}

TEST_F(Scoped, ExitingAnOuterScopeCleansUpOrphanedInnerOnes) {
  gmr_scoped_pool *p = Pool();
  gmr_scope a = Enter();
  void *first = Alloc(p, 2 * KiB);
  gmr_scope b = Enter();
  Alloc(p, 2 * KiB);
  gmr_scope c = Enter();
  Alloc(p, 2 * KiB);
  EXPECT_EQ(3u, PoolStats(p).mark_count);
  // b and c were never exited (an early return): exiting a closes them.
  EXPECT_EQ(3u, Exit(a));
  EXPECT_EQ(0u, gmr_scope_get_depth(reg_));
  gmr_scoped_pool_stats st = PoolStats(p);
  EXPECT_EQ(0u, st.mark_count);
  EXPECT_EQ(2u, st.orphan_mark_count);
  EXPECT_EQ(2u, RegStats().orphan_scope_count);
  // Their tokens are stale now.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_exit(reg_, b, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_exit(reg_, c, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_exit(reg_, a, nullptr));  // exited already
  // A new scope at the same depth has a new serial: the old token stays stale.
  gmr_scope again = Enter();
  EXPECT_EQ(a.depth, again.depth);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_exit(reg_, a, nullptr));
  EXPECT_EQ(first, Alloc(p, 2 * KiB));
  EXPECT_EQ(1u, Exit(again));
}

TEST_F(Scoped, APoolFirstUsedDeepInsideScopesRewindsToItsStateAtEachEntry) {
  gmr_scope outer = Enter();
  gmr_scope middle = Enter();
  gmr_scoped_pool *p = Pool();  // made at depth 2
  Alloc(p, 1 * KiB);
  gmr_scope inner = Enter();
  Alloc(p, 1 * KiB);
  // Orphan inner (skip its exit), exit middle: both blocks go back.
  (void)inner;
  EXPECT_EQ(2u, Exit(middle));
  Alloc(p, 1 * KiB);  // allocated at depth 1: lazily marked at depth 1
  EXPECT_EQ(1u, Exit(outer));
  EXPECT_EQ(0u, PoolStats(p).live_count);
}

// A thread may use its pool on several streams: an exit gives back the
// blocks of all of them (the thread synchronised them first), and the same
// requests get the same addresses whatever stream asks next time.
TEST_F(Scoped, AnExitGivesBackTheBlocksOfEveryStreamOfTheThread) {
  gmr_scoped_pool *p = Pool();
  gmr_stream s1 = NewStream(), s2 = NewStream();
  std::vector<void *> first;
  for (int iteration = 0; iteration < 2; ++iteration) {
    gmr_scope s = Enter();
    gmr_stream a = iteration == 0 ? s1 : s2, b = iteration == 0 ? s2 : s1;
    std::vector<void *> got = {Alloc(p, 1000, a), Alloc(p, 5000, b), Alloc(p, 300, nullptr)};
    // A block freed on another stream than its own: accepted.
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(gmr_scoped_pool_as_resource(p), got[2], 300, 0, a));
    EXPECT_EQ(2u, Exit(s)) << "both streams' live blocks";
    if (iteration == 0) {
      first = got;
    } else {
      EXPECT_EQ(first, got);
    }
  }
  EXPECT_EQ(0u, PoolStats(p).live_count);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE,
            gmr_resource_deallocate(gmr_scoped_pool_as_resource(p), first[0], 1000, 0, s2));
}

// A chunk a pool takes for a request is taken on that request's stream, so a
// stream-ordered upstream (cuda(kind=async), a pool) orders it there.
TEST_F(Scoped, APoolTakesItsChunksOnTheRequestingStream) {
  gmr_stream_recorder *rec = gmr_stream_recorder_create(up_[0]);
  ASSERT_NE(nullptr, rec);
  gmr_resource *ups[1] = {gmr_stream_recorder_as_resource(rec)};
  gmr_scope_registry_config c = GMR_SCOPE_REGISTRY_CONFIG_DEFAULT;
  c.chunk_bytes = 1 * MiB;
  gmr_scope_registry *r = nullptr;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_create(ups, 1, &c, &r));
  gmr_scoped_pool *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_get_pool(r, &p));
  gmr_stream s1 = NewStream(), s2 = NewStream();
  gmr_scope s{};
  ASSERT_EQ(GMR_OK, gmr_scope_enter(r, &s));
  Alloc(p, 512 * KiB, s1);  // the first chunk, on s1
  Alloc(p, 256 * KiB, s2);  // fits the first chunk: no upstream call
  Alloc(p, 768 * KiB, s2);  // a second chunk, on s2
  ASSERT_EQ(2u, gmr_stream_recorder_count(rec, GMR_STREAM_RECORDER_ALLOCATE));
  EXPECT_EQ(s1, gmr_stream_recorder_stream(rec, GMR_STREAM_RECORDER_ALLOCATE, 0));
  EXPECT_EQ(s2, gmr_stream_recorder_stream(rec, GMR_STREAM_RECORDER_ALLOCATE, 1));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_scope_exit(r, s, &released));
  EXPECT_EQ(3u, released);
  EXPECT_EQ(0u, gmr_stream_recorder_count(rec, GMR_STREAM_RECORDER_DEALLOCATE))
      << "a scope exit keeps the memory";
  size_t bytes = 0;
  ASSERT_EQ(GMR_OK, gmr_scoped_pool_empty(p, &bytes));
  EXPECT_EQ(2 * MiB, bytes);
  EXPECT_EQ(2u, gmr_stream_recorder_count(rec, GMR_STREAM_RECORDER_DEALLOCATE));
  EXPECT_EQ(GMR_OK, gmr_scope_registry_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_stream_recorder_as_resource(rec)));
}

TEST_F(Scoped, AScopeThatNeverTouchesAPoolLeavesItAlone) {
  gmr_scoped_pool *p = Pool();
  void *kept = Alloc(p, 1 * KiB);
  gmr_scope s = Enter();
  EXPECT_EQ(0u, Exit(s));
  EXPECT_EQ(0u, PoolStats(p).rewind_count);
  EXPECT_EQ(1u, PoolStats(p).live_count);
  ASSERT_EQ(GMR_OK,
            gmr_resource_deallocate(gmr_scoped_pool_as_resource(p), kept, 1 * KiB, 0, nullptr));
}

TEST_F(Scoped, ResetKeepsTheMemoryEmptyGivesItBack) {
  gmr_scoped_pool *p = Pool();
  for (int i = 0; i < 3; ++i) Alloc(p, 512 * KiB);  // two chunks
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  size_t device_before = u.used_bytes;
  EXPECT_GE(device_before, 2 * MiB);
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_scoped_pool_reset(p, &released));
  EXPECT_EQ(3u, released);
  gmr_scoped_pool_stats st = PoolStats(p);
  EXPECT_EQ(0u, st.live_count);
  EXPECT_EQ(2 * MiB, st.held_bytes);  // kept
  EXPECT_EQ(1u, st.reset_count);
  size_t bytes = 0;
  ASSERT_EQ(GMR_OK, gmr_scoped_pool_empty(p, &bytes));
  EXPECT_EQ(2 * MiB, bytes);
  EXPECT_EQ(0u, PoolStats(p).held_bytes);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(device_before - 2 * MiB, u.used_bytes);  // back to the device
  EXPECT_EQ(1u, PoolStats(p).empty_count);
  // Reset inside a scope: the scope's exit then has nothing to rewind here.
  gmr_scope s = Enter();
  Alloc(p, 1 * KiB);
  ASSERT_EQ(GMR_OK, gmr_scoped_pool_reset(p, &released));
  EXPECT_EQ(0u, PoolStats(p).mark_count);
  EXPECT_EQ(0u, Exit(s));
}

TEST_F(Scoped, APoolRefusesUseFromAnotherDevice) {
  gmr_scoped_pool *p0 = Pool();
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  void *ptr = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_WRONG_DEVICE, gmr_resource_allocate_ex(gmr_scoped_pool_as_resource(p0), 1 * KiB,
                                                           0, nullptr, &ptr, &f));
  EXPECT_EQ(nullptr, ptr);
  EXPECT_NE(nullptr, std::strstr(f.message, "pool of device 0")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "device 1 is current")) << f.message;
  EXPECT_EQ(1u, PoolStats(p0).wrong_device_count);
  EXPECT_EQ(0u, PoolStats(p0).held_bytes);  // nothing changed
  gmr_scoped_pool *p1 = Pool();  // the current device's own pool
  EXPECT_NE(p0, p1);
  EXPECT_EQ(1, gmr_scoped_pool_get_device(p1));
  void *q = Alloc(p1, 1 * KiB);
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(1, &u));
  EXPECT_GT(u.used_bytes, 0u);  // from device 1's upstream
  ASSERT_EQ(GMR_OK,
            gmr_resource_deallocate(gmr_scoped_pool_as_resource(p1), q, 1 * KiB, 0, nullptr));
  gmr_scoped_pool *by_device = nullptr;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_get_pool_for_device(reg_, 0, &by_device));
  EXPECT_EQ(p0, by_device);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_registry_get_pool_for_device(reg_, 2, &by_device));
  EXPECT_EQ(nullptr, by_device);
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
}

TEST_F(Scoped, AnotherThreadMayFreeButNotAllocateOrReset) {
  gmr_scoped_pool *p = Pool();
  void *mine = Alloc(p, 1 * KiB);
  std::thread t([&] {
    void *ptr = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
              gmr_resource_allocate_ex(gmr_scoped_pool_as_resource(p), 64, 0, nullptr, &ptr, &f));
    EXPECT_NE(nullptr, std::strstr(f.message, "another thread")) << f.message;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scoped_pool_reset(p, nullptr));
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scoped_pool_empty(p, nullptr));
    // A scope of this thread is not the owner's either.
    gmr_scope s{};
    ASSERT_EQ(GMR_OK, gmr_scope_enter(reg_, &s));
    EXPECT_EQ(GMR_OK, gmr_scope_exit(reg_, s, nullptr));
    EXPECT_EQ(GMR_OK,
              gmr_resource_deallocate(gmr_scoped_pool_as_resource(p), mine, 1 * KiB, 0, nullptr));
  });
  t.join();
  EXPECT_EQ(0u, PoolStats(p).live_count);
  gmr_scope owner = Enter();
  std::thread u([&] { EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_exit(reg_, owner, nullptr)); });
  u.join();
  Exit(owner);
}

TEST_F(Scoped, DestroyRefusesWhileScopesAreOpenOrBlocksLive) {
  gmr_scoped_pool *p = Pool();
  gmr_scope s = Enter();
  EXPECT_EQ(GMR_ERR_BUSY, gmr_scope_registry_destroy(reg_));
  Exit(s);
  void *kept = Alloc(p, 1 * KiB);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_scope_registry_destroy(reg_));
  ASSERT_EQ(GMR_OK,
            gmr_resource_deallocate(gmr_scoped_pool_as_resource(p), kept, 1 * KiB, 0, nullptr));
  // Destroy gives the pools' memory back to the upstreams (the fixture checks
  // the simulation for leaks after destroying the upstreams).
}

TEST_F(Scoped, BadInput) {
  gmr_scope_registry *r = nullptr;
  gmr_scope_registry_config c = GMR_SCOPE_REGISTRY_CONFIG_DEFAULT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_registry_create(nullptr, 1, &c, &r));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_registry_create(up_, 0, &c, &r));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_registry_create(up_, 65, &c, &r));
  c.alignment = 128;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_registry_create(up_, 2, &c, &r));
  c = GMR_SCOPE_REGISTRY_CONFIG_DEFAULT;
  c.chunk_bytes = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_registry_create(up_, 2, &c, &r));
  EXPECT_EQ(nullptr, r);
  gmr_resource *one[1] = {nullptr};  // no upstream for device 0
  ASSERT_EQ(GMR_OK, gmr_scope_registry_create(one, 1, nullptr, &r));
  gmr_scoped_pool *p = nullptr;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_scope_registry_get_pool(r, &p));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_scope_registry_get_pool(r, &p));  // device 1 not served
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
  EXPECT_EQ(GMR_OK, gmr_scope_registry_destroy(r));
  gmr_scope s{0, 0};
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_exit(reg_, s, nullptr));  // never opened
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_exit(nullptr, s, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_enter(reg_, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scope_registry_get_pool(reg_, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_scoped_pool_reset(nullptr, nullptr));
  EXPECT_EQ(-1, gmr_scoped_pool_get_device(nullptr));
  EXPECT_EQ(nullptr, gmr_scoped_pool_as_resource(nullptr));
  EXPECT_EQ(0u, gmr_scope_get_depth(nullptr));
  EXPECT_EQ(GMR_OK, gmr_scope_registry_destroy(nullptr));
  // A pool that would pass its maximum: refused, nothing held (see below).
  gmr_scope_registry_config small = GMR_SCOPE_REGISTRY_CONFIG_DEFAULT;
  small.chunk_bytes = 64 * KiB;
  small.max_capacity_bytes = 64 * KiB;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_create(up_, 2, &small, &r));
  ASSERT_EQ(GMR_OK, gmr_scope_registry_get_pool(r, &p));
  void *ptr = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_allocate(gmr_scoped_pool_as_resource(p), 128 * KiB, 0, nullptr, &ptr));
  EXPECT_EQ(GMR_OK, gmr_scope_registry_destroy(r));
}

// Past its capacity the refusal is the scoped pool's, naming the option that
// sets it, not the graph arena's it is built on; an upstream's failure stays
// the upstream's.
TEST_F(Scoped, OverItsCapacityTheFailureNamesThePoolAndItsOption) {
  gmr_scope_registry *r = nullptr;
  gmr_scope_registry_config small = GMR_SCOPE_REGISTRY_CONFIG_DEFAULT;
  small.chunk_bytes = 64 * KiB;
  small.max_capacity_bytes = 96 * KiB;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_create(up_, 2, &small, &r));
  gmr_scoped_pool *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_get_pool(r, &p));
  gmr_resource *pool = gmr_scoped_pool_as_resource(p);
  void *a = nullptr, *ptr = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(pool, 48 * KiB, 0, nullptr, &a));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(pool, 64 * KiB, 0, nullptr, &ptr, &f));
  EXPECT_EQ(nullptr, ptr);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, f.status);
  EXPECT_EQ(pool, f.where);
  EXPECT_EQ(64 * KiB, f.bytes);
  EXPECT_NE(nullptr, std::strstr(f.message, "scoped_pool (device 0): 65536 bytes do not fit"))
      << f.message;
  EXPECT_NE(nullptr,
            std::strstr(f.message, "gmr_scope_registry_config.max_capacity_bytes = 98304"))
      << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "holds 65536")) << f.message;
  EXPECT_EQ(nullptr, std::strstr(f.message, "graph_arena")) << f.message;
  EXPECT_EQ(65536u, PoolStats(p).held_bytes);  // nothing more taken
  // Larger than the capacity itself: the same words.
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(pool, 1 * MiB, 0, nullptr, &ptr, &f));
  EXPECT_EQ(pool, f.where);
  EXPECT_NE(nullptr, std::strstr(f.message, "max_capacity_bytes")) << f.message;
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(pool, a, 48 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_scope_registry_destroy(r));
  // Without a capacity, the device's refusal is recorded as the upstream's.
  ASSERT_EQ(GMR_OK, gmr_scope_registry_create(up_, 2, nullptr, &r));
  ASSERT_EQ(GMR_OK, gmr_scope_registry_get_pool(r, &p));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_allocate_ex(gmr_scoped_pool_as_resource(p), size_t{100} << 30, 0, nullptr,
                                     &ptr, &f));
  EXPECT_EQ(up_[0], f.where);
  EXPECT_EQ(GMR_OK, gmr_scope_registry_destroy(r));
}

TEST_F(Scoped, ARegistryFromASpecBuildsOneStackPerDevice) {
  gmr_scope_registry *r = nullptr;
  gmr_spec_error e;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_create_from_spec("pool > cuda(kind=async)", nullptr, &r, &e))
      << e.message;
  gmr_scope_registry_stats st = GMR_SCOPE_REGISTRY_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_get_stats(r, &st));
  EXPECT_EQ(2u, st.device_count);
  gmr_scoped_pool *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_scope_registry_get_pool_for_device(r, 1, &p));
  EXPECT_STREQ("pool_resource", gmr_resource_get_type_name(
                                    gmr_resource_get_upstream(gmr_scoped_pool_as_resource(p))));
  EXPECT_EQ(GMR_OK, gmr_scope_registry_destroy(r));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_scope_registry_create_from_spec("pool > cuda(kind=wrong)", nullptr, &r, &e));
  EXPECT_EQ(nullptr, r);
  EXPECT_NE(nullptr, std::strstr(e.message, "wrong")) << e.message;
}

// Other threads may still be running, or be in their exit destructors giving
// their pools back, while one thread destroys the registry: nothing orders a
// thread's destructors before a language runtime's join (Python's returns
// first). Half the threads exit as the destroy starts (racing it), half only
// after it returned (their states were detached; their destructors free
// them and the registry's last memory). Each pool is given back exactly once
// and by the destroy at the latest; nothing leaks (the fixture checks the
// simulation, ASan the host memory, TSan the races).
TEST_F(Scoped, DestroyWhileThreadsExitOrStillRun) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 10; ++round) {
    gmr_scope_registry *r = nullptr;
    gmr_scope_registry_config c = GMR_SCOPE_REGISTRY_CONFIG_DEFAULT;
    c.chunk_bytes = 64 * KiB;
    ASSERT_EQ(GMR_OK, gmr_scope_registry_create(up_, 2, &c, &r));
    std::atomic<int> ready{0}, failures{0};
    std::atomic<bool> go{false}, destroyed{false};
    std::vector<std::thread> ts;
    for (int i = 0; i < kThreads; ++i) {
      ts.emplace_back([&, i] {
        gmr_scoped_pool *p = nullptr;
        gmr_scope s{};
        void *ptr = nullptr;
        if (gmr_scope_registry_get_pool(r, &p) != GMR_OK || gmr_scope_enter(r, &s) != GMR_OK ||
            gmr_resource_allocate(gmr_scoped_pool_as_resource(p), 4 * KiB, 0, nullptr, &ptr) !=
                GMR_OK ||
            gmr_scope_exit(r, s, nullptr) != GMR_OK) {
          failures++;
        }
        ready++;
        std::atomic<bool> &leave = i % 2 == 0 ? go : destroyed;
        while (!leave.load()) std::this_thread::yield();
        // Exit: the destructor gives the pool back, or frees a detached state.
      });
    }
    while (ready.load() < kThreads) std::this_thread::yield();
    // The main thread has a pool too (its destructor never runs before exit).
    gmr_scoped_pool *mine = nullptr;
    ASSERT_EQ(GMR_OK, gmr_scope_registry_get_pool(r, &mine));
    ASSERT_NE(nullptr, Alloc(mine, 4 * KiB));
    ASSERT_EQ(GMR_OK, gmr_scoped_pool_reset(mine, nullptr));
    go = true;
    EXPECT_EQ(GMR_OK, gmr_scope_registry_destroy(r));
    gmr_cuda_sim_usage u;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
    EXPECT_EQ(0u, u.used_bytes) << "every pool gave its chunks back by the end of the destroy";
    destroyed = true;
    for (auto &t : ts) t.join();
    EXPECT_EQ(0, failures.load());
  }
}

// Every thread its own pool; every thread sees its own addresses repeat; no
// two threads ever hold the same block; pools retire with their threads.
TEST_F(Scoped, ManyThreadsEachWithItsOwnPool) {
  constexpr int kThreads = 6, kIterations = 100;
  std::atomic<int> mismatches{0}, failures{0}, finished{0};
  std::vector<std::vector<void *>> firsts(kThreads);
  std::vector<gmr_scoped_pool *> pools(kThreads);
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, i] {
      gmr_scoped_pool *p = nullptr;
      if (gmr_scope_registry_get_pool(reg_, &p) != GMR_OK) {
        failures++;
        return;
      }
      pools[i] = p;
      for (int k = 0; k < kIterations; ++k) {
        gmr_scope s{};
        if (gmr_scope_enter(reg_, &s) != GMR_OK) failures++;
        std::vector<void *> got;
        for (size_t bytes = 256; bytes <= 8192; bytes *= 2) {
          void *ptr = nullptr;
          if (gmr_resource_allocate(gmr_scoped_pool_as_resource(p), bytes + i, 0, nullptr, &ptr) !=
              GMR_OK) {
            failures++;
          }
          std::memset(ptr, i, bytes + i);  // would corrupt another thread's block
          got.push_back(ptr);
        }
        gmr_scope nested{};
        if (gmr_scope_enter(reg_, &nested) != GMR_OK) failures++;
        void *tmp = nullptr;
        if (gmr_resource_allocate(gmr_scoped_pool_as_resource(p), 4096, 0, nullptr, &tmp) != GMR_OK)
          failures++;
        if (k % 2 == 0 && gmr_scope_exit(reg_, nested, nullptr) != GMR_OK) failures++;
        for (size_t j = 0; j < got.size(); ++j) {
          const unsigned char *b = static_cast<const unsigned char *>(got[j]);
          if (b[0] != static_cast<unsigned char>(i)) failures++;
        }
        size_t released = 0;
        if (gmr_scope_exit(reg_, s, &released) != GMR_OK) failures++;  // odd k: nested orphaned
        if (k == 0) {
          firsts[i] = got;
        } else if (got != firsts[i]) {
          mismatches++;
        }
      }
      // Stay alive until every thread is done, so that all pools exist at
      // once (a retired pool's memory may go to the next thread's pool).
      finished++;
      while (finished.load() < kThreads) std::this_thread::yield();
    });
  }
  for (auto &t : ts) t.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0, mismatches.load());
  std::set<gmr_scoped_pool *> distinct(pools.begin(), pools.end());
  EXPECT_EQ(static_cast<size_t>(kThreads), distinct.size());
  std::set<void *> blocks;
  for (auto &f : firsts) blocks.insert(f.begin(), f.end());
  EXPECT_EQ(static_cast<size_t>(kThreads) * 6, blocks.size());
  gmr_scope_registry_stats s = RegStats();
  EXPECT_EQ(static_cast<uint64_t>(kThreads), s.pools_created);
  EXPECT_EQ(static_cast<uint64_t>(kThreads), s.pools_retired);
  EXPECT_EQ(0u, s.pool_count);
  EXPECT_EQ(static_cast<uint64_t>(kThreads) * kIterations / 2, s.orphan_scope_count);
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(0u, u.used_bytes);  // every retired pool gave its memory back
}

}  // namespace
