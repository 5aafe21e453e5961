// tests/gpu/stack_spec_gpu_test.cc: the spec layer's device-bound checks on a
// real GPU: a device ordinal past the machine's count is refused with that
// count, `N%` sizes resolve against the device's real memory, and an initial
// reservation that cannot fit says what the device has free. Skips (with the
// reason) without a CUDA device.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "gmr/device.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/stack.h"
#include "tests/support/gpu_fixture.h"

namespace {

class StackSpecGpuTest : public gmr_test::GpuTest {
 protected:
  std::string Error(const std::string &spec, gmr_status status) {
    gmr_stack *s = nullptr;
    gmr_spec_error e;
    EXPECT_EQ(status, gmr_stack_create(spec.c_str(), &s, &e)) << spec;
    EXPECT_EQ(nullptr, s);
    return e.message;
  }
};

TEST_F(StackSpecGpuTest, ADeviceOrdinalPastTheCountNamesTheCount) {
  std::string want = device_count_ == 1
                         ? "there is 1 CUDA device (ordinals 0 to 0)"
                         : "there are " + std::to_string(device_count_) +
                               " CUDA devices (ordinals 0 to " +
                               std::to_string(device_count_ - 1) + ")";
  std::string spec = "cuda(device=" + std::to_string(device_count_) + ")";
  EXPECT_EQ("spec:1:13: invalid value '" + std::to_string(device_count_) +
                "' for cuda option 'device': " + want,
            Error(spec, GMR_ERR_INVALID_ARGUMENT));
  gmr_stack *s = nullptr;
  gmr_spec_error e;
  ASSERT_EQ(GMR_OK, gmr_stack_create(("cuda(kind=async, device=" +
                                      std::to_string(device_count_ - 1) + ")").c_str(),
                                     &s, &e))
      << e.message;
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

TEST_F(StackSpecGpuTest, PercentSizesAreOfTheDevicesRealMemory) {
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(GMR_OK, gmr_device_get_memory_info(&free_bytes, &total_bytes));
  gmr_stack *s = nullptr;
  gmr_spec_error e;
  ASSERT_EQ(GMR_OK, gmr_stack_create("limiting(limit=50%) > cuda(kind=async)", &s, &e))
      << e.message;
  EXPECT_EQ(total_bytes / 2, gmr_limiting_adaptor_get_limit(
                                 gmr_limiting_adaptor_from_resource(gmr_stack_as_resource(s))));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  std::printf("stack_spec_gpu: 50%% of the device is %zu bytes of %zu\n", total_bytes / 2,
              total_bytes);
}

TEST_F(StackSpecGpuTest, AnInitialReservationPastTheDeviceSaysWhatIsFree) {
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(GMR_OK, gmr_device_get_memory_info(&free_bytes, &total_bytes));
  // Twice the device: never fits, whatever else runs on it.
  std::string initial = std::to_string(2 * total_bytes);
  std::string message =
      Error("pool(initial=" + initial + ") > cuda(kind=device)", GMR_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(0u, message.find("spec:1:1: cannot create pool: GMR_ERR_OUT_OF_MEMORY: taking the " +
                             initial + " bytes of option 'initial'"))
      << message;
  EXPECT_NE(std::string::npos,
            message.find("bytes free of " + std::to_string(total_bytes) +
                         ": lower initial, or 0 to take nothing at create"))
      << message;
  std::printf("stack_spec_gpu: %s\n", message.c_str());
}

}  // namespace
