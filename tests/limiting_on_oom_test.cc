// limiting(on_oom=...): an OOM layer above the limiting adaptor, as a spec
// builds it (adaptors/oom_internal.h). Every OOM policy branch, as the
// limiting adaptor's own on_oom ran them, with the same counts in its stats;
// the limit's own refusals left to on_limit; both policies taken over.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "gmr/limiting_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/policy.h"
#include "tests/support/limiting_fixture.h"
#include "tests/support/mock_resource.h"
#include "tests/support/policies.h"

namespace {

using Limiting = gmr_test::LimitingTest;

gmr_stream S(uintptr_t v) { return reinterpret_cast<gmr_stream>(v); }

// The two layers of limiting(on_oom=...) take both policies over as each
// adaptor does: released on every failure but an invalid policy, and a
// `fail` on_oom at once (no layer holds it).
TEST_F(Limiting, TheShorthandWithOomTakesBothPoliciesOver) {
  static int limit_released, oom_released;
  limit_released = oom_released = 0;
  gmr_limiting_adaptor_config c = Config(100);
  c.on_limit.release = [](void *) { limit_released++; };
  gmr_oom_policy p = gmr_test::TrimRetryPolicy(1);
  p.release = [](void *) { oom_released++; };
  gmr_limiting_adaptor *lim = reinterpret_cast<gmr_limiting_adaptor *>(0x1);
  gmr_resource *top = reinterpret_cast<gmr_resource *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr__limiting_with_oom_create(nullptr, &c, &p, &lim, &top));
  EXPECT_EQ(nullptr, lim);
  EXPECT_EQ(nullptr, top);
  EXPECT_EQ(1, limit_released);
  EXPECT_EQ(1, oom_released);
  p.max_attempts = GMR_OOM_MAX_ATTEMPTS + 1;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr__limiting_with_oom_create(up_, &c, &p, &lim, &top));
  EXPECT_EQ(1, limit_released) << "an invalid policy: nothing taken over";
  EXPECT_EQ(1, oom_released);
  p.max_attempts = 1;
  ASSERT_EQ(GMR_OK, gmr__limiting_with_oom_create(up_, &c, &p, &lim, &top));
  EXPECT_STREQ("oom_adaptor", gmr_resource_get_type_name(top));
  EXPECT_EQ(gmr_limiting_adaptor_as_resource(lim), gmr_resource_get_upstream(top));
  EXPECT_EQ(1, oom_released);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
  EXPECT_EQ(2, oom_released) << "the OOM layer held it";
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_limiting_adaptor_as_resource(lim)));
  EXPECT_EQ(2, limit_released);
  // `fail` cannot act: one layer, and its policy is released at once.
  gmr_oom_policy fail = gmr_test::OomPolicy("fail");
  fail.release = [](void *) { oom_released++; };
  ASSERT_EQ(GMR_OK, gmr__limiting_with_oom_create(up_, &c, &fail, &lim, &top));
  EXPECT_EQ(gmr_limiting_adaptor_as_resource(lim), top);
  EXPECT_EQ(3, oom_released);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
  EXPECT_EQ(3, limit_released);
}

struct Callback {
  int calls = 0;
  gmr_failure last = GMR_FAILURE_INIT;
  gmr_oom_action answer = GMR_OOM_ACTION_RETRY;
  gmr_resource *reenter = nullptr;  // allocate through this from inside the callback
  gmr_status reentered_status = GMR_OK;
};

gmr_oom_action OnOom(void *ctx, const gmr_failure *f) {
  Callback *cb = static_cast<Callback *>(ctx);
  cb->calls++;
  cb->last = *f;
  if (cb->reenter != nullptr) {
    void *p = nullptr;
    cb->reentered_status = gmr_resource_allocate(cb->reenter, 64, 0, nullptr, &p);
    if (p != nullptr) (void)gmr_resource_deallocate(cb->reenter, p, 64, 0, nullptr);
  }
  return cb->answer;
}

