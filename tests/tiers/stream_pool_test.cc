// stream_pool on the simulation: streams made on the pool's device, lending
// most-recently-returned first, BLOCK (waiting, timeout, wake on return) and
// GROW (and its maximum), shutdown with waiters and lent streams, destroy
// refused while lent, every stream synchronised and destroyed at the end,
// bad input, and a CUDA failure at create.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "gmr/tiers/notification_channel.h"
#include "gmr/tiers/stream_pool.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr uint64_t kMs = 1000000;

class StreamPool : public gmr_test::SimTest {
 protected:
  StreamPool() { sim_config_.device_count = 2; }
  void TearDown() override {
    if (pool_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_stream_pool_destroy(pool_));
    }
    SimTest::TearDown();
  }
  void Make(size_t count, size_t max = 0, int device = -1) {
    gmr_stream_pool_config c = GMR_STREAM_POOL_CONFIG_DEFAULT;
    c.stream_count = count;
    c.max_stream_count = max;
    c.device = device;
    ASSERT_EQ(GMR_OK, gmr_stream_pool_create(&c, &pool_));
  }
  gmr_stream_pool_stats Stats() {
    gmr_stream_pool_stats s = GMR_STREAM_POOL_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_stream_pool_get_stats(pool_, &s));
    return s;
  }
  gmr_stream_pool *pool_ = nullptr;
};

TEST_F(StreamPool, DefaultCountIs16AndEveryStreamIsDistinct) {
  ASSERT_EQ(GMR_OK, gmr_stream_pool_create(nullptr, &pool_));
  EXPECT_EQ(16u, Stats().stream_count);
  EXPECT_EQ(16u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_CREATE));
  std::set<gmr_stream> seen;
  std::vector<gmr_stream> lent;
  for (int i = 0; i < 16; ++i) {
    gmr_stream s = nullptr;
    ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, &s));
    ASSERT_NE(nullptr, s);
    seen.insert(s);
    lent.push_back(s);
  }
  EXPECT_EQ(16u, seen.size());
  EXPECT_EQ(16u, Stats().peak_lent_count);
  for (gmr_stream s : lent) ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, s));
}

TEST_F(StreamPool, LendsTheMostRecentlyReturnedStream) {
  Make(4);
  gmr_stream a = nullptr, b = nullptr, again = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, &a));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, &b));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, a));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, &again));
  EXPECT_EQ(a, again);
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, again));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, b));
}

TEST_F(StreamPool, StreamsBelongToThePoolsDevice) {
  Make(1, 0, 1);
  EXPECT_EQ(1, gmr_stream_pool_get_device(pool_));
  int current = -1;
  ASSERT_EQ(GMR_OK, gmr_device_get_current(&current));
  EXPECT_EQ(0, current);  // restored after creating on device 1
}

TEST_F(StreamPool, BlockTimesOutThenWakesOnReturn) {
  Make(1);
  gmr_stream only = nullptr, none = reinterpret_cast<gmr_stream>(1);
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, &only));
  EXPECT_EQ(GMR_ERR_TIMEOUT, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, &none));
  EXPECT_EQ(nullptr, none);
  EXPECT_EQ(GMR_ERR_TIMEOUT,
            gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 2 * kMs, &none));
  EXPECT_EQ(2u, Stats().timeout_count);

  gmr_stream got = nullptr;
  gmr_status st = GMR_ERR_INTERNAL;
  std::thread waiter(
      [&] { st = gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, GMR_WAIT_FOREVER, &got); });
  while (Stats().waiter_count < 1) std::this_thread::yield();
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, only));
  waiter.join();
  EXPECT_EQ(GMR_OK, st);
  EXPECT_EQ(only, got);
  EXPECT_EQ(3u, Stats().wait_count);
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, got));
}

TEST_F(StreamPool, GrowCreatesStreamsUpToTheMaximumThenBlocks) {
  Make(1, 2);
  gmr_stream a = nullptr, b = nullptr, c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_GROW, 0, &a));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_GROW, 0, &b));
  EXPECT_NE(a, b);
  EXPECT_EQ(1u, Stats().grow_count);
  EXPECT_EQ(2u, Stats().stream_count);
  EXPECT_EQ(GMR_ERR_TIMEOUT, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_GROW, 0, &c));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, b));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_GROW, 0, &c));
  EXPECT_EQ(b, c);  // a returned stream before a new one
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, a));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, c));
}

TEST_F(StreamPool, GrowFromAnEmptyPoolAndACudaFailureLendsNothing) {
  Make(0);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_CREATE, 0, 1, 2));
  gmr_stream s = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_GROW, 0, &s));
  EXPECT_EQ(nullptr, s);
  EXPECT_EQ(0u, Stats().stream_count);
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_GROW, 0, &s));
  EXPECT_EQ(1u, Stats().stream_count);
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, s));
}

