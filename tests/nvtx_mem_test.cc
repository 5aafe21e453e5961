// core/nvtx_mem (the NVTX memory-extension annotations sub-allocators make)
// with a tool attached: the recording injection sees every heap and region
// call, and checks each structure's extCompatID/structSize ("BAD" lines).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/nvtx_mem.h"
#include "tests/support/nvtx_recorder_client.h"

namespace {

using gmr_test::NvtxRecorder;
using Lines = std::vector<std::string>;

// The recorder numbers heaps across the whole process; renumber them H1, H2...
// in order of first appearance so expectations do not depend on test order.
Lines renumbered(const Lines &in) {
  std::map<std::string, std::string> names;
  Lines out;
  for (std::string line : in) {
    size_t at = line.find(" heap");
    if (at != std::string::npos) {
      size_t end = at + 5;
      while (end < line.size() && isdigit(static_cast<unsigned char>(line[end]))) end++;
      std::string old = line.substr(at + 1, end - at - 1);
      if (names.count(old) == 0) names[old] = "H" + std::to_string(names.size() + 1);
      line.replace(at + 1, old.size(), names[old]);
    }
    out.push_back(line);
  }
  return out;
}

std::string hex_at(const void *base, size_t offset) {
  return NvtxRecorder::hex(static_cast<const char *>(base) + offset);
}

class NvtxMemTest : public ::testing::Test {
 protected:
  static Lines first_lines_;

  static void SetUpTestSuite() {
    // The process's first NVTX memory call starts NVTX and the extension.
    static char warm[64];
    void *heap = gmr__nvtx_mem_heap_register(warm, sizeof warm, "warm-up");
    gmr__nvtx_mem_heap_unregister(heap);
    first_lines_ = NvtxRecorder::lines();
  }

  void SetUp() override {
    if (!gmr__nvtx_mem_compiled_in()) GTEST_SKIP() << "built with GMR_DISABLE_NVTX: nothing to record";
    ASSERT_TRUE(NvtxRecorder::loaded());
    NvtxRecorder::clear();
  }
};

Lines NvtxMemTest::first_lines_;

TEST_F(NvtxMemTest, FirstCallCreatesTheGmrDomainOnce) {
  Lines want = {
      "domain_create gmr",
      "heap_register gmr H1 base=" + first_lines_.at(1).substr(first_lines_.at(1).find("base=") + 5,
                                                              first_lines_.at(1).find(" size=") -
                                                                  first_lines_.at(1).find("base=") - 5) +
          " size=64 usage=sub_allocator type=virtual_address name=\"warm-up\"",
      "heap_unregister gmr H1",
  };
  EXPECT_EQ(want, renumbered(first_lines_));
}

TEST_F(NvtxMemTest, ChunkBlocksAndReleaseGiveTheExactRegistrations) {
  std::vector<char> chunk(1 << 20);
  void *base = chunk.data();
  void *heap = gmr__nvtx_mem_heap_register(base, chunk.size(), "pool_resource chunk");
  ASSERT_NE(nullptr, heap) << "a tool is attached: the heap handle is the tool's";
  gmr__nvtx_mem_region_register(heap, base, 4096);
  gmr__nvtx_mem_region_register(heap, static_cast<char *>(base) + 4096, 4096);
  gmr__nvtx_mem_region_unregister(base);
  gmr__nvtx_mem_region_register(heap, base, 256);  // the block reused, smaller
  gmr__nvtx_mem_heap_reset(heap);
  gmr__nvtx_mem_heap_unregister(heap);

  Lines want = {
      "heap_register gmr H1 base=" + hex_at(base, 0) +
          " size=1048576 usage=sub_allocator type=virtual_address name=\"pool_resource chunk\"",
      "region_register gmr H1 " + hex_at(base, 0) + " 4096",
      "region_register gmr H1 " + hex_at(base, 4096) + " 4096",
      "region_unregister gmr " + hex_at(base, 0),
      "region_register gmr H1 " + hex_at(base, 0) + " 256",
      "heap_reset gmr H1",
      "heap_unregister gmr H1",
  };
  EXPECT_EQ(want, renumbered(NvtxRecorder::lines()));
}

TEST_F(NvtxMemTest, TwoChunksKeepTheirOwnHeaps) {
  std::vector<char> a(8192), b(8192);
  void *ha = gmr__nvtx_mem_heap_register(a.data(), a.size(), nullptr);
  void *hb = gmr__nvtx_mem_heap_register(b.data(), b.size(), nullptr);
  ASSERT_NE(ha, hb);
  gmr__nvtx_mem_region_register(hb, b.data(), 100);
  gmr__nvtx_mem_region_register(ha, a.data(), 200);
  gmr__nvtx_mem_heap_unregister(hb);
  gmr__nvtx_mem_heap_unregister(ha);
  Lines want = {
      "heap_register gmr H1 base=" + hex_at(a.data(), 0) +
          " size=8192 usage=sub_allocator type=virtual_address name=\"\"",
      "heap_register gmr H2 base=" + hex_at(b.data(), 0) +
          " size=8192 usage=sub_allocator type=virtual_address name=\"\"",
      "region_register gmr H2 " + hex_at(b.data(), 0) + " 100",
      "region_register gmr H1 " + hex_at(a.data(), 0) + " 200",
      "heap_unregister gmr H2",
      "heap_unregister gmr H1",
  };
  EXPECT_EQ(want, renumbered(NvtxRecorder::lines()));
}

TEST_F(NvtxMemTest, NullHeapIsNeverResetOrUnregisteredBecauseItMeansTheWholeProcess) {
  gmr__nvtx_mem_heap_reset(nullptr);
  gmr__nvtx_mem_heap_unregister(nullptr);
  EXPECT_EQ(Lines{}, NvtxRecorder::lines());
}

TEST_F(NvtxMemTest, ThreadsAnnotatingTheirOwnChunksLoseNothing) {
  constexpr int kThreads = 8;
  constexpr int kBlocks = 100;
  std::vector<std::vector<char>> chunks(kThreads, std::vector<char>(kBlocks * 256));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      char *base = chunks[t].data();
      void *heap = gmr__nvtx_mem_heap_register(base, chunks[t].size(), "thread chunk");
      for (int i = 0; i < kBlocks; ++i) gmr__nvtx_mem_region_register(heap, base + i * 256, 256);
      for (int i = 0; i < kBlocks; ++i) gmr__nvtx_mem_region_unregister(base + i * 256);
      gmr__nvtx_mem_heap_unregister(heap);
    });
  }
  for (auto &th : threads) th.join();
  std::map<std::string, int> kinds;
  for (const std::string &line : NvtxRecorder::lines()) kinds[line.substr(0, line.find(' '))]++;
  std::map<std::string, int> want = {{"heap_register", kThreads},
                                     {"region_register", kThreads * kBlocks},
                                     {"region_unregister", kThreads * kBlocks},
                                     {"heap_unregister", kThreads}};
  EXPECT_EQ(want, kinds);
}

}  // namespace
