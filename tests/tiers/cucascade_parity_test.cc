// Where gmr's tiers follow cuCascade and where they keep their own rule, one
// test per decision (docs/tiers.md, "gmr and cuCascade"), on the simulation:
//  1. reserve_up_to with nothing available gives a 0-byte reservation that
//     can grow (adopted);
//  2. a bound stream's request past its reservation goes to the
//     reservation's policy before the capacity refuses it, and `increase`
//     grows the reservation as far as the space allows (adopted);
//  3. capacities that cannot be real are refused at create (gmr's own);
//  4. the default limit policy is `fail`, not cuCascade's `ignore` (kept);
//  5. a reservation cannot outlive its manager: destroy says BUSY (kept);
//  6. a GPU capacity above the device's memory is refused (gmr's own).
// The scoped pool's capacity refusal (7) is in scoped_pool_test.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "gmr/device.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/policy.h"
#include "tests/support/policies.h"
#include "tests/tiers/tier_fixture.h"

namespace {

using gmr_test::DiskConfig;
using gmr_test::GpuConfig;
using gmr_test::HostConfig;
using gmr_test::Id;
using gmr_test::KiB;
using gmr_test::MiB;

bool Has(const char *message, const std::string &words) {
  return std::strstr(message, words.c_str()) != nullptr;
}

class Parity : public gmr_test::StreamsTierTest {
 protected:
  Parity() : StreamsTierTest(3) {}
  gmr_status Refused(size_t bytes, gmr_stream s, gmr_failure *f) {
    void *p = nullptr;
    gmr_status st = gmr_resource_allocate_ex(Gpu(), bytes, 0, s, &p, f);
    EXPECT_EQ(nullptr, p);
    return st;
  }
};

// 1. Adopted: nothing available is a valid reservation of 0 bytes.
TEST_F(Parity, ReserveUpToWithNothingAvailableGivesAZeroByteReservationThatGrows) {
  Make({GpuConfig(0, 1 * MiB)});
  gmr_reservation_id all = ReserveIn(GMR_TIER_GPU, 0, 1 * MiB);
  gmr_reservation_strategy gpu = gmr_reservation_strategy_space(Id(GMR_TIER_GPU, 0));
  gmr_reservation_id zero = 0;
  size_t got = 7;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_tier_manager_reserve_up_to(m_, &gpu, 100 * KiB, &zero, &got, &f))
      << f.message;
  EXPECT_NE(0u, zero);
  EXPECT_EQ(0u, got);
  EXPECT_EQ(0u, Info(zero).bytes);
  EXPECT_EQ(2u, Stats().reservation_count);
  EXPECT_EQ(2u, Stats().reserve_count);
  EXPECT_EQ(0u, Stats().refused_count);
  // It cannot grow while the space is full, nor shrink; it can once room comes.
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_reservation_grow(m_, zero, 1 * KiB, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_shrink(m_, zero, 1, &f));
  EXPECT_EQ(0u, Info(zero).bytes);
  Release(all);
  ASSERT_EQ(GMR_OK, gmr_reservation_grow(m_, zero, 64 * KiB, &f)) << f.message;
  EXPECT_EQ(64 * KiB, Info(zero).bytes);
  Release(zero);

  // A 0-byte reservation bound with `increase` grows with its stream.
  all = ReserveIn(GMR_TIER_GPU, 0, 1 * MiB);
  ASSERT_EQ(GMR_OK, gmr_tier_manager_reserve_up_to(m_, &gpu, 1 * KiB, &zero, &got, &f));
  gmr_limit_policy increase = gmr_test::IncreasePolicy("increase", 1.0, 0);
  ASSERT_EQ(GMR_OK, gmr_reservation_bind_stream(m_, zero, streams_[0], &increase, &f));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, Refused(4 * KiB, streams_[0], &f));  // still full
  Release(all);
  void *p = Alloc(4 * KiB, streams_[0]);
  EXPECT_EQ(4 * KiB, Info(zero).bytes);
  EXPECT_EQ(1u, Info(zero).raise_count);
  Free(p, 4 * KiB, streams_[0]);
  Release(zero);
}

