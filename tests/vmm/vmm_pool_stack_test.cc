// vmm_pool in specs (its options and errors), the replay alias `vmm`
// (= pool > vmm_pool), and the bundled real traces replayed through `vmm` and
// through vmm_pool alone on the simulation: no failure, a consistent pool,
// and the footprint printed for the record.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "gmr/cuda_sim.h"
#include "gmr/pool_resource.h"
#include "gmr/resource.h"
#include "gmr/stack.h"
#include "gmr/vmm_pool_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"
#include "tools/replay/locate.h"
#include "tools/replay/replay.h"
#include "tools/replay/stacks.h"
#include "tools/replay/trace.h"

namespace {

using gmr_test::kMiB;
using gmr_test::Stats;

class VmmPoolStack : public gmr_test::SimTest {
 protected:
  std::string Error(const char *spec) {
    gmr_stack *s = nullptr;
    gmr_spec_error e;
    EXPECT_NE(GMR_OK, gmr_stack_create(spec, &s, &e)) << spec;
    EXPECT_EQ(nullptr, s);
    return e.message;
  }
};

TEST_F(VmmPoolStack, OptionsReachThePool) {
  gmr_stack *s = nullptr;
  gmr_spec_error e;
  ASSERT_EQ(GMR_OK, gmr_stack_create("vmm_pool(page_size=4MiB, va_chunk=64MiB, initial_pages=2, "
                                     "small_pool=false, peer_access=none)",
                                     &s, &e))
      << e.message;
  gmr_vmm_pool_resource *pool =
      gmr_vmm_pool_resource_from_resource(gmr_stack_find(s, "vmm_pool_resource"));
  ASSERT_NE(nullptr, pool);
  gmr_vmm_pool_resource_stats st = Stats(pool);
  EXPECT_EQ(4 * kMiB, st.page_bytes);
  EXPECT_EQ(64 * kMiB, st.reserved_bytes);
  EXPECT_EQ(8 * kMiB, st.free_bytes);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(gmr_stack_as_resource(s), 100, 0, nullptr, &p));
  EXPECT_EQ(4 * kMiB, Stats(pool).live_bytes) << "small_pool=false: a page";
  EXPECT_EQ(GMR_OK, gmr_deallocate(gmr_stack_as_resource(s), p, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

TEST_F(VmmPoolStack, BadOptionsAreExplained) {
  EXPECT_NE(std::string::npos, Error("vmm_pool(peer_access=1+x)").find(
                                   "peer_access: expected none, all, or device ordinals joined "
                                   "by '+'"))
      << Error("vmm_pool(peer_access=1+x)");
  std::string gran = Error("vmm_pool(page_size=3MiB)");
  EXPECT_NE(std::string::npos, gran.find("multiple of device 0's VMM granularity")) << gran;
  std::string peer = Error("vmm_pool(peer_access=0)");
  EXPECT_NE(std::string::npos, peer.find("peer 0 is not another device")) << peer;
  std::string typo = Error("vmm_pool(page=2MiB)");
  EXPECT_NE(std::string::npos, typo.find("unknown option 'page' for vmm_pool")) << typo;
}

TEST_F(VmmPoolStack, TheVmmAliasIsThePoolOverTheVmmPool) {
  replay_stack *stack = nullptr;
  char err[256] = "";
  ASSERT_EQ(GMR_OK, replay_stack_create("vmm", &stack, err, sizeof err)) << err;
  gmr_stack *s = replay_stack_get(stack);
  ASSERT_EQ(2u, gmr_stack_get_depth(s));
  EXPECT_STREQ("pool_resource", gmr_resource_type_name(gmr_stack_get_layer(s, 0)));
  EXPECT_STREQ("vmm_pool_resource", gmr_resource_type_name(gmr_stack_get_layer(s, 1)));
  bool found = false;
  for (size_t i = 0; i < replay_stack_known_count(); ++i) {
    if (std::string("vmm") == replay_stack_known_name(i)) {
      found = true;
      EXPECT_STREQ("pool > vmm_pool", replay_stack_known_spec(i));
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(GMR_OK, replay_stack_destroy(stack));
}

struct TraceFile {
  replay_trace *trace = nullptr;
  ~TraceFile() { replay_trace_destroy(trace); }
};

class VmmPoolTraces : public VmmPoolStack, public ::testing::WithParamInterface<const char *> {};

TEST_P(VmmPoolTraces, BundledTracesReplayThroughVmmAndVmmPoolAlone) {
  char path[4096], looked[8192];
  ASSERT_EQ(GMR_OK, replay_locate_bundled_trace(nullptr, GetParam(), path, sizeof path, looked,
                                                sizeof looked))
      << looked;
  TraceFile t;
  char err[512];
  ASSERT_EQ(GMR_OK, replay_trace_read(path, nullptr, &t.trace, err, sizeof err)) << err;
  for (const char *spec : {"vmm", "vmm_pool", "pool"}) {
    SCOPED_TRACE(spec);
    replay_stack *stack = nullptr;
    ASSERT_EQ(GMR_OK, replay_stack_create(spec, &stack, err, sizeof err)) << err;
    gmr_vmm_pool_resource *pool = gmr_vmm_pool_resource_from_resource(
        gmr_stack_find(replay_stack_get(stack), "vmm_pool_resource"));
    replay_result r;
    // Capture rows are ignored: graph capture is the graph pool's job.
    replay_options options = REPLAY_OPTIONS_DEFAULT;
    options.capture = REPLAY_CAPTURE_OFF;
    ASSERT_EQ(GMR_OK, replay_run_with(t.trace, replay_stack_top(stack), 0, &options, &r))
        << r.first_failure;
    if (pool != nullptr) {
      gmr_test::ExpectInvariants(pool);
      gmr_vmm_pool_resource_stats s = Stats(pool);
      std::printf("%-18s %-9s peak held / peak live %.3f (%zu defragmentations, %llu pages "
                  "remapped)\n",
                  GetParam(), spec,
                  double(r.footprint.peak_held_bytes) / double(t.trace->summary.peak_live_bytes),
                  size_t(s.defrag_count), (unsigned long long)s.remapped_page_count);
    } else {
      std::printf("%-18s %-9s peak held / peak live %.3f\n", GetParam(), spec,
                  double(r.footprint.peak_held_bytes) / double(t.trace->summary.peak_live_bytes));
    }
    EXPECT_GE(r.footprint.peak_held_bytes, t.trace->summary.peak_live_bytes);
    replay_result_set_destroy_status(&r, replay_stack_destroy(stack));
    EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
    replay_result_free(&r);
  }
}

INSTANTIATE_TEST_SUITE_P(Bundled, VmmPoolTraces,
                         ::testing::Values("gpt2_train.csv.gz", "resnet50_train.csv.gz",
                                           "gpt2_graph_capture.csv.gz", "multistream.csv.gz"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           std::string n = info.param;
                           return n.substr(0, n.find('.'));
                         });

}  // namespace
