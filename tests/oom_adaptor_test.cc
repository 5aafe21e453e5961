// oom_adaptor and the policy events: each policy on a plain stack, `wait`
// above a limit, the event hook and what each event carries, and the policy
// registries.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "gmr/events.h"
#include "gmr/host_resource.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/policy.h"
#include "tests/support/mock_resource.h"
#include "tests/support/policies.h"

namespace {

struct Recorder {
  std::mutex mu;
  std::vector<gmr_event> events;
  static void Listen(void *ctx, const gmr_event *e) {
    Recorder *r = static_cast<Recorder *>(ctx);
    std::lock_guard<std::mutex> lock(r->mu);
    r->events.push_back(*e);
  }
  std::vector<gmr_event> Take() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<gmr_event> out;
    out.swap(events);
    return out;
  }
};

// What each event carries: rec_ listens to the top of each test's stack
// (Watch), which covers every reporting layer below it.
class Events : public ::testing::Test {
 protected:
  void SetUp() override {
    mock_ = gmr_mock_resource_create(nullptr);
    up_ = gmr_mock_resource_as_resource(mock_);
  }
  void TearDown() override { EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_)); }
  gmr_resource *Watch(gmr_resource *r) {
    EXPECT_EQ(GMR_OK, gmr_resource_add_event_listener(r, Recorder::Listen, &rec_));
    return r;
  }
  // Stop listening, then destroy the top.
  gmr_status Drop(gmr_resource *r) {
    EXPECT_EQ(GMR_OK, gmr_resource_remove_event_listener(r, Recorder::Listen, &rec_));
    return gmr_resource_destroy(r);
  }
  Recorder rec_;
  gmr_mock_resource *mock_ = nullptr;
  gmr_resource *up_ = nullptr;
};

TEST(EventHook, KindNames) {
  EXPECT_STREQ("limit_refused", gmr_event_kind_name(GMR_EVENT_LIMIT_REFUSED));
  EXPECT_STREQ("oom_gave_up", gmr_event_kind_name(GMR_EVENT_OOM_GAVE_UP));
  EXPECT_STREQ("unknown", gmr_event_kind_name(static_cast<gmr_event_kind>(99)));
}

// Listeners per stack (gmr_resource_add_event_listener): a listener hears
// the reporting layers at or below the resource it registered on, nothing
// else.
class StackEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    mock_ = gmr_mock_resource_create(nullptr);
    up_ = gmr_mock_resource_as_resource(mock_);
  }
  void TearDown() override { EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_)); }
  gmr_resource *Limit(size_t limit_bytes) {
    gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
    c.limit_bytes = limit_bytes;
    gmr_limiting_adaptor *lim = nullptr;
    EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_create(up_, &c, &lim));
    return gmr_limiting_adaptor_as_resource(lim);
  }
  gmr_mock_resource *mock_ = nullptr;
  gmr_resource *up_ = nullptr;
};

TEST_F(StackEvents, AListenerHearsOnlyTheStackItRegisteredOn) {
  gmr_resource *a = Limit(256), *b = Limit(256);
  Recorder rec;
  ASSERT_EQ(GMR_OK, gmr_resource_add_event_listener(a, Recorder::Listen, &rec));
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(b, 1000, 0, nullptr, &p));
  EXPECT_TRUE(rec.Take().empty()) << "another stack's refusal";
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(a, 1000, 0, nullptr, &p));
  auto ev = rec.Take();
  ASSERT_EQ(1u, ev.size());
  EXPECT_EQ(GMR_EVENT_LIMIT_REFUSED, ev[0].kind);
  EXPECT_EQ(a, ev[0].source);
  EXPECT_EQ(GMR_OK, gmr_resource_remove_event_listener(a, Recorder::Listen, &rec));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(a, 1000, 0, nullptr, &p));
  EXPECT_TRUE(rec.Take().empty()) << "removed";
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(b));
}