TEST_F(Limiting, RetryPolicyCallsTheCallbackWithTheFailureThenRetries) {
  Callback cb;
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  MakeWithOom(c, gmr_test::RetryPolicy(OnOom, &cb, 3));
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1000, 512, S(3), &p));
  EXPECT_EQ(1, cb.calls);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, cb.last.status);
  EXPECT_EQ(1000u, cb.last.bytes);
  EXPECT_EQ(512u, cb.last.alignment);
  EXPECT_EQ(S(3), cb.last.stream);
  EXPECT_EQ(up_, cb.last.where);
  EXPECT_EQ(2, cb.last.cuda_error);
  EXPECT_EQ(0u, cb.last.attempt);
  EXPECT_EQ(2u, gmr_mock_resource_called_allocate(mock_));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(1u, s.oom.retry_count);
  EXPECT_EQ(1u, s.oom.recovered_count);
  EXPECT_EQ(0u, s.oom.gave_up_count);
  EXPECT_EQ(1024u, s.used_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), p, 1000, 512, S(3)));
}

TEST_F(Limiting, RetryAttemptsAreCappedAndTheRecordCountsThem) {
  Callback cb;
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  MakeWithOom(c, gmr_test::RetryPolicy(OnOom, &cb, 3));
  gmr_mock_resource_try_fail(mock_, 0, 100, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r(), 10, 0, nullptr, &p, &f));
  EXPECT_EQ(3, cb.calls);  // attempts 0, 1, 2 asked; attempt 3 hit the cap
  EXPECT_EQ(4u, gmr_mock_resource_called_allocate(mock_));
  EXPECT_EQ(3u, f.attempt);
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(lim_));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(3u, s.oom.retry_count);
  EXPECT_EQ(1u, s.oom.gave_up_count);
  EXPECT_EQ(4u, s.oom.failure_count);
  gmr_mock_resource_try_fail(mock_, 0, 0, GMR_OK, 0);
}

TEST_F(Limiting, RetryCallbackThatSaysFailGivesUpAtOnce) {
  Callback cb;
  cb.answer = GMR_OOM_ACTION_FAIL;
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  MakeWithOom(c, gmr_test::RetryPolicy(OnOom, &cb, 5));
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(r(), 10, 0, nullptr, &p));
  EXPECT_EQ(1, cb.calls);
  EXPECT_EQ(1u, gmr_mock_resource_called_allocate(mock_));
  EXPECT_EQ(1u, Stats().oom.gave_up_count);
}

TEST_F(Limiting, OomPolicyIsNotRunForFailuresOtherThanLackOfMemory) {
  Callback cb;
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  MakeWithOom(c, gmr_test::RetryPolicy(OnOom, &cb, 5));
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_UNSUPPORTED, 0);
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_allocate(r(), 10, 0, nullptr, &p));
  EXPECT_EQ(0, cb.calls);
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(lim_));
}

TEST_F(Limiting, PolicyIsNeverEnteredReentrantly) {
  Callback cb;
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  MakeWithOom(c, gmr_test::RetryPolicy(OnOom, &cb, 2));
  cb.reenter = r();  // the callback allocates through the same adaptor
  gmr_mock_resource_try_fail(mock_, 0, 100, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(r(), 10, 0, nullptr, &p));
  EXPECT_EQ(2, cb.calls);  // once per attempt, never from inside itself
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, cb.reentered_status);
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(2u, s.oom.reentrant_count);
  EXPECT_EQ(0u, s.used_bytes);
  gmr_mock_resource_try_fail(mock_, 0, 0, GMR_OK, 0);
}

