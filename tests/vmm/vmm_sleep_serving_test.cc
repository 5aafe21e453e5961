// Sleep and wake as a serving engine uses them (issue 23), in both
// placements on the simulation: tags that are saved, discarded or kept;
// pinned and pageable copies; a hundred cycles that hold no more device or
// host memory than one; bad input (a second sleep, a wake without sleep,
// allocation, extension and frees while asleep, a sleep during a capture)
// answered with a clear status that changes nothing; a wake the device has no
// room for, then one that succeeds; statistics that never say more is free
// than is mapped; per-tag figures; and the pool reached from a spec's stack.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "gmr/vmm_pool_sleep.h"
#include "tests/vmm/vmm_sleep_fixture.h"

namespace {

using gmr_test::kMiB;
using gmr_test::kPage;
using gmr_test::Placement;
using gmr_test::Stats;

constexpr uint32_t kWeights = 1, kCache = 2, kScratch = 3;

class VmmSleepServing : public gmr_test::SleepTest {};

TEST_P(VmmSleepServing, SavedTagsComeBackDiscardedOnesAreReleasedKeptOnesStay) {
  // Kept memory first and whole pages, so that it shares no page (or, in
  // fine placement, no handle) with the rest.
  void *scratch = Alloc(2 * kPage, kScratch);
  void *weights = Alloc(3 * kPage + 1000, kWeights);
  void *cache = Alloc(2 * kPage, kCache);
  Fill(scratch, 2 * kPage, 1);
  Fill(weights, 3 * kPage + 1000, 2);
  Fill(cache, 2 * kPage, 3);
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights, 1u << kScratch);
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_TRUE(Mapped(scratch)) << "a kept tag stays mapped";
  EXPECT_TRUE(Same(scratch, 2 * kPage, 1)) << "and keeps its contents";
  EXPECT_FALSE(Mapped(weights));
  EXPECT_FALSE(Mapped(cache));
  EXPECT_EQ(Stats(pool_).mapped_bytes, DeviceUsed());
  EXPECT_LE(DeviceUsed(), 2 * kPage + (Fine() ? kPage : 0)) << "only what the kept tag holds";
  gmr_vmm_pool_tag_stats w = TagStats(1u << kWeights);
  EXPECT_EQ(1u, w.asleep_count);
  EXPECT_EQ(w.asleep_bytes, w.saved_bytes);
  EXPECT_TRUE(w.saved_pinned);
  EXPECT_EQ(w.saved_bytes, PinnedUsed()) << "one pinned copy, of the weights only";
  gmr_vmm_pool_tag_stats k = TagStats(1u << kScratch);
  EXPECT_EQ(1u, k.live_count);
  EXPECT_EQ(0u, k.asleep_count);
  gmr_vmm_pool_tag_stats c = TagStats(1u << kCache);
  EXPECT_EQ(1u, c.asleep_count);
  EXPECT_EQ(0u, c.saved_bytes) << "the cache is discarded";
  gmr_test::ExpectBooksMatchDevice(pool_);

  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_TRUE(Same(weights, 3 * kPage + 1000, 2));
  EXPECT_TRUE(Same(scratch, 2 * kPage, 1));
  Fill(cache, 2 * kPage, 4);  // woke with fresh memory: writable
  EXPECT_TRUE(Same(cache, 2 * kPage, 4));
  EXPECT_EQ(0u, PinnedUsed()) << "the copies went at wake";
  EXPECT_EQ(0u, TagStats(UINT64_MAX).saved_bytes);
  gmr_test::ExpectBooksMatchDevice(pool_);
  Free(scratch, 2 * kPage);
  Free(weights, 3 * kPage + 1000);
  Free(cache, 2 * kPage);
}

