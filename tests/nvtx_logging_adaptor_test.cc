// nvtx_logging_adaptor with a tool attached: the recording NVTX injection
// (tests/support/nvtx_recorder.c, named in NVTX_INJECTION64_PATH by the BUILD
// file) sees every NVTX call, and the tests check the exact sequence.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "gmr/events.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/policy.h"
#include "gmr/resource.h"
#include "gmr/stack.h"
#include "tests/support/gate_resource.h"
#include "tests/support/mock_resource.h"
#include "tests/support/nvtx_recorder_client.h"

namespace {

using gmr_test::NvtxRecorder;
using Lines = std::vector<std::string>;

// What create emits for domain `d` with a tool that has counters.
Lines create_lines(const std::string &d) {
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

Lines stream_strings(const std::string &d, const std::string &stream_text) {
  return {"register_string " + d + " \"allocate (" + stream_text + ")\"",
          "register_string " + d + " \"deallocate (" + stream_text + ")\""};
}

std::string push_alloc(const std::string &d, size_t bytes, const std::string &stream_text) {
  return "push " + d + " cat=1 color=ff43a047 u64=" + std::to_string(bytes) +
         " msg=@\"allocate (" + stream_text + ")\"";
}

std::string push_free(const std::string &d, size_t bytes, const std::string &stream_text) {
  return "push " + d + " cat=2 color=ff1e88e5 u64=" + std::to_string(bytes) +
         " msg=@\"deallocate (" + stream_text + ")\"";
}

std::string counter(const std::string &d, long long value) {
  return "counter " + d + " \"bytes in use\" " + std::to_string(value);
}

void append(Lines &to, const Lines &from) { to.insert(to.end(), from.begin(), from.end()); }

gmr_stream fake_stream(uintptr_t value) { return reinterpret_cast<gmr_stream>(value); }

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

TEST_F(NvtxLoggingAdaptorTest, ScriptedSequenceGivesExactRangesPayloadsAndCounterSamples) {
  gmr_resource *r = make();
  EXPECT_TRUE(gmr_nvtx_logging_adaptor_is_tool_attached(nvtx_));
  EXPECT_TRUE(gmr_nvtx_logging_adaptor_is_enabled(nvtx_));
  const gmr_stream s = fake_stream(0x5000);

  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 4096, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 256, 0, s, &b));
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 1000, 0, nullptr, &c));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, b, 256, 0, s));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, a, 4096, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, c, 1000, 0, s));  // freed on another stream

  Lines want = create_lines("gmr");
  append(want, stream_strings("gmr", "default stream"));
  want.push_back(push_alloc("gmr", 4096, "default stream"));
  want.push_back(counter("gmr", 4096));
  want.push_back("pop gmr");
  append(want, stream_strings("gmr", "stream 0x5000"));
  want.push_back(push_alloc("gmr", 256, "stream 0x5000"));
  want.push_back(counter("gmr", 4352));
  want.push_back("pop gmr");
  want.push_back(push_alloc("gmr", 1000, "default stream"));
  want.push_back(counter("gmr", 5352));
  want.push_back("pop gmr");
  want.push_back(push_free("gmr", 256, "stream 0x5000"));
  want.push_back(counter("gmr", 5096));
  want.push_back("pop gmr");
  want.push_back(push_free("gmr", 4096, "default stream"));
  want.push_back(counter("gmr", 1000));
  want.push_back("pop gmr");
  want.push_back(push_free("gmr", 1000, "stream 0x5000"));
  want.push_back(counter("gmr", 0));
  want.push_back("pop gmr");
  EXPECT_EQ(want, NvtxRecorder::lines());
  EXPECT_EQ(0u, gmr_mock_resource_live_bytes(mock_));
}

