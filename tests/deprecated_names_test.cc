// The names renamed or merged in 0.2.0 (CHANGELOG.md) still work until 0.3.0:
// each old function answers as the one that replaces it (the same function
// under its old name, or a thin call of the generic one: find, check, get
// the upstream, policies by name, log stats, the stream functions now in
// gmr/sim/streams.h), python/gmr's ctypes bindings call some of them, and the
// old stats type names and macros are the new ones. tests/install_test.sh
// checks that libgmr.so exports them; tests/downcast_test.cc calls the
// exported 0.1 downcast symbols.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "gmr/gmr.h"
#include "gmr/nccl/chunk_listener_adaptor.h"
#include "gmr/nccl/cumem_resource.h"
#include "gmr/nccl/nccl.h"
#include "gmr/nccl/symmetric_resource.h"
#include "gmr/scoped/scoped_pool.h"
#include "gmr/sim/streams.h"
#include "gmr/tiers/tier_manager.h"
#include "tests/support/sim_fixture.h"

// This file uses the deprecated names on purpose.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {

class DeprecatedNames : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    unsetenv("GMR_STACK");
    ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host_));
    r_ = gmr_host_resource_as_resource(host_);
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
    EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
    EXPECT_EQ(GMR_OK, gmr_device_resource_set_spec(nullptr, nullptr));
    SimTest::TearDown();
  }
  gmr_host_resource *host_ = nullptr;
  gmr_resource *r_ = nullptr;
};

TEST_F(DeprecatedNames, TheDispatchFunctionsAnswerAsTheirNewNames) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(r_, 512, 0, nullptr, &p));
  EXPECT_EQ(1u, gmr_host_resource_get_live_count(host_));
  EXPECT_EQ(GMR_OK, gmr_deallocate(r_, p, 512, 0, nullptr));
  EXPECT_EQ(0u, gmr_host_resource_get_live_count(host_));

  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_allocate_ex(r_, 512, 0, nullptr, &p, &f));
  EXPECT_EQ(gmr_resource_record_stream(r_, p, nullptr), gmr_record_stream(r_, p, nullptr));
  gmr_failure a = GMR_FAILURE_INIT;
  gmr_failure b = GMR_FAILURE_INIT;
  EXPECT_EQ(gmr_resource_extend(r_, p, 512, 1024, 0, nullptr, &a),
            gmr_extend(r_, p, 512, 1024, 0, nullptr, &b));
  EXPECT_STREQ(a.message, b.message);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 512, 0, nullptr));

  void *q = nullptr;
  a = GMR_FAILURE_INIT;
  b = GMR_FAILURE_INIT;
  const gmr_status want = gmr_resource_allocate_capturing(r_, 64, 0, nullptr, &q, &a);
  if (want == GMR_OK) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 64, 0, nullptr));
  }
  EXPECT_EQ(want, gmr_allocate_capturing(r_, 64, 0, nullptr, &q, &b));
  if (want == GMR_OK) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 64, 0, nullptr));
  }
  EXPECT_STREQ(a.message, b.message);

  f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_allocate_ex(nullptr, 64, 0, nullptr, &p, &f));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, f.status);
  EXPECT_STREQ(gmr_resource_get_type_name(r_), gmr_resource_type_name(r_));
}

TEST_F(DeprecatedNames, TheDeviceRegistryAnswersAsItsNewNames) {
  ASSERT_EQ(GMR_OK, gmr_set_device_resource_spec("host", nullptr));
  gmr_resource *a = nullptr;
  gmr_resource *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_get_device_resource(0, &a, nullptr));
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &b, nullptr));
  EXPECT_EQ(a, b);
  ASSERT_EQ(GMR_OK, gmr_get_current_device_resource(&b, nullptr));
  EXPECT_EQ(a, b);
  EXPECT_STREQ("host", gmr_get_device_resource_spec(0));
  gmr_resource *previous = nullptr;
  ASSERT_EQ(GMR_OK, gmr_set_device_resource(0, r_, &previous));
  EXPECT_EQ(a, previous);
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &b, nullptr));
  EXPECT_EQ(r_, b);
  EXPECT_EQ(GMR_OK, gmr_device_resources_release());
  EXPECT_EQ(nullptr, gmr_get_device_resource_spec(0));
}

