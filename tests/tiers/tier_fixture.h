// tests/tiers/tier_fixture.h: small configurations of GPU, HOST and DISK
// spaces for the tier manager tests, and a fixture that runs on the
// simulation with two devices and destroys the manager at the end.
#ifndef GMR_TESTS_TIERS_TIER_FIXTURE_H_
#define GMR_TESTS_TIERS_TIER_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gmr/sim/streams.h"
#include "gmr/tiers/memory_space.h"
#include "gmr/tiers/reservation.h"
#include "gmr/tiers/tier_manager.h"
#include "tests/support/sim_fixture.h"

namespace gmr_test {

constexpr size_t KiB = 1024;
constexpr size_t MiB = size_t{1} << 20;
constexpr uint64_t kMs = 1000000;

// A GPU space of `capacity` bytes on simulated `device`, a reservation limit
// of the whole capacity unless changed, two streams.
inline gmr_memory_space_config GpuConfig(int device, size_t capacity) {
  gmr_memory_space_config c = gmr_memory_space_config_default(GMR_TIER_GPU, device);
  c.capacity_bytes = capacity;
  c.reservation_limit_fraction = 1.0;
  c.stream_count = 2;
  return c;
}

// A HOST space of 64 KiB blocks, nothing taken at create, no NUMA placement.
inline gmr_memory_space_config HostConfig(int index, size_t capacity) {
  gmr_memory_space_config c = gmr_memory_space_config_default(GMR_TIER_HOST, index);
  c.capacity_bytes = capacity;
  c.reservation_limit_fraction = 1.0;
  c.numa_node = -1;
  c.block_bytes = 64 * KiB;
  c.blocks_per_chunk = 4;
  c.initial_chunk_count = 0;
  c.stream_count = 1;
  return c;
}

inline std::string TempDir() {
  const char *t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

inline gmr_memory_space_config DiskConfig(int index, size_t capacity) {
  gmr_memory_space_config c = gmr_memory_space_config_default(GMR_TIER_DISK, index);
  c.capacity_bytes = capacity;
  c.reservation_limit_fraction = 1.0;
  std::string dir = TempDir();
  std::strncpy(c.mount_path, dir.c_str(), sizeof c.mount_path - 1);
  return c;
}

inline gmr_memory_space_id Id(gmr_tier tier, int index) {
  gmr_memory_space_id id;
  id.tier = tier;
  id.index = index;
  return id;
}

class TierTest : public SimTest {
 protected:
  TierTest() { sim_config_.device_count = 2; }
  void TearDown() override {
    if (m_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_tier_manager_destroy(m_)) << "reservations, streams or memory live";
    }
    SimTest::TearDown();
  }
  void Make(std::vector<gmr_memory_space_config> configs) {
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_tier_manager_create(configs.data(), configs.size(), &m_, &f))
        << f.message;
  }
  gmr_memory_space *Space(gmr_tier tier, int index) {
    return gmr_tier_manager_get_space(m_, Id(tier, index));
  }
  gmr_resource *Res(gmr_tier tier, int index) {
    return gmr_memory_space_as_resource(Space(tier, index));
  }
  gmr_memory_space_stats SpaceStats(gmr_tier tier, int index) {
    gmr_memory_space_stats s = GMR_MEMORY_SPACE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_memory_space_get_stats(Space(tier, index), &s));
    return s;
  }
  gmr_tier_manager_stats Stats() {
    gmr_tier_manager_stats s = GMR_TIER_MANAGER_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_tier_manager_get_stats(m_, &s));
    return s;
  }
  gmr_reservation_info Info(gmr_reservation_id id) {
    gmr_reservation_info i = GMR_RESERVATION_INFO_INIT;
    EXPECT_EQ(GMR_OK, gmr_reservation_get_info(m_, id, &i));
    return i;
  }
  gmr_reservation_id Reserve(const gmr_reservation_strategy &s, size_t bytes) {
    gmr_reservation_id id = 0;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_tier_manager_try_reserve(m_, &s, bytes, &id, &f)) << f.message;
    return id;
  }
  gmr_reservation_id ReserveIn(gmr_tier tier, int index, size_t bytes) {
    return Reserve(gmr_reservation_strategy_space(Id(tier, index)), bytes);
  }
  void Release(gmr_reservation_id id) {
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_reservation_release(m_, id, &f)) << f.message;
  }

  gmr_tier_manager *m_ = nullptr;
};

// A TierTest with real simulated streams (the async CUDA resource checks
// them), made before the test and destroyed after the tier manager.
class StreamsTierTest : public TierTest {
 protected:
  explicit StreamsTierTest(size_t stream_count) : streams_(stream_count, nullptr) {}
  void SetUp() override {
    TierTest::SetUp();
    for (gmr_stream &s : streams_) ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  }
  void TearDown() override {
    if (m_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_tier_manager_destroy(m_));
      m_ = nullptr;
    }
    for (gmr_stream s : streams_) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    TierTest::TearDown();
  }
  // The first GPU space, as a resource.
  gmr_resource *Gpu() { return Res(GMR_TIER_GPU, 0); }
  // A reservation of `bytes` in it, bound to `s` with policy `p` (NULL: the space's).
  gmr_reservation_id Bound(size_t bytes, gmr_stream s, const gmr_limit_policy *p = nullptr) {
    gmr_reservation_id r = ReserveIn(GMR_TIER_GPU, 0, bytes);
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_reservation_bind_stream(m_, r, s, p, &f)) << f.message;
    return r;
  }
  gmr_reservation_id Bound(size_t bytes, gmr_stream s, gmr_limit_policy p) {
    return Bound(bytes, s, &p);
  }
  void *Alloc(size_t bytes, gmr_stream s, gmr_status want = GMR_OK) {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(want, gmr_resource_allocate_ex(Gpu(), bytes, 0, s, &p, &f)) << f.message;
    return p;
  }
  void Free(void *p, size_t bytes, gmr_stream s) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(Gpu(), p, bytes, 0, s));
  }
  std::vector<gmr_stream> streams_;
};

}  // namespace gmr_test

#endif  // GMR_TESTS_TIERS_TIER_FIXTURE_H_