TEST_F(NvtxLoggingAdaptorTest, FailedAllocationIsAMarkInsideItsRangeWithStatusAndCudaError) {
  gmr_resource *r = make();
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = reinterpret_cast<void *>(0x1);
  gmr_failure failure;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_allocate_ex(r, 1 << 20, 0, nullptr, &p, &failure));
  EXPECT_EQ(nullptr, p);
  // The record still describes the failure of the resource below.
  EXPECT_EQ(gmr_mock_resource_as_resource(mock_), failure.where);
  EXPECT_EQ(2, failure.cuda_error);

  Lines want = create_lines("gmr");
  append(want, stream_strings("gmr", "default stream"));
  want.push_back(push_alloc("gmr", 1 << 20, "default stream"));
  want.push_back(
      "mark gmr cat=3 color=ffe53935 u64=1048576 msg=\"allocate failed: GMR_ERR_OUT_OF_MEMORY "
      "(1048576 bytes, default stream; in mock_resource; cuda error 2: mock_resource: planned "
      "failure)\"");
  want.push_back("pop gmr");
  EXPECT_EQ(want, NvtxRecorder::lines());
}

TEST_F(NvtxLoggingAdaptorTest, LimitRefusalIsAMarkInTheLimitCategory) {
  gmr_resource *r = make();
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_LIMIT_EXCEEDED, 0);
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_allocate(r, 512, 0, fake_stream(0x7000), &p));

  Lines want = create_lines("gmr");
  append(want, stream_strings("gmr", "stream 0x7000"));
  want.push_back(push_alloc("gmr", 512, "stream 0x7000"));
  want.push_back(
      "mark gmr cat=4 color=fffb8c00 u64=512 msg=\"allocate refused by a limit: "
      "GMR_ERR_LIMIT_EXCEEDED (512 bytes, stream 0x7000; in mock_resource: mock_resource: "
      "planned failure)\"");
  want.push_back("pop gmr");
  EXPECT_EQ(want, NvtxRecorder::lines());
}

TEST_F(NvtxLoggingAdaptorTest, RefusedFreeIsAMarkAndLeavesTheCounterAlone) {
  gmr_gate_resource *gate = gmr_gate_resource_create(gmr_mock_resource_as_resource(mock_));
  ASSERT_NE(nullptr, gate);
  gmr_resource *r = make("gmr", true, gmr_gate_resource_as_resource(gate));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 768, 0, nullptr, &p));
  gmr_gate_resource_refuse_frees(gate, 1, GMR_ERR_CAPTURE_UNSAFE);
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_deallocate(r, p, 768, 0, nullptr));
  EXPECT_EQ(768u, gmr_mock_resource_live_bytes(mock_));  // nothing was released
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 768, 0, nullptr));

  Lines want = create_lines("gmr");
  append(want, stream_strings("gmr", "default stream"));
  want.push_back(push_alloc("gmr", 768, "default stream"));
  want.push_back(counter("gmr", 768));
  want.push_back("pop gmr");
  want.push_back(push_free("gmr", 768, "default stream"));
  want.push_back("mark gmr cat=3 color=ffe53935 u64=768 msg=\"deallocate refused: "
                 "GMR_ERR_CAPTURE_UNSAFE (768 bytes at " +
                 NvtxRecorder::hex(p) + ", default stream)\"");
  want.push_back("pop gmr");
  want.push_back(push_free("gmr", 768, "default stream"));
  want.push_back(counter("gmr", 0));
  want.push_back("pop gmr");
  EXPECT_EQ(want, NvtxRecorder::lines());

  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  nvtx_ = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_gate_resource_as_resource(gate)));
}

TEST_F(NvtxLoggingAdaptorTest, SwitchedOffEmitsNothingAndTheCounterStaysTrue) {
  gmr_resource *r = make("gmr", /*enabled=*/false);
  EXPECT_FALSE(gmr_nvtx_logging_adaptor_is_enabled(nvtx_));
  NvtxRecorder::clear();  // create's registrations are not emission

  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 100, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 200, 0, nullptr, &b));
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *c = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_allocate(r, 300, 0, nullptr, &c));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, a, 100, 0, nullptr));
  EXPECT_EQ(Lines{}, NvtxRecorder::lines()) << "switched off, nothing may be emitted";

  gmr_nvtx_logging_adaptor_set_enabled(nvtx_, true);
  EXPECT_TRUE(gmr_nvtx_logging_adaptor_is_enabled(nvtx_));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, b, 200, 0, nullptr));
  Lines want = stream_strings("gmr", "default stream");
  want.push_back(push_free("gmr", 200, "default stream"));
  want.push_back(counter("gmr", 0));  // 100 + 200 - 100 - 200, counted while off
  want.push_back("pop gmr");
  EXPECT_EQ(want, NvtxRecorder::lines());

  NvtxRecorder::clear();
  gmr_nvtx_logging_adaptor_set_enabled(nvtx_, false);
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 64, 0, nullptr, &a));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, a, 64, 0, nullptr));
  EXPECT_EQ(Lines{}, NvtxRecorder::lines());
}

