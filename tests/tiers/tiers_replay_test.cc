// tools/tiers_replay on the simulation: a small trace whose every move is
// known in advance (downgrades at the trigger down to the stop level, an
// upgrade when room comes back, a request larger than the reservation served
// from HOST), with and without copies; bad options; and the bundled
// multistream trace under a reservation of 30 % of its peak.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gmr/sim/cuda_sim.h"
#include "tools/replay/trace.h"
#include "tools/tiers_replay/tiers_replay.h"

namespace {

constexpr uint64_t KiB = 1024;

// A = B = C = 400 KiB, D = 2 MiB; the reservation is 1 MiB: trigger 870.4 KiB,
// stop 665.6 KiB.
const char kTrace[] =
    "action,addr,size,stream,time_us\n"
    "alloc,4096,409600,0,1\n"          // A: used 400 KiB
    "alloc,1048576,409600,0,2\n"       // B: used 800 KiB
    "alloc,2097152,409600,0,3\n"       // C: 1200 > 870 -> A and B move down; used 400
    "free_requested,2097152,409600,0,4\n"  // C: used 0 < stop -> B comes back up (400 KiB)
    "free_requested,4096,409600,0,5\n"     // A: freed on HOST
    "free_requested,1048576,409600,0,6\n"  // B: freed on the GPU
    "alloc,8388608,2097152,0,7\n"      // D: larger than the reservation -> HOST
    "free_requested,8388608,2097152,0,8\n";

class TiersReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    gmr_cuda_sim_config sc = GMR_CUDA_SIM_CONFIG_DEFAULT;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_enable(&sc));
    const char *dir = std::getenv("TEST_TMPDIR");
    path_ = std::string(dir != nullptr ? dir : "/tmp") + "/tiers_replay_trace.csv";
    FILE *f = std::fopen(path_.c_str(), "w");
    ASSERT_NE(nullptr, f);
    std::fputs(kTrace, f);
    std::fclose(f);
    char err[256];
    ASSERT_EQ(GMR_OK, replay_trace_read(path_.c_str(), nullptr, &trace_, err, sizeof err)) << err;
  }
  void TearDown() override {
    replay_trace_destroy(trace_);
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_disable()) << "the replay left simulated objects alive";
  }
  tiers_replay_options Options() {
    tiers_replay_options o = TIERS_REPLAY_OPTIONS_DEFAULT;
    o.gpu_reservation_bytes = 1024 * KiB;
    o.host_bytes = 8 * 1024 * KiB;
    o.host_block_bytes = 64 * KiB;
    o.upgrade = true;
    return o;
  }
  std::string path_;
  replay_trace *trace_ = nullptr;
};

TEST_F(TiersReplay, EveryMoveOfAKnownTrace) {
  for (bool copy : {false, true}) {
    tiers_replay_options o = Options();
    o.copy = copy;
    tiers_replay_result r;
    char err[256];
    ASSERT_EQ(GMR_OK, tiers_replay_run(trace_, &o, &r, err, sizeof err)) << err;
    EXPECT_EQ(1024 * KiB, r.reservation_bytes);
    EXPECT_EQ(4u, r.alloc_count);
    EXPECT_EQ(4u, r.free_count);
    EXPECT_EQ(1u, r.episode_count);
    EXPECT_EQ(2u, r.downgraded_count);
    EXPECT_EQ(800 * KiB, r.downgraded_bytes);
    EXPECT_EQ(400 * KiB, r.largest_downgraded_bytes);
    EXPECT_EQ(1u, r.upgraded_count);
    EXPECT_EQ(400 * KiB, r.upgraded_bytes);
    EXPECT_EQ(1u, r.host_born_count);
    EXPECT_EQ(2048 * KiB, r.host_born_bytes);
    EXPECT_EQ(2u, r.freed_on_host_count);  // A and D
    EXPECT_EQ(800 * KiB, r.peak_gpu_bytes);
    EXPECT_EQ(0u, r.refusal_count);
    EXPECT_EQ(copy ? 1200 * KiB : 0u, r.copied_bytes);
    EXPECT_GE(r.peak_host_bytes, 2048 * KiB);
    // HOST chunks (64 blocks of 64 KiB) pinned on demand: one, first for A
    // and B (7 blocks each), then for D (32 blocks) once they were gone.
    EXPECT_EQ(1u, r.host_chunk_count);
    EXPECT_EQ(4096 * KiB, r.host_pinned_bytes);
    tiers_replay_print(stdout, trace_, &o, &r);
  }
}

