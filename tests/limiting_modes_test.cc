// limiting_adaptor, issue 13 §5 and issue 11 §3: the increase policies
// (cuCascade's formula, and gmr's first one under its own name), peaks that
// only successful allocations raise, and the two ways of counting (per-thread
// lanes while no limit can refuse; shared counters once one is set), with
// threads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "gmr/host_resource.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/policy.h"
#include "tests/support/limiting_fixture.h"
#include "tests/support/mock_resource.h"
#include "tests/support/policies.h"

namespace {

using Limiting = gmr_test::LimitingTest;

gmr_stream S(uintptr_t v) { return reinterpret_cast<gmr_stream>(v); }

TEST_F(Limiting, IncreaseTotalIsNamedAndChecked) {
  gmr_limit_policy p;
  ASSERT_EQ(GMR_OK, gmr_limit_policy_from_name("increase_total", &p));
  EXPECT_STREQ("increase_total", p.name);
  EXPECT_EQ(GMR_LIMIT_DEFAULT_PADDING_FACTOR, p.padding_factor);
  p.padding_factor = 0.5;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limit_policy_check(&p));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limit_policy_register(nullptr, "increase_total", &p));
}

// Issue 13 §5: cuCascade's increase_reservation_limit_policy grows the limit
// by the padding factor times the excess over it (its own test: a 25600-byte
// reservation, 23040 then 12800 bytes: excess 10240, grown by 12800).
TEST_F(Limiting, IncreaseGrowsTheLimitByThePaddingFactorTimesTheExcess) {
  gmr_limiting_adaptor_config c = Config(25600);
  c.on_limit = gmr_test::IncreasePolicy("increase", 1.25, 0);
  Make(c);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 23040, 0, nullptr, &a));
  EXPECT_EQ(25600u, gmr_limiting_adaptor_get_limit(lim_));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 12800, 0, nullptr, &b));
  EXPECT_EQ(38400u, gmr_limiting_adaptor_get_limit(lim_));
  EXPECT_EQ(35840u, gmr_limiting_adaptor_get_used_bytes(lim_));
  EXPECT_EQ(1u, Stats().raise_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 12800, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 23040, 0, nullptr));
}

TEST_F(Limiting, IncreaseFallsBackToTheExcessWhenThePaddingWouldPassTheCap) {
  gmr_limiting_adaptor_config c = Config(1000);
  c.on_limit = gmr_test::IncreasePolicy("increase", 1.25, 2100);
  Make(c);
  void *a = nullptr, *b = nullptr;
  // Excess 1048: padded to 1310 (limit 2310 > cap), so grown by exactly 1048.
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 2048, 0, nullptr, &a));
  EXPECT_EQ(2048u, gmr_limiting_adaptor_get_limit(lim_));
  // Excess 256: even 2304 passes the cap of 2100: refused, nothing moved.
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r(), 256, 0, nullptr, &b));
  EXPECT_EQ(2048u, gmr_limiting_adaptor_get_limit(lim_));
  EXPECT_EQ(2048u, gmr_limiting_adaptor_get_used_bytes(lim_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 2048, 0, nullptr));
}

TEST_F(Limiting, IncreaseAppliesToStreamLimitsToo) {
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  c.per_stream = true;
  c.stream_limit_bytes = 1024;
  c.on_limit = gmr_test::IncreasePolicy("increase", 2.0, 0);
  Make(c);
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1536, 0, S(3), &a));  // excess 512, grown by 1024
  size_t used = 0, limit = 0;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(lim_, S(3), &used, &limit));
  EXPECT_EQ(1536u, used);
  EXPECT_EQ(2048u, limit);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 1536, 0, S(3)));
}

// Issue 13 §5: a failed upstream allocation gives its charge back, and must
// not leave the peak raised either.
TEST_F(Limiting, AFailedUpstreamAllocationDoesNotRaiseThePeak) {
  gmr_limiting_adaptor_config c = Config(1 << 20);
  c.per_stream = true;
  Make(c);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1000, 0, S(1), &a));
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(r(), 50000, 0, S(1), &b));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(1024u, s.used_bytes);
  EXPECT_EQ(1024u, s.peak_used_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 1000, 0, S(1)));
  EXPECT_EQ(1024u, Stats().peak_used_bytes);
}

TEST_F(Limiting, WithoutALimitItCountsPerThreadAndTrustsTheSize) {
  Make(Config(GMR_LIMIT_NONE));
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 256, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1000, 0, nullptr, &b));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(1280u, s.used_bytes);
  EXPECT_EQ(1280u, s.peak_used_bytes);
  EXPECT_EQ(2u, s.allocation_count);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 256, 0, nullptr));
  s = Stats();
  EXPECT_EQ(1024u, s.used_bytes);
  EXPECT_EQ(1280u, s.peak_used_bytes);
  EXPECT_EQ(1u, s.deallocation_count);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r()));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 1000, 0, nullptr));
  EXPECT_EQ(0u, Stats().used_bytes);
  EXPECT_EQ(2u, Stats().deallocation_count);
}

