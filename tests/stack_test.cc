// gmr_stack: specs that build, every kind of spec error with its exact message
// and position, sizes, policies by name and from a plugin, GMR_STACK, and
// stacks composed by hand.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/host_resource.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/policy.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "gmr/tracking_adaptor.h"
#include "tests/support/policies.h"
#include "tests/support/sim_fixture.h"

namespace {

class Stack : public gmr_test::SimTest {
 protected:
  gmr_stack *Build(const std::string &spec) {
    gmr_stack *s = nullptr;
    gmr_spec_error e;
    gmr_status st = gmr_stack_create(spec.c_str(), &s, &e);
    EXPECT_EQ(GMR_OK, st) << e.message;
    return s;
  }
  // The message of a spec that must fail with `status`.
  std::string Error(const std::string &spec, gmr_status status = GMR_ERR_INVALID_ARGUMENT) {
    gmr_stack *s = reinterpret_cast<gmr_stack *>(0x1);
    gmr_spec_error e;
    EXPECT_EQ(status, gmr_stack_create(spec.c_str(), &s, &e)) << spec;
    EXPECT_EQ(nullptr, s);
    last_line_ = e.line;
    last_column_ = e.column;
    return e.message;
  }
  size_t LimitOf(const std::string &limit) {
    gmr_stack *s = Build("limiting(limit=" + limit + ") > host");
    if (s == nullptr) return 0;
    size_t v = gmr_limiting_adaptor_get_limit(gmr_limiting_adaptor_from_resource(
        gmr_resource_find(gmr_stack_as_resource(s), "limiting_adaptor")));
    EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
    return v;
  }
  int last_line_ = 0, last_column_ = 0;
};

TEST_F(Stack, BuildsTheIssuesExampleTopFirst) {
  const char *spec =
      "tracking(per=stream) > limiting(limit=8GiB, on_limit=increase, on_oom=trim_retry) > "
      "cuda(kind=async)";
  gmr_stack *s = Build(spec);
  ASSERT_NE(nullptr, s);
  // on_oom=trim_retry is an OOM layer above the limiting one.
  EXPECT_EQ(4u, gmr_stack_get_depth(s));
  EXPECT_STREQ("tracking_adaptor", gmr_resource_get_type_name(gmr_stack_get_layer(s, 0)));
  EXPECT_STREQ("oom_adaptor", gmr_resource_get_type_name(gmr_stack_get_layer(s, 1)));
  EXPECT_STREQ("limiting_adaptor", gmr_resource_get_type_name(gmr_stack_get_layer(s, 2)));
  EXPECT_STREQ("cuda_resource", gmr_resource_get_type_name(gmr_stack_get_layer(s, 3)));
  EXPECT_EQ(nullptr, gmr_stack_get_layer(s, 4));
  EXPECT_EQ(gmr_stack_get_layer(s, 0), gmr_stack_as_resource(s));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(gmr_stack_get_layer(s, i + 1), gmr_resource_get_upstream(gmr_stack_get_layer(s, i)));
  }
  EXPECT_STREQ(spec, gmr_stack_get_spec(s));
  gmr_limiting_adaptor *lim = gmr_limiting_adaptor_from_resource(
      gmr_resource_find(gmr_stack_as_resource(s), "limiting_adaptor"));
  ASSERT_NE(nullptr, lim);
  EXPECT_EQ(size_t{8} << 30, gmr_limiting_adaptor_get_limit(lim));
  gmr_cuda_resource *cuda =
      gmr_cuda_resource_from_resource(gmr_resource_find(gmr_stack_as_resource(s), "cuda_resource"));
  ASSERT_NE(nullptr, cuda);
  EXPECT_EQ(GMR_CUDA_KIND_ASYNC, gmr_cuda_resource_get_kind(cuda));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(s), 1000, 0, nullptr, &p));
  EXPECT_EQ(1024u, gmr_limiting_adaptor_get_used_bytes(lim));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_stack_destroy(s));  // tracking refuses: nothing destroyed
  EXPECT_EQ(4u, gmr_stack_get_depth(s));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(s), p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

