// What the pool does with memory the driver refuses to take back (issue 30,
// item 5), in both placements: a refused cuMemRelease or cudaFreeHost is
// kept and counted (statistics version 2: unreleased_ and unfreed_ fields),
// the call that met it says so (a sleep or wake done all the same, a trim
// that reports only what went back), the next trim, sleep, wake or destroy
// asks again first, and destroy changes nothing while the driver still
// refuses. vmm_unreleased_faults_test.cc refuses every call in turn.
#include <gtest/gtest.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/vmm_pool_resource.h"
#include "gmr/vmm_pool_sleep.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_sleep_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace {

using gmr_test::ExpectBooksMatchDevice;
using gmr_test::kPage;
using gmr_test::Placement;
using gmr_test::Stats;

constexpr uint32_t kWeights = 1, kCache = 2;

class VmmUnreleased : public gmr_test::SleepTest {
 protected:
  void Refuse(gmr_cuda_call call, uint64_t skip, uint64_t count) {
    const int error = call == GMR_CUDA_CALL_FREE_HOST ? static_cast<int>(cudaErrorLaunchFailure)
                                                      : static_cast<int>(CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(call, skip, count, error));
  }
  void Accept() { ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures()); }
  void Destroy() {
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    pool_ = nullptr;
    gmr_cuda_sim_vmm_usage vmm;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&vmm));
    EXPECT_EQ(0u, vmm.physical_count);
    EXPECT_EQ(0u, DeviceUsed());
    EXPECT_EQ(0u, PinnedUsed());
  }
};

TEST_P(VmmUnreleased, ASleepWhoseReleaseIsRefusedSleepsAndSaysSo) {
  void *weights = Alloc(2 * kPage, kWeights);
  void *cache = Alloc(kPage, kCache);
  Fill(weights, 2 * kPage, 7);
  const size_t held = Stats(pool_).mapped_bytes;
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights);
  Refuse(GMR_CUDA_CALL_MEM_RELEASE, 0, 1);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_vmm_pool_resource_sleep(pool_, &o, &f));
  Accept();
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, f.cuda_error);
  EXPECT_NE(nullptr, std::strstr(f.message, "cuMemRelease failed")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "asleep all the same")) << f.message;
  // Asleep: the allocations gave their pages back but one, which is kept.
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(2u, s.asleep_count);
  EXPECT_EQ(1u, s.unreleased_handle_count);
  EXPECT_LE(kPage, s.unreleased_bytes);
  EXPECT_GT(held, s.unreleased_bytes);
  EXPECT_EQ(s.unreleased_bytes, s.mapped_bytes) << "only the refused memory is still held";
  ExpectBooksMatchDevice(pool_);
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate(r_, kPage, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  // The wake asks for the refused memory first, then maps fresh memory.
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  EXPECT_EQ(0u, Stats(pool_).unreleased_handle_count);
  EXPECT_EQ(held, Stats(pool_).mapped_bytes);
  EXPECT_TRUE(Same(weights, 2 * kPage, 7));
  ExpectBooksMatchDevice(pool_);
  Free(weights, 2 * kPage);
  Free(cache, kPage);
}

TEST_P(VmmUnreleased, TrimReportsOnlyWhatWentBackAndStopsWhileTheDriverRefuses) {
  void *gone = Alloc(4 * kPage, 0);
  void *wall = Alloc(kPage, 0);
  Free(gone, 4 * kPage);
  Refuse(GMR_CUDA_CALL_MEM_RELEASE, 0, UINT64_MAX);
  size_t released = 1;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_trim(r_, &released));
  EXPECT_EQ(0u, released) << "the one page unmapped was not released";
  EXPECT_EQ(1u, Stats(pool_).unreleased_handle_count);
  ExpectBooksMatchDevice(pool_);
  if (!Fine()) {
    EXPECT_EQ("[*1][-3][1]", gmr_test::Layout(pool_));
  }
  char dump[2048];
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_dump(pool_, dump, sizeof dump, nullptr));
  EXPECT_NE(nullptr, std::strstr(dump, "(cuMemRelease refused)")) << dump;
  // Still refused: asked again first, and nothing more is unmapped.
  const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_trim(r_, &released));
  EXPECT_EQ(0u, released);
  EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key());
  Accept();
  const size_t physical = before.vmm.physical_bytes;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  gmr_cuda_sim_vmm_usage vmm;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&vmm));
  EXPECT_EQ(physical - vmm.physical_bytes, released);
  EXPECT_EQ(kPage, vmm.physical_bytes) << "the wall only";
  EXPECT_EQ(0u, Stats(pool_).unreleased_bytes);
  if (!Fine()) {
    EXPECT_EQ("[*4][1]", gmr_test::Layout(pool_));
  }
  ExpectBooksMatchDevice(pool_);
  Free(wall, kPage);
}

