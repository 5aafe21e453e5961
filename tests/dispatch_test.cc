// The dispatch functions of gmr/resource.h: argument checks happen once, before
// any resource sees a request, and failures are described in gmr_failure.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "gmr/resource.h"
#include "tests/support/mock_resource.h"

namespace {

class Dispatch : public ::testing::Test {
 protected:
  void SetUp() override {
    mock_ = gmr_mock_resource_create(nullptr);
    ASSERT_NE(nullptr, mock_);
    r_ = gmr_mock_resource_as_resource(mock_);
  }
  void TearDown() override { EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_)); }
  gmr_mock_resource *mock_ = nullptr;
  gmr_resource *r_ = nullptr;
};

TEST_F(Dispatch, NullOutPointerIsInvalidAndReachesNoResource) {
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_allocate_ex(r_, 64, 0, nullptr, nullptr, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, f.status);
  EXPECT_STRNE("", f.message);
  EXPECT_EQ(0u, gmr_mock_resource_called_allocate(mock_));
}

TEST_F(Dispatch, NullResourceIsInvalidAndClearsOutPointer) {
  void *p = reinterpret_cast<void *>(0x1234);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_allocate(nullptr, 64, 0, nullptr, &p));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_deallocate(nullptr, p, 64, 0, nullptr));
}

TEST_F(Dispatch, AlignmentMustBeAPowerOfTwo) {
  for (size_t bad : {size_t{3}, size_t{24}, size_t{257}, size_t{1000}}) {
    void *p = reinterpret_cast<void *>(0x1234);
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_allocate_ex(r_, 64, bad, nullptr, &p, &f))
        << bad;
    EXPECT_EQ(nullptr, p);
    EXPECT_NE(nullptr, std::strstr(f.message, "power of two")) << f.message;
  }
  EXPECT_EQ(0u, gmr_mock_resource_called_allocate(mock_));
  int x = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_deallocate(r_, &x, 64, 24, nullptr));
  EXPECT_EQ(0u, gmr_mock_resource_called_deallocate(mock_));
}

TEST_F(Dispatch, DefaultAlignmentIs256Bytes) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{256}, size_t{1000}, size_t{65537}}) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, bytes, 0, nullptr, &p));
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % 256) << bytes;
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, bytes, 0, nullptr));
  }
}

TEST_F(Dispatch, LargerAlignmentIsPassedThrough) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 10, 4096, nullptr, &p));
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % 4096);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 10, 4096, nullptr));
}

TEST_F(Dispatch, ZeroBytesGivesNullWithoutCallingTheResource) {
  void *p = reinterpret_cast<void *>(0x1234);
  EXPECT_EQ(GMR_OK, gmr_resource_allocate(r_, 0, 0, nullptr, &p));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, nullptr, 0, 0, nullptr));
  EXPECT_EQ(0u, gmr_mock_resource_called_allocate(mock_));
  EXPECT_EQ(0u, gmr_mock_resource_called_deallocate(mock_));
}

TEST_F(Dispatch, FreeingNonNullWithZeroBytesIsInvalid) {
  int x = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_deallocate(r_, &x, 0, 0, nullptr));
  EXPECT_EQ(0u, gmr_mock_resource_called_deallocate(mock_));
}

TEST_F(Dispatch, HugeRequestsAreOutOfMemoryBeforeReachingTheResource) {
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r_, SIZE_MAX, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(r_, f.where);
  EXPECT_EQ(0u, gmr_mock_resource_called_allocate(mock_));
}

TEST_F(Dispatch, FailureRecordNamesTheDeepestFailingResource) {
  gmr_mock_resource *top = gmr_mock_resource_create(r_);
  gmr_resource *t = gmr_mock_resource_as_resource(top);
  gmr_mock_resource_try_fail(mock_, 1, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  int marker = 0;
  gmr_stream stream = reinterpret_cast<gmr_stream>(&marker);

  void *a = nullptr, *b = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(t, 512, 0, stream, &a, &f));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(t, 1024, 512, stream, &b, &f));
  EXPECT_EQ(nullptr, b);
  EXPECT_EQ(r_, f.where);  // the leaf failed, not the adaptor above it
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, f.status);
  EXPECT_EQ(2, f.cuda_error);
  EXPECT_EQ(1024u, f.bytes);
  EXPECT_EQ(512u, f.alignment);
  EXPECT_EQ(stream, f.stream);
  EXPECT_STREQ("mock_resource: planned failure", f.message);

  // The record is reset by the next call through the dispatch.
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(t, 1024, 0, stream, &b, &f));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(t, a, 512, 0, stream));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(t, b, 1024, 0, stream));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(t));
}

