// The registries of named OOM and limit policies (stack/policy_registry.c):
// names added and removed in any order, the last one included, leave the
// others as they were. Run under --config=asan too: removing the last name
// once copied a string onto itself (an overlapping strcpy).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmr/policy.h"
#include "gmr/stack.h"
#include "tests/support/policies.h"

namespace {

TEST(PolicyRegistry, RemovingAnyNameKeepsTheOthers) {
  const char *names[] = {"first_policy", "second_policy", "third_policy"};
  for (const char *name : names) {
    gmr_oom_policy p = gmr_test::TrimRetryPolicy(2);
    p.name = name;
    ASSERT_EQ(GMR_OK, gmr_oom_policy_register(nullptr, name, &p)) << name;
    gmr_limit_policy l = gmr_test::LimitPolicy("ignore");
    l.name = name;
    ASSERT_EQ(GMR_OK, gmr_limit_policy_register(nullptr, name, &l)) << name;
  }
  // The last, then the first, then the only one left.
  for (int order : {2, 0, 1}) {
    ASSERT_EQ(GMR_OK, gmr_oom_policy_unregister(nullptr, names[order]));
    ASSERT_EQ(GMR_OK, gmr_limit_policy_unregister(nullptr, names[order]));
    gmr_oom_policy p;
    gmr_limit_policy l;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_policy_from_name(names[order], &p));
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limit_policy_from_name(names[order], &l));
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_policy_unregister(nullptr, names[order]));
  }
  for (const char *name : names) {
    gmr_oom_policy p;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_policy_from_name(name, &p)) << name;
  }
}

TEST(PolicyRegistry, TheOthersKeepTheirValues) {
  gmr_oom_policy a = gmr_test::RetryPolicy(nullptr, nullptr, 5);
  a.name = "keep_a";
  gmr_oom_policy b = gmr_test::WaitPolicy(7, 6);
  b.name = "keep_b";
  ASSERT_EQ(GMR_OK, gmr_oom_policy_register(nullptr, "keep_a", &a));
  ASSERT_EQ(GMR_OK, gmr_oom_policy_register(nullptr, "keep_b", &b));
  ASSERT_EQ(GMR_OK, gmr_oom_policy_unregister(nullptr, "keep_a"));  // b moves into a's slot
  gmr_oom_policy got;
  ASSERT_EQ(GMR_OK, gmr_oom_policy_from_name("keep_b", &got));
  EXPECT_STREQ("keep_b", got.name);
  EXPECT_EQ(6u, got.max_attempts);
  EXPECT_EQ(7u, got.wait_timeout_ns);
  ASSERT_EQ(GMR_OK, gmr_oom_policy_unregister(nullptr, "keep_b"));  // now the last one
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_policy_from_name("keep_b", &got));
}

// Thread-safe: yes (internal mutex). Threads register, look up, build stacks
// that name their policies, and unregister, all at once (run under TSan too).
TEST(PolicyRegistry, ThreadsRegisterLookUpAndBuildStacksAtOnce) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      const std::string name = "threaded_" + std::to_string(t);
      const std::string spec = "oom(policy=" + name + ") > limiting(on_limit=" + name + ") > host";
      for (int round = 0; round < kRounds; ++round) {
        gmr_oom_policy p = gmr_test::TrimRetryPolicy(1);
        p.name = "threaded";
        gmr_limit_policy l = gmr_test::LimitPolicy("ignore");
        l.name = "threaded";
        if (gmr_oom_policy_register(nullptr, name.c_str(), &p) != GMR_OK) failures++;
        if (gmr_limit_policy_register(nullptr, name.c_str(), &l) != GMR_OK) failures++;
        gmr_stack *s = nullptr;
        gmr_spec_error e;
        if (gmr_stack_create(spec.c_str(), &s, &e) != GMR_OK) failures++;
        if (gmr_stack_destroy(s) != GMR_OK) failures++;
        if (gmr_oom_policy_unregister(nullptr, name.c_str()) != GMR_OK) failures++;
        if (gmr_limit_policy_unregister(nullptr, name.c_str()) != GMR_OK) failures++;
        gmr_oom_policy got;
        if (gmr_oom_policy_from_name(name.c_str(), &got) != GMR_ERR_INVALID_ARGUMENT) failures++;
      }
    });
  }
  for (std::thread &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
}

}  // namespace