// A limit set at run time on an adaptor that was only counting: what was
// counted moves into the enforcing counters, and the limit holds from then on.
TEST_F(Limiting, ALimitSetLaterTakesOverWhatWasCounted) {
  Make(Config(GMR_LIMIT_NONE));
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 3000, 0, nullptr, &a));  // charged 3072
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_set_limit(lim_, 4096));
  EXPECT_EQ(3072u, gmr_limiting_adaptor_get_used_bytes(lim_));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r(), 2000, 0, nullptr, &b));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1000, 0, nullptr, &c));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(4096u, s.used_bytes);
  EXPECT_EQ(4096u, s.peak_used_bytes);
  EXPECT_EQ(2u, s.allocation_count);
  EXPECT_EQ(1u, s.refused_count);
  ASSERT_EQ(GMR_OK,
            gmr_resource_deallocate(r(), a, 3000, 0, nullptr));  // counted before, freed after
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), c, 1000, 0, nullptr));
  s = Stats();
  EXPECT_EQ(0u, s.used_bytes);
  EXPECT_EQ(2u, s.deallocation_count);
  // Taking the limit away again keeps the exact counters (the switch is one way).
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_set_limit(lim_, GMR_LIMIT_NONE));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 100000, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 100000, 0, nullptr));
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(lim_));
}


// Counting per thread, with a limit arriving while threads allocate: once
// they have joined every count is exact, and the limit held after it came.
TEST(LimitingThreads, CountingIsExactAfterJoinAndALimitCanArriveMidway) {
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_limiting_adaptor *lim = nullptr;
  gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(gmr_host_resource_as_resource(host), &c, &lim));
  gmr_resource *r = gmr_limiting_adaptor_as_resource(lim);
  const int kThreads = 8, kOps = 3000;
  const size_t kLimit = size_t{64} << 20;
  std::atomic<int> failures{0};
  std::atomic<uint64_t> allocations{0};
  std::atomic<bool> limited{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(7 + t);
      std::vector<std::pair<void *, size_t>> mine;
      for (int i = 0; i < kOps; ++i) {
        if (mine.size() < 30 && rng() % 3 != 0) {
          size_t n = 1 + rng() % 100000;
          void *p = nullptr;
          if (gmr_resource_allocate(r, n, 0, nullptr, &p) != GMR_OK) {
            failures++;
            continue;
          }
          allocations++;
          mine.emplace_back(p, n);
        } else if (!mine.empty()) {
          auto b = mine.back();
          mine.pop_back();
          if (gmr_resource_deallocate(r, b.first, b.second, 0, nullptr) != GMR_OK) failures++;
        }
        if (limited.load() && gmr_limiting_adaptor_get_used_bytes(lim) > kLimit) failures++;
      }
      for (auto &b : mine) {
        if (gmr_resource_deallocate(r, b.first, b.second, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_set_limit(lim, kLimit));  // far above any use here
  limited = true;
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  gmr_limiting_adaptor_stats s = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim, &s));
  EXPECT_EQ(0u, s.used_bytes);
  EXPECT_EQ(allocations.load(), s.allocation_count);
  EXPECT_EQ(allocations.load(), s.deallocation_count);
  EXPECT_GT(s.peak_used_bytes, 0u);
  EXPECT_LE(s.peak_used_bytes, size_t{kThreads} * 30 * 100352);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_host_resource_as_resource(host)));
}

TEST(LimitingThreads, CountingWithoutALimitIsExactAfterJoin) {
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_limiting_adaptor *lim = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(gmr_host_resource_as_resource(host), nullptr, &lim));
  gmr_resource *r = gmr_limiting_adaptor_as_resource(lim);
  // Threads that allocate here and free there (lanes go below zero), and
  // more threads than lanes over the test's life (lanes are reused).
  std::vector<void *> handoff(4000, nullptr);
  for (int round = 0; round < 40; ++round) {
    std::thread producer([&] {
      for (size_t i = 0; i < 100; ++i) {
        ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 5000, 0, nullptr, &handoff[round * 100 + i]));
      }
    });
    producer.join();
    std::thread consumer([&] {
      for (size_t i = 0; i < 100; ++i) {
        ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, handoff[round * 100 + i], 5000, 0, nullptr));
      }
    });
    consumer.join();
  }
  gmr_limiting_adaptor_stats s = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim, &s));
  EXPECT_EQ(0u, s.used_bytes);
  EXPECT_EQ(4000u, s.allocation_count);
  EXPECT_EQ(4000u, s.deallocation_count);
  EXPECT_EQ(100u * 5120, s.peak_used_bytes);  // one thread at a time: exact
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_host_resource_as_resource(host)));
}

}  // namespace
