// Growth in place through adaptors on a real GPU: `pool > limiting >
// tracking > vmm_pages` grows its chunk in place (the version-3 extend slot,
// forwarded by limiting and tracking down to vmm_pages, which maps new pages
// after the chunk), the grown bytes are real device memory (written by the
// GPU and read back), the adaptors' books equal what the pool holds, and a
// trim gives back the chunk and then vmm_pages' pages.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "gmr/limiting_adaptor.h"
#include "gmr/pool_resource.h"
#include "gmr/tracking_adaptor.h"
#include "gmr/vmm_pages_resource.h"
#include "tests/support/gpu_fixture.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

class AdaptorExtendGpu : public gmr_test::GpuTest {};

TEST_F(AdaptorExtendGpu, APoolChunkGrowsInPlaceThroughLimitingAndTracking) {
  gmr_vmm_pool_resource_config vc = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  vc.small_pool = false;
  gmr_vmm_pool_resource *vmm = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&vc, &vmm, &f)) << f.message;
  gmr_tracking_adaptor *tracking = nullptr;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_create(gmr_vmm_pool_resource_as_resource(vmm), nullptr,
                                                &tracking));
  gmr_limiting_adaptor_config lc = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  lc.limit_bytes = 64 * MiB;
  gmr_limiting_adaptor *limiting = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(gmr_tracking_adaptor_as_resource(tracking), &lc,
                                                &limiting));
  gmr_pool_resource_config pc = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  pc.arena_count = 1;
  pc.min_growth_bytes = 4 * MiB;  // a chunk of 4 MiB, then growth by 4 MiB
  pc.max_growth_bytes = 4 * MiB;
  pc.growth_percent = 0;
  pc.release_on_growth = false;
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_pool_resource_create(gmr_limiting_adaptor_as_resource(limiting), &pc, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);

  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 3 * MiB, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 3 * MiB, 0, nullptr, &b));  // the chunk grows
  EXPECT_EQ(reinterpret_cast<char *>(a) + 3 * MiB, b) << "the second block follows the first";
  gmr_pool_resource_stats ps = GMR_POOL_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &ps));
  EXPECT_EQ(1u, ps.in_place_growth_count);
  EXPECT_EQ(1u, ps.chunk_count);

  // The whole grown range is device memory: the GPU writes it, the host reads it.
  ASSERT_EQ(cudaSuccess, cudaMemset(a, 0x5a, 6 * MiB));
  std::vector<unsigned char> host(6 * MiB);
  ASSERT_EQ(cudaSuccess, cudaMemcpy(host.data(), a, host.size(), cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (unsigned char c : host) wrong += c != 0x5a;
  EXPECT_EQ(0u, wrong);

  gmr_tracking_adaptor_stats ts = GMR_TRACKING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(tracking, &ts));
  EXPECT_EQ(static_cast<int64_t>(ps.held_bytes), ts.bytes.current) << "tracking counts the growth";
  EXPECT_EQ(1, ts.allocations.current) << "one chunk, grown";
  EXPECT_EQ(ps.held_bytes, gmr_limiting_adaptor_get_used_bytes(limiting)) << "limiting charged it";

  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 3 * MiB, 0, nullptr));
  // gmr_resource_trim walks the whole stack and sums what every layer gave
  // back: the pool its grown chunk (through limiting and tracking), then
  // vmm_pages the same bytes of pages. (GPU run 7 expected the pool's alone:
  // 8 MiB held, 16 MiB released; tests/adaptor_extend_test shows the same
  // sum on the simulation.)
  gmr_vmm_pool_resource_stats vs = GMR_VMM_POOL_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_get_stats(vmm, &vs));
  size_t mapped = vs.mapped_bytes;
  EXPECT_EQ(ps.held_bytes, mapped) << "vmm_pages maps exactly the pool's chunk";
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &ps));
  EXPECT_EQ(0u, ps.held_bytes) << "the pool gave its chunk back";
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_get_stats(vmm, &vs));
  EXPECT_EQ(0u, vs.mapped_bytes) << "vmm_pages gave its pages back";
  EXPECT_EQ(2 * mapped, released) << "the pool's chunk, then vmm_pages' pages";
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(tracking, &ts));
  EXPECT_EQ(0, ts.bytes.current);
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(limiting));

  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_limiting_adaptor_as_resource(limiting)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_tracking_adaptor_as_resource(tracking)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_vmm_pool_resource_as_resource(vmm)));
}

}  // namespace
