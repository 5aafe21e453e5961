// Every CUDA call of commit, decommit, free_range, and of sleep and wake of
// a pool with a reserved range (issue 33, items 3 and 5), refused in turn:
// the 1st, 2nd, ... call of each kind a clean run makes, in both
// placements, with pageable backups through the staging ring and with
// pinned ones. After each refusal the call gives a clear status naming the
// call, and the pool, the simulated device, pinned host memory and pageable
// host memory (counted where it is mapped) are exactly as before; but a
// cuMemRelease or cudaFreeHost refused after the point of return, which
// leaves the call done "all the same" with the memory kept. Then the call
// succeeds without the fault, one more sleep and wake cycle gives back what
// was kept, and everything (books, device, pinned, pageable, contents)
// equals the same sequence run without a fault.
#include <gtest/gtest.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/vmm_pool_range.h"
#include "gmr/vmm_pool_sleep.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/host_probe.h"
#include "tests/vmm/vmm_sleep_fixture.h"

namespace {

using gmr_test::kMiB;
using gmr_test::kPage;
using gmr_test::Placement;

constexpr uint32_t kWeights = 1, kKv = 2;
constexpr size_t kWeightBytes = 300 * 1024;

enum class Op { kCommit, kDecommit, kFree, kSleep, kWake };

const char *OpName(Op op) {
  switch (op) {
    case Op::kCommit:
      return "Commit";
    case Op::kDecommit:
      return "Decommit";
    case Op::kFree:
      return "Free";
    case Op::kSleep:
      return "Sleep";
    case Op::kWake:
      return "Wake";
  }
  return "?";
}

using Param = std::tuple<Placement, Op, gmr_vmm_pool_host_kind>;

class RangeFaults : public gmr_test::SimTest, public ::testing::WithParamInterface<Param> {
 protected:
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;
  void *weights_ = nullptr;
  char *kv_ = nullptr;

  Placement placement() const { return std::get<0>(GetParam()); }
  Op op() const { return std::get<1>(GetParam()); }
  gmr_vmm_pool_sleep_options Sleep(bool all) const {
    gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
    o.save_all = all;
    o.save_tag_mask = (1u << kWeights) | (1u << kKv);
    o.host = std::get<2>(GetParam());
    o.staging_bytes = 8 * kMiB; /* 16 slots of 512 KiB, some 24 chunks: slots reused */
    o.copy_threads = 2;
    return o;
  }

  void TearDown() override {
    if (pool_ != nullptr) Finish();
    gmr_test::SimTest::TearDown();
  }
  // A pool with weights and a range of 10 pages, pages [0, 3) and [5, 7)
  // committed, in the state the operation starts from.
  void Prepare() {
    const gmr_vmm_pool_resource_config c = gmr_test::SleepConfig(placement());
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_test::CreateVmm(placement(), &c, &pool_, &f)) << f.message;
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, kWeights));
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, kWeightBytes, 0, nullptr, &weights_));
    gmr_test::Fill(weights_, kWeightBytes, 1);
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, kKv));
    void *base = nullptr;
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_reserve_range(pool_, 10 * kPage, 0, &base, &f));
    kv_ = static_cast<char *>(base);
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_commit(pool_, kv_, 3 * kPage, &f)) << f.message;
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_commit(pool_, kv_ + 5 * kPage, 2 * kPage, &f));
    gmr_test::Fill(kv_, kPage, 2);
    gmr_test::Fill(kv_ + kPage, 2 * kPage, 4);
    gmr_test::Fill(kv_ + 5 * kPage, 2 * kPage, 3);
    // A sleep and wake first, so that the ring and stream exist as in a
    // server's later cycles (the first sleep's own calls: Sleep's test).
    if (op() != Op::kSleep) Cycle();
    if (op() == Op::kWake) {
      const gmr_vmm_pool_sleep_options o = Sleep(false);
      ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
    }
  }
  void Cycle() {
    gmr_failure f = GMR_FAILURE_INIT;
    const gmr_vmm_pool_sleep_options o = Sleep(true);
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &o, &f)) << f.message;
    ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  }
  gmr_status Run(gmr_failure *f) {
    switch (op()) {
      case Op::kCommit:
        return gmr_vmm_pool_resource_commit(pool_, kv_, 8 * kPage, f);
      case Op::kDecommit:
        return gmr_vmm_pool_resource_decommit(pool_, kv_ + kPage, 2 * kPage, f);
      case Op::kFree:
        return gmr_vmm_pool_resource_free_range(pool_, kv_, f);
      case Op::kSleep: {
        const gmr_vmm_pool_sleep_options o = Sleep(false);
        return gmr_vmm_pool_resource_sleep(pool_, &o, f);
      }
      case Op::kWake:
        return gmr_vmm_pool_resource_wake(pool_, nullptr, f);
    }
    return GMR_ERR_INTERNAL;
  }
  // Whether the operation is done (after a success or "all the same").
  bool Done() {
    gmr_vmm_pool_range_info info = GMR_VMM_POOL_RANGE_INFO_INIT;
    switch (op()) {
      case Op::kCommit:
        return gmr_vmm_pool_resource_get_range_info(pool_, kv_, 0, &info) == GMR_OK &&
               info.committed_bytes == 8 * kPage;
      case Op::kDecommit:
        return gmr_vmm_pool_resource_get_range_info(pool_, kv_, 0, &info) == GMR_OK &&
               info.committed_bytes == 3 * kPage;
      case Op::kFree:
        return gmr_vmm_pool_resource_get_range_info(pool_, kv_, 0, &info) ==
               GMR_ERR_UNKNOWN_POINTER;
      case Op::kSleep:
        return gmr_vmm_pool_resource_is_asleep(pool_);
      case Op::kWake:
        return !gmr_vmm_pool_resource_is_asleep(pool_);
    }
    return false;
  }
  // The operation again without the fault if it is not done, then a wake
  // (if asleep) and one more cycle, which give back what was kept.
  void Settle() {
    gmr_failure f = GMR_FAILURE_INIT;
    if (!Done()) {
      ASSERT_EQ(GMR_OK, Run(&f)) << f.message;
    }
    if (gmr_vmm_pool_resource_is_asleep(pool_)) {
      ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
    }
    Cycle();
  }
  void ExpectContents() {
    EXPECT_TRUE(gmr_test::Same(weights_, kWeightBytes, 1));
    if (op() == Op::kFree) return;
    EXPECT_TRUE(gmr_test::Same(kv_, kPage, 2)) << "page 0 is never decommitted";
    if (op() != Op::kDecommit) {
      EXPECT_TRUE(gmr_test::Same(kv_ + kPage, 2 * kPage, 4));
    }
    EXPECT_TRUE(gmr_test::Same(kv_ + 5 * kPage, 2 * kPage, 3)) << "a commit keeps these";
  }
  // Free everything and destroy: nothing stays on the device, pinned or
  // pageable.
  void Finish() {
    ExpectContents();
    if (op() != Op::kFree || !Done()) {
      EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_free_range(pool_, kv_, nullptr));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, weights_, kWeightBytes, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    pool_ = nullptr;
    gmr_cuda_sim_vmm_usage vmm;
    gmr_cuda_sim_usage device, host;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&vmm));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &device));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_host_usage(&host));
    EXPECT_EQ(0u, vmm.physical_count);
    EXPECT_EQ(0u, vmm.reservation_count);
    EXPECT_EQ(0u, device.used_bytes);
    EXPECT_EQ(0u, host.used_bytes);
    EXPECT_EQ(0u, gmr_test_live_pageable_bytes());
  }
};

