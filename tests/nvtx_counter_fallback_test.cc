// nvtx_logging_adaptor with a tool that lacks the NVTX counters extension
// (the recorder with GMR_NVTX_RECORDER_NO_COUNTERS=1, set by the BUILD file):
// nvtxCounterRegister gives 0, and the bytes-in-use value travels as a mark
// in category 6 instead.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gmr/nvtx_logging_adaptor.h"
#include "tests/support/mock_resource.h"
#include "tests/support/nvtx_recorder_client.h"

namespace {

using gmr_test::NvtxRecorder;
using Lines = std::vector<std::string>;

TEST(NvtxCounterFallback, BytesInUseBecomeMarksWhenTheToolHasNoCounters) {
  if (!gmr_nvtx_is_compiled_in()) GTEST_SKIP() << "built with GMR_DISABLE_NVTX: nothing to record";
  gmr_mock_resource *mock = gmr_mock_resource_create(nullptr);
  ASSERT_NE(nullptr, mock);
  gmr_nvtx_logging_adaptor *nvtx = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_nvtx_logging_adaptor_create(gmr_mock_resource_as_resource(mock), nullptr, &nvtx));
  ASSERT_TRUE(NvtxRecorder::loaded());
  gmr_resource *r = gmr_nvtx_logging_adaptor_as_resource(nvtx);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 2048, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 2048, 0, nullptr));

  Lines want = {
      "domain_create gmr",
      "name_category gmr 1 allocate",
      "name_category gmr 2 deallocate",
      "name_category gmr 3 failure",
      "name_category gmr 4 limit",
      "name_category gmr 5 oom policy",
      "name_category gmr 6 bytes in use",
      "register_string gmr \"bytes in use\"",
      // no counter_register: the tool does not offer it
      "register_string gmr \"allocate (default stream)\"",
      "register_string gmr \"deallocate (default stream)\"",
      "push gmr cat=1 color=ff43a047 u64=2048 msg=@\"allocate (default stream)\"",
      "mark gmr cat=6 color=ff757575 i64=2048 msg=@\"bytes in use\"",
      "pop gmr",
      "push gmr cat=2 color=ff1e88e5 u64=2048 msg=@\"deallocate (default stream)\"",
      "mark gmr cat=6 color=ff757575 i64=0 msg=@\"bytes in use\"",
      "pop gmr",
  };
  EXPECT_EQ(want, NvtxRecorder::lines());
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock)));
}

}  // namespace
