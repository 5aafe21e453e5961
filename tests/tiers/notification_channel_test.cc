// notification_channel: generations, the three wait results, no lost
// wake-up between reading the generation and waiting, shutdown waking every
// waiter, destroy refused while a thread waits, and bad arguments.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gmr/tiers/notification_channel.h"

namespace {

constexpr uint64_t kMs = 1000000;

class Channel : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(GMR_OK, gmr_notification_channel_create(&c_)); }
  void TearDown() override { EXPECT_EQ(GMR_OK, gmr_notification_channel_destroy(c_)); }
  gmr_notification_channel_stats Stats() {
    gmr_notification_channel_stats s = GMR_NOTIFICATION_CHANNEL_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_notification_channel_get_stats(c_, &s));
    return s;
  }
  gmr_notification_channel *c_ = nullptr;
};

TEST_F(Channel, TimeoutWithoutNotifyIsIdle) {
  gmr_wait_result r = GMR_WAIT_NOTIFIED;
  uint64_t g = gmr_notification_channel_get_generation(c_);
  ASSERT_EQ(GMR_OK, gmr_notification_channel_wait(c_, g, 1 * kMs, &r));
  EXPECT_EQ(GMR_WAIT_IDLE, r);
  ASSERT_EQ(GMR_OK, gmr_notification_channel_wait(c_, g, 0, &r));  // no blocking at all
  EXPECT_EQ(GMR_WAIT_IDLE, r);
  EXPECT_EQ(2u, Stats().idle_count);
}

TEST_F(Channel, NotifyBeforeWaitIsNotLost) {
  uint64_t g = gmr_notification_channel_get_generation(c_);
  ASSERT_EQ(GMR_OK, gmr_notification_channel_notify(c_));  // between the read and the wait
  gmr_wait_result r = GMR_WAIT_IDLE;
  ASSERT_EQ(GMR_OK, gmr_notification_channel_wait(c_, g, GMR_WAIT_FOREVER, &r));
  EXPECT_EQ(GMR_WAIT_NOTIFIED, r);
  EXPECT_EQ(g + 1, gmr_notification_channel_get_generation(c_));
}

TEST_F(Channel, NotifyWakesEveryWaiter) {
  constexpr int kThreads = 4;
  std::atomic<int> notified{0};
  uint64_t g = gmr_notification_channel_get_generation(c_);
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&] {
      gmr_wait_result r = GMR_WAIT_IDLE;
      ASSERT_EQ(GMR_OK, gmr_notification_channel_wait(c_, g, GMR_WAIT_FOREVER, &r));
      if (r == GMR_WAIT_NOTIFIED) notified++;
    });
  }
  while (Stats().waiter_count < kThreads) std::this_thread::yield();
  ASSERT_EQ(GMR_OK, gmr_notification_channel_notify(c_));
  for (auto &t : ts) t.join();
  EXPECT_EQ(kThreads, notified.load());
  EXPECT_EQ(static_cast<size_t>(kThreads), Stats().peak_waiter_count);
  EXPECT_EQ(0u, Stats().waiter_count);
}

TEST_F(Channel, ShutdownWakesWaitersAndLaterWaitsReturnAtOnce) {
  uint64_t g = gmr_notification_channel_get_generation(c_);
  gmr_wait_result got = GMR_WAIT_IDLE;
  std::thread t([&] { ASSERT_EQ(GMR_OK, gmr_notification_channel_wait(c_, g, GMR_WAIT_FOREVER, &got)); });
  while (Stats().waiter_count < 1) std::this_thread::yield();
  // Destroy refuses while the thread waits, and changes nothing.
  EXPECT_EQ(GMR_ERR_BUSY, gmr_notification_channel_destroy(c_));
  ASSERT_EQ(GMR_OK, gmr_notification_channel_shutdown(c_));
  t.join();
  EXPECT_EQ(GMR_WAIT_SHUTDOWN, got);
  EXPECT_TRUE(gmr_notification_channel_is_shut_down(c_));
  gmr_wait_result r = GMR_WAIT_IDLE;
  ASSERT_EQ(GMR_OK, gmr_notification_channel_wait(c_, g, GMR_WAIT_FOREVER, &r));
  EXPECT_EQ(GMR_WAIT_SHUTDOWN, r);
  ASSERT_EQ(GMR_OK, gmr_notification_channel_shutdown(c_));  // idempotent
  EXPECT_EQ(2u, Stats().shutdown_count);
}

TEST_F(Channel, BadArguments) {
  gmr_wait_result r = GMR_WAIT_NOTIFIED;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_notification_channel_create(nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_notification_channel_wait(nullptr, 0, 0, &r));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_notification_channel_wait(c_, 0, 0, nullptr));
  EXPECT_EQ(GMR_WAIT_NOTIFIED, r);  // untouched
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_notification_channel_notify(nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_notification_channel_shutdown(nullptr));
  EXPECT_EQ(0u, gmr_notification_channel_get_generation(nullptr));
  EXPECT_FALSE(gmr_notification_channel_is_shut_down(nullptr));
  EXPECT_EQ(GMR_OK, gmr_notification_channel_destroy(nullptr));
  gmr_notification_channel_stats bad = GMR_NOTIFICATION_CHANNEL_STATS_INIT;
  bad.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_notification_channel_get_stats(c_, &bad));
  bad = GMR_NOTIFICATION_CHANNEL_STATS_INIT;
  bad.size = 4;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_notification_channel_get_stats(c_, &bad));
}

// Producers notify while consumers wait for their own generations: every
// consumer ends NOTIFIED (never stuck), whatever the interleaving.
TEST_F(Channel, ManyThreadsNeverMissANotify) {
  constexpr int kRounds = 200;
  std::atomic<int> done{0};
  std::thread producer([&] {
    while (done.load() < 2) {
      ASSERT_EQ(GMR_OK, gmr_notification_channel_notify(c_));
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> consumers;
  for (int i = 0; i < 2; ++i) {
    consumers.emplace_back([&] {
      for (int k = 0; k < kRounds; ++k) {
        uint64_t g = gmr_notification_channel_get_generation(c_);
        gmr_wait_result r = GMR_WAIT_IDLE;
        ASSERT_EQ(GMR_OK, gmr_notification_channel_wait(c_, g, GMR_WAIT_FOREVER, &r));
        ASSERT_EQ(GMR_WAIT_NOTIFIED, r);
      }
      done++;
    });
  }
  for (auto &t : consumers) t.join();
  producer.join();
  EXPECT_EQ(2u * kRounds, Stats().notified_count);
}

}  // namespace
