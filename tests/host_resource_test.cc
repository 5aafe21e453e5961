// host_resource: pageable memory with any power-of-two alignment.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmr/host_resource.h"

namespace {

TEST(HostResource, HonoursEveryPowerOfTwoAlignment) {
  gmr_host_resource *h = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&h));
  gmr_resource *r = gmr_host_resource_as_resource(h);
  EXPECT_STREQ("host_resource", gmr_resource_get_type_name(r));
  EXPECT_EQ(h, gmr_host_resource_from_resource(r));
  for (size_t align = 1; align <= 65536; align *= 2) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, align, nullptr, &p));
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % align) << align;
    std::memset(p, 1, 100);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, align, nullptr));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST(HostResource, FootprintAndBusyDestroy) {
  gmr_host_resource *h = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&h));
  gmr_resource *r = gmr_host_resource_as_resource(h);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 500, 0, nullptr, &b));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 1000, 0, nullptr));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(500u, fp.held_bytes);
  EXPECT_EQ(1500u, fp.peak_held_bytes);
  EXPECT_EQ(1u, gmr_host_resource_get_live_count(h));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 500, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST(HostResource, ImpossibleSizeIsOutOfMemory) {
  gmr_host_resource *h = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&h));
  gmr_resource *r = gmr_host_resource_as_resource(h);
  void *p = nullptr;
  // Below the dispatch's bound but far beyond any machine's memory.
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_allocate(r, GMR_MAX_ALLOCATION_BYTES, 0, nullptr, &p));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(0u, gmr_host_resource_get_live_count(h));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// Issue 9: an unknown pointer used to crash inside libc's free; the host
// resource now keeps books and refuses every bad free, changing nothing.
TEST(HostResource, BadFreesAreRefusedWithTheVocabulary) {
  gmr_host_resource *h = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&h));
  gmr_resource *r = gmr_host_resource_as_resource(h);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 4096, nullptr, &q));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, &local, 64, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_deallocate(r, static_cast<char *>(p) + 8, 8, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 999, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, q, 100, 0, nullptr));  // alignment
  EXPECT_EQ(2u, gmr_host_resource_get_live_count(h));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(1100u, fp.held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 100, 4096, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(0u, fp.held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST(HostResource, OutOfMemorySaysHowManyBytesWereAsked) {
  gmr_host_resource *h = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&h));
  gmr_resource *r = gmr_host_resource_as_resource(h);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_allocate_ex(r, GMR_MAX_ALLOCATION_BYTES, 64, nullptr, &p, &f));
  EXPECT_EQ(r, f.where);
  EXPECT_NE(nullptr, std::strstr(f.message, std::to_string(GMR_MAX_ALLOCATION_BYTES).c_str()))
      << f.message;
  EXPECT_FALSE(f.free_info_known);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST(HostResource, ThreadsWithBadFreesKeepTheBooksExact) {
  gmr_host_resource *h = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&h));
  gmr_resource *r = gmr_host_resource_as_resource(h);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 400; ++i) {
        size_t bytes = 16 + static_cast<size_t>((i * 7 + t) % 300);
        void *p = nullptr;
        if (gmr_resource_allocate(r, bytes, 0, nullptr, &p) != GMR_OK) failures++;
        if (gmr_resource_deallocate(r, p, bytes + 1, 0, nullptr) != GMR_ERR_FREE_MISMATCH)
          failures++;
        if (gmr_resource_deallocate(r, p, bytes, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0u, gmr_host_resource_get_live_count(h));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST(HostResource, OptionalSlots) {
  gmr_host_resource *h = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&h));
  gmr_resource *r = gmr_host_resource_as_resource(h);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(r, 500, 0, nullptr, &p, nullptr));
  // It frees at once, so it cannot order a free after a stream's work.
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_record_stream(r, p, nullptr));
  gmr_memory_info mi = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &mi));
  EXPECT_EQ(500u, mi.held_bytes);
  EXPECT_EQ(500u, mi.live_bytes);
  EXPECT_EQ(0u, mi.free_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 500, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST(HostResource, CreateChecksItsArgument) {
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_host_resource_create(nullptr));
  EXPECT_EQ(nullptr, gmr_host_resource_from_resource(nullptr));
}

TEST(HostResource, ThreadsKeepCountersExact) {
  gmr_host_resource *h = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&h));
  gmr_resource *r = gmr_host_resource_as_resource(h);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      std::vector<void *> mine;
      for (int i = 0; i < 500; ++i) {
        void *p = nullptr;
        if (gmr_resource_allocate(r, 64, 0, nullptr, &p) != GMR_OK) failures++;
        mine.push_back(p);
      }
      for (void *p : mine) {
        if (gmr_resource_deallocate(r, p, 64, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(0, failures.load());
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(0u, fp.held_bytes);
  EXPECT_LE(fp.peak_held_bytes, size_t{8 * 500 * 64});
  EXPECT_GE(fp.peak_held_bytes, size_t{500 * 64});
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

}  // namespace
