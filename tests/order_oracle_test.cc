// The stream-ordering oracle itself (tests/support/order_oracle.h): it must
// catch a resource that reuses memory across streams with no order, and pass
// one that reuses memory only on the freeing stream; and the simulation's
// order under it is CUDA's: transitive through waits, a record made before a
// wait covering nothing of what the wait brought.
#include <gtest/gtest.h>

#include <vector>

#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/order_oracle.h"
#include "tests/support/sim_fixture.h"

namespace {

// A toy pool over an upstream: frees go to a list per power-of-two size
// class; with `same_stream_only` a class's free block goes back only to the
// stream that freed it (correct, as any stream-ordered pool's own reuse),
// else to any stream at once (the defect the oracle exists to catch).
struct ToyPool {
  gmr_resource base;
  gmr_resource *upstream;
  bool same_stream_only;
  struct Block {
    void *ptr;
    size_t class_bytes;
    gmr_stream stream;
  };
  std::vector<Block> free_blocks;
  size_t live = 0;
};

size_t ClassOf(size_t bytes) {
  size_t c = 256;
  while (c < bytes) c *= 2;
  return c;
}

gmr_status ToyAllocate(gmr_resource *self, size_t bytes, size_t, gmr_stream stream, void **out,
                       gmr_failure *failure) {
  auto *p = reinterpret_cast<ToyPool *>(self);
  size_t c = ClassOf(bytes);
  for (size_t i = 0; i < p->free_blocks.size(); ++i) {
    ToyPool::Block b = p->free_blocks[i];
    if (b.class_bytes != c || (p->same_stream_only && b.stream != stream)) continue;
    p->free_blocks.erase(p->free_blocks.begin() + static_cast<long>(i));
    *out = b.ptr;
    p->live++;
    return GMR_OK;
  }
  gmr_status st = gmr_resource_allocate_ex(p->upstream, c, 0, stream, out, failure);
  if (st == GMR_OK) p->live++;
  return st;
}

gmr_status ToyDeallocate(gmr_resource *self, void *ptr, size_t bytes, size_t, gmr_stream stream) {
  auto *p = reinterpret_cast<ToyPool *>(self);
  p->free_blocks.push_back({ptr, ClassOf(bytes), stream});
  p->live--;
  return GMR_OK;
}

gmr_status ToyDestroy(gmr_resource *self) {
  auto *p = reinterpret_cast<ToyPool *>(self);
  if (p->live != 0) return GMR_ERR_BUSY;
  for (const ToyPool::Block &b : p->free_blocks) {
    gmr_status st = gmr_resource_deallocate(p->upstream, b.ptr, b.class_bytes, 0, nullptr);
    if (st != GMR_OK) return st;
  }
  delete p;
  return GMR_OK;
}

gmr_status ToyFootprint(const gmr_resource *, gmr_footprint *out) {
  out->held_bytes = 0;
  out->peak_held_bytes = 0;
  return GMR_OK;
}

gmr_resource_vtbl MakeToyVtbl() {
  gmr_resource_vtbl v{};
  v.version = GMR_RESOURCE_VTBL_VERSION;
  v.type_name = "toy_pool";
  v.allocate = ToyAllocate;
  v.deallocate = ToyDeallocate;
  v.destroy = ToyDestroy;
  v.get_footprint = ToyFootprint;
  return v;
}

const gmr_resource_vtbl kToyVtbl = MakeToyVtbl();

class OrderOracle : public gmr_test::SimTest {
 protected:
  // Runs `programs` programs on a toy pool; returns the number that failed.
  int RunToy(bool same_stream_only, int programs) {
    int failed = 0;
    for (int i = 0; i < programs; ++i) {
      gmr_stack *cuda = nullptr;
      gmr_spec_error err = {};
      EXPECT_EQ(GMR_OK, gmr_stack_create("cuda", &cuda, &err)) << err.message;
      auto *toy = new ToyPool();
      toy->base.vtbl = &kToyVtbl;
      toy->upstream = gmr_stack_as_resource(cuda);
      toy->same_stream_only = same_stream_only;
      order_program_options opt = ORDER_PROGRAM_OPTIONS_DEFAULT;
      opt.record_stream = false; // the toy cannot honour it
      opt.trim = false;
      opt.same_stream_free = true;
      order_source src = order_source_seed(7000 + static_cast<uint64_t>(i));
      order_program_result result;
      bool ok = order_program_run(&toy->base, &src, &opt, &result);
      EXPECT_EQ('\0', result.error[0]) << result.error;
      if (!ok) failed++;
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(&toy->base));
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(cuda));
    }
    return failed;
  }
};