TEST_F(StackEvents, ARegistrationCoversEveryReportingLayerBelow) {
  gmr_resource *lim = Limit(256);
  gmr_oom_policy p = gmr_test::TrimRetryPolicy(1);
  gmr_oom_adaptor *oa = nullptr;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(lim, &p, &oa));
  gmr_resource *top = gmr_oom_adaptor_as_resource(oa);
  Recorder all, low;
  ASSERT_EQ(GMR_OK, gmr_resource_add_event_listener(top, Recorder::Listen, &all));
  ASSERT_EQ(GMR_OK, gmr_resource_add_event_listener(lim, Recorder::Listen, &low));
  void *q = nullptr;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(top, 1000, 0, nullptr, &q));
  bool from_limit = false, from_oom = false;
  for (const gmr_event &e : all.Take()) {
    from_limit |= e.source == lim;
    from_oom |= e.source == top;
  }
  EXPECT_TRUE(from_limit && from_oom) << "both layers report to a listener on the top";
  for (const gmr_event &e : low.Take()) EXPECT_EQ(lim, e.source) << "only the layer it is on";
  // A pair missing from one layer: remove refuses and changes nothing.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_remove_event_listener(top, Recorder::Listen, &low));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(top, 1000, 0, nullptr, &q));
  EXPECT_FALSE(low.Take().empty()) << "still registered on the limit";
  EXPECT_EQ(GMR_OK, gmr_resource_remove_event_listener(lim, Recorder::Listen, &low));
  EXPECT_EQ(GMR_OK, gmr_resource_remove_event_listener(top, Recorder::Listen, &all));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(lim));
}

TEST_F(StackEvents, AFullLayerRefusesTheWholeRegistrationAndBadInputChangesNothing) {
  gmr_resource *lim = Limit(256);
  gmr_oom_adaptor *oa = nullptr;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(lim, nullptr, &oa));
  gmr_resource *top = gmr_oom_adaptor_as_resource(oa);
  std::vector<Recorder> fill(GMR_EVENT_MAX_LISTENERS);
  for (Recorder &r : fill) ASSERT_EQ(GMR_OK, gmr_resource_add_event_listener(lim, Recorder::Listen, &r));
  Recorder rec;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_add_event_listener(top, Recorder::Listen, &rec));
  // The top layer took it first and gave it back: it is nowhere.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_remove_event_listener(top, Recorder::Listen, &rec));
  for (Recorder &r : fill) EXPECT_EQ(GMR_OK, gmr_resource_remove_event_listener(lim, Recorder::Listen, &r));
  ASSERT_EQ(GMR_OK, gmr_resource_add_event_listener(top, Recorder::Listen, &rec));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_add_event_listener(top, Recorder::Listen, &rec))
      << "twice";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_add_event_listener(nullptr, Recorder::Listen, &rec));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_add_event_listener(top, nullptr, &rec));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_remove_event_listener(nullptr, Recorder::Listen, &rec));
  EXPECT_EQ(GMR_OK, gmr_resource_remove_event_listener(top, Recorder::Listen, &rec));
  // A stack with no reporting layer: registering is allowed and harmless.
  EXPECT_EQ(GMR_OK, gmr_resource_add_event_listener(up_, Recorder::Listen, &rec));
  EXPECT_EQ(GMR_OK, gmr_resource_remove_event_listener(up_, Recorder::Listen, &rec));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(lim));
}