TEST_F(Stack, AcceptsWhitespaceNewlinesEmptyParenthesesAndQuotes) {
  gmr_stack *s = Build("\n  oom( policy = \"wait\" , attempts=2,wait_timeout_ms=5 )\n>\thost()  ");
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(2u, gmr_stack_get_depth(s));
  EXPECT_STREQ("oom_adaptor", gmr_resource_get_type_name(gmr_stack_as_resource(s)));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  s = Build("tracking(per=thread, check_stream=off, max_owners=16, recent_frees=64) > cuda");
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  s = Build("cuda(kind=pinned, device=0)");
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  s = Build("cuda(kind=async, release_threshold=1GiB)");
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

TEST_F(Stack, SizesTakeBinaryAndDecimalUnitsAndPercentOfDeviceMemory) {
  EXPECT_EQ(512u, LimitOf("512"));
  EXPECT_EQ(512u, LimitOf("512B"));
  EXPECT_EQ(1024u, LimitOf("1K"));
  EXPECT_EQ(1024u, LimitOf("1KiB"));
  EXPECT_EQ(1000u, LimitOf("1KB"));
  EXPECT_EQ(size_t{2} << 20, LimitOf("2M"));
  EXPECT_EQ(3000000u, LimitOf("3MB"));
  EXPECT_EQ(size_t{3} << 29, LimitOf("1.5GiB"));
  EXPECT_EQ(size_t{8} << 30, LimitOf("8gib"));
  EXPECT_EQ(size_t{8} << 30, LimitOf("8G"));
  EXPECT_EQ(size_t{8000000000}, LimitOf("8GB"));
  EXPECT_EQ(size_t{1} << 40, LimitOf("1T"));
  EXPECT_EQ(size_t{1000000000000}, LimitOf("1TB"));
  EXPECT_EQ(size_t{20} << 30, LimitOf("25%"));  // of the simulated 80 GiB
  EXPECT_EQ(size_t{80} << 30, LimitOf("100%"));
  EXPECT_EQ(size_t{429496729}, LimitOf("0.5%"));  // floor(80 GiB / 200)
  EXPECT_EQ(GMR_LIMIT_NONE, LimitOf("none"));
  EXPECT_EQ(size_t{18446744073709551615u}, LimitOf("18446744073709551615"));
}

TEST_F(Stack, BadSizesSayWhatIsWrong) {
  EXPECT_EQ(
      "spec:1:16: invalid value '8GX' for limiting option 'limit': unknown unit 'GX' (use B, K, "
      "KiB, KB, M, MiB, MB, G, GiB, GB, T, TiB, TB or %)",
      Error("limiting(limit=8GX) > host"));
  EXPECT_EQ(1, last_line_);
  EXPECT_EQ(16, last_column_);
  EXPECT_EQ(
      "spec:1:16: invalid value 'lots' for limiting option 'limit': 'lots' is not a size (a "
      "number with an optional unit, e.g. 8GiB)",
      Error("limiting(limit=lots) > host"));
  EXPECT_EQ("spec:1:16: invalid value '150%' for limiting option 'limit': '150%' is more than "
            "100% of the device's memory",
            Error("limiting(limit=150%) > host"));
  EXPECT_EQ("spec:1:16: invalid value '20000000T' for limiting option 'limit': '20000000T' is "
            "too large (a size is at most 18446744073709551615 bytes)",
            Error("limiting(limit=20000000T) > host"));
  EXPECT_EQ("spec:1:16: invalid value '1.2.3' for limiting option 'limit': '1.2.3' is not a size "
            "(a number with an optional unit, e.g. 8GiB)",
            Error("limiting(limit=1.2.3) > host"));
  EXPECT_EQ("spec:1:37: invalid value 'max' for limiting option 'charge_alignment': 'max' is not "
            "allowed here; give a size",
            Error("limiting(limit=1K, charge_alignment=max) > host"));
}

TEST_F(Stack, UnknownNamesSuggestTheClosestOne) {
  EXPECT_EQ("spec:1:33: unknown option 'limt' for limiting (did you mean 'limit'?)",
            Error("tracking(per=stream) > limiting(limt=8GiB, on_limit=increase) > "
                  "cuda(kind=async)"));
  EXPECT_EQ(33, last_column_);
  EXPECT_EQ("spec:1:1: unknown component 'trackin' (did you mean 'tracking'? known: "
            "chunk_listener, cuda, cumem, fixed_block, graph_arena, host, limiting, log, "
            "nvtx_logging, oom, pool, symmetric, tracking, vmm, vmm_pages)",
            Error("trackin > host"));
  EXPECT_EQ("spec:1:8: unknown component 'zzz' (known: chunk_listener, cuda, cumem, fixed_block, "
            "graph_arena, host, limiting, log, nvtx_logging, oom, pool, symmetric, tracking, "
            "vmm, vmm_pages)",
            Error("host > zzz"));
  EXPECT_EQ("spec:2:3: unknown component 'limting' (did you mean 'limiting'? known: "
            "chunk_listener, cuda, cumem, fixed_block, graph_arena, host, limiting, log, "
            "nvtx_logging, oom, pool, symmetric, tracking, vmm, vmm_pages)",
            Error("tracking >\n  limting > host"));
  EXPECT_EQ(2, last_line_);
  EXPECT_EQ("spec:1:10: unknown option 'colour' for limiting (options: limit, on_limit, padding, "
            "cap, on_oom, oom_attempts, wait_timeout_ms, per_stream, stream_limit, "
            "charge_alignment)",
            Error("limiting(colour=red) > host"));
  EXPECT_EQ("spec:1:6: unknown option 'x' for host (host takes no options)", Error("host(x=1)"));
  EXPECT_EQ("spec:1:11: invalid value 'asyn' for cuda option 'kind': expected device, async, "
            "managed or pinned (did you mean 'async'?)",
            Error("cuda(kind=asyn)"));
  EXPECT_EQ("spec:1:17: unknown OOM policy 'wiat' for limiting option 'on_oom' (did you mean "
            "'wait'? built in: fail, retry, trim_retry, wait; or a registered name, or "
            "plugin:PATH:SYMBOL)",
            Error("limiting(on_oom=wiat) > host"));
  EXPECT_EQ("spec:1:19: unknown limit policy 'grow' for limiting option 'on_limit' (built in: "
            "fail, ignore, increase, increase_total; or a registered name, or plugin:PATH:SYMBOL)",
            Error("limiting(on_limit=grow) > host"));
}

TEST_F(Stack, SyntaxErrorsPointAtTheFirstWrongCharacter) {
  EXPECT_EQ("spec: the spec is empty: name at least one resource, e.g. 'cuda(kind=async)'",
            Error("  \n "));
  EXPECT_EQ(0, last_line_);
  EXPECT_EQ("spec:1:16: expected '=' after option name 'limit', found '8'",
            Error("limiting(limit 8G) > host"));
  EXPECT_EQ("spec:1:19: expected ',' or ')' after the value of option 'limit', found '>'",
            Error("limiting(limit=8G > host"));
  EXPECT_EQ("spec:1:7: expected a component name, found end of spec", Error("host >"));
  EXPECT_EQ("spec:1:6: expected '>' or the end of the spec, found 'c'", Error("host cuda"));
  EXPECT_EQ("spec:1:16: expected a value for option 'limit', found ')'",
            Error("limiting(limit=) > host"));
  EXPECT_EQ("spec:1:17: unterminated quoted value", Error("limiting(on_oom=\"wait) > host"));
  EXPECT_EQ("spec:1:10: expected an option name, found '1'", Error("limiting(1=2) > host"));
  EXPECT_EQ("spec:1:1: expected a component name, found '>'", Error("> host"));
  EXPECT_EQ("spec:1:5: expected '>' or the end of the spec, found byte 0x01",
            Error("host\x01"));
  EXPECT_EQ("spec:1:20: option 'limit' given twice for limiting",
            Error("limiting(limit=1K, limit=2K) > host"));
}

TEST_F(Stack, LayersMustEndInExactlyOneResource) {
  EXPECT_EQ("spec:1:1: host is a resource and takes no upstream: it must be the last layer",
            Error("host > limiting"));
  EXPECT_EQ("spec:1:1: limiting is an adaptor and needs a layer below it: end the spec with a "
            "resource, e.g. '> cuda(kind=async)' or '> host'",
            Error("limiting(limit=1G)"));
  EXPECT_EQ("spec:1:1: missing option 'policy' for oom (fail, retry, trim_retry, wait, a "
            "registered name, or plugin:PATH:SYMBOL)",
            Error("oom > host"));
}

TEST_F(Stack, ALayerThatCannotBeCreatedUndoesTheLayersBelow) {
  // cuda(kind=async) is created (a simulated pool) before the pool fails to
  // take its initial 100 GiB of the 80 simulated; the fixture fails the test
  // if the cuda layer's pool is left alive. (Values a layer refuses, such as
  // charge_alignment=100, are refused before any layer is created:
  // tests/stack_spec_limits_test.cc.)
  EXPECT_EQ(0u, Error("limiting > pool(initial=100GiB) > cuda(kind=async)", GMR_ERR_OUT_OF_MEMORY)
                    .find("spec:1:12: cannot create pool: GMR_ERR_OUT_OF_MEMORY: taking the "
                          "107374182400 bytes of option 'initial' (100GiB) from the layer below "
                          "failed"));
  EXPECT_EQ("spec:1:13: invalid value '5' for cuda option 'device': there is 1 CUDA device "
            "(ordinals 0 to 0)",
            Error("cuda(device=5)"));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_POOL_CREATE, 0, 1, 2));
  EXPECT_EQ("spec:1:23: cannot create cuda: GMR_ERR_OUT_OF_MEMORY: out of memory while creating "
            "it (kind=async creates a cudaMemPool_t on device 0): free device memory, or use "
            "kind=device",
            Error("tracking > limiting > cuda(kind=async)", GMR_ERR_OUT_OF_MEMORY));
}

