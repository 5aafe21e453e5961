// Reserve now, commit later (issue 33, item 3), in both placements on the
// simulation: a range of addresses reserved in the pool whose pages are
// committed and decommitted at the same addresses, what is committed
// queried, contents kept across commits of other pages; tags, sleep and
// wake over the committed pages (saved, discarded, kept, woken by tag);
// bad input with a clear status that changes nothing; out of memory on a
// commit changes nothing; a sleep called during a commit waits for it and
// takes all of it; a range keeps the pool from being destroyed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/vmm_pool_range.h"
#include "gmr/vmm_pool_sleep.h"
#include "tests/vmm/host_probe.h"
#include "tests/vmm/vmm_sleep_fixture.h"

namespace {

using gmr_test::kMiB;
using gmr_test::kPage;
using gmr_test::Stats;

constexpr uint32_t kWeights = 1, kKv = 2, kScratch = 3;

class VmmRange : public gmr_test::SleepTest {
 protected:
  void TearDown() override {
    for (void *base : ranges_) {
      EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_free_range(pool_, base, nullptr));
    }
    gmr_test::SleepTest::TearDown();
  }
  char *Reserve(size_t bytes, size_t page_bytes = 0) {
    void *base = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_reserve_range(pool_, bytes, page_bytes, &base, &f))
        << f.message;
    ranges_.push_back(base);
    return static_cast<char *>(base);
  }
  void FreeRange(void *base) {
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_free_range(pool_, base, &f)) << f.message;
    for (size_t i = 0; i < ranges_.size(); ++i) {
      if (ranges_[i] == base) ranges_.erase(ranges_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  gmr_status Commit(void *addr, size_t bytes, gmr_failure *f = nullptr) {
    return gmr_vmm_pool_resource_commit(pool_, addr, bytes, f);
  }
  gmr_status Decommit(void *addr, size_t bytes, gmr_failure *f = nullptr) {
    return gmr_vmm_pool_resource_decommit(pool_, addr, bytes, f);
  }
  gmr_vmm_pool_range_info Info(const void *addr, size_t bytes = 0) {
    gmr_vmm_pool_range_info info = GMR_VMM_POOL_RANGE_INFO_INIT;
    EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_get_range_info(pool_, addr, bytes, &info));
    return info;
  }
  std::vector<void *> ranges_;
};

TEST_P(VmmRange, PagesAreCommittedAndDecommittedAtStableAddresses) {
  const size_t device_before = DeviceUsed();
  char *base = Reserve(64 * kMiB);
  gmr_vmm_pool_range_info info = Info(base);
  EXPECT_EQ(base, info.base);
  EXPECT_EQ(64 * kMiB, info.reserved_bytes);
  EXPECT_EQ(kPage, info.page_bytes) << "the pool's page";
  EXPECT_EQ(0u, info.committed_bytes);
  EXPECT_FALSE(Mapped(base));
  EXPECT_EQ(device_before, DeviceUsed()) << "a reservation holds no memory";

  // A little before the graphs are captured.
  ASSERT_EQ(GMR_OK, Commit(base, 2 * kPage));
  EXPECT_TRUE(Mapped(base));
  EXPECT_TRUE(Mapped(base + 2 * kPage - 1));
  EXPECT_FALSE(Mapped(base + 2 * kPage));
  Fill(base, 2 * kPage, 1);
  EXPECT_EQ(device_before + 2 * kPage, DeviceUsed());
  // The final size at the same addresses: what is committed stays as it is.
  ASSERT_EQ(GMR_OK, Commit(base, 8 * kPage));
  EXPECT_TRUE(Same(base, 2 * kPage, 1)) << "committing more keeps the contents";
  Fill(base + 2 * kPage, 6 * kPage, 2);
  info = Info(base + kPage, 3 * kPage);
  EXPECT_EQ(8 * kPage, info.committed_bytes);
  EXPECT_EQ(3 * kPage, info.span_committed_bytes);
  EXPECT_EQ(device_before + 8 * kPage, DeviceUsed());
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(base + 3 * kPage, &m));
  EXPECT_EQ(kPage, m.bytes) << "one physical allocation per page";

  // Decommit from the middle: exactly those pages go.
  ASSERT_EQ(GMR_OK, Decommit(base + 4 * kPage, 2 * kPage));
  EXPECT_FALSE(Mapped(base + 4 * kPage));
  EXPECT_FALSE(Mapped(base + 6 * kPage - 1));
  EXPECT_TRUE(Mapped(base + 6 * kPage));
  EXPECT_EQ(6 * kPage, Info(base).committed_bytes);
  EXPECT_EQ(0u, Info(base + 4 * kPage, 2 * kPage).span_committed_bytes);
  EXPECT_EQ(device_before + 6 * kPage, DeviceUsed());
  EXPECT_TRUE(Same(base, 2 * kPage, 1));
  // And back, at the same addresses.
  ASSERT_EQ(GMR_OK, Commit(base + 4 * kPage, 2 * kPage));
  EXPECT_TRUE(Mapped(base + 5 * kPage));
  const gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(1u, s.range_count);
  EXPECT_EQ(64 * kMiB, s.range_reserved_bytes);
  EXPECT_EQ(8 * kPage, s.range_committed_bytes);
  EXPECT_EQ(8 * kPage, s.range_mapped_bytes);
  gmr_test::ExpectBooksMatchDevice(pool_);

  FreeRange(base);
  EXPECT_EQ(device_before, DeviceUsed());
  gmr_cuda_sim_vmm_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&u));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(base, &m));
  EXPECT_FALSE(m.reserved) << "the addresses went back";
  EXPECT_EQ(0u, Stats(pool_).range_count);
}