TEST_F(NvtxLoggingAdaptorTest, DomainNameComesFromTheConfigAndIsCopied) {
  std::string name = "my.app/memory";
  gmr_resource *r = make(name.c_str());
  name.assign("overwritten");
  EXPECT_STREQ("my.app/memory", gmr_nvtx_logging_adaptor_get_domain_name(nvtx_));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 8, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 8, 0, nullptr));
  Lines want = create_lines("my.app/memory");
  append(want, stream_strings("my.app/memory", "default stream"));
  want.push_back(push_alloc("my.app/memory", 8, "default stream"));
  want.push_back(counter("my.app/memory", 8));
  want.push_back("pop my.app/memory");
  want.push_back(push_free("my.app/memory", 8, "default stream"));
  want.push_back(counter("my.app/memory", 0));
  want.push_back("pop my.app/memory");
  EXPECT_EQ(want, NvtxRecorder::lines());
}

TEST_F(NvtxLoggingAdaptorTest, NullDomainNameMeansGmr) {
  gmr_nvtx_logging_adaptor_config config = GMR_NVTX_LOGGING_ADAPTOR_CONFIG_DEFAULT;
  config.domain_name = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(gmr_mock_resource_as_resource(mock_),
                                                    &config, &nvtx_));
  EXPECT_STREQ("gmr", gmr_nvtx_logging_adaptor_get_domain_name(nvtx_));
  EXPECT_EQ(create_lines("gmr"), NvtxRecorder::lines());
}

TEST_F(NvtxLoggingAdaptorTest, NullConfigMeansTheDefault) {
  ASSERT_EQ(GMR_OK,
            gmr_nvtx_logging_adaptor_create(gmr_mock_resource_as_resource(mock_), nullptr, &nvtx_));
  EXPECT_STREQ("gmr", gmr_nvtx_logging_adaptor_get_domain_name(nvtx_));
  EXPECT_TRUE(gmr_nvtx_logging_adaptor_is_enabled(nvtx_));
}

TEST_F(NvtxLoggingAdaptorTest, BadArgumentsAreRefusedAndCreateNothing) {
  gmr_resource *up = gmr_mock_resource_as_resource(mock_);
  gmr_nvtx_logging_adaptor *out = reinterpret_cast<gmr_nvtx_logging_adaptor *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nvtx_logging_adaptor_create(nullptr, nullptr, &out));
  EXPECT_EQ(nullptr, out);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nvtx_logging_adaptor_create(up, nullptr, nullptr));
  gmr_resource broken = {nullptr};
  out = reinterpret_cast<gmr_nvtx_logging_adaptor *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nvtx_logging_adaptor_create(&broken, nullptr, &out));
  EXPECT_EQ(nullptr, out);

  gmr_nvtx_logging_adaptor_config config = GMR_NVTX_LOGGING_ADAPTOR_CONFIG_DEFAULT;
  config.domain_name = "";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nvtx_logging_adaptor_create(up, &config, &out));
  EXPECT_EQ(nullptr, out);
  std::string longest(GMR_NVTX_DOMAIN_NAME_MAX_BYTES, 'd');
  std::string too_long(GMR_NVTX_DOMAIN_NAME_MAX_BYTES + 1, 'd');
  config.domain_name = too_long.c_str();
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nvtx_logging_adaptor_create(up, &config, &out));
  EXPECT_EQ(nullptr, out);
  EXPECT_EQ(Lines{}, NvtxRecorder::lines()) << "a refused create must not touch NVTX";

  config.domain_name = longest.c_str();
  ASSERT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(up, &config, &nvtx_));
  EXPECT_EQ(longest, gmr_nvtx_logging_adaptor_get_domain_name(nvtx_));

  // NULL objects: getters answer without crashing.
  EXPECT_EQ(nullptr, gmr_nvtx_logging_adaptor_as_resource(nullptr));
  EXPECT_FALSE(gmr_nvtx_logging_adaptor_is_enabled(nullptr));
  EXPECT_FALSE(gmr_nvtx_logging_adaptor_is_tool_attached(nullptr));
  EXPECT_EQ(nullptr, gmr_nvtx_logging_adaptor_get_domain_name(nullptr));
  gmr_nvtx_logging_adaptor_set_enabled(nullptr, true);
}

