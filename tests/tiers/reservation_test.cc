// Reservations enforced on their bound streams through the limiting adaptor's
// per-stream limits, under each limit policy (fail, ignore, increase, a
// reservation's own), with the space's OOM policy; untracked and reserved
// bytes reported apart; spaces that require a reservation; binding rules;
// grow and shrink moving the stream's limit; HOST spaces charging whole
// blocks.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "gmr/device.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/policy.h"
#include "tests/support/mock_resource.h"
#include "tests/support/policies.h"
#include "tests/tiers/tier_fixture.h"

namespace {

using gmr_test::GpuConfig;
using gmr_test::HostConfig;
using gmr_test::Id;
using gmr_test::KiB;
using gmr_test::MiB;

class Reservations : public gmr_test::StreamsTierTest {
 protected:
  // Real simulated streams: the async CUDA resource checks them.
  static constexpr int kStreams = 10;
  Reservations() : StreamsTierTest(kStreams) {}
  // Stream k (1-based, as the tests name them).
  gmr_stream S(uintptr_t k) { return streams_[k - 1]; }
  // A GPU space of 1 MiB whose reservations use `policy`.
  void MakeGpu(gmr_limit_policy policy, bool require = false, size_t capacity = 1 * MiB) {
    gmr_memory_space_config c = GpuConfig(0, capacity);
    c.on_limit = policy;
    c.require_reservation = require;
    Make({c});
  }
};

TEST_F(Reservations, FailPolicyRefusesPastTheReservation) {
  MakeGpu(gmr_test::LimitPolicy("fail"));
  gmr_reservation_id r = Bound(64 * KiB, S(1));
  void *a = Alloc(48 * KiB, S(1));
  void *b = Alloc(16 * KiB, S(1));
  EXPECT_EQ(64 * KiB, Info(r).allocated_bytes);
  gmr_failure f = GMR_FAILURE_INIT;
  void *c = nullptr;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate_ex(Gpu(), 256, 0, S(1), &c, &f));
  EXPECT_EQ(nullptr, c);
  EXPECT_NE(nullptr, std::strstr(f.message, "stream's limit of 65536")) << f.message;
  EXPECT_EQ(1u, Info(r).refusal_count);
  EXPECT_EQ(1u, SpaceStats(GMR_TIER_GPU, 0).reservation_refusal_count);
  // Other streams are not bound: untracked, not limited by this reservation.
  void *u = Alloc(128 * KiB, S(2));
  gmr_memory_space_stats st = SpaceStats(GMR_TIER_GPU, 0);
  EXPECT_EQ(192 * KiB, st.allocated_bytes);
  EXPECT_EQ(64 * KiB, st.reserved_allocated_bytes);
  EXPECT_EQ(128 * KiB, st.untracked_bytes);
  EXPECT_EQ(64 * KiB, st.reserved_bytes);
  EXPECT_EQ(192 * KiB, st.used_bytes);
  EXPECT_EQ(1 * MiB - 192 * KiB, st.available_bytes);
  Free(a, 48 * KiB, S(1));
  Free(b, 16 * KiB, S(1));
  Free(u, 128 * KiB, S(2));
  Release(r);
}

TEST_F(Reservations, IgnorePolicyAllowsAndCountsTheOverage) {
  MakeGpu(gmr_test::LimitPolicy("ignore"));
  gmr_reservation_id r = Bound(64 * KiB, S(1));
  void *a = Alloc(100 * KiB, S(1));
  gmr_reservation_info i = Info(r);
  EXPECT_EQ(64 * KiB, i.bytes);  // the reservation does not grow
  EXPECT_EQ(100 * KiB, i.allocated_bytes);
  EXPECT_EQ(1u, i.overage_count);
  gmr_memory_space_stats st = SpaceStats(GMR_TIER_GPU, 0);
  EXPECT_EQ(100 * KiB, st.used_bytes);  // what passed the reservation counts too
  EXPECT_EQ(1u, st.reservation_overage_count);
  // Shrinking below what the stream holds is refused, nothing changed.
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_reservation_shrink(m_, r, 32 * KiB, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "holds 102400 bytes")) << f.message;
  EXPECT_EQ(64 * KiB, Info(r).bytes);
  Free(a, 100 * KiB, S(1));
  Release(r);
}