TEST_F(Parity, AZeroByteReservationIsNeverADiskOne) {
  Make({GpuConfig(0, 1 * MiB), DiskConfig(0, 1 * MiB)});
  gmr_reservation_id g = ReserveIn(GMR_TIER_GPU, 0, 1 * MiB);
  gmr_reservation_id d = ReserveIn(GMR_TIER_DISK, 0, 1 * MiB);
  // DISK first in the order, but DISK reservations cannot grow: the GPU.
  gmr_tier order[] = {GMR_TIER_DISK, GMR_TIER_GPU};
  gmr_reservation_strategy both = gmr_reservation_strategy_tiers(order, 2);
  gmr_reservation_id zero = 0;
  size_t got = 1;
  ASSERT_EQ(GMR_OK, gmr_tier_manager_reserve_up_to(m_, &both, 1 * KiB, &zero, &got, nullptr));
  EXPECT_EQ(GMR_TIER_GPU, Info(zero).space.tier);
  EXPECT_EQ(0u, got);
  // Only DISK: refused, nothing reserved.
  gmr_reservation_strategy disk = gmr_reservation_strategy_tier(GMR_TIER_DISK);
  gmr_reservation_id none = 5;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED,
            gmr_tier_manager_reserve_up_to(m_, &disk, 1 * KiB, &none, &got, &f));
  EXPECT_EQ(0u, none);
  EXPECT_TRUE(Has(f.message, "DISK reservations cannot grow")) << f.message;
  EXPECT_EQ(3u, Stats().reservation_count);
  for (gmr_reservation_id r : {g, d, zero}) Release(r);
}

// 2. Adopted: the reservation's policy is asked before the capacity refuses.
TEST_F(Parity, IncreaseGrowsTheReservationAsFarAsTheSpaceAllowsBeforeTheCapacityRefuses) {
  Make({GpuConfig(0, 1 * MiB)});
  gmr_reservation_id r =
      Bound(128 * KiB, streams_[0], gmr_test::IncreasePolicy("increase", 1.25, 0));
  void *untracked = Alloc(768 * KiB, streams_[1]);  // used: 896 KiB; 128 KiB available
  // 512 KiB pass both the reservation (128 KiB) and the capacity (768 + 512 > 1024 KiB).
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, Refused(512 * KiB, streams_[0], &f));
  // The policy was asked first: the reservation grew by all the space had.
  gmr_reservation_info i = Info(r);
  EXPECT_EQ(256 * KiB, i.bytes);
  EXPECT_EQ(1u, i.raise_count);
  EXPECT_EQ(1u, i.refusal_count);  // grown too little
  EXPECT_EQ(0u, i.allocated_bytes);
  gmr_memory_space_stats st = SpaceStats(GMR_TIER_GPU, 0);
  EXPECT_EQ(256 * KiB, st.reserved_bytes);  // the growth is charged
  EXPECT_EQ(0u, st.available_bytes);
  EXPECT_EQ(1u, st.reservation_raise_count);
  EXPECT_EQ(768 * KiB, st.allocated_bytes);  // nothing allocated
  // Reported: the space, the capacity, the policy and the growth.
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, f.status);
  EXPECT_EQ(Gpu(), f.where);
  EXPECT_EQ(512 * KiB, f.bytes);
  EXPECT_TRUE(Has(f.message, "(GPU, 0): the capacity of 1048576 bytes refused 524288 bytes"))
      << f.message;
  EXPECT_TRUE(Has(f.message, "asked first, reservation " + std::to_string(r) +
                                 "'s policy increase grew it by 131072 to 262144 bytes"))
      << f.message;
  EXPECT_TRUE(Has(f.message, "all the space allowed")) << f.message;
  // The growth is the reservation's to use.
  void *mine = Alloc(256 * KiB, streams_[0]);
  EXPECT_EQ(256 * KiB, Info(r).allocated_bytes);
  Free(mine, 256 * KiB, streams_[0]);
  Free(untracked, 768 * KiB, streams_[1]);
  Release(r);
}