TEST_F(NvtxLoggingAdaptorTest, IsAStackableResourceThatForwardsTrimAndFootprint) {
  gmr_resource *r = make();
  EXPECT_STREQ("nvtx_logging_adaptor", gmr_resource_type_name(r));
  EXPECT_EQ(nvtx_, gmr_nvtx_logging_adaptor_from_resource(r));
  EXPECT_EQ(nullptr, gmr_nvtx_logging_adaptor_from_resource(gmr_mock_resource_as_resource(mock_)));
  EXPECT_EQ(nullptr, gmr_nvtx_logging_adaptor_from_resource(nullptr));
  EXPECT_EQ(gmr_mock_resource_as_resource(mock_), gmr_resource_get_upstream(r));
  gmr_mock_resource_set_trim_release(mock_, 4096);
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(4096u, released);
  EXPECT_EQ(1u, gmr_mock_resource_called_trim(mock_));
  // The footprint question goes down to the first resource that answers.
  gmr_footprint through{}, direct{};
  EXPECT_EQ(gmr_resource_get_footprint(gmr_mock_resource_as_resource(mock_), &direct),
            gmr_resource_get_footprint(r, &through));
  EXPECT_EQ(direct.held_bytes, through.held_bytes);
  EXPECT_EQ(Lines(create_lines("gmr")), NvtxRecorder::lines()) << "trim and footprint emit nothing";
}

TEST_F(NvtxLoggingAdaptorTest, StreamsBeyondTheRegisteredSlotsGetAsciiNames) {
  gmr_resource *r = make();
  // 32 streams get registered names; the 33rd is formatted per call.
  for (uintptr_t i = 0; i < 33; ++i) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_allocate(r, 16, 0, fake_stream(0x1000 + i), &p));
    EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 16, 0, fake_stream(0x1000 + i)));
  }
  Lines got = NvtxRecorder::lines();
  size_t registered = 0;
  for (const std::string &line : got) {
    if (line.rfind("register_string gmr \"allocate (stream", 0) == 0) registered++;
  }
  EXPECT_EQ(32u, registered);
  ASSERT_GE(got.size(), 6u);
  Lines tail(got.end() - 6, got.end());
  Lines want = {"push gmr cat=1 color=ff43a047 u64=16 msg=\"allocate (stream 0x1020)\"",
                counter("gmr", 16),
                "pop gmr",
                "push gmr cat=2 color=ff1e88e5 u64=16 msg=\"deallocate (stream 0x1020)\"",
                counter("gmr", 0),
                "pop gmr"};
  EXPECT_EQ(want, tail);
}

TEST_F(NvtxLoggingAdaptorTest, ThreadsGetBalancedRangesAndTheCounterEndsAtZero) {
  gmr_resource *r = make();
  NvtxRecorder::clear();
  constexpr int kThreads = 8;
  constexpr int kIterations = 200;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      gmr_stream s = fake_stream(0x100 * static_cast<uintptr_t>(t + 1));
      for (int i = 0; i < kIterations; ++i) {
        void *p = nullptr;
        size_t bytes = 64 + static_cast<size_t>(t);
        if (gmr_allocate(r, bytes, 0, s, &p) != GMR_OK) failures++;
        if (gmr_deallocate(r, p, bytes, 0, s) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());

  size_t pushes = 0, pops = 0, samples = 0, registrations = 0;
  for (const std::string &line : NvtxRecorder::lines()) {
    if (line.rfind("push gmr ", 0) == 0) pushes++;
    if (line == "pop gmr") pops++;
    if (line.rfind("counter gmr ", 0) == 0) samples++;
    if (line.rfind("register_string gmr ", 0) == 0) registrations++;
  }
  EXPECT_EQ(size_t{2} * kThreads * kIterations, pushes);
  EXPECT_EQ(pushes, pops);
  EXPECT_EQ(pushes, samples);
  EXPECT_EQ(size_t{2} * kThreads, registrations) << "each stream's names registered once";
  // The last sample to reach the tool may be any thread's; a final
  // single-threaded pair shows the count is exact.
  NvtxRecorder::clear();
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 1, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 1, 0, nullptr));
  Lines got = NvtxRecorder::lines();
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(counter("gmr", 1), got[got.size() - 5]);
  EXPECT_EQ(counter("gmr", 0), got[got.size() - 2]);
}