TEST_F(DeprecatedNames, TheFindsAnswerAsTheGenericFind) {
  gmr_stack *stack = nullptr;
  gmr_spec_error error;
  ASSERT_EQ(GMR_OK, gmr_stack_create("tracking > graph_arena > pool > chunk_listener > vmm_pages",
                                     &stack, &error))
      << error.message;
  gmr_resource *top = gmr_stack_as_resource(stack);
  for (const char *name : {"tracking_adaptor", "graph_arena_resource", "pool_resource",
                           "chunk_listener_adaptor", "vmm_pool_resource", "limiting_adaptor"}) {
    EXPECT_EQ(gmr_resource_find(top, name), gmr_stack_find(stack, name)) << name;
  }
  EXPECT_NE(nullptr, gmr_stack_find(stack, "pool_resource"));
  EXPECT_EQ(nullptr, gmr_stack_find(nullptr, "pool_resource"));
  EXPECT_EQ(gmr_resource_find(top, "graph_arena_resource"),
            gmr_graph_arena_resource_as_resource(gmr_graph_arena_resource_find_in_stack(top)));
  EXPECT_NE(nullptr, gmr_graph_arena_resource_find_in_stack(top));
  EXPECT_EQ(gmr_resource_find(top, "vmm_pool_resource"),
            gmr_vmm_pool_resource_as_resource(gmr_vmm_pool_resource_find(top)));
  EXPECT_NE(nullptr, gmr_vmm_pool_resource_find(top));
  EXPECT_EQ(gmr_resource_find(top, "chunk_listener_adaptor"),
            gmr_chunk_listener_adaptor_as_resource(gmr_chunk_listener_adaptor_find(top)));
  EXPECT_NE(nullptr, gmr_chunk_listener_adaptor_find(top));
  EXPECT_EQ(nullptr, gmr_vmm_pool_resource_find(r_));
  EXPECT_EQ(nullptr, gmr_graph_arena_resource_find_in_stack(nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
}

TEST_F(DeprecatedNames, TheInvariantChecksAnswerAsGmrResourceCheck) {
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(r_, nullptr, &pool));
  char err[64] = "x";
  EXPECT_EQ(gmr_resource_check(gmr_pool_resource_as_resource(pool)),
            gmr_pool_resource_check_invariants(pool, err, sizeof err));
  EXPECT_STREQ("", err);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_pool_resource_check_invariants(nullptr, err, sizeof err));
  EXPECT_EQ(gmr_resource_get_upstream(gmr_pool_resource_as_resource(pool)),
            gmr_pool_resource_get_upstream(pool));
  EXPECT_EQ(r_, gmr_pool_resource_get_upstream(pool));
  EXPECT_EQ(nullptr, gmr_pool_resource_get_upstream(nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_pool_resource_as_resource(pool)));
  gmr_stack *stack = nullptr;
  gmr_spec_error error;
  ASSERT_EQ(GMR_OK, gmr_stack_create("vmm_pages", &stack, &error)) << error.message;
  gmr_vmm_pool_resource *vmm = gmr_vmm_pool_resource_from_resource(gmr_stack_as_resource(stack));
  ASSERT_NE(nullptr, vmm);
  std::snprintf(err, sizeof err, "x");
  EXPECT_EQ(gmr_resource_check(gmr_stack_as_resource(stack)),
            gmr_vmm_pool_resource_check_invariants(vmm, err, sizeof err));
  EXPECT_STREQ("", err);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_vmm_pool_resource_check_invariants(nullptr, err, sizeof err));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
}

