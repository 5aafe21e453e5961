// Fine placement (`vmm`) over threads: shards picked by stream, frees to the
// owning shard whatever the stream, stream order kept across shards, exact
// statistics, and trim, sleep, wake and destroy acting on every shard.
// Threads get their home shard round-robin in the order of their first call
// (util/thread_home.h), so N threads started one after the other land on N
// different shards of a pool with N shards.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "tests/vmm/vmm_fine_fixture.h"

namespace gmr_test {
namespace {

constexpr size_t kKiB = 1024;

class FineThreads : public FineTest {
 protected:
  gmr_vmm_pool_resource_config Sharded(uint32_t shards) {
    gmr_vmm_pool_resource_config c = FineConfig(256);
    c.shard_count = shards;
    return c;
  }
  gmr_memory_info Info() {
    gmr_memory_info info = GMR_MEMORY_INFO_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_get_memory_info(r_, &info));
    return info;
  }
  gmr_footprint Footprint() {
    gmr_footprint f = {0, 0};
    EXPECT_EQ(GMR_OK, gmr_resource_get_footprint(r_, &f));
    return f;
  }
  // Run `fn(i)` on a thread of its own for i in [0, n), one after the other
  // (each thread's first call comes after the previous thread's).
  template <typename Fn>
  void OneByOne(unsigned n, Fn fn) {
    for (unsigned i = 0; i < n; ++i) std::thread(fn, i).join();
  }
};

// A random mix of allocations and frees on `s` (sizes up to 64 KiB, at most
// 16 live), everything freed at the end; returns the failed calls.
unsigned Churn(gmr_resource *r, gmr_stream s, unsigned seed, int calls) {
  std::vector<std::pair<void *, size_t>> live;
  unsigned x = seed, failed = 0;
  for (int i = 0; i < calls; ++i) {
    x = x * 1103515245u + 12345u;
    if (live.empty() || (live.size() < 16 && (x >> 16) % 4 != 0)) {
      size_t bytes = 1 + (x >> 4) % (64 * kKiB);
      void *p = nullptr;
      if (gmr_resource_allocate(r, bytes, 0, s, &p) != GMR_OK) {
        failed++;
      } else {
        live.emplace_back(p, bytes);
      }
    } else {
      size_t k = (x >> 8) % live.size();
      if (gmr_resource_deallocate(r, live[k].first, live[k].second, 0, s) != GMR_OK) failed++;
      live.erase(live.begin() + static_cast<long>(k));
    }
  }
  for (auto &p : live) failed += gmr_resource_deallocate(r, p.first, p.second, 0, s) != GMR_OK;
  return failed;
}

TEST_F(FineThreads, ThreadsOnStreamsOfTheirOwnUseAShardEachAndRecordNothingOnceWarm) {
  Make(Sharded(4));
  std::vector<gmr_stream> streams(4, nullptr);
  for (auto &s : streams) ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  // Each thread takes its home first (one after the other), then all run
  // together.
  std::atomic<unsigned> homed{0}, failed{0};
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      failed += Churn(r_, streams[i], 7 + i, 16);
      homed++;
      while (homed.load() < 4) std::this_thread::yield();
      failed += Churn(r_, streams[i], 100 + i, 4000);
    });
    while (homed.load() < i + 1) std::this_thread::yield();
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(0u, failed.load());
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(4u, s.va_chunk_count) << "one shard (one VA chunk) per thread";
  EXPECT_EQ(0u, s.live_bytes);
  EXPECT_EQ(0u, s.live_count);
  // A stream alone in its shard records only at its first four frees.
  EXPECT_LE(s.event_record_count, 4u * 4u);
  EXPECT_LE(gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD), 4u * 4u);
  gmr_memory_info info = Info();
  EXPECT_EQ(s.mapped_bytes, info.held_bytes);
  EXPECT_EQ(info.held_bytes, info.free_bytes) << "everything held is free";
  EXPECT_EQ(s.mapped_bytes, Footprint().held_bytes);
  // Trim gives everything back (the frees no record covers: one device
  // synchronisation).
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(s.mapped_bytes, released);
  EXPECT_EQ(0u, Footprint().held_bytes);
  EXPECT_EQ(0u, Stats(pool_).mapped_bytes);
  EXPECT_GE(s.peak_mapped_bytes, s.mapped_bytes);
  EXPECT_EQ(s.peak_mapped_bytes, Footprint().peak_held_bytes);
  for (auto s2 : streams) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s2));
}

