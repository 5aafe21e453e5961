// The stream-ordering property through memory tiers: a GPU space over a pool
// (and over vmm), every stream of the program bound to a reservation of its
// own, random programs checked by the oracle of tests/support/order_oracle.h
// (the space's limiting counters and live-allocation table must not change
// what the pool below promises).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "gmr/sim/cuda_sim.h"
#include "gmr/tiers/memory_space.h"
#include "gmr/tiers/reservation.h"
#include "gmr/tiers/tier_manager.h"
#include "tests/support/order_oracle.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t kGiB = static_cast<size_t>(1) << 30;

struct Reservations {
  gmr_tier_manager *manager = nullptr;
  gmr_memory_space_id space{};
  std::map<gmr_stream, gmr_reservation_id> bound;
};

// Each new stream gets a reservation of 2 GiB bound to it; a stream about to
// be destroyed gives its reservation back.
void OnStream(void *ctx, gmr_stream stream, bool created) {
  auto *r = static_cast<Reservations *>(ctx);
  if (created) {
    gmr_reservation_strategy strategy = gmr_reservation_strategy_space(r->space);
    gmr_reservation_id id = 0;
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_tier_manager_try_reserve(r->manager, &strategy, 2 * kGiB, &id, &f))
        << f.message;
    ASSERT_EQ(GMR_OK, gmr_reservation_bind_stream(r->manager, id, stream, nullptr, &f))
        << f.message;
    r->bound[stream] = id;
    return;
  }
  auto it = r->bound.find(stream);
  ASSERT_NE(r->bound.end(), it);
  EXPECT_EQ(GMR_OK, gmr_reservation_unbind_stream(r->manager, it->second));
  EXPECT_EQ(GMR_OK, gmr_reservation_release(r->manager, it->second, nullptr));
  r->bound.erase(it);
}

class TierStreamOrder : public gmr_test::SimTest, public ::testing::WithParamInterface<const char *> {};

TEST_P(TierStreamOrder, ReservationsOverAStreamOrderedStack) {
  gmr_memory_space_config c = gmr_memory_space_config_default(GMR_TIER_GPU, 0);
  c.capacity_bytes = 40 * kGiB;
  c.reservation_limit_fraction = 1.0;
  c.stream_count = 0;
  std::snprintf(c.stack_spec, sizeof c.stack_spec, "%s", GetParam());
  uint64_t allocations = 0;
  for (int i = 0; i < 200; ++i) {
    // A manager per program: a space counts every stream it ever saw
    // (max_stream_slots), and handles are not reused under the sanitizers.
    Reservations r;
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_tier_manager_create(&c, 1, &r.manager, &f)) << f.message;
    r.space = c.id;
    gmr_resource *gpu = gmr_memory_space_as_resource(gmr_tier_manager_get_space(r.manager, c.id));
    order_program_options opt = ORDER_PROGRAM_OPTIONS_DEFAULT;
    opt.same_stream_free = true; // the space books a free against its allocating stream
    opt.on_stream = OnStream;
    opt.on_stream_ctx = &r;
    order_source src = order_source_seed(400000 + static_cast<uint64_t>(i));
    order_program_result result;
    bool ok = order_program_run(gpu, &src, &opt, &result);
    ASSERT_TRUE(ok) << GetParam() << ", seed " << 400000 + i << ": "
                    << (result.error[0] != '\0' ? result.error : result.first_violation);
    allocations += result.allocations;
    EXPECT_TRUE(r.bound.empty());
    ASSERT_EQ(GMR_OK, gmr_tier_manager_destroy(r.manager));
  }
  EXPECT_GT(allocations, 200u * 20);
}

INSTANTIATE_TEST_SUITE_P(Stacks, TierStreamOrder,
                         ::testing::Values("pool > cuda", "vmm", "fixed_block(block=64KiB) > cuda"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           std::string name = info.param;
                           return name.substr(0, name.find_first_of(" ("));
                         });

}  // namespace
