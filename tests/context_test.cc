// gmr_context (gmr/context.h): policy names and optional libraries'
// components belong to the context they were registered in; the default
// context is the one every function without a context uses; stacks outlive
// the context they were built in. And the extension interface's
// registration (stack/registry.h): another extension version, a taken name
// and a full context are refused with nothing registered.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmr/context.h"
#include "gmr/nccl/nccl.h"
#include "gmr/policy.h"
#include "gmr/stack.h"
#include "stack/registry.h"
#include "tests/support/policies.h"
#include "tests/support/sim_fixture.h"

namespace {

class Context : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    gmr_test::SimTest::SetUp();
    ASSERT_EQ(GMR_OK, gmr_context_create(&ctx_));
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_context_destroy(ctx_));
    gmr_test::SimTest::TearDown();
  }
  // The error of building `spec` in `ctx` ("" when it builds; the stack is destroyed).
  static std::string Error(gmr_context *ctx, const std::string &spec) {
    gmr_stack *s = nullptr;
    gmr_spec_error e;
    gmr_status st = gmr_stack_create_in(ctx, spec.c_str(), &s, &e);
    if (st == GMR_OK) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
      return "";
    }
    EXPECT_EQ(nullptr, s);
    return e.message;
  }
  gmr_context *ctx_ = nullptr;
};

TEST_F(Context, TheDefaultIsOneObjectThatCannotBeDestroyed) {
  gmr_context *d = gmr_context_default();
  ASSERT_NE(nullptr, d);
  EXPECT_EQ(d, gmr_context_default());
  EXPECT_NE(d, ctx_);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_context_destroy(d));
  EXPECT_EQ(GMR_OK, gmr_context_destroy(nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_context_create(nullptr));
  // NULL and the default build the same way.
  EXPECT_EQ("", Error(nullptr, "pool > cumem"));
  EXPECT_EQ("", Error(d, "pool > cumem"));
}

TEST_F(Context, PolicyNamesAreSeenOnlyInTheContextTheyWereRegisteredIn) {
  gmr_oom_policy mine = gmr_test::RetryPolicy(nullptr, nullptr, 2);
  mine.name = "mine";
  ASSERT_EQ(GMR_OK, gmr_oom_policy_register(ctx_, "mine", &mine));
  EXPECT_EQ("", Error(ctx_, "oom(policy=mine) > host"));
  EXPECT_NE(std::string::npos,
            Error(nullptr, "oom(policy=mine) > host").find("unknown OOM policy 'mine'"))
      << "the default context does not see it";
  gmr_oom_policy got;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_policy_from_name("mine", &got))
      << "from_name reads the default context";
  // The same name in the default context is another registration.
  gmr_limit_policy soft = gmr_test::LimitPolicy("ignore");
  ASSERT_EQ(GMR_OK, gmr_limit_policy_register(nullptr, "soft", &soft));
  ASSERT_EQ(GMR_OK, gmr_limit_policy_register(ctx_, "soft", &soft));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_limit_policy_register(ctx_, "soft", &soft)) << "taken";
  EXPECT_EQ(GMR_OK, gmr_limit_policy_unregister(nullptr, "soft"));
  EXPECT_EQ("", Error(ctx_, "limiting(limit=1K, on_limit=soft) > host")) << "still in ctx";
  EXPECT_NE(std::string::npos, Error(nullptr, "limiting(limit=1K, on_limit=soft) > host")
                                   .find("unknown limit policy 'soft'"));
  EXPECT_EQ(GMR_OK, gmr_oom_policy_unregister(ctx_, "mine"));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_policy_unregister(ctx_, "mine"));
  // Built-in names are in every context and cannot be registered.
  EXPECT_EQ("", Error(ctx_, "oom(policy=trim_retry) > limiting(on_limit=increase) > host"));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_oom_policy_register(ctx_, "wait", &mine));
}

TEST_F(Context, AStackOutlivesTheContextItWasBuiltIn) {
  gmr_oom_policy mine = gmr_test::RetryPolicy(nullptr, nullptr, 1);
  mine.name = "mine";
  ASSERT_EQ(GMR_OK, gmr_oom_policy_register(ctx_, "mine", &mine));
  ASSERT_EQ(GMR_OK, gmr_nccl_register_components(ctx_));
  gmr_stack *s = nullptr;
  gmr_spec_error e;
  ASSERT_EQ(GMR_OK, gmr_stack_create_in(ctx_, "oom(policy=mine) > pool > cumem", &s, &e))
      << e.message;
  EXPECT_EQ(GMR_OK, gmr_context_destroy(ctx_));
  ctx_ = nullptr;
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(s), 4096, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(s), p, 4096, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

// Registrations and builds from several threads at once, in one created
// context (run under --config=tsan too).
TEST_F(Context, ThreadsRegisterAndBuildInOneContextAtOnce) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t, &failures] {
      std::string name = "policy" + std::to_string(t);
      gmr_oom_policy p = gmr_test::RetryPolicy(nullptr, nullptr, 1);
      p.name = "retry";
      for (int i = 0; i < 20; ++i) {
        if (gmr_nccl_register_components(ctx_) != GMR_OK) failures++;
        if (gmr_oom_policy_register(ctx_, name.c_str(), &p) != GMR_OK) failures++;
        if (!Error(ctx_, "oom(policy=" + name + ") > pool > cumem").empty()) failures++;
        if (gmr_oom_policy_unregister(ctx_, name.c_str()) != GMR_OK) failures++;
      }
    });
  }
  for (std::thread &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
}