TEST_F(FineThreads, SharedStreamsAndCrossStreamFreesKeepExactStatistics) {
  Make(Sharded(4));
  gmr_stream shared = nullptr, own1 = nullptr, own2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&shared));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&own1));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&own2));
  // Threads 0 and 1 share a stream; 2 and 3 have their own. Every thread
  // hands half of its blocks to the next thread, which frees them on its
  // own stream (another shard's memory, another stream).
  const gmr_stream stream_of[4] = {shared, shared, own1, own2};
  std::mutex m;
  std::vector<std::pair<void *, size_t>> inbox[4];
  std::atomic<unsigned> failed{0}, done{0};
  auto work = [&](unsigned i) {
    gmr_stream s = stream_of[i];
    unsigned x = 31 + i;
    for (int round = 0; round < 300; ++round) {
      std::vector<std::pair<void *, size_t>> mine;
      for (int k = 0; k < 8; ++k) {
        x = x * 1103515245u + 12345u;
        size_t bytes = 256 + (x >> 6) % (96 * kKiB);
        void *p = nullptr;
        if (gmr_resource_allocate(r_, bytes, 0, s, &p) != GMR_OK) {
          failed++;
          continue;
        }
        if (k % 3 == 0 && gmr_resource_record_stream(r_, p, own2) != GMR_OK) failed++;
        mine.emplace_back(p, bytes);
      }
      {
        std::lock_guard<std::mutex> g(m);
        for (size_t k = 0; k < mine.size(); k += 2) inbox[(i + 1) % 4].push_back(mine[k]);
      }
      for (size_t k = 1; k < mine.size(); k += 2) {
        failed += gmr_resource_deallocate(r_, mine[k].first, mine[k].second, 0, s) != GMR_OK;
      }
      std::vector<std::pair<void *, size_t>> given;
      {
        std::lock_guard<std::mutex> g(m);
        given.swap(inbox[i]);
      }
      for (auto &p : given)
        failed += gmr_resource_deallocate(r_, p.first, p.second, 0, s) != GMR_OK;
    }
    done++;
  };
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < 4; ++i) threads.emplace_back(work, i);
  for (auto &t : threads) t.join();
  // What was handed over after its receiver finished.
  for (unsigned i = 0; i < 4; ++i) {
    for (auto &p : inbox[i]) {
      failed += gmr_resource_deallocate(r_, p.first, p.second, 0, stream_of[i]) != GMR_OK;
    }
  }
  EXPECT_EQ(0u, failed.load());
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(0u, s.live_bytes);
  EXPECT_EQ(0u, s.live_count);
  gmr_memory_info info = Info();
  EXPECT_EQ(0u, info.live_bytes);
  EXPECT_EQ(s.mapped_bytes, info.held_bytes);
  EXPECT_EQ(s.mapped_bytes, Footprint().held_bytes);
  ExpectInvariants(pool_);
  for (gmr_stream st : {shared, own1, own2}) ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(st));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(s.mapped_bytes, released);
  EXPECT_EQ(0u, Footprint().held_bytes) << "trim gave every shard's memory back";
  for (gmr_stream st : {shared, own1, own2}) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(st));
}

TEST_F(FineThreads, MemoryFreedOnAStreamWithPendingWorkGoesToNoOtherStreamInAnyShard) {
  Make(Sharded(2));
  gmr_stream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s2));
  const size_t bytes = 64 * kKiB;
  void *p = nullptr, *q = nullptr;
  // A (shard a): p on s1. B (shard b): q on s2, then frees A's p on s2
  // while s2's work is pending: p goes back to shard a, filed under s2.
  OneByOne(2, [&](unsigned i) {
    if (i == 0) {
      p = Alloc(bytes, s1);
    } else {
      q = Alloc(bytes, s2);
      ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s2, true));
      Free(p, bytes, s2);
    }
  });
  EXPECT_EQ(2u, Stats(pool_).va_chunk_count) << "two shards in use";
  // Any thread on s1 (shard a) or on a new stream: never p while s2 runs.
  gmr_stream s3 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s3));
  std::vector<std::pair<void *, gmr_stream>> taken;
  OneByOne(4, [&](unsigned i) {
    gmr_stream s = i % 2 == 0 ? s1 : s3;
    for (int k = 0; k < 4; ++k) taken.emplace_back(Alloc(bytes, s), s);
  });
  for (auto &t : taken) {
    EXPECT_NE(p, t.first) << "memory freed on s2 was handed out before s2's work completed";
  }
  for (auto &t : taken) Free(t.first, bytes, t.second);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s2, false));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(s2));
  Free(q, bytes, s2);
  for (gmr_stream st : {s1, s2, s3}) ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(st));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(0u, Footprint().held_bytes);
  for (gmr_stream st : {s1, s2, s3}) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(st));
}

