// gmr_vmm_pool_resource on the simulation: create and its checks, page
// rounding and small requests, bad frees, destroy, statistics, memory info,
// the dump, peers, NCCL-ready pages and threads.
#include <gtest/gtest.h>

#include <cuda.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/pool_resource.h"
#include "gmr/resource.h"
#include "gmr/vmm_pool_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace {

using gmr_test::kMiB;
using gmr_test::kPage;
using gmr_test::Layout;
using gmr_test::Stats;

class VmmPool : public gmr_test::SimTest {
 protected:
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;

  void Make(gmr_vmm_pool_resource_config c = gmr_test::TestConfig()) {
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&c, &pool_, &f)) << f.message;
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
  }
  void TearDown() override {
    if (pool_ != nullptr) {
      gmr_test::ExpectInvariants(pool_);
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    }
    gmr_test::SimTest::TearDown();
  }
};

TEST_F(VmmPool, DefaultsFollowTheDevice) {
  gmr_vmm_pool_resource *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(nullptr, &p, nullptr));
  gmr_vmm_pool_resource_stats s = Stats(p);
  EXPECT_EQ(kPage, s.page_bytes);
  EXPECT_EQ(kPage, s.granularity_bytes);
  EXPECT_EQ(size_t{80} << 30, s.reserved_bytes) << "one VA chunk the size of the device";
  EXPECT_EQ(0u, s.mapped_bytes) << "nothing mapped until asked";
  EXPECT_STREQ("vmm_pages_resource",
               gmr_resource_get_type_name(gmr_vmm_pool_resource_as_resource(p)));
  // The family's name reaches it too: any VMM resource is a gmr_vmm_pool_resource.
  EXPECT_EQ(p, gmr_vmm_pool_resource_from_resource(gmr_vmm_pool_resource_as_resource(p)));
  EXPECT_EQ(static_cast<void *>(p),
            gmr_resource_downcast(gmr_vmm_pool_resource_as_resource(p), "vmm_pages_resource"));
  EXPECT_EQ(nullptr,
            gmr_resource_downcast(gmr_vmm_pool_resource_as_resource(p), "vmm_resource"));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_vmm_pool_resource_as_resource(p)));
  gmr_cuda_sim_vmm_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&u));
  EXPECT_EQ(0u, u.reservation_count);
}

TEST_F(VmmPool, CreateRefusesBadConfigsWithAMessageAndLeavesNothing) {
  gmr_failure f = GMR_FAILURE_INIT;
  gmr_vmm_pool_resource *p = reinterpret_cast<gmr_vmm_pool_resource *>(0x1);
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig();
  c.device = 3;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pages_resource_create(&c, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_NE(nullptr, std::strstr(f.message, "device 3 does not exist")) << f.message;
  c = gmr_test::TestConfig();
  c.page_bytes = 3 * kMiB;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pages_resource_create(&c, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "granularity, 2097152 bytes")) << f.message;
  c = gmr_test::TestConfig();
  c.va_chunk_bytes = 5 * kMiB;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pages_resource_create(&c, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "va_chunk_bytes")) << f.message;
  c = gmr_test::TestConfig();
  c.peer_access = GMR_VMM_POOL_PEERS_LIST;
  c.peer_count = 1;
  c.peers[0] = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pages_resource_create(&c, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "peer 0 is not another device")) << f.message;
  c.peer_count = GMR_VMM_POOL_MAX_PEERS + 1;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pages_resource_create(&c, &p, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pages_resource_create(&c, nullptr, &f));

  gmr_cuda_sim_vmm_config v = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  v.supported = false;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&v));
  c = gmr_test::TestConfig();
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_vmm_pages_resource_create(&c, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "no virtual memory management support")) << f.message;
  gmr_cuda_sim_vmm_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&u));
  EXPECT_EQ(0u, u.reservation_count);
}

TEST_F(VmmPool, DriverFailuresAtCreateGiveTheDriverCodeAndLeaveNothing) {
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig(64, 4);
  gmr_vmm_pool_resource *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE, 0, 1,
                                                CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_vmm_pages_resource_create(&c, &p, &f));
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, f.cuda_error);
  EXPECT_NE(nullptr, std::strstr(f.message, "cuMemAddressReserve failed: CUDA_ERROR_OUT_OF_MEMORY"))
      << f.message;
  // The third initial page fails: the two before it go back.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_CREATE, 2, 1,
                                                CUDA_ERROR_INVALID_VALUE));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_vmm_pages_resource_create(&c, &p, &f));
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, f.cuda_error);
  EXPECT_NE(nullptr, std::strstr(f.message, "cuMemCreate")) << f.message;
  gmr_cuda_sim_usage d;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &d));
  EXPECT_EQ(0u, d.used_bytes);
  gmr_cuda_sim_vmm_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&u));
  EXPECT_EQ(0u, u.reservation_count);
  EXPECT_EQ(0u, u.mapping_count);
}