TEST_P(VmmRange, LargerPagesAreOnePhysicalAllocationEach) {
  char *base = Reserve(10 * kMiB, 4 * kMiB);
  gmr_vmm_pool_range_info info = Info(base);
  EXPECT_EQ(4 * kMiB, info.page_bytes);
  EXPECT_EQ(12 * kMiB, info.reserved_bytes) << "rounded up to whole pages";
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, Commit(base, kPage, &f)) << "half a page";
  EXPECT_NE(nullptr, std::strstr(f.message, "whole pages")) << f.message;
  ASSERT_EQ(GMR_OK, Commit(base + 4 * kMiB, 8 * kMiB));
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(base + 5 * kMiB, &m));
  EXPECT_EQ(4 * kMiB, m.bytes);
  EXPECT_EQ(base + 4 * kMiB, m.base);
  gmr_test::ExpectBooksMatchDevice(pool_);
}

TEST_P(VmmRange, BadInputGetsAClearStatusAndChangesNothing) {
  char *base = Reserve(8 * kPage);
  ASSERT_EQ(GMR_OK, Commit(base, 2 * kPage));
  Fill(base, 2 * kPage, 3);
  const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);
  gmr_failure f = GMR_FAILURE_INIT;
  // Commit past the reservation.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, Commit(base + 6 * kPage, 4 * kPage, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "ends past the range")) << f.message;
  // Decommit of a page that is not committed (the span starts committed).
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, Decommit(base, 3 * kPage, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "is not committed")) << f.message;
  // Not whole pages; an address in no range; NULL pool.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, Commit(base + 4096, kPage, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, Decommit(base, kPage + 4096, &f));
  int on_host = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, Commit(&on_host, kPage, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "in no range")) << f.message;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, Decommit(&on_host, kPage, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_commit(nullptr, base, kPage, &f));
  // Free of an address that is not a range's first; info of no range.
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_vmm_pool_resource_free_range(pool_, base + kPage, &f));
  gmr_vmm_pool_range_info info = GMR_VMM_POOL_RANGE_INFO_INIT;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_vmm_pool_resource_get_range_info(pool_, &on_host, 0, &info));
  info.size = 4;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_get_range_info(pool_, base, 0, &info));
  // Reservations that cannot be.
  void *out = &on_host;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_vmm_pool_resource_reserve_range(pool_, 8 * kPage, 3 * kMiB, &out, &f));
  EXPECT_EQ(nullptr, out);
  EXPECT_NE(nullptr, std::strstr(f.message, "power of two")) << f.message;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_reserve_range(pool_, 0, 0, &out, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_vmm_pool_resource_reserve_range(pool_, kPage, 0, nullptr, &f));
  EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key());
  EXPECT_TRUE(Same(base, 2 * kPage, 3));
  // Nothing to do is no error.
  EXPECT_EQ(GMR_OK, Commit(base, 0));
  EXPECT_EQ(GMR_OK, Decommit(base + 4 * kPage, 0));
  // A second free of a range.
  FreeRange(base);
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_vmm_pool_resource_free_range(pool_, base, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "freed already")) << f.message;
}

