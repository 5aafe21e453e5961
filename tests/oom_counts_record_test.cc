// gmr_oom_counts has the size + version header of every struct the caller
// allocates and gmr fills (gmr/policy.h): gmr_oom_adaptor_get_counts writes
// the fields that fit in the caller's `size`, never the header and nothing
// past `size`, so a program built against an older, smaller struct keeps
// working; a record without a usable header gets nothing. The limiting
// adaptor's stats embed the counts: a caller of their version 1 (0.1, whose
// counts had no header) still gets that layout. The pattern of
// tests/failure_record_test.cc.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "adaptors/oom_internal.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/policy.h"
#include "tests/support/mock_resource.h"
#include "tests/support/policies.h"

namespace {

// gmr_oom_counts as a caller built against an older, smaller version might
// declare it: the header and the first three counters.
struct counts_prefix {
  size_t size;
  uint32_t version;
  uint64_t failure_count;
  uint64_t retry_count;
  uint64_t recovered_count;
};

static_assert(sizeof(counts_prefix) < sizeof(gmr_oom_counts), "the library's is larger");
static_assert(offsetof(counts_prefix, recovered_count) == offsetof(gmr_oom_counts, recovered_count),
              "versions only append");
static_assert(GMR_OOM_COUNTS_VERSION == 1u, "this test knows version 1");

// gmr_limiting_adaptor_stats of version 1 (gmr 0.1): the OOM counters
// without a header.
struct limiting_stats_v1 {
  size_t size;
  uint32_t version;
  size_t limit_bytes, used_bytes, peak_used_bytes;
  uint64_t allocation_count, deallocation_count, refused_count, upstream_failure_count,
      overage_count;
  size_t max_overage_bytes;
  uint64_t raise_count, bad_free_count;
  uint64_t oom_failure_count, oom_retry_count, oom_recovered_count, oom_gave_up_count,
      oom_reentrant_count, oom_trim_count, oom_trimmed_bytes, oom_wait_count,
      oom_wait_timeout_count;
};

static_assert(offsetof(limiting_stats_v1, oom_failure_count) ==
                  offsetof(gmr_limiting_adaptor_stats, oom),
              "version 2 changed only the OOM counters");

constexpr unsigned char kCanary = 0xA5;

// A buffer larger than any struct, filled with the canary, with a header.
class Buffer {
 public:
  Buffer(size_t size, uint32_t version) : bytes_(1024, kCanary) {
    std::memcpy(bytes_.data(), &size, sizeof size);
    std::memcpy(bytes_.data() + offsetof(gmr_oom_counts, version), &version, sizeof version);
  }
  template <typename T>
  T *as() {
    return reinterpret_cast<T *>(bytes_.data());
  }
  // Bytes at or past `from` that are no longer the canary.
  size_t touched_from(size_t from) const {
    size_t n = 0;
    for (size_t i = from; i < bytes_.size(); ++i) n += bytes_[i] != kCanary;
    return n;
  }

 private:
  std::vector<unsigned char> bytes_;
};

gmr_oom_action RetryOnce(void *, const gmr_failure *) { return GMR_OOM_ACTION_RETRY; }

// An OOM adaptor and a limiting adaptor with on_oom (the OOM layer a spec's
// limiting(on_oom=...) puts above it, which counts into the limiting
// adaptor's stats) whose `retry` policy saw one failure and recovered from
// it: failure 1, retry 1, recovered 1.
class OomCountsRecord : public ::testing::Test {
 protected:
  void SetUp() override {
    mock_ = gmr_mock_resource_create(nullptr);
    ASSERT_NE(nullptr, mock_);
    gmr_oom_policy p = gmr_test::RetryPolicy(RetryOnce, nullptr, 2);
    ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(gmr_mock_resource_as_resource(mock_), &p, &oom_));
    gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
    gmr_oom_policy on_oom = gmr_test::RetryPolicy(RetryOnce, nullptr, 2);
    ASSERT_EQ(GMR_OK, gmr__limiting_with_oom_create(gmr_mock_resource_as_resource(mock_), &c,
                                                    &on_oom, &lim_, &lim_top_));
    for (gmr_resource *r : {gmr_oom_adaptor_as_resource(oom_), lim_top_}) {
      gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 0, nullptr, &p));
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
    }
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(lim_top_));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_limiting_adaptor_as_resource(lim_)));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_oom_adaptor_as_resource(oom_)));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock_)));
  }
  gmr_mock_resource *mock_ = nullptr;
  gmr_oom_adaptor *oom_ = nullptr;
  gmr_limiting_adaptor *lim_ = nullptr;
  gmr_resource *lim_top_ = nullptr;  // the OOM layer over lim_
};

