// Sleep and wake on the simulation: every page goes back to the device while
// the addresses stay; saved contents come back bit for bit; tags choose what
// is saved and what wakes; a pool asleep refuses allocations; frees of asleep
// allocations drop their copies.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/vmm_pool_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace {

using gmr_test::kPage;
using gmr_test::Layout;
using gmr_test::Stats;

class VmmPoolSleep : public gmr_test::SimTest {
 protected:
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;

  void SetUp() override {
    gmr_test::SimTest::SetUp();
    gmr_vmm_pool_resource_config c = gmr_test::TestConfig(32);
    ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&c, &pool_, nullptr));
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
  }
  void TearDown() override {
    gmr_test::ExpectInvariants(pool_);
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    gmr_test::SimTest::TearDown();
  }
  void *Alloc(size_t bytes) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r_, bytes, 0, nullptr, &p));
    return p;
  }
  static void Fill(void *p, size_t bytes, unsigned seed) {
    auto *b = static_cast<unsigned char *>(p);
    for (size_t i = 0; i < bytes; i += 4093) b[i] = static_cast<unsigned char>(seed + i / 4093);
    b[bytes - 1] = static_cast<unsigned char>(seed ^ 0x5a);
  }
  static bool Same(const void *p, size_t bytes, unsigned seed) {
    const auto *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < bytes; i += 4093) {
      if (b[i] != static_cast<unsigned char>(seed + i / 4093)) return false;
    }
    return b[bytes - 1] == static_cast<unsigned char>(seed ^ 0x5a);
  }
  static size_t DeviceUsed() {
    gmr_cuda_sim_usage u;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
    return u.used_bytes;
  }
};

TEST_F(VmmPoolSleep, EveryPageGoesBackAndSavedContentsReturnBitForBit) {
  void *weights = Alloc(3 * kPage);
  void *cache = Alloc(2 * kPage);
  void *freed = Alloc(kPage);
  Fill(weights, 3 * kPage, 1);
  Fill(cache, 2 * kPage, 2);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, freed, kPage, 0, nullptr));
  EXPECT_EQ(6 * kPage, DeviceUsed());

  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_all = true;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_EQ(0u, DeviceUsed()) << "free pages and live pages all went back";
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(GMR_OK, gmr_device_get_memory_info(&free_bytes, &total_bytes));
  EXPECT_EQ(total_bytes, free_bytes);
  EXPECT_EQ("[z3][z2]", Layout(pool_));
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(5 * kPage, s.asleep_bytes);
  EXPECT_EQ(5 * kPage, s.saved_bytes);
  EXPECT_EQ(0u, s.mapped_bytes);
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(weights, &m));
  EXPECT_TRUE(m.reserved);
  EXPECT_FALSE(m.mapped) << "the address is kept, the page is gone";

  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_EQ("[3][2]", Layout(pool_));
  EXPECT_TRUE(Same(weights, 3 * kPage, 1));
  EXPECT_TRUE(Same(cache, 2 * kPage, 2));
  EXPECT_EQ(5 * kPage, DeviceUsed());
  s = Stats(pool_);
  EXPECT_EQ(0u, s.saved_bytes);
  EXPECT_EQ(1u, s.sleep_count);
  EXPECT_EQ(1u, s.wake_count);
  gmr_cuda_sim_usage host;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_host_usage(&host));
  EXPECT_EQ(GMR_VMM_POOL_STAGING_DEFAULT_BYTES, s.staging_bytes);
  EXPECT_EQ(s.staging_bytes, host.used_bytes)
      << "the backups were pageable (the default): only the staging ring stays pinned";
  EXPECT_EQ(0u, s.host_pageable_bytes) << "the backups were freed";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, weights, 3 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, cache, 2 * kPage, 0, nullptr));
}

