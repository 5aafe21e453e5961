// tests/vmm/vmm_fine_fixture.h: a vmm (fine placement) on the
// simulation, for the vmm_fine tests: exact growth and one physical
// allocation per growth unless a test asks otherwise, invariants checked at
// the end, and a count of the driver's VMM calls.
#ifndef GMR_TESTS_VMM_VMM_FINE_FIXTURE_H_
#define GMR_TESTS_VMM_VMM_FINE_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>

#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/vmm_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace gmr_test {

// Fine placement, VA chunks of `va_pages` pages, growth exactly as needed,
// one handle per growth, free memory moved above the peak of live bytes.
inline gmr_vmm_pool_resource_config FineConfig(size_t va_pages = 64) {
  gmr_vmm_pool_resource_config c = TestConfig(va_pages);
  c.growth_percent = 0;
  c.remap_permille = 0;
  c.handle_divisor = 0;
  return c;
}

// Every VMM driver call (cuMem*) made so far.
inline uint64_t VmmCalls() {
  uint64_t n = 0;
  for (gmr_cuda_call c :
       {GMR_CUDA_CALL_MEM_CREATE, GMR_CUDA_CALL_MEM_MAP, GMR_CUDA_CALL_MEM_SET_ACCESS,
        GMR_CUDA_CALL_MEM_UNMAP, GMR_CUDA_CALL_MEM_RELEASE, GMR_CUDA_CALL_MEM_ADDRESS_RESERVE,
        GMR_CUDA_CALL_MEM_ADDRESS_FREE}) {
    n += gmr_cuda_sim_get_call_count(c);
  }
  return n;
}

class FineTest : public SimTest {
 protected:
  gmr_vmm_pool_resource *pool_ = nullptr;
  gmr_resource *r_ = nullptr;

  void Make(gmr_vmm_pool_resource_config c = FineConfig()) {
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_vmm_resource_create(&c, &pool_, &f)) << f.message;
    r_ = gmr_vmm_pool_resource_as_resource(pool_);
  }
  void TearDown() override {
    if (pool_ != nullptr) {
      ExpectInvariants(pool_);
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    }
    SimTest::TearDown();
  }
  void *Alloc(size_t bytes, gmr_stream s = nullptr, size_t alignment = 0) {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, bytes, alignment, s, &p, &f)) << f.message;
    return p;
  }
  void Free(void *p, size_t bytes, gmr_stream s = nullptr) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, bytes, 0, s));
  }
  size_t Held() { return Stats(pool_).mapped_bytes; }
  gmr_cuda_sim_usage Device() {
    gmr_cuda_sim_usage u;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
    return u;
  }
};

}  // namespace gmr_test

#endif  // GMR_TESTS_VMM_VMM_FINE_FIXTURE_H_
