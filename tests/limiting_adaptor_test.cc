// limiting_adaptor: charges, every limit policy, per-stream limits, run-time
// limits, exact accounting on every failing path, and threads. Its OOM
// policy (limiting(on_oom=...), an OOM layer above it): limiting_on_oom_test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gmr/events.h"
#include "gmr/host_resource.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/policy.h"
#include "gmr/tracking_adaptor.h"
#include "tests/support/limiting_fixture.h"
#include "tests/support/mock_resource.h"
#include "tests/support/policies.h"

namespace {

using Limiting = gmr_test::LimitingTest;

gmr_stream S(uintptr_t v) { return reinterpret_cast<gmr_stream>(v); }

TEST_F(Limiting, ChargesSizeRoundedTo256AndPassesExactSizeUpstream) {
  Make(Config(1024));
  EXPECT_STREQ("limiting_adaptor", gmr_resource_get_type_name(r()));
  EXPECT_EQ(lim_, gmr_limiting_adaptor_from_resource(r()));
  EXPECT_EQ(nullptr, gmr_limiting_adaptor_from_resource(up_));
  EXPECT_EQ(up_, gmr_resource_get_upstream(r()));
  void *p[4];
  for (auto &q : p) ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1, 0, nullptr, &q));
  EXPECT_EQ(1024u, gmr_limiting_adaptor_get_used_bytes(lim_));
  EXPECT_EQ(4u, gmr_mock_resource_live_bytes(mock_));  // exact bytes upstream

  void *extra = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate_ex(r(), 1, 0, nullptr, &extra, &f));
  EXPECT_EQ(nullptr, extra);
  EXPECT_EQ(4u, gmr_mock_resource_called_allocate(mock_));  // never reached upstream
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, f.status);
  EXPECT_EQ(r(), f.where);
  EXPECT_EQ(1u, f.bytes);
  EXPECT_STREQ(
      "limiting_adaptor: 256 bytes (charged) would take 1024 outstanding bytes past the limit of "
      "1024 bytes (policy fail)",
      f.message);

  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), p[0], 1, 0, nullptr));
  EXPECT_EQ(768u, gmr_limiting_adaptor_get_used_bytes(lim_));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 256, 0, nullptr, &p[0]));  // exactly fits
  for (auto q : p)
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), q, q == p[0] ? 256 : 1, 0, nullptr));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(0u, s.used_bytes);
  EXPECT_EQ(1024u, s.peak_used_bytes);
  EXPECT_EQ(5u, s.allocation_count);
  EXPECT_EQ(5u, s.deallocation_count);
  EXPECT_EQ(1u, s.refused_count);
}

TEST_F(Limiting, ChargeAlignmentIsConfigurable) {
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  c.charge_alignment = 1;
  Make(c);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1000, 0, nullptr, &p));
  EXPECT_EQ(1000u, gmr_limiting_adaptor_get_used_bytes(lim_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), p, 1000, 0, nullptr));
}

TEST_F(Limiting, CreateRejectsBadArgumentsAndReleasesCheckedPolicies) {
  static int released;
  released = 0;
  gmr_limiting_adaptor_config c = Config(100);
  c.on_limit.release = [](void *) { released++; };
  gmr_limiting_adaptor *a = reinterpret_cast<gmr_limiting_adaptor *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limiting_adaptor_create(nullptr, &c, &a));
  EXPECT_EQ(nullptr, a);
  EXPECT_EQ(1, released);
  c.charge_alignment = 100;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limiting_adaptor_create(up_, &c, &a));
  EXPECT_EQ(2, released);
  c.charge_alignment = 256;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limiting_adaptor_create(up_, &c, nullptr));
  EXPECT_EQ(3, released);
  // An invalid policy is refused before anything is taken over.
  c.on_limit.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limiting_adaptor_create(up_, &c, &a));
  EXPECT_EQ(3, released);
  c.on_limit.version = GMR_LIMIT_POLICY_VERSION;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(up_, &c, &a));
  EXPECT_EQ(3, released);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_limiting_adaptor_as_resource(a)));
  EXPECT_EQ(4, released);
}