TEST_F(Stack, NullArgumentsAreRefused) {
  gmr_stack *s = nullptr;
  gmr_spec_error e;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stack_create(nullptr, &s, &e));
  EXPECT_STREQ("spec: no spec given (NULL)", e.message);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stack_create("host", nullptr, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(nullptr));
  EXPECT_EQ(nullptr, gmr_stack_as_resource(nullptr));
  EXPECT_EQ(0u, gmr_stack_get_depth(nullptr));
}

TEST_F(Stack, LimitPoliciesAndTheirOptionsComeThroughTheSpec) {
  gmr_stack *s = Build("limiting(limit=1K, on_limit=increase, padding=2, cap=4K) > host");
  ASSERT_NE(nullptr, s);
  gmr_resource *top = gmr_stack_as_resource(s);
  gmr_limiting_adaptor *lim = gmr_limiting_adaptor_from_resource(top);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 1536, 0, nullptr, &a));
  EXPECT_EQ(2048u, gmr_limiting_adaptor_get_limit(lim));  // 1024 + (1536 - 1024) * 2
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED,
            gmr_resource_allocate(top, 3000, 0, nullptr, &b));  // past the cap
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, a, 1536, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));

  s = Build("limiting(limit=0, per_stream=true, stream_limit=1K, on_limit=ignore) > host");
  ASSERT_NE(nullptr, s);
  top = gmr_stack_as_resource(s);
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 2048, 0, nullptr, &a));
  gmr_limiting_adaptor_stats st = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(gmr_limiting_adaptor_from_resource(top), &st));
  EXPECT_EQ(2u, st.overage_count);  // past the global limit and the stream's
  size_t limit = 0;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(gmr_limiting_adaptor_from_resource(top),
                                                         nullptr, nullptr, &limit));
  EXPECT_EQ(1024u, limit);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, a, 2048, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

