// In-place growth (gmr_resource_extend) of vmm_pages allocations, and a small client:
// a bump sub-allocator that grows its chunk in place the way gmr's pool is
// meant to grow its newest chunk over vmm_pool.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/streams.h"
#include "gmr/vmm_pool_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace {

using gmr_test::kPage;
using gmr_test::Layout;
using gmr_test::Stats;

class VmmPoolExtend : public gmr_test::SimTest {
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
  void *Alloc(size_t pages, gmr_stream s = nullptr) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r_, pages * kPage, 0, s, &p));
    return p;
  }
};

TEST_F(VmmPoolExtend, GrowsIntoTheHoleAfterIt) {
  void *p = Alloc(2);
  static_cast<char *>(p)[0] = 42;
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r_, p, 2 * kPage, 5 * kPage, 0, nullptr, nullptr));
  EXPECT_EQ("[5]", Layout(pool_));
  EXPECT_EQ(42, static_cast<char *>(p)[0]);
  std::memset(static_cast<char *>(p) + 2 * kPage, 7, 3 * kPage);  // the new pages are usable
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(1u, s.extend_count);
  EXPECT_EQ(5 * kPage, s.live_bytes);
  EXPECT_EQ(5 * kPage, s.mapped_bytes);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 2 * kPage, 0, nullptr))
      << "the allocation now has the new size";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 5 * kPage, 0, nullptr));
}

TEST_F(VmmPoolExtend, TakesAFreeRegionAfterIt) {
  void *p = Alloc(2);
  void *q = Alloc(3);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 3 * kPage, 0, nullptr));
  const uint64_t created = Stats(pool_).page_create_count;
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r_, p, 2 * kPage, 4 * kPage, 0, nullptr, nullptr));
  EXPECT_EQ("[4][-1]", Layout(pool_));
  EXPECT_EQ(created, Stats(pool_).page_create_count) << "free pages, no new ones";
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r_, p, 4 * kPage, 7 * kPage, 0, nullptr, nullptr));
  EXPECT_EQ("[7]", Layout(pool_)) << "the free page, then two new ones";
  EXPECT_EQ(created + 2, Stats(pool_).page_create_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 7 * kPage, 0, nullptr));
}

TEST_F(VmmPoolExtend, AnotherStreamsPendingFreeRegionIsTakenAfterAGpuWait) {
  gmr_stream a = nullptr, b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a, true));
  void *p = Alloc(1, b);
  void *q = Alloc(2, a);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 2 * kPage, 0, a));
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r_, p, kPage, 3 * kPage, 0, b, nullptr));
  EXPECT_EQ("[3]", Layout(pool_));
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(b));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 3 * kPage, 0, b));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a, false));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b));
}

TEST_F(VmmPoolExtend, RefusesWhenTheAddressesAfterItAreTakenAndChangesNothing) {
  void *p = Alloc(2);
  void *wall = Alloc(1);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_extend(r_, p, 2 * kPage, 3 * kPage, 0, nullptr, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "not free")) << f.message;
  EXPECT_EQ(r_, f.where);
  EXPECT_EQ("[2][1]", Layout(pool_));
  // The size asked for, not the pages it rounds to, names the allocation.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH,
            gmr_resource_extend(r_, p, 2 * kPage - 100, 2 * kPage, 0, nullptr, &f));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH,
            gmr_resource_extend(r_, p, 2 * kPage, 3 * kPage, 512, nullptr, &f))
      << "another alignment";
  EXPECT_EQ("[2][1]", Layout(pool_));
  int x = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_extend(r_, &x, kPage, 2 * kPage, 0, nullptr, &f));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH,
            gmr_resource_extend(r_, p, 5 * kPage, 6 * kPage, 0, nullptr, &f));
  void *small = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 64, 0, nullptr, &small));
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_extend(r_, small, 64, 128, 0, nullptr, &f));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, small, 64, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, wall, kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 2 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_extend(r_, p, 2 * kPage, 3 * kPage, 0, nullptr, &f));
  // Within the pages it already has: no change, just the new size.
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 2 * kPage - 100, 0, nullptr, &q));
  const gmr_vmm_pool_resource_stats before = Stats(pool_);
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r_, q, 2 * kPage - 100, 2 * kPage, 0, nullptr, nullptr));
  EXPECT_EQ(before.live_bytes, Stats(pool_).live_bytes);
  EXPECT_EQ(before.mapped_bytes, Stats(pool_).mapped_bytes);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, q, 2 * kPage - 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 2 * kPage, 0, nullptr));
}