TEST_P(VmmRange, SleepAndWakeApplyToCommittedPages) {
  void *weights = Alloc(2 * kPage, kWeights);
  Fill(weights, 2 * kPage, 10);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, kKv));
  char *kv = Reserve(16 * kPage);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, 0));
  EXPECT_EQ(kKv, Info(kv).tag) << "the default tag when reserved";
  // Two runs of committed pages, as a KV cache with views per layer grows.
  ASSERT_EQ(GMR_OK, Commit(kv, 3 * kPage));
  ASSERT_EQ(GMR_OK, Commit(kv + 8 * kPage, 2 * kPage));
  Fill(kv, 3 * kPage, 11);
  Fill(kv + 8 * kPage, 2 * kPage, 12);
  const size_t awake = DeviceUsed();

  // Backed up (pageable, through the ring): the pages go, the addresses stay.
  gmr_vmm_pool_sleep_options o =
      SaveTags((1u << kWeights) | (1u << kKv), 0, GMR_VMM_POOL_HOST_PAGEABLE);
  o.staging_bytes = kMiB;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
  EXPECT_FALSE(Mapped(kv));
  EXPECT_FALSE(Mapped(kv + 9 * kPage));
  EXPECT_EQ(0u, DeviceUsed());
  gmr_vmm_pool_range_info info = Info(kv);
  EXPECT_TRUE(info.asleep);
  EXPECT_TRUE(info.saved);
  EXPECT_EQ(5 * kPage, info.committed_bytes) << "committed, asleep";
  gmr_vmm_pool_tag_stats t = TagStats(1u << kKv);
  EXPECT_EQ(1u, t.asleep_count);
  EXPECT_EQ(5 * kPage, t.saved_bytes);
  EXPECT_EQ(5 * kPage + 2 * kPage, Stats(pool_).host_pageable_bytes);
  gmr_test::ExpectBooksMatchDevice(pool_);
  // No commit or decommit while asleep; a query is fine.
  EXPECT_EQ(GMR_ERR_BUSY, Commit(kv + 3 * kPage, kPage, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "asleep")) << f.message;
  EXPECT_EQ(GMR_ERR_BUSY, Decommit(kv, kPage, &f));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_TRUE(Same(kv, 3 * kPage, 11));
  EXPECT_TRUE(Same(kv + 8 * kPage, 2 * kPage, 12));
  EXPECT_TRUE(Same(weights, 2 * kPage, 10));
  EXPECT_FALSE(Mapped(kv + 3 * kPage)) << "what was not committed is not now";
  EXPECT_EQ(awake, DeviceUsed());
  gmr_test::ExpectBooksMatchDevice(pool_);

  // Discarded (vLLM's level 1 discards the KV cache): mapped again at wake.
  o = SaveTags(1u << kWeights, 0, GMR_VMM_POOL_HOST_PAGEABLE);
  o.staging_bytes = kMiB;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
  EXPECT_FALSE(Info(kv).saved);
  EXPECT_EQ(2 * kPage, Stats(pool_).host_pageable_bytes) << "the weights' backup only";
  // Woken by tag: the weights first; the range sleeps on, and the pool.
  gmr_vmm_pool_wake_options w = GMR_VMM_POOL_WAKE_OPTIONS_INIT;
  w.wake_all = false;
  w.wake_tag_mask = 1u << kWeights;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, &w, &f)) << f.message;
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_TRUE(Info(kv).asleep);
  EXPECT_TRUE(Same(weights, 2 * kPage, 10));
  w.wake_tag_mask = 1u << kKv;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, &w, &f)) << f.message;
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_TRUE(Mapped(kv + 9 * kPage));

  // Kept: stays mapped with its contents; a tag set on the range's first
  // address moves it.
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_tag(pool_, kv, kScratch));
  EXPECT_EQ(kScratch, Info(kv).tag);
  Fill(kv, 3 * kPage, 13);
  o = SaveTags(1u << kWeights, 1u << kScratch, GMR_VMM_POOL_HOST_PINNED);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
  EXPECT_TRUE(Mapped(kv));
  EXPECT_FALSE(Info(kv).asleep);
  EXPECT_TRUE(Same(kv, 3 * kPage, 13));
  EXPECT_EQ(1u, TagStats(1u << kScratch).live_count);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  EXPECT_TRUE(Same(kv, 3 * kPage, 13));
  gmr_test::ExpectBooksMatchDevice(pool_);
  Free(weights, 2 * kPage);
}

TEST_P(VmmRange, ARangeAloneSleepsAndWakes) {
  char *kv = Reserve(4 * kPage);
  ASSERT_EQ(GMR_OK, Commit(kv, 4 * kPage));
  Fill(kv, 4 * kPage, 21);
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_all = true;
  o.staging_bytes = kMiB;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  EXPECT_EQ(0u, DeviceUsed());
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_TRUE(Same(kv, 4 * kPage, 21));
}