TEST_F(StreamPool, ShutdownWakesWaitersAndRefusesAcquiresButTakesReturns) {
  Make(1);
  gmr_stream lent = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, &lent));
  gmr_status st = GMR_OK;
  std::thread waiter([&] {
    gmr_stream s = nullptr;
    st = gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, GMR_WAIT_FOREVER, &s);
  });
  while (Stats().waiter_count < 1) std::this_thread::yield();
  // Destroy refuses with a stream lent and a waiter, changing nothing.
  EXPECT_EQ(GMR_ERR_BUSY, gmr_stream_pool_destroy(pool_));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_shutdown(pool_));
  waiter.join();
  EXPECT_EQ(GMR_ERR_SHUTDOWN, st);
  gmr_stream s = nullptr;
  EXPECT_EQ(GMR_ERR_SHUTDOWN, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_GROW, 0, &s));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_stream_pool_destroy(pool_));  // still lent
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, lent));
  EXPECT_EQ(2u, Stats().shutdown_count);
}

TEST_F(StreamPool, DestroySynchronisesEveryStreamThenDestroysIt) {
  Make(3);
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, &s));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));  // work still pending on it
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, s));
  uint64_t syncs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_SYNCHRONIZE);
  ASSERT_EQ(GMR_OK, gmr_stream_pool_destroy(pool_));
  pool_ = nullptr;
  EXPECT_EQ(syncs + 3, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_SYNCHRONIZE));
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_DESTROY));
}

TEST_F(StreamPool, FailedSynchronisationAtDestroyChangesNothing) {
  Make(2);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_SYNCHRONIZE, 1, 1, 999));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_stream_pool_destroy(pool_));
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_DESTROY));
  EXPECT_EQ(2u, Stats().stream_count);
  gmr_stream s = nullptr;  // still usable
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, &s));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, s));
}

TEST_F(StreamPool, BadInputChangesNothing) {
  gmr_stream_pool_config c = GMR_STREAM_POOL_CONFIG_DEFAULT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stream_pool_create(&c, nullptr));
  c.device = 7;  // the simulation has 2 devices
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stream_pool_create(&c, &pool_));
  c = GMR_STREAM_POOL_CONFIG_DEFAULT;
  c.stream_count = 4;
  c.max_stream_count = 2;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stream_pool_create(&c, &pool_));
  EXPECT_EQ(nullptr, pool_);

  Make(2);
  gmr_stream s = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_stream_pool_acquire(pool_, static_cast<gmr_stream_acquire_policy>(9), 0, &s));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, nullptr));
  gmr_stream foreign = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&foreign));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stream_pool_release(pool_, foreign));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stream_pool_release(pool_, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(foreign));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK, 0, &s));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, s));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_stream_pool_release(pool_, s));
  EXPECT_EQ(0u, Stats().lent_count);
}

TEST_F(StreamPool, CreateFailureDestroysTheStreamsMadeSoFar) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_CREATE, 2, 1, 2));
  gmr_stream_pool_config c = GMR_STREAM_POOL_CONFIG_DEFAULT;
  c.stream_count = 5;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_stream_pool_create(&c, &pool_));
  EXPECT_EQ(nullptr, pool_);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_DESTROY));
  // The fixture's TearDown checks that no simulated stream is left.
}

// Many threads borrow and return: no stream is ever held by two at once.
TEST_F(StreamPool, ThreadsNeverShareALentStream) {
  Make(3);
  constexpr int kThreads = 6, kRounds = 300;
  std::atomic<int> holders[3] = {};
  std::vector<gmr_stream> streams;
  std::vector<std::thread> ts;
  std::atomic<bool> shared{false};
  std::mutex names_mutex;
  std::vector<gmr_stream> names;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&] {
      for (int k = 0; k < kRounds; ++k) {
        gmr_stream s = nullptr;
        ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool_, GMR_STREAM_ACQUIRE_BLOCK,
                                                  GMR_WAIT_FOREVER, &s));
        size_t index = 0;
        {
          std::lock_guard<std::mutex> g(names_mutex);
          auto it = std::find(names.begin(), names.end(), s);
          if (it == names.end()) {
            names.push_back(s);
            it = names.end() - 1;
          }
          index = static_cast<size_t>(it - names.begin());
        }
        ASSERT_LT(index, 3u);
        if (holders[index].fetch_add(1) != 0) shared = true;
        std::this_thread::yield();
        holders[index].fetch_sub(1);
        ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool_, s));
      }
    });
  }
  for (auto &t : ts) t.join();
  EXPECT_FALSE(shared.load());
  EXPECT_EQ(static_cast<uint64_t>(kThreads) * kRounds, Stats().acquire_count);
  EXPECT_EQ(3u, Stats().stream_count);
}

}  // namespace