TEST_F(Limiting, UpstreamFailureGivesTheReservationBack) {
  Make(Config(4096));
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r(), 4096, 0, nullptr, &p, &f));
  EXPECT_EQ(up_, f.where);  // the record names the resource that failed
  EXPECT_EQ(2, f.cuda_error);
  EXPECT_EQ(0u, f.attempt);
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(lim_));
  ASSERT_EQ(GMR_OK,
            gmr_resource_allocate(r(), 4096, 0, nullptr, &p));  // the whole limit is free again
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), p, 4096, 0, nullptr));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(1u, s.upstream_failure_count);
  EXPECT_EQ(1u, s.oom.failure_count);
  EXPECT_EQ(0u, s.oom.gave_up_count);  // `fail` gives nothing up: it never tried
}

// Fail the k-th upstream allocation for every k of a fixed workload: after
// each step the adaptor's count equals the charges of what is live.
TEST_F(Limiting, ExactAccountingWithAFailureAtEveryUpstreamCall) {
  Make(Config(64 * 1024));
  const size_t sizes[] = {1, 255, 256, 257, 4000, 8192, 100, 20000, 3, 30000};
  for (unsigned long k = 0; k < 12; ++k) {
    gmr_mock_resource_try_fail(mock_, k, 1, GMR_ERR_OUT_OF_MEMORY, 2);
    std::vector<std::pair<void *, size_t>> live;
    size_t charged = 0, failures = 0;
    for (size_t i = 0; i < 10; ++i) {
      void *p = nullptr;
      gmr_status st = gmr_resource_allocate(r(), sizes[i], 0, nullptr, &p);
      if (st == GMR_OK) {
        live.emplace_back(p, sizes[i]);
        charged += (sizes[i] + 255) / 256 * 256;
      } else {
        failures++;
        EXPECT_TRUE(st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED);
      }
      ASSERT_EQ(charged, gmr_limiting_adaptor_get_used_bytes(lim_)) << "k=" << k << " i=" << i;
      if (i % 3 == 2 && !live.empty()) {
        EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), live.front().first, live.front().second, 0,
                                                  nullptr));
        charged -= (live.front().second + 255) / 256 * 256;
        live.erase(live.begin());
        ASSERT_EQ(charged, gmr_limiting_adaptor_get_used_bytes(lim_));
      }
    }
    EXPECT_EQ(k < 10 ? 1u : 0u, failures) << "k=" << k;
    for (auto &b : live)
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), b.first, b.second, 0, nullptr));
    EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(lim_));
    EXPECT_EQ(0u, gmr_mock_resource_live_bytes(mock_));
  }
}

TEST_F(Limiting, IgnorePolicyAllowsAndCountsTheOverage) {
  gmr_limiting_adaptor_config c = Config(512);
  c.on_limit = gmr_test::LimitPolicy("ignore");
  Make(c);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 256, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1024, 0, nullptr, &b));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(1280u, s.used_bytes);
  EXPECT_EQ(1u, s.overage_count);
  EXPECT_EQ(768u, s.max_overage_bytes);
  EXPECT_EQ(0u, s.refused_count);
  EXPECT_EQ(512u, s.limit_bytes);  // the limit itself did not move
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 256, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 1024, 0, nullptr));
}

// gmr's first `increase` formula, kept under the name increase_total.
TEST_F(Limiting, IncreaseTotalRaisesToThePaddedTotalUpToTheCap) {
  gmr_limiting_adaptor_config c = Config(1000);
  c.on_limit = gmr_test::IncreasePolicy("increase_total", 1.25, 3000);
  Make(c);
  void *a = nullptr, *b = nullptr, *d = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 2048, 0, nullptr, &a));
  EXPECT_EQ(2560u, gmr_limiting_adaptor_get_limit(lim_));  // ceil(2048 * 1.25)
  // 2048 + 1024 = 3072 > cap 3000: no raise can admit it.
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r(), 1024, 0, nullptr, &b));
  EXPECT_EQ(2560u, gmr_limiting_adaptor_get_limit(lim_));
  // 2048 + 512 = 2560 fits as is; 2560 + 256 = 2816 -> 3520, capped to 3000.
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 512, 0, nullptr, &b));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 256, 0, nullptr, &d));
  EXPECT_EQ(3000u, gmr_limiting_adaptor_get_limit(lim_));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(2u, s.raise_count);
  EXPECT_EQ(1u, s.refused_count);
  EXPECT_EQ(2816u, s.used_bytes);
  for (auto [p, n] : {std::pair<void *, size_t>{a, 2048}, {b, 512}, {d, 256}}) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), p, n, 0, nullptr));
  }
}