TEST_F(Events, LimitEventsCarryTheLimitAndTheRequest) {
  gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  c.limit_bytes = 1024;
  c.on_limit = gmr_test::IncreasePolicy("increase", 1.5, 0);
  gmr_limiting_adaptor *lim = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(up_, &c, &lim));
  gmr_resource *r = Watch(gmr_limiting_adaptor_as_resource(lim));
  gmr_stream s = reinterpret_cast<gmr_stream>(0x5);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, s, &a));
  EXPECT_TRUE(rec_.Take().empty());  // nothing happened worth an event
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, s, &b));
  auto ev = rec_.Take();
  ASSERT_EQ(1u, ev.size());
  EXPECT_EQ(GMR_EVENT_LIMIT_RAISED, ev[0].kind);
  EXPECT_EQ(r, ev[0].source);
  EXPECT_STREQ("increase", ev[0].policy_name);
  EXPECT_EQ(1024u, ev[0].bytes);
  EXPECT_EQ(s, ev[0].stream);
  EXPECT_EQ(1024u, ev[0].limit_bytes);
  EXPECT_EQ(1024u, ev[0].used_bytes);
  EXPECT_EQ(2560u, ev[0].value_bytes);  // 1024 + (2048 - 1024) * 1.5 (cuCascade's formula)
  EXPECT_EQ(0, ev[0].scope_stream);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 1000, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 1000, 0, s));
  EXPECT_EQ(GMR_OK, Drop(r));

  c.limit_bytes = 256;
  c.on_limit = gmr_test::LimitPolicy("ignore");
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(up_, &c, &lim));
  r = Watch(gmr_limiting_adaptor_as_resource(lim));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, s, &a));
  ev = rec_.Take();
  ASSERT_EQ(1u, ev.size());
  EXPECT_EQ(GMR_EVENT_LIMIT_OVERAGE, ev[0].kind);
  EXPECT_EQ(768u, ev[0].value_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 1000, 0, s));
  EXPECT_EQ(GMR_OK, Drop(r));

  c.on_limit = gmr_test::LimitPolicy("fail");
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(up_, &c, &lim));
  r = Watch(gmr_limiting_adaptor_as_resource(lim));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r, 1000, 0, s, &a));
  ev = rec_.Take();
  ASSERT_EQ(1u, ev.size());
  EXPECT_EQ(GMR_EVENT_LIMIT_REFUSED, ev[0].kind);
  EXPECT_STREQ("fail", ev[0].policy_name);
  EXPECT_EQ(256u, ev[0].limit_bytes);
  EXPECT_EQ(GMR_OK, Drop(r));
}

TEST_F(Events, OomEventsTellRetryTrimAndGivingUp) {
  gmr_oom_policy p = gmr_test::TrimRetryPolicy(1);
  gmr_oom_adaptor *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(up_, &p, &a));
  gmr_resource *r = Watch(gmr_oom_adaptor_as_resource(a));
  EXPECT_STREQ("oom_adaptor", gmr_resource_get_type_name(r));
  EXPECT_EQ(a, gmr_oom_adaptor_from_resource(r));
  EXPECT_EQ(up_, gmr_resource_get_upstream(r));
  gmr_mock_resource_set_trim_release(mock_, 2048);
  gmr_mock_resource_try_fail(mock_, 0, 2, GMR_ERR_OUT_OF_MEMORY, 2);
  void *q = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 100, 0, nullptr, &q, &f));
  EXPECT_EQ(1u, f.attempt);
  auto ev = rec_.Take();
  ASSERT_EQ(3u, ev.size());
  EXPECT_EQ(GMR_EVENT_OOM_TRIM, ev[0].kind);
  EXPECT_EQ(2048u, ev[0].value_bytes);
  EXPECT_EQ(GMR_OK, ev[0].status);
  EXPECT_EQ(0u, ev[0].attempt);
  EXPECT_EQ(GMR_EVENT_OOM_RETRY, ev[1].kind);
  EXPECT_EQ(1u, ev[1].attempt);
  EXPECT_STREQ("trim_retry", ev[1].policy_name);
  EXPECT_EQ(GMR_EVENT_OOM_GAVE_UP, ev[2].kind);  // the cap of 1 retry was reached
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, ev[2].status);
  EXPECT_EQ(100u, ev[2].bytes);
  gmr_oom_counts counts = GMR_OOM_COUNTS_INIT;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_get_counts(a, &counts));
  EXPECT_EQ(2u, counts.failure_count);
  EXPECT_EQ(1u, counts.retry_count);
  EXPECT_EQ(1u, counts.trim_count);
  EXPECT_EQ(2048u, counts.trimmed_bytes);
  EXPECT_EQ(1u, counts.gave_up_count);
  EXPECT_EQ(GMR_OK, Drop(r));
}

