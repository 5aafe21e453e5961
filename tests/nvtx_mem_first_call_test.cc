// The process's first NVTX memory call made by several threads at once: gmr
// starts NVTX and the memory extension exactly once (NVTX's own lazy start is
// not safe to race; ThreadSanitizer checks this test under --config=tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/nvtx_mem.h"
#include "tests/support/nvtx_recorder_client.h"

namespace {

using gmr_test::NvtxRecorder;

TEST(NvtxMemFirstCall, RacingFirstRegistrationsStartNvtxOnce) {
  if (!gmr__nvtx_mem_compiled_in()) GTEST_SKIP() << "built with GMR_DISABLE_NVTX: nothing to record";
  ASSERT_FALSE(NvtxRecorder::loaded()) << "this test must make the process's first NVTX call";
  constexpr int kThreads = 8;
  std::vector<std::vector<char>> chunks(kThreads, std::vector<char>(4096));
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready++;
      while (ready.load() < kThreads) {
      }
      void *heap = gmr__nvtx_mem_heap_register(chunks[t].data(), 4096, "racer");
      gmr__nvtx_mem_region_register(heap, chunks[t].data(), 64);
      gmr__nvtx_mem_heap_unregister(heap);
    });
  }
  for (auto &th : threads) th.join();
  ASSERT_TRUE(NvtxRecorder::loaded());
  std::map<std::string, int> kinds;
  for (const std::string &line : NvtxRecorder::lines()) kinds[line.substr(0, line.find(' '))]++;
  std::map<std::string, int> want = {{"domain_create", 1},
                                     {"heap_register", kThreads},
                                     {"region_register", kThreads},
                                     {"heap_unregister", kThreads}};
  EXPECT_EQ(want, kinds);
}

}  // namespace