TEST_F(VmmPoolSleep, TagsChooseWhatIsSavedAndWhatWakes) {
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, 1));
  void *weights = Alloc(2 * kPage);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, 2));
  void *kv = Alloc(2 * kPage);
  void *small = Alloc(100);  // a chunk of the small pool, tag 2
  Fill(weights, 2 * kPage, 7);
  Fill(kv, 2 * kPage, 8);
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_tag_mask = 1u << 1;  // weights only (vLLM's level 1: the KV cache is discarded)
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  EXPECT_EQ(2 * kPage, Stats(pool_).saved_bytes);

  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate_ex(r_, kPage, 0, nullptr, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "asleep")) << f.message;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate(r_, 10, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_BUSY,
            gmr_resource_extend(r_, weights, 2 * kPage, 3 * kPage, 0, nullptr, nullptr));

  gmr_vmm_pool_wake_options w = GMR_VMM_POOL_WAKE_OPTIONS_INIT;
  w.wake_all = false;
  w.wake_tag_mask = 1u << 1;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, &w, nullptr));
  EXPECT_TRUE(Same(weights, 2 * kPage, 7));
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_)) << "tag 2 still sleeps";
  EXPECT_EQ(2 * kPage, DeviceUsed());
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_EQ(5 * kPage, DeviceUsed());
  // The KV cache woke with fresh pages: writable, contents undefined.
  Fill(kv, 2 * kPage, 9);
  EXPECT_TRUE(Same(kv, 2 * kPage, 9));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, small, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, weights, 2 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, kv, 2 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_set_default_tag(pool_, 64));
  int x = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_vmm_pool_resource_set_tag(pool_, &x, 1));
}

TEST_F(VmmPoolSleep, FreeingAnAsleepAllocationDropsItsCopyAndAddresses) {
  void *a = Alloc(2 * kPage);
  void *b = Alloc(kPage);
  Fill(b, kPage, 3);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_tag(pool_, b, 5));
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_all = true;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r_)) << "asleep allocations are live";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, a, 2 * kPage, 0, nullptr));
  EXPECT_EQ("[*2][z1]", Layout(pool_));
  EXPECT_EQ(kPage, Stats(pool_).saved_bytes);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, a, 2 * kPage, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_TRUE(Same(b, kPage, 3));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, b, kPage, 0, nullptr));
}

TEST_F(VmmPoolSleep, SleepingWithNothingLiveAndBadOptions) {
  // Asleep with nothing to wake: asleep all the same, until a wake.
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, nullptr, nullptr));
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate(r_, kPage, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
  gmr_vmm_pool_sleep_options bad = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  bad.version = 0;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_sleep(pool_, &bad, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "GMR_VMM_POOL_SLEEP_OPTIONS_INIT")) << f.message;
  gmr_vmm_pool_wake_options wbad = GMR_VMM_POOL_WAKE_OPTIONS_INIT;
  wbad.size = 4;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_wake(pool_, &wbad, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_sleep(nullptr, nullptr, nullptr));
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(nullptr));
}

class VmmPoolSleepSmallDevice : public VmmPoolSleep {
 protected:
  VmmPoolSleepSmallDevice() { sim_config_.device_memory_bytes = 6 * kPage; }
};

TEST_F(VmmPoolSleepSmallDevice, WakeRollsBackWhenTheDeviceCannotGiveThePagesBack) {
  void *a = Alloc(2 * kPage);
  void *b = Alloc(3 * kPage);
  Fill(a, 2 * kPage, 4);
  Fill(b, 3 * kPage, 5);
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_all = true;
  o.staging_bytes = 1 << 20; /* the simulation pins no more than a device holds */
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, nullptr));
  // Someone else takes the device's memory meanwhile.
  void *other = nullptr;
  gmr_vmm_pool_resource *thief = nullptr;
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig(8);
  ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&c, &thief, nullptr));
  gmr_resource *t = gmr_vmm_pool_resource_as_resource(thief);
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(t, 2 * kPage, 0, nullptr, &other));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_vmm_pool_resource_wake(pool_, nullptr, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "cuMemCreate")) << f.message;
  EXPECT_EQ("[z2][z3]", Layout(pool_)) << "rolled back: still asleep";
  EXPECT_EQ(5 * kPage, Stats(pool_).saved_bytes);
  EXPECT_EQ(2 * kPage, DeviceUsed()) << "no page of the failed wake stays";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(t, other, 2 * kPage, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_destroy(t));
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, nullptr));
  EXPECT_TRUE(Same(a, 2 * kPage, 4));
  EXPECT_TRUE(Same(b, 3 * kPage, 5));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, a, 2 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, b, 3 * kPage, 0, nullptr));
}

}  // namespace