TEST_F(Events, WaitAboveALimitBlocksUntilAFreeMakesRoom) {
  gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  c.limit_bytes = 1024;
  gmr_limiting_adaptor *lim = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(up_, &c, &lim));
  gmr_oom_policy p = gmr_test::WaitPolicy(uint64_t{10} * 1000000000u, 4);
  gmr_oom_adaptor *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(gmr_limiting_adaptor_as_resource(lim), &p, &a));
  gmr_resource *r = Watch(gmr_oom_adaptor_as_resource(a));
  void *held = nullptr, *got = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1024, 0, nullptr, &held));
  EXPECT_EQ(1u, gmr_oom_adaptor_get_live_count(a));
  gmr_status st = GMR_ERR_INTERNAL;
  std::thread waiter([&] { st = gmr_resource_allocate(r, 512, 0, nullptr, &got); });
  // Wait until the waiter has been refused by the limit at least once.
  gmr_limiting_adaptor_stats ls = GMR_LIMITING_ADAPTOR_STATS_INIT;
  do {
    std::this_thread::yield();
    ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim, &ls));
  } while (ls.refused_count == 0);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, held, 1024, 0, nullptr));
  waiter.join();
  ASSERT_EQ(GMR_OK, st);
  EXPECT_EQ(512u, gmr_limiting_adaptor_get_used_bytes(lim));
  bool saw_wait = false;
  for (const auto &e : rec_.Take()) saw_wait |= e.kind == GMR_EVENT_OOM_WAIT && e.value_bytes == 1;
  EXPECT_TRUE(saw_wait);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, got, 512, 0, nullptr));
  EXPECT_EQ(GMR_OK, Drop(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_limiting_adaptor_as_resource(lim)));
}

TEST_F(Events, FailPolicyAdaptorJustForwards) {
  gmr_oom_adaptor *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(up_, nullptr, &a));
  gmr_resource *r = Watch(gmr_oom_adaptor_as_resource(a));
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *q = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(r, 100, 0, nullptr, &q));
  EXPECT_TRUE(rec_.Take().empty());
  EXPECT_EQ(1u, gmr_mock_resource_called_allocate(mock_));
  EXPECT_EQ(GMR_OK, Drop(r));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_adaptor_create(nullptr, nullptr, &a));
  EXPECT_EQ(nullptr, a);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_adaptor_get_counts(nullptr, nullptr));
}

// A policy from user code that uses the services directly.
gmr_oom_action TrimTwiceThenRetry(const gmr_oom_policy *policy, const gmr_failure *f,
                                  const gmr_oom_services *services) {
  (void)f;
  int *calls = static_cast<int *>(policy->ctx);
  (*calls)++;
  size_t released = 0;
  EXPECT_EQ(GMR_OK, services->trim(services, &released));
  EXPECT_EQ(GMR_OK, services->trim(services, &released));
  int freed = 1;
  EXPECT_EQ(GMR_OK, services->wait_for_free(services, 0, &freed));  // zero timeout: no wait
  EXPECT_EQ(0, freed);
  EXPECT_EQ(GMR_OOM_SERVICES_VERSION, services->version);
  return GMR_OOM_ACTION_RETRY;
}

TEST_F(Events, UserPolicyUsesTheServices) {
  int calls = 0;
  gmr_oom_policy p = gmr_test::OomPolicy("fail");
  p.name = "mine";
  p.decide = TrimTwiceThenRetry;
  p.ctx = &calls;
  p.max_attempts = 2;
  gmr_oom_adaptor *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(up_, &p, &a));
  gmr_resource *r = Watch(gmr_oom_adaptor_as_resource(a));
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_LIMIT_EXCEEDED, 0);
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 0, nullptr, &q));
  EXPECT_EQ(1, calls);
  EXPECT_EQ(2u, gmr_mock_resource_called_trim(mock_));
  gmr_oom_counts counts = GMR_OOM_COUNTS_INIT;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_get_counts(a, &counts));
  EXPECT_EQ(1u, counts.wait_count);
  EXPECT_EQ(1u, counts.wait_timeout_count);
  EXPECT_EQ(1u, counts.recovered_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, Drop(r));
}

