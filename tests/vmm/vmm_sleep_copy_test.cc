// The copies of sleep and wake (issue 33, item 1), in both placements on
// the simulation: pageable backups (the default) through the pool's pinned
// staging ring, cut in chunks that several copy threads move, come back bit
// for bit whatever the sizes, the ring and the thread count; the ring is
// pinned once and is all the pinned memory held while awake; kept backups
// (keep_backup) are reused by the next sleep, pinned or pageable, and the
// rest freed; a hundred cycles hold no more host memory than one; older
// option structs keep their meaning; a copy refused halfway leaves the pool
// asleep with nothing mapped and nothing leaked. Pageable host memory is
// checked where it is mapped (tests/vmm/host_probe.h), not only in the
// books. Timings are the GPU's business (tools/frameworks/serving_check.py).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/vmm_pool_sleep.h"
#include "tests/vmm/host_probe.h"
#include "tests/vmm/vmm_sleep_fixture.h"

namespace {

using gmr_test::kMiB;
using gmr_test::kPage;
using gmr_test::Stats;

constexpr uint32_t kWeights = 1, kCache = 2;

class VmmSleepCopy : public gmr_test::SleepTest {
 protected:
  struct Buffer {
    void *ptr;
    size_t bytes;
    unsigned seed;
  };
  std::vector<Buffer> buffers_;

  // Buffers of many sizes: below a chunk, a chunk and a bit, several ring
  // lengths (with a 1 MiB ring: chunks of 64 to 256 KiB), and odd ones.
  void Populate(unsigned seed) {
    const size_t sizes[] = {5000, 64 * 1024 + 256, 3 * kPage + 12345, 300 * 1024, kMiB,
                            2 * kPage,  256,             kPage - 4096};
    for (size_t bytes : sizes) {
      void *p = Alloc(bytes, kWeights);
      Fill(p, bytes, seed);
      buffers_.push_back({p, bytes, seed++});
    }
  }
  void ExpectContents() {
    for (const Buffer &b : buffers_) {
      EXPECT_TRUE(Same(b.ptr, b.bytes, b.seed)) << "buffer of " << b.bytes << " bytes";
    }
  }
  void FreeAll() {
    for (const Buffer &b : buffers_) Free(b.ptr, b.bytes);
    buffers_.clear();
  }
  static gmr_vmm_pool_sleep_options Options(gmr_vmm_pool_host_kind host, uint32_t threads,
                                            bool keep = false) {
    gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights, 0, host);
    o.staging_bytes = kMiB;
    o.copy_threads = threads;
    o.keep_backup = keep;
    return o;
  }
  void Sleep(const gmr_vmm_pool_sleep_options &o) {
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
  }
  void Wake() {
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  }
};

TEST_P(VmmSleepCopy, PageableBackupsComeBackBitForBitWhateverTheThreads) {
  Populate(11);
  // 0: the pool chooses; 64: more threads than chunks of a small buffer.
  for (uint32_t threads : {1u, 3u, 8u, 0u, 64u}) {
    SCOPED_TRACE("copy_threads " + std::to_string(threads));
    Sleep(Options(GMR_VMM_POOL_HOST_PAGEABLE, threads));
    for (const Buffer &b : buffers_) EXPECT_FALSE(Mapped(b.ptr));
    const gmr_vmm_pool_tag_stats t = TagStats(UINT64_MAX);
    size_t asked = 0;
    for (const Buffer &b : buffers_) asked += b.bytes;
    EXPECT_LE(asked, t.saved_bytes) << "vmm_pages backs up small blocks with their chunk";
    EXPECT_EQ(t.asleep_bytes, t.saved_bytes);
    EXPECT_FALSE(t.saved_pinned);
    const gmr_vmm_pool_resource_stats s = Stats(pool_);
    EXPECT_EQ(t.saved_bytes, s.host_pageable_bytes);
    EXPECT_EQ(t.saved_bytes, gmr_test_live_pageable_bytes()) << "backups as large as the books say";
    EXPECT_EQ(kMiB, s.staging_bytes);
    EXPECT_EQ(kMiB, s.host_pinned_bytes);
    EXPECT_EQ(kMiB, PinnedUsed()) << "only the ring is pinned";
    gmr_test::ExpectBooksMatchDevice(pool_);
    Wake();
    ExpectContents();
    EXPECT_EQ(0u, gmr_test_live_pageable_bytes()) << "the backups went with the wake";
    EXPECT_EQ(kMiB, PinnedUsed()) << "awake: the ring, nothing else";
    gmr_test::ExpectBooksMatchDevice(pool_);
  }
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_ALLOC)) << "the ring, once";
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_CREATE)) << "one copy stream";
  FreeAll();
}