TEST_P(VmmUnreleased, DestroyWhileTheDriverStillRefusesChangesNothing) {
  void *p = Alloc(3 * kPage, 0);
  Free(p, 3 * kPage);
  Refuse(GMR_CUDA_CALL_MEM_RELEASE, 0, 1);
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_trim(r_, nullptr));
  Accept();
  ASSERT_EQ(1u, Stats(pool_).unreleased_handle_count);
  const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);
  Refuse(GMR_CUDA_CALL_MEM_RELEASE, 0, UINT64_MAX);
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r_));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r_));
  Accept();
  EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key()) << "a refused destroy changed it";
  ExpectBooksMatchDevice(pool_);
  Destroy(); /* the cause is gone: destroy asks again and goes on */
}

TEST_P(VmmUnreleased, APinnedCopyWhoseFreeIsRefusedIsKeptUntilTheDriverTakesIt) {
  void *a = Alloc(2 * kPage, kWeights);
  void *b = Alloc(kPage, kWeights);
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  const size_t pinned = PinnedUsed();
  // The free of an asleep allocation succeeds; its copy stays pinned, kept.
  Refuse(GMR_CUDA_CALL_FREE_HOST, 0, 1);
  Free(a, 2 * kPage);
  Accept();
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(1u, s.unfreed_host_count);
  EXPECT_EQ(2 * kPage, s.unfreed_host_bytes);
  EXPECT_EQ(pinned, PinnedUsed());
  ExpectBooksMatchDevice(pool_);
  // The wake frees it first (and b's copy at the end).
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_EQ(0u, Stats(pool_).unfreed_host_count);
  EXPECT_EQ(0u, PinnedUsed());
  // Destroy asks too, and changes nothing while the driver refuses.
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  Refuse(GMR_CUDA_CALL_FREE_HOST, 0, UINT64_MAX);
  Free(b, kPage);
  EXPECT_EQ(kPage, Stats(pool_).unfreed_host_bytes);
  const gmr_test::SleepSnapshot before = gmr_test::TakeSnapshot(pool_);
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r_));
  Accept();
  EXPECT_EQ(before.Key(), gmr_test::TakeSnapshot(pool_).Key());
  EXPECT_EQ(kPage, PinnedUsed());
  Destroy();
}

TEST_P(VmmUnreleased, AWakeWhoseCopyCannotBeFreedWakesAndTheNextSleepFreesIt) {
  void *a = Alloc(2 * kPage, kWeights);
  Fill(a, 2 * kPage, 3);
  gmr_vmm_pool_sleep_options o = SaveTags(1u << kWeights);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  Refuse(GMR_CUDA_CALL_FREE_HOST, 0, 1);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_vmm_pool_resource_wake(pool_, nullptr, &f));
  Accept();
  EXPECT_NE(nullptr, std::strstr(f.message, "cudaFreeHost failed")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "woken all the same")) << f.message;
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_TRUE(Same(a, 2 * kPage, 3));
  EXPECT_EQ(2 * kPage, Stats(pool_).unfreed_host_bytes);
  EXPECT_EQ(2 * kPage, PinnedUsed());
  ExpectBooksMatchDevice(pool_);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr))
      << "awake: nothing to wake again";
  // The next sleep frees the kept copy before it makes new ones.
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  EXPECT_EQ(0u, Stats(pool_).unfreed_host_count);
  EXPECT_EQ(2 * kPage, PinnedUsed()) << "this sleep's copy only";
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_TRUE(Same(a, 2 * kPage, 3));
  Free(a, 2 * kPage);
}