TEST_F(TiersReplay, HostPrepinPinsTheWholeHostSpaceAtBuild) {
  tiers_replay_options o = Options();
  o.host_bytes = 12 * 1024 * KiB;  // three chunks of 4 MiB
  o.host_prepin = true;
  tiers_replay_result r;
  char err[256];
  ASSERT_EQ(GMR_OK, tiers_replay_run(trace_, &o, &r, err, sizeof err)) << err;
  EXPECT_EQ(3u, r.host_chunk_count) << "all at build, none on demand";
  EXPECT_EQ(12 * 1024 * KiB, r.host_pinned_bytes);
  EXPECT_EQ(2u, r.downgraded_count);  // the same moves
  EXPECT_EQ(1u, r.host_born_count);
  tiers_replay_print(stdout, trace_, &o, &r);
}

TEST_F(TiersReplay, WithoutUpgradesBuffersStayDown) {
  tiers_replay_options o = Options();
  o.upgrade = false;
  tiers_replay_result r;
  char err[256];
  ASSERT_EQ(GMR_OK, tiers_replay_run(trace_, &o, &r, err, sizeof err)) << err;
  EXPECT_EQ(2u, r.downgraded_count);
  EXPECT_EQ(0u, r.upgraded_count);
  EXPECT_EQ(3u, r.freed_on_host_count);  // A, B and D
}

TEST_F(TiersReplay, TooLittleHostMemoryFailsWithAMessageAndLeaksNothing) {
  tiers_replay_options o = Options();
  o.host_bytes = 256 * KiB;  // not even one downgraded buffer fits
  tiers_replay_result r;
  char err[256];
  EXPECT_NE(GMR_OK, tiers_replay_run(trace_, &o, &r, err, sizeof err));
  EXPECT_NE(nullptr, std::strstr(err, "line 4")) << err;
  EXPECT_NE(nullptr, std::strstr(err, "--host-bytes")) << err;
  // TearDown checks that nothing simulated stayed alive.
}

TEST_F(TiersReplay, BadOptions) {
  tiers_replay_options o = Options();
  o.stop = 0.9;  // above the trigger
  tiers_replay_result r;
  char err[256];
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, tiers_replay_run(trace_, &o, &r, err, sizeof err));
  EXPECT_NE(nullptr, std::strstr(err, "stop")) << err;
  o = Options();
  o.gpu_stack = "pool > cuda(kind=bogus)";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, tiers_replay_run(trace_, &o, &r, err, sizeof err));
  EXPECT_NE(nullptr, std::strstr(err, "bogus")) << err;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, tiers_replay_run(nullptr, &o, &r, err, sizeof err));
}

TEST(TiersReplayBundled, MultistreamUnderAThirdOfItsPeak) {
  gmr_cuda_sim_config sc = GMR_CUDA_SIM_CONFIG_DEFAULT;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_enable(&sc));
  const char *src = std::getenv("TEST_SRCDIR");
  std::string path = std::string(src != nullptr ? src : ".") + "/gmr/tools/traces/multistream.csv.gz";
  replay_trace *t = nullptr;
  char err[512];
  ASSERT_EQ(GMR_OK, replay_trace_read(path.c_str(), nullptr, &t, err, sizeof err)) << err;
  tiers_replay_options o = TIERS_REPLAY_OPTIONS_DEFAULT;
  o.gpu_fraction = 0.3;
  o.copy = false;
  o.upgrade = true;
  tiers_replay_result r;
  ASSERT_EQ(GMR_OK, tiers_replay_run(t, &o, &r, err, sizeof err)) << err;
  EXPECT_GT(r.downgraded_count, 0u);
  EXPECT_LE(r.peak_gpu_bytes, r.reservation_bytes);
  EXPECT_EQ(t->summary.alloc_count, r.alloc_count);
  tiers_replay_print(stdout, t, &o, &r);
  replay_trace_destroy(t);
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_disable());
}

}  // namespace
