// tests/replay_calls_test.cc: the driver calls tools/replay reports per pass
// (tools/replay/calls.h), and the counting view of the real CUDA layer they
// come from on a GPU (core/cuda_counts.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/cuda_counts.h"
#include "core/cuda_layer.h"
#include "core/cuda_vmm.h"
#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/vmm_resource.h"
#include "tests/support/sim_fixture.h"
#include "tools/replay/calls.h"
#include "tools/replay/measure.h"
#include "tools/replay/replay.h"
#include "tools/replay/report.h"
#include "tools/replay/trace.h"

namespace {

// ---- the counting view of the real layer ---------------------------------------

TEST(CudaCountsTest, TheRealLayerCountsOnlyWhileCountingIsOn) {
  gmr__cuda_counting_set(false);
  const uint64_t before = gmr__cuda_real_count(GMR_CUDA_CALL_EVENT_RECORD);
  gmr__cuda_count(GMR_CUDA_CALL_EVENT_RECORD);
  EXPECT_EQ(before, gmr__cuda_real_count(GMR_CUDA_CALL_EVENT_RECORD));
  gmr__cuda_counting_set(true);
  gmr__cuda_count(GMR_CUDA_CALL_EVENT_RECORD);
  gmr__cuda_count(GMR_CUDA_CALL_EVENT_RECORD);
  gmr__cuda_counting_set(false);
  EXPECT_EQ(before + 2, gmr__cuda_real_count(GMR_CUDA_CALL_EVENT_RECORD));
  EXPECT_EQ(0u, gmr__cuda_real_count(static_cast<gmr_cuda_call>(GMR_CUDA_CALL_COUNT)));
}

TEST(CudaCountsTest, TheCountedListNamesWhatTakesMapsOrdersOrWaits) {
  for (gmr_cuda_call c : {GMR_CUDA_CALL_MEM_CREATE, GMR_CUDA_CALL_MEM_MAP,
                          GMR_CUDA_CALL_MEM_UNMAP, GMR_CUDA_CALL_MEM_RELEASE,
                          GMR_CUDA_CALL_MEM_SET_ACCESS, GMR_CUDA_CALL_EVENT_RECORD,
                          GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, GMR_CUDA_CALL_STREAM_SYNCHRONIZE,
                          GMR_CUDA_CALL_MALLOC, GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC}) {
    EXPECT_TRUE(gmr__cuda_counted_by_real(c)) << gmr_cuda_call_name(c);
  }
  EXPECT_FALSE(gmr__cuda_counted_by_real(GMR_CUDA_CALL_GET_DEVICE));
  EXPECT_FALSE(gmr__cuda_counted_by_real(GMR_CUDA_CALL_STREAM_GET_ID));
}

// The real tables' slots count their call, whatever it returns (here, on a
// machine without a GPU, an error; on one with a GPU, success).
TEST(CudaCountsTest, TheRealTablesCountTheCallsTheyMake) {
  gmr__cuda_counting_set(true);
  const uint64_t sync = gmr__cuda_real_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  const uint64_t unmap = gmr__cuda_real_count(GMR_CUDA_CALL_MEM_UNMAP);
  (void)gmr__cuda_real_ops.device_synchronize();
  (void)gmr__cuda_vmm_real_ops.unmap(0, 0);  // refused: no such mapping
  gmr__cuda_counting_set(false);
  EXPECT_EQ(sync + 1, gmr__cuda_real_count(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE));
  EXPECT_EQ(unmap + 1, gmr__cuda_real_count(GMR_CUDA_CALL_MEM_UNMAP));
}

// ---- the replay's counts per pass ----------------------------------------------

std::string WriteTrace(const std::string &name, const std::string &content) {
  const char *dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  return path;
}

// Three allocations of 3, 5 and 7 MiB on the default stream, freed in order:
// a fresh vmm grows for them; the second pass finds them free.
const char kGrowTrace[] =
    "action,addr,size,stream,time_us\r\n"
    "alloc,4096,3145728,0,1\r\n"
    "alloc,8192,5242880,0,2\r\n"
    "alloc,12288,7340032,0,3\r\n"
    "free_requested,4096,3145728,0,4\r\n"
    "free_requested,8192,5242880,0,5\r\n"
    "free_requested,12288,7340032,0,6\r\n";

class ReplayCallsTest : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    char err[512];
    ASSERT_EQ(GMR_OK, replay_trace_read(WriteTrace("grow.csv", kGrowTrace).c_str(), nullptr,
                                        &trace_, err, sizeof err))
        << err;
  }
  void TearDown() override {
    replay_trace_destroy(trace_);
    SimTest::TearDown();
  }
  replay_trace *trace_ = nullptr;
};

