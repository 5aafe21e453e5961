// The bundled traces replayed through `vmm` on the simulation, three passes
// as `replay --sim --stack vmm --passes 3` runs them (captures real, per-call
// timers): per pass, the stream events the pool recorded per free, the
// waits, queries and device synchronisations, the driver's memory calls, and
// the peak held over the trace's peak live bytes. Issue 32 ("warm, several
// streams"): batched recording must not make any pass hold more.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/stack.h"
#include "gmr/vmm_pool_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"
#include "tools/replay/locate.h"
#include "tools/replay/replay.h"
#include "tools/replay/stacks.h"
#include "tools/replay/trace.h"

namespace {

constexpr size_t kPasses = 3;

struct Counters {
  uint64_t records, queries, waits;
  uint64_t device_syncs, creates, maps, unmaps;
};

struct Probe {
  gmr_vmm_pool_resource *pool;
  Counters at[kPasses + 1];
};

Counters Read(gmr_vmm_pool_resource *pool) {
  gmr_vmm_pool_resource_stats s = gmr_test::Stats(pool);
  return Counters{s.event_record_count,
                  s.event_query_count,
                  s.stream_wait_count,
                  gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE),
                  gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE),
                  gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_MAP),
                  gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_UNMAP)};
}

class VmmBatchTraces : public gmr_test::SimTest,
                       public ::testing::WithParamInterface<const char *> {
 protected:
  void Replay(replay_capture_mode capture);
};

TEST_P(VmmBatchTraces, RecordsPerFreeAndFootprintPerPass) { Replay(REPLAY_CAPTURE_REAL); }

TEST_P(VmmBatchTraces, RecordsPerFreeAndFootprintPerPassCapturesOff) {
  Replay(REPLAY_CAPTURE_OFF);
}

void VmmBatchTraces::Replay(replay_capture_mode capture) {
  char path[1024], looked[1024], err[512];
  ASSERT_EQ(GMR_OK, replay_locate_bundled_trace(nullptr, GetParam(), path, sizeof path, looked,
                                                sizeof looked))
      << looked;
  replay_trace *trace = nullptr;
  ASSERT_EQ(GMR_OK, replay_trace_read(path, nullptr, &trace, err, sizeof err)) << err;
  replay_stack *stack = nullptr;
  ASSERT_EQ(GMR_OK, replay_stack_create("vmm", &stack, err, sizeof err)) << err;
  Probe probe{};
  probe.pool = gmr_vmm_pool_resource_from_resource(
      gmr_resource_find(gmr_stack_as_resource(replay_stack_get(stack)), "vmm_pool_resource"));
  ASSERT_NE(nullptr, probe.pool);
  replay_options options = REPLAY_OPTIONS_DEFAULT;
  options.pass_count = kPasses;
  options.capture = capture;
  options.before_pass = [](void *context, size_t pass_index) {
    auto *p = static_cast<Probe *>(context);
    p->at[pass_index] = Read(p->pool);
  };
  options.before_pass_context = &probe;
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run_with(trace, replay_stack_top(stack), 0, &options, &r))
      << r.first_failure;
  probe.at[kPasses] = Read(probe.pool);
  const double live = double(trace->summary.peak_live_bytes);
  for (size_t k = 0; k < kPasses; ++k) {
    const Counters &a = probe.at[k], &b = probe.at[k + 1];
    const size_t frees = r.passes[k].free_count;
    std::printf("%-24s %s pass %zu: frees %5zu records %5llu (%.3f per free) queries %5llu waits "
                "%4llu device syncs %3llu cuMemCreate %3llu cuMemMap %3llu cuMemUnmap %3llu "
                "peak held %llu B (%.4f of live %llu B)\n",
                GetParam(), capture == REPLAY_CAPTURE_OFF ? "off " : "real", k + 1, frees, (unsigned long long)(b.records - a.records),
                frees ? double(b.records - a.records) / double(frees) : 0.0,
                (unsigned long long)(b.queries - a.queries),
                (unsigned long long)(b.waits - a.waits),
                (unsigned long long)(b.device_syncs - a.device_syncs),
                (unsigned long long)(b.creates - a.creates), (unsigned long long)(b.maps - a.maps),
                (unsigned long long)(b.unmaps - a.unmaps),
                (unsigned long long)r.passes[k].peak_held_bytes,
                double(r.passes[k].peak_held_bytes) / live,
                (unsigned long long)trace->summary.peak_live_bytes);
  }
  gmr_test::ExpectInvariants(probe.pool);
  replay_result_set_destroy_status(&r, replay_stack_destroy(stack));
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  replay_result_free(&r);
  replay_trace_destroy(trace);
}

INSTANTIATE_TEST_SUITE_P(Bundled, VmmBatchTraces,
                         ::testing::Values("gpt2_train.csv.gz", "resnet50_train.csv.gz",
                                           "gpt2_graph_capture.csv.gz", "multistream.csv.gz",
                                           "llm_multigraph.csv.gz"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           std::string n = info.param;
                           return n.substr(0, n.find('.'));
                         });

}  // namespace