gmr_limiting_adaptor *LimitingOf(gmr_stack *s) {
  return gmr_limiting_adaptor_from_resource(
      gmr_resource_find(gmr_stack_as_resource(s), "limiting_adaptor"));
}

TEST_F(Stack, OomPoliciesComeThroughTheSpec) {
  gmr_stack *s = Build("limiting(on_oom=retry, oom_attempts=2) > cuda(kind=async)");
  ASSERT_NE(nullptr, s);
  gmr_resource *top = gmr_stack_as_resource(s);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC, 0, 2, 2));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 4096, 0, nullptr, &p));  // third try succeeds
  gmr_limiting_adaptor_stats st = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(LimitingOf(s), &st));
  EXPECT_EQ(2u, st.oom.retry_count);
  EXPECT_EQ(1u, st.oom.recovered_count);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC, 0, 3, 2));
  void *q = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(top, 4096, 0, nullptr, &q, &f));
  EXPECT_EQ(2u, f.attempt);
  EXPECT_EQ(2, f.cuda_error);  // cudaErrorMemoryAllocation, from the bottom of the stack
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, p, 4096, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

// limiting(on_oom=trim_retry) is `oom(policy=trim_retry) > limiting`, and
// behaves as the limiting adaptor's own on_oom did: an upstream out of
// memory is trimmed and retried; the limit's refusal is on_limit's alone.
TEST_F(Stack, OnOomIsAnOomLayerAboveTheLimitThatTrimsAndRetries) {
  gmr_stack *s = Build("limiting(limit=64MiB, on_oom=trim_retry) > cuda(kind=async)");
  ASSERT_NE(nullptr, s);
  ASSERT_EQ(3u, gmr_stack_get_depth(s));
  gmr_resource *top = gmr_stack_as_resource(s);
  EXPECT_STREQ("oom_adaptor", gmr_resource_get_type_name(top));
  EXPECT_EQ(gmr_stack_get_layer(s, 1), gmr_limiting_adaptor_as_resource(LimitingOf(s)));
  EXPECT_STREQ("cuda_resource", gmr_resource_get_type_name(gmr_stack_get_layer(s, 2)));
  // Memory the CUDA pool keeps after a free, which a trim can give back.
  const size_t MiB = size_t{1} << 20;
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 3 * MiB, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top, p, 3 * MiB, 0, nullptr));
  // The next request fails once at the bottom: trimmed, retried, served.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC, 0, 1, 2));
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(top, 6 * MiB, 0, nullptr, &p, &f)) << f.message;
  gmr_limiting_adaptor_stats st = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(LimitingOf(s), &st));
  EXPECT_EQ(1u, st.oom.failure_count);
  EXPECT_EQ(1u, st.oom.trim_count);
  EXPECT_GE(st.oom.trimmed_bytes, 3 * MiB);
  EXPECT_EQ(1u, st.oom.retry_count);
  EXPECT_EQ(1u, st.oom.recovered_count);
  gmr_oom_counts c = GMR_OOM_COUNTS_INIT;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_get_counts(gmr_oom_adaptor_from_resource(top), &c));
  EXPECT_TRUE(gmr_test::SameOomCounts(c, st.oom)) << "one set of counts, from either layer";
  // Past the limit: refused at once, no trim, no retry.
  void *q = nullptr;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate_ex(top, 100 * MiB, 0, nullptr, &q, &f));
  EXPECT_EQ(gmr_stack_get_layer(s, 1), f.where);
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(LimitingOf(s), &st));
  EXPECT_EQ(1u, st.refused_count);
  EXPECT_EQ(1u, st.oom.trim_count);
  EXPECT_EQ(1u, st.oom.retry_count);
  EXPECT_EQ(0u, st.oom.gave_up_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, p, 6 * MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  // on_oom=fail (the default) puts no layer above.
  s = Build("limiting(on_oom=fail) > host");
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(2u, gmr_stack_get_depth(s));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

gmr_oom_action Spill(void *ctx, const gmr_failure *f) {
  (void)f;
  ++*static_cast<int *>(ctx);
  return GMR_OOM_ACTION_RETRY;
}

TEST_F(Stack, RegisteredPoliciesAreNamedInSpecs) {
  int spills = 0;
  gmr_oom_policy spill = gmr_test::RetryPolicy(Spill, &spills, 1);
  spill.name = "spill";
  ASSERT_EQ(GMR_OK, gmr_oom_policy_register(nullptr, "spill", &spill));
  gmr_stack *s = Build("oom(policy=spill) > cuda(kind=async)");
  ASSERT_NE(nullptr, s);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC, 0, 1, 2));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(s), 100, 0, nullptr, &p));
  EXPECT_EQ(1, spills);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(s), p, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  EXPECT_EQ(GMR_OK, gmr_oom_policy_unregister(nullptr, "spill"));
  EXPECT_NE(std::string::npos, Error("oom(policy=spill) > host").find("unknown OOM policy 'spill'"));
}