TEST_P(VmmSleepServing, AHundredCyclesHoldNoMoreDeviceOrHostMemoryThanOne) {
  void *weights[3] = {Alloc(300 * 1024, kWeights), Alloc(kMiB + 4096, kWeights),
                      Alloc(5000, kWeights)};
  const size_t sizes[3] = {300 * 1024, kMiB + 4096, 5000};
  void *cache = Alloc(kPage, kCache);
  void *small = Alloc(1000, 0);  // untagged, discarded
  for (int i = 0; i < 3; ++i) Fill(weights[i], sizes[i], 10u + static_cast<unsigned>(i));
  Free(Alloc(kPage, kCache), kPage);  // some free memory too
  const size_t awake_device = DeviceUsed();
  size_t asleep_pinned = 0, asleep_device = 0;
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights);
  for (int cycle = 0; cycle < 100; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
    if (cycle == 0) {
      asleep_pinned = PinnedUsed();
      asleep_device = DeviceUsed();
      EXPECT_EQ(0u, asleep_device) << "nothing kept: every byte went back";
      EXPECT_EQ(TagStats(1u << kWeights).saved_bytes, asleep_pinned);
    }
    EXPECT_EQ(asleep_pinned, PinnedUsed());
    EXPECT_EQ(asleep_device, DeviceUsed());
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
    EXPECT_EQ(0u, PinnedUsed()) << "no pinned memory outlives its wake";
    if (cycle == 0) {
      EXPECT_LE(DeviceUsed(), awake_device) << "the free memory stayed given back";
    }
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(Same(weights[i], sizes[i], 10u + static_cast<unsigned>(i))) << i;
    }
  }
  EXPECT_EQ(gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_ALLOC),
            gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE_HOST));
  EXPECT_EQ(100u, Stats(pool_).sleep_count);
  EXPECT_EQ(100u, Stats(pool_).wake_count);
  gmr_test::ExpectBooksMatchDevice(pool_);
  for (int i = 0; i < 3; ++i) Free(weights[i], sizes[i]);
  Free(cache, kPage);
  Free(small, 1000);
}

TEST_P(VmmSleepServing, PageableCopiesHoldOnlyTheStagingRingPinned) {
  void *big = Alloc(2 * kPage, kWeights);   // mmap'd copy
  void *little = Alloc(5000, kWeights);     // malloc'd copy (fine placement: 5120 bytes)
  Fill(big, 2 * kPage, 5);
  Fill(little, 5000, 6);
  gmr_vmm_pool_sleep_options o =
      SaveTags(1u << kWeights, 0, GMR_VMM_POOL_HOST_PAGEABLE);
  o.staging_bytes = kMiB;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  EXPECT_EQ(kMiB, PinnedUsed()) << "the ring, and no backup";
  gmr_vmm_pool_tag_stats s = TagStats(UINT64_MAX);
  EXPECT_EQ(2u, s.saved_count);
  EXPECT_FALSE(s.saved_pinned);
  EXPECT_EQ(s.asleep_bytes, s.saved_bytes);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_ALLOC)) << "the ring only";
  gmr_vmm_pool_resource_stats st = gmr_test::Stats(pool_);
  EXPECT_EQ(kMiB, st.staging_bytes);
  EXPECT_EQ(kMiB, st.host_pinned_bytes);
  EXPECT_EQ(s.saved_bytes, st.host_pageable_bytes);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_TRUE(Same(big, 2 * kPage, 5));
  EXPECT_TRUE(Same(little, 5000, 6));
  EXPECT_EQ(kMiB, PinnedUsed()) << "awake: the ring stays, bounded by staging_bytes";
  EXPECT_EQ(0u, gmr_test::Stats(pool_).host_pageable_bytes);
  // Pageable copies also go with a free while asleep; the ring is reused.
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  Free(big, 2 * kPage);
  EXPECT_EQ(1u, TagStats(UINT64_MAX).saved_count);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_TRUE(Same(little, 5000, 6));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_ALLOC)) << "pinned once";
  Free(little, 5000);
}