TEST_F(NvtxLoggingAdaptorTest, SwitchFlippedByAnotherThreadNeverUnbalancesRanges) {
  gmr_resource *r = make();
  NvtxRecorder::clear();
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    bool on = false;
    while (!stop.load()) {
      gmr_nvtx_logging_adaptor_set_enabled(nvtx_, on);
      on = !on;
    }
  });
  for (int i = 0; i < 2000; ++i) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_allocate(r, 32, 0, nullptr, &p));
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, p, 32, 0, nullptr));
  }
  stop = true;
  flipper.join();
  size_t pushes = 0, pops = 0;
  for (const std::string &line : NvtxRecorder::lines()) {
    if (line.rfind("push gmr ", 0) == 0) pushes++;
    if (line == "pop gmr") pops++;
  }
  EXPECT_EQ(pushes, pops);
}


// ---- policy events of the stack below (gmr/events.h) -------------------------

std::string limit_mark(size_t bytes, const std::string &text) {
  return "mark gmr cat=4 color=fffb8c00 u64=" + std::to_string(bytes) + " msg=\"" + text + "\"";
}

std::string oom_mark(size_t bytes, const std::string &text) {
  return "mark gmr cat=5 color=ff8e24aa u64=" + std::to_string(bytes) + " msg=\"" + text + "\"";
}

// A stack built from a spec whose top layer is an NVTX logging adaptor.
gmr_stack *SpecStack(const char *spec) {
  gmr_stack *s = nullptr;
  gmr_spec_error e;
  EXPECT_EQ(GMR_OK, gmr_stack_create(spec, &s, &e)) << e.message;
  return s;
}

TEST_F(NvtxLoggingAdaptorTest, LimitRaisedBelowIsAMarkInsideTheAllocateRange) {
  gmr_stack *s = SpecStack("nvtx_logging > limiting(limit=1KiB, on_limit=increase) > host");
  ASSERT_NE(nullptr, s);
  gmr_resource *r = gmr_stack_as_resource(s);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 2048, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 2048, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));

  Lines want = create_lines("gmr");
  append(want, stream_strings("gmr", "default stream"));
  want.push_back(push_alloc("gmr", 2048, "default stream"));
  // 1024 + (2048 - 1024) * 1.25: the increase policy grows by the padded excess.
  want.push_back(limit_mark(2048, "limit raised (policy increase): 1024 -> 2304 bytes for 2048 "
                                  "bytes charged (default stream; in limiting_adaptor)"));
  want.push_back(counter("gmr", 2048));
  want.push_back("pop gmr");
  want.push_back(push_free("gmr", 2048, "default stream"));
  want.push_back(counter("gmr", 0));
  want.push_back("pop gmr");
  EXPECT_EQ(want, NvtxRecorder::lines());
}

TEST_F(NvtxLoggingAdaptorTest, LimitRefusalBelowIsMarkedOnceFromItsEvent) {
  gmr_stack *s = SpecStack("nvtx_logging > limiting(limit=1KiB) > host");
  ASSERT_NE(nullptr, s);
  gmr_resource *r = gmr_stack_as_resource(s);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 512, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_allocate(r, 2048, 0, nullptr, &q));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 512, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));

  Lines want = create_lines("gmr");
  append(want, stream_strings("gmr", "default stream"));
  want.push_back(push_alloc("gmr", 512, "default stream"));
  want.push_back(counter("gmr", 512));
  want.push_back("pop gmr");
  want.push_back(push_alloc("gmr", 2048, "default stream"));
  // The event's mark only: no second "allocate refused by a limit" mark.
  want.push_back(limit_mark(2048, "limit refused (policy fail): 2048 bytes charged, 512 of 1024 "
                                  "bytes used (default stream; in limiting_adaptor)"));
  want.push_back("pop gmr");
  want.push_back(push_free("gmr", 512, "default stream"));
  want.push_back(counter("gmr", 0));
  want.push_back("pop gmr");
  EXPECT_EQ(want, NvtxRecorder::lines());
}

