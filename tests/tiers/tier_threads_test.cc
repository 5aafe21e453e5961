// Threads and the tier manager (run it under --config=tsan): blocking
// reservations woken by releases, shrinks and frees; timeouts; shutdown
// waking every waiter; and many threads reserving, binding, allocating,
// refusing, freeing and releasing at once while a monitor checks that no
// space ever promises more than its reservation limit.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "gmr/tiers/stream_pool.h"
#include "tests/tiers/tier_fixture.h"

namespace {

using gmr_test::GpuConfig;
using gmr_test::HostConfig;
using gmr_test::Id;
using gmr_test::KiB;
using gmr_test::kMs;
using gmr_test::MiB;

class Waiting : public gmr_test::TierTest {
 protected:
  void SetUp() override {
    TierTest::SetUp();
    Make({GpuConfig(0, 1 * MiB)});
    where_ = gmr_reservation_strategy_space(Id(GMR_TIER_GPU, 0));
  }
  void WaitForWaiters(size_t n) {
    while (Stats().waiter_count < n) std::this_thread::yield();
  }
  gmr_reservation_strategy where_;
};

TEST_F(Waiting, ABlockedReserveWakesWhenAReservationIsReleased) {
  gmr_reservation_id big = ReserveIn(GMR_TIER_GPU, 0, 900 * KiB);
  gmr_reservation_id got = 0;
  gmr_status st = GMR_ERR_INTERNAL;
  std::thread t([&] {
    st = gmr_tier_manager_reserve(m_, &where_, 500 * KiB, GMR_WAIT_FOREVER, &got, nullptr);
  });
  WaitForWaiters(1);
  Release(big);
  t.join();
  ASSERT_EQ(GMR_OK, st);
  EXPECT_EQ(500 * KiB, Info(got).bytes);
  gmr_tier_manager_stats s = Stats();
  EXPECT_EQ(1u, s.wait_count);
  EXPECT_EQ(0u, s.timeout_count);
  EXPECT_EQ(2u, s.reserve_count);
  // The cost of reserving apart from waiting: only `big` found room at once.
  EXPECT_EQ(1u, s.immediate_reserve_count);
  EXPECT_GE(s.reserve_latency_ns, s.immediate_reserve_latency_ns + s.wait_ns);
  EXPECT_LE(s.max_immediate_reserve_latency_ns, s.immediate_reserve_latency_ns);
  EXPECT_GE(s.max_reserve_latency_ns, s.max_wait_ns);
  // A caller built against version 1 of the struct gets what it knows.
  gmr_tier_manager_stats v1 = GMR_TIER_MANAGER_STATS_INIT;
  v1.size = offsetof(gmr_tier_manager_stats, immediate_reserve_count);
  v1.version = 1;
  v1.immediate_reserve_count = 77;
  ASSERT_EQ(GMR_OK, gmr_tier_manager_get_stats(m_, &v1));
  EXPECT_EQ(2u, v1.reserve_count);
  EXPECT_EQ(77u, v1.immediate_reserve_count) << "past the caller's size: untouched";
  Release(got);
}

TEST_F(Waiting, ANotifyThatDoesNotMakeRoomKeepsTheWaiterWaiting) {
  gmr_reservation_id big = ReserveIn(GMR_TIER_GPU, 0, 800 * KiB);
  gmr_reservation_id small = ReserveIn(GMR_TIER_GPU, 0, 100 * KiB);
  gmr_reservation_id got = 0;
  gmr_status st = GMR_ERR_INTERNAL;
  std::thread t([&] {
    st = gmr_tier_manager_reserve(m_, &where_, 500 * KiB, GMR_WAIT_FOREVER, &got, nullptr);
  });
  WaitForWaiters(1);
  Release(small);  // 224 KiB free: still too little
  ASSERT_EQ(GMR_OK, gmr_reservation_shrink(m_, big, 300 * KiB, nullptr));  // now it fits
  t.join();
  ASSERT_EQ(GMR_OK, st);
  Release(got);
  Release(big);
}

TEST_F(Waiting, AFreeOfUntrackedMemoryWakesAWaiter) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(Res(GMR_TIER_GPU, 0), 900 * KiB, 0, s, &p));
  gmr_reservation_id got = 0;
  gmr_status st = GMR_ERR_INTERNAL;
  std::thread t([&] {
    st = gmr_tier_manager_reserve(m_, &where_, 500 * KiB, GMR_WAIT_FOREVER, &got, nullptr);
  });
  WaitForWaiters(1);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(Res(GMR_TIER_GPU, 0), p, 900 * KiB, 0, s));
  t.join();
  ASSERT_EQ(GMR_OK, st);
  Release(got);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(Waiting, TimeoutSaysWhatWasAvailable) {
  gmr_reservation_id big = ReserveIn(GMR_TIER_GPU, 0, 1 * MiB);
  gmr_reservation_id got = 9;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_TIMEOUT, gmr_tier_manager_reserve(m_, &where_, 1 * KiB, 2 * kMs, &got, &f));
  EXPECT_EQ(0u, got);
  EXPECT_NE(nullptr, std::strstr(f.message, "0 bytes available")) << f.message;
  EXPECT_EQ(GMR_ERR_TIMEOUT, gmr_tier_manager_reserve(m_, &where_, 1 * KiB, 0, &got, &f));
  EXPECT_EQ(2u, Stats().timeout_count);
  EXPECT_EQ(2u, Stats().wait_count);
  Release(big);
}

