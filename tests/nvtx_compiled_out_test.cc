// gmr built with GMR_DISABLE_NVTX: the BUILD file compiles the NVTX adaptor
// and core/nvtx_mem.c again with that flag into this test alone, and names the
// recording injection in NVTX_INJECTION64_PATH. Compiled out, gmr makes no
// NVTX call at all, so NVTX never even loads the recorder.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "core/nvtx_mem.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "tests/support/nvtx_recorder_client.h"

namespace {

using gmr_test::NvtxRecorder;

// A leaf in this file: the test links no other gmr library, so that only the
// copies compiled with GMR_DISABLE_NVTX are in it.
struct Leaf {
  gmr_resource base;
  size_t live_bytes;
};

gmr_status leaf_allocate(gmr_resource *self, size_t bytes, size_t alignment, gmr_stream,
                         void **out, gmr_failure *) {
  *out = std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  reinterpret_cast<Leaf *>(self)->live_bytes += bytes;
  return *out != nullptr ? GMR_OK : GMR_ERR_OUT_OF_MEMORY;
}

gmr_status leaf_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t, gmr_stream) {
  std::free(ptr);
  reinterpret_cast<Leaf *>(self)->live_bytes -= bytes;
  return GMR_OK;
}

gmr_status leaf_destroy(gmr_resource *) { return GMR_OK; }

const gmr_resource_vtbl leaf_vtbl = {GMR_RESOURCE_VTBL_VERSION, "leaf", leaf_allocate,
                                     leaf_deallocate, leaf_destroy, nullptr, nullptr, nullptr,
                                     nullptr, nullptr, nullptr, nullptr};

TEST(NvtxCompiledOut, AdaptorForwardsAndNoNvtxCallIsEverMade) {
  ASSERT_NE(nullptr, std::getenv("NVTX_INJECTION64_PATH"));
  EXPECT_FALSE(gmr_nvtx_is_compiled_in());
  EXPECT_FALSE(gmr__nvtx_mem_compiled_in());

  Leaf leaf = {{&leaf_vtbl}, 0};
  gmr_nvtx_logging_adaptor *nvtx = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(&leaf.base, nullptr, &nvtx));
  EXPECT_FALSE(gmr_nvtx_logging_adaptor_is_tool_attached(nvtx));
  EXPECT_FALSE(gmr_nvtx_logging_adaptor_is_enabled(nvtx));
  gmr_nvtx_logging_adaptor_set_enabled(nvtx, true);
  EXPECT_FALSE(gmr_nvtx_logging_adaptor_is_enabled(nvtx));
  EXPECT_STREQ("gmr", gmr_nvtx_logging_adaptor_get_domain_name(nvtx));
  gmr_resource *r = gmr_nvtx_logging_adaptor_as_resource(nvtx);

  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, nullptr, &p));
  EXPECT_EQ(1000u, leaf.live_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  EXPECT_EQ(0u, leaf.live_bytes);

  std::vector<char> chunk(4096);
  void *heap = gmr__nvtx_mem_heap_register(chunk.data(), chunk.size(), "compiled out");
  EXPECT_EQ(nullptr, heap);
  gmr__nvtx_mem_region_register(heap, chunk.data(), 64);
  gmr__nvtx_mem_region_unregister(chunk.data());
  gmr__nvtx_mem_heap_reset(heap);
  gmr__nvtx_mem_heap_unregister(heap);
  gmr__nvtx_start();

  EXPECT_FALSE(NvtxRecorder::loaded()) << "an NVTX call was made although NVTX is compiled out";
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

}  // namespace