TEST_F(Reservations, IncreasePolicyGrowsTheReservationWhileTheSpaceHasRoom) {
  gmr_limit_policy increase = gmr_test::IncreasePolicy("increase", 1.25, 0);
  MakeGpu(increase);
  gmr_reservation_id r = Bound(64 * KiB, S(1));
  void *a = Alloc(64 * KiB, S(1));
  void *b = Alloc(64 * KiB, S(1));  // 128 KiB needed: raised by the policy
  gmr_reservation_info i = Info(r);
  // The reservation takes the size the policy asks for, whatever its formula
  // (gmr/policy.h): the policy judges the reservation alone, 64 KiB used of
  // 64 KiB and 64 KiB more asked.
  gmr_limit_request asked = {64 * KiB, 64 * KiB, 64 * KiB, S(1), 1};
  size_t wanted = 0;
  ASSERT_EQ(GMR_LIMIT_ACTION_RAISE, increase.decide(&increase, &asked, &wanted));
  EXPECT_EQ(wanted, i.bytes);
  EXPECT_GE(i.bytes, 128 * KiB);
  EXPECT_EQ(1u, i.raise_count);
  EXPECT_EQ(i.bytes, SpaceStats(GMR_TIER_GPU, 0).reserved_bytes);
  size_t limit = 0;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(
                        gmr_memory_space_get_limiting_adaptor(Space(GMR_TIER_GPU, 0)), S(1),
                        nullptr, &limit));
  EXPECT_EQ(i.bytes, limit);  // the stream's limit is the reservation
  // Another reservation takes the rest of the space: no room to grow now.
  gmr_reservation_id other = ReserveIn(GMR_TIER_GPU, 0, 1 * MiB - i.bytes);
  void *c = Alloc(i.bytes, S(1), GMR_ERR_LIMIT_EXCEEDED);
  EXPECT_EQ(nullptr, c);
  EXPECT_EQ(i.bytes, Info(r).bytes);
  EXPECT_EQ(1u, Info(r).refusal_count);
  Free(a, 64 * KiB, S(1));
  Free(b, 64 * KiB, S(1));
  Release(other);
  Release(r);
}

TEST_F(Reservations, ABindingMayCarryItsOwnPolicy) {
  MakeGpu(gmr_test::LimitPolicy("fail"));
  gmr_limit_policy ignore = gmr_test::LimitPolicy("ignore");
  gmr_reservation_id lenient = Bound(16 * KiB, S(1), &ignore);
  gmr_reservation_id strict = Bound(16 * KiB, S(2));
  void *a = Alloc(32 * KiB, S(1));
  Alloc(32 * KiB, S(2), GMR_ERR_LIMIT_EXCEEDED);
  Free(a, 32 * KiB, S(1));
  gmr_limit_policy broken = gmr_test::LimitPolicy("fail");
  broken.name = nullptr;
  gmr_reservation_id r = ReserveIn(GMR_TIER_GPU, 0, 1 * KiB);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_bind_stream(m_, r, S(3), &broken, nullptr));
  EXPECT_FALSE(Info(r).bound);
  Release(r);
  Release(lenient);
  Release(strict);
}

TEST_F(Reservations, GrowAndShrinkMoveTheStreamsLimit) {
  MakeGpu(gmr_test::LimitPolicy("fail"));
  gmr_reservation_id r = Bound(32 * KiB, S(1));
  void *a = Alloc(32 * KiB, S(1));
  Alloc(16 * KiB, S(1), GMR_ERR_LIMIT_EXCEEDED);
  ASSERT_EQ(GMR_OK, gmr_reservation_grow(m_, r, 16 * KiB, nullptr));
  void *b = Alloc(16 * KiB, S(1));
  Free(b, 16 * KiB, S(1));
  ASSERT_EQ(GMR_OK, gmr_reservation_shrink(m_, r, 32 * KiB, nullptr));
  Alloc(256, S(1), GMR_ERR_LIMIT_EXCEEDED);
  Free(a, 32 * KiB, S(1));
  Release(r);
}

