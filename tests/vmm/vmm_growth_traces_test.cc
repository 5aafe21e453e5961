// tests/vmm/vmm_growth_traces_test.cc: the bundled traces through `vmm`,
// three passes as tools/replay runs them (captures real and off), on the
// simulation: the footprint bar of issue 32 (each pass's peak held / peak
// live no higher than before the growth work, 2026-12), and creator threads
// (creators=2) that change nothing but who calls cuMemCreate: the same peaks
// and the same driver calls per pass as the allocating thread alone.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "tests/support/sim_fixture.h"
#include "tools/replay/calls.h"
#include "tools/replay/locate.h"
#include "tools/replay/measure.h"
#include "tools/replay/replay.h"
#include "tools/replay/trace.h"

namespace {

struct Bar {
  const char *trace;
  double real[3]; /* captures replayed for real (tools/replay's default) */
  double off[3];  /* --capture off (the GPU anchor runs) */
};

// Before the growth work (main 5413736), peak held / peak live per pass.
const Bar kBars[] = {
    {"gpt2_train.csv.gz", {1.0209, 1.0225, 1.0225}, {1.0209, 1.0225, 1.0225}},
    {"resnet50_train.csv.gz", {1.0155, 1.0155, 1.0155}, {1.0155, 1.0155, 1.0155}},
    {"gpt2_graph_capture.csv.gz", {1.0153, 1.0205, 1.0205}, {1.0153, 1.0205, 1.0205}},
    {"multistream.csv.gz", {1.3012, 1.3332, 1.3439}, {1.3012, 1.3332, 1.3439}},
    {"llm_multigraph.csv.gz", {1.0062, 1.0371, 1.0371}, {1.0039, 1.0039, 1.0039}},
};

class VmmGrowthTraces : public gmr_test::SimTest,
                        public ::testing::WithParamInterface<const Bar *> {
 protected:
  void SetUp() override {
    // A device with room for any trace, as tools/replay gives it.
    sim_config_.device_memory_bytes = size_t{80} << 30;
    SimTest::SetUp();
    char path[4096], looked[8192], err[512];
    ASSERT_EQ(GMR_OK, replay_locate_bundled_trace(nullptr, GetParam()->trace, path, sizeof path,
                                                  looked, sizeof looked))
        << looked;
    ASSERT_EQ(GMR_OK, replay_trace_read(path, nullptr, &trace_, err, sizeof err)) << err;
  }
  void TearDown() override {
    replay_trace_destroy(trace_);
    SimTest::TearDown();
  }
  void Run(const char *spec, replay_capture_mode capture, replay_result *out) {
    replay_options o = REPLAY_OPTIONS_DEFAULT;
    o.pass_count = 3;
    o.capture = capture;
    char err[512];
    ASSERT_EQ(GMR_OK, replay_measure(trace_, spec, 0, &o, out, nullptr, 0, err, sizeof err))
        << err;
    ASSERT_TRUE(replay_result_ok(out)) << spec << ": " << out->first_failure;
  }
  replay_trace *trace_ = nullptr;
};

TEST_P(VmmGrowthTraces, FootprintStaysAtOrBelowTheBarAndThreadsChangeNothingButWhoCreates) {
  const Bar *bar = GetParam();
  const double live = double(trace_->summary.peak_live_bytes);
  for (replay_capture_mode capture : {REPLAY_CAPTURE_REAL, REPLAY_CAPTURE_OFF}) {
    SCOPED_TRACE(capture == REPLAY_CAPTURE_REAL ? "captures real" : "captures off");
    const double *limit = capture == REPLAY_CAPTURE_REAL ? bar->real : bar->off;
    replay_result plain, threaded;
    Run("vmm", capture, &plain);
    if (HasFatalFailure()) return;
    Run("vmm(creators=2)", capture, &threaded);
    if (HasFatalFailure()) {
      replay_result_free(&plain);
      return;
    }
    for (size_t k = 0; k < 3; ++k) {
      SCOPED_TRACE("pass " + std::to_string(k + 1));
      const double ratio = double(plain.passes[k].peak_held_bytes) / live;
      EXPECT_LE(ratio, limit[k] + 1e-4);
      EXPECT_EQ(plain.passes[k].peak_held_bytes, threaded.passes[k].peak_held_bytes);
      for (replay_call_kind kind : {REPLAY_CALL_CREATE, REPLAY_CALL_MAP, REPLAY_CALL_UNMAP,
                                    REPLAY_CALL_RELEASE, REPLAY_CALL_ACCESS}) {
        EXPECT_EQ(plain.passes[k].calls.count[kind], threaded.passes[k].calls.count[kind])
            << replay_call_kind_name(kind);
      }
    }
    const replay_calls &cold = plain.passes[0].calls;
    std::printf("%-26s %s vmm peak held / live %.4f %.4f %.4f; pass 1 calls: create %llu map "
                "%llu unmap %llu access %llu sync %llu total %llu\n",
                bar->trace, capture == REPLAY_CAPTURE_REAL ? "real" : "off ",
                double(plain.passes[0].peak_held_bytes) / live,
                double(plain.passes[1].peak_held_bytes) / live,
                double(plain.passes[2].peak_held_bytes) / live,
                (unsigned long long)cold.count[REPLAY_CALL_CREATE],
                (unsigned long long)cold.count[REPLAY_CALL_MAP],
                (unsigned long long)cold.count[REPLAY_CALL_UNMAP],
                (unsigned long long)cold.count[REPLAY_CALL_ACCESS],
                (unsigned long long)cold.count[REPLAY_CALL_SYNC],
                (unsigned long long)replay_calls_total(&cold));
    replay_result_free(&plain);
    replay_result_free(&threaded);
  }
}

INSTANTIATE_TEST_SUITE_P(Bundled, VmmGrowthTraces, ::testing::ValuesIn([] {
                           std::vector<const Bar *> v;
                           for (const Bar &b : kBars) v.push_back(&b);
                           return v;
                         }()),
                         [](const ::testing::TestParamInfo<const Bar *> &info) {
                           std::string n = info.param->trace;
                           return n.substr(0, n.find('.'));
                         });

}  // namespace