// libgmr names no component of libgmr_nccl: a context knows them once the
// library registered them there. This test links libgmr_nccl, which
// registered them in the default context as it loaded.
TEST_F(Context, AnOptionalLibrarysComponentsComeWithItsRegistration) {
  std::string msg = Error(ctx_, "pool > cumem");
  EXPECT_EQ(0u, msg.find("spec:1:8: unknown component 'cumem' (known: cuda, fixed_block, "
                         "graph_arena, host, limiting, log, nvtx_logging, oom, pool, tracking, "
                         "vmm, vmm_pages); an optional library's components are known once it is "
                         "loaded: link or dlopen libgmr_nccl (NCCL's), and for a context of "
                         "your own call gmr_nccl_register_components()"))
      << msg;
  EXPECT_EQ("", Error(nullptr, "pool > cumem")) << "the default context has them";
  ASSERT_EQ(GMR_OK, gmr_nccl_register_components(ctx_));
  ASSERT_EQ(GMR_OK, gmr_nccl_register_components(ctx_)) << "again: nothing changes";
  EXPECT_EQ("", Error(ctx_, "pool > cumem"));
  EXPECT_EQ("", Error(ctx_, "pool > chunk_listener > cumem"));
  // Once registered, a name near none is told the known ones, no hint.
  EXPECT_EQ("spec:1:1: unknown component 'zzz' (known: chunk_listener, cuda, cumem, "
            "fixed_block, graph_arena, host, limiting, log, nvtx_logging, oom, pool, "
            "symmetric, tracking, vmm, vmm_pages)",
            Error(ctx_, "zzz"));
}

// Components for the registration tests: never created (the registration
// only reads their names).
gmr_status NeverCreate(const gmr__option_value *, gmr_resource *, gmr_resource **, char *,
                       size_t) {
  return GMR_ERR_INTERNAL;
}
bool NoDefault(size_t, char *, size_t) { return false; }

gmr__component Component(const char *name) {
  gmr__component c{};
  c.name = name;
  c.kind = GMR__COMPONENT_RESOURCE;
  c.help = "a test component";
  c.create = NeverCreate;
  c.describe_default = NoDefault;
  return c;
}

TEST_F(Context, AnotherExtensionVersionIsRefusedAndNamedWhenItsComponentIsAskedFor) {
  static const gmr__component fake = Component("fake");
  static const gmr__component *const list[] = {&fake};
  const gmr__extension other = {GMR_EXTENSION_VERSION + 1, "libgmr_fake", list, 1};
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr__extension_register(ctx_, &other));
  std::string msg = Error(ctx_, "pool > fake");
  EXPECT_NE(std::string::npos,
            msg.find("; refused: libgmr_fake was built for gmr's extension interface " +
                     std::to_string(GMR_EXTENSION_VERSION + 1) + ", this libgmr has " +
                     std::to_string(GMR_EXTENSION_VERSION)))
      << msg;
  EXPECT_EQ(std::string::npos, Error(nullptr, "pool > fake").find("refused")) << "ctx's only";
  const gmr__extension same = {GMR_EXTENSION_VERSION, "libgmr_fake", list, 1};
  ASSERT_EQ(GMR_OK, gmr__extension_register(ctx_, &same));
  EXPECT_NE(std::string::npos, Error(ctx_, "fake").find("cannot create fake"))
      << "known now (and never meant to be created)";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr__extension_register(ctx_, nullptr));
}

TEST_F(Context, ATakenNameOrAFullContextRegistersNothing) {
  static const gmr__component pool = Component("pool");  // libgmr's own name
  static const gmr__component fresh = Component("fresh");
  static const gmr__component *const clash[] = {&fresh, &pool};
  const gmr__extension ext = {GMR_EXTENSION_VERSION, "libgmr_clash", clash, 2};
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr__extension_register(ctx_, &ext));
  EXPECT_NE(std::string::npos, Error(ctx_, "fresh").find("unknown component 'fresh'"))
      << "all or nothing";
  // Room for GMR__CONTEXT_EXTRA_COMPONENTS beyond libgmr's.
  static std::vector<std::string> names;
  static std::vector<gmr__component> many;
  static std::vector<const gmr__component *> pointers;
  for (int i = 0; i <= GMR__CONTEXT_EXTRA_COMPONENTS; ++i) {
    names.push_back("extra" + std::to_string(i));
  }
  for (const std::string &n : names) many.push_back(Component(n.c_str()));
  for (const gmr__component &c : many) pointers.push_back(&c);
  const gmr__extension too_many = {GMR_EXTENSION_VERSION, "libgmr_many", pointers.data(),
                                   pointers.size()};
  EXPECT_EQ(GMR_ERR_BUSY, gmr__extension_register(ctx_, &too_many));
  EXPECT_NE(std::string::npos, Error(ctx_, "extra0").find("unknown component 'extra0'"));
  const gmr__extension fits = {GMR_EXTENSION_VERSION, "libgmr_many", pointers.data(),
                               pointers.size() - 1};
  EXPECT_EQ(GMR_OK, gmr__extension_register(ctx_, &fits));
  EXPECT_NE(std::string::npos, Error(ctx_, "extra0").find("cannot create extra0"));
}

}  // namespace
