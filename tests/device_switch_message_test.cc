// Issue 30: a resource that makes its device current around a call reads
// the caller's device first (cudaGetDevice), then switches
// (cudaSetDevice). A refused cudaGetDevice was reported as "cudaSetDevice
// failed". Each refusal, on every resource kind that switches, must name the
// call that failed, keep the driver's code, and change nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"

namespace {

class DeviceSwitchMessage : public gmr_test::SimTest,
                            public ::testing::WithParamInterface<const char *> {
 protected:
  DeviceSwitchMessage() { sim_config_.device_count = 2; }
  void SetUp() override {
    SimTest::SetUp();
    // The stack belongs to device 1; the caller works on device 0, so every
    // call the stack makes switches devices.
    ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
    gmr_spec_error error;
    ASSERT_EQ(GMR_OK, gmr_stack_create(GetParam(), &stack_, &error)) << error.message;
    ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
    r_ = gmr_stack_as_resource(stack_);
  }
  void TearDown() override {
    if (stack_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack_));
    }
    SimTest::TearDown();
  }
  static int Current() {
    int device = -1;
    EXPECT_EQ(GMR_OK, gmr_device_get_current(&device));
    return device;
  }
  gmr_stack *stack_ = nullptr;
  gmr_resource *r_ = nullptr;
};

TEST_P(DeviceSwitchMessage, EachRefusedCallIsNamedInTheFailure) {
  struct Fault {
    gmr_cuda_call call;
    int error;
    const char *named;
    const char *not_named;
  };
  const Fault faults[] = {
      {GMR_CUDA_CALL_GET_DEVICE, 999 /* cudaErrorUnknown */, "cudaGetDevice failed",
       "cudaSetDevice"},
      {GMR_CUDA_CALL_SET_DEVICE, 101 /* cudaErrorInvalidDevice */, "cudaSetDevice failed",
       "cudaGetDevice"},
  };
  for (const Fault &fault : faults) {
    SCOPED_TRACE(gmr_cuda_call_name(fault.call));
    // Nothing cached: the request needs new memory, so the device switch.
    ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, nullptr));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(fault.call, 0, 1, fault.error));
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_ex(r_, 4096, 0, nullptr, &p, &f));
    ASSERT_EQ(nullptr, p);
    EXPECT_EQ(fault.error, f.cuda_error);
    EXPECT_NE(nullptr, std::strstr(f.message, fault.named)) << f.message;
    EXPECT_EQ(nullptr, std::strstr(f.message, fault.not_named)) << f.message;
    EXPECT_EQ(0, Current()) << "the caller's device stays current";
    // Nothing changed: the same request succeeds once the driver answers.
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, 4096, 0, nullptr, &p, &f)) << f.message;
    EXPECT_EQ(0, Current());
    EXPECT_EQ(GMR_OK, gmr_resource_check(r_));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 4096, 0, nullptr));
  }
}

// Every stack whose resource switches devices with the same code: the CUDA
// resource, vmm_pages and vmm.
INSTANTIATE_TEST_SUITE_P(Resources, DeviceSwitchMessage,
                         ::testing::Values("cuda(kind=device)", "vmm_pages", "vmm"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           std::string name = info.param;
                           return name.substr(0, name.find('('));
                         });

}  // namespace
