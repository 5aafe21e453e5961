// gmr_resource_write_stats_json (gmr/stats_json.h): the counters of a stack
// as JSON, snprintf-style truncation, and refused arguments.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gmr/gmr.h"
#include "gmr/sim/streams.h"
#include "tests/support/sim_fixture.h"

namespace {

using StatsJsonTest = gmr_test::SimTest;

std::string write_json(gmr_resource *r) {
  size_t needed = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_write_stats_json(r, nullptr, 0, &needed));
  std::vector<char> buffer(needed + 1);
  size_t again = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_write_stats_json(r, buffer.data(), buffer.size(), &again));
  EXPECT_EQ(needed, again);
  return std::string(buffer.data());
}

TEST_F(StatsJsonTest, DescribesEveryLayerTopFirstWithTrackingOwnersAndTheLimit) {
  gmr_stack *stack = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stack_create("tracking > limiting(limit=1MiB) > pool > cuda(kind=async)",
                                     &stack, nullptr));
  gmr_resource *top = gmr_stack_as_resource(stack);
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  void *a = nullptr;
  void *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 1000, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 3000, 0, s, &b));
  std::string json = write_json(top);
  EXPECT_EQ(0u, json.find("{\"held_bytes\": ")) << json;
  EXPECT_NE(std::string::npos, json.find("\"layers\": [{\"type\": \"tracking_adaptor\", "
                                         "\"bytes\": {\"current\": 4000, \"peak\": 4000, "
                                         "\"total\": 4000}"))
      << json;
  EXPECT_NE(std::string::npos,
            json.find("\"allocations\": {\"current\": 2, \"peak\": 2, \"total\": 2}"))
      << json;
  EXPECT_NE(std::string::npos, json.find("\"0x0\": {\"bytes\": {\"current\": 1000")) << json;
  char stream_key[64];
  snprintf(stream_key, sizeof stream_key, "\"0x%llx\": {\"bytes\": {\"current\": 3000",
           (unsigned long long)(uintptr_t)s);
  EXPECT_NE(std::string::npos, json.find(stream_key)) << json;
  EXPECT_NE(std::string::npos,
            json.find("{\"type\": \"limiting_adaptor\", \"limit_bytes\": 1048576, "))
      << json;
  EXPECT_NE(std::string::npos, json.find("{\"type\": \"pool_resource\"}, {\"type\": "
                                         "\"cuda_resource\"}]}"))
      << json;
  // An object once the pool reports gmr_memory_info, null before.
  EXPECT_NE(std::string::npos, json.find("\"memory\": ")) << json;
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, a, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, b, 3000, 0, s));
  json = write_json(top);
  EXPECT_NE(std::string::npos,
            json.find("\"bytes\": {\"current\": 0, \"peak\": 4000, \"total\": 4000}"))
      << json;
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(StatsJsonTest, LeafWithoutCountersAndUnlimitedLimit) {
  gmr_stack *stack = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stack_create("limiting > host", &stack, nullptr));
  std::string json = write_json(gmr_stack_as_resource(stack));
  EXPECT_NE(std::string::npos, json.find("\"limit_bytes\": null")) << json;
  EXPECT_NE(std::string::npos, json.find("{\"type\": \"host_resource\"}]}")) << json;
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
}

TEST_F(StatsJsonTest, TruncatesLikeSnprintfAndRefusesBadArguments) {
  gmr_stack *stack = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stack_create("tracking > cuda", &stack, nullptr));
  gmr_resource *top = gmr_stack_as_resource(stack);
  std::string full = write_json(top);
  char small[16];
  size_t needed = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_write_stats_json(top, small, sizeof small, &needed));
  EXPECT_EQ(full.size(), needed);
  EXPECT_EQ(full.substr(0, 15), std::string(small));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_write_stats_json(top, small, 16, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_write_stats_json(nullptr, small, 16, &needed));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_write_stats_json(top, nullptr, 16, &needed));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
}

}  // namespace