TEST_P(VmmSleepServing, BadInputGetsAClearStatusAndChangesNothing) {
  void *a = Alloc(2 * kPage, kWeights);
  void *b = Alloc(kPage, kWeights);
  Fill(a, 2 * kPage, 7);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_wake(pool_, nullptr, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "not asleep")) << f.message;
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
  const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);

  // A second sleep (vLLM issue 36651's double release starts so).
  EXPECT_EQ(GMR_ERR_BUSY, gmr_vmm_pool_resource_sleep(pool_, &o, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "asleep already")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "wake it")) << f.message;
  // Allocation and extension while asleep.
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate_ex(r_, kPage, 0, nullptr, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "asleep")) << f.message;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate_ex(r_, 100, 0, nullptr, &p, &f));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_extend(r_, a, 2 * kPage, 4 * kPage, 0, nullptr, &f));
  EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key());

  // A free while asleep is allowed and gives its copy back at once; a
  // second free of it is a double free.
  const size_t pinned = PinnedUsed();
  Free(b, kPage);
  EXPECT_EQ(pinned - kPage, PinnedUsed());
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, b, kPage, 0, nullptr));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r_)) << "an allocation is asleep";
  gmr_test::ExpectBooksMatchDevice(pool_);
  // Freeing the last asleep allocation does not wake the pool.
  Free(a, 2 * kPage);
  EXPECT_EQ(0u, PinnedUsed());
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate(r_, 100, 0, nullptr, &p));
  gmr_test::ExpectBooksMatchDevice(pool_);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_wake(pool_, nullptr, &f));
  gmr_test::ExpectBooksMatchDevice(pool_);
  p = Alloc(3 * kPage, 0);  // the freed addresses serve again
  Fill(p, 3 * kPage, 8);
  EXPECT_TRUE(Same(p, 3 * kPage, 8));
  Free(p, 3 * kPage);
}

TEST_P(VmmSleepServing, ASleepDuringACaptureIsRefusedAndChangesNothing) {
  void *a = Alloc(kPage, kWeights);
  Fill(a, kPage, 9);
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_vmm_pool_resource_sleep(pool_, &o, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "capture")) << f.message;
  EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key());
  gmr_graph g = nullptr;
  EXPECT_NE(GMR_OK, gmr_cuda_stream_end_capture(s, &g)) << "the driver invalidated that capture";
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  EXPECT_TRUE(Same(a, kPage, 9));
  Free(a, kPage);
}

TEST_P(VmmSleepServing, StatisticsNeverSayMoreIsFreeThanMapped) {
  // Free bytes on pages that sleep gives back: small allocations around
  // free gaps, asleep neighbours, a free while asleep.
  void *a = Alloc(kMiB, kWeights);
  void *gap = Alloc(kMiB / 2, kCache);
  void *b = Alloc(kMiB, kWeights);
  void *c = Alloc(3 * kMiB, kCache);
  Free(gap, kMiB / 2);
  gmr_test::ExpectBooksMatchDevice(pool_);
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  EXPECT_EQ(0u, Stats(pool_).mapped_bytes);
  EXPECT_EQ(0u, Stats(pool_).free_bytes) << "free bytes on pages given back are no memory";
  gmr_test::ExpectBooksMatchDevice(pool_);
  Free(c, 3 * kMiB);
  gmr_test::ExpectBooksMatchDevice(pool_);
  gmr_vmm_pool_wake_options w = GMR_VMM_POOL_WAKE_OPTIONS_INIT;
  w.wake_all = false;
  w.wake_tag_mask = 1u << kWeights;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, &w, nullptr));
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_)) << "nothing else sleeps";
  gmr_test::ExpectBooksMatchDevice(pool_);
  Free(a, kMiB);
  Free(b, kMiB);
  gmr_test::ExpectBooksMatchDevice(pool_);
}