TEST_F(VmmPool, LargeRequestsAreWholePagesAndWritable) {
  Make();
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 3 * kPage + 1, 0, nullptr, &p));
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % kPage);
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(4 * kPage, s.live_bytes);
  EXPECT_EQ(4 * kPage, s.mapped_bytes);
  std::memset(p, 0x3c, 3 * kPage + 1);
  EXPECT_EQ(0x3c, static_cast<unsigned char *>(p)[3 * kPage]);
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r_, &fp));
  EXPECT_EQ(4 * kPage, fp.held_bytes);
  void *q = nullptr;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_allocate(r_, kPage, 4 * kPage, nullptr, &q))
      << "alignment above the page";
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kPage, kPage, nullptr, &q));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, kPage, kPage, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 3 * kPage + 1, 0, nullptr));
  EXPECT_EQ("[-5]", Layout(pool_));
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r_, &fp));
  EXPECT_EQ(5 * kPage, fp.peak_held_bytes);
}

TEST_F(VmmPool, SmallRequestsAreNotRoundedUpToAPage) {
  Make();
  std::vector<void *> ptrs(64);
  for (void *&p : ptrs) ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 1000, 0, nullptr, &p));
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(64u, s.small_live_count);
  EXPECT_EQ(64u * 1024, s.small_live_bytes) << "256-byte rounding, not a page each";
  EXPECT_EQ(kPage, s.mapped_bytes) << "all 64 share one page";
  EXPECT_EQ(1u, s.live_count) << "the small pool's one chunk";
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r_, &info));
  EXPECT_EQ(kPage, info.held_bytes);
  EXPECT_EQ(64u * 1024, info.live_bytes);
  EXPECT_EQ(kPage - 64u * 1024, info.free_bytes);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r_)) << "small allocations are live";
  for (void *p : ptrs) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 1000, 0, nullptr));
  EXPECT_EQ(0u, Stats(pool_).small_live_count);
}

TEST_F(VmmPool, WithoutTheSmallPoolSmallRequestsTakeAPage) {
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig();
  c.small_pool = false;
  Make(c);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 1000, 0, nullptr, &p));
  EXPECT_EQ(kPage, Stats(pool_).live_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 1000, 0, nullptr));
}

TEST_F(VmmPool, BadFreesUseTheVocabularyAndChangeNothing) {
  Make();
  void *p = nullptr, *small = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 2 * kPage, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 512, 0, nullptr, &small));
  const std::string before = Layout(pool_);
  int outside = 0;
  char *inner = static_cast<char *>(p) + kPage;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r_, &outside, 2 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r_, inner, kPage, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r_, &outside, 64, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 3 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 64, 0, nullptr))
      << "large freed as small";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 2 * kPage, 4 * kPage, nullptr));
  EXPECT_EQ(before, Layout(pool_));
  EXPECT_EQ(2 * kPage, Stats(pool_).live_bytes - kPage) << "the small chunk is one page";
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 2 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 2 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, small, 512, 0, nullptr));
  gmr_test::ExpectInvariants(pool_);
}

// The small path answers bad frees with the same vocabulary as whole pages.
TEST_F(VmmPool, SmallBlocksUseTheBadFreeVocabularyAndChangeNothing) {
  Make();
  void *small = nullptr, *other = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 700, 0, nullptr, &small));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 300, 0, nullptr, &other));
  const gmr_vmm_pool_resource_stats before = Stats(pool_);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, small, 2000, 0, nullptr))
      << "wrong size";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, small, 700, 4096, nullptr))
      << "wrong alignment";
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_deallocate(r_, static_cast<char *>(small) + 256, 300, 0, nullptr))
      << "inside a block";
  EXPECT_EQ(before.small_live_count, Stats(pool_).small_live_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, small, 700, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, small, 700, 0, nullptr));
  EXPECT_EQ(1u, Stats(pool_).small_live_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, other, 300, 0, nullptr));
  gmr_test::ExpectInvariants(pool_);
}