std::string PluginPath() {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  std::string p = srcdir != nullptr ? std::string(srcdir) + "/gmr/tests/plugins/libtest_policy.so"
                                    : "tests/plugins/libtest_policy.so";
  return p;
}

TEST_F(Stack, PoliciesLoadFromASharedLibraryNamedInTheSpec) {
  std::string lib = PluginPath();
  gmr_stack *s = Build("limiting(limit=1K, on_limit=plugin:" + lib +
                       ":gmr_test_limit_policy, on_oom=plugin:" + lib +
                       ":gmr_test_oom_policy) > cuda(kind=async)");
  ASSERT_NE(nullptr, s);
  gmr_resource *top = gmr_stack_as_resource(s);
  gmr_limiting_adaptor *lim = LimitingOf(s);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_resource_allocate(top, 4096, 0, nullptr, &a));  // the plugin allows <= 4 KiB
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_allocate(top, 8192, 0, nullptr, &b));
  // The OOM plugin trims and retries, twice at most.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC, 0, 2, 2));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 100, 0, nullptr, &b));
  gmr_limiting_adaptor_stats st = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(lim, &st));
  // The limit policy allows each attempt past the limit: the first request,
  // then the second's three (the OOM layer retries through the limit).
  EXPECT_EQ(4u, st.overage_count);
  EXPECT_EQ(1u, st.refused_count);
  EXPECT_EQ(2u, st.oom.retry_count);
  EXPECT_EQ(2u, st.oom.trim_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, a, 4096, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, b, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));  // releases the plugin's context, then unloads it
}

