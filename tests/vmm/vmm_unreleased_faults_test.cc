// Nothing is lost when the driver refuses to give memory back (issue 30,
// item 5). In both placements, with pinned backups and with pageable ones
// through the staging ring and copy threads (issue 33), every CUDA call
// that trim, sleep, wake and destroy make is refused in turn (the 1st,
// 2nd, ... of each kind, the kinds and numbers counted on a clean run
// first). After each refusal the
// books equal what the simulated device really holds (physical memory,
// device usage, pinned host memory), a refused cuMemRelease or cudaFreeHost
// is kept and reported (a status and the statistics' unreleased_ and
// unfreed_ fields), the next call without the fault gives it back, saved
// contents survive, and nothing is left on the device once the pool is
// destroyed.
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
#include "gmr/vmm_pool_resource.h"
#include "gmr/vmm_pool_sleep.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_sleep_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace {

using gmr_test::kMiB;
using gmr_test::kPage;
using gmr_test::Stats;

constexpr uint32_t kWeights = 1, kCache = 2, kScratch = 3;

using gmr_test::ExpectBooksMatchDevice;
using gmr_test::Fill;
using gmr_test::Placement;
using gmr_test::Same;

enum class Op { kTrim, kSleep, kWake, kDestroy };

const char *OpName(Op op) {
  switch (op) {
    case Op::kTrim:
      return "Trim";
    case Op::kSleep:
      return "Sleep";
    case Op::kWake:
      return "Wake";
    case Op::kDestroy:
      return "Destroy";
  }
  return "?";
}

// Pinned backups (one cudaHostAlloc each), or pageable ones through a
// 4 MiB staging ring (16 slots of 256 KiB: more than a ring's worth is
// copied, so slots are reused) with three copy threads.
gmr_vmm_pool_sleep_options SleepOptions(gmr_vmm_pool_host_kind host) {
  gmr_vmm_pool_sleep_options o = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  o.save_tag_mask = 1u << kWeights;
  o.keep_tag_mask = 1u << kScratch;
  o.host = host;
  o.staging_bytes = 4 * kMiB;
  o.copy_threads = 3;
  return o;
}

// Calls the operation must make on the populated pool (so that refusing
// each is tested): its driver calls, and the copies of sleep and wake.
std::vector<gmr_cuda_call> MustMake(Op op, gmr_vmm_pool_host_kind host) {
  const bool pinned = host == GMR_VMM_POOL_HOST_PINNED;
  switch (op) {
    case Op::kTrim:
      return {GMR_CUDA_CALL_MEM_UNMAP, GMR_CUDA_CALL_MEM_RELEASE};
    case Op::kSleep:
      if (pinned) {
        return {GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, GMR_CUDA_CALL_STREAM_CREATE,
                GMR_CUDA_CALL_HOST_ALLOC,         GMR_CUDA_CALL_MEMCPY_ASYNC,
                GMR_CUDA_CALL_STREAM_SYNCHRONIZE, GMR_CUDA_CALL_MEM_UNMAP,
                GMR_CUDA_CALL_MEM_RELEASE};
      }
      return {GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, GMR_CUDA_CALL_STREAM_CREATE,
              GMR_CUDA_CALL_HOST_ALLOC,         GMR_CUDA_CALL_EVENT_CREATE,
              GMR_CUDA_CALL_MEMCPY_ASYNC,       GMR_CUDA_CALL_EVENT_RECORD,
              GMR_CUDA_CALL_EVENT_SYNCHRONIZE,  GMR_CUDA_CALL_MEM_UNMAP,
              GMR_CUDA_CALL_MEM_RELEASE};
    case Op::kWake:
      if (pinned) {
        return {GMR_CUDA_CALL_MEM_CREATE,   GMR_CUDA_CALL_MEM_MAP,
                GMR_CUDA_CALL_MEM_SET_ACCESS, GMR_CUDA_CALL_MEMCPY_ASYNC,
                GMR_CUDA_CALL_STREAM_SYNCHRONIZE, GMR_CUDA_CALL_FREE_HOST};
      }
      return {GMR_CUDA_CALL_MEM_CREATE,    GMR_CUDA_CALL_MEM_MAP,
              GMR_CUDA_CALL_MEM_SET_ACCESS, GMR_CUDA_CALL_MEMCPY_ASYNC,
              GMR_CUDA_CALL_EVENT_RECORD,   GMR_CUDA_CALL_EVENT_SYNCHRONIZE,
              GMR_CUDA_CALL_STREAM_SYNCHRONIZE};
    case Op::kDestroy:
      return {GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, GMR_CUDA_CALL_MEM_UNMAP,
              GMR_CUDA_CALL_MEM_RELEASE, GMR_CUDA_CALL_MEM_ADDRESS_FREE};
  }
  return {};
}