TEST_F(Limiting, IncreaseWithoutCapAlwaysAdmits) {
  gmr_limiting_adaptor_config c = Config(0);
  c.on_limit = gmr_test::IncreasePolicy("increase", 2.0, 0);
  Make(c);
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1 << 20, 0, nullptr, &a));
  EXPECT_EQ(size_t{2} << 20, gmr_limiting_adaptor_get_limit(lim_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 1 << 20, 0, nullptr));
}

struct Seen {
  std::vector<gmr_limit_request> requests;
  gmr_limit_action answer = GMR_LIMIT_ACTION_FAIL;
  size_t new_limit = 0;
};

gmr_limit_action UserDecide(const gmr_limit_policy *policy, const gmr_limit_request *rq,
                            size_t *new_limit) {
  Seen *seen = static_cast<Seen *>(policy->ctx);
  seen->requests.push_back(*rq);
  *new_limit = seen->new_limit;
  return seen->answer;
}

TEST_F(Limiting, UserPolicyIsAskedWithTheRequest) {
  Seen seen;
  gmr_limiting_adaptor_config c = Config(1024);
  c.on_limit.name = "mine";
  c.on_limit.decide = UserDecide;
  c.on_limit.ctx = &seen;
  Make(c);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1000, 0, S(7), &a));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r(), 100, 0, S(7), &b));
  ASSERT_EQ(1u, seen.requests.size());
  EXPECT_EQ(256u, seen.requests[0].charge_bytes);
  EXPECT_EQ(1024u, seen.requests[0].used_bytes);
  EXPECT_EQ(1024u, seen.requests[0].limit_bytes);
  EXPECT_EQ(S(7), seen.requests[0].stream);
  EXPECT_EQ(0, seen.requests[0].scope_stream);
  // A raise that does not admit the request counts as a refusal.
  seen.answer = GMR_LIMIT_ACTION_RAISE;
  seen.new_limit = 1100;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r(), 100, 0, S(7), &b));
  EXPECT_EQ(1024u, gmr_limiting_adaptor_get_limit(lim_));
  seen.new_limit = 1280;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 100, 0, S(7), &b));
  EXPECT_EQ(1280u, gmr_limiting_adaptor_get_limit(lim_));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 1000, 0, S(7)));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 100, 0, S(7)));
}

TEST_F(Limiting, PolicyThatKeepsRaisingTooLittleIsCutOff) {
  Seen seen;
  seen.answer = GMR_LIMIT_ACTION_RAISE;
  gmr_limiting_adaptor_config c = Config(256);
  c.on_limit.name = "stingy";
  c.on_limit.decide = [](const gmr_limit_policy *, const gmr_limit_request *rq, size_t *nl) {
    *nl = rq->limit_bytes + 1;  // never enough for a 256-byte charge... but a valid raise
    return GMR_LIMIT_ACTION_RAISE;
  };
  Make(c);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 256, 0, nullptr, &a));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r(), 256, 0, nullptr, &b));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 256, 0, nullptr));
}

TEST_F(Limiting, LimitCanBeReadAndChangedAtRunTime) {
  Make(Config(GMR_LIMIT_NONE));
  EXPECT_EQ(GMR_LIMIT_NONE, gmr_limiting_adaptor_get_limit(lim_));
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 4096, 0, nullptr, &a));
  EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_set_limit(lim_, 1024));  // below what is in use
  EXPECT_EQ(1024u, gmr_limiting_adaptor_get_limit(lim_));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r(), 1, 0, nullptr, &b));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 4096, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1024, 0, nullptr, &b));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 1024, 0, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limiting_adaptor_set_limit(nullptr, 1));
}

