// tests/nvtx_logging_fixture.h: what the nvtx_logging_adaptor tests share:
// the lines the recording NVTX injection (tests/support/nvtx_recorder.c,
// named in NVTX_INJECTION64_PATH by the BUILD file) writes for gmr's calls,
// and a fixture with a mock upstream that creates the adaptor.
#ifndef GMR_TESTS_NVTX_LOGGING_FIXTURE_H_
#define GMR_TESTS_NVTX_LOGGING_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gmr/nvtx_logging_adaptor.h"
#include "gmr/resource.h"
#include "tests/support/mock_resource.h"
#include "tests/support/nvtx_recorder_client.h"

namespace nvtx_logging_test {

using gmr_test::NvtxRecorder;
using Lines = std::vector<std::string>;


// What create emits for domain `d` with a tool that has counters.
inline Lines create_lines(const std::string &d) {
  return {
      "domain_create " + d,
      "name_category " + d + " 1 allocate",
      "name_category " + d + " 2 deallocate",
      "name_category " + d + " 3 failure",
      "name_category " + d + " 4 limit",
      "name_category " + d + " 5 oom policy",
      "name_category " + d + " 6 bytes in use",
      "register_string " + d + " \"bytes in use\"",
      "counter_register " + d + " \"bytes in use\" schema=17 scope=21 unit=bytes",
  };
}

inline Lines stream_strings(const std::string &d, const std::string &stream_text) {
  return {"register_string " + d + " \"allocate (" + stream_text + ")\"",
          "register_string " + d + " \"deallocate (" + stream_text + ")\""};
}

inline std::string push_alloc(const std::string &d, size_t bytes, const std::string &stream_text) {
  return "push " + d + " cat=1 color=ff43a047 u64=" + std::to_string(bytes) +
         " msg=@\"allocate (" + stream_text + ")\"";
}

inline std::string push_free(const std::string &d, size_t bytes, const std::string &stream_text) {
  return "push " + d + " cat=2 color=ff1e88e5 u64=" + std::to_string(bytes) +
         " msg=@\"deallocate (" + stream_text + ")\"";
}

inline std::string counter(const std::string &d, long long value) {
  return "counter " + d + " \"bytes in use\" " + std::to_string(value);
}

inline void append(Lines &to, const Lines &from) { to.insert(to.end(), from.begin(), from.end()); }

inline gmr_stream fake_stream(uintptr_t value) { return reinterpret_cast<gmr_stream>(value); }

class NvtxLoggingAdaptorTest : public ::testing::Test {
 protected:
  gmr_mock_resource *mock_ = nullptr;
  gmr_nvtx_logging_adaptor *nvtx_ = nullptr;

  void SetUp() override {
    mock_ = gmr_mock_resource_create(nullptr);
    ASSERT_NE(nullptr, mock_);
    if (!gmr_nvtx_is_compiled_in()) GTEST_SKIP() << "built with GMR_DISABLE_NVTX: nothing to record";
    NvtxRecorder::clear();
  }

  void TearDown() override {
    if (nvtx_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_nvtx_logging_adaptor_as_resource(nvtx_)));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock_)));
  }

  gmr_resource *make(const char *domain = "gmr", bool enabled = true,
                     gmr_resource *upstream = nullptr) {
    gmr_nvtx_logging_adaptor_config config = GMR_NVTX_LOGGING_ADAPTOR_CONFIG_DEFAULT;
    config.domain_name = domain;
    config.enabled = enabled;
    if (upstream == nullptr) upstream = gmr_mock_resource_as_resource(mock_);
    EXPECT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(upstream, &config, &nvtx_));
    EXPECT_TRUE(NvtxRecorder::loaded()) << "NVTX did not load the recorder: is "
                                           "NVTX_INJECTION64_PATH set by the BUILD file?";
    return gmr_nvtx_logging_adaptor_as_resource(nvtx_);
  }
};

}  // namespace nvtx_logging_test

#endif  // GMR_TESTS_NVTX_LOGGING_FIXTURE_H_