TEST_F(Waiting, ShutdownWakesEveryWaiterWithADistinctStatus) {
  gmr_reservation_id big = ReserveIn(GMR_TIER_GPU, 0, 1 * MiB);
  constexpr int kThreads = 3;
  std::atomic<int> shut{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&] {
      gmr_reservation_id r = 0;
      gmr_failure f = GMR_FAILURE_INIT;
      gmr_status st = gmr_tier_manager_reserve(m_, &where_, 1 * KiB, GMR_WAIT_FOREVER, &r, &f);
      if (st == GMR_ERR_SHUTDOWN && r == 0) shut++;
    });
  }
  WaitForWaiters(kThreads);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_tier_manager_destroy(m_));  // waiters and a reservation
  ASSERT_EQ(GMR_OK, gmr_tier_manager_shutdown(m_));
  for (auto &t : ts) t.join();
  EXPECT_EQ(kThreads, shut.load());
  EXPECT_EQ(0u, Stats().waiter_count);
  Release(big);  // outstanding reservations stay valid after shutdown
}

// Many threads at once, GPU first then HOST, each on a stream borrowed from
// the GPU space's pool; the monitor checks the promise at every moment.
TEST(TierThreads, ManyThreadsReserveAllocateAndRelease) {
  gmr_cuda_sim_config sc = GMR_CUDA_SIM_CONFIG_DEFAULT;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_enable(&sc));
  gmr_memory_space_config gpu = GpuConfig(0, 2 * MiB);
  gpu.stream_count = 3;  // fewer streams than threads: BLOCK waits too
  gmr_memory_space_config host = HostConfig(0, 4 * MiB);
  std::vector<gmr_memory_space_config> cs = {gpu, host};
  gmr_tier_manager *m = nullptr;
  ASSERT_EQ(GMR_OK, gmr_tier_manager_create(cs.data(), cs.size(), &m, nullptr));
  gmr_memory_space *spaces[2] = {gmr_tier_manager_get_space(m, Id(GMR_TIER_GPU, 0)),
                                 gmr_tier_manager_get_space(m, Id(GMR_TIER_HOST, 0))};
  gmr_stream_pool *pool = gmr_memory_space_get_stream_pool(spaces[0]);
  gmr_tier order[] = {GMR_TIER_GPU, GMR_TIER_HOST};
  gmr_reservation_strategy where = gmr_reservation_strategy_tiers(order, 2);

  constexpr int kThreads = 6, kRounds = 150;
  std::atomic<bool> stop{false};
  std::atomic<int> over_promise{0}, refused_as_expected{0}, failures{0};
  std::thread monitor([&] {
    while (!stop.load()) {
      for (gmr_memory_space *s : spaces) {
        gmr_memory_space_stats st = GMR_MEMORY_SPACE_STATS_INIT;
        if (gmr_memory_space_get_stats(s, &st) != GMR_OK) failures++;
        if (st.used_bytes > st.reservation_limit_bytes) over_promise++;
      }
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, i] {
      std::mt19937 rng(static_cast<unsigned>(i) * 7919u);
      for (int k = 0; k < kRounds; ++k) {
        gmr_stream s = nullptr;
        if (gmr_stream_pool_acquire(pool, GMR_STREAM_ACQUIRE_BLOCK, GMR_WAIT_FOREVER, &s) != GMR_OK) {
          failures++;
          return;
        }
        size_t blocks = 1 + rng() % 8;  // 64 KiB each (HOST blocks)
        size_t bytes = blocks * 64 * KiB;
        gmr_reservation_id r = 0;
        gmr_failure f = GMR_FAILURE_INIT;
        if (gmr_tier_manager_reserve(m, &where, bytes, 10000 * kMs, &r, &f) != GMR_OK ||
            gmr_reservation_bind_stream(m, r, s, nullptr, &f) != GMR_OK) {
          failures++;
          (void)gmr_stream_pool_release(pool, s);
          return;
        }
        gmr_reservation_info info = GMR_RESERVATION_INFO_INIT;
        if (gmr_reservation_get_info(m, r, &info) != GMR_OK) failures++;
        gmr_resource *res = gmr_memory_space_as_resource(
            gmr_tier_manager_get_space(m, info.space));
        std::vector<void *> ps;
        for (size_t b = 0; b < blocks; ++b) {
          void *p = nullptr;
          if (gmr_resource_allocate(res, 64 * KiB, 0, s, &p) != GMR_OK) failures++;
          ps.push_back(p);
        }
        void *extra = nullptr;  // one past the reservation: refused (fail policy)
        if (gmr_resource_allocate(res, 64 * KiB, 0, s, &extra) == GMR_ERR_LIMIT_EXCEEDED) {
          refused_as_expected++;
        } else {
          failures++;
        }
        for (void *p : ps) {
          if (p != nullptr && gmr_resource_deallocate(res, p, 64 * KiB, 0, s) != GMR_OK) failures++;
        }
        if (gmr_reservation_release(m, r, &f) != GMR_OK) failures++;
        if (gmr_stream_pool_release(pool, s) != GMR_OK) failures++;
      }
    });
  }
  for (auto &t : ts) t.join();
  stop = true;
  monitor.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0, over_promise.load());
  EXPECT_EQ(kThreads * kRounds, refused_as_expected.load());
  gmr_tier_manager_stats ms = GMR_TIER_MANAGER_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tier_manager_get_stats(m, &ms));
  EXPECT_EQ(0u, ms.reservation_count);
  EXPECT_EQ(static_cast<uint64_t>(kThreads) * kRounds, ms.reserve_count);
  for (gmr_memory_space *s : spaces) {
    gmr_memory_space_stats st = GMR_MEMORY_SPACE_STATS_INIT;
    ASSERT_EQ(GMR_OK, gmr_memory_space_get_stats(s, &st));
    EXPECT_EQ(0u, st.allocated_bytes);
    EXPECT_EQ(0u, st.reserved_bytes);
    EXPECT_EQ(0u, st.bound_stream_count);
  }
  ASSERT_EQ(GMR_OK, gmr_tier_manager_destroy(m));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_disable());
}

}  // namespace
