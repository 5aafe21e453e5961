// The bundled traces replayed through `vmm` on the simulation, three passes
// as `replay --sim --stack vmm --passes 3` runs them (per-call timers; with
// the traces' captures and without them, as the GPU runs replay): per pass,
// the stream events the pool recorded per free, its queries and waits, the
// device synchronisations and the driver's memory calls, and the peak held
// over the trace's peak live bytes, printed for the record. Issue 32 ("warm,
// several streams"): records in batches (a small share of the frees on the
// traces with several streams that trade now and then) and no pass holding
// more than it did with a record at every free (the simulation's footprints
// are exact).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
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

// What each trace did before batches (0.2.0: a record at every free once a
// second stream shares an engine), and the most records per free allowed
// now.
struct Expected {
  const char *trace;
  size_t held_before_bytes[2][kPasses]; /* [captures off][pass]: the peak held */
  double most_records_per_free;
};

const Expected kExpected[] = {
    {"gpt2_train.csv.gz",
     {{7862222848, 7874805760, 7874805760}, {7862222848, 7874805760, 7874805760}},
     0.01},
    {"resnet50_train.csv.gz",
     {{3172990976, 3172990976, 3172990976}, {3172990976, 3172990976, 3172990976}},
     0.01},
    {"gpt2_graph_capture.csv.gz",
     {{411041792, 413138944, 413138944}, {411041792, 413138944, 413138944}},
     0.1},
    // Four streams trading buffers all the time: hot, a record per free.
    {"multistream.csv.gz",
     {{255852544, 262144000, 264241152}, {255852544, 262144000, 264241152}},
     1.0},
    {"llm_multigraph.csv.gz",
     {{954204160, 983564288, 983564288}, {952107008, 952107008, 952107008}},
     0.1},
};

const Expected &ExpectedFor(const char *trace) {
  for (const Expected &e : kExpected) {
    if (std::strcmp(e.trace, trace) == 0) return e;
  }
  return kExpected[0];
}

struct Counters {
  uint64_t records, queries, waits;
  uint64_t device_syncs, creates, maps, unmaps;
  uint64_t calls; /* every CUDA call of the simulation (the replay's own too) */
};

uint64_t AllCalls() {
  uint64_t n = 0;
  for (int c = 0; c < GMR_CUDA_CALL_COUNT; ++c) {
    n += gmr_cuda_sim_get_call_count(static_cast<gmr_cuda_call>(c));
  }
  return n;
}

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
                  gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_UNMAP),
                  AllCalls()};
}

class VmmBatchTraces : public gmr_test::SimTest,
                       public ::testing::WithParamInterface<const char *> {
 protected:
  void Replay(replay_capture_mode capture);
};

TEST_P(VmmBatchTraces, FewRecordsAndNoPassHoldsMore) { Replay(REPLAY_CAPTURE_REAL); }

TEST_P(VmmBatchTraces, FewRecordsAndNoPassHoldsMoreCapturesOff) { Replay(REPLAY_CAPTURE_OFF); }

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
  const Expected &want = ExpectedFor(GetParam());
  const bool off = capture == REPLAY_CAPTURE_OFF;
  const double live = double(trace->summary.peak_live_bytes);
  for (size_t k = 0; k < kPasses; ++k) {
    const Counters &a = probe.at[k], &b = probe.at[k + 1];
    const size_t frees = r.passes[k].free_count;
    const uint64_t records = b.records - a.records;
    const double per_free = frees ? double(records) / double(frees) : 0.0;
    std::printf("%-25s captures %s pass %zu: %5zu frees, %5llu records (%.3f per free), %4llu "
                "queries, %3llu waits, %3llu device syncs, cuMemCreate/Map/Unmap %llu/%llu/%llu, "
                "%5llu CUDA calls, peak held %zu B = %.4f x live (before batches %.4f)\n",
                GetParam(), off ? "off " : "real", k + 1, frees,
                static_cast<unsigned long long>(records), per_free,
                static_cast<unsigned long long>(b.queries - a.queries),
                static_cast<unsigned long long>(b.waits - a.waits),
                static_cast<unsigned long long>(b.device_syncs - a.device_syncs),
                static_cast<unsigned long long>(b.creates - a.creates),
                static_cast<unsigned long long>(b.maps - a.maps),
                static_cast<unsigned long long>(b.unmaps - a.unmaps),
                static_cast<unsigned long long>(b.calls - a.calls), r.passes[k].peak_held_bytes,
                double(r.passes[k].peak_held_bytes) / live,
                double(want.held_before_bytes[off][k]) / live);
    EXPECT_LE(per_free, want.most_records_per_free) << "pass " << k + 1;
    EXPECT_LE(r.passes[k].peak_held_bytes, want.held_before_bytes[off][k])
        << "pass " << k + 1 << " holds more than before batches";
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