TEST_F(NvtxLoggingAdaptorTest, LimitOverageAndStreamLimitsAreMarkedWithTheirScope) {
  gmr_stack *s = SpecStack(
      "nvtx_logging > limiting(limit=1KiB, on_limit=ignore) > "
      "limiting(per_stream=true, stream_limit=4KiB) > host");
  ASSERT_NE(nullptr, s);
  gmr_resource *r = gmr_stack_as_resource(s);
  const gmr_stream st = fake_stream(0x7000);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 2048, 0, st, &p));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_allocate(r, 3000, 0, st, &q));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 2048, 0, st));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));

  Lines want = create_lines("gmr");
  append(want, stream_strings("gmr", "stream 0x7000"));
  want.push_back(push_alloc("gmr", 2048, "stream 0x7000"));
  want.push_back(limit_mark(2048, "limit passed (policy ignore): 1024 bytes over 1024 after 2048 "
                                  "bytes charged (stream 0x7000; in limiting_adaptor)"));
  want.push_back(counter("gmr", 2048));
  want.push_back("pop gmr");
  want.push_back(push_alloc("gmr", 3000, "stream 0x7000"));
  // The payload of a limit event is the charge: 3000 bytes rounded up to 256.
  want.push_back(limit_mark(3072, "limit passed (policy ignore): 4096 bytes over 1024 after 3072 "
                                  "bytes charged (stream 0x7000; in limiting_adaptor)"));
  // 2048 + 3072 > 4096 on the stream, and that limit's policy is fail.
  want.push_back(limit_mark(3072, "stream limit refused (policy fail): 3072 bytes charged, 2048 "
                                  "of 4096 bytes used (stream 0x7000; in limiting_adaptor)"));
  want.push_back("pop gmr");
  want.push_back(push_free("gmr", 2048, "stream 0x7000"));
  want.push_back(counter("gmr", 0));
  want.push_back("pop gmr");
  EXPECT_EQ(want, NvtxRecorder::lines());
}

TEST_F(NvtxLoggingAdaptorTest, OomPolicyActionsBelowAreMarksInTheOomCategory) {
  gmr_oom_policy policy = gmr_oom_policy_trim_retry(3);
  gmr_oom_adaptor *oom = nullptr;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(gmr_mock_resource_as_resource(mock_), &policy, &oom));
  gmr_resource *r = make("gmr", true, gmr_oom_adaptor_as_resource(oom));

  // Trim releases memory, the retry succeeds.
  gmr_mock_resource_set_trim_release(mock_, 4096);
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r, 1000, 0, nullptr, &p));
  // Trim releases nothing: the policy gives up.
  gmr_mock_resource_set_trim_release(mock_, 0);
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *q = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_allocate(r, 700, 0, nullptr, &q));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  nvtx_ = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_oom_adaptor_as_resource(oom)));

  Lines want = create_lines("gmr");
  append(want, stream_strings("gmr", "default stream"));
  want.push_back(push_alloc("gmr", 1000, "default stream"));
  want.push_back(oom_mark(1000, "oom policy trim_retry: trim released 4096 bytes, GMR_OK (1000 "
                                "bytes, default stream; in oom_adaptor)"));
  want.push_back(oom_mark(1000, "oom policy trim_retry: retry 1 after GMR_ERR_OUT_OF_MEMORY "
                                "(1000 bytes, default stream; in oom_adaptor)"));
  want.push_back(counter("gmr", 1000));
  want.push_back("pop gmr");
  want.push_back(push_alloc("gmr", 700, "default stream"));
  want.push_back(oom_mark(700, "oom policy trim_retry: trim released 0 bytes, GMR_OK (700 bytes, "
                               "default stream; in oom_adaptor)"));
  want.push_back(oom_mark(700, "oom policy trim_retry: gave up after 0 retries: "
                               "GMR_ERR_OUT_OF_MEMORY (700 bytes, default stream; in oom_adaptor)"));
  // The call's own failure is another fact (what the caller got): still marked.
  want.push_back(
      "mark gmr cat=3 color=ffe53935 u64=700 msg=\"allocate failed: GMR_ERR_OUT_OF_MEMORY (700 "
      "bytes, default stream; in mock_resource; cuda error 2: mock_resource: planned failure)\"");
  want.push_back("pop gmr");
  want.push_back(push_free("gmr", 1000, "default stream"));
  want.push_back(counter("gmr", 0));
  want.push_back("pop gmr");
  EXPECT_EQ(want, NvtxRecorder::lines());
}

