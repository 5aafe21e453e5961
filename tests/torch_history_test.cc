// The torch shim's allocation history and live-allocation listing
// (integrations/torch/history.cc, gmr_torch.h), what gmr.torch's memory
// snapshots are made of: off by default; alloc, free_requested and
// free_completed entries with the allocation's device, size, stream and
// context; failed allocations as oom entries with the device's free bytes;
// the ring keeping the newest entries; stopping, resizing and clearing; a
// context function that frees through the shim; bad input.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <vector>

#include "gmr/gmr.h"
#include "gmr/sim/streams.h"
#include "integrations/torch/gmr_torch.h"
#include "tests/support/torch_shim_fixture.h"

namespace {

using gmr_test::TorchShimTest;

std::vector<gmr_torch_history_entry> history(uint64_t *dropped = nullptr) {
  size_t n = 0;
  EXPECT_EQ(GMR_OK, gmr_torch_get_history(nullptr, 0, &n, dropped));
  std::vector<gmr_torch_history_entry> out(n);
  size_t again = 0;
  EXPECT_EQ(GMR_OK, gmr_torch_get_history(out.data(), out.size(), &again, dropped));
  EXPECT_EQ(n, again);
  return out;
}

uintptr_t as_int(const void *p) { return reinterpret_cast<uintptr_t>(p); }

class TorchHistoryTest : public TorchShimTest {
 protected:
  void SetUp() override {
    TorchShimTest::SetUp();
    ASSERT_EQ(GMR_OK, gmr_torch_record_history(0, 0, nullptr));
    ASSERT_EQ(GMR_OK, gmr_torch_clear_history());
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_torch_record_history(0, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_torch_clear_history());
    TorchShimTest::TearDown();
  }
};

std::atomic<uint64_t> next_context{100};
uint64_t counting_context() { return next_context.fetch_add(1); }

TEST_F(TorchHistoryTest, NothingIsRecordedUntilAskedFor) {
  void *p = gmr_torch_alloc(4096, 0, nullptr);
  gmr_torch_free(p, 4096, 0, nullptr);
  uint64_t dropped = 7;
  EXPECT_TRUE(history(&dropped).empty());
  EXPECT_EQ(0u, dropped);
}

TEST_F(TorchHistoryTest, AllocationsAndFreesAreRecordedAsPyTorchNamesThem) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  uint64_t first = next_context.load();
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(1, 100, counting_context));
  void *a = gmr_torch_alloc(1000, 0, nullptr);
  void *b = gmr_torch_mempool_alloc(3 << 20, 1, s);
  gmr_torch_free(a, 1000, 0, nullptr);
  gmr_torch_mempool_free(b, 3 << 20, 1, s);
  std::vector<gmr_torch_history_entry> h = history();
  ASSERT_EQ(6u, h.size());
  const struct {
    gmr_torch_history_action action;
    void *ptr;
    size_t size;
    int device;
    gmr_stream stream;
    uint64_t context;
  } want[] = {
      {GMR_TORCH_HISTORY_ALLOC, a, 1000, 0, nullptr, first},
      {GMR_TORCH_HISTORY_ALLOC, b, 3 << 20, 1, s, first + 1},
      {GMR_TORCH_HISTORY_FREE_REQUESTED, a, 1000, 0, nullptr, first},
      {GMR_TORCH_HISTORY_FREE_COMPLETED, a, 1000, 0, nullptr, first},
      {GMR_TORCH_HISTORY_FREE_REQUESTED, b, 3 << 20, 1, s, first + 1},
      {GMR_TORCH_HISTORY_FREE_COMPLETED, b, 3 << 20, 1, s, first + 1},
  };
  for (size_t i = 0; i < h.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(want[i].action, h[i].action);
    EXPECT_EQ(as_int(want[i].ptr), h[i].addr);
    EXPECT_EQ(want[i].size, h[i].size);
    EXPECT_EQ(want[i].device, h[i].device);
    EXPECT_EQ(as_int(want[i].stream), h[i].stream);
    EXPECT_EQ(want[i].context, h[i].context);
    EXPECT_EQ(0u, h[i].device_free);
    EXPECT_GT(h[i].time_us, uint64_t{1600000000} * 1000000);  // after 2020, in microseconds
    if (i > 0) {
      EXPECT_LE(h[i - 1].time_us, h[i].time_us);
    }
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(TorchHistoryTest, AFailedAllocationIsAnOomEntryWithTheDevicesFreeBytes) {
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(1, 10, nullptr));
  EXPECT_EQ(nullptr, gmr_torch_mempool_alloc(2 * kDeviceBytes, 1, nullptr));
  std::vector<gmr_torch_history_entry> h = history();
  ASSERT_EQ(1u, h.size());
  EXPECT_EQ(GMR_TORCH_HISTORY_OOM, h[0].action);
  EXPECT_EQ(0u, h[0].addr);
  EXPECT_EQ(2 * kDeviceBytes, h[0].size);
  EXPECT_EQ(1, h[0].device);
  EXPECT_EQ(0u, h[0].context);  // no context function
  EXPECT_GT(h[0].device_free, 0u);
  EXPECT_LE(h[0].device_free, kDeviceBytes);
  // Other failures (here a stack that cannot be built) are not "oom".
  use_spec(nullptr);
  setenv("GMR_STACK", "pool > cuda(kidn=async)", 1);
  EXPECT_EQ(nullptr, gmr_torch_mempool_alloc(4096, 0, nullptr));
  EXPECT_EQ(1u, history().size());
}