TEST_F(Reservations, ReleasedAllocationsBecomeUntrackedAndTheStreamCanBeBoundAgain) {
  MakeGpu(gmr_test::LimitPolicy("fail"));
  gmr_reservation_id r = Bound(64 * KiB, S(1));
  void *a = Alloc(40 * KiB, S(1));
  Release(r);  // the allocation outlives its reservation
  gmr_memory_space_stats st = SpaceStats(GMR_TIER_GPU, 0);
  EXPECT_EQ(0u, st.reserved_bytes);
  EXPECT_EQ(40 * KiB, st.untracked_bytes);
  EXPECT_EQ(0u, st.bound_stream_count);
  // The stream is unbound: no limit on it now.
  void *b = Alloc(512 * KiB, S(1));
  Free(b, 512 * KiB, S(1));
  // Bound again while it still holds `a`: `a` stays untracked (the baseline).
  gmr_reservation_id again = Bound(64 * KiB, S(1));
  EXPECT_EQ(0u, Info(again).allocated_bytes);
  void *c = Alloc(64 * KiB, S(1));  // the whole new reservation
  EXPECT_EQ(64 * KiB, Info(again).allocated_bytes);
  Alloc(256, S(1), GMR_ERR_LIMIT_EXCEEDED);
  st = SpaceStats(GMR_TIER_GPU, 0);
  EXPECT_EQ(40 * KiB, st.untracked_bytes);
  EXPECT_EQ(64 * KiB, st.reserved_allocated_bytes);
  EXPECT_EQ(104 * KiB, st.used_bytes);
  // Freeing the old allocation gives the new reservation no extra room.
  Free(a, 40 * KiB, S(1));
  EXPECT_EQ(64 * KiB, Info(again).allocated_bytes);
  Alloc(256, S(1), GMR_ERR_LIMIT_EXCEEDED);
  EXPECT_EQ(0u, SpaceStats(GMR_TIER_GPU, 0).untracked_bytes);
  Free(c, 64 * KiB, S(1));
  // Unbind keeps the reservation; binding it elsewhere works.
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_reservation_unbind_stream(m_, again));
  ASSERT_EQ(GMR_OK, gmr_reservation_unbind_stream(m_, again));  // no-op
  ASSERT_EQ(GMR_OK, gmr_reservation_bind_stream(m_, again, S(2), nullptr, &f)) << f.message;
  EXPECT_EQ(S(2), Info(again).stream);
  Release(again);
}

TEST_F(Reservations, RebindingTheSameReservationStartsAFreshCount) {
  MakeGpu(gmr_test::LimitPolicy("fail"));
  gmr_reservation_id r = Bound(64 * KiB, S(1));
  void *a = Alloc(48 * KiB, S(1));
  ASSERT_EQ(GMR_OK, gmr_reservation_unbind_stream(m_, r));
  ASSERT_EQ(GMR_OK, gmr_reservation_bind_stream(m_, r, S(1), nullptr, nullptr));
  EXPECT_EQ(0u, Info(r).allocated_bytes);  // `a` is from the earlier binding
  void *b = Alloc(64 * KiB, S(1));
  Free(a, 48 * KiB, S(1));  // no room gained for this binding
  Alloc(256, S(1), GMR_ERR_LIMIT_EXCEEDED);
  EXPECT_EQ(64 * KiB, Info(r).allocated_bytes);
  Free(b, 64 * KiB, S(1));
  EXPECT_EQ(0u, Info(r).allocated_bytes);
  Release(r);
}

TEST_F(Reservations, FreesOfUnknownPointersAndMismatchedSizesChangeNothing) {
  MakeGpu(gmr_test::LimitPolicy("fail"));
  gmr_reservation_id r = Bound(64 * KiB, S(1));
  void *a = Alloc(8 * KiB, S(1));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(Gpu(), &local, 256, 0, S(1)));
  // The limiting adaptor refuses a free of more bytes than are outstanding.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(Gpu(), a, 1 * MiB, 0, S(1)));
  EXPECT_EQ(8 * KiB, Info(r).allocated_bytes);
  Free(a, 8 * KiB, S(1));  // still known: the refused free put the books back
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(Gpu(), a, 8 * KiB, 0, S(1)));
  Release(r);
}

TEST_F(Reservations, BindingRules) {
  MakeGpu(gmr_test::LimitPolicy("fail"));
  gmr_reservation_id a = Bound(8 * KiB, S(1));
  gmr_reservation_id b = ReserveIn(GMR_TIER_GPU, 0, 8 * KiB);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_reservation_bind_stream(m_, b, S(1), nullptr, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "already bound to reservation")) << f.message;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_reservation_bind_stream(m_, a, S(2), nullptr, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "unbind it first")) << f.message;
  EXPECT_EQ(1u, SpaceStats(GMR_TIER_GPU, 0).bound_stream_count);
  Release(a);
  Release(b);
}

TEST_F(Reservations, TheSpacesStreamSlotsRunOut) {
  gmr_memory_space_config c = GpuConfig(0, 1 * MiB);
  c.max_stream_slots = 8;
  Make({c});
  std::vector<void *> ps;
  for (uintptr_t s = 1; s <= 8; ++s) ps.push_back(Alloc(256, S(s)));  // 8 streams seen
  gmr_reservation_id r = ReserveIn(GMR_TIER_GPU, 0, 1 * KiB);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_reservation_bind_stream(m_, r, S(10), nullptr, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "max_stream_slots")) << f.message;
  EXPECT_FALSE(Info(r).bound);
  for (uintptr_t s = 1; s <= 8; ++s) Free(ps[s - 1], 256, S(s));
  // A stream seen before still has its slot.
  ASSERT_EQ(GMR_OK, gmr_reservation_bind_stream(m_, r, S(1), nullptr, &f)) << f.message;
  Release(r);
}