TEST_F(Dispatch, DestroyWithLiveAllocationsIsBusyAndChangesNothing) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 100, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 100, 0, nullptr));
}

TEST(DispatchNull, DestroyNullIsANoOp) { EXPECT_EQ(GMR_OK, gmr_resource_destroy(nullptr)); }

// ---- vtable checks -------------------------------------------------------

gmr_status fake_alloc(gmr_resource *, size_t, size_t, gmr_stream, void **out, gmr_failure *) {
  alignas(256) static unsigned char block[256];
  *out = block;
  return GMR_OK;
}
gmr_status fake_free(gmr_resource *, void *, size_t, size_t, gmr_stream) { return GMR_OK; }
gmr_status fake_destroy(gmr_resource *) { return GMR_OK; }

TEST(ResourceCheck, RejectsMissingRequiredSlotsAndVersionZero) {
  gmr_resource_vtbl good = {GMR_RESOURCE_VTBL_VERSION, "fake", fake_alloc, fake_free,
                            fake_destroy, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                            nullptr};
  gmr_resource r = {&good};
  EXPECT_EQ(GMR_OK, gmr_resource_check(&r));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_check(nullptr));

  gmr_resource_vtbl v0 = good;
  v0.version = 0;
  r.vtbl = &v0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_check(&r));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_destroy(&r));

  gmr_resource_vtbl no_free = good;
  no_free.deallocate = nullptr;
  r.vtbl = &no_free;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_check(&r));
  int x = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_deallocate(&r, &x, 8, 0, nullptr));

  gmr_resource_vtbl no_name = good;
  no_name.type_name = nullptr;
  r.vtbl = &no_name;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_check(&r));
  EXPECT_STREQ("invalid", gmr_resource_get_type_name(&r));

  r.vtbl = nullptr;
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_allocate(&r, 8, 0, nullptr, &p));
}

TEST(ResourceCheck, NewerVtableVersionsAreAccepted) {
  // A vtable written against a future header (more slots) still works here.
  struct future_vtbl {
    gmr_resource_vtbl v1;
    void *slot_from_the_future;
  } future = {{GMR_RESOURCE_VTBL_VERSION + 3, "future", fake_alloc, fake_free, fake_destroy,
               nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr},
              nullptr};
  gmr_resource r = {&future.v1};
  EXPECT_EQ(GMR_OK, gmr_resource_check(&r));
  void *p = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_allocate(&r, 8, 0, nullptr, &p));
  EXPECT_NE(nullptr, p);
  EXPECT_STREQ("future", gmr_resource_get_type_name(&r));
  EXPECT_EQ(nullptr, gmr_resource_get_upstream(&r));
}

// ---- optional slots: upstream walk, trim, footprint ----------------------

TEST(OptionalSlots, TrimWalksTheWholeStackAndSumsReleasedBytes) {
  gmr_mock_resource *leaf = gmr_mock_resource_create(nullptr);
  gmr_mock_resource *mid = gmr_mock_resource_create(gmr_mock_resource_as_resource(leaf));
  gmr_mock_resource *top = gmr_mock_resource_create(gmr_mock_resource_as_resource(mid));
  gmr_mock_resource_set_trim_release(leaf, 100);
  gmr_mock_resource_set_trim_release(top, 23);
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(gmr_mock_resource_as_resource(top), &released));
  EXPECT_EQ(123u, released);
  EXPECT_EQ(1u, gmr_mock_resource_called_trim(leaf));
  EXPECT_EQ(1u, gmr_mock_resource_called_trim(mid));
  EXPECT_EQ(1u, gmr_mock_resource_called_trim(top));
  EXPECT_EQ(gmr_mock_resource_as_resource(mid),
            gmr_resource_get_upstream(gmr_mock_resource_as_resource(top)));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_trim(nullptr, &released));
  EXPECT_EQ(0u, released);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(top)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mid)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(leaf)));
}

