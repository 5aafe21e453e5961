// A resource written by a user in plain C, outside the library
// (tests/support/user_resource.c), works with the library's dispatch, and
// user code stacks on the library's resources.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/resource.h"
#include "tests/support/mock_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/support/user_resource.h"

namespace {

TEST(UserResource, WorksThroughTheDispatch) {
  alignas(256) static unsigned char buffer[4096];
  user_arena *a = user_arena_create(buffer, sizeof buffer);
  ASSERT_NE(nullptr, a);
  gmr_resource *r = user_arena_resource(a);
  ASSERT_EQ(GMR_OK, gmr_resource_check(r));
  EXPECT_STREQ("user_arena", gmr_resource_get_type_name(r));

  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 0, nullptr, &q));
  EXPECT_EQ(buffer, p);
  EXPECT_EQ(buffer + 256, q);  // the dispatch's default alignment reached the user code

  // Full: the user's status and message come back through the dispatch.
  void *big = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 4000, 0, nullptr, &big, &f));
  EXPECT_EQ(nullptr, big);
  EXPECT_EQ(r, f.where);
  EXPECT_NE(nullptr, std::strstr(f.message, "user arena full")) << f.message;

  // Optional slots left NULL are handled by the library.
  size_t released = 1;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, released);
  EXPECT_EQ(nullptr, gmr_resource_get_upstream(r));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  EXPECT_EQ(sizeof buffer, fp.held_bytes);

  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 100, 0, nullptr));
  EXPECT_EQ(0u, user_arena_live_count(a));
  EXPECT_EQ(0u, user_arena_used_bytes(a));  // the arena rewound
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST(UserResource, AdaptorWrittenByAUserStacksOnTheUserArena) {
  alignas(256) static unsigned char buffer[1024];
  user_arena *a = user_arena_create(buffer, sizeof buffer);
  gmr_mock_resource *top = gmr_mock_resource_create(user_arena_resource(a));
  gmr_resource *t = gmr_mock_resource_as_resource(top);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(t, 512, 0, nullptr, &p));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(t, &fp));  // answered by the user arena
  EXPECT_EQ(sizeof buffer, fp.held_bytes);
  void *q = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(t, 1024, 0, nullptr, &q, &f));
  EXPECT_EQ(user_arena_resource(a), f.where);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(t, p, 512, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(t));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(user_arena_resource(a)));
}

using UserOnLibrary = gmr_test::SimTest;

TEST_F(UserOnLibrary, UserAdaptorStacksOnCudaResource) {
  gmr_cuda_resource *cuda = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(nullptr, &cuda));
  gmr_mock_resource *user = gmr_mock_resource_create(gmr_cuda_resource_as_resource(cuda));
  gmr_resource *top = gmr_mock_resource_as_resource(user);

  std::vector<void *> ptrs;
  for (int i = 0; i < 10; ++i) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 4096, 0, nullptr, &p));
    ptrs.push_back(p);
  }
  EXPECT_EQ(10u, gmr_cuda_resource_get_live_count(cuda));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(top, &fp));
  EXPECT_EQ(10u * 4096, fp.held_bytes);

  // A CUDA failure below the user's adaptor reaches the caller intact.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, 2));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(top, 4096, 0, nullptr, &p, &f));
  EXPECT_EQ(gmr_cuda_resource_as_resource(cuda), f.where);
  EXPECT_EQ(2, f.cuda_error);

  for (void *q : ptrs) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, q, 4096, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cuda_resource_as_resource(cuda)));
}

}  // namespace