TEST_F(TorchHistoryTest, AFullRingKeepsTheNewestEntriesAndCountsTheRest) {
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(1, 4, nullptr));
  std::vector<void *> ptrs;
  for (size_t i = 1; i <= 3; ++i) {
    void *p = gmr_torch_alloc(i * 512, 0, nullptr);
    gmr_torch_free(p, i * 512, 0, nullptr);
    ptrs.push_back(p);
  }
  uint64_t dropped = 0;
  std::vector<gmr_torch_history_entry> h = history(&dropped);
  ASSERT_EQ(4u, h.size());
  EXPECT_EQ(5u, dropped);  // 9 recorded
  EXPECT_EQ(GMR_TORCH_HISTORY_FREE_COMPLETED, h[0].action);
  EXPECT_EQ(1024u, h[0].size);
  EXPECT_EQ(GMR_TORCH_HISTORY_ALLOC, h[1].action);
  EXPECT_EQ(1536u, h[1].size);
  EXPECT_EQ(GMR_TORCH_HISTORY_FREE_COMPLETED, h[3].action);
  // A smaller capacity while recording keeps the newest; a larger one grows.
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(1, 2, nullptr));
  h = history(&dropped);
  ASSERT_EQ(2u, h.size());
  EXPECT_EQ(7u, dropped);
  EXPECT_EQ(GMR_TORCH_HISTORY_FREE_REQUESTED, h[0].action);
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(1, 8, nullptr));
  void *p = gmr_torch_alloc(4096, 0, nullptr);
  gmr_torch_free(p, 4096, 0, nullptr);
  h = history(&dropped);
  ASSERT_EQ(5u, h.size());
  EXPECT_EQ(7u, dropped);
  EXPECT_EQ(GMR_TORCH_HISTORY_ALLOC, h[2].action);
  EXPECT_EQ(4096u, h[2].size);
  // Only copying part of it is allowed: the count says how many there are.
  gmr_torch_history_entry two[2];
  size_t n = 0;
  ASSERT_EQ(GMR_OK, gmr_torch_get_history(two, 2, &n, nullptr));
  EXPECT_EQ(5u, n);
  EXPECT_EQ(h[1].time_us, two[1].time_us);
  EXPECT_EQ(h[1].action, two[1].action);
}

TEST_F(TorchHistoryTest, StoppingKeepsTheEntriesAndClearingForgetsThem) {
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(1, 16, counting_context));
  void *p = gmr_torch_alloc(512, 0, nullptr);
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(0, 0, nullptr));
  gmr_torch_free(p, 512, 0, nullptr);  // not recorded
  ASSERT_EQ(1u, history().size());
  ASSERT_EQ(GMR_OK, gmr_torch_clear_history());
  uint64_t dropped = 9;
  EXPECT_TRUE(history(&dropped).empty());
  EXPECT_EQ(0u, dropped);
  // Clearing while recording goes on recording.
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(1, 16, nullptr));
  ASSERT_EQ(GMR_OK, gmr_torch_clear_history());
  p = gmr_torch_alloc(512, 0, nullptr);
  gmr_torch_free(p, 512, 0, nullptr);
  EXPECT_EQ(3u, history().size());
}

