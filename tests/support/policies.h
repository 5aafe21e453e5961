/*
 * tests/support/policies.h: the built-in policies with the fields a test
 * wants, from their names (gmr_oom_policy_from_name,
 * gmr_limit_policy_from_name) as gmr/policy.h shows, in one line each.
 */
#ifndef GMR_TESTS_SUPPORT_POLICIES_H_
#define GMR_TESTS_SUPPORT_POLICIES_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

#include "gmr/policy.h"

namespace gmr_test {

inline gmr_oom_policy OomPolicy(const char *name) {
  gmr_oom_policy p = GMR_OOM_POLICY_FAIL_INIT;
  EXPECT_EQ(GMR_OK, gmr_oom_policy_from_name(name, &p)) << name;
  return p;
}

inline gmr_oom_policy RetryPolicy(gmr_oom_callback_fn *callback, void *callback_ctx,
                                  uint32_t max_attempts) {
  gmr_oom_policy p = OomPolicy("retry");
  p.callback = callback;
  p.callback_ctx = callback_ctx;
  p.max_attempts = max_attempts;
  return p;
}

inline gmr_oom_policy TrimRetryPolicy(uint32_t max_attempts) {
  gmr_oom_policy p = OomPolicy("trim_retry");
  p.max_attempts = max_attempts;
  return p;
}

inline gmr_oom_policy WaitPolicy(uint64_t timeout_ns, uint32_t max_attempts) {
  gmr_oom_policy p = OomPolicy("wait");
  p.wait_timeout_ns = timeout_ns;
  p.max_attempts = max_attempts;
  return p;
}

inline gmr_limit_policy LimitPolicy(const char *name) {
  gmr_limit_policy p = GMR_LIMIT_POLICY_FAIL_INIT;
  EXPECT_EQ(GMR_OK, gmr_limit_policy_from_name(name, &p)) << name;
  return p;
}

// `increase` or `increase_total` with its padding factor and cap.
inline gmr_limit_policy IncreasePolicy(const char *name, double padding_factor, size_t cap_bytes) {
  gmr_limit_policy p = LimitPolicy(name);
  p.padding_factor = padding_factor;
  p.cap_bytes = cap_bytes;
  return p;
}

// Two OOM count records hold the same counts (field by field: the struct
// has padding after `version`, so memcmp would compare garbage).
inline bool SameOomCounts(const gmr_oom_counts &a, const gmr_oom_counts &b) {
  return a.failure_count == b.failure_count && a.retry_count == b.retry_count &&
         a.recovered_count == b.recovered_count && a.gave_up_count == b.gave_up_count &&
         a.reentrant_count == b.reentrant_count && a.trim_count == b.trim_count &&
         a.trimmed_bytes == b.trimmed_bytes && a.wait_count == b.wait_count &&
         a.wait_timeout_count == b.wait_timeout_count;
}

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_POLICIES_H_