TEST_F(VmmPoolExtend, GrowthDuringCaptureMapsPagesWithoutBreakingIt) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  void *p = Alloc(1, s);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r_, p, kPage, 4 * kPage, 0, s, nullptr));
  EXPECT_EQ(0, gmr_cuda_sim_get_thread_capture_mode());
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  ASSERT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ("[4]", Layout(pool_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 4 * kPage, 0, s));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// The client: hands out bump-allocated pieces of one chunk; when the chunk is
// full it asks the upstream to extend the chunk in place, and only when that
// is refused (UNSUPPORTED or OUT_OF_MEMORY) takes a new chunk.
class GrowingArena {
 public:
  explicit GrowingArena(gmr_resource *upstream) : upstream_(upstream) {}
  ~GrowingArena() {
    for (const Chunk &c : chunks_) {
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(upstream_, c.base, c.bytes, 0, nullptr));
    }
  }
  void *Allocate(size_t bytes) {
    bytes = (bytes + 255) & ~size_t{255};
    if (!chunks_.empty()) {
      Chunk &c = chunks_.back();
      if (c.used + bytes > c.bytes) {
        size_t grown = c.used + bytes > 2 * c.bytes ? c.used + bytes : 2 * c.bytes;
        gmr_status st = gmr_resource_extend(upstream_, c.base, c.bytes, grown, 0, nullptr, nullptr);
        if (st == GMR_OK) {
          c.bytes = grown;
          extended_++;
        } else {
          EXPECT_TRUE(st == GMR_ERR_UNSUPPORTED || st == GMR_ERR_OUT_OF_MEMORY);
        }
      }
      if (c.used + bytes <= c.bytes) {
        void *p = static_cast<char *>(c.base) + c.used;
        c.used += bytes;
        return p;
      }
    }
    Chunk c;
    c.bytes = bytes > kPage ? bytes : kPage;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(upstream_, c.bytes, 0, nullptr, &c.base));
    c.used = bytes;
    chunks_.push_back(c);
    return c.base;
  }
  size_t chunk_count() const { return chunks_.size(); }
  int extended() const { return extended_; }

 private:
  struct Chunk {
    void *base = nullptr;
    size_t bytes = 0;
    size_t used = 0;
  };
  gmr_resource *upstream_;
  std::vector<Chunk> chunks_;
  int extended_ = 0;
};

TEST_F(VmmPoolExtend, AClientGrowsItsChunkInPlaceAndFallsBackToANewChunk) {
  {
    GrowingArena arena(r_);
    std::vector<char *> pieces;
    for (int i = 0; i < 40; ++i) {
      pieces.push_back(static_cast<char *>(arena.Allocate(300 * 1024)));
      pieces.back()[0] = static_cast<char>(i);
    }
    EXPECT_EQ(1u, arena.chunk_count()) << "12 MiB of pieces, one chunk grown in place";
    EXPECT_EQ(3, arena.extended());
    for (int i = 0; i < 40; ++i) EXPECT_EQ(static_cast<char>(i), pieces[i][0]);
    EXPECT_EQ("[8]", Layout(pool_)) << "16 MiB: 2 MiB doubled three times";
    // Someone else takes the addresses after the chunk: growth goes elsewhere.
    void *wall = Alloc(1);
    for (int i = 0; i < 20; ++i) arena.Allocate(300 * 1024);
    EXPECT_EQ(2u, arena.chunk_count());
    EXPECT_EQ("[8][1][1]", Layout(pool_));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, wall, kPage, 0, nullptr));
  }
  EXPECT_EQ(0u, Stats(pool_).live_count);
}

}  // namespace
