// gmr_resource_check (gmr/resource.h) checks the stack headed by a resource:
// every layer's vtable, and the books of each pool and vmm pool in it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gmr/gmr.h"
#include "tests/resource_check_probe.h"
#include "tests/support/check_stack.h"
#include "tests/support/sim_fixture.h"

namespace {

class ResourceCheck : public gmr_test::SimTest {
 protected:
  void TearDown() override {
    if (stack_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack_));
    }
    SimTest::TearDown();
  }
  gmr_resource *Build(const char *spec) {
    gmr_spec_error error;
    EXPECT_EQ(GMR_OK, gmr_stack_create(spec, &stack_, &error)) << error.message;
    return gmr_stack_as_resource(stack_);
  }
  // Allocate and free a few blocks so the books have something in them.
  static void Use(gmr_resource *top) {
    void *p[8] = {};
    for (size_t i = 0; i < 8; ++i) {
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, (i + 1) * 4096, 0, nullptr, &p[i]));
    }
    for (size_t i = 0; i < 8; i += 2) {
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top, p[i], (i + 1) * 4096, 0, nullptr));
    }
    for (size_t i = 1; i < 8; i += 2) {
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top, p[i], (i + 1) * 4096, 0, nullptr));
    }
  }
  gmr_stack *stack_ = nullptr;
};

TEST_F(ResourceCheck, ASoundStackPasses) {
  gmr_resource *top = Build("tracking > limiting(limit=1GiB) > pool > cuda");
  Use(top);
  char err[256] = "x";
  EXPECT_EQ(GMR_OK, gmr_resource_check(top));
  EXPECT_EQ(GMR_OK, check_stack(top, err, sizeof err));
  EXPECT_STREQ("", err);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_check(nullptr));
}

TEST_F(ResourceCheck, ItReachesThePoolsBooksFromTheTop) {
  gmr_resource *top = Build("tracking > pool > cuda");
  Use(top);
  gmr_pool_resource *pool =
      gmr_pool_resource_from_resource(gmr_resource_find(top, "pool_resource"));
  ASSERT_NE(nullptr, pool);
  resource_check_probe_skew_pool(pool, 4096);
  char err[256] = "";
  EXPECT_EQ(GMR_ERR_INTERNAL, gmr_resource_check(top)) << "from the top of the stack";
  EXPECT_EQ(GMR_ERR_INTERNAL, gmr_resource_check(gmr_pool_resource_as_resource(pool)));
  EXPECT_EQ(GMR_ERR_INTERNAL, check_stack(top, err, sizeof err));
  EXPECT_NE(std::string::npos, std::string(err).find("the pool counts")) << err;
  EXPECT_EQ(GMR_OK, gmr_resource_check(gmr_resource_find(top, "cuda_resource")))
      << "the layer below the pool is sound";
  resource_check_probe_skew_pool(pool, -4096);
  EXPECT_EQ(GMR_OK, gmr_resource_check(top));
  EXPECT_EQ(GMR_OK, check_stack(top, err, sizeof err));
  EXPECT_STREQ("", err);
}

TEST_F(ResourceCheck, ItReachesTheVmmPoolsBooksFromTheTop) {
  gmr_resource *top = Build("tracking > vmm_pages");
  Use(top);
  gmr_vmm_pool_resource *pool =
      gmr_vmm_pool_resource_from_resource(gmr_resource_find(top, "vmm_pool_resource"));
  ASSERT_NE(nullptr, pool);
  EXPECT_EQ(GMR_OK, gmr_resource_check(top));
  resource_check_probe_skew_vmm_pool(pool, 1);
  char err[256] = "";
  EXPECT_EQ(GMR_ERR_INTERNAL, gmr_resource_check(top));
  EXPECT_EQ(GMR_ERR_INTERNAL, check_stack(top, err, sizeof err));
  EXPECT_NE(std::string::npos, std::string(err).find("VA chunk count")) << err;
  resource_check_probe_skew_vmm_pool(pool, -1);
  EXPECT_EQ(GMR_OK, gmr_resource_check(top));
  EXPECT_EQ(GMR_OK, check_stack(top, err, sizeof err));
  EXPECT_STREQ("", err);
}

// A user's adaptor whose upstream is broken: the check looks below the top.
struct user_adaptor {
  gmr_resource base;
  gmr_resource *upstream;
};
gmr_status user_allocate(gmr_resource *, size_t, size_t, gmr_stream, void **, gmr_failure *) {
  return GMR_ERR_OUT_OF_MEMORY;
}
gmr_status user_deallocate(gmr_resource *, void *, size_t, size_t, gmr_stream) {
  return GMR_ERR_UNKNOWN_POINTER;
}
gmr_status user_destroy(gmr_resource *) { return GMR_OK; }
gmr_resource *user_upstream(const gmr_resource *self) {
  return reinterpret_cast<const user_adaptor *>(self)->upstream;
}
const gmr_resource_vtbl kUserVtbl = {
    GMR_RESOURCE_VTBL_VERSION,
    "user_adaptor",
    user_allocate,
    user_deallocate,
    user_destroy,
    user_upstream,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

TEST_F(ResourceCheck, ABrokenLayerBelowTheTopFailsTheCheck) {
  gmr_resource broken = {nullptr};
  user_adaptor user = {{&kUserVtbl}, &broken};
  char err[256] = "";
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_check(&user.base));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, check_stack(&user.base, err, sizeof err));
  EXPECT_NE(std::string::npos, std::string(err).find("layer 1")) << err;
  // The dispatch still only needs the top to be callable.
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(&user.base, 64, 0, nullptr, &p));
  user.upstream = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_check(&user.base));
}