// Issue 30: in pages placement a small allocation asleep (its chunk's pages
// given back) was still counted live: 1 MiB live with 0 held. Memory info
// counts as live only what lies on memory the pool holds, in both
// placements: asleep allocations, small ones included, are not.
TEST_P(VmmSleepServing, MemoryInfoCountsAsLiveOnlyWhatLiesOnHeldMemory) {
  void *kept = Alloc(kPage, kScratch);  // first and whole: it shares nothing
  void *small = Alloc(kMiB, kWeights);  // pages placement: the small path
  void *page = Alloc(kPage, kCache);
  gmr_memory_info awake = Info();
  EXPECT_EQ(2 * kPage + kMiB, awake.live_bytes);
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights, 1u << kScratch);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  gmr_memory_info asleep = Info();
  EXPECT_EQ(kPage, asleep.live_bytes) << "only the kept allocation lies on memory";
  EXPECT_LE(asleep.live_bytes + asleep.free_bytes, asleep.held_bytes);
  EXPECT_EQ(Stats(pool_).mapped_bytes, asleep.held_bytes);
  gmr_test::ExpectBooksMatchDevice(pool_);
  // Freeing the asleep small block changes no memory held or live.
  Free(small, kMiB);
  gmr_memory_info freed = Info();
  EXPECT_EQ(asleep.held_bytes, freed.held_bytes);
  EXPECT_EQ(kPage, freed.live_bytes);
  gmr_test::ExpectBooksMatchDevice(pool_);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_EQ(2 * kPage, Info().live_bytes);
  gmr_test::ExpectBooksMatchDevice(pool_);
  // A sleep that keeps nothing: nothing held, nothing live.
  small = Alloc(kMiB, kWeights);
  Free(kept, kPage);
  o = SaveTags(0);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  gmr_memory_info none = Info();
  EXPECT_EQ(0u, none.held_bytes);
  EXPECT_EQ(0u, none.live_bytes);
  EXPECT_EQ(0u, none.free_bytes);
  gmr_test::ExpectBooksMatchDevice(pool_);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_EQ(kPage + kMiB, Info().live_bytes);
  Free(small, kMiB);
  Free(page, kPage);
}

TEST_P(VmmSleepServing, AWakeOfSomeTagsLeavesThePoolAsleepUntilTheRestWakes) {
  void *w = Alloc(kPage, kWeights);
  void *c = Alloc(kPage, kCache);
  Fill(w, kPage, 11);
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  gmr_vmm_pool_wake_options wo = GMR_VMM_POOL_WAKE_OPTIONS_INIT;
  wo.wake_all = false;
  wo.wake_tag_mask = 1u << kWeights;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, &wo, nullptr));
  EXPECT_TRUE(Same(w, kPage, 11));
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate(r_, 100, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, &wo, nullptr)) << "nothing of tag 1 left";
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  wo.wake_tag_mask = 1u << kCache;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, &wo, nullptr));
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
  Free(w, kPage);
  Free(c, kPage);
}

TEST_P(VmmSleepServing, TagStatsAnswerPerTagAndRefuseBadArguments) {
  void *w = Alloc(3 * kPage, kWeights);
  void *c = Alloc(kPage, kCache);
  gmr_vmm_pool_tag_stats s = TagStats(1u << kWeights);
  EXPECT_EQ(3 * kPage, s.live_bytes);
  EXPECT_EQ(1u, s.live_count);
  EXPECT_EQ(4 * kPage, TagStats(UINT64_MAX).live_bytes);
  EXPECT_EQ(0u, TagStats(uint64_t{1} << 40).live_count);
  gmr_vmm_pool_tag_stats bad = GMR_VMM_POOL_TAG_STATS_INIT;
  bad.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_get_tag_stats(pool_, 1, &bad));
  bad = GMR_VMM_POOL_TAG_STATS_INIT;
  bad.size = 8;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_get_tag_stats(pool_, 1, &bad));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_get_tag_stats(nullptr, 1, &s));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_get_tag_stats(pool_, 1, nullptr));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_tag(pool_, c, kWeights));
  EXPECT_EQ(2u, TagStats(1u << kWeights).live_count);
  Free(w, 3 * kPage);
  Free(c, kPage);
}

TEST_P(VmmSleepServing, AVersionOneOptionsStructIsReadAsSuch) {
  void *a = Alloc(kPage, kScratch);
  Fill(a, kPage, 12);
  // A program built against version 1: the struct ends at save_tag_mask.
  struct {
    gmr_vmm_pool_sleep_options head;
  } old;
  std::memset(&old, 0xff, sizeof old);  // what lies past version 1 must not be read
  old.head.size = offsetof(gmr_vmm_pool_sleep_options, save_tag_mask) + sizeof(uint64_t);
  old.head.version = 1;
  old.head.save_all = true;
  old.head.save_tag_mask = 0;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &old.head, nullptr));
  EXPECT_FALSE(Mapped(a)) << "keep_tag_mask is version 2's: nothing kept";
  EXPECT_EQ(kPage, PinnedUsed()) << "pinned, version 1's only kind";
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_TRUE(Same(a, kPage, 12));
  Free(a, kPage);
}

