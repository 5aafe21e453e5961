// tests/vmm/vmm_test_util.h: helpers for the tests of the VMM resources
// (vmm and vmm_pages): a pool on the simulation with small VA chunks, either
// resource made from one config, and the region layout written in VPMM's
// notation, one page per unit:
//   [+N] the allocation just made   [N] another live allocation
//   [-N] free                       [*N] hole (unmapped)
//   [~N] zombie (double-mapped, awaiting its event)   [zN] asleep
// The hole at the end of the last VA chunk (VPMM's "[...]") is left out.
#ifndef GMR_TESTS_VMM_VMM_TEST_UTIL_H_
#define GMR_TESTS_VMM_VMM_TEST_UTIL_H_

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmr/vmm_pages_resource.h"
#include "gmr/vmm_pool_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/vmm_resource.h"
#include "tests/support/check_stack.h"

namespace gmr_test {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kPage = 2 * kMiB;

// The simulation's count of every CUDA call kind, for the tests that refuse
// each call an operation makes in turn.
using CallCounts = std::array<uint64_t, GMR_CUDA_CALL_COUNT>;

inline CallCounts TakeCallCounts() {
  CallCounts c{};
  for (int i = 0; i < GMR_CUDA_CALL_COUNT; ++i) {
    c[i] = gmr_cuda_sim_get_call_count(static_cast<gmr_cuda_call>(i));
  }
  return c;
}

// One allocation of a page and a bit per thread from four threads on their
// per-thread default streams, which land in the threads' home shards; each
// filled with 0x40 + its index.
inline std::vector<void *> AllocateFromFourThreads(gmr_resource *r) {
  std::vector<void *> ptrs(4, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, kPage + 512 * static_cast<size_t>(i), 0,
                                              (gmr_stream)cudaStreamPerThread, &ptrs[i]));
      std::memset(ptrs[i], 0x40 + i, kPage);
    });
  }
  for (auto &t : threads) t.join();
  return ptrs;
}

// What a refused call answers: the driver's codes for cu* calls, the
// runtime's for the others (each out of memory where the call allocates).
inline int RefusalFor(gmr_cuda_call call) {
  if (call == GMR_CUDA_CALL_MEM_CREATE) return CUDA_ERROR_OUT_OF_MEMORY;
  if (std::strncmp(gmr_cuda_call_name(call), "cuda", 4) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (call == GMR_CUDA_CALL_HOST_ALLOC) return cudaErrorMemoryAllocation;
  return cudaErrorLaunchFailure;
}

inline std::vector<gmr_vmm_pool_region> Regions(gmr_vmm_pool_resource *pool) {
  size_t n = 0;
  EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_get_regions(pool, nullptr, 0, &n));
  std::vector<gmr_vmm_pool_region> v(n);
  size_t m = 0;
  EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_get_regions(pool, v.data(), v.size(), &m));
  EXPECT_EQ(n, m);
  return v;
}

inline std::string Layout(gmr_vmm_pool_resource *pool, const void *current = nullptr,
                          size_t page_bytes = kPage) {
  std::vector<gmr_vmm_pool_region> v = Regions(pool);
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    const gmr_vmm_pool_region &r = v[i];
    bool trailing = i + 1 == v.size() && r.kind == GMR_VMM_POOL_REGION_HOLE;
    if (trailing) break;
    std::string n = std::to_string(r.bytes / page_bytes);
    switch (r.kind) {
      case GMR_VMM_POOL_REGION_LIVE:
        s += "[" + std::string(r.addr == current ? "+" : "") + n + "]";
        break;
      case GMR_VMM_POOL_REGION_FREE:
        s += "[-" + n + "]";
        break;
      case GMR_VMM_POOL_REGION_HOLE:
        s += "[*" + n + "]";
        break;
      case GMR_VMM_POOL_REGION_ZOMBIE:
        s += "[~" + n + "]";
        break;
      case GMR_VMM_POOL_REGION_ASLEEP:
        s += "[z" + n + "]";
        break;
    }
  }
  return s;
}

inline void ExpectInvariants(gmr_vmm_pool_resource *pool) {
  char err[256];
  EXPECT_EQ(GMR_OK, check_stack(gmr_vmm_pool_resource_as_resource(pool), err, sizeof err)) << err;
}

inline gmr_vmm_pool_resource_stats Stats(gmr_vmm_pool_resource *pool) {
  gmr_vmm_pool_resource_stats s = GMR_VMM_POOL_RESOURCE_STATS_INIT;
  EXPECT_EQ(GMR_OK, gmr_vmm_pool_resource_get_stats(pool, &s));
  return s;
}

// The two VMM resources, for the tests that run on both: vmm_pages (VPMM's
// page placement) and vmm (fine placement).
enum class Placement { kPages, kFine };

// Create the resource of `placement` from `c`.
inline gmr_status CreateVmm(Placement placement, const gmr_vmm_pool_resource_config *c,
                            gmr_vmm_pool_resource **out, gmr_failure *failure) {
  return placement == Placement::kFine ? gmr_vmm_resource_create(c, out, failure)
                                       : gmr_vmm_pages_resource_create(c, out, failure);
}

// A config for tests: 2 MiB pages, VA chunks of `va_pages` pages.
inline gmr_vmm_pool_resource_config TestConfig(size_t va_pages = 64, size_t initial_pages = 0) {
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  c.va_chunk_bytes = va_pages * kPage;
  c.initial_pages = initial_pages;
  return c;
}

}  // namespace gmr_test

#endif  // GMR_TESTS_VMM_VMM_TEST_UTIL_H_
