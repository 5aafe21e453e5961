// NVTX logging adaptors created by several threads at once as the process's
// first NVTX use: NVTX, the domain and the counters extension start once and
// every adaptor gets its counter (ThreadSanitizer checks this test under
// --config=tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmr/nvtx_logging_adaptor.h"
#include "tests/support/mock_resource.h"
#include "tests/support/nvtx_recorder_client.h"

namespace {

using gmr_test::NvtxRecorder;

TEST(NvtxAdaptorFirstCall, AdaptorsCreatedInRacingThreadsEachRegisterOnce) {
  if (!gmr_nvtx_is_compiled_in()) GTEST_SKIP() << "built with GMR_DISABLE_NVTX: nothing to record";
  ASSERT_FALSE(NvtxRecorder::loaded()) << "this test must make the process's first NVTX call";
  constexpr int kThreads = 8;
  gmr_mock_resource *mock = gmr_mock_resource_create(nullptr);
  ASSERT_NE(nullptr, mock);
  std::vector<gmr_nvtx_logging_adaptor *> adaptors(kThreads, nullptr);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready++;
      while (ready.load() < kThreads) {
      }
      if (gmr_nvtx_logging_adaptor_create(gmr_mock_resource_as_resource(mock), nullptr,
                                          &adaptors[t]) != GMR_OK) {
        return;
      }
      gmr_resource *r = gmr_nvtx_logging_adaptor_as_resource(adaptors[t]);
      void *p = nullptr;
      if (gmr_resource_allocate(r, 64, 0, nullptr, &p) == GMR_OK)
        (void)gmr_resource_deallocate(r, p, 64, 0, nullptr);
    });
  }
  for (auto &th : threads) th.join();
  std::map<std::string, int> kinds;
  for (const std::string &line : NvtxRecorder::lines()) kinds[line.substr(0, line.find(' '))]++;
  EXPECT_EQ(kThreads, kinds["domain_create"]);
  EXPECT_EQ(kThreads, kinds["counter_register"]);
  EXPECT_EQ(kThreads * 6, kinds["name_category"]);
  EXPECT_EQ(kThreads, kinds["push"] / 2);
  EXPECT_EQ(kinds["push"], kinds["pop"]);
  EXPECT_EQ(kinds["push"], kinds["counter"]);
  for (gmr_nvtx_logging_adaptor *a : adaptors) {
    ASSERT_NE(nullptr, a);
    EXPECT_TRUE(gmr_nvtx_logging_adaptor_is_tool_attached(a));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_nvtx_logging_adaptor_as_resource(a)));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock)));
}

}  // namespace