TEST_F(FineThreads, BadFreesGetTheirStatusFromWhicheverShardOwnsThePointer) {
  Make(Sharded(2));
  gmr_stream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s2));
  void *p = nullptr, *q = nullptr;
  OneByOne(2, [&](unsigned i) {
    if (i == 0) p = Alloc(1000, s1);
    if (i == 1) q = Alloc(3000, s2);
  });
  // Named with the other shard's stream: the owner answers.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 999, 0, s2));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_deallocate(r_, static_cast<char *>(p) + 256, 744, 0, s2));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 1000, 0, s2));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 1000, 0, s1));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_record_stream(r_, p, s1));
  EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_set_tag(pool_, q, 5));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_vmm_pool_resource_set_tag(pool_, p, 5));
  EXPECT_EQ(1u, Stats(pool_).live_count);
  // Destroy waits for every shard.
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r_));
  Free(q, 3000, s1);
  for (gmr_stream st : {s1, s2}) ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(st));
  for (gmr_stream st : {s1, s2}) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(st));
}

TEST_F(FineThreads, SleepAndWakeActOnEveryShard) {
  Make(Sharded(2));
  gmr_stream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s2));
  void *p = nullptr, *q = nullptr;
  OneByOne(2, [&](unsigned i) {
    if (i == 0) p = Alloc(5000, s1);
    if (i == 1) q = Alloc(7000, s2);
  });
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, nullptr, nullptr));
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(2u, s.asleep_count);
  EXPECT_EQ(0u, s.mapped_bytes) << "both shards gave their pages back";
  EXPECT_EQ(1u, s.sleep_count);
  // Refused from any thread, on any stream, while asleep.
  OneByOne(2, [&](unsigned i) {
    void *x = nullptr;
    EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate(r_, 100, 0, i == 0 ? s1 : s2, &x));
  });
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
  s = Stats(pool_);
  EXPECT_EQ(2u, s.live_count);
  EXPECT_EQ(1u, s.wake_count);
  void *x = Alloc(100, s2);
  Free(x, 100, s2);
  Free(p, 5000, s1);
  Free(q, 7000, s2);
  for (gmr_stream st : {s1, s2}) ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(st));
  for (gmr_stream st : {s1, s2}) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(st));
}

// A device of 8 pages.
class FineThreadsSmallDevice : public FineThreads {
 protected:
  FineThreadsSmallDevice() { sim_config_.device_memory_bytes = 8 * kPage; }
};

TEST_F(FineThreadsSmallDevice, WhenTheDeviceIsFullAnotherShardServesTheRequest) {
  Make(Sharded(2));
  gmr_stream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s2));
  void *got = nullptr;
  OneByOne(2, [&](unsigned i) {
    if (i == 0) {  // shard a: 6 pages held, all free again
      void *a = Alloc(3 * kPage, s1);
      void *b = Alloc(3 * kPage, s1);
      Free(a, 3 * kPage, s1);
      Free(b, 3 * kPage, s1);
      ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(s1));
    } else {  // shard b cannot grow by 5 pages: shard a's memory serves it
      got = Alloc(5 * kPage, s2);
    }
  });
  ASSERT_NE(nullptr, got);
  EXPECT_LE(Footprint().peak_held_bytes, 8 * kPage);
  Free(got, 5 * kPage, s2);
  for (gmr_stream st : {s1, s2}) ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(st));
  for (gmr_stream st : {s1, s2}) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(st));
}

TEST_F(FineThreads, TooManyShardsIsRefusedWithTheLimit) {
  gmr_vmm_pool_resource_config c = Sharded(GMR_VMM_POOL_MAX_SHARDS + 1);
  gmr_vmm_pool_resource *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_resource_create(&c, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_NE(nullptr, std::strstr(f.message, "shard_count")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "64")) << f.message;
}

}  // namespace
}  // namespace gmr_test
