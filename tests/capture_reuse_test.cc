// Reuse inside a CUDA graph capture of memory freed with record_stream uses
// on forked streams (stream_ordered/capture_reuse.h: PyTorch's opt-in
// graph_capture_record_stream_reuse rule, its TestMemPool
// test_graph_capture_reclaim_2_streams / _4_streams): the freeing stream
// gets the block back only once every stream that used it has joined back
// (nested forks, partial joins), and then it does get it back, inside the
// same capture.
#include <gtest/gtest.h>

#include <string>

#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"

namespace {

struct Case {
  const char *name;
  const char *spec;
  size_t bytes;
};

const size_t kMiB = static_cast<size_t>(1) << 20;

const Case kCases[] = {
    {"vmm", "vmm", 1 * kMiB},
    {"vmm_small_requests", "vmm", 4096},
    {"pool", "pool(min_growth=1MiB, max_growth=1MiB, granularity=1MiB) > cuda", 1 * kMiB},
    {"vmm_pages", "vmm_pages", 4 * kMiB},
    {"vmm_pages_small_path", "vmm_pages", 64 * 1024},
    {"graph_arena", "graph_arena(policy=ordered_reuse, chunk=1MiB) > cuda", 1 * kMiB},
};

class CaptureReuse : public gmr_test::SimTest, public ::testing::WithParamInterface<Case> {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    gmr_spec_error err = {};
    ASSERT_EQ(GMR_OK, gmr_stack_create(GetParam().spec, &stack_, &err)) << err.message;
    r_ = gmr_stack_as_resource(stack_);
    for (gmr_stream *s : {&origin_, &f1_, &f2_, &f3_}) ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(s));
  }

  void TearDown() override {
    gmr_resource *layer = gmr_resource_find(r_, "graph_arena_resource");
    if (layer != nullptr) {
      gmr_graph_arena_resource *arena = gmr_graph_arena_resource_from_resource(layer);
      gmr_graph_memory *m = nullptr;
      for (gmr_stream s : {origin_, f1_, f2_, f3_}) {
        while (gmr_graph_arena_resource_end_capture(arena, s, &m) == GMR_OK) {
          EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(arena, m));
        }
      }
    }
    EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack_));
    for (gmr_stream s : {origin_, f1_, f2_, f3_}) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    SimTest::TearDown();
  }

  // A request during the capture, as a framework makes it (PyTorch's
  // private pools grow through cudaMalloc in relaxed mode).
  void *Allocate(gmr_stream s) {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_capturing(r_, GetParam().bytes, 0, s, &p, &f))
        << f.message;
    return p;
  }
  void Free(void *p, gmr_stream s) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, GetParam().bytes, 0, s));
  }
  // A kernel on `s` (in a capture: a node of the graph), as the program's
  // use of the memory would be.
  void Work(gmr_stream s) {
    gmr_cuda_sim_mark m = 0;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_stream(s, &m));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_mark_release(m));
  }
  void Wait(gmr_stream waiter, gmr_stream waited) {
    ASSERT_EQ(GMR_OK, gmr_stream_wait_stream(waiter, waited));
  }
  void EndCapture() {
    gmr_graph graph = nullptr;
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(origin_, &graph))
        << "broken by " << gmr_cuda_call_name(gmr_cuda_sim_get_capture_breaker());
    EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  }

  gmr_stack *stack_ = nullptr;
  gmr_resource *r_ = nullptr;
  gmr_stream origin_ = nullptr, f1_ = nullptr, f2_ = nullptr, f3_ = nullptr;
};

// O forks F1, F1 forks F2 (nested). A block of O is used on F2
// (record_stream) and freed on O. It stays away from O while F2 has joined
// only F1 (a partial join: O is not after F2's use yet), and comes back to O
// once F1 has joined O.
TEST_P(CaptureReuse, NestedForkBlockComesBackOnlyAfterTheFullJoin) {
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(origin_));
  Wait(f1_, origin_);
  Wait(f2_, f1_);
  void *p = Allocate(origin_);
  Work(origin_);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, f2_));
  Work(f2_);
  Free(p, origin_);
  void *before_join = Allocate(origin_);
  EXPECT_NE(p, before_join) << "reused while F2 may still use it";
  Wait(f1_, f2_); // F2 joins F1: O is still not ordered after F2
  void *partial = Allocate(origin_);
  EXPECT_NE(p, partial) << "reused after a partial join";
  Wait(origin_, f1_); // F1 (and through it F2) joins O
  void *after_join = Allocate(origin_);
  EXPECT_EQ(p, after_join) << "not reused inside the capture after the join";
  Free(after_join, origin_);
  Free(partial, origin_);
  Free(before_join, origin_);
  EndCapture();
}

// Two forks used the block (PyTorch's reclaim tests with 2 and 4 streams):
// joining one of them is not enough.
TEST_P(CaptureReuse, EveryForkThatUsedTheBlockMustJoin) {
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(origin_));
  Wait(f1_, origin_);
  Wait(f2_, origin_);
  Wait(f3_, origin_);
  void *p = Allocate(origin_);
  Work(origin_);
  for (gmr_stream f : {f1_, f2_, f3_}) {
    ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, f));
    Work(f);
  }
  Free(p, origin_);
  Wait(origin_, f1_);
  Wait(origin_, f3_);
  void *one_missing = Allocate(origin_);
  EXPECT_NE(p, one_missing) << "reused while F2 had not joined";
  Wait(origin_, f2_);
  void *all_joined = Allocate(origin_);
  EXPECT_EQ(p, all_joined);
  Free(all_joined, origin_);
  Free(one_missing, origin_);
  EndCapture();
}

// A fork that used the block but never joins before the capture ends: the
// block waits for the capture's end (and a device synchronisation) as before.
TEST_P(CaptureReuse, AForkThatNeverJoinsKeepsTheBlockForTheWholeCapture) {
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(origin_));
  Wait(f1_, origin_);
  void *p = Allocate(origin_);
  Work(origin_);
  ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, p, f1_));
  Work(f1_);
  Free(p, origin_);
  void *q = Allocate(origin_);
  void *r = Allocate(origin_);
  EXPECT_NE(p, q);
  EXPECT_NE(p, r);
  Free(q, origin_);
  Free(r, origin_);
  Wait(origin_, f1_); // CUDA needs every fork joined before the capture ends
  EndCapture();
}

INSTANTIATE_TEST_SUITE_P(Resources, CaptureReuse, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.name);
                         });

}  // namespace