TEST(PolicyRegistry, NamesAreBuiltInOrRegistered) {
  gmr_oom_policy o;
  ASSERT_EQ(GMR_OK, gmr_oom_policy_from_name("trim_retry", &o));
  EXPECT_STREQ("trim_retry", o.name);
  EXPECT_EQ(GMR_OOM_DEFAULT_ATTEMPTS, o.max_attempts);
  ASSERT_EQ(GMR_OK, gmr_oom_policy_from_name("wait", &o));
  EXPECT_EQ(GMR_OOM_DEFAULT_WAIT_TIMEOUT_NS, o.wait_timeout_ns);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_policy_from_name("spill", &o));

  static int released = 0;
  gmr_oom_policy mine = gmr_test::RetryPolicy(nullptr, nullptr, 7);
  mine.name = "spill";
  mine.release = [](void *) { released++; };
  ASSERT_EQ(GMR_OK, gmr_oom_policy_register(nullptr, "spill", &mine));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_policy_register(nullptr, "spill", &mine));  // taken
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_oom_policy_register(nullptr, "wait", &mine));  // built in
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_oom_policy_register(nullptr, "9lives", &mine));  // bad name
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_oom_policy_register(nullptr, "a_name_that_is_longer_than_31_chars", &mine));
  ASSERT_EQ(GMR_OK, gmr_oom_policy_from_name("spill", &o));
  EXPECT_EQ(7u, o.max_attempts);
  EXPECT_EQ(nullptr, o.release);  // the registrant keeps its context
  EXPECT_EQ(GMR_OK, gmr_oom_policy_unregister(nullptr, "spill"));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_policy_unregister(nullptr, "spill"));
  EXPECT_EQ(0, released);

  gmr_limit_policy l;
  ASSERT_EQ(GMR_OK, gmr_limit_policy_from_name("increase", &l));
  EXPECT_DOUBLE_EQ(1.25, l.padding_factor);
  EXPECT_EQ(0u, l.cap_bytes);
  gmr_limit_policy soft = gmr_test::LimitPolicy("ignore");
  ASSERT_EQ(GMR_OK, gmr_limit_policy_register(nullptr, "soft", &soft));
  ASSERT_EQ(GMR_OK, gmr_limit_policy_from_name("soft", &l));
  EXPECT_STREQ("ignore", l.name);
  EXPECT_EQ(GMR_OK, gmr_limit_policy_unregister(nullptr, "soft"));
  gmr_limit_policy bad = gmr_test::IncreasePolicy("increase", 2.0, 0);
  bad.padding_factor = 0.5;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limit_policy_check(&bad));
}

TEST(EventHookThreads, ListenersSeeEveryEventFromManyThreads) {
  Recorder rec;
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  c.limit_bytes = 0;  // everything is refused
  gmr_limiting_adaptor *lim = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(gmr_host_resource_as_resource(host), &c, &lim));
  ASSERT_EQ(GMR_OK, gmr_resource_add_event_listener(gmr_limiting_adaptor_as_resource(lim),
                                                    Recorder::Listen, &rec));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        void *p = nullptr;
        EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED,
                  gmr_resource_allocate(gmr_limiting_adaptor_as_resource(lim), 8, 0, nullptr, &p));
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(GMR_OK, gmr_resource_remove_event_listener(gmr_limiting_adaptor_as_resource(lim),
                                                       Recorder::Listen, &rec));
  EXPECT_EQ(2000u, rec.Take().size());
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_limiting_adaptor_as_resource(lim)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_host_resource_as_resource(host)));
}

}  // namespace