TEST_F(OomCountsRecord, AWholeRecordGetsEveryCounterAndKeepsItsHeader) {
  gmr_oom_counts c = GMR_OOM_COUNTS_INIT;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_get_counts(oom_, &c));
  EXPECT_EQ(sizeof(gmr_oom_counts), c.size);
  EXPECT_EQ(GMR_OOM_COUNTS_VERSION, c.version);
  EXPECT_EQ(1u, c.failure_count);
  EXPECT_EQ(1u, c.retry_count);
  EXPECT_EQ(1u, c.recovered_count);
  EXPECT_EQ(0u, c.gave_up_count);
}

TEST_F(OomCountsRecord, ASmallerRecordGetsItsFieldsAndNothingPastItsSize) {
  Buffer buf(sizeof(counts_prefix), 1u);
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_get_counts(oom_, buf.as<gmr_oom_counts>()));
  EXPECT_EQ(0u, buf.touched_from(sizeof(counts_prefix)));
  const counts_prefix *old = buf.as<counts_prefix>();
  EXPECT_EQ(sizeof(counts_prefix), old->size) << "the header is the caller's";
  EXPECT_EQ(1u, old->version);
  EXPECT_EQ(1u, old->failure_count);
  EXPECT_EQ(1u, old->retry_count);
  EXPECT_EQ(1u, old->recovered_count);
}

TEST_F(OomCountsRecord, ARecordWithoutAUsableHeaderGetsNothing) {
  const size_t header = offsetof(gmr_oom_counts, version) + sizeof(uint32_t);
  for (size_t size : {size_t{0}, sizeof(size_t), header - 1}) {
    Buffer buf(size, 1u);
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_adaptor_get_counts(oom_, buf.as<gmr_oom_counts>()))
        << "size " << size;
    EXPECT_EQ(0u, buf.touched_from(offsetof(gmr_oom_counts, version) + sizeof(uint32_t)));
  }
  Buffer zero_version(sizeof(gmr_oom_counts), 0u);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_oom_adaptor_get_counts(oom_, zero_version.as<gmr_oom_counts>()));
  EXPECT_EQ(0u, zero_version.touched_from(header));
  gmr_oom_counts c = GMR_OOM_COUNTS_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_adaptor_get_counts(nullptr, &c));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_adaptor_get_counts(oom_, nullptr));
}

TEST_F(OomCountsRecord, TheLimitingStatsEmbedTheCountsWithTheirHeader) {
  gmr_limiting_adaptor_stats s = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim_, &s));
  EXPECT_EQ(GMR_LIMITING_ADAPTOR_STATS_VERSION, s.version);
  EXPECT_EQ(sizeof(gmr_oom_counts), s.oom.size);
  EXPECT_EQ(GMR_OOM_COUNTS_VERSION, s.oom.version);
  EXPECT_EQ(1u, s.oom.failure_count);
  EXPECT_EQ(1u, s.oom.retry_count);
  EXPECT_EQ(1u, s.oom.recovered_count);
  EXPECT_EQ(1u, s.allocation_count);
}

TEST_F(OomCountsRecord, AVersion1LimitingStatsGetsTheOldLayout) {
  Buffer buf(sizeof(limiting_stats_v1), 1u);
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim_, buf.as<gmr_limiting_adaptor_stats>()));
  EXPECT_EQ(0u, buf.touched_from(sizeof(limiting_stats_v1)));
  const limiting_stats_v1 *old = buf.as<limiting_stats_v1>();
  EXPECT_EQ(sizeof(limiting_stats_v1), old->size);
  EXPECT_EQ(1u, old->version);
  EXPECT_EQ(1u, old->allocation_count);
  EXPECT_EQ(1u, old->deallocation_count);
  EXPECT_EQ(1u, old->oom_failure_count);
  EXPECT_EQ(1u, old->oom_retry_count);
  EXPECT_EQ(1u, old->oom_recovered_count);
  EXPECT_EQ(0u, old->oom_gave_up_count);
  EXPECT_EQ(0u, old->oom_wait_timeout_count);
}

}  // namespace
