/*
 * tests/support/log_stats.h: a log adaptor's counters in one expression
 * (gmr_log_adaptor_get_stats with its header set).
 */
#ifndef GMR_TESTS_SUPPORT_LOG_STATS_H_
#define GMR_TESTS_SUPPORT_LOG_STATS_H_

#include <gtest/gtest.h>

#include "gmr/log_adaptor.h"

namespace gmr_test {

inline gmr_log_adaptor_stats LogStats(const gmr_log_adaptor *log) {
  gmr_log_adaptor_stats s = GMR_LOG_ADAPTOR_STATS_INIT;
  EXPECT_EQ(GMR_OK, gmr_log_adaptor_get_stats(log, &s));
  return s;
}

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_LOG_STATS_H_