TEST_P(VmmRange, FreeingAnAsleepRangeDropsItsBackup) {
  char *kv = Reserve(4 * kPage);
  ASSERT_EQ(GMR_OK, Commit(kv, 2 * kPage));
  gmr_vmm_pool_sleep_options o = SaveTags(UINT64_MAX, 0, GMR_VMM_POOL_HOST_PAGEABLE);
  o.staging_bytes = kMiB;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  EXPECT_EQ(2 * kPage, gmr_test_live_pageable_bytes());
  FreeRange(kv);
  EXPECT_EQ(0u, gmr_test_live_pageable_bytes()) << "the backup went with the range";
  // A range reserved while asleep; nothing to commit yet.
  char *later = Reserve(2 * kPage);
  EXPECT_EQ(GMR_ERR_BUSY, Commit(later, kPage));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  ASSERT_EQ(GMR_OK, Commit(later, kPage));
  gmr_test::ExpectBooksMatchDevice(pool_);
}

TEST_P(VmmRange, ARangeKeepsThePoolFromBeingDestroyed) {
  char *kv = Reserve(2 * kPage);
  ASSERT_EQ(GMR_OK, Commit(kv, kPage));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r_));
  EXPECT_TRUE(Mapped(kv)) << "nothing changed";
}

TEST_P(VmmRange, ASleepDuringACommitWaitsForAllOfIt) {
  char *kv = Reserve(8 * kPage);
  // Each map takes 2 ms: the commit of 8 pages is under way for a while.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_delay(GMR_CUDA_CALL_MEM_MAP, 2000000));
  const uint64_t maps = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_MAP);
  std::atomic<gmr_status> committed{GMR_ERR_INTERNAL};
  std::thread t([&] { committed = Commit(kv, 8 * kPage); });
  while (gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_MAP) == maps) std::this_thread::yield();
  gmr_vmm_pool_sleep_options o = SaveTags(UINT64_MAX, 0, GMR_VMM_POOL_HOST_PINNED);
  gmr_failure f = GMR_FAILURE_INIT;
  const gmr_status slept = gmr_vmm_pool_resource_sleep(pool_, &o, &f);
  t.join();
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_delay(GMR_CUDA_CALL_MEM_MAP, 0));
  ASSERT_EQ(GMR_OK, committed.load());
  ASSERT_EQ(GMR_OK, slept) << f.message;
  // The sleep came after the whole commit: every page asleep and saved.
  gmr_vmm_pool_range_info info = Info(kv);
  EXPECT_EQ(8 * kPage, info.committed_bytes);
  EXPECT_TRUE(info.asleep);
  EXPECT_EQ(8 * kPage, TagStats(UINT64_MAX).saved_bytes);
  for (size_t i = 0; i < 8; ++i) EXPECT_FALSE(Mapped(kv + i * kPage)) << i;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  for (size_t i = 0; i < 8; ++i) EXPECT_TRUE(Mapped(kv + i * kPage)) << i;
  gmr_test::ExpectBooksMatchDevice(pool_);
}

INSTANTIATE_TEST_SUITE_P(Placements, VmmRange,
                         ::testing::Values(gmr_test::Placement::kPages,
                                           gmr_test::Placement::kFine),
                         gmr_test::PlacementName);

// A device with room for 6 pages.
class VmmRangeSmallDevice : public VmmRange {
 protected:
  VmmRangeSmallDevice() { sim_config_.device_memory_bytes = 6 * kPage; }
};

TEST_P(VmmRangeSmallDevice, OutOfMemoryOnCommitChangesNothing) {
  char *kv = Reserve(32 * kPage);
  ASSERT_EQ(GMR_OK, Commit(kv, 2 * kPage));
  Fill(kv, 2 * kPage, 31);
  const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, Commit(kv, 16 * kPage, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "no room")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "nothing was committed")) << f.message;
  EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key());
  EXPECT_EQ(2 * kPage, Info(kv).committed_bytes);
  EXPECT_TRUE(Same(kv, 2 * kPage, 31));
  EXPECT_FALSE(Mapped(kv + 2 * kPage));
  // What fits still commits.
  ASSERT_EQ(GMR_OK, Commit(kv, 6 * kPage, &f)) << f.message;
  EXPECT_TRUE(Same(kv, 2 * kPage, 31));
  gmr_test::ExpectBooksMatchDevice(pool_);
}

INSTANTIATE_TEST_SUITE_P(Placements, VmmRangeSmallDevice,
                         ::testing::Values(gmr_test::Placement::kPages,
                                           gmr_test::Placement::kFine),
                         gmr_test::PlacementName);

}  // namespace