TEST_F(Reservations, ASpaceThatRequiresReservationsRefusesOtherStreams) {
  MakeGpu(gmr_test::LimitPolicy("fail"), /*require=*/true);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_NO_RESERVATION, gmr_resource_allocate_ex(Gpu(), 1024, 0, S(1), &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_NE(nullptr, std::strstr(f.message, "requires a reservation")) << f.message;
  EXPECT_EQ(f.where, Gpu());
  EXPECT_EQ(0u, SpaceStats(GMR_TIER_GPU, 0).allocated_bytes);
  gmr_reservation_id r = Bound(4 * KiB, S(1));
  p = Alloc(1024, S(1));
  void *refused = nullptr;
  EXPECT_EQ(GMR_ERR_NO_RESERVATION, gmr_resource_allocate_ex(Gpu(), 1024, 0, S(2), &refused, &f));
  EXPECT_EQ(2u, SpaceStats(GMR_TIER_GPU, 0).no_reservation_count);
  Free(Alloc(0, S(1)), 0, S(1));  // zero bytes: nothing asked, nothing refused
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(Gpu(), 1024, 0, S(1), &q));
  Free(q, 1024, S(1));
  // After the release the stream has no reservation any more.
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(Gpu(), p, 1024, 0, S(1)));
  Release(r);
  EXPECT_EQ(GMR_ERR_NO_RESERVATION, gmr_resource_allocate_ex(Gpu(), 1024, 0, S(1), &q, &f));
}

TEST_F(Reservations, TheCapacityIsAHardLimitForEveryone) {
  MakeGpu(gmr_test::LimitPolicy("ignore"), false, 256 * KiB);
  gmr_reservation_id r = Bound(128 * KiB, S(1));
  void *a = Alloc(200 * KiB, S(1));  // past the reservation (ignored), within capacity
  gmr_failure f = GMR_FAILURE_INIT;
  void *b = nullptr;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate_ex(Gpu(), 100 * KiB, 0, S(2), &b, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "limit of 262144")) << f.message;
  Free(a, 200 * KiB, S(1));
  Release(r);
}

// The space's OOM policy runs when the stack below fails: a mock upstream
// refuses once, the retry policy's callback is asked, the retry succeeds.
std::atomic<int> g_calls{0};
gmr_oom_action Retry(void *, const gmr_failure *) {
  g_calls++;
  return GMR_OOM_ACTION_RETRY;
}

TEST_F(Reservations, TheSpacesOomPolicyRetries) {
  gmr_mock_resource *mock = gmr_mock_resource_create(nullptr);
  ASSERT_NE(nullptr, mock);
  gmr_memory_space_config c = GpuConfig(0, 1 * MiB);
  c.upstream = gmr_mock_resource_as_resource(mock);
  c.on_oom = gmr_test::RetryPolicy(Retry, nullptr, 2);
  Make({c});
  g_calls = 0;
  gmr_reservation_id r = Bound(64 * KiB, S(1));
  gmr_mock_resource_try_fail(mock, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = Alloc(4 * KiB, S(1));
  EXPECT_NE(nullptr, p);
  EXPECT_EQ(1, g_calls.load());
  EXPECT_EQ(4 * KiB, Info(r).allocated_bytes);
  // Failing for good: the charge goes back, the reservation shows nothing more.
  gmr_mock_resource_try_fail(mock, 0, 10, GMR_ERR_OUT_OF_MEMORY, 2);
  Alloc(4 * KiB, S(1), GMR_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(4 * KiB, Info(r).allocated_bytes);
  gmr_mock_resource_try_fail(mock, 0, 0, GMR_OK, 0);
  Free(p, 4 * KiB, S(1));
  Release(r);
  ASSERT_EQ(GMR_OK, gmr_tier_manager_destroy(m_));
  m_ = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock)));
}

TEST_F(Reservations, HostSpacesChargeWholeBlocks) {
  Make({HostConfig(0, 1 * MiB)});
  gmr_reservation_id r = ReserveIn(GMR_TIER_HOST, 0, 128 * KiB);
  ASSERT_EQ(GMR_OK, gmr_reservation_bind_stream(m_, r, S(1), nullptr, nullptr));
  gmr_resource *host = Res(GMR_TIER_HOST, 0);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(host, 100, 0, S(1), &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(host, 100, 0, S(1), &b));
  EXPECT_EQ(128 * KiB, Info(r).allocated_bytes);  // two 64 KiB blocks
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(host, 100, 0, S(1), &c));
  std::memset(a, 1, 100);  // pinned host memory the test can touch
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(host, a, 100, 0, S(1)));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(host, b, 100, 0, S(1)));
  Release(r);
}

}  // namespace