TEST_F(Parity, AtTheCapacityOtherPoliciesAreAskedFirstToo) {
  Make({GpuConfig(0, 1 * MiB)});
  gmr_reservation_id lenient = Bound(64 * KiB, streams_[0], gmr_test::LimitPolicy("ignore"));
  gmr_reservation_id strict = Bound(64 * KiB, streams_[1], gmr_test::LimitPolicy("fail"));
  void *untracked = Alloc(1000 * KiB, streams_[2]);  // 24 KiB left of the capacity
  gmr_failure f = GMR_FAILURE_INIT;
  // ignore would let it past its reservation; the capacity refuses: no overage.
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, Refused(128 * KiB, streams_[0], &f));
  EXPECT_TRUE(Has(f.message, "policy ignore would let it pass its 65536 bytes")) << f.message;
  EXPECT_TRUE(Has(f.message, "the capacity of 1048576 bytes refused")) << f.message;
  EXPECT_EQ(0u, Info(lenient).overage_count);
  EXPECT_EQ(0u, Info(lenient).refusal_count);
  // fail refuses too, and counts it.
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, Refused(128 * KiB, streams_[1], &f));
  EXPECT_TRUE(Has(f.message, "policy fail refused it (65536 bytes reserved)")) << f.message;
  EXPECT_EQ(1u, Info(strict).refusal_count);
  // Within its reservation the policy has nothing to say: the capacity's words.
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, Refused(32 * KiB, streams_[1], &f));
  EXPECT_TRUE(Has(f.message, "past the limit of 1048576")) << f.message;
  EXPECT_FALSE(Has(f.message, "asked first")) << f.message;
  Free(untracked, 1000 * KiB, streams_[2]);
  void *within = Alloc(64 * KiB, streams_[1]);
  EXPECT_EQ(1u, Info(strict).refusal_count);
  Free(within, 64 * KiB, streams_[1]);
  Release(lenient);
  Release(strict);
}

TEST_F(Parity, IncreaseKeepsAPartialGrowthBelowTheCapacityToo) {
  gmr_memory_space_config c = GpuConfig(0, 1 * MiB);
  c.reservation_limit_fraction = 0.5;  // 512 KiB for reservations
  Make({c});
  gmr_reservation_id r =
      Bound(128 * KiB, streams_[0], gmr_test::IncreasePolicy("increase", 1.25, 0));
  void *untracked = Alloc(256 * KiB, streams_[1]);  // used 384 KiB of 512
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, Refused(512 * KiB, streams_[0], &f));  // capacity fine
  EXPECT_EQ(256 * KiB, Info(r).bytes);
  EXPECT_TRUE(Has(f.message, "reservation " + std::to_string(r) +
                                 "'s policy increase grew it by 131072 to 262144 bytes"))
      << f.message;
  EXPECT_TRUE(Has(f.message, "still passes it by 262144 bytes")) << f.message;
  EXPECT_FALSE(Has(f.message, "capacity")) << f.message;
  void *mine = Alloc(256 * KiB, streams_[0]);
  Free(mine, 256 * KiB, streams_[0]);
  Free(untracked, 256 * KiB, streams_[1]);
  Release(r);
}

// 3. Capacities that cannot be real are refused at create, naming the limit.
TEST_F(Parity, CapacitiesThatCannotBeRealAreRefused) {
  const size_t limit = GMR_MEMORY_SPACE_MAX_CAPACITY_BYTES;
  EXPECT_EQ(static_cast<size_t>(INT64_MAX / 2), limit);
  auto refuse = [&](gmr_memory_space_config c, size_t capacity) {
    c.capacity_bytes = capacity;
    gmr_tier_manager *m = reinterpret_cast<gmr_tier_manager *>(1);
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_create(&c, 1, &m, &f));
    EXPECT_EQ(nullptr, m);
    EXPECT_TRUE(Has(f.message, "capacity_bytes " + std::to_string(capacity))) << f.message;
    EXPECT_TRUE(Has(f.message, std::to_string(limit) + " bytes (INT64_MAX / 2")) << f.message;
  };
  refuse(GpuConfig(0, 0), SIZE_MAX);
  refuse(HostConfig(0, 0), SIZE_MAX);
  refuse(DiskConfig(0, 0), SIZE_MAX);
  refuse(DiskConfig(0, 0), limit + 1);
  // The limit itself is a capacity (DISK spaces only account).
  Make({DiskConfig(0, limit)});
  EXPECT_EQ(limit, gmr_memory_space_get_capacity_bytes(Space(GMR_TIER_DISK, 0)));
  gmr_reservation_id r = ReserveIn(GMR_TIER_DISK, 0, limit);
  Release(r);
}