TEST_P(VmmSleepCopy, KeptPinnedBackupsAreReusedAndTheRestFreed) {
  Populate(21);
  const size_t allocs_before = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_ALLOC);
  Sleep(Options(GMR_VMM_POOL_HOST_PINNED, 0, true));
  const size_t saved = TagStats(UINT64_MAX).saved_bytes;
  EXPECT_EQ(TagStats(UINT64_MAX).saved_count,
            gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_ALLOC) - allocs_before)
      << "a pinned backup each";
  Wake();
  ExpectContents();
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(saved, s.kept_backup_bytes) << "kept for the next sleep";
  EXPECT_EQ(saved, s.host_pinned_bytes);
  EXPECT_EQ(saved, PinnedUsed()) << "awake: the kept backups (asked for), no ring";
  gmr_test::ExpectBooksMatchDevice(pool_);
  // The next cycles pin nothing.
  for (unsigned cycle = 0; cycle < 3; ++cycle) {
    for (Buffer &b : buffers_) Fill(b.ptr, b.bytes, b.seed += 7);
    const size_t allocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_ALLOC);
    Sleep(Options(GMR_VMM_POOL_HOST_PINNED, 0, true));
    EXPECT_EQ(allocs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_ALLOC)) << cycle;
    EXPECT_EQ(0u, Stats(pool_).kept_backup_bytes) << "all in use while asleep";
    Wake();
    ExpectContents();
  }
  // Sizes change (whole pages: their own backups in both placements): a new
  // buffer gets a new backup, the freed one's goes.
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].bytes != 2 * kPage) continue;
    Free(buffers_[i].ptr, buffers_[i].bytes);
    buffers_.erase(buffers_.begin() + static_cast<std::ptrdiff_t>(i));
    break;
  }
  void *p = Alloc(3 * kPage, kWeights);
  Fill(p, 3 * kPage, 99);
  buffers_.push_back({p, 3 * kPage, 99});
  const size_t frees = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE_HOST);
  Sleep(Options(GMR_VMM_POOL_HOST_PINNED, 0, true));
  EXPECT_EQ(frees + 1, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE_HOST))
      << "the backup no allocation of that size wanted";
  gmr_test::ExpectBooksMatchDevice(pool_);
  Wake();
  ExpectContents();
  // A sleep that does not keep: its wake frees them all.
  Sleep(Options(GMR_VMM_POOL_HOST_PINNED, 0, false));
  Wake();
  ExpectContents();
  EXPECT_EQ(0u, Stats(pool_).kept_backup_bytes);
  EXPECT_EQ(0u, PinnedUsed());
  FreeAll();
}

TEST_P(VmmSleepCopy, KeptPageableBackupsAreReused) {
  Populate(31);
  Sleep(Options(GMR_VMM_POOL_HOST_PAGEABLE, 3, true));
  const size_t saved = TagStats(UINT64_MAX).saved_bytes;
  Wake();
  ExpectContents();
  EXPECT_EQ(saved, gmr_test_live_pageable_bytes()) << "kept while awake";
  EXPECT_EQ(saved, Stats(pool_).kept_backup_bytes);
  EXPECT_EQ(saved, Stats(pool_).host_pageable_bytes);
  gmr_test::ExpectBooksMatchDevice(pool_);
  for (Buffer &b : buffers_) Fill(b.ptr, b.bytes, b.seed += 3);
  Sleep(Options(GMR_VMM_POOL_HOST_PAGEABLE, 3, false));
  EXPECT_EQ(saved, gmr_test_live_pageable_bytes()) << "reused, none made";
  Wake();
  ExpectContents();
  EXPECT_EQ(0u, gmr_test_live_pageable_bytes());
  gmr_test::ExpectBooksMatchDevice(pool_);
  FreeAll();
}