// The built-in policies' constructors give the named policy with the fields
// set as their arguments say.
TEST_F(DeprecatedNames, ThePolicyConstructorsAnswerAsFromName) {
  static gmr_oom_action (*const callback)(void *, const gmr_failure *) =
      [](void *, const gmr_failure *) { return GMR_OOM_ACTION_RETRY; };
  int ctx = 0;
  gmr_oom_policy want;
  ASSERT_EQ(GMR_OK, gmr_oom_policy_from_name("fail", &want));
  gmr_oom_policy got = gmr_oom_policy_fail();
  EXPECT_STREQ(want.name, got.name);
  EXPECT_EQ(want.decide, got.decide);
  EXPECT_EQ(want.max_attempts, got.max_attempts);
  ASSERT_EQ(GMR_OK, gmr_oom_policy_from_name("retry", &want));
  got = gmr_oom_policy_retry(callback, &ctx, 5);
  EXPECT_STREQ(want.name, got.name);
  EXPECT_EQ(want.decide, got.decide);
  EXPECT_EQ(callback, got.callback);
  EXPECT_EQ(&ctx, got.callback_ctx);
  EXPECT_EQ(5u, got.max_attempts);
  EXPECT_EQ(GMR_OOM_MAX_ATTEMPTS, gmr_oom_policy_retry(nullptr, nullptr, 1000).max_attempts)
      << "the constructors cap the attempts";
  ASSERT_EQ(GMR_OK, gmr_oom_policy_from_name("trim_retry", &want));
  got = gmr_oom_policy_trim_retry(2);
  EXPECT_STREQ(want.name, got.name);
  EXPECT_EQ(want.decide, got.decide);
  EXPECT_EQ(2u, got.max_attempts);
  ASSERT_EQ(GMR_OK, gmr_oom_policy_from_name("wait", &want));
  got = gmr_oom_policy_wait(123, 4);
  EXPECT_STREQ(want.name, got.name);
  EXPECT_EQ(want.decide, got.decide);
  EXPECT_EQ(123u, got.wait_timeout_ns);
  EXPECT_EQ(4u, got.max_attempts);
  EXPECT_EQ(GMR_OK, gmr_oom_policy_check(&got));

  gmr_limit_policy lwant;
  for (const char *name : {"fail", "ignore"}) {
    ASSERT_EQ(GMR_OK, gmr_limit_policy_from_name(name, &lwant));
    gmr_limit_policy lgot =
        std::strcmp(name, "fail") == 0 ? gmr_limit_policy_fail() : gmr_limit_policy_ignore();
    EXPECT_STREQ(lwant.name, lgot.name);
    EXPECT_EQ(lwant.decide, lgot.decide);
  }
  ASSERT_EQ(GMR_OK, gmr_limit_policy_from_name("increase", &lwant));
  gmr_limit_policy lgot = gmr_limit_policy_increase(2.0, 4096);
  EXPECT_STREQ(lwant.name, lgot.name);
  EXPECT_EQ(lwant.decide, lgot.decide);
  EXPECT_DOUBLE_EQ(2.0, lgot.padding_factor);
  EXPECT_EQ(4096u, lgot.cap_bytes);
  EXPECT_DOUBLE_EQ(1.0, gmr_limit_policy_increase(0.1, 0).padding_factor) << "clamped to 1";
  ASSERT_EQ(GMR_OK, gmr_limit_policy_from_name("increase_total", &lwant));
  lgot = gmr_limit_policy_increase_total(1.5, 0);
  EXPECT_STREQ(lwant.name, lgot.name);
  EXPECT_EQ(lwant.decide, lgot.decide);
  EXPECT_DOUBLE_EQ(1.5, lgot.padding_factor);
  EXPECT_EQ(GMR_OK, gmr_limit_policy_check(&lgot));
}

TEST_F(DeprecatedNames, TheTrackingThreadIdIsTheOwnerOfTheCallingThread) {
  gmr_tracking_adaptor_config c = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  c.per = GMR_TRACKING_PER_THREAD;
  gmr_tracking_adaptor *trk = nullptr;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_create(r_, &c, &trk));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_resource_allocate(gmr_tracking_adaptor_as_resource(trk), 64, 0, nullptr, &p));
  gmr_tracking_adaptor_owner_stats s = GMR_TRACKING_ADAPTOR_OWNER_STATS_INIT;
  ASSERT_EQ(GMR_OK,
            gmr_tracking_adaptor_get_owner_stats(trk, GMR_TRACKING_OWNER_CALLING_THREAD, &s));
  EXPECT_EQ(gmr_tracking_thread_id(), s.owner);
  EXPECT_EQ(64, s.bytes.current);
  EXPECT_EQ(GMR_OK,
            gmr_resource_deallocate(gmr_tracking_adaptor_as_resource(trk), p, 64, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_tracking_adaptor_as_resource(trk)));
}

TEST_F(DeprecatedNames, TheLogGettersAnswerAsTheStats) {
  std::FILE *file = std::tmpfile();
  ASSERT_NE(nullptr, file);
  gmr_log_adaptor_config config = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
  config.file = file;
  gmr_log_adaptor *log = nullptr;
  ASSERT_EQ(GMR_OK, gmr_log_adaptor_create(r_, &config, &log));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_log_adaptor_as_resource(log), 64, 0, nullptr, &p));
  gmr_log_adaptor_stats s = GMR_LOG_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_log_adaptor_get_stats(log, &s));
  EXPECT_EQ(1u, s.row_count);
  EXPECT_EQ(s.row_count, gmr_log_adaptor_get_row_count(log));
  EXPECT_EQ(s.write_error_count, gmr_log_adaptor_get_write_error_count(log));
  EXPECT_EQ(0u, gmr_log_adaptor_get_row_count(nullptr));
  EXPECT_EQ(0u, gmr_log_adaptor_get_write_error_count(nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(gmr_log_adaptor_as_resource(log), p, 64, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_log_adaptor_as_resource(log)));
  std::fclose(file);
}

