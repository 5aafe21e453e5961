// tier_manager on the simulation: spaces and their stacks, every strategy,
// try/up-to reservations, release/grow/shrink, DISK reservations, bad input
// (each a clear status and message, nothing changed), shutdown with
// reservations outstanding and lent streams, destroy refused while anything
// lives, and the OOM policies a manager takes ownership of.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>

#include "gmr/device.h"
#include "gmr/tiers/stream_pool.h"
#include "tests/support/policies.h"
#include "tests/tiers/tier_fixture.h"

namespace {

using gmr_test::DiskConfig;
using gmr_test::GpuConfig;
using gmr_test::HostConfig;
using gmr_test::Id;
using gmr_test::KiB;
using gmr_test::MiB;

class Manager : public gmr_test::TierTest {};

TEST_F(Manager, BuildsEverySpaceWithItsStackAndStreams) {
  Make({GpuConfig(0, 8 * MiB), GpuConfig(1, 4 * MiB), HostConfig(0, 16 * MiB),
        DiskConfig(0, 64 * MiB)});
  EXPECT_EQ(4u, gmr_tier_manager_get_space_count(m_));
  EXPECT_EQ(nullptr, gmr_tier_manager_get_space_at(m_, 4));
  gmr_memory_space *gpu1 = Space(GMR_TIER_GPU, 1);
  ASSERT_NE(nullptr, gpu1);
  EXPECT_EQ(GMR_TIER_GPU, gmr_memory_space_get_id(gpu1).tier);
  EXPECT_EQ(1, gmr_memory_space_get_id(gpu1).index);
  EXPECT_EQ(4 * MiB, gmr_memory_space_get_capacity_bytes(gpu1));
  EXPECT_EQ(gpu1, gmr_memory_space_from_resource(gmr_memory_space_as_resource(gpu1)));
  EXPECT_STREQ("memory_space", gmr_resource_get_type_name(Res(GMR_TIER_GPU, 1)));
  // GPU: memory_space > limiting > cuda(kind=async) on its device.
  gmr_resource *below = gmr_resource_get_upstream(Res(GMR_TIER_GPU, 1));
  EXPECT_STREQ("limiting_adaptor", gmr_resource_get_type_name(below));
  EXPECT_STREQ("cuda_resource", gmr_resource_get_type_name(gmr_resource_get_upstream(below)));
  // HOST: memory_space > limiting > fixed_block > numa_host.
  gmr_resource *hb = gmr_resource_get_upstream(gmr_resource_get_upstream(Res(GMR_TIER_HOST, 0)));
  EXPECT_STREQ("fixed_block_resource", gmr_resource_get_type_name(hb));
  EXPECT_STREQ("numa_host_resource", gmr_resource_get_type_name(gmr_resource_get_upstream(hb)));
  // DISK: nothing below.
  EXPECT_EQ(nullptr, gmr_resource_get_upstream(Res(GMR_TIER_DISK, 0)));
  EXPECT_EQ(nullptr, gmr_memory_space_get_limiting_adaptor(Space(GMR_TIER_DISK, 0)));
  EXPECT_EQ(nullptr, gmr_memory_space_get_stream_pool(Space(GMR_TIER_DISK, 0)));
  // Streams: two per GPU space on its device, one for HOST.
  EXPECT_EQ(1, gmr_stream_pool_get_device(gmr_memory_space_get_stream_pool(gpu1)));
  gmr_stream_pool_stats ps = GMR_STREAM_POOL_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_stream_pool_get_stats(gmr_memory_space_get_stream_pool(gpu1), &ps));
  EXPECT_EQ(2u, ps.stream_count);
  // The manager's spaces refuse to be destroyed on their own.
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_destroy(Res(GMR_TIER_GPU, 0)));
  EXPECT_NE(nullptr, gmr_tier_manager_get_notification_channel(m_));
}

