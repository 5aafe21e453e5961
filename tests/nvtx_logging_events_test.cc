// nvtx_logging_adaptor with a tool attached: the policy events of the stack
// below it (gmr/events.h: limit refusals, raises and overages, OOM retries,
// trims, waits, give-ups) become marks inside the allocate range of the
// request that caused them, once, in its own domain only.
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
#include "tests/nvtx_logging_fixture.h"
#include "tests/support/mock_resource.h"
#include "tests/support/policies.h"

namespace {

using namespace nvtx_logging_test;  // NOLINT: the fixture and its line builders

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
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 2048, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 2048, 0, nullptr));
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
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 512, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r, 2048, 0, nullptr, &q));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 512, 0, nullptr));
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
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 2048, 0, st, &p));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r, 3000, 0, st, &q));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 2048, 0, st));
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
  gmr_oom_policy policy = gmr_test::TrimRetryPolicy(3);
  gmr_oom_adaptor *oom = nullptr;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(gmr_mock_resource_as_resource(mock_), &policy, &oom));
  gmr_resource *r = make("gmr", true, gmr_oom_adaptor_as_resource(oom));

  // Trim releases memory, the retry succeeds.
  gmr_mock_resource_set_trim_release(mock_, 4096);
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, nullptr, &p));
  // Trim releases nothing: the policy gives up.
  gmr_mock_resource_set_trim_release(mock_, 0);
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  void *q = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(r, 700, 0, nullptr, &q));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
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
  EXPECT_EQ(
      GMR_ERR_LIMIT_EXCEEDED,
      gmr_resource_allocate(gmr_limiting_adaptor_as_resource(elsewhere), 4096, 0, nullptr, &p));
  // A limit ABOVE the adaptor refuses before the request reaches it.
  gmr_limiting_adaptor *above = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(r, &lc, &above));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED,
            gmr_resource_allocate(gmr_limiting_adaptor_as_resource(above), 4096, 0, nullptr, &p));
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
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r, 2048, 0, nullptr, &p));
  EXPECT_EQ(Lines{}, NvtxRecorder::lines());
  // Switched on, the same refusal is marked.
  gmr_nvtx_logging_adaptor_set_enabled(gmr_nvtx_logging_adaptor_from_resource(r), true);
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(r, 2048, 0, nullptr, &p));
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

// How many more listeners the layers at or below `r` could take now.
int FreeListenerSlots(gmr_resource *r) {
  static int ctx[GMR_EVENT_MAX_LISTENERS + 1];
  int added = 0;
  while (added <= GMR_EVENT_MAX_LISTENERS &&
         gmr_resource_add_event_listener(r, ignore_event, &ctx[added]) == GMR_OK) {
    added++;
  }
  for (int i = 0; i < added; ++i) {
    EXPECT_EQ(GMR_OK, gmr_resource_remove_event_listener(r, ignore_event, &ctx[i]));
  }
  return added;
}

// Each adaptor registers one listener on the layers below it, and only
// there: no process-wide table, no slot taken from other stacks.
TEST_F(NvtxLoggingAdaptorTest, EachAdaptorListensToItsOwnStackOnly) {
  gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  c.limit_bytes = 1024;
  gmr_limiting_adaptor *lim = nullptr, *other = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(gmr_mock_resource_as_resource(mock_), &c, &lim));
  ASSERT_EQ(GMR_OK,
            gmr_limiting_adaptor_create(gmr_mock_resource_as_resource(mock_), &c, &other));
  gmr_resource *below = gmr_limiting_adaptor_as_resource(lim);
  gmr_resource *elsewhere = gmr_limiting_adaptor_as_resource(other);
  EXPECT_EQ(GMR_EVENT_MAX_LISTENERS, FreeListenerSlots(below));
  gmr_nvtx_logging_adaptor *first = nullptr, *second = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(below, nullptr, &first));
  EXPECT_EQ(GMR_EVENT_MAX_LISTENERS - 1, FreeListenerSlots(below));
  ASSERT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(below, nullptr, &second));
  EXPECT_EQ(GMR_EVENT_MAX_LISTENERS - 2, FreeListenerSlots(below));
  EXPECT_EQ(GMR_EVENT_MAX_LISTENERS, FreeListenerSlots(elsewhere)) << "another stack: untouched";
  // A refusal in the other stack is no mark of these adaptors.
  NvtxRecorder::clear();
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(elsewhere, 4096, 0, nullptr, &p));
  EXPECT_EQ(Lines{}, NvtxRecorder::lines());
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_nvtx_logging_adaptor_as_resource(second)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_nvtx_logging_adaptor_as_resource(first)));
  EXPECT_EQ(GMR_EVENT_MAX_LISTENERS, FreeListenerSlots(below)) << "destroy took them away";
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(elsewhere));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(below));
}

TEST_F(NvtxLoggingAdaptorTest, CreateIsRefusedWhenTheLayerBelowHasNoListenerSlotLeft) {
  gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  gmr_limiting_adaptor *lim = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(gmr_mock_resource_as_resource(mock_), &c, &lim));
  gmr_resource *below = gmr_limiting_adaptor_as_resource(lim);
  int ctx[GMR_EVENT_MAX_LISTENERS];
  for (int i = 0; i < GMR_EVENT_MAX_LISTENERS; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_add_event_listener(below, ignore_event, &ctx[i]));
  }
  NvtxRecorder::clear();
  gmr_nvtx_logging_adaptor *out = reinterpret_cast<gmr_nvtx_logging_adaptor *>(0x1);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_nvtx_logging_adaptor_create(below, nullptr, &out));
  EXPECT_EQ(nullptr, out);
  EXPECT_EQ(Lines{"domain_create gmr"}, NvtxRecorder::lines()) << "nothing registered";
  for (int i = 0; i < GMR_EVENT_MAX_LISTENERS; ++i) {
    EXPECT_EQ(GMR_OK, gmr_resource_remove_event_listener(below, ignore_event, &ctx[i]));
  }
  ASSERT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(below, nullptr, &out));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_nvtx_logging_adaptor_as_resource(out)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(below));
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
        if (gmr_resource_allocate(r, 4096, 0, nullptr, &p) != GMR_ERR_LIMIT_EXCEEDED) wrong++;
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