TEST_F(NvtxLoggingAdaptorTest, EventsOfLayersNotBelowTheAdaptorAreNotItsBusiness) {
  gmr_resource *r = make();
  NvtxRecorder::clear();
  // Another stack's limit refuses.
  gmr_mock_resource *other = gmr_mock_resource_create(nullptr);
  ASSERT_NE(nullptr, other);
  gmr_limiting_adaptor_config lc = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  lc.limit_bytes = 1024;
  gmr_limiting_adaptor *elsewhere = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(gmr_mock_resource_as_resource(other), &lc,
                                                &elsewhere));
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED,
            gmr_allocate(gmr_limiting_adaptor_as_resource(elsewhere), 4096, 0, nullptr, &p));
  // A limit ABOVE the adaptor refuses before the request reaches it.
  gmr_limiting_adaptor *above = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(r, &lc, &above));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED,
            gmr_allocate(gmr_limiting_adaptor_as_resource(above), 4096, 0, nullptr, &p));
  EXPECT_EQ(Lines{}, NvtxRecorder::lines());
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_limiting_adaptor_as_resource(above)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_limiting_adaptor_as_resource(elsewhere)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(other)));
}

TEST_F(NvtxLoggingAdaptorTest, SwitchedOffAdaptorMarksNoPolicyEvent) {
  gmr_stack *s = SpecStack("nvtx_logging(enabled=false) > limiting(limit=1KiB) > host");
  ASSERT_NE(nullptr, s);
  NvtxRecorder::clear();
  gmr_resource *r = gmr_stack_as_resource(s);
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_allocate(r, 2048, 0, nullptr, &p));
  EXPECT_EQ(Lines{}, NvtxRecorder::lines());
  // Switched on, the same refusal is marked.
  gmr_nvtx_logging_adaptor_set_enabled(gmr_nvtx_logging_adaptor_from_resource(r), true);
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_allocate(r, 2048, 0, nullptr, &p));
  Lines want = stream_strings("gmr", "default stream");
  want.push_back(push_alloc("gmr", 2048, "default stream"));
  want.push_back(limit_mark(2048, "limit refused (policy fail): 2048 bytes charged, 0 of 1024 "
                                  "bytes used (default stream; in limiting_adaptor)"));
  want.push_back("pop gmr");
  EXPECT_EQ(want, NvtxRecorder::lines());
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

void ignore_event(void *ctx, const gmr_event *event) {
  (void)ctx;
  (void)event;
}

// How many more gmr event listeners could be registered now.
int FreeListenerSlots() {
  static int ctx[GMR_EVENT_MAX_LISTENERS + 1];
  int added = 0;
  while (added <= GMR_EVENT_MAX_LISTENERS &&
         gmr_event_listener_add(ignore_event, &ctx[added]) == GMR_OK) {
    added++;
  }
  for (int i = 0; i < added; ++i) EXPECT_EQ(GMR_OK, gmr_event_listener_remove(ignore_event, &ctx[i]));
  return added;
}

TEST_F(NvtxLoggingAdaptorTest, OneGmrListenerServesEveryAdaptorWhileOneLives) {
  EXPECT_EQ(GMR_EVENT_MAX_LISTENERS, FreeListenerSlots()) << "no adaptor yet: nobody listens";
  gmr_resource *r = make();
  EXPECT_EQ(GMR_EVENT_MAX_LISTENERS - 1, FreeListenerSlots());
  gmr_nvtx_logging_adaptor *second = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(r, nullptr, &second));
  EXPECT_EQ(GMR_EVENT_MAX_LISTENERS - 1, FreeListenerSlots()) << "one listener for all adaptors";
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_nvtx_logging_adaptor_as_resource(second)));
  EXPECT_EQ(GMR_EVENT_MAX_LISTENERS - 1, FreeListenerSlots());
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  nvtx_ = nullptr;
  EXPECT_EQ(GMR_EVENT_MAX_LISTENERS, FreeListenerSlots()) << "the last adaptor removed it";
}

