// The gmr_failure contract of gmr/resource.h: the caller sets `size` and
// `version`, and the library never writes past `size` bytes of the record.
// A program built against an older, smaller gmr_failure (version 1, without
// the free-memory fields) gets the fields it has and nothing more; a record
// with a size below the header gets nothing; resources always see a whole
// record of the library's version.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gmr/gmr.h"
#include "gmr/tiers/tier_manager.h"

namespace {

// gmr_failure as a caller built against a version-1 header declares it: the
// header, then every field up to `message`.
struct failure_v1 {
  size_t size;
  uint32_t version;
  gmr_status status;
  int cuda_error;
  size_t bytes;
  size_t alignment;
  gmr_stream stream;
  const gmr_resource *where;
  uint32_t attempt;
  char message[GMR_FAILURE_MESSAGE_BYTES];
};

static_assert(sizeof(failure_v1) < sizeof(gmr_failure), "version 2 is larger");
static_assert(offsetof(failure_v1, message) == offsetof(gmr_failure, message),
              "version 2 only appends");
static_assert(GMR_FAILURE_VERSION == 2u, "this test knows versions 1 and 2");

constexpr unsigned char kCanary = 0xA5;
constexpr size_t kSlack = 64;  // canary bytes after the largest record

// A leaf that fails every request the way a pool does: a status, a CUDA
// error, a message and what it still held free. It also remembers the header
// of the record it was given.
struct failing_leaf {
  gmr_resource base;
  size_t seen_size = 0;
  uint32_t seen_version = 0;
};

gmr_status fail_allocate(gmr_resource *self, size_t, size_t, gmr_stream, void **,
                         gmr_failure *failure) {
  auto *leaf = reinterpret_cast<failing_leaf *>(self);
  leaf->seen_size = failure->size;
  leaf->seen_version = failure->version;
  failure->cuda_error = 2;
  std::snprintf(failure->message, sizeof failure->message, "failing_leaf: no memory");
  failure->free_info_known = true;
  failure->free_bytes = 4096;
  failure->largest_free_block_bytes = 512;
  return GMR_ERR_OUT_OF_MEMORY;
}

gmr_status fail_deallocate(gmr_resource *, void *, size_t, size_t, gmr_stream) {
  return GMR_ERR_UNKNOWN_POINTER;
}

gmr_status fail_destroy(gmr_resource *) { return GMR_OK; }

const gmr_resource_vtbl kFailingVtbl = {
    GMR_RESOURCE_VTBL_VERSION, "failing_leaf", fail_allocate, fail_deallocate, fail_destroy,
    nullptr, nullptr, nullptr, nullptr, nullptr,
    fail_allocate,  // allocate_capturing fails the same way
    nullptr,
};

// A record whose header says `size` and `version`, at the start of a buffer
// larger than any record, filled with a canary past the header.
class Buffer {
 public:
  Buffer(size_t size, uint32_t version) : bytes_(sizeof(gmr_failure) + kSlack, kCanary) {
    std::memcpy(bytes_.data(), &size, sizeof size);
    std::memcpy(bytes_.data() + offsetof(gmr_failure, version), &version, sizeof version);
  }
  gmr_failure *record() { return reinterpret_cast<gmr_failure *>(bytes_.data()); }
  failure_v1 *v1() { return reinterpret_cast<failure_v1 *>(bytes_.data()); }
  // Bytes at or past `from` (never inside the header) that are no longer the canary.
  size_t touched_from(size_t from) const {
    size_t n = 0;
    for (size_t i = from > kHeader ? from : kHeader; i < bytes_.size(); ++i) {
      n += bytes_[i] != kCanary;
    }
    return n;
  }
  static constexpr size_t kHeader = offsetof(gmr_failure, status);

 private:
  std::vector<unsigned char> bytes_;
};

class FailureRecord : public ::testing::Test {
 protected:
  void SetUp() override { leaf_.base.vtbl = &kFailingVtbl; }
  gmr_resource *r() { return &leaf_.base; }
  failing_leaf leaf_;
};

TEST_F(FailureRecord, AVersion1RecordGetsItsFieldsAndNothingPastItsSize) {
  Buffer buf(sizeof(failure_v1), 1u);
  void *p = reinterpret_cast<void *>(0x1);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_allocate_ex(r(), 1000, 0, nullptr, &p, buf.record()));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(0u, buf.touched_from(sizeof(failure_v1)));
  const failure_v1 *old = buf.v1();
  EXPECT_EQ(sizeof(failure_v1), old->size);  // the header is the caller's
  EXPECT_EQ(1u, old->version);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, old->status);
  EXPECT_EQ(2, old->cuda_error);
  EXPECT_EQ(1000u, old->bytes);
  EXPECT_EQ(GMR_DEFAULT_ALIGNMENT, old->alignment);
  EXPECT_EQ(nullptr, old->stream);
  EXPECT_EQ(r(), old->where);
  EXPECT_EQ(0u, old->attempt);
  EXPECT_STREQ("failing_leaf: no memory", old->message);
  // The resource itself worked in a whole record of the library's version.
  EXPECT_EQ(sizeof(gmr_failure), leaf_.seen_size);
  EXPECT_EQ(GMR_FAILURE_VERSION, leaf_.seen_version);
}