TEST_F(OrderOracle, CatchesReuseAcrossStreamsWithNoOrder) {
  EXPECT_GT(RunToy(false, 50), 25) << "the oracle missed most unordered reuses";
}

TEST_F(OrderOracle, PassesReuseOnTheFreeingStreamOnly) { EXPECT_EQ(0, RunToy(true, 50)); }

// The order under the oracle, step by step.
class SimOrder : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    for (gmr_stream *s : {&a_, &b_, &c_}) ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(s));
  }
  void TearDown() override {
    for (gmr_stream s : {a_, b_, c_}) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    SimTest::TearDown();
  }
  bool Ordered(gmr_cuda_sim_mark m, gmr_stream s) {
    bool ordered = false;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_ordered_before(m, s, &ordered));
    return ordered;
  }
  gmr_stream a_ = nullptr, b_ = nullptr, c_ = nullptr;
};

TEST_F(SimOrder, WaitsChainAndARecordBeforeAWaitCoversNothingItBrought) {
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  gmr_cuda_sim_mark m = 0;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_stream(a_, &m));
  EXPECT_TRUE(Ordered(m, a_));  // A's own later work
  EXPECT_FALSE(Ordered(m, b_)); // no wait: B may overlap A's work
  // C waits on a record of B made before B waits on A: nothing of A's work.
  ASSERT_EQ(GMR_OK, gmr_stream_wait_stream(c_, b_));
  EXPECT_FALSE(Ordered(m, c_));
  ASSERT_EQ(GMR_OK, gmr_stream_wait_stream(b_, a_));
  EXPECT_TRUE(Ordered(m, b_));
  EXPECT_FALSE(Ordered(m, c_));
  // Transitive: C waits on B after B's wait on A.
  ASSERT_EQ(GMR_OK, gmr_stream_wait_stream(c_, b_));
  EXPECT_TRUE(Ordered(m, c_));
  bool complete = true;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_query(m, &complete));
  EXPECT_FALSE(complete);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_query(m, &complete));
  EXPECT_TRUE(complete);
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_release(m));
}

TEST_F(SimOrder, AStreamThatWaitedOnHeldWorkRecordsPendingEvents) {
  // B is not held, but it waited on held A: its work, and a mark after the
  // wait, is not done until A's is (the GPU runs B's work after A's).
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  ASSERT_EQ(GMR_OK, gmr_stream_wait_stream(b_, a_));
  gmr_cuda_sim_mark m = 0;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_stream(b_, &m));
  bool complete = true;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_query(m, &complete));
  EXPECT_FALSE(complete);
  EXPECT_FALSE(Ordered(m, c_));
  // Synchronising B finishes what B waited for too.
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(b_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_query(m, &complete));
  EXPECT_TRUE(complete);
  EXPECT_TRUE(Ordered(m, c_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_release(m));
}

TEST_F(SimOrder, MarksRefuseBadArguments) {
  gmr_cuda_sim_mark m = 0;
  bool flag = false;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_mark_stream(nullptr, &m));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_mark_stream(a_, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_mark_ordered_before(12345, a_, &flag));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_mark_query(12345, &flag));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_mark_release(12345));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_stream(a_, &m));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_mark_ordered_before(m, nullptr, &flag));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_mark_release(m));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_cuda_sim_mark_release(m));
}

// The oracle on the simplest cases, without a resource.
TEST_F(SimOrder, OracleFlagsOverlapsItCannotOrder) {
  order_oracle *o = order_oracle_create();
  ASSERT_NE(nullptr, o);
  static char memory[4096];
  char why[256];
  ASSERT_TRUE(order_oracle_check_allocation(o, memory, 1024, a_, why, sizeof why)) << why;
  // Still live: a second hand-out of the same bytes is wrong whatever the order.
  EXPECT_FALSE(order_oracle_check_allocation(o, memory + 512, 64, a_, why, sizeof why));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  gmr_stream users[] = {a_};
  ASSERT_TRUE(order_oracle_note_free(o, memory, 1024, users, 1));
  EXPECT_EQ(1u, order_oracle_watched(o));
  EXPECT_TRUE(order_oracle_check_allocation(o, memory + 1024, 64, b_, why, sizeof why)) << why;
  EXPECT_FALSE(order_oracle_check_allocation(o, memory + 256, 64, b_, why, sizeof why));
  ASSERT_EQ(GMR_OK, gmr_stream_wait_stream(c_, a_));
  EXPECT_TRUE(order_oracle_check_allocation(o, memory + 512, 64, c_, why, sizeof why)) << why;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
  order_oracle_destroy(o);
}

}  // namespace
