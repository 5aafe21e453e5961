// A limiting_adaptor over a mock upstream (tests/support/mock_resource.h),
// for the limiting tests: made by Make (or MakeWithOom: the two layers of a
// spec's limiting(on_oom=...), adaptors/oom_internal.h), destroyed with the
// mock at the end of the test.
#ifndef GMR_TESTS_SUPPORT_LIMITING_FIXTURE_H_
#define GMR_TESTS_SUPPORT_LIMITING_FIXTURE_H_

#include <gtest/gtest.h>

#include "adaptors/oom_internal.h"
#include "gmr/limiting_adaptor.h"
#include "tests/support/mock_resource.h"

namespace gmr_test {

class LimitingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mock_ = gmr_mock_resource_create(nullptr);
    ASSERT_NE(nullptr, mock_);
    up_ = gmr_mock_resource_as_resource(mock_);
  }
  void TearDown() override {
    if (top_ != nullptr && top_ != lim()) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(top_));
    }
    if (lim_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(lim()));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_));
  }
  void Make(const gmr_limiting_adaptor_config &c) {
    ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(up_, &c, &lim_));
    top_ = lim();
  }
  // `oom(policy=on_oom) > limiting(c)` as a spec's limiting(on_oom=...) builds it.
  void MakeWithOom(const gmr_limiting_adaptor_config &c, const gmr_oom_policy &on_oom) {
    ASSERT_EQ(GMR_OK, gmr__limiting_with_oom_create(up_, &c, &on_oom, &lim_, &top_));
  }
  // The layer to allocate from: the limiting adaptor, or the OOM layer above it.
  gmr_resource *r() { return top_; }
  gmr_resource *lim() { return gmr_limiting_adaptor_as_resource(lim_); }
  gmr_limiting_adaptor_stats Stats() {
    gmr_limiting_adaptor_stats s = GMR_LIMITING_ADAPTOR_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim_, &s));
    return s;
  }
  static gmr_limiting_adaptor_config Config(size_t limit) {
    gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
    c.limit_bytes = limit;
    return c;
  }

  gmr_mock_resource *mock_ = nullptr;
  gmr_resource *up_ = nullptr;
  gmr_limiting_adaptor *lim_ = nullptr;
  gmr_resource *top_ = nullptr;
};

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_LIMITING_FIXTURE_H_
