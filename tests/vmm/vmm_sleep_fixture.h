// tests/vmm/vmm_sleep_fixture.h: a VMM resource on the simulation, vmm or
// vmm_pages (the test's parameter), with the helpers the sleep and wake
// tests share: patterned contents, the simulated device's and pinned host
// memory, and a snapshot of everything a failed call must leave unchanged.
#ifndef GMR_TESTS_VMM_VMM_SLEEP_FIXTURE_H_
#define GMR_TESTS_VMM_VMM_SLEEP_FIXTURE_H_

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/vmm_pool_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/host_probe.h"
#include "tests/vmm/vmm_test_util.h"

namespace gmr_test {

// Everything a failed sleep or wake must leave as it was.
struct SleepSnapshot {
  std::string layout;
  gmr_vmm_pool_resource_stats stats;
  gmr_cuda_sim_vmm_usage vmm;
  gmr_cuda_sim_usage device, host;
  size_t pageable; /* backups' pageable bytes, counted where mapped */
  bool asleep;

  auto Key() const {
    return std::tuple_cat(
        std::make_tuple(layout, stats.mapped_bytes, stats.reserved_bytes, stats.live_bytes,
                        stats.live_count, stats.free_bytes, stats.hole_bytes,
                        stats.asleep_bytes, stats.asleep_count, stats.saved_bytes),
        std::make_tuple(stats.host_pinned_bytes, stats.host_pageable_bytes,
                        stats.range_committed_bytes, stats.range_mapped_bytes),
        std::make_tuple(vmm.reservation_count, vmm.physical_count, vmm.physical_bytes,
                        vmm.mapping_count, vmm.mapped_bytes, device.used_bytes,
                        host.used_bytes, pageable, asleep));
  }
};

inline SleepSnapshot TakeSnapshot(gmr_vmm_pool_resource *pool) {
  SleepSnapshot s;
  s.layout = Layout(pool);
  s.stats = Stats(pool);
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&s.vmm));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &s.device));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_host_usage(&s.host));
  s.pageable = gmr_test_live_pageable_bytes();
  s.asleep = gmr_vmm_pool_resource_is_asleep(pool);
  return s;
}

// The books agree with the (simulated) device, the pool being its only
// user: what the pool says it holds (footprint, memory info, statistics) is
// exactly what is created, what is mapped once unreleased memory (refused
// by cuMemRelease, kept) is set apart, and the pinned host memory is its
// pinned copies and the unfreed ones (refused by cudaFreeHost, kept); it
// never says more is free than it holds.
inline void ExpectBooksMatchDevice(gmr_vmm_pool_resource *pool) {
  SleepSnapshot s = TakeSnapshot(pool);
  const size_t ranges = s.stats.range_mapped_bytes;
  EXPECT_EQ(s.stats.mapped_bytes + ranges, s.vmm.physical_bytes)
      << "physical memory the books do not know";
  EXPECT_EQ(s.stats.mapped_bytes + ranges, s.device.used_bytes)
      << "device memory the books do not know";
  EXPECT_EQ(s.stats.mapped_bytes - s.stats.unreleased_bytes + ranges -
                s.stats.range_unreleased_bytes,
            s.vmm.mapped_bytes)
      << "mappings the books do not know";
  EXPECT_LE(s.stats.free_bytes, s.stats.mapped_bytes) << "more free than mapped";
  gmr_resource *r = gmr_vmm_pool_resource_as_resource(pool);
  gmr_footprint fp{};
  EXPECT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(s.stats.mapped_bytes, fp.held_bytes);
  EXPECT_LE(fp.held_bytes, fp.peak_held_bytes);
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  EXPECT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &info));
  EXPECT_EQ(s.stats.mapped_bytes, info.held_bytes);
  EXPECT_LE(info.free_bytes, info.held_bytes);
  EXPECT_LE(info.live_bytes + info.free_bytes, info.held_bytes) << "live or free on no memory";
  EXPECT_LE(info.largest_free_block_bytes, info.free_bytes);
  gmr_vmm_pool_tag_stats t = GMR_VMM_POOL_TAG_STATS_INIT;
  EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_get_tag_stats(pool, UINT64_MAX, &t));
  EXPECT_EQ(s.stats.host_pinned_bytes, s.host.used_bytes)
      << "pinned host memory the books do not know";
  // Pinned: the ring, pinned backups asleep, kept pinned ones, refused ones;
  // pageable: backups asleep and kept ones. Kept ones are whatever is left.
  const size_t saved_pinned = t.saved_pinned ? t.saved_bytes : 0;
  const size_t saved_pageable = t.saved_pinned ? 0 : t.saved_bytes;
  ASSERT_GE(s.stats.host_pinned_bytes,
            s.stats.staging_bytes + saved_pinned + s.stats.unfreed_host_bytes);
  const size_t kept_pinned = s.stats.host_pinned_bytes - s.stats.staging_bytes - saved_pinned -
                             s.stats.unfreed_host_bytes;
  ASSERT_GE(s.stats.kept_backup_bytes, kept_pinned);
  EXPECT_EQ(saved_pageable + s.stats.kept_backup_bytes - kept_pinned, s.stats.host_pageable_bytes)
      << "pageable backups the books do not know";
  EXPECT_EQ(s.stats.host_pageable_bytes, gmr_test_live_pageable_bytes())
      << "pageable host memory the books do not know";
  ExpectInvariants(pool);
}

