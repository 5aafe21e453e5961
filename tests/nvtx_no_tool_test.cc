// NVTX with no tool attached (no NVTX_INJECTION64_PATH): NVTX hands out NULL
// domains and heaps. That is not an error: the adaptor forwards silently and
// the memory annotations keep the NULL and do nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "core/nvtx_mem.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "tests/support/mock_resource.h"

namespace {

TEST(NvtxNoTool, AdaptorForwardsAndReportsNoTool) {
  ASSERT_EQ(nullptr, std::getenv("NVTX_INJECTION64_PATH"));
  gmr_mock_resource *mock = gmr_mock_resource_create(nullptr);
  ASSERT_NE(nullptr, mock);
  gmr_nvtx_logging_adaptor *nvtx = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_nvtx_logging_adaptor_create(gmr_mock_resource_as_resource(mock), nullptr, &nvtx));
  EXPECT_FALSE(gmr_nvtx_logging_adaptor_is_tool_attached(nvtx));
  EXPECT_EQ(gmr_nvtx_is_compiled_in(), gmr_nvtx_logging_adaptor_is_enabled(nvtx));
  gmr_resource *r = gmr_nvtx_logging_adaptor_as_resource(nvtx);

  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4096, 0, nullptr, &p));
  EXPECT_EQ(4096u, gmr_mock_resource_live_bytes(mock));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4096, 0, nullptr));
  EXPECT_EQ(0u, gmr_mock_resource_live_bytes(mock));

  gmr_mock_resource_try_fail(mock, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  gmr_failure failure = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 64, 0, nullptr, &p, &failure));
  EXPECT_EQ(gmr_mock_resource_as_resource(mock), failure.where);
  EXPECT_EQ(2u, gmr_mock_resource_called_allocate(mock));
  EXPECT_EQ(1u, gmr_mock_resource_did_allocate(mock));

  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock)));
}

TEST(NvtxNoTool, MemoryAnnotationsGetANullHeapAndDoNothing) {
  std::vector<char> chunk(8192);
  void *heap = gmr__nvtx_mem_heap_register(chunk.data(), chunk.size(), "no tool");
  EXPECT_EQ(nullptr, heap);
  // Passing the NULL back is how NVTX is meant to be used; nothing happens.
  gmr__nvtx_mem_region_register(heap, chunk.data(), 256);
  gmr__nvtx_mem_region_unregister(chunk.data());
  gmr__nvtx_mem_heap_reset(heap);
  gmr__nvtx_mem_heap_unregister(heap);
}

}  // namespace
