// gmr_resource_extend(): the dispatch of the version-3 `extend` slot (grow an
// allocation in place): argument checks, version gating, the failure record.
#include <gtest/gtest.h>

#include <cstring>

#include "gmr/resource.h"

namespace {

struct Call {
  int count = 0;
  void *ptr = nullptr;
  size_t bytes = 0, new_bytes = 0, alignment = 0;
  gmr_stream stream = nullptr;
};
Call g_call;
gmr_status g_answer = GMR_OK;

gmr_status fake_alloc(gmr_resource *, size_t, size_t, gmr_stream, void **out, gmr_failure *) {
  alignas(256) static unsigned char block[256];
  *out = block;
  return GMR_OK;
}
gmr_status fake_free(gmr_resource *, void *, size_t, size_t, gmr_stream) { return GMR_OK; }
gmr_status fake_destroy(gmr_resource *) { return GMR_OK; }
gmr_status fake_extend(gmr_resource *, void *ptr, size_t bytes, size_t new_bytes,
                       size_t alignment, gmr_stream stream, gmr_failure *failure) {
  g_call.count++;
  g_call.ptr = ptr;
  g_call.bytes = bytes;
  g_call.new_bytes = new_bytes;
  g_call.alignment = alignment;
  g_call.stream = stream;
  if (g_answer == GMR_ERR_OUT_OF_MEMORY) {
    failure->cuda_error = 2;
    std::snprintf(failure->message, sizeof failure->message, "no pages");
  }
  return g_answer;
}

gmr_resource_vtbl Vtbl(uint32_t version, gmr_resource_extend_fn *extend) {
  gmr_resource_vtbl v = {version, "growing", fake_alloc, fake_free, fake_destroy, nullptr,
                         nullptr, nullptr, nullptr, nullptr, nullptr, extend};
  return v;
}

class ExtendDispatch : public ::testing::Test {
 protected:
  void SetUp() override {
    g_call = Call();
    g_answer = GMR_OK;
  }
  int x_ = 0;
  void *ptr_ = &x_;
  gmr_stream stream_ = reinterpret_cast<gmr_stream>(0x5);
};

TEST_F(ExtendDispatch, ForwardsAGrowthToTheSlotWithTheDefaultAlignmentFilledIn) {
  gmr_resource_vtbl v = Vtbl(GMR_RESOURCE_VTBL_VERSION, fake_extend);
  gmr_resource r = {&v};
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_extend(&r, ptr_, 100, 300, 0, stream_, &f));
  EXPECT_EQ(1, g_call.count);
  EXPECT_EQ(ptr_, g_call.ptr);
  EXPECT_EQ(100u, g_call.bytes);
  EXPECT_EQ(300u, g_call.new_bytes);
  EXPECT_EQ(256u, g_call.alignment);
  EXPECT_EQ(stream_, g_call.stream);
  ASSERT_EQ(GMR_OK, gmr_resource_extend(&r, ptr_, 100, 300, 4096, stream_, nullptr));
  EXPECT_EQ(4096u, g_call.alignment);
  // Same size: nothing to do, the resource is not asked.
  ASSERT_EQ(GMR_OK, gmr_resource_extend(&r, ptr_, 300, 300, 0, stream_, &f));
  EXPECT_EQ(2, g_call.count);
}

TEST_F(ExtendDispatch, AFailureOfTheSlotIsRecordedWithTheNewSize) {
  gmr_resource_vtbl v = Vtbl(GMR_RESOURCE_VTBL_VERSION, fake_extend);
  gmr_resource r = {&v};
  g_answer = GMR_ERR_OUT_OF_MEMORY;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_extend(&r, ptr_, 100, 300, 0, stream_, &f));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, f.status);
  EXPECT_EQ(&r, f.where);
  EXPECT_EQ(300u, f.bytes);
  EXPECT_EQ(256u, f.alignment);
  EXPECT_EQ(stream_, f.stream);
  EXPECT_EQ(2, f.cuda_error);
  EXPECT_STREQ("no pages", f.message);
}

TEST_F(ExtendDispatch, WithoutTheSlotOrBelowVersion3ItIsUnsupported) {
  gmr_resource_vtbl none = Vtbl(GMR_RESOURCE_VTBL_VERSION, nullptr);
  gmr_resource r = {&none};
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_extend(&r, ptr_, 100, 300, 0, stream_, &f));
  EXPECT_EQ(&r, f.where);
  EXPECT_NE(nullptr, std::strstr(f.message, "growing cannot grow an allocation in place"))
      << f.message;
  // A version-2 vtable has no extend slot, whatever memory follows it.
  gmr_resource_vtbl v2 = Vtbl(2, fake_extend);
  gmr_resource old = {&v2};
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_extend(&old, ptr_, 100, 300, 0, stream_, &f));
  EXPECT_EQ(0, g_call.count);
}

TEST_F(ExtendDispatch, MalformedRequestsAreRefusedBeforeTheResourceSeesThem) {
  gmr_resource_vtbl v = Vtbl(GMR_RESOURCE_VTBL_VERSION, fake_extend);
  gmr_resource r = {&v};
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_extend(nullptr, ptr_, 100, 300, 0, stream_, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_extend(&r, nullptr, 100, 300, 0, stream_, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_extend(&r, ptr_, 0, 300, 0, stream_, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_extend(&r, ptr_, 300, 100, 0, stream_, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "only growth")) << f.message;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_extend(&r, ptr_, 100, 300, 48, stream_, &f));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_extend(&r, ptr_, 100, GMR_MAX_ALLOCATION_BYTES + 1, 0, stream_, &f));
  EXPECT_EQ(GMR_MAX_ALLOCATION_BYTES + 1, f.bytes);
  EXPECT_EQ(0, g_call.count);
}

}  // namespace