// Whole pages, the small path and pages without the small path name an
// allocation by the size and alignment asked for, not by the pages or the
// 256-byte units they round to: a free of 999 bytes for 1,000 is refused,
// changing nothing, and the correct free after it succeeds instead of
// reading as a double free.
TEST_F(VmmPool, AFreeMustNameTheSizeAndAlignmentAskedFor) {
  for (bool small_pool : {true, false}) {
    SCOPED_TRACE(small_pool ? "with the small path" : "pages only");
    gmr_vmm_pool_resource_config c = gmr_test::TestConfig();
    c.small_pool = small_pool;
    Make(c);
    void *big = nullptr, *small = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 2 * kPage - 1000, 0, nullptr, &big));
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 1000, 128, nullptr, &small));
    const std::string layout = Layout(pool_);
    const gmr_vmm_pool_resource_stats before = Stats(pool_);
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, big, 2 * kPage - 999, 0, nullptr));
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, big, 2 * kPage, 0, nullptr))
        << "the pages it rounds to";
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH,
              gmr_resource_deallocate(r_, big, 2 * kPage - 1000, 512, nullptr));
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, small, 999, 128, nullptr));
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, small, 1024, 128, nullptr))
        << "the 256-byte units it rounds to";
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, small, 1000, 0, nullptr))
        << "256, not the 128 asked for";
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, small, kPage, 128, nullptr))
        << "a page or more: the page path asks the small path";
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH,
              gmr_resource_extend(r_, small, kPage, 2 * kPage, 128, nullptr, nullptr))
        << "extend names a block the same way";
    EXPECT_EQ(layout, Layout(pool_));
    const gmr_vmm_pool_resource_stats after = Stats(pool_);
    EXPECT_EQ(before.live_count, after.live_count);
    EXPECT_EQ(before.live_bytes, after.live_bytes);
    EXPECT_EQ(before.small_live_count, after.small_live_count);
    EXPECT_EQ(before.mapped_bytes, after.mapped_bytes);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, big, 2 * kPage - 1000, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, small, 1000, 128, nullptr));
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, big, 2 * kPage - 1000, 0, nullptr));
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, small, 1000, 128, nullptr));
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, small, kPage, 128, nullptr))
        << "freed, whatever path the size points to";
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE,
              gmr_resource_extend(r_, small, kPage, 2 * kPage, 128, nullptr, nullptr));
    gmr_test::ExpectInvariants(pool_);
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    pool_ = nullptr;
  }
}

TEST_F(VmmPool, RequestsLargerThanAVaChunkReserveAnotherChunk) {
  Make(gmr_test::TestConfig(4));
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 3 * kPage, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 10 * kPage, 0, nullptr, &b));
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(2u, s.va_chunk_count);
  EXPECT_EQ(14 * kPage, s.reserved_bytes) << "4 pages, then the 10 of the request";
  std::vector<gmr_vmm_pool_region> regions = gmr_test::Regions(pool_);
  ASSERT_EQ(3u, regions.size());
  EXPECT_EQ(1u, regions[2].va_chunk_index);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, a, 3 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, b, 10 * kPage, 0, nullptr));
}

class VmmPoolSmallDevice : public VmmPool {
 protected:
  VmmPoolSmallDevice() { sim_config_.device_memory_bytes = 8 * kPage; }
};

TEST_F(VmmPoolSmallDevice, OutOfDeviceMemoryCarriesTheDriverCodeAndTheFreeBytes) {
  Make();
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 6 * kPage, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 1 * kPage, 0, nullptr, &b));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, b, kPage, 0, nullptr));
  const std::string before = Layout(pool_);
  void *c = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r_, 4 * kPage, 0, nullptr, &c, &f));
  EXPECT_EQ(nullptr, c);
  EXPECT_EQ(CUDA_ERROR_OUT_OF_MEMORY, f.cuda_error);
  EXPECT_EQ(r_, f.where);
  EXPECT_TRUE(f.free_info_known);
  EXPECT_EQ(kPage, f.free_bytes);
  EXPECT_NE(nullptr, std::strstr(f.message, "cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY (2)"))
      << f.message;
  EXPECT_EQ(before, Layout(pool_));
  EXPECT_EQ(7 * kPage, Stats(pool_).mapped_bytes);
  // What fits after the free page is reused: 1 free + 1 new.
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 2 * kPage, 0, nullptr, &c));
  EXPECT_EQ(8 * kPage, Stats(pool_).mapped_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, a, 6 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, c, 2 * kPage, 0, nullptr));
}

TEST_F(VmmPool, TheDumpListsMetricsAndEveryRegionInAddressOrder) {
  Make(gmr_test::TestConfig(16, 3));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kPage, 0, nullptr, &p));
  size_t needed = 0;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_dump(pool_, nullptr, 0, &needed));
  std::string text(needed, '\0');
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_dump(pool_, text.data(), text.size(), nullptr));
  EXPECT_NE(std::string::npos, text.find("mapped 6291456 bytes")) << text;
  EXPECT_NE(std::string::npos, text.find("reserved 33554432 bytes in 1 VA chunks")) << text;
  size_t live = text.find(" live stream");
  size_t free = text.find(" free stream");
  size_t hole = text.find(" hole\n");
  ASSERT_NE(std::string::npos, live) << text;
  EXPECT_LT(live, free) << text;
  EXPECT_LT(free, hole) << text;
  char tiny[8];
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_dump(pool_, tiny, sizeof tiny, &needed));
  EXPECT_EQ(7u, std::strlen(tiny));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_dump(pool_, nullptr, 4, nullptr));
  gmr_vmm_pool_resource_stats bad = GMR_VMM_POOL_RESOURCE_STATS_INIT;
  bad.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_get_stats(pool_, &bad));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, kPage, 0, nullptr));
}

