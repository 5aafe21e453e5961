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

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_POLICIES_H_