// A context function that allocates and frees through the shim, as Python's
// garbage collector may do while gmr.torch gathers frames.
void *freed_inside = nullptr;
uint64_t freeing_context() {
  if (freed_inside != nullptr) {
    gmr_torch_free(freed_inside, 256, 0, nullptr);
    freed_inside = nullptr;
  }
  return 42;
}

TEST_F(TorchHistoryTest, TheContextFunctionMayFreeThroughTheShim) {
  freed_inside = gmr_torch_alloc(256, 0, nullptr);
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(1, 16, freeing_context));
  void *p = gmr_torch_alloc(1024, 0, nullptr);
  EXPECT_EQ(nullptr, freed_inside);
  std::vector<gmr_torch_history_entry> h = history();
  ASSERT_EQ(3u, h.size());  // the inner free's two entries, then the allocation
  EXPECT_EQ(GMR_TORCH_HISTORY_FREE_REQUESTED, h[0].action);
  EXPECT_EQ(0u, h[0].context);  // allocated before recording began
  EXPECT_EQ(GMR_TORCH_HISTORY_ALLOC, h[2].action);
  EXPECT_EQ(42u, h[2].context);
  gmr_torch_free(p, 1024, 0, nullptr);
}

TEST_F(TorchHistoryTest, LiveAllocationsAreListedByAddressPerDevice) {
  ASSERT_EQ(GMR_OK, gmr_torch_record_history(1, 16, counting_context));
  std::vector<void *> ptrs;
  for (size_t size : {4096u, 512u, 1u << 20}) ptrs.push_back(gmr_torch_alloc(size, 0, nullptr));
  void *other = gmr_torch_alloc(2048, 1, nullptr);
  size_t n = 0;
  ASSERT_EQ(GMR_OK, gmr_torch_get_live_allocations(0, nullptr, nullptr, nullptr, nullptr, 0, &n));
  ASSERT_EQ(3u, n);
  std::vector<uintptr_t> at(n), streams(n);
  std::vector<size_t> sizes(n);
  std::vector<uint64_t> contexts(n);
  ASSERT_EQ(GMR_OK, gmr_torch_get_live_allocations(0, at.data(), sizes.data(), streams.data(),
                                                   contexts.data(), n, &n));
  for (size_t i = 1; i < n; ++i) EXPECT_LT(at[i - 1], at[i]);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    total += sizes[i];
    EXPECT_NE(0u, contexts[i]);
    EXPECT_EQ(0u, streams[i]);
  }
  EXPECT_EQ(4096u + 512u + (1u << 20), total);
  ASSERT_EQ(GMR_OK, gmr_torch_get_live_allocations(1, at.data(), sizes.data(), streams.data(),
                                                   contexts.data(), 1, &n));
  EXPECT_EQ(1u, n);
  EXPECT_EQ(as_int(other), at[0]);
  EXPECT_EQ(2048u, sizes[0]);
  gmr_torch_free(other, 2048, 1, nullptr);
  gmr_torch_free(ptrs[0], 4096, 0, nullptr);
  gmr_torch_free(ptrs[1], 512, 0, nullptr);
  gmr_torch_free(ptrs[2], 1u << 20, 0, nullptr);
  ASSERT_EQ(GMR_OK, gmr_torch_get_live_allocations(0, nullptr, nullptr, nullptr, nullptr, 0, &n));
  EXPECT_EQ(0u, n);
}

TEST_F(TorchHistoryTest, BadInputIsRefusedAndChangesNothing) {
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_record_history(1, 0, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_torch_record_history(1, GMR_TORCH_HISTORY_MAX_ENTRIES + 1, nullptr));
  void *p = gmr_torch_alloc(512, 0, nullptr);  // still not recording
  gmr_torch_free(p, 512, 0, nullptr);
  EXPECT_TRUE(history().empty());
  gmr_torch_history_entry e;
  size_t n = 5;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_get_history(&e, 1, nullptr, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_torch_get_history(nullptr, 1, &n, nullptr));
  EXPECT_EQ(5u, n);
  uintptr_t ptr = 0, stream = 0;
  size_t size = 0;
  uint64_t context = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_torch_get_live_allocations(-1, &ptr, &size, &stream, &context, 1, &n));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_torch_get_live_allocations(64, &ptr, &size, &stream, &context, 1, &n));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_torch_get_live_allocations(0, &ptr, &size, &stream, &context, 1, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_torch_get_live_allocations(0, &ptr, nullptr, &stream, &context, 1, &n));
  EXPECT_EQ(5u, n);
}

}  // namespace