TEST_F(VmmPool, ThreadsAllocateAndFreeConcurrently) {
  Make(gmr_test::TestConfig(256));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      std::vector<std::pair<void *, size_t>> live;
      for (int i = 0; i < 200; ++i) {
        size_t bytes = (i % 3 == 0) ? 700 + 64 * t : size_t(1 + (i + t) % 3) * kPage;
        void *p = nullptr;
        ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, bytes, 0, nullptr, &p));
        static_cast<unsigned char *>(p)[0] = static_cast<unsigned char>(t);
        live.emplace_back(p, bytes);
        if (live.size() > 4) {
          EXPECT_EQ(t, static_cast<unsigned char *>(live.front().first)[0]);
          EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, live.front().first, live.front().second, 0,
                                                    nullptr));
          live.erase(live.begin());
        }
      }
      for (auto &[p, bytes] : live)
        EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, bytes, 0, nullptr));
    });
  }
  for (auto &th : threads) th.join();
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(0u, s.small_live_count);
  EXPECT_EQ(0u, s.free_bytes + s.live_bytes - s.mapped_bytes) << "held = live + free";
}

class VmmPoolTwoDevices : public VmmPool {
 protected:
  VmmPoolTwoDevices() { sim_config_.device_count = 2; }
};

TEST_F(VmmPoolTwoDevices, PeerAccessGivesEveryPeerEveryMappedPage) {
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig();
  c.peer_access = GMR_VMM_POOL_PEERS_ALL;
  Make(c);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 2 * kPage, 0, nullptr, &p));
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(static_cast<char *>(p) + kPage, &m));
  EXPECT_EQ(3u, m.access_device_mask) << "devices 0 and 1";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 2 * kPage, 0, nullptr));

  gmr_vmm_pool_resource_config list = gmr_test::TestConfig();
  list.peer_access = GMR_VMM_POOL_PEERS_LIST;
  list.peers[0] = 1;
  list.peer_count = 1;
  gmr_vmm_pool_resource *second = nullptr;
  ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&list, &second, nullptr));
  gmr_resource *r2 = gmr_vmm_pool_resource_as_resource(second);
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r2, kPage, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(p, &m));
  EXPECT_EQ(3u, m.access_device_mask);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r2, p, kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r2));
}

TEST_F(VmmPoolTwoDevices, APoolOnAnotherDeviceMapsThereAndRestoresTheCallersDevice) {
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig();
  c.device = 1;
  Make(c);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kPage, 0, nullptr, &p));
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(p, &m));
  EXPECT_EQ(1, m.device);
  EXPECT_EQ(2u, m.access_device_mask);
  int current = -1;
  ASSERT_EQ(GMR_OK, gmr_device_get_current(&current));
  EXPECT_EQ(0, current);
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(1, &u));
  EXPECT_EQ(kPage, u.used_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, kPage, 0, nullptr));
}

TEST_F(VmmPoolTwoDevices, PeersThatCannotAccessTheDeviceAreRefusedOrLeftOut) {
  gmr_cuda_sim_vmm_config v = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  v.peer_access_supported = false;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&v));
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig();
  c.peer_access = GMR_VMM_POOL_PEERS_LIST;
  c.peers[0] = 1;
  c.peer_count = 1;
  gmr_vmm_pool_resource *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_vmm_pages_resource_create(&c, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "device 1 cannot access device 0")) << f.message;
  c.peer_access = GMR_VMM_POOL_PEERS_ALL;
  Make(c);
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kPage, 0, nullptr, &q));
  gmr_cuda_sim_vmm_mapping m;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_vmm_query(q, &m));
  EXPECT_EQ(1u, m.access_device_mask) << "no peer can: only the device itself";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, kPage, 0, nullptr));
}

TEST_F(VmmPool, NcclReadyPagesUseTheRecommendedGranularityAndDropFabricWhenRefused) {
  gmr_cuda_sim_vmm_config v = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  v.recommended_granularity_bytes = 4 * kMiB;
  v.fabric_handles_supported = true;
  v.gpu_direct_rdma_supported = true;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&v));
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig(32);
  c.nccl_ready = true;
  Make(c);
  EXPECT_EQ(4 * kMiB, Stats(pool_).page_bytes);
  // The driver refuses fabric handles (no IMEX channel): asked again without.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_CREATE, 0, 1,
                                                CUDA_ERROR_NOT_PERMITTED));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 8 * kMiB, 0, nullptr, &p));
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE)) << "1 refused, 2 pages";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 8 * kMiB, 0, nullptr));
}

}  // namespace