TEST_F(ReplayCallsTest, EachPassCountsTheCallsItsEventsMadeAndTheyAgreeWithThePool) {
  gmr_vmm_pool_resource_config config = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  config.shard_count = 1;
  gmr_vmm_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_vmm_resource_create(&config, &pool, nullptr));
  replay_options o = REPLAY_OPTIONS_DEFAULT;
  o.pass_count = 2;
  o.timing = REPLAY_TIMING_PASS;
  replay_result r;
  const uint64_t sim_creates = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE);
  ASSERT_EQ(GMR_OK, replay_run_with(trace_, gmr_vmm_pool_resource_as_resource(pool), 0, &o, &r));
  ASSERT_TRUE(replay_result_ok(&r)) << r.first_failure;
  const replay_calls &cold = r.passes[0].calls;
  const replay_calls &warm = r.passes[1].calls;
  EXPECT_GT(cold.count[REPLAY_CALL_CREATE], 0u);
  EXPECT_GE(cold.count[REPLAY_CALL_MAP], cold.count[REPLAY_CALL_CREATE]);
  EXPECT_GT(cold.count[REPLAY_CALL_ACCESS], 0u);
  EXPECT_EQ(0u, cold.count[REPLAY_CALL_MALLOC]);  // a VMM pool takes no cudaMalloc
  EXPECT_EQ(0u, replay_calls_total(&warm)) << "a warm pass of a repeating trace grows nothing";
  // The pool's own counter of cuMemCreate and the simulation's agree with the
  // replay's (nothing was created outside the passes: no initial pages).
  gmr_vmm_pool_resource_stats s = GMR_VMM_POOL_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_get_stats(pool, &s));
  EXPECT_EQ(s.page_create_count, cold.count[REPLAY_CALL_CREATE]);
  EXPECT_EQ(s.map_count, cold.count[REPLAY_CALL_MAP]);
  EXPECT_EQ(gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE) - sim_creates,
            cold.count[REPLAY_CALL_CREATE]);
  uint64_t sum = 0;
  for (int k = 0; k < REPLAY_CALL_KIND_COUNT; ++k) sum += cold.count[k];
  EXPECT_EQ(sum, replay_calls_total(&cold));
  replay_result_free(&r);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_vmm_pool_resource_as_resource(pool)));
}

TEST_F(ReplayCallsTest, TheClockRunsCountsAreTheOnesReportedAndPrinted) {
  replay_options o = REPLAY_OPTIONS_DEFAULT;
  o.pass_count = 2;
  replay_result r;
  char err[256];
  ASSERT_EQ(GMR_OK, replay_measure(trace_, "vmm(shards=1)", 0, &o, &r, nullptr, 0, err,
                                   sizeof err))
      << err;
  ASSERT_TRUE(replay_result_ok(&r)) << r.first_failure;
  const uint64_t creates = r.passes[0].calls.count[REPLAY_CALL_CREATE];
  ASSERT_GT(creates, 0u);
  const char *names[1] = {"vmm(shards=1)"};
  char *text = nullptr;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  ASSERT_NE(nullptr, out);
  replay_report_print_calls(out, names, &r, 1, true);
  std::fclose(out);
  std::string report(text, size);
  std::free(text);
  EXPECT_NE(std::string::npos, report.find("driver calls per pass")) << report;
  EXPECT_NE(std::string::npos, report.find(" create     map   unmap release  access")) << report;
  char row[64];
  std::snprintf(row, sizeof row, "vmm(shards=1) 1 cold %7llu", (unsigned long long)creates);
  EXPECT_NE(std::string::npos, report.find(row)) << report;
  EXPECT_NE(std::string::npos, report.find("              2 warm       0       0")) << report;
  EXPECT_NE(std::string::npos, report.find("by the simulation")) << report;
  EXPECT_NE(std::string::npos, report.find("access: cuMemSetAccess")) << report;
  replay_result_free(&r);
}

TEST(ReplayCallKindTest, NamesAndFunctionsCoverEveryKind) {
  for (int k = 0; k < REPLAY_CALL_KIND_COUNT; ++k) {
    EXPECT_STRNE("?", replay_call_kind_name(static_cast<replay_call_kind>(k)));
    EXPECT_STRNE("?", replay_call_kind_functions(static_cast<replay_call_kind>(k)));
  }
  EXPECT_STREQ("?", replay_call_kind_name(REPLAY_CALL_KIND_COUNT));
  EXPECT_STREQ("cuMemCreate", replay_call_kind_functions(REPLAY_CALL_CREATE));
}

}  // namespace