// The stream, capture and copy functions moved to gmr/sim/streams.h answer
// under their old names in libgmr.
TEST_F(DeprecatedNames, TheStreamFunctionsAnswerAsTheirSimNames) {
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_create(&s));
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stream_create(nullptr));
  EXPECT_EQ(gmr_cuda_stream_create(nullptr), gmr_stream_create(nullptr));
  char src[64] = "copied through the deprecated name";
  char dst[64] = {0};
  EXPECT_EQ(GMR_OK, gmr_memcpy_async(dst, src, sizeof src, s));
  EXPECT_EQ(GMR_OK, gmr_stream_synchronize(s));
  EXPECT_STREQ(src, dst);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_memcpy_async(nullptr, src, 1, s));
  EXPECT_EQ(GMR_OK, gmr_memcpy_async(nullptr, nullptr, 0, s));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(s));
  gmr_graph graph = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stream_end_capture(s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(s, &graph));
  EXPECT_NE(nullptr, graph);
  EXPECT_EQ(GMR_OK, gmr_graph_destroy(graph));
  EXPECT_EQ(GMR_OK, gmr_graph_destroy(nullptr));
  EXPECT_EQ(GMR_OK, gmr_stream_destroy(s));
  EXPECT_EQ(GMR_OK, gmr_stream_destroy(nullptr));
}

TEST_F(DeprecatedNames, TheOldStatsNamesAreTheNewTypesAndMacros) {
  static_assert(std::is_same<gmr_pool_stats, gmr_pool_resource_stats>::value, "");
  static_assert(std::is_same<gmr_fixed_block_stats, gmr_fixed_block_resource_stats>::value, "");
  static_assert(std::is_same<gmr_graph_arena_stats, gmr_graph_arena_resource_stats>::value, "");
  static_assert(std::is_same<gmr_limiting_stats, gmr_limiting_adaptor_stats>::value, "");
  static_assert(
      std::is_same<gmr_chunk_listener_stats, gmr_chunk_listener_adaptor_stats>::value, "");
  static_assert(std::is_same<gmr_tracking_stats, gmr_tracking_adaptor_stats>::value, "");
  static_assert(
      std::is_same<gmr_tracking_owner_stats, gmr_tracking_adaptor_owner_stats>::value, "");
  static_assert(GMR_POOL_STATS_VERSION == GMR_POOL_RESOURCE_STATS_VERSION, "");
  static_assert(GMR_FIXED_BLOCK_STATS_VERSION == GMR_FIXED_BLOCK_RESOURCE_STATS_VERSION, "");
  static_assert(GMR_GRAPH_ARENA_STATS_VERSION == GMR_GRAPH_ARENA_RESOURCE_STATS_VERSION, "");
  static_assert(GMR_LIMITING_STATS_VERSION == GMR_LIMITING_ADAPTOR_STATS_VERSION, "");
  static_assert(GMR_CHUNK_LISTENER_STATS_VERSION == GMR_CHUNK_LISTENER_ADAPTOR_STATS_VERSION, "");
  static_assert(GMR_TRACKING_STATS_VERSION == GMR_TRACKING_ADAPTOR_STATS_VERSION, "");
  static_assert(GMR_TRACKING_OWNER_STATS_VERSION == GMR_TRACKING_ADAPTOR_OWNER_STATS_VERSION, "");
  static_assert(GMR_CUMEM_STATS_VERSION == GMR_CUMEM_RESOURCE_STATS_VERSION, "");
  static_assert(GMR_SYMMETRIC_STATS_VERSION == GMR_SYMMETRIC_RESOURCE_STATS_VERSION, "");
  static_assert(GMR_VMM_POOL_STATS_VERSION == GMR_VMM_POOL_RESOURCE_STATS_VERSION, "");
  gmr_oom_counts zero = GMR_OOM_COUNTS_ZERO;  // now with the header of GMR_OOM_COUNTS_INIT
  EXPECT_EQ(sizeof(gmr_oom_counts), zero.size);
  EXPECT_EQ(GMR_OOM_COUNTS_VERSION, zero.version);
  EXPECT_EQ(0u, zero.failure_count);
  // Code written for 0.1 still fills its stats with the old names.
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(r_, nullptr, &pool));
  gmr_pool_stats s = GMR_POOL_STATS_INIT;
  EXPECT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &s));
  EXPECT_EQ(GMR_POOL_RESOURCE_STATS_VERSION, s.version);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_pool_resource_as_resource(pool)));
}

}  // namespace