INSTANTIATE_TEST_SUITE_P(Placements, VmmSleepServing,
                         ::testing::Values(Placement::kPages, Placement::kFine),
                         gmr_test::PlacementName);

// A wake the device has no room for fails with a message that says what to
// do, leaves everything asleep with its copies, and succeeds once memory is
// free.
class VmmSleepSmallDevice : public gmr_test::SleepTest {
 protected:
  VmmSleepSmallDevice() { sim_config_.device_memory_bytes = 8 * kPage; }
};

TEST_P(VmmSleepSmallDevice, AWakeWithoutRoomFailsClearlyThenSucceeds) {
  void *w = Alloc(3 * kPage, kWeights);
  void *c = Alloc(2 * kPage + 4096, kCache);
  Fill(w, 3 * kPage, 13);
  Fill(c, 2 * kPage + 4096, 14);
  gmr_vmm_pool_sleep_options o = SaveTags((1u << kWeights) | (1u << kCache));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  // Another user takes the device's memory meanwhile.
  gmr_vmm_pool_resource *thief = nullptr;
  gmr_vmm_pool_resource_config tc = gmr_test::TestConfig(8);
  ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&tc, &thief, nullptr));
  gmr_resource *t = gmr_vmm_pool_resource_as_resource(thief);
  void *other = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(t, 6 * kPage, 0, nullptr, &other));
  const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_vmm_pool_resource_wake(pool_, nullptr, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "cuMemCreate")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "free device memory, then wake again")) << f.message;
  EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key()) << "nothing lost, nothing held";
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  gmr_test::ExpectInvariants(pool_);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(t, other, 6 * kPage, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_destroy(t));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  EXPECT_TRUE(Same(w, 3 * kPage, 13));
  EXPECT_TRUE(Same(c, 2 * kPage + 4096, 14));
  Free(w, 3 * kPage);
  Free(c, 2 * kPage + 4096);
}

INSTANTIATE_TEST_SUITE_P(Placements, VmmSleepSmallDevice,
                         ::testing::Values(Placement::kPages, Placement::kFine),
                         gmr_test::PlacementName);

// A program that builds its allocator from a spec reaches the pool under
// the adaptors, and sleeps and wakes it there.
TEST(VmmSleepFromASpec, FindReachesThePoolUnderAdaptors) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_enable(nullptr));
  gmr_stack *stack = nullptr;
  gmr_spec_error err;
  ASSERT_EQ(GMR_OK, gmr_stack_create("tracking > limiting(limit=1GiB) > vmm", &stack, &err))
      << err.message;
  gmr_resource *top = gmr_stack_as_resource(stack);
  gmr_vmm_pool_resource *pool =
      gmr_vmm_pool_resource_from_resource(gmr_resource_find(top, "vmm_pool_resource"));
  ASSERT_NE(nullptr, pool);
  EXPECT_EQ(pool, gmr_vmm_pool_resource_from_resource(gmr_resource_find(
                      gmr_vmm_pool_resource_as_resource(pool), "vmm_pool_resource")));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool, kWeights));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 5 * kMiB, 0, nullptr, &p));
  std::memset(p, 0x3c, 5 * kMiB);
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_tag_mask = 1u << kWeights;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool, &o, nullptr));
  void *q = nullptr;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate(top, 100, 0, nullptr, &q))
      << "refused through the adaptors too";
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool, nullptr, nullptr));
  EXPECT_EQ(0x3c, static_cast<unsigned char *>(p)[5 * kMiB - 1]);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top, p, 5 * kMiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));

  ASSERT_EQ(GMR_OK, gmr_stack_create("pool > cuda", &stack, &err)) << err.message;
  EXPECT_EQ(nullptr, gmr_vmm_pool_resource_from_resource(
                         gmr_resource_find(gmr_stack_as_resource(stack), "vmm_pool_resource")));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
  EXPECT_EQ(nullptr,
            gmr_vmm_pool_resource_from_resource(gmr_resource_find(nullptr, "vmm_pool_resource")));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_disable());
}

}  // namespace