TEST_F(Manager, DetectsCapacitiesLeftAtZero) {
  gmr_memory_space_config gpu = GpuConfig(0, 0);
  gmr_memory_space_config host = HostConfig(0, 0);
  gmr_memory_space_config disk = DiskConfig(0, 0);
  Make({gpu, host, disk});
  EXPECT_EQ(size_t{80} << 30, gmr_memory_space_get_capacity_bytes(Space(GMR_TIER_GPU, 0)));
  EXPECT_GT(gmr_memory_space_get_capacity_bytes(Space(GMR_TIER_HOST, 0)), 0u);
  EXPECT_GT(gmr_memory_space_get_capacity_bytes(Space(GMR_TIER_DISK, 0)), 0u);
}

TEST_F(Manager, SpaceStrategyReservesThereOnly) {
  Make({GpuConfig(0, 1 * MiB), GpuConfig(1, 1 * MiB)});
  gmr_reservation_id r = ReserveIn(GMR_TIER_GPU, 1, 300 * KiB);
  ASSERT_NE(0u, r);
  gmr_reservation_info i = Info(r);
  EXPECT_EQ(GMR_TIER_GPU, i.space.tier);
  EXPECT_EQ(1, i.space.index);
  EXPECT_EQ(300 * KiB, i.bytes);
  EXPECT_STREQ("", i.path);
  EXPECT_EQ(300 * KiB, SpaceStats(GMR_TIER_GPU, 1).reserved_bytes);
  EXPECT_EQ(0u, SpaceStats(GMR_TIER_GPU, 0).reserved_bytes);
  Release(r);
  EXPECT_EQ(0u, SpaceStats(GMR_TIER_GPU, 1).reserved_bytes);
  EXPECT_EQ(300 * KiB, SpaceStats(GMR_TIER_GPU, 1).peak_reserved_bytes);
  // Equal room: the tier strategy takes the lower index.
  gmr_reservation_id tie = Reserve(gmr_reservation_strategy_tier(GMR_TIER_GPU), 1 * KiB);
  EXPECT_EQ(0, Info(tie).space.index);
  Release(tie);
}

TEST_F(Manager, TierStrategyPicksTheSpaceWithTheMostAvailable) {
  Make({GpuConfig(0, 1 * MiB), GpuConfig(1, 1 * MiB + 512 * KiB)});
  gmr_reservation_strategy gpu = gmr_reservation_strategy_tier(GMR_TIER_GPU);
  gmr_reservation_id a = Reserve(gpu, 100 * KiB);  // 1.5 MiB free on 1 vs 1 MiB on 0
  EXPECT_EQ(1, Info(a).space.index);
  gmr_reservation_id b = Reserve(gpu, 600 * KiB);  // 1 MiB free on 0 vs 1436 KiB on 1
  EXPECT_EQ(1, Info(b).space.index);
  gmr_reservation_id c0 = Reserve(gpu, 200 * KiB);  // now 0 has more
  EXPECT_EQ(0, Info(c0).space.index);
  Release(c0);
  Release(a);
  Release(b);
}

TEST_F(Manager, TiersStrategyFallsBackInOrder) {
  Make({GpuConfig(0, 1 * MiB), HostConfig(0, 4 * MiB)});
  gmr_tier order[] = {GMR_TIER_GPU, GMR_TIER_HOST};
  gmr_reservation_strategy s = gmr_reservation_strategy_tiers(order, 2);
  gmr_reservation_id g = Reserve(s, 800 * KiB);
  EXPECT_EQ(GMR_TIER_GPU, Info(g).space.tier);
  gmr_reservation_id h = Reserve(s, 800 * KiB);  // the GPU has 224 KiB left
  EXPECT_EQ(GMR_TIER_HOST, Info(h).space.tier);
  Release(g);
  Release(h);
  // HOST first when the order says so.
  gmr_tier reversed[] = {GMR_TIER_HOST, GMR_TIER_GPU};
  gmr_reservation_id r = Reserve(gmr_reservation_strategy_tiers(reversed, 2), 1 * KiB);
  EXPECT_EQ(GMR_TIER_HOST, Info(r).space.tier);
  Release(r);
}