TEST_P(RangeFaults, EveryCallRefusedInTurn) {
  // A clean run: the calls the operation makes, and the state it ends in.
  Prepare();
  const gmr_test::CallCounts before = gmr_test::TakeCallCounts();
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, Run(&f)) << f.message;
  const gmr_test::CallCounts after = gmr_test::TakeCallCounts();
  gmr_test::ExpectBooksMatchDevice(pool_);
  Settle();
  const auto clean = gmr_test::TakeSnapshot(pool_).Key();
  Finish();
  int refused = 0;
  for (int c = 0; c < GMR_CUDA_CALL_COUNT; ++c) {
    const gmr_cuda_call call = static_cast<gmr_cuda_call>(c);
    for (uint64_t k = 0; k < after[c] - before[c]; ++k) {
      SCOPED_TRACE(std::string(gmr_cuda_call_name(call)) + " number " + std::to_string(k + 1));
      Prepare();
      const gmr_test::SleepSnapshot pre = gmr_test::TakeSnapshot(pool_);
      ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(call, k, 1, gmr_test::RefusalFor(call)));
      f = GMR_FAILURE_INIT;
      const gmr_status st = Run(&f);
      ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
      ++refused;
      gmr_test::ExpectBooksMatchDevice(pool_);
      if (st == GMR_OK) {
        /* A refusal the call may absorb (a cuMemRelease asked again, a
         * device attribute): the result must be the clean one. */
        EXPECT_TRUE(Done());
      } else if (std::strstr(f.message, "all the same") != nullptr) {
        EXPECT_EQ(GMR_ERR_CUDA, st);
        EXPECT_TRUE(call == GMR_CUDA_CALL_MEM_RELEASE || call == GMR_CUDA_CALL_FREE_HOST ||
                    call == GMR_CUDA_CALL_MEM_ADDRESS_FREE)
            << f.message;
        EXPECT_TRUE(Done()) << "done all the same";
        const gmr_vmm_pool_resource_stats s = gmr_test::Stats(pool_);
        /* A freed range's refused addresses stay reserved, counted. */
        const size_t kept_va = s.range_count == 0 ? s.range_reserved_bytes : 0;
        EXPECT_LT(0u, s.unreleased_bytes + s.range_unreleased_bytes + s.unfreed_host_bytes +
                          kept_va)
            << "what was refused is kept";
      } else {
        EXPECT_NE(nullptr, std::strstr(f.message, gmr_cuda_call_name(call))) << f.message;
        EXPECT_EQ(pre.Key(), gmr_test::TakeSnapshot(pool_).Key())
            << "was:\n" << pre.layout << "\nnow:\n" << gmr_test::Layout(pool_);
      }
      Settle();
      EXPECT_EQ(clean, gmr_test::TakeSnapshot(pool_).Key()) << "exact after a later success";
      Finish();
    }
  }
  EXPECT_LT(2, refused);
}

std::string ParamName(const ::testing::TestParamInfo<Param> &info) {
  return std::string(std::get<0>(info.param) == Placement::kPages ? "Pages" : "Fine") +
         OpName(std::get<1>(info.param)) +
         (std::get<2>(info.param) == GMR_VMM_POOL_HOST_PINNED ? "Pinned" : "Pageable");
}

INSTANTIATE_TEST_SUITE_P(
    PlacementsAndCalls, RangeFaults,
    ::testing::Combine(::testing::Values(Placement::kPages, Placement::kFine),
                       ::testing::Values(Op::kCommit, Op::kDecommit, Op::kFree, Op::kSleep,
                                         Op::kWake),
                       ::testing::Values(GMR_VMM_POOL_HOST_PAGEABLE, GMR_VMM_POOL_HOST_PINNED)),
    ParamName);

}  // namespace