TEST_P(VmmSleepCopy, AHundredCyclesHoldNoMoreHostMemoryThanOne) {
  Populate(41);
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights, 0, GMR_VMM_POOL_HOST_PAGEABLE);
  o.staging_bytes = kMiB;
  size_t asleep_pageable = 0, asleep_pinned = 0;
  for (int cycle = 0; cycle < 100; ++cycle) {
    Sleep(o);
    if (cycle == 0) {
      asleep_pageable = gmr_test_live_pageable_bytes();
      asleep_pinned = PinnedUsed();
    }
    ASSERT_EQ(asleep_pageable, gmr_test_live_pageable_bytes()) << cycle;
    ASSERT_EQ(asleep_pinned, PinnedUsed()) << cycle;
    Wake();
    ASSERT_EQ(0u, gmr_test_live_pageable_bytes()) << cycle;
    ASSERT_EQ(kMiB, PinnedUsed()) << cycle;
  }
  ExpectContents();
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_ALLOC));
  FreeAll();
}

TEST_P(VmmSleepCopy, ARingOfAnotherSizeReplacesTheOld) {
  Populate(51);
  Sleep(Options(GMR_VMM_POOL_HOST_PAGEABLE, 2));
  Wake();
  gmr_vmm_pool_sleep_options o = Options(GMR_VMM_POOL_HOST_PAGEABLE, 2);
  o.staging_bytes = 3 * kMiB;
  Sleep(o);
  EXPECT_EQ(3 * kMiB, Stats(pool_).staging_bytes);
  EXPECT_EQ(3 * kMiB, PinnedUsed()) << "the old ring went";
  Wake();
  ExpectContents();
  // Below the least: 1 MiB.
  o.staging_bytes = 4096;
  Sleep(o);
  EXPECT_EQ(kMiB, Stats(pool_).staging_bytes);
  Wake();
  ExpectContents();
  // Pinned backups need no ring: the one there stays as it is.
  Sleep(Options(GMR_VMM_POOL_HOST_PINNED, 0));
  EXPECT_EQ(kMiB, Stats(pool_).staging_bytes);
  Wake();
  ExpectContents();
  FreeAll();
}

TEST_P(VmmSleepCopy, OlderOptionStructsKeepTheirMeaning) {
  Populate(61);
  // Version 2 ended with host: what it names, a default ring, nothing kept.
  gmr_vmm_pool_sleep_options v2 = SaveTags(1u << kWeights, 0, GMR_VMM_POOL_HOST_PINNED);
  v2.size = offsetof(gmr_vmm_pool_sleep_options, staging_bytes);
  v2.version = 2;
  v2.keep_backup = true; /* past its size: never read */
  Sleep(v2);
  EXPECT_TRUE(TagStats(UINT64_MAX).saved_pinned);
  EXPECT_EQ(0u, Stats(pool_).staging_bytes);
  Wake();
  ExpectContents();
  EXPECT_EQ(0u, Stats(pool_).kept_backup_bytes);
  // Version 1 ended with save_tag_mask: pinned, as its default was.
  gmr_vmm_pool_sleep_options v1 = SaveTags(1u << kWeights, 0, GMR_VMM_POOL_HOST_PAGEABLE);
  v1.size = offsetof(gmr_vmm_pool_sleep_options, keep_tag_mask);
  v1.version = 1;
  Sleep(v1);
  EXPECT_TRUE(TagStats(UINT64_MAX).saved_pinned);
  Wake();
  ExpectContents();
  // Version 3's default (GMR_VMM_POOL_SLEEP_OPTIONS_INIT): pageable.
  gmr_vmm_pool_sleep_options v3 = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  EXPECT_EQ(GMR_VMM_POOL_HOST_PAGEABLE, v3.host);
  EXPECT_EQ(0u, v3.staging_bytes);
  EXPECT_FALSE(v3.keep_backup);
  FreeAll();
}