// An event listener that is never called (the stacks it is offered loop).
void NoteEvent(void *, const gmr_event *) {}

// Run `walk` and fail the whole test binary with a message if it has not
// returned after a few seconds (a walk round a loop never would), rather
// than leave the test to Bazel's timeout.
void ExpectReturns(const char *what, std::function<void()> walk) {
  std::packaged_task<void()> task(std::move(walk));
  std::future<void> done = task.get_future();
  std::thread(std::move(task)).detach();
  if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    std::fprintf(stderr, "%s did not return: it walks round the loop forever\n", what);
    std::_Exit(1);
  }
  done.get();
}

// Issue 30: a user's get_upstream that leads back up the stack (to the layer
// itself, or to one above) made every walk down it spin forever. Each walk
// now looks for the loop first and refuses the stack.
TEST_F(ResourceCheck, AStackWhoseUpstreamLinksLoopIsRefusedByEveryWalk) {
  // top -> 1 -> 2 -> 3 -> back to 1; and a layer that is its own upstream.
  user_adaptor chain[4];
  for (size_t i = 0; i < 4; ++i) chain[i] = {{&kUserVtbl}, nullptr};
  for (size_t i = 0; i < 3; ++i) chain[i].upstream = &chain[i + 1].base;
  chain[3].upstream = &chain[1].base;
  user_adaptor self = {{&kUserVtbl}, nullptr};
  self.upstream = &self.base;
  struct Case {
    gmr_resource *top;
    const char *verdict;
  };
  for (const Case &c : {Case{&chain[0].base, "layer 3 (0: the top) has layer 1 as its upstream"},
                        Case{&self.base, "layer 0 (0: the top) has layer 0 as its upstream"}}) {
    SCOPED_TRACE(c.verdict);
    char err[256] = "";
    ExpectReturns("gmr_resource_check", [&] {
      EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_check(c.top));
      EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, check_stack(c.top, err, sizeof err));
    });
    EXPECT_NE(std::string::npos, std::string(err).find(c.verdict)) << err;
    ExpectReturns("gmr_resource_find", [&] {
      EXPECT_EQ(nullptr, gmr_resource_find(c.top, "user_adaptor"));
      EXPECT_EQ(nullptr, gmr_resource_find(c.top, "pool_resource"));
      EXPECT_EQ(nullptr, gmr_resource_find(c.top, "no_such_type"));
    });
    ExpectReturns("gmr_resource_trim", [&] {
      size_t released = 1;
      EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_trim(c.top, &released));
      EXPECT_EQ(0u, released);
    });
    ExpectReturns("gmr_resource_get_footprint", [&] {
      gmr_footprint fp = {1, 1};
      EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_get_footprint(c.top, &fp));
      EXPECT_EQ(0u, fp.held_bytes);
    });
    ExpectReturns("gmr_resource_get_memory_info", [&] {
      gmr_memory_info info = GMR_MEMORY_INFO_INIT;
      EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_get_memory_info(c.top, &info));
    });
    ExpectReturns("gmr_resource_add_event_listener", [&] {
      EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
                gmr_resource_add_event_listener(c.top, NoteEvent, nullptr));
      EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
                gmr_resource_remove_event_listener(c.top, NoteEvent, nullptr));
    });
    ExpectReturns("gmr_resource_write_stats_json", [&] {
      char json[64] = "unchanged";
      size_t bytes = 0;
      EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
                gmr_resource_write_stats_json(c.top, json, sizeof json, &bytes));
      EXPECT_STREQ("unchanged", json);
    });
  }
}

// The loop test has no depth limit: a chain longer than any spec may be
// (GMR_STACK_MAX_DEPTH) is walked to its end, and a layer named twice is
// not a loop.
TEST_F(ResourceCheck, ALongChainWithoutALoopIsWalkedToItsEnd) {
  gmr_resource *pool_top = Build("pool > cuda");
  std::vector<user_adaptor> chain(3 * GMR_STACK_MAX_DEPTH, user_adaptor{{&kUserVtbl}, nullptr});
  for (size_t i = 0; i + 1 < chain.size(); ++i) chain[i].upstream = &chain[i + 1].base;
  chain.back().upstream = pool_top;
  EXPECT_EQ(GMR_OK, gmr_resource_check(&chain[0].base));
  EXPECT_EQ(&chain[0].base, gmr_resource_find(&chain[0].base, "user_adaptor"));
  EXPECT_NE(nullptr, gmr_resource_find(&chain[0].base, "pool_resource"));
  gmr_footprint fp;
  EXPECT_EQ(GMR_OK, gmr_resource_get_footprint(&chain[0].base, &fp));
}

}  // namespace
