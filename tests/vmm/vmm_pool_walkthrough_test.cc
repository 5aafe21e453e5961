// VPMM's example walkthrough, reproduced exactly: one stream,
//   +10  >  +1  >  -10  >  +4  >  +11
// (1 unit = 1 page), starting from PAGES = 11 + X pages mapped at create, for
// every X from 0 to 15, which covers its four cases:
//   A  X >= 11     enough free pages: best fit, no defragmentation
//   B  5 <= X < 11 not contiguous: the free 10 is remapped after the free
//                  tail, which grows in place to hold the 11
//   C  X == 4      defragmentation and one new page (MinUse growth)
//   D  0 <= X < 4  the +4 lands in the first free region; the free 6 is
//                  remapped and 5 - X new pages are mapped
// The layout after each step, the pages remapped and created, and the pages
// held at the end (16 = the live pages, in cases C and D) are all checked.
#include <gtest/gtest.h>

#include <string>

#include "gmr/sim/cuda_sim.h"
#include "gmr/resource.h"
#include "gmr/vmm_pool_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace {

using gmr_test::kPage;
using gmr_test::Layout;

std::string Pages(size_t n, const char *mark = "") {
  return "[" + std::string(mark) + std::to_string(n) + "]";
}

struct Expected {
  std::string after_plus4;
  std::string after_plus11;
  uint64_t defrag_count;
  uint64_t remapped_pages;
  uint64_t new_pages_at_step5;
};

Expected ExpectedFor(size_t x) {
  std::string free_x = x > 0 ? Pages(x, "-") : "";
  if (x >= 11) {  // Case A
    return {"[+4][-6][1]" + free_x, "[4][-6][1][+11]" + (x > 11 ? Pages(x - 11, "-") : ""), 0, 0,
            0};
  }
  if (x >= 5) {  // Case B
    return {"[-10][1][+4]" + Pages(x - 4, "-"),
            "[*10][1][4][+11]" + (x > 5 ? Pages(x - 5, "-") : ""), 1, 10, 0};
  }
  if (x == 4) {  // Case C
    return {"[-10][1][+4]", "[*10][1][4][+11]", 1, 10, 1};
  }
  // Case D
  return {"[+4][-6][1]" + free_x, "[4][*6][1][+11]", 1, 6, 5 - x};
}

class VpmmWalkthrough : public gmr_test::SimTest, public ::testing::WithParamInterface<size_t> {};

TEST_P(VpmmWalkthrough, ReproducesTheRegionLayoutsOfEveryStep) {
  const size_t x = GetParam();
  const size_t pages = 11 + x;
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig(64, pages);
  gmr_vmm_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&c, &pool, nullptr));
  gmr_resource *r = gmr_vmm_pool_resource_as_resource(pool);
  EXPECT_EQ(Pages(pages, "-"), Layout(pool));
  const uint64_t created_at_start = gmr_test::Stats(pool).page_create_count;
  EXPECT_EQ(pages, created_at_start);

  void *p10 = nullptr, *p1 = nullptr, *p4 = nullptr, *p11 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 10 * kPage, 0, nullptr, &p10));
  EXPECT_EQ("[+10]" + (x + 1 > 0 ? Pages(x + 1, "-") : ""), Layout(pool, p10));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1 * kPage, 0, nullptr, &p1));
  EXPECT_EQ("[10][+1]" + (x > 0 ? Pages(x, "-") : ""), Layout(pool, p1));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p10, 10 * kPage, 0, nullptr));
  EXPECT_EQ("[-10][1]" + (x > 0 ? Pages(x, "-") : ""), Layout(pool));

  const Expected want = ExpectedFor(x);
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4 * kPage, 0, nullptr, &p4));
  EXPECT_EQ(want.after_plus4, Layout(pool, p4));
  gmr_test::ExpectInvariants(pool);
  EXPECT_EQ(0u, gmr_test::Stats(pool).defrag_count) << "steps 1-4 never defragment";

  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 11 * kPage, 0, nullptr, &p11));
  EXPECT_EQ(want.after_plus11, Layout(pool, p11));
  gmr_test::ExpectInvariants(pool);
  gmr_vmm_pool_resource_stats s = gmr_test::Stats(pool);
  EXPECT_EQ(want.defrag_count, s.defrag_count);
  EXPECT_EQ(want.remapped_pages, s.remapped_page_count);
  EXPECT_EQ(want.new_pages_at_step5, s.page_create_count - created_at_start) << "MinUse growth";
  EXPECT_EQ(16 * kPage, s.live_bytes) << "the walkthrough ends with 16 live pages";
  EXPECT_EQ(0u, s.zombie_count) << "default-stream events complete at once: zombies are gone";
  // Held = every page ever mapped, never more than needed: PAGES, or the 16
  // live pages when there were fewer.
  EXPECT_EQ((pages > 16 ? pages : 16) * kPage, s.mapped_bytes);

  // The 11 pages are usable end to end, including the remapped ones.
  unsigned char *q = static_cast<unsigned char *>(p11);
  for (size_t i = 0; i < 11; ++i) q[i * kPage] = static_cast<unsigned char>(i + 1);
  for (size_t i = 0; i < 11; ++i) EXPECT_EQ(i + 1, q[i * kPage]);

  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p1, kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p4, 4 * kPage, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p11, 11 * kPage, 0, nullptr));
  gmr_test::ExpectInvariants(pool);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

INSTANTIATE_TEST_SUITE_P(CasesAtoD, VpmmWalkthrough, ::testing::Range<size_t>(0, 16),
                         [](const ::testing::TestParamInfo<size_t> &info) {
                           size_t x = info.param;
                           const char *c = x >= 11 ? "A" : x >= 5 ? "B" : x == 4 ? "C" : "D";
                           return std::string("Case") + c + "_X" + std::to_string(x);
                         });

}  // namespace