struct Usage {
  gmr_vmm_pool_resource_stats stats;
  gmr_cuda_sim_vmm_usage vmm;
  gmr_cuda_sim_usage device, host;
};

Usage TakeUsage(gmr_vmm_pool_resource *pool) {
  Usage u;
  if (pool != nullptr) u.stats = Stats(pool);
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&u.vmm));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u.device));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_host_usage(&u.host));
  return u;
}

void ExpectNothingKept(gmr_vmm_pool_resource *pool) {
  const gmr_vmm_pool_resource_stats s = Stats(pool);
  EXPECT_EQ(0u, s.unreleased_bytes);
  EXPECT_EQ(0u, s.unreleased_handle_count);
  EXPECT_EQ(0u, s.unfreed_host_bytes);
  EXPECT_EQ(0u, s.unfreed_host_count);
}

class UnreleasedFaults
    : public gmr_test::SimTest,
      public ::testing::WithParamInterface<std::tuple<Placement, Op, gmr_vmm_pool_host_kind>> {
 protected:
  struct Buffer {
    void *ptr;
    size_t bytes;
    uint32_t tag;
    unsigned seed;
  };
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;
  std::vector<Buffer> buffers_;

  Placement placement() const { return std::get<0>(GetParam()); }
  Op op() const { return std::get<1>(GetParam()); }
  gmr_vmm_pool_host_kind host() const { return std::get<2>(GetParam()); }
  const gmr_vmm_pool_sleep_options sleep_ = SleepOptions(std::get<2>(GetParam()));

  void TearDown() override {
    if (pool_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    }
    gmr_test::SimTest::TearDown();
  }

  void Make() {
    const gmr_vmm_pool_resource_config c = gmr_test::SleepConfig(placement());
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_test::CreateVmm(placement(), &c, &pool_, &f)) << f.message;
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
  }
  void *Alloc(size_t bytes, uint32_t tag) {
    EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, tag));
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, bytes, 0, nullptr, &p, &f)) << f.message;
    return p;
  }
  // Kept, saved and discarded allocations of whole pages and below (the
  // small path in PAGES placement), and free memory between them.
  void Populate() {
    const struct {
      size_t bytes;
      uint32_t tag;
    } plan[] = {{2 * kPage, kScratch}, {kPage + 4096, kWeights}, {kMiB / 2, kWeights},
                {3 * kPage, kCache},   {5000, kWeights},         {2 * kPage, kWeights},
                {kPage, kCache}};
    unsigned seed = 40;
    for (const auto &b : plan) {
      void *p = Alloc(b.bytes, b.tag);
      Fill(p, b.bytes, seed);
      buffers_.push_back({p, b.bytes, b.tag, seed++});
    }
    // Free memory for trim and destroy to give back.
    Free(3);
    Free(buffers_.size() - 1);
  }
  void Free(size_t i) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, buffers_[i].ptr, buffers_[i].bytes, 0, nullptr));
    buffers_.erase(buffers_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  void FreeAll() {
    while (!buffers_.empty()) Free(buffers_.size() - 1);
  }
  // A fresh pool in the state the operation starts from.
  void Prepare() {
    buffers_.clear();
    Make();
    Populate();
    if (op() == Op::kWake) {
      gmr_failure f = GMR_FAILURE_INIT;
      ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &sleep_, &f)) << f.message;
    }
    if (op() == Op::kDestroy) FreeAll();
  }
  gmr_status Run(gmr_failure *f, size_t *released) {
    *released = 0;
    switch (op()) {
      case Op::kTrim:
        return gmr_resource_trim(r_, released);
      case Op::kSleep:
        return gmr_vmm_pool_resource_sleep(pool_, &sleep_, f);
      case Op::kWake:
        return gmr_vmm_pool_resource_wake(pool_, nullptr, f);
      case Op::kDestroy: {
        gmr_status st = gmr_resource_destroy(r_);
        if (st == GMR_OK) pool_ = nullptr;
        return st;
      }
    }
    return GMR_ERR_INTERNAL;
  }
  // What the refusal of a release or a free must leave: the call says so,
  // and what was refused is kept and counted, not forgotten.
  void ExpectKept(gmr_cuda_call call, gmr_status st, const gmr_failure &f) {
    const bool release = call == GMR_CUDA_CALL_MEM_RELEASE;
    if (!release && call != GMR_CUDA_CALL_FREE_HOST) return;
    EXPECT_EQ(GMR_ERR_CUDA, st) << "a refused give-back is never GMR_OK";
    ASSERT_NE(nullptr, pool_) << "destroy changed nothing";
    const gmr_vmm_pool_resource_stats s = Stats(pool_);
    if (release) {
      EXPECT_EQ(1u, s.unreleased_handle_count);
      EXPECT_LE(kPage, s.unreleased_bytes);
    } else {
      EXPECT_EQ(1u, s.unfreed_host_count);
      EXPECT_LT(0u, s.unfreed_host_bytes);
    }
    if (op() == Op::kSleep || op() == Op::kWake) {
      EXPECT_NE(nullptr, std::strstr(f.message, gmr_cuda_call_name(call))) << f.message;
      // Sleep gives free memory back first (a refusal there fails the
      // sleep); a refusal past that point, and wake's, leave the call done
      // all the same, and say so.
      const bool done = std::strstr(f.message, "all the same") != nullptr;
      if (done) ++done_all_the_same_;
      EXPECT_EQ(op() == Op::kSleep ? done : !done, gmr_vmm_pool_resource_is_asleep(pool_))
          << f.message;
    }
  }
  int done_all_the_same_ = 0;
  // The same call again, without the fault, finishes the job and gives
  // back what was kept.
  void Recover(gmr_status st) {
    gmr_failure f = GMR_FAILURE_INIT;
    size_t released = 0;
    switch (op()) {
      case Op::kTrim: {
        const Usage before = TakeUsage(pool_);
        EXPECT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
        EXPECT_EQ(before.vmm.physical_bytes - TakeUsage(pool_).vmm.physical_bytes, released);
        break;
      }
      case Op::kSleep:
        if (!gmr_vmm_pool_resource_is_asleep(pool_)) {
          EXPECT_NE(GMR_OK, st);
          ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &sleep_, &f)) << f.message;
        }
        // The wake asks for what the sleep could not release first.
        ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
        break;
      case Op::kWake:
        if (gmr_vmm_pool_resource_is_asleep(pool_)) {
          EXPECT_NE(GMR_OK, st);
          ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
        }
        if (Stats(pool_).unfreed_host_count > 0) {
          EXPECT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
        }
        break;
      case Op::kDestroy:
        if (pool_ != nullptr) {
          EXPECT_NE(GMR_OK, st);
          EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
          pool_ = nullptr;
        }
        return;
    }
    ExpectNothingKept(pool_);
    ExpectBooksMatchDevice(pool_);
  }
  void ExpectContents() {
    const bool slept = op() == Op::kSleep || op() == Op::kWake;
    for (const Buffer &b : buffers_) {
      if (slept && b.tag == kCache) continue; /* discarded by the sleep */
      EXPECT_TRUE(Same(b.ptr, b.bytes, b.seed))
          << "buffer of " << b.bytes << " bytes, tag " << b.tag;
    }
  }
  // Free everything and destroy: nothing may stay on the device or pinned.
  void Finish() {
    if (pool_ != nullptr) {
      ExpectContents();
      FreeAll();
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
      pool_ = nullptr;
    }
    buffers_.clear();
    const Usage u = TakeUsage(nullptr);
    EXPECT_EQ(0u, u.vmm.physical_count);
    EXPECT_EQ(0u, u.vmm.reservation_count);
    EXPECT_EQ(0u, u.device.used_bytes);
    EXPECT_EQ(0u, u.host.used_bytes);
  }
};