TEST_F(Manager, DowngradeStrategyPrefersTheGpusNumaNodeThenTheMostAvailable) {
  gmr_memory_space_config gpu = GpuConfig(0, 1 * MiB);
  gpu.downgrade_numa_node = 1;
  Make({gpu, GpuConfig(1, 1 * MiB), HostConfig(0, 8 * MiB), HostConfig(1, 2 * MiB),
        DiskConfig(0, 64 * MiB)});
  gmr_reservation_id a =
      Reserve(gmr_reservation_strategy_downgrade(Id(GMR_TIER_GPU, 0), GMR_TIER_HOST), 64 * KiB);
  EXPECT_EQ(GMR_TIER_HOST, Info(a).space.tier);
  EXPECT_EQ(1, Info(a).space.index);  // preferred, though node 0 has more room
  gmr_reservation_id b =
      Reserve(gmr_reservation_strategy_downgrade(Id(GMR_TIER_GPU, 1), GMR_TIER_HOST), 64 * KiB);
  EXPECT_EQ(0, Info(b).space.index);  // no preference: the most available
  // The preferred space full: the next one.
  gmr_reservation_id c =
      Reserve(gmr_reservation_strategy_downgrade(Id(GMR_TIER_GPU, 0), GMR_TIER_HOST), 3 * MiB);
  EXPECT_EQ(0, Info(c).space.index);
  // Tier count 0 means the next slower tier; HOST -> DISK.
  gmr_reservation_strategy next = gmr_reservation_strategy_downgrade(Id(GMR_TIER_HOST, 0), GMR_TIER_DISK);
  next.tier_count = 0;
  gmr_reservation_id d = Reserve(next, 1 * MiB);
  EXPECT_EQ(GMR_TIER_DISK, Info(d).space.tier);
  // Not slower: refused with a message.
  gmr_reservation_id bad = 7;
  gmr_failure f = GMR_FAILURE_INIT;
  gmr_reservation_strategy up = gmr_reservation_strategy_downgrade(Id(GMR_TIER_HOST, 0), GMR_TIER_GPU);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_try_reserve(m_, &up, 1, &bad, &f));
  EXPECT_EQ(0u, bad);
  EXPECT_NE(nullptr, std::strstr(f.message, "slower")) << f.message;
  for (gmr_reservation_id id : {a, b, c, d}) Release(id);
}

TEST_F(Manager, ReserveUpToTakesWhatIsAvailable) {
  Make({GpuConfig(0, 1 * MiB)});
  gmr_reservation_id big = ReserveIn(GMR_TIER_GPU, 0, 900 * KiB);
  gmr_reservation_strategy s = gmr_reservation_strategy_space(Id(GMR_TIER_GPU, 0));
  gmr_reservation_id r = 0;
  size_t got = 0;
  ASSERT_EQ(GMR_OK, gmr_tier_manager_reserve_up_to(m_, &s, 1 * MiB, &r, &got, nullptr));
  EXPECT_EQ(124 * KiB, got);
  EXPECT_EQ(124 * KiB, Info(r).bytes);
  // Nothing left: a reservation of 0 bytes (cuCascade's; cucascade_parity_test).
  gmr_reservation_id zero = 0;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_tier_manager_reserve_up_to(m_, &s, 1, &zero, &got, &f)) << f.message;
  EXPECT_EQ(0u, got);
  EXPECT_NE(0u, zero);
  EXPECT_EQ(0u, Info(zero).bytes);
  Release(big);
  gmr_reservation_id some = 0;
  ASSERT_EQ(GMR_OK, gmr_tier_manager_reserve_up_to(m_, &s, 10 * KiB, &some, &got, nullptr));
  EXPECT_EQ(10 * KiB, got);  // never more than asked
  Release(r);
  Release(some);
  Release(zero);
}

TEST_F(Manager, TryReserveSaysWhatIsAvailable) {
  Make({GpuConfig(0, 1 * MiB)});
  gmr_reservation_id a = ReserveIn(GMR_TIER_GPU, 0, 1000 * KiB);
  gmr_reservation_strategy s = gmr_reservation_strategy_space(Id(GMR_TIER_GPU, 0));
  gmr_reservation_id b = 0;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_tier_manager_try_reserve(m_, &s, 100 * KiB, &b, &f));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, f.status);
  EXPECT_EQ(100 * KiB, f.bytes);
  EXPECT_NE(nullptr, std::strstr(f.message, "24576 bytes available")) << f.message;
  EXPECT_EQ(1u, Stats().refused_count);
  Release(a);
}

