// Sleep and wake under PyTorch's direct mode (integrations/torch), on the
// simulation: the graph pool arena's chunks carry GMR_TORCH_GRAPH_POOL_TAG
// over a vmm pool, so that sleep can keep, save or discard CUDA graph memory
// apart; a captured pool's blocks keep their addresses through sleep and
// wake; while asleep the shim's allocations fail with the pool's message
// and frees of asleep tensors succeed.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "gmr/gmr.h"
#include "gmr/sim/streams.h"
#include "gmr/vmm_pool_sleep.h"
#include "integrations/torch/gmr_torch.h"
#include "tests/support/torch_shim_fixture.h"

namespace {

using gmr_test::contains;

constexpr size_t kMiB = size_t{1} << 20;
constexpr uint32_t kWeights = 1;

std::function<bool(gmr_stream)> capturing_on(gmr_stream s) {
  return [s](gmr_stream x) {
    bool capturing = false;
    return x == s && gmr_stream_get_capture_info(x, &capturing, nullptr) == GMR_OK && capturing;
  };
}

class TorchSleep : public gmr_test::TorchShimTest {
 protected:
  gmr_vmm_pool_resource *Pool() {
    gmr_resource *r = nullptr;
    EXPECT_EQ(GMR_OK, gmr_device_resource_get(0, &r, nullptr));
    return gmr_vmm_pool_resource_from_resource(gmr_resource_find(r, "vmm_pool_resource"));
  }
  gmr_vmm_pool_tag_stats TagStats(uint64_t mask) {
    gmr_vmm_pool_tag_stats s = GMR_VMM_POOL_TAG_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_get_tag_stats(Pool(), mask, &s));
    return s;
  }
};

TEST_F(TorchSleep, GraphMemoryIsTaggedAndKeepsItsAddressesThroughSleepAndWake) {
  use_spec("tracking > vmm");
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  gmr_vmm_pool_resource *pool = Pool();
  ASSERT_NE(nullptr, pool) << "find reaches the vmm pool under tracking";
  // Weights, in a region.
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool, kWeights));
  void *weights = gmr_torch_alloc(3 * kMiB, 0, s);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool, 0));
  std::memset(weights, 0x7e, 3 * kMiB);
  // A capture whose pool keeps one block live (a graph's static output).
  const gmr_torch_mempool_id id{7, 0};
  gmr_torch_begin_allocate_to_pool(0, id, capturing_on(s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *out = gmr_torch_alloc(kMiB, 0, s);
  void *tmp = gmr_torch_alloc(kMiB, 0, s);
  gmr_torch_free(tmp, kMiB, 0, s);
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  gmr_torch_end_allocate_to_pool(0, id);
  const gmr_vmm_pool_tag_stats graphs = TagStats(uint64_t{1} << GMR_TORCH_GRAPH_POOL_TAG);
  EXPECT_GE(graphs.live_count, 1u) << "the arena's chunks carry the graph tag";
  EXPECT_EQ(1u, TagStats(1u << kWeights).live_count);

  // Sleep: weights saved, graphs discarded, nothing else live.
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_tag_mask = 1u << kWeights;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool, &o, &f)) << f.message;
  EXPECT_EQ(graphs.live_bytes,
            TagStats(uint64_t{1} << GMR_TORCH_GRAPH_POOL_TAG).asleep_bytes);
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(0u, u.used_bytes);
  bool threw = false;
  try {
    (void)gmr_torch_alloc(kMiB, 0, s);
  } catch (const std::runtime_error &e) {
    threw = true;
    EXPECT_TRUE(contains(e.what(), "asleep")) << e.what();
    EXPECT_TRUE(contains(e.what(), "GMR_ERR_BUSY")) << e.what();
  }
  EXPECT_TRUE(threw) << "an allocation while asleep is refused";
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool, nullptr, &f)) << f.message;
  const unsigned char *w = static_cast<const unsigned char *>(weights);
  EXPECT_EQ(0x7e, w[0]);
  EXPECT_EQ(0x7e, w[3 * kMiB - 1]);
  // The pool's block is where it was: a replay writes there.
  size_t n = 0;
  uintptr_t ptr = 0;
  size_t size = 0;
  uintptr_t stream = 0;
  ASSERT_EQ(GMR_OK, gmr_torch_get_pool_blocks(0, id.first, id.second, &ptr, &size, &stream, 1, &n));
  ASSERT_EQ(1u, n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(out), ptr);
  std::memset(out, 1, kMiB);  // mapped again

  // A tensor freed while asleep goes with its copy.
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool, &o, &f)) << f.message;
  gmr_torch_free(weights, 3 * kMiB, 0, s);
  EXPECT_EQ(0u, gmr_test::torch_counters().failed_free_count);
  EXPECT_EQ(0u, TagStats(UINT64_MAX).saved_bytes);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool, nullptr, &f)) << f.message;
  gmr_torch_free(out, kMiB, 0, s);
  gmr_torch_release_pool(0, id);
  gmr_torch_reset();
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(TorchSleep, AStackWithoutAVmmPoolTagsNothing) {
  use_spec("pool > cuda(kind=device)");
  gmr_resource *r = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &r, nullptr));
  EXPECT_EQ(nullptr,
            gmr_vmm_pool_resource_from_resource(gmr_resource_find(r, "vmm_pool_resource")));
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  const gmr_torch_mempool_id id{8, 0};
  gmr_torch_begin_allocate_to_pool(0, id, capturing_on(s));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *out = gmr_torch_alloc(kMiB, 0, s);
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  gmr_torch_end_allocate_to_pool(0, id);
  gmr_torch_free(out, kMiB, 0, s);
  gmr_torch_release_pool(0, id);
  gmr_torch_reset();
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

}  // namespace
