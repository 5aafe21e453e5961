// memory_space: the downgrade thresholds and their hysteresis, what `used`
// counts (reservations, what passed them, untracked allocations), and bad
// arguments of the queries.
#include <gtest/gtest.h>

#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "tests/tiers/tier_fixture.h"

namespace {

using gmr_test::GpuConfig;
using gmr_test::KiB;
using gmr_test::MiB;

class SpaceTest : public gmr_test::TierTest {
 protected:
  // 1 MiB; trigger at 50 % (512 KiB), stop at 25 % (256 KiB).
  void SetUp() override {
    TierTest::SetUp();
    gmr_memory_space_config c = GpuConfig(0, 1 * MiB);
    c.downgrade_trigger_fraction = 0.5;
    c.downgrade_stop_fraction = 0.25;
    Make({c});
    s_ = Space(GMR_TIER_GPU, 0);
  }
  bool Poll(size_t *amount = nullptr) {
    bool downgrading = false;
    EXPECT_EQ(GMR_OK, gmr_memory_space_poll_downgrade(s_, &downgrading, amount));
    return downgrading;
  }
  gmr_memory_space *s_ = nullptr;
};

TEST_F(SpaceTest, ThresholdsFollowTheFractions) {
  gmr_memory_space_stats st = SpaceStats(GMR_TIER_GPU, 0);
  EXPECT_EQ(1 * MiB, st.capacity_bytes);
  EXPECT_EQ(1 * MiB, st.reservation_limit_bytes);
  EXPECT_EQ(512 * KiB, st.downgrade_trigger_bytes);
  EXPECT_EQ(256 * KiB, st.downgrade_stop_bytes);
}

TEST_F(SpaceTest, HysteresisKeepsDowngradingUntilTheStopLevel) {
  EXPECT_FALSE(gmr_memory_space_should_downgrade(s_));
  EXPECT_TRUE(gmr_memory_space_should_stop_downgrading(s_));
  EXPECT_FALSE(Poll());

  gmr_reservation_id r = ReserveIn(GMR_TIER_GPU, 0, 600 * KiB);  // above the trigger
  EXPECT_TRUE(gmr_memory_space_should_downgrade(s_));
  EXPECT_FALSE(gmr_memory_space_should_stop_downgrading(s_));
  EXPECT_EQ(344 * KiB, gmr_memory_space_get_amount_to_downgrade(s_));
  size_t amount = 0;
  EXPECT_TRUE(Poll(&amount));
  EXPECT_EQ(344 * KiB, amount);

  // Between the thresholds: no new trigger, but a downgrade in progress goes on.
  ASSERT_EQ(GMR_OK, gmr_reservation_shrink(m_, r, 400 * KiB, nullptr));
  EXPECT_FALSE(gmr_memory_space_should_downgrade(s_));
  EXPECT_FALSE(gmr_memory_space_should_stop_downgrading(s_));
  EXPECT_TRUE(Poll(&amount));
  EXPECT_EQ(144 * KiB, amount);

  // At the stop level: done.
  ASSERT_EQ(GMR_OK, gmr_reservation_shrink(m_, r, 256 * KiB, nullptr));
  EXPECT_TRUE(gmr_memory_space_should_stop_downgrading(s_));
  EXPECT_FALSE(Poll(&amount));
  EXPECT_EQ(0u, amount);
  EXPECT_EQ(0u, gmr_memory_space_get_amount_to_downgrade(s_));

  // Back between the thresholds from below: nothing starts.
  ASSERT_EQ(GMR_OK, gmr_reservation_grow(m_, r, 200 * KiB, nullptr));
  EXPECT_FALSE(Poll());
  EXPECT_GT(gmr_memory_space_get_amount_to_downgrade(s_), 0u);  // the plain query is stateless
  // Past the trigger again: a second start.
  ASSERT_EQ(GMR_OK, gmr_reservation_grow(m_, r, 100 * KiB, nullptr));
  EXPECT_TRUE(Poll());
  gmr_memory_space_stats st = SpaceStats(GMR_TIER_GPU, 0);
  EXPECT_EQ(2u, st.downgrade_start_count);
  EXPECT_TRUE(st.downgrading);
  Release(r);
  EXPECT_FALSE(Poll());
}

TEST_F(SpaceTest, UntrackedAllocationsCountTowardsUseAndBlockReservations) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(Res(GMR_TIER_GPU, 0), 700 * KiB, 0, s, &p));
  gmr_memory_space_stats st = SpaceStats(GMR_TIER_GPU, 0);
  EXPECT_EQ(700 * KiB, st.untracked_bytes);
  EXPECT_EQ(700 * KiB, st.used_bytes);
  EXPECT_EQ(324 * KiB, st.available_bytes);
  EXPECT_TRUE(gmr_memory_space_should_downgrade(s_));
  gmr_reservation_strategy where = gmr_reservation_strategy_space(gmr_test::Id(GMR_TIER_GPU, 0));
  gmr_reservation_id r = 0;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_tier_manager_try_reserve(m_, &where, 400 * KiB, &r, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(Res(GMR_TIER_GPU, 0), p, 700 * KiB, 0, s));
  EXPECT_EQ(1 * MiB, gmr_memory_space_get_available_bytes(s_));
  EXPECT_GE(SpaceStats(GMR_TIER_GPU, 0).peak_allocated_bytes, 700 * KiB);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(SpaceTest, QueriesOnNullAndBadHeaders) {
  bool d = true;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_memory_space_poll_downgrade(nullptr, &d, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_memory_space_poll_downgrade(s_, nullptr, nullptr));
  EXPECT_FALSE(gmr_memory_space_should_downgrade(nullptr));
  EXPECT_TRUE(gmr_memory_space_should_stop_downgrading(nullptr));
  EXPECT_EQ(0u, gmr_memory_space_get_amount_to_downgrade(nullptr));
  EXPECT_EQ(0u, gmr_memory_space_get_available_bytes(nullptr));
  EXPECT_EQ(0u, gmr_memory_space_get_capacity_bytes(nullptr));
  EXPECT_EQ(nullptr, gmr_memory_space_as_resource(nullptr));
  EXPECT_EQ(nullptr, gmr_memory_space_from_resource(nullptr));
  gmr_memory_space_stats bad = GMR_MEMORY_SPACE_STATS_INIT;
  bad.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_memory_space_get_stats(s_, &bad));
  gmr_tier_manager_stats mbad = GMR_TIER_MANAGER_STATS_INIT;
  mbad.size = 1;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_get_stats(m_, &mbad));
  // A caller that knows only the header still gets a valid answer.
  gmr_memory_space_stats small = GMR_MEMORY_SPACE_STATS_INIT;
  small.size = offsetof(gmr_memory_space_stats, capacity_bytes);
  EXPECT_EQ(GMR_OK, gmr_memory_space_get_stats(s_, &small));
  EXPECT_EQ(offsetof(gmr_memory_space_stats, capacity_bytes), small.size);
}

}  // namespace