TEST_F(Limiting, TrimRetryTrimsTheStackBelowAndRetriesWhenBytesCameBack) {
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  MakeWithOom(c, gmr_test::TrimRetryPolicy(2));
  gmr_mock_resource_set_trim_release(mock_, 4096);
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 10, 0, nullptr, &p));
  EXPECT_EQ(1u, gmr_mock_resource_called_trim(mock_));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(1u, s.oom.trim_count);
  EXPECT_EQ(4096u, s.oom.trimmed_bytes);
  EXPECT_EQ(1u, s.oom.recovered_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), p, 10, 0, nullptr));

  // Nothing released: retrying cannot help, so it gives up after one trim.
  gmr_mock_resource_set_trim_release(mock_, 0);
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(r(), 10, 0, nullptr, &p));
  EXPECT_EQ(2u, gmr_mock_resource_called_trim(mock_));
  s = Stats();
  EXPECT_EQ(2u, s.oom.trim_count);
  EXPECT_EQ(1u, s.oom.gave_up_count);
  EXPECT_EQ(0u, s.used_bytes);
}

TEST_F(Limiting, WaitPolicyRetriesWhenAnotherThreadFrees) {
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  MakeWithOom(c, gmr_test::WaitPolicy(uint64_t{10} * 1000000000u, 1));
  void *held = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 100, 0, nullptr, &held));
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  std::atomic<int> done{0};
  void *p = nullptr;
  gmr_status st = GMR_ERR_INTERNAL;
  std::thread waiter([&] {
    st = gmr_resource_allocate(r(), 100, 0, nullptr, &p);
    done = 1;
  });
  // Free once the waiter has failed its first try (the mock's plan is spent).
  while (gmr_mock_resource_called_allocate(mock_) < 2) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), held, 100, 0, nullptr));
  waiter.join();
  ASSERT_EQ(GMR_OK, st);
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(1u, s.oom.wait_count);
  EXPECT_EQ(0u, s.oom.wait_timeout_count);
  EXPECT_EQ(1u, s.oom.recovered_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), p, 100, 0, nullptr));
}

TEST_F(Limiting, WaitPolicyGivesUpWhenNoFreeComesInTime) {
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  MakeWithOom(c, gmr_test::WaitPolicy(uint64_t{20} * 1000000u, 3));  // 20 ms
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(r(), 100, 0, nullptr, &p));
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(19));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(1u, s.oom.wait_count);
  EXPECT_EQ(1u, s.oom.wait_timeout_count);
  EXPECT_EQ(1u, s.oom.gave_up_count);
  EXPECT_EQ(0u, s.used_bytes);
}

// The shorthand behaves as the limiting adaptor's own on_oom did: the limit's
// refusal goes to on_limit alone, and a failure below it runs the policy.
TEST_F(Limiting, TheLimitsOwnRefusalIsLeftToItsLimitPolicy) {
  Callback cb;
  MakeWithOom(Config(1024), gmr_test::RetryPolicy(OnOom, &cb, 3));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate_ex(r(), 2000, 0, nullptr, &p, &f));
  EXPECT_EQ(0, cb.calls);
  EXPECT_EQ(lim(), f.where);
  EXPECT_EQ(0u, f.attempt);
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(1u, s.refused_count);
  EXPECT_EQ(0u, s.oom.failure_count);
  EXPECT_EQ(0u, s.oom.gave_up_count);
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1000, 0, nullptr, &p));
  EXPECT_EQ(1, cb.calls);
  EXPECT_EQ(up_, cb.last.where);
  // One set of counts, read from either layer.
  gmr_oom_counts c = GMR_OOM_COUNTS_INIT;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_get_counts(gmr_oom_adaptor_from_resource(r()), &c));
  s = Stats();
  EXPECT_EQ(1u, c.failure_count);
  EXPECT_EQ(1u, c.retry_count);
  EXPECT_EQ(1u, c.recovered_count);
  EXPECT_TRUE(gmr_test::SameOomCounts(c, s.oom));
  EXPECT_EQ(1u, s.upstream_failure_count) << "the limiting layer saw the failed attempt";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), p, 1000, 0, nullptr));
}

}  // namespace