TEST_F(Stack, PluginErrorsSayWhatFailed) {
  std::string lib = PluginPath();
  std::string msg = Error("limiting(on_oom=plugin:/nonexistent/libx.so:f) > host");
  EXPECT_EQ(0u, msg.find("spec:1:17: cannot load plugin '/nonexistent/libx.so': ")) << msg;
  EXPECT_EQ("spec:1:17: plugin '" + lib + "' has no symbol 'nope'",
            Error("limiting(on_oom=plugin:" + lib + ":nope) > host"));
  EXPECT_EQ("spec:1:17: plugin symbol 'gmr_test_refusing_policy' in '" + lib +
                "' refused to give an OOM policy",
            Error("limiting(on_oom=plugin:" + lib + ":gmr_test_refusing_policy) > host"));
  EXPECT_EQ("spec:1:17: plugin symbol 'gmr_test_invalid_policy' in '" + lib +
                "' gave an invalid OOM policy",
            Error("limiting(on_oom=plugin:" + lib + ":gmr_test_invalid_policy) > host"));
  // An OOM entry point asked for a limit policy says no.
  EXPECT_EQ("spec:1:19: plugin symbol 'gmr_test_oom_policy' in '" + lib +
                "' refused to give a limit policy",
            Error("limiting(on_limit=plugin:" + lib + ":gmr_test_oom_policy) > host"));
  EXPECT_EQ("spec:1:17: invalid plugin reference 'plugin:libx.so': expected plugin:PATH:SYMBOL",
            Error("limiting(on_oom=plugin:libx.so) > host"));
  // Loaded, then a later layer is wrong: the plugin's policy is released and
  // the library unloaded (ASan reports the context otherwise).
  EXPECT_EQ(0u, Error("limiting(on_oom=plugin:" + lib + ":gmr_test_oom_policy) > zzz")
                    .find("spec:1:"));
}

TEST_F(Stack, PluginLoaderChecksItsArguments) {
  gmr_oom_policy p;
  gmr_policy_plugin *h = reinterpret_cast<gmr_policy_plugin *>(0x1);
  char msg[GMR_POLICY_PLUGIN_MESSAGE_BYTES];
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_policy_plugin_load(nullptr, "x", GMR_POLICY_KIND_OOM, &p, &h, msg));
  EXPECT_EQ(nullptr, h);
  std::string lib = PluginPath();
  ASSERT_EQ(GMR_OK, gmr_policy_plugin_load(lib.c_str(), "gmr_test_oom_policy",
                                           GMR_POLICY_KIND_OOM, &p, &h, msg));
  EXPECT_STREQ("test_plugin_oom", p.name);
  EXPECT_EQ(2u, p.max_attempts);
  p.release(p.ctx);
  EXPECT_EQ(GMR_OK, gmr_policy_plugin_unload(h));
  EXPECT_EQ(GMR_OK, gmr_policy_plugin_unload(nullptr));
}