// 4. Kept: the default limit policy is `fail` (cuCascade: `ignore`).
TEST_F(Parity, TheDefaultLimitPolicyIsFail) {
  gmr_memory_space_config c = gmr_memory_space_config_default(GMR_TIER_GPU, 0);
  EXPECT_STREQ("fail", c.on_limit.name);
  EXPECT_STREQ("fail", gmr_memory_space_config_default(GMR_TIER_HOST, 0).on_limit.name);
  c.capacity_bytes = 1 * MiB;
  c.stream_count = 0;
  Make({c});
  gmr_reservation_id r = ReserveIn(GMR_TIER_GPU, 0, 64 * KiB);
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_reservation_bind_stream(m_, r, streams_[0], nullptr, &f));
  void *p = Alloc(64 * KiB, streams_[0]);
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, Refused(256, streams_[0], &f));  // refused at the cause
  EXPECT_TRUE(Has(f.message, "stream's limit of 65536")) << f.message;
  EXPECT_EQ(1u, Info(r).refusal_count);
  EXPECT_EQ(0u, Info(r).overage_count);
  // cuCascade's behaviour on request: bind with `ignore`.
  ASSERT_EQ(GMR_OK, gmr_reservation_unbind_stream(m_, r));
  gmr_limit_policy ignore = gmr_test::LimitPolicy("ignore");
  ASSERT_EQ(GMR_OK, gmr_reservation_bind_stream(m_, r, streams_[1], &ignore, &f));
  void *a = Alloc(64 * KiB, streams_[1]);
  void *b = Alloc(256, streams_[1]);
  EXPECT_EQ(1u, Info(r).overage_count);
  Free(a, 64 * KiB, streams_[1]);
  Free(b, 256, streams_[1]);
  Free(p, 64 * KiB, streams_[0]);
  Release(r);
}

// 5. Kept: a reservation cannot outlive its manager.
TEST_F(Parity, DestroyRefusesWhileAReservationLivesAndChangesNothing) {
  Make({GpuConfig(0, 1 * MiB)});
  gmr_reservation_id r = ReserveIn(GMR_TIER_GPU, 0, 64 * KiB);
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_reservation_bind_stream(m_, r, streams_[0], nullptr, &f));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_tier_manager_destroy(m_));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_tier_manager_destroy(m_));  // as often as asked
  // The manager and the reservation are as they were, and work.
  EXPECT_EQ(1u, Stats().reservation_count);
  gmr_reservation_info i = Info(r);
  EXPECT_EQ(64 * KiB, i.bytes);
  EXPECT_TRUE(i.bound);
  void *p = Alloc(32 * KiB, streams_[0]);
  EXPECT_EQ(32 * KiB, Info(r).allocated_bytes);
  ASSERT_EQ(GMR_OK, gmr_reservation_grow(m_, r, 64 * KiB, &f)) << f.message;
  Free(p, 32 * KiB, streams_[0]);
  Release(r);
  EXPECT_EQ(GMR_OK, gmr_tier_manager_destroy(m_));  // the last reservation gone
  m_ = nullptr;
}

// 6. A GPU space cannot promise more than its device has.
class SmallDevice : public gmr_test::TierTest {
 protected:
  SmallDevice() { sim_config_.device_memory_bytes = size_t{4} << 30; }
};

TEST_F(SmallDevice, AGpuCapacityAboveTheDevicesMemoryIsRefused) {
  const size_t pib = size_t{1} << 50, device = size_t{4} << 30;
  gmr_memory_space_config c = GpuConfig(0, pib);
  gmr_tier_manager *m = reinterpret_cast<gmr_tier_manager *>(1);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_create(&c, 1, &m, &f));
  EXPECT_EQ(nullptr, m);
  EXPECT_TRUE(Has(f.message, "GPU space 0: capacity_bytes " + std::to_string(pib))) << f.message;
  EXPECT_TRUE(Has(f.message, "device 0's memory of " + std::to_string(device))) << f.message;
  c.capacity_bytes = device + 1;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_create(&c, 1, &m, &f));
  // All of it is fine, given or detected.
  Make({GpuConfig(0, device)});
  EXPECT_EQ(device, gmr_memory_space_get_capacity_bytes(Space(GMR_TIER_GPU, 0)));
  ASSERT_EQ(GMR_OK, gmr_tier_manager_destroy(m_));
  Make({GpuConfig(0, 0)});
  EXPECT_EQ(device, gmr_memory_space_get_capacity_bytes(Space(GMR_TIER_GPU, 0)));
}

}  // namespace