TEST_F(Manager, ReservationLimitFractionCapsReservations) {
  gmr_memory_space_config c = GpuConfig(0, 1 * MiB);
  c.reservation_limit_fraction = 0.5;
  Make({c});
  gmr_memory_space_stats s = SpaceStats(GMR_TIER_GPU, 0);
  EXPECT_EQ(512 * KiB, s.reservation_limit_bytes);
  gmr_reservation_strategy where = gmr_reservation_strategy_space(Id(GMR_TIER_GPU, 0));
  gmr_reservation_id r = 0;
  gmr_failure f = GMR_FAILURE_INIT;
  // Above the limit, though below the capacity: it could never fit.
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED,
            gmr_tier_manager_reserve(m_, &where, 600 * KiB, GMR_WAIT_FOREVER, &r, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "never fit")) << f.message;
  EXPECT_EQ(512 * KiB, gmr_memory_space_get_available_bytes(Space(GMR_TIER_GPU, 0)));
}

TEST_F(Manager, GrowAndShrink) {
  Make({GpuConfig(0, 1 * MiB)});
  gmr_reservation_id r = ReserveIn(GMR_TIER_GPU, 0, 256 * KiB);
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_reservation_grow(m_, r, 256 * KiB, &f));
  EXPECT_EQ(512 * KiB, Info(r).bytes);
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_reservation_grow(m_, r, 600 * KiB, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "cannot grow")) << f.message;
  EXPECT_EQ(512 * KiB, Info(r).bytes);  // unchanged
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_grow(m_, r, 0, &f));
  ASSERT_EQ(GMR_OK, gmr_reservation_shrink(m_, r, 100 * KiB, &f));
  EXPECT_EQ(100 * KiB, Info(r).bytes);
  EXPECT_EQ(100 * KiB, SpaceStats(GMR_TIER_GPU, 0).reserved_bytes);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_shrink(m_, r, 0, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_shrink(m_, r, 200 * KiB, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "1..102400")) << f.message;
  EXPECT_EQ(100 * KiB, Info(r).bytes);
  Release(r);
}

TEST_F(Manager, DiskReservationsAreAccountedAndCarryAPath) {
  Make({DiskConfig(0, 10 * MiB)});
  gmr_reservation_id r = ReserveIn(GMR_TIER_DISK, 0, 4 * MiB);
  gmr_reservation_info i = Info(r);
  std::string path = i.path;
  EXPECT_EQ(0u, path.find(gmr_test::TempDir() + "/gmr-")) << path;
  EXPECT_NE(std::string::npos, path.find("-" + std::to_string(r) + ".bin")) << path;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_reservation_grow(m_, r, 1, &f));
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_reservation_shrink(m_, r, 1, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "fixed size")) << f.message;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_reservation_bind_stream(m_, r, nullptr, nullptr, &f));
  // A DISK space asked for memory: a clear refusal.
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED,
            gmr_resource_allocate_ex(Res(GMR_TIER_DISK, 0), 4096, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_NE(nullptr, std::strstr(f.message, "DISK space")) << f.message;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_deallocate(Res(GMR_TIER_DISK, 0), &f, 16, 0, nullptr));
  EXPECT_EQ(4 * MiB, SpaceStats(GMR_TIER_DISK, 0).reserved_bytes);
  Release(r);
}