TEST_F(Stack, ComposedByHandWithPushAndTornDownTopFirst) {
  gmr_stack *s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stack_create_empty(&s));
  EXPECT_EQ(nullptr, gmr_stack_as_resource(s));
  EXPECT_EQ(nullptr, gmr_stack_get_spec(s));
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_resource *h = gmr_host_resource_as_resource(host);
  ASSERT_EQ(GMR_OK, gmr_stack_push(s, h));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stack_push(s, h));  // already in it
  gmr_limiting_adaptor *lim = nullptr;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_create(h, nullptr, &lim));
  gmr_resource *l = gmr_limiting_adaptor_as_resource(lim);
  ASSERT_EQ(GMR_OK, gmr_stack_push(s, l));
  // An adaptor whose upstream is not the top is refused and stays the caller's.
  gmr_tracking_adaptor *wrong = nullptr;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_create(h, nullptr, &wrong));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stack_push(s, gmr_tracking_adaptor_as_resource(wrong)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_tracking_adaptor_as_resource(wrong)));
  EXPECT_EQ(2u, gmr_stack_get_depth(s));
  EXPECT_EQ(l, gmr_stack_as_resource(s));
  EXPECT_EQ(h, gmr_resource_find(gmr_stack_as_resource(s), "host_resource"));
  EXPECT_EQ(nullptr, gmr_resource_find(gmr_stack_as_resource(s), "pool_resource"));

  // Memory taken from the bottom directly: the top goes, the bottom refuses
  // and stays, still usable; a second destroy finishes the job.
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(h, 64, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_stack_destroy(s));
  EXPECT_EQ(1u, gmr_stack_get_depth(s));
  EXPECT_EQ(h, gmr_stack_as_resource(s));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(h, p, 64, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

TEST_F(Stack, PrintsEveryComponentWithItsOptions) {
  FILE *f = tmpfile();
  ASSERT_NE(nullptr, f);
  ASSERT_EQ(GMR_OK, gmr_stack_print_components(f));
  rewind(f);
  std::string text;
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  fclose(f);
  for (const char *want : {"cuda (resource, last layer)", "host (resource, last layer)",
                           "limiting (adaptor)", "tracking (adaptor)", "oom (adaptor)",
                           "  limit=<size|none> (default none)", "  kind=<choice> (default device)",
                           "  policy=<oom policy> (required)"}) {
    EXPECT_NE(std::string::npos, text.find(want)) << want;
  }
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stack_print_components(nullptr));
}

// The "done when" of the issue: a program that only calls
// gmr_stack_create_from_env and gmr_resource_allocate changes policy with GMR_STACK.
gmr_status AllocateLikeAProgram(size_t bytes, std::string *error) {
  gmr_stack *s = nullptr;
  gmr_spec_error e;
  gmr_status st = gmr_stack_create_from_env("cuda(kind=async)", &s, &e);
  if (st != GMR_OK) {
    *error = e.message;
    return st;
  }
  void *p = nullptr;
  st = gmr_resource_allocate(gmr_stack_as_resource(s), bytes, 0, nullptr, &p);
  if (st == GMR_OK) (void)gmr_resource_deallocate(gmr_stack_as_resource(s), p, bytes, 0, nullptr);
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  return st;
}

TEST_F(Stack, GmrStackInTheEnvironmentChangesThePolicyOfAnUnchangedProgram) {
  std::string err;
  unsetenv("GMR_STACK");
  EXPECT_EQ(GMR_OK, AllocateLikeAProgram(size_t{1} << 20, &err));  // the fallback: no limit
  setenv("GMR_STACK", "limiting(limit=64KiB) > cuda(kind=async)", 1);
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, AllocateLikeAProgram(size_t{1} << 20, &err));
  setenv("GMR_STACK", "limiting(limit=64KiB, on_limit=increase) > cuda(kind=async)", 1);
  EXPECT_EQ(GMR_OK, AllocateLikeAProgram(size_t{1} << 20, &err));
  setenv("GMR_STACK", "limiting(limit=64KiB, on_limit=ignore) > cuda(kind=async)", 1);
  EXPECT_EQ(GMR_OK, AllocateLikeAProgram(size_t{1} << 20, &err));
  setenv("GMR_STACK", "limiting(limit=64KiB) > cuda(kind=asink)", 1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, AllocateLikeAProgram(size_t{1} << 20, &err));
  EXPECT_EQ("GMR_STACK:1:35: invalid value 'asink' for cuda option 'kind': expected device, "
            "async, managed or pinned (did you mean 'async'?)",
            err);
  unsetenv("GMR_STACK");
  gmr_stack *s = nullptr;
  gmr_spec_error e;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stack_create_from_env(nullptr, &s, &e));
  EXPECT_STREQ("GMR_STACK: the environment variable GMR_STACK is not set and there is no "
               "fallback spec",
               e.message);
  setenv("GMR_STACK", "", 1);  // empty counts as unset
  ASSERT_EQ(GMR_OK, gmr_stack_create_from_env("host", &s, &e));
  EXPECT_STREQ("host", gmr_stack_get_spec(s));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  unsetenv("GMR_STACK");
}