// With a limit the adaptor keeps exact shared counters and sees a free of
// more bytes than are outstanding (without one it only counts, per thread,
// and trusts the size: see the next test). Which bad free it is the
// upstream says (tests/limiting_bad_free_test.cc); one that keeps no books,
// as this mock, may take the memory back: then no charge comes off, since
// none is known to be that memory's.
TEST_F(Limiting, FreeOfMoreBytesThanOutstandingGoesUpstreamWithTheBooksUntouched) {
  Make(Config(size_t{1} << 30));
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 256, 0, nullptr, &a));
  void *below = nullptr;  // never charged here
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(up_, 4096, 0, nullptr, &below));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), below, 4096, 0, nullptr));
  EXPECT_EQ(1u, gmr_mock_resource_called_deallocate(mock_)) << "the upstream judged it";
  EXPECT_EQ(256u, gmr_limiting_adaptor_get_used_bytes(lim_)) << "a's charge stays a's";
  EXPECT_EQ(1u, Stats().bad_free_count);
  EXPECT_EQ(0u, Stats().deallocation_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 256, 0, nullptr));
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(lim_));
}

TEST_F(Limiting, DestroyIsBusyWhileBytesAreOutstanding) {
  Make(Config(GMR_LIMIT_NONE));
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 10, 0, nullptr, &a));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r()));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 10, 0, nullptr));
}

TEST_F(Limiting, StatsFillOnlyWhatTheCallersVersionHasRoomFor) {
  Make(Config(777));
  struct Old {
    size_t size;
    uint32_t version;
    size_t limit_bytes;
  };
  struct Padded {
    Old old;
    size_t canary;
  } out;
  out.old.size = sizeof(Old);
  out.old.version = 1;
  out.canary = 0xdeadbeef;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(
                        lim_, reinterpret_cast<gmr_limiting_adaptor_stats *>(&out)));
  EXPECT_EQ(777u, out.old.limit_bytes);
  EXPECT_EQ(sizeof(Old), out.old.size);
  EXPECT_EQ(0xdeadbeefu, out.canary);
  gmr_limiting_adaptor_stats bad = GMR_LIMITING_ADAPTOR_STATS_INIT;
  bad.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limiting_adaptor_get_stats(lim_, &bad));
  bad.version = 1;
  bad.size = 4;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limiting_adaptor_get_stats(lim_, &bad));
}

// ---- per-stream limits ------------------------------------------------------

TEST_F(Limiting, PerStreamLimitsAreEnforcedPerStreamAndFreesGoBackToTheAllocatingStream) {
  gmr_limiting_adaptor_config c = Config(4096);
  c.per_stream = true;
  c.stream_limit_bytes = 1024;
  c.max_streams = 8;
  Make(c);
  void *a1 = nullptr, *a2 = nullptr, *b1 = nullptr, *x = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 1024, 0, S(1), &a1));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED,
            gmr_resource_allocate(r(), 1, 0, S(1), &x));                 // stream 1 is full
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 512, 0, S(2), &b1));      // stream 2 is not
  EXPECT_EQ(1536u, gmr_limiting_adaptor_get_used_bytes(lim_));           // refusal gave back global
  size_t used = 0, limit = 0;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(lim_, S(1), &used, &limit));
  EXPECT_EQ(1024u, used);
  EXPECT_EQ(1024u, limit);
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(lim_, S(99), &used, &limit));
  EXPECT_EQ(0u, used);  // never seen: zero and the default limit
  EXPECT_EQ(1024u, limit);

  // Freed on stream 2, charged back to stream 1, where it was allocated.
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a1, 1024, 0, S(2)));
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(lim_, S(1), &used, nullptr));
  EXPECT_EQ(0u, used);
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(lim_, S(2), &used, nullptr));
  EXPECT_EQ(512u, used);

  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_set_stream_limit(lim_, S(1), 2048));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 2048, 0, S(1), &a2));
  // An unknown pointer is caught by the pointer table of per-stream mode.
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r(), &local, 256, 0, S(1)));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a2, 2048, 0, S(1)));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), b1, 512, 0, S(2)));
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(lim_));
  gmr_limiting_adaptor_stats s = Stats();
  EXPECT_EQ(1u, s.refused_count);
  EXPECT_EQ(1u, s.bad_free_count);
}

TEST_F(Limiting, PerStreamRefusalGoesThroughTheLimitPolicyWithStreamScope) {
  Seen seen;
  seen.answer = GMR_LIMIT_ACTION_ALLOW;
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  c.per_stream = true;
  c.stream_limit_bytes = 256;
  c.on_limit.name = "mine";
  c.on_limit.decide = UserDecide;
  c.on_limit.ctx = &seen;
  Make(c);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 256, 0, S(5), &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 256, 0, S(5), &b));
  ASSERT_EQ(1u, seen.requests.size());
  EXPECT_EQ(1, seen.requests[0].scope_stream);
  EXPECT_EQ(256u, seen.requests[0].limit_bytes);
  EXPECT_EQ(1u, Stats().overage_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), a, 256, 0, S(5)));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), b, 256, 0, S(5)));
}