TEST_F(Manager, BadReservationsChangeNothing) {
  Make({GpuConfig(0, 1 * MiB), HostConfig(0, 1 * MiB)});
  gmr_reservation_strategy gpu = gmr_reservation_strategy_space(Id(GMR_TIER_GPU, 0));
  gmr_reservation_id r = 5;
  gmr_failure f = GMR_FAILURE_INIT;
  // More than the capacity.
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_tier_manager_try_reserve(m_, &gpu, 2 * MiB, &r, &f));
  EXPECT_EQ(0u, r);
  EXPECT_NE(nullptr, std::strstr(f.message, "2097152")) << f.message;
  // Zero bytes.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_try_reserve(m_, &gpu, 0, &r, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "0 bytes")) << f.message;
  // A space or tier the manager does not have; a malformed strategy.
  gmr_reservation_strategy other = gmr_reservation_strategy_space(Id(GMR_TIER_GPU, 5));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_try_reserve(m_, &other, 1, &r, &f));
  gmr_reservation_strategy disk = gmr_reservation_strategy_tier(GMR_TIER_DISK);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_reserve(m_, &disk, 1, 0, &r, &f));
  gmr_reservation_strategy empty = gmr_reservation_strategy_tiers(nullptr, 0);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_try_reserve(m_, &empty, 1, &r, &f));
  gmr_reservation_strategy weird = gpu;
  weird.kind = static_cast<gmr_reservation_strategy_kind>(42);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_try_reserve(m_, &weird, 1, &r, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_try_reserve(m_, nullptr, 1, &r, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_try_reserve(m_, &gpu, 1, nullptr, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_try_reserve(nullptr, &gpu, 1, &r, &f));
  EXPECT_EQ(0u, Stats().reservation_count);
  EXPECT_EQ(0u, SpaceStats(GMR_TIER_GPU, 0).reserved_bytes);

  // Releasing twice; ids never given out.
  gmr_reservation_id ok = ReserveIn(GMR_TIER_GPU, 0, 1 * KiB);
  Release(ok);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_reservation_release(m_, ok, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "already released")) << f.message;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_release(m_, 0, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_release(m_, 999, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "never given out")) << f.message;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_release(nullptr, 1, &f));
  // Other operations on a released id.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_grow(m_, ok, 1, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "was released")) << f.message;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_shrink(m_, ok, 1, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_bind_stream(m_, ok, nullptr, nullptr, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_unbind_stream(m_, ok));
  gmr_reservation_info info = GMR_RESERVATION_INFO_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_reservation_get_info(m_, ok, &info));
  EXPECT_EQ(0u, SpaceStats(GMR_TIER_GPU, 0).reserved_bytes);
  EXPECT_EQ(1u, Stats().release_count);
}

TEST_F(Manager, BadConfigsAreRefusedWithAReason) {
  gmr_failure f = GMR_FAILURE_INIT;
  auto refuse = [&](std::vector<gmr_memory_space_config> cs, const char *words) {
    gmr_tier_manager *m = reinterpret_cast<gmr_tier_manager *>(1);
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_create(cs.data(), cs.size(), &m, &f))
        << words;
    EXPECT_EQ(nullptr, m);
    EXPECT_NE(nullptr, std::strstr(f.message, words)) << f.message;
  };
  refuse({GpuConfig(0, MiB), GpuConfig(0, MiB)}, "both name space (GPU, 0)");
  gmr_memory_space_config c = GpuConfig(0, MiB);
  c.downgrade_stop_fraction = 0.9;  // above the trigger
  refuse({c}, "fractions");
  c = GpuConfig(0, MiB);
  c.reservation_limit_fraction = 0;
  refuse({c}, "fractions");
  refuse({GpuConfig(3, MiB)}, "no such device");
  c = GpuConfig(0, MiB);
  std::strcpy(c.stack_spec, "pool > cuda(kind=nope)");
  refuse({c}, "stack 'pool > cuda(kind=nope)'");
  c = DiskConfig(0, MiB);
  c.mount_path[0] = '\0';
  refuse({c}, "mount_path");
  c = HostConfig(0, MiB);
  c.numa_node = 4000;
  refuse({c}, "no NUMA node 4000");
  c = HostConfig(0, MiB);
  c.block_bytes = 100;  // not a multiple of 256
  refuse({c}, "fixed_block");
  c = GpuConfig(0, MiB);
  c.id.tier = static_cast<gmr_tier>(9);
  refuse({c}, "unknown tier");
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_create(nullptr, 1, &m_, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_create(&c, 0, &m_, &f));
}