TEST_P(VmmSleepCopy, TooManyCopyThreadsAreRefused) {
  Populate(71);
  const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);
  gmr_vmm_pool_sleep_options o = Options(GMR_VMM_POOL_HOST_PAGEABLE, 65);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_sleep(pool_, &o, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "copy_threads 65")) << f.message;
  EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key());
  FreeAll();
}

TEST_P(VmmSleepCopy, ACopyRefusedHalfwayLeavesTheWakeUndone) {
  Populate(81);
  Sleep(Options(GMR_VMM_POOL_HOST_PAGEABLE, 3));
  for (gmr_cuda_call call : {GMR_CUDA_CALL_MEMCPY_ASYNC, GMR_CUDA_CALL_EVENT_RECORD,
                             GMR_CUDA_CALL_EVENT_SYNCHRONIZE}) {
    SCOPED_TRACE(gmr_cuda_call_name(call));
    const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);
    // Halfway: the 20th call of its kind (the 1 MiB ring holds 4 chunks of
    // 256 KiB here, and some 50 chunks are copied).
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(call, 19, 1, cudaErrorLaunchFailure));
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_ERR_CUDA, gmr_vmm_pool_resource_wake(pool_, nullptr, &f));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    EXPECT_NE(nullptr, std::strstr(f.message, gmr_cuda_call_name(call))) << f.message;
    EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
    for (const Buffer &b : buffers_) EXPECT_FALSE(Mapped(b.ptr)) << "nothing stays mapped";
    EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key());
    gmr_test::ExpectBooksMatchDevice(pool_);
  }
  Wake();
  ExpectContents();
  // And a sleep refused halfway: awake, intact, no backup left.
  for (gmr_cuda_call call : {GMR_CUDA_CALL_MEMCPY_ASYNC, GMR_CUDA_CALL_EVENT_SYNCHRONIZE}) {
    SCOPED_TRACE(gmr_cuda_call_name(call));
    const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(call, 19, 1, cudaErrorLaunchFailure));
    const gmr_vmm_pool_sleep_options o = Options(GMR_VMM_POOL_HOST_PAGEABLE, 3);
    EXPECT_EQ(GMR_ERR_CUDA, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
    EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key());
    EXPECT_EQ(0u, gmr_test_live_pageable_bytes());
    ExpectContents();
  }
  FreeAll();
}

// Once a wake's ring wraps, the caller frees every slot whose copy reached
// the device (queried), not one slot per chunk queued: with one slot freed
// per chunk, one copy thread at a time could fill (5-7 GB/s on an H100,
// serving_check run of 2026-12-07). A refused query only frees later.
TEST_P(VmmSleepCopy, AWrappedRingIsFreedAsCopiesLandAndARefusedQueryOnlyWaits) {
  Populate(91);
  for (bool refuse_queries : {false, true}) {
    SCOPED_TRACE(refuse_queries ? "queries refused" : "queries answered");
    Sleep(Options(GMR_VMM_POOL_HOST_PAGEABLE, 3));
    const uint64_t queries = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_QUERY);
    const uint64_t syncs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_SYNCHRONIZE);
    if (refuse_queries) {
      ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_EVENT_QUERY, 0, UINT64_MAX,
                                                    cudaErrorLaunchFailure));
    }
    Wake();
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    ExpectContents();
    // About 50 chunks through 4 slots: a query after each chunk queued.
    EXPECT_LE(queries + 40u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_QUERY));
    EXPECT_LE(syncs + 40u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_SYNCHRONIZE))
        << "the slot the next chunk takes is still waited for";
    gmr_test::ExpectBooksMatchDevice(pool_);
  }
  FreeAll();
}

INSTANTIATE_TEST_SUITE_P(Placements, VmmSleepCopy,
                         ::testing::Values(gmr_test::Placement::kPages,
                                           gmr_test::Placement::kFine),
                         gmr_test::PlacementName);

}  // namespace
