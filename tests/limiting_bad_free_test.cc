// Bad frees through limiting_adaptor (issue 30): gmr/resource.h's
// vocabulary whatever else is outstanding. A double free was
// GMR_ERR_FREE_MISMATCH ("live, with another size") when nothing else was
// outstanding while the adaptor enforced a limit; it is GMR_ERR_DOUBLE_FREE
// in every mode and stack, and no bad free moves a byte of the books.
#include <gtest/gtest.h>

#include <string>

#include "gmr/limiting_adaptor.h"
#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"

namespace {

class LimitingBadFree : public gmr_test::SimTest {
 protected:
  void TearDown() override {
    if (stack_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack_));
    }
    SimTest::TearDown();
  }
  gmr_resource *Build(const char *spec) {
    if (stack_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack_));
      stack_ = nullptr;
    }
    gmr_spec_error error;
    EXPECT_EQ(GMR_OK, gmr_stack_create(spec, &stack_, &error)) << error.message;
    r_ = gmr_stack_as_resource(stack_);
    lim_ = gmr_limiting_adaptor_from_resource(gmr_resource_find(r_, "limiting_adaptor"));
    EXPECT_NE(nullptr, lim_);
    return r_;
  }
  void *Alloc(size_t bytes) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r_, bytes, 0, nullptr, &p));
    return p;
  }
  size_t Used() { return gmr_limiting_adaptor_get_used_bytes(lim_); }
  gmr_limiting_adaptor_stats Stats() {
    gmr_limiting_adaptor_stats s = GMR_LIMITING_ADAPTOR_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim_, &s));
    return s;
  }
  gmr_stack *stack_ = nullptr;
  gmr_resource *r_ = nullptr;
  gmr_limiting_adaptor *lim_ = nullptr;
};

// Counting (no limit) and enforcing (a limit), under a tracking adaptor and
// without, over a pool and over vmm: a second free of a block is a double
// free both with another block outstanding and with none.
TEST_F(LimitingBadFree, ADoubleFreeIsNamedWhateverElseIsOutstanding) {
  for (const char *spec : {
           "tracking > limiting > pool > cuda",
           "tracking > limiting(limit=1GiB) > pool > cuda",
           "limiting > pool > cuda",
           "limiting(limit=1GiB) > pool > cuda",
           "limiting(limit=1MiB) > pool(stream_ordered=false) > host",
           "limiting > vmm",
           "limiting(limit=1GiB) > vmm",
           "limiting(limit=1GiB) > vmm_pages",
       }) {
    SCOPED_TRACE(spec);
    Build(spec);
    void *p = Alloc(4096);
    void *q = Alloc(1000);  // charged 1024
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 4096, 0, nullptr));
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 4096, 0, nullptr))
        << "another block outstanding";
    EXPECT_EQ(1024u, Used()) << "q's charge, exactly";
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 1000, 0, nullptr));
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, q, 1000, 0, nullptr))
        << "nothing outstanding";
    EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 4096, 0, nullptr));
    EXPECT_EQ(0u, Used());
    gmr_limiting_adaptor_stats s = Stats();
    EXPECT_EQ(2u, s.allocation_count);
    EXPECT_EQ(2u, s.deallocation_count);
    EXPECT_EQ(GMR_OK, gmr_resource_check(r_));
    // The books are whole: the next allocations are charged and freed exactly.
    p = Alloc(4096);
    EXPECT_EQ(4096u, Used());
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 4096, 0, nullptr));
    EXPECT_EQ(0u, Used());
  }
}

// The other bad frees keep their names, and change nothing either.
TEST_F(LimitingBadFree, AWrongSizeAndAnUnknownPointerKeepTheirNames) {
  for (const char *spec : {"limiting(limit=1GiB) > host", "limiting(limit=1GiB) > vmm",
                           "limiting > vmm"}) {
    SCOPED_TRACE(spec);
    Build(spec);
    void *p = Alloc(256);
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 4096, 0, nullptr))
        << "more bytes than are outstanding: the upstream knows p is live";
    EXPECT_EQ(256u, Used());
    int local = 0;
    EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r_, &local, 4096, 0, nullptr));
    EXPECT_EQ(256u, Used());
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 256, 0, nullptr));
    EXPECT_EQ(0u, Used());
  }
}

// Per-stream mode has a pointer table, which forgets freed pointers: a
// double free there is an unknown pointer, still with exact books; a wrong
// size of a live one is a mismatch. Neither reaches the upstream.
TEST_F(LimitingBadFree, PerStreamModeAnswersFromItsTable) {
  Build("limiting(limit=1GiB, per_stream=true) > vmm");
  void *p = Alloc(4096);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 8192, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 4096, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r_, p, 4096, 0, nullptr));
  EXPECT_EQ(0u, Used());
  EXPECT_EQ(2u, Stats().bad_free_count);
}

}  // namespace
