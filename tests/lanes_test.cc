// core/lanes: per-thread counts summed exactly, lanes handed back and reused
// when threads exit, and more threads alive than lanes (the shared path).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/lanes_probe.h"

namespace {

const size_t kLanes = lanes_probe_lane_count();

struct Destroy {
  void operator()(lanes_probe *p) const { lanes_probe_destroy(p); }
};

std::unique_ptr<lanes_probe, Destroy> Make(int64_t batch_bytes, int64_t batch_count) {
  return std::unique_ptr<lanes_probe, Destroy>(lanes_probe_create(batch_bytes, batch_count));
}

TEST(Lanes, OneThreadIsExactAcrossFlushes) {
  auto p = Make(1000, 4);
  lanes_probe *c = p.get();
  size_t lane = lanes_probe_thread_lane();
  ASSERT_LT(lane, kLanes);
  EXPECT_EQ(lane, lanes_probe_thread_lane());  // the same lane every call
  int64_t level = 0, peak = 0;
  for (int i = 0; i < 50; ++i) {
    lanes_probe_add(c, lane, 300);
    level += 300;
    if (level > peak) peak = level;
    if (i % 3 == 2) {
      lanes_probe_sub(c, lane, 600, false);
      level -= 600;
    }
  }
  int64_t bytes = 0, count = 0;
  lanes_probe_value(c, &bytes, &count);
  EXPECT_EQ(level, bytes);
  lanes_probe_peak(c, &bytes, nullptr);
  EXPECT_EQ(peak, bytes);
  lanes_probe_total(c, &bytes, &count);
  EXPECT_EQ(50 * 300, bytes);
  EXPECT_EQ(50, count);
  // A free undone puts the level back without touching totals or peaks.
  lanes_probe_sub(c, lane, 300, false);
  lanes_probe_sub(c, lane, 300, true);
  lanes_probe_value(c, &bytes, nullptr);
  EXPECT_EQ(level, bytes);
  lanes_probe_drain(c, &bytes, &count);
  EXPECT_EQ(level, bytes);
  lanes_probe_value(c, &bytes, &count);
  EXPECT_EQ(0, bytes);
  EXPECT_EQ(0, count);
}

// Growth in place (gmr_resource_extend): bytes, their total and their peak move, the
// count of allocations does not; on a lane and on the shared path alike.
TEST(Lanes, GrowthMovesBytesButNotTheCount) {
  for (size_t lane : {lanes_probe_thread_lane(), kLanes}) {
    auto p = Make(1000, 4);
    lanes_probe *c = p.get();
    lanes_probe_add(c, lane, 300);
    for (int i = 0; i < 10; ++i) lanes_probe_grow(c, lane, 400);  // past the batch: flushes
    int64_t bytes = -1, count = -1;
    lanes_probe_value(c, &bytes, &count);
    EXPECT_EQ(4300, bytes) << "lane " << lane;
    EXPECT_EQ(1, count);
    lanes_probe_total(c, &bytes, &count);
    EXPECT_EQ(4300, bytes);
    EXPECT_EQ(1, count);
    lanes_probe_peak(c, &bytes, &count);
    EXPECT_EQ(4300, bytes);
    EXPECT_EQ(1, count);
    lanes_probe_sub(c, lane, 4300, false);
    lanes_probe_value(c, &bytes, &count);
    EXPECT_EQ(0, bytes);
    EXPECT_EQ(0, count);
  }
}

TEST(Lanes, MoreThreadsAliveThanLanesShareOnePathAndCountExactly) {
  auto p = Make(1 << 20, 256);
  lanes_probe *c = p.get();
  const int kThreads = static_cast<int>(kLanes) + 16;
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  std::atomic<int> shared{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      size_t lane = lanes_probe_thread_lane();
      if (lane == kLanes) shared++;
      {
        // Every thread holds its lane until all have one.
        std::unique_lock<std::mutex> lock(m);
        if (++arrived == kThreads) cv.notify_all();
        cv.wait(lock, [&] { return arrived == kThreads; });
      }
      for (int i = 0; i < 500; ++i) lanes_probe_add(c, lane, 1000);
      for (int i = 0; i < 500; ++i) lanes_probe_sub(c, lane, 1000, false);
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_GE(shared.load(), 16);  // the main thread may hold a lane too
  int64_t bytes = -1, count = -1;
  lanes_probe_value(c, &bytes, &count);
  EXPECT_EQ(0, bytes);
  EXPECT_EQ(0, count);
  lanes_probe_total(c, &bytes, &count);
  EXPECT_EQ(int64_t{kThreads} * 500 * 1000, bytes);
  EXPECT_EQ(int64_t{kThreads} * 500, count);
  lanes_probe_peak(c, &bytes, nullptr);
  EXPECT_GE(bytes, 500 * 1000);
  EXPECT_LE(bytes, int64_t{kThreads} * 500 * 1000);
}

TEST(Lanes, ALaneIsHandedBackWhenItsThreadExits) {
  size_t first = kLanes, second = kLanes + 1;
  std::thread a([&] { first = lanes_probe_thread_lane(); });
  a.join();
  std::thread b([&] { second = lanes_probe_thread_lane(); });
  b.join();
  EXPECT_LT(first, kLanes);
  EXPECT_EQ(first, second);  // the lowest free lane, given back by the first
}

}  // namespace