TEST(OptionalSlots, FootprintWithoutAnyReporterIsUnsupported) {
  gmr_mock_resource *leaf = gmr_mock_resource_create(nullptr);
  gmr_footprint fp;
  std::memset(&fp, 0xff, sizeof fp);
  EXPECT_EQ(GMR_ERR_UNSUPPORTED,
            gmr_resource_get_footprint(gmr_mock_resource_as_resource(leaf), &fp));
  EXPECT_EQ(0u, fp.held_bytes);
  EXPECT_EQ(0u, fp.peak_held_bytes);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_resource_get_footprint(gmr_mock_resource_as_resource(leaf), nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(leaf)));
}

}  // namespace

// ---- version-2 slots: memory info, record_stream, allocation in capture ----

namespace v2 {

gmr_status info_answer(const gmr_resource *, gmr_memory_info *out) {
  out->held_bytes = 1000;
  out->live_bytes = 600;
  out->free_bytes = 400;
  out->largest_free_block_bytes = 300;
  out->free_block_count = 2;
  return GMR_OK;
}
gmr_resource *info_upstream_of(const gmr_resource *);
const gmr_resource_vtbl answering = {GMR_RESOURCE_VTBL_VERSION, "answering", fake_alloc, fake_free,
                                     fake_destroy, nullptr, nullptr, nullptr, info_answer,
                                     nullptr, nullptr, nullptr};
gmr_resource answering_leaf = {&answering};
gmr_resource *info_upstream_of(const gmr_resource *) { return &answering_leaf; }
const gmr_resource_vtbl silent_adaptor = {GMR_RESOURCE_VTBL_VERSION, "silent", fake_alloc,
                                          fake_free, fake_destroy, info_upstream_of, nullptr,
                                          nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace v2

TEST(OptionalSlots, MemoryInfoIsAnsweredByTheFirstResourceDownTheStackThatKnows) {
  gmr_resource top = {&v2::silent_adaptor};
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(&top, &info));
  EXPECT_EQ(1000u, info.held_bytes);
  EXPECT_EQ(300u, info.largest_free_block_bytes);
  EXPECT_EQ(2u, info.free_block_count);
}

TEST(OptionalSlots, MemoryInfoNeedsAHeaderAndSaysUnsupportedWhenNobodyKnows) {
  gmr_resource_vtbl plain = {GMR_RESOURCE_VTBL_VERSION, "plain", fake_alloc, fake_free,
                             fake_destroy, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                             nullptr};
  gmr_resource r = {&plain};
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  info.held_bytes = 77;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_get_memory_info(&r, &info));
  EXPECT_EQ(0u, info.held_bytes);  // zeroed on failure
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_get_memory_info(&r, nullptr));
  gmr_memory_info no_header = {};
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_get_memory_info(&r, &no_header));
  // A version-1 vtable has no version-2 slots even if memory behind it says so.
  gmr_resource_vtbl v1 = v2::answering;
  v1.version = 1;
  gmr_resource old = {&v1};
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_get_memory_info(&old, &info));
}

TEST(OptionalSlots, RecordStreamWithoutTheSlotIsUnsupportedAndNeverSkipsDown) {
  gmr_resource top = {&v2::silent_adaptor};
  int x = 0;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_record_stream(&top, &x, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_record_stream(&top, nullptr, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_record_stream(nullptr, &x, nullptr));
}

TEST(OptionalSlots, AllocationInCaptureWithoutTheSlotIsCaptureUnsafe) {
  gmr_resource top = {&v2::silent_adaptor};
  void *p = reinterpret_cast<void *>(0x1234);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_capturing(&top, 64, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, f.status);
  EXPECT_EQ(&top, f.where);
  EXPECT_NE(nullptr, std::strstr(f.message, "silent")) << f.message;
  // The dispatch's ordinary checks come first.
  EXPECT_EQ(GMR_OK, gmr_resource_allocate_capturing(&top, 0, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_resource_allocate_capturing(&top, 64, 3, nullptr, &p, &f));
}