TEST_F(NvtxLoggingAdaptorTest, CreateIsRefusedWhenNoListenerSlotIsLeft) {
  int ctx[GMR_EVENT_MAX_LISTENERS];
  for (int i = 0; i < GMR_EVENT_MAX_LISTENERS; ++i) {
    ASSERT_EQ(GMR_OK, gmr_event_listener_add(ignore_event, &ctx[i]));
  }
  gmr_nvtx_logging_adaptor *out = reinterpret_cast<gmr_nvtx_logging_adaptor *>(0x1);
  EXPECT_EQ(GMR_ERR_BUSY,
            gmr_nvtx_logging_adaptor_create(gmr_mock_resource_as_resource(mock_), nullptr, &out));
  EXPECT_EQ(nullptr, out);
  EXPECT_EQ(Lines{"domain_create gmr"}, NvtxRecorder::lines()) << "nothing registered";
  for (int i = 0; i < GMR_EVENT_MAX_LISTENERS; ++i) {
    EXPECT_EQ(GMR_OK, gmr_event_listener_remove(ignore_event, &ctx[i]));
  }
  gmr_resource *r = make();
  EXPECT_NE(nullptr, r);
}

TEST_F(NvtxLoggingAdaptorTest, AdaptorsComingAndGoingWhileOthersRefuseLoseAndDuplicateNothing) {
  gmr_limiting_adaptor_config lc = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  lc.limit_bytes = 1024;
  gmr_limiting_adaptor *limit = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_limiting_adaptor_create(gmr_mock_resource_as_resource(mock_), &lc, &limit));
  gmr_resource *r = make("gmr", true, gmr_limiting_adaptor_as_resource(limit));
  NvtxRecorder::clear();
  constexpr int kThreads = 4;
  constexpr int kIterations = 200;
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  // Another adaptor over the same limit subscribes and unsubscribes all the time.
  std::thread churn([&] {
    gmr_nvtx_logging_adaptor_config config = GMR_NVTX_LOGGING_ADAPTOR_CONFIG_DEFAULT;
    config.domain_name = "churn";
    while (!stop.load()) {
      gmr_nvtx_logging_adaptor *a = nullptr;
      if (gmr_nvtx_logging_adaptor_create(gmr_limiting_adaptor_as_resource(limit), &config, &a) !=
          GMR_OK) {
        wrong++;
        return;
      }
      if (gmr_resource_destroy(gmr_nvtx_logging_adaptor_as_resource(a)) != GMR_OK) wrong++;
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIterations; ++i) {
        void *p = nullptr;
        if (gmr_allocate(r, 4096, 0, nullptr, &p) != GMR_ERR_LIMIT_EXCEEDED) wrong++;
      }
    });
  }
  for (auto &th : threads) th.join();
  stop = true;
  churn.join();
  EXPECT_EQ(0, wrong.load());
  size_t pushes = 0, pops = 0, refusals = 0, other = 0;
  for (const std::string &line : NvtxRecorder::lines()) {
    if (line.rfind("push gmr ", 0) == 0) pushes++;
    if (line == "pop gmr") pops++;
    if (line.rfind("mark gmr cat=4 ", 0) == 0) {
      if (line.find("msg=\"limit refused (policy fail): 4096 bytes charged") != std::string::npos) {
        refusals++;
      } else {
        other++;
      }
    }
  }
  EXPECT_EQ(size_t{kThreads} * kIterations, pushes);
  EXPECT_EQ(pushes, pops);
  EXPECT_EQ(pushes, refusals) << "each refusal marked exactly once in this adaptor's domain";
  EXPECT_EQ(0u, other);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  nvtx_ = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_limiting_adaptor_as_resource(limit)));
}

}  // namespace