TEST_F(Limiting, StreamTableFullSharesOverflowCountersAndRefusesOwnLimits) {
  gmr_limiting_adaptor_config c = Config(GMR_LIMIT_NONE);
  c.per_stream = true;
  c.max_streams = 8;  // capacity 8
  Make(c);
  for (uintptr_t s = 1; s <= 8; ++s) {
    EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_set_stream_limit(lim_, S(s), 1 << 20));
  }
  EXPECT_EQ(GMR_ERR_BUSY, gmr_limiting_adaptor_set_stream_limit(lim_, S(9), 1 << 20));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r(), 512, 0, S(9), &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r(), p, 512, 0, S(9)));
}

TEST_F(Limiting, StreamFunctionsNeedPerStreamMode) {
  Make(Config(GMR_LIMIT_NONE));
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_limiting_adaptor_set_stream_limit(lim_, nullptr, 1));
  EXPECT_EQ(GMR_ERR_UNSUPPORTED,
            gmr_limiting_adaptor_get_stream_usage(lim_, nullptr, nullptr, nullptr));
}

// ---- threads ------------------------------------------------------------------

TEST(LimitingThreads, ConcurrentRequestsNeverJointlyPassTheLimitAndSumsAreExact) {
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  // Small enough that one thread alone reaches it (up to 12 blocks of up to
  // 3,000 bytes): on a machine with few cores the threads may not overlap.
  c.limit_bytes = 16 * 1024;
  c.per_stream = true;
  gmr_limiting_adaptor *lim = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(gmr_host_resource_as_resource(host), &c, &lim));
  gmr_tracking_adaptor *trk = nullptr;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_create(gmr_limiting_adaptor_as_resource(lim), nullptr,
                                                &trk));
  gmr_resource *top = gmr_tracking_adaptor_as_resource(trk);

  const int kThreads = 8, kOps = 3000;
  std::atomic<uint64_t> ok_count{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<void *, size_t>> mine;
      gmr_stream stream = S(static_cast<uintptr_t>(t % 4 + 1));
      for (int i = 0; i < kOps; ++i) {
        if (mine.size() < 12 && rng() % 3 != 0) {
          size_t n = 1 + rng() % 3000;
          void *p = nullptr;
          gmr_status st = gmr_resource_allocate(top, n, 0, stream, &p);
          if (st == GMR_OK) {
            mine.emplace_back(p, n);
            ok_count++;
          } else {
            EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, st);
            refused++;
          }
        } else if (!mine.empty()) {
          auto b = mine.back();
          mine.pop_back();
          EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, b.first, b.second, 0, stream));
        }
      }
      for (auto &b : mine)
        EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, b.first, b.second, 0, stream));
    });
  }
  for (auto &th : threads) th.join();
  gmr_limiting_adaptor_stats s = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim, &s));
  EXPECT_EQ(0u, s.used_bytes);
  EXPECT_LE(s.peak_used_bytes, c.limit_bytes);
  EXPECT_GT(refused.load(), 0u);  // the limit was reached
  EXPECT_EQ(ok_count.load(), s.allocation_count);
  EXPECT_EQ(ok_count.load(), s.deallocation_count);
  EXPECT_EQ(refused.load(), s.refused_count);
  gmr_tracking_adaptor_stats ts = GMR_TRACKING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(trk, &ts));
  EXPECT_EQ(0, ts.bytes.current);
  EXPECT_EQ(static_cast<int64_t>(ok_count.load()), ts.allocations.total);
  EXPECT_EQ(static_cast<int64_t>(refused.load()), static_cast<int64_t>(ts.upstream_failure_count));
  for (uintptr_t st = 1; st <= 4; ++st) {
    size_t used = 1;
    ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(lim, S(st), &used, nullptr));
    EXPECT_EQ(0u, used);
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_limiting_adaptor_as_resource(lim)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_host_resource_as_resource(host)));
}

}  // namespace