// The environment never makes a program load a library: a plugin in
// GMR_STACK is refused before anything is loaded, and the message says what
// to do instead; the same policy registered by name works from GMR_STACK,
// and the same plugin in a spec the program passes still loads.
TEST_F(Stack, APluginInGmrStackIsRefusedAndNothingIsLoaded) {
  std::string lib = PluginPath();
  ASSERT_EQ(nullptr, dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD)) << "loaded before the test";
  std::string spec = "limiting(limit=1K, on_limit=plugin:" + lib + ":gmr_test_limit_policy) > host";
  setenv("GMR_STACK", spec.c_str(), 1);
  gmr_stack *s = reinterpret_cast<gmr_stack *>(0x1);
  gmr_spec_error e;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stack_create_from_env("host", &s, &e));
  EXPECT_EQ(nullptr, s);
  EXPECT_EQ("GMR_STACK:1:29: 'plugin:" + lib + ":gmr_test_limit_policy': a spec from the "
            "environment does not load plugins; the program loads the library "
            "(gmr_policy_plugin_load) and registers its policy by name "
            "(gmr_limit_policy_register), and the spec names it",
            std::string(e.message));
  EXPECT_EQ(nullptr, dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD)) << "the environment loaded it";
  // The program loads it and registers it: GMR_STACK names it.
  gmr_limit_policy p;
  gmr_policy_plugin *h = nullptr;
  char msg[GMR_POLICY_PLUGIN_MESSAGE_BYTES];
  ASSERT_EQ(GMR_OK, gmr_policy_plugin_load(lib.c_str(), "gmr_test_limit_policy",
                                           GMR_POLICY_KIND_LIMIT, &p, &h, msg))
      << msg;
  ASSERT_EQ(GMR_OK, gmr_limit_policy_register(nullptr, "from_plugin", &p));
  setenv("GMR_STACK", "limiting(limit=1K, on_limit=from_plugin) > host", 1);
  ASSERT_EQ(GMR_OK, gmr_stack_create_from_env("host", &s, &e)) << e.message;
  void *a = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(s), 4096, 0, nullptr, &a))
      << "the plugin allows up to 4 KiB past the limit";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(s), a, 4096, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  unsetenv("GMR_STACK");
  EXPECT_EQ(GMR_OK, gmr_limit_policy_unregister(nullptr, "from_plugin"));
  if (p.release != nullptr) p.release(p.ctx);
  EXPECT_EQ(GMR_OK, gmr_policy_plugin_unload(h));
  // A spec the program passes may still name the plugin.
  s = Build(spec);
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

// stream_ids=true reaches pool and fixed_block from a spec: a warm pair on a
// created stream then asks the stream's id at its allocation; by handle (the
// default) it asks nothing.
TEST_F(Stack, StreamIdsOptionReachesThePools) {
  for (const char *top : {"pool", "fixed_block(block=64KiB)"}) {
    for (bool ids : {false, true}) {
      std::string spec = std::string(top);
      if (ids) {
        spec = spec.back() == ')' ? spec.substr(0, spec.size() - 1) + ",stream_ids=true)"
                                  : spec + "(stream_ids=true)";
      }
      gmr_stack *s = Build(spec + " > cuda");
      ASSERT_NE(nullptr, s) << spec;
      gmr_resource *r = gmr_stack_as_resource(s);
      gmr_stream st = nullptr;
      ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&st));
      for (int i = 0; i < 10; ++i) {
        void *p = nullptr;
        ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, st, &p));
        ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, st));
      }
      uint64_t before = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID);
      for (int i = 0; i < 10; ++i) {
        void *p = nullptr;
        ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, st, &p));
        ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, st));
      }
      uint64_t asked = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_GET_ID) - before;
      if (ids) {
        EXPECT_EQ(10u, asked) << spec;
      } else {
        EXPECT_EQ(0u, asked) << spec;
      }
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
      EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(st));
    }
  }
}

}  // namespace
