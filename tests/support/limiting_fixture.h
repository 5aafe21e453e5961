// A limiting_adaptor over a mock upstream (tests/support/mock_resource.h),
// for the limiting tests: made by Make, destroyed with the mock at the end
// of the test.
#ifndef GMR_TESTS_SUPPORT_LIMITING_FIXTURE_H_
#define GMR_TESTS_SUPPORT_LIMITING_FIXTURE_H_

#include <gtest/gtest.h>

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
    if (lim_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r()));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_));
  }
  void Make(const gmr_limiting_adaptor_config &c) {
    ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(up_, &c, &lim_));
  }
  gmr_resource *r() { return gmr_limiting_adaptor_as_resource(lim_); }
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
};

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_LIMITING_FIXTURE_H_