TEST_F(FailureRecord, AWholeRecordGetsTheFreeMemoryFieldsAndNothingPastIt) {
  Buffer buf(sizeof(gmr_failure), GMR_FAILURE_VERSION);
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_allocate_ex(r(), 1000, 0, nullptr, &p, buf.record()));
  EXPECT_EQ(0u, buf.touched_from(sizeof(gmr_failure)));
  const gmr_failure *f = buf.record();
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, f->status);
  EXPECT_TRUE(f->free_info_known);
  EXPECT_EQ(4096u, f->free_bytes);
  EXPECT_EQ(512u, f->largest_free_block_bytes);
  EXPECT_EQ(sizeof(gmr_failure), leaf_.seen_size);
}

TEST_F(FailureRecord, ANewerLargerRecordKeepsTheFieldsTheLibraryDoesNotKnow) {
  Buffer buf(sizeof(gmr_failure) + 32, GMR_FAILURE_VERSION + 1);
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_allocate_ex(r(), 1000, 0, nullptr, &p, buf.record()));
  EXPECT_EQ(0u, buf.touched_from(sizeof(gmr_failure)));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, buf.record()->status);
  EXPECT_STREQ("failing_leaf: no memory", buf.record()->message);
}

TEST_F(FailureRecord, ARecordSmallerThanItsHeaderGetsNothingButTheStatusIsReturned) {
  for (size_t size : {size_t{0}, size_t{1}, offsetof(gmr_failure, status)}) {
    SCOPED_TRACE("size " + std::to_string(size));
    Buffer buf(size, 1u);
    void *p = nullptr;
    EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
              gmr_resource_allocate_ex(r(), 1000, 0, nullptr, &p, buf.record()));
    EXPECT_EQ(0u, buf.touched_from(0));
    EXPECT_EQ(size, buf.record()->size);  // the header is the caller's
    EXPECT_EQ(sizeof(gmr_failure), leaf_.seen_size);
  }
}

TEST_F(FailureRecord, ARecordCutInsideAFieldGetsOnlyTheBytesItHas) {
  const size_t size = offsetof(gmr_failure, message) + 8;
  Buffer buf(size, 1u);
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_resource_allocate_ex(r(), 1000, 0, nullptr, &p, buf.record()));
  EXPECT_EQ(0u, buf.touched_from(size));
  EXPECT_EQ(0, std::memcmp("failing_", buf.record()->message, 8));
}

TEST_F(FailureRecord, GmrFailureInitGivesAWholeEmptyRecord) {
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(sizeof(gmr_failure), f.size);
  EXPECT_EQ(GMR_FAILURE_VERSION, f.version);
  EXPECT_EQ(GMR_OK, f.status);
  EXPECT_EQ(nullptr, f.where);
  EXPECT_STREQ("", f.message);
  EXPECT_FALSE(f.free_info_known);
}

// Every public entry point that takes a gmr_failure follows the contract, not
// only gmr_resource_allocate_ex(): each call below fails and would describe why.
TEST_F(FailureRecord, EveryKindOfEntryPointStopsAtTheCallersSize) {
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_resource *upstream = gmr_host_resource_as_resource(host);
  int x = 0;
  const std::vector<std::pair<std::string, std::function<gmr_status(gmr_failure *)>>> calls = {
      {"allocate_capturing",
       [&](gmr_failure *f) {
         void *p = nullptr;
         return gmr_resource_allocate_capturing(r(), 64, 0, nullptr, &p, f);
       }},
      {"extend",
       [&](gmr_failure *f) { return gmr_resource_extend(r(), &x, 64, 128, 0, nullptr, f); }},
      {"pool_resource_create_ex",
       [&](gmr_failure *f) {
         gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
         c.initial_pool_bytes = (size_t)1 << 20;
         c.maximum_pool_bytes = (size_t)1 << 10;
         gmr_pool_resource *pool = nullptr;
         return gmr_pool_resource_create_ex(upstream, &c, &pool, f);
       }},
      {"tier_manager_create",
       [&](gmr_failure *f) {
         gmr_tier_manager *m = nullptr;
         gmr_memory_space_config c[2] = {gmr_memory_space_config_default(GMR_TIER_HOST, 0),
                                          gmr_memory_space_config_default(GMR_TIER_HOST, 0)};
         return gmr_tier_manager_create(c, 2, &m, f);  // one space twice
       }},
  };
  for (const auto &call : calls) {
    SCOPED_TRACE(call.first);
    Buffer whole(sizeof(gmr_failure), GMR_FAILURE_VERSION);
    const gmr_status want = call.second(whole.record());
    ASSERT_NE(GMR_OK, want);
    Buffer old(sizeof(failure_v1), 1u);
    EXPECT_EQ(want, call.second(old.record()));
    EXPECT_EQ(0u, old.touched_from(sizeof(failure_v1)));
    EXPECT_STREQ(whole.record()->message, old.v1()->message);
    Buffer none(0, 1u);
    EXPECT_EQ(want, call.second(none.record()));
    EXPECT_EQ(0u, none.touched_from(0));
    EXPECT_EQ(want, call.second(nullptr));
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(upstream));
}

}  // namespace