TEST_P(UnreleasedFaults, EveryCallRefusedInTurn) {
  // A clean run counts the calls of each kind the operation makes.
  Prepare();
  const gmr_test::CallCounts before = gmr_test::TakeCallCounts();
  gmr_failure f = GMR_FAILURE_INIT;
  size_t released = 0;
  ASSERT_EQ(GMR_OK, Run(&f, &released)) << f.message;
  const gmr_test::CallCounts after = gmr_test::TakeCallCounts();
  if (pool_ != nullptr) {
    ExpectBooksMatchDevice(pool_);
    Recover(GMR_OK); /* wakes what the sleep put to sleep */
  }
  Finish();
  for (gmr_cuda_call call : MustMake(op(), host())) {
    EXPECT_LT(before[call], after[call]) << OpName(op()) << " makes no "
                                         << gmr_cuda_call_name(call);
  }
  int refused = 0;
  for (int c = 0; c < GMR_CUDA_CALL_COUNT; ++c) {
    const gmr_cuda_call call = static_cast<gmr_cuda_call>(c);
    for (uint64_t k = 0; k < after[c] - before[c]; ++k) {
      SCOPED_TRACE(std::string(gmr_cuda_call_name(call)) + " number " + std::to_string(k + 1));
      Prepare();
      const Usage pre = TakeUsage(pool_);
      ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(call, k, 1, gmr_test::RefusalFor(call)));
      f = GMR_FAILURE_INIT;
      const gmr_status st = Run(&f, &released);
      ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
      ++refused;
      ExpectKept(call, st, f);
      if (pool_ != nullptr) {
        ExpectBooksMatchDevice(pool_);
        if (op() == Op::kTrim) {
          EXPECT_EQ(pre.vmm.physical_bytes - TakeUsage(pool_).vmm.physical_bytes, released)
              << "trim reports only what went back";
        }
        Recover(st);
      }
      Finish();
    }
  }
  EXPECT_LT(3, refused);
  // Pageable backups are freed without the driver: no refusal at a wake's
  // end there.
  if (op() == Op::kSleep || (op() == Op::kWake && host() == GMR_VMM_POOL_HOST_PINNED)) {
    EXPECT_LT(0, done_all_the_same_) << "a refusal after which the call was done";
  }
}

using Param = std::tuple<Placement, Op, gmr_vmm_pool_host_kind>;

std::string ParamName(const ::testing::TestParamInfo<Param> &info) {
  return std::string(std::get<0>(info.param) == Placement::kPages ? "Pages" : "Fine") +
         OpName(std::get<1>(info.param)) +
         (std::get<2>(info.param) == GMR_VMM_POOL_HOST_PINNED ? "Pinned" : "Pageable");
}

INSTANTIATE_TEST_SUITE_P(
    PlacementsAndCalls, UnreleasedFaults,
    ::testing::Combine(::testing::Values(Placement::kPages, Placement::kFine),
                       ::testing::Values(Op::kTrim, Op::kSleep, Op::kWake, Op::kDestroy),
                       ::testing::Values(GMR_VMM_POOL_HOST_PINNED, GMR_VMM_POOL_HOST_PAGEABLE)),
    ParamName);

}  // namespace