// A caller built against version 1 of the statistics gets version 1's
// fields and nothing written past them; version 2 reads the new ones.
TEST_P(VmmUnreleased, StatisticsOfOlderVersionsStopWhereTheyEnded) {
  void *p = Alloc(kPage, 0);
  const size_t v1_bytes = offsetof(gmr_vmm_pool_resource_stats, unreleased_bytes);
  std::vector<unsigned char> buf(sizeof(gmr_vmm_pool_resource_stats) + 16, 0xab);
  gmr_vmm_pool_resource_stats head = GMR_VMM_POOL_RESOURCE_STATS_INIT;
  head.size = v1_bytes;
  head.version = 1;
  std::memcpy(buf.data(), &head, offsetof(gmr_vmm_pool_resource_stats, page_bytes));
  auto *v1 = reinterpret_cast<gmr_vmm_pool_resource_stats *>(buf.data());
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_get_stats(pool_, v1));
  EXPECT_EQ(v1_bytes, v1->size);
  EXPECT_EQ(1u, v1->version);
  EXPECT_EQ(kPage, v1->mapped_bytes);
  for (size_t i = v1_bytes; i < buf.size(); ++i) ASSERT_EQ(0xab, buf[i]) << "byte " << i;
  // Version 2 stops at unfreed_host_count.
  const size_t v2_bytes = offsetof(gmr_vmm_pool_resource_stats, host_pinned_bytes);
  std::fill(buf.begin(), buf.end(), 0xab);
  head.size = v2_bytes;
  head.version = 2;
  std::memcpy(buf.data(), &head, offsetof(gmr_vmm_pool_resource_stats, page_bytes));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_get_stats(pool_, v1));
  EXPECT_EQ(kPage, v1->mapped_bytes);
  EXPECT_EQ(0u, v1->unfreed_host_count);
  for (size_t i = v2_bytes; i < buf.size(); ++i) ASSERT_EQ(0xab, buf[i]) << "byte " << i;
  EXPECT_EQ(3u, GMR_VMM_POOL_RESOURCE_STATS_VERSION);
  const gmr_vmm_pool_resource_stats v3 = Stats(pool_);
  EXPECT_EQ(0u, v3.unreleased_bytes);
  EXPECT_EQ(0u, v3.unfreed_host_count);
  EXPECT_EQ(0u, v3.host_pinned_bytes);
  EXPECT_EQ(0u, v3.range_count);
  Free(p, kPage);
}

INSTANTIATE_TEST_SUITE_P(Placements, VmmUnreleased,
                         ::testing::Values(Placement::kPages, Placement::kFine),
                         gmr_test::PlacementName);

// FINE placement with several shards: each keeps what its driver calls
// refused, the statistics add them up, and every shard is asked again.
class VmmUnreleasedShards : public gmr_test::SimTest {};

TEST_F(VmmUnreleasedShards, EveryShardKeepsAndGivesBackWhatWasRefused) {
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig(64);
  c.shard_count = 4;
  gmr_vmm_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_vmm_resource_create(&c, &pool, nullptr));
  gmr_resource *r = gmr_vmm_pool_resource_as_resource(pool);
  std::vector<void *> ptrs = gmr_test::AllocateFromFourThreads(r);
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, nullptr));
  const size_t held = Stats(pool).mapped_bytes;
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_all = true;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_RELEASE, 0, UINT64_MAX,
                                                CUDA_ERROR_INVALID_VALUE));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_vmm_pool_resource_sleep(pool, &o, nullptr));
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool));
  EXPECT_EQ(held, Stats(pool).unreleased_bytes) << "every shard's memory, kept";
  ExpectBooksMatchDevice(pool);
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_trim(r, nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(held, released);
  EXPECT_EQ(0u, Stats(pool).mapped_bytes);
  ExpectBooksMatchDevice(pool);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool, nullptr, nullptr));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(0x40 + i, static_cast<unsigned char *>(ptrs[i])[kPage - 1]) << i;
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, ptrs[i], kPage + 512 * static_cast<size_t>(i),
                                              0, (gmr_stream)cudaStreamPerThread));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

}  // namespace