// Patterned contents (a byte every 997 and the last one), and their check.
inline void Fill(void *p, size_t bytes, unsigned seed) {
  auto *b = static_cast<unsigned char *>(p);
  for (size_t i = 0; i < bytes; i += 997) b[i] = static_cast<unsigned char>(seed * 31 + i / 997);
  b[bytes - 1] = static_cast<unsigned char>(seed ^ 0x5a);
}

inline bool Same(const void *p, size_t bytes, unsigned seed) {
  const auto *b = static_cast<const unsigned char *>(p);
  for (size_t i = 0; i < bytes; i += 997) {
    if (b[i] != static_cast<unsigned char>(seed * 31 + i / 997)) return false;
  }
  return b[bytes - 1] == static_cast<unsigned char>(seed ^ 0x5a);
}

// A pool on the simulation in `placement`, VA chunks of 64 pages; vmm: no
// growth tail, several handles, one shard.
inline gmr_vmm_pool_resource_config SleepConfig(Placement placement) {
  gmr_vmm_pool_resource_config c = TestConfig(64);
  if (placement == Placement::kFine) {
    c.growth_percent = 0;
    c.handle_divisor = 4; /* several handles */
    c.shard_count = 1;
  }
  return c;
}

inline std::string PlacementName(const ::testing::TestParamInfo<Placement> &info) {
  return info.param == Placement::kPages ? "Pages" : "Fine";
}

class SleepTest : public SimTest, public ::testing::WithParamInterface<Placement> {
 protected:
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;

  gmr_vmm_pool_resource_config Config() const { return SleepConfig(GetParam()); }
  void SetUp() override {
    SimTest::SetUp();
    gmr_vmm_pool_resource_config c = Config();
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, CreateVmm(GetParam(), &c, &pool_, &f)) << f.message;
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
  }
  void TearDown() override {
    if (pool_ != nullptr) {
      if (gmr_vmm_pool_resource_is_asleep(pool_)) {
        EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
      }
      ExpectInvariants(pool_);
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    }
    SimTest::TearDown();
  }
  bool Fine() const { return GetParam() == Placement::kFine; }
  void *Alloc(size_t bytes, uint32_t tag) {
    EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, tag));
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, bytes, 0, nullptr, &p, &f)) << f.message;
    return p;
  }
  void Free(void *p, size_t bytes) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, bytes, 0, nullptr));
  }
  gmr_memory_info Info() {
    gmr_memory_info info = GMR_MEMORY_INFO_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_get_memory_info(r_, &info));
    return info;
  }
  static void Fill(void *p, size_t bytes, unsigned seed) { gmr_test::Fill(p, bytes, seed); }
  static bool Same(const void *p, size_t bytes, unsigned seed) {
    return gmr_test::Same(p, bytes, seed);
  }
  static size_t DeviceUsed() {
    gmr_cuda_sim_usage u;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
    return u.used_bytes;
  }
  static size_t PinnedUsed() {
    gmr_cuda_sim_usage u;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_host_usage(&u));
    return u.used_bytes;
  }
  static bool Mapped(const void *p) {
    gmr_cuda_sim_vmm_mapping m;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(p, &m));
    return m.mapped;
  }
  gmr_vmm_pool_tag_stats TagStats(uint64_t mask) {
    gmr_vmm_pool_tag_stats s = GMR_VMM_POOL_TAG_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_get_tag_stats(pool_, mask, &s));
    return s;
  }
  static gmr_vmm_pool_sleep_options SaveTags(uint64_t save, uint64_t keep = 0,
                                             gmr_vmm_pool_host_kind host =
                                                 GMR_VMM_POOL_HOST_PINNED) {
    gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
    o.save_tag_mask = save;
    o.keep_tag_mask = keep;
    o.host = host;
    return o;
  }
};

}  // namespace gmr_test

#endif  // GMR_TESTS_VMM_VMM_SLEEP_FIXTURE_H_