// A GPU space makes its device current twice: to read the device's memory,
// then to build its stack. A refused cudaGetDevice or cudaSetDevice in
// either is named as the call it was (not "cudaMemGetInfo" or
// "cudaSetDevice" whatever failed), and the manager is not made.
TEST_F(Manager, RefusedDeviceSwitchNamesTheCallThatFailed) {
  const struct {
    gmr_cuda_call call;
    uint64_t skip_count;  // calls of that kind that succeed first
    int error;
    const char *named;
  } faults[] = {
      {GMR_CUDA_CALL_GET_DEVICE, 0, 999, "cudaGetDevice failed reading the device's memory"},
      {GMR_CUDA_CALL_SET_DEVICE, 0, 999, "cudaSetDevice failed reading the device's memory"},
      // The first switch made device 1 current and went back (two cudaSetDevice).
      {GMR_CUDA_CALL_GET_DEVICE, 1, 999, "cudaGetDevice failed making device 1 current"},
      {GMR_CUDA_CALL_SET_DEVICE, 2, 999, "cudaSetDevice failed making device 1 current"},
  };
  for (const auto &fault : faults) {
    SCOPED_TRACE(std::string(gmr_cuda_call_name(fault.call)) + " after " +
                 std::to_string(fault.skip_count));
    gmr_memory_space_config c = GpuConfig(1, MiB);
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(fault.call, fault.skip_count, 1, fault.error));
    gmr_failure f = GMR_FAILURE_INIT;
    gmr_tier_manager *m = nullptr;
    EXPECT_EQ(GMR_ERR_CUDA, gmr_tier_manager_create(&c, 1, &m, &f));
    EXPECT_EQ(nullptr, m);
    EXPECT_NE(nullptr, std::strstr(f.message, fault.named)) << f.message;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    int device = -1;
    ASSERT_EQ(GMR_OK, gmr_device_get_current(&device));
    EXPECT_EQ(0, device) << "the caller's device stays current";
  }
  gmr_memory_space_config c = GpuConfig(1, MiB);
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_tier_manager_create(&c, 1, &m_, &f)) << f.message;
}

// The manager owns the spaces' OOM policies: released once, on every path.
std::atomic<int> g_released{0};
void CountRelease(void *) { g_released++; }

TEST_F(Manager, OomPoliciesAreReleasedOnceOnEveryPath) {
  gmr_oom_policy p = gmr_test::TrimRetryPolicy(1);
  p.release = CountRelease;
  g_released = 0;
  gmr_memory_space_config a = GpuConfig(0, MiB), b = HostConfig(0, MiB), bad = GpuConfig(7, MiB),
                          d = DiskConfig(0, MiB);
  a.on_oom = b.on_oom = bad.on_oom = d.on_oom = p;
  std::vector<gmr_memory_space_config> cs = {a, b, bad, d};
  gmr_tier_manager *m = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_manager_create(cs.data(), cs.size(), &m, nullptr));
  EXPECT_EQ(4, g_released.load());  // built ones at teardown, the bad one and the one after it
  g_released = 0;
  cs = {a, b, d};
  ASSERT_EQ(GMR_OK, gmr_tier_manager_create(cs.data(), cs.size(), &m, nullptr));
  EXPECT_EQ(0, g_released.load());
  ASSERT_EQ(GMR_OK, gmr_tier_manager_destroy(m));
  EXPECT_EQ(3, g_released.load());
}

TEST_F(Manager, ShutdownWithReservationsOutstandingAndStreamsLent) {
  Make({GpuConfig(0, 1 * MiB)});
  gmr_reservation_id r = ReserveIn(GMR_TIER_GPU, 0, 100 * KiB);
  gmr_stream_pool *pool = gmr_memory_space_get_stream_pool(Space(GMR_TIER_GPU, 0));
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_pool_acquire(pool, GMR_STREAM_ACQUIRE_BLOCK, 0, &s));
  ASSERT_EQ(GMR_OK, gmr_tier_manager_shutdown(m_));
  ASSERT_EQ(GMR_OK, gmr_tier_manager_shutdown(m_));  // idempotent
  EXPECT_TRUE(Stats().shut_down);
  gmr_reservation_strategy where = gmr_reservation_strategy_space(Id(GMR_TIER_GPU, 0));
  gmr_reservation_id again = 0;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_SHUTDOWN, gmr_tier_manager_reserve(m_, &where, 1, GMR_WAIT_FOREVER, &again, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "shut down")) << f.message;
  EXPECT_EQ(GMR_ERR_SHUTDOWN, gmr_tier_manager_try_reserve(m_, &where, 1, &again, &f));
  EXPECT_EQ(GMR_ERR_SHUTDOWN, gmr_reservation_grow(m_, r, 1, &f));
  gmr_stream s2 = nullptr;
  EXPECT_EQ(GMR_ERR_SHUTDOWN, gmr_stream_pool_acquire(pool, GMR_STREAM_ACQUIRE_GROW, 0, &s2));
  // Destroy refuses, changing nothing, while the reservation and the stream live.
  EXPECT_EQ(GMR_ERR_BUSY, gmr_tier_manager_destroy(m_));
  ASSERT_EQ(GMR_OK, gmr_reservation_shrink(m_, r, 50 * KiB, &f));  // still valid
  Release(r);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_tier_manager_destroy(m_));
  ASSERT_EQ(GMR_OK, gmr_stream_pool_release(pool, s));
  EXPECT_EQ(3u, Stats().shutdown_count);
}

TEST_F(Manager, DestroyRefusesWhileMemoryIsLive) {
  Make({GpuConfig(0, 1 * MiB)});
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(Res(GMR_TIER_GPU, 0), 4096, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_tier_manager_destroy(m_));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(Res(GMR_TIER_GPU, 0), p, 4096, 0, nullptr));
}

TEST_F(Manager, DestroyThatCannotSynchroniseChangesNothing) {
  Make({GpuConfig(0, 1 * MiB)});
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_STREAM_SYNCHRONIZE, 0, 1, 999));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_tier_manager_destroy(m_));
  gmr_reservation_id r = ReserveIn(GMR_TIER_GPU, 0, 1 * KiB);  // still a working manager
  Release(r);
}

TEST_F(Manager, TierNamesAndDefaults) {
  EXPECT_STREQ("GPU", gmr_tier_name(GMR_TIER_GPU));
  EXPECT_STREQ("HOST", gmr_tier_name(GMR_TIER_HOST));
  EXPECT_STREQ("DISK", gmr_tier_name(GMR_TIER_DISK));
  EXPECT_STREQ("unknown", gmr_tier_name(static_cast<gmr_tier>(3)));
  gmr_tier t = GMR_TIER_GPU;
  ASSERT_EQ(GMR_OK, gmr_tier_from_name("host", &t));
  EXPECT_EQ(GMR_TIER_HOST, t);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_tier_from_name("tape", &t));
  EXPECT_EQ(GMR_TIER_HOST, t);
  gmr_memory_space_config c = gmr_memory_space_config_default(GMR_TIER_HOST, 1);
  EXPECT_DOUBLE_EQ(0.85, c.reservation_limit_fraction);
  EXPECT_DOUBLE_EQ(0.85, c.downgrade_trigger_fraction);
  EXPECT_DOUBLE_EQ(0.65, c.downgrade_stop_fraction);
  EXPECT_EQ(16u, c.stream_count);
  EXPECT_EQ(size_t{1} << 20, c.block_bytes);
  EXPECT_EQ(128u, c.blocks_per_chunk);
  EXPECT_EQ(4u, c.initial_chunk_count);
  EXPECT_EQ(1, c.numa_node);
  EXPECT_EQ(0u, gmr_memory_space_config_default(GMR_TIER_DISK, 0).stream_count);
  // The status values the tiers added (appended, stable).
  EXPECT_EQ(12, GMR_ERR_TIMEOUT);
  EXPECT_EQ(13, GMR_ERR_SHUTDOWN);
  EXPECT_EQ(14, GMR_ERR_NO_RESERVATION);
  EXPECT_EQ(15, GMR_ERR_WRONG_DEVICE);
}

}  // namespace
