// The sub-allocating resources are nameable in specs: pool, fixed_block and
// graph_arena, with their options reaching the resources, their errors
// explained, and the graph pool stack of docs/graph_pool.md buildable.
#include <gtest/gtest.h>

#include <string>

#include "gmr/fixed_block_resource.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/pool_resource.h"
#include "gmr/device.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"

namespace {

class StackComponents : public gmr_test::SimTest {
 protected:
  gmr_stack *Build(const std::string &spec) {
    gmr_stack *s = nullptr;
    gmr_spec_error e;
    EXPECT_EQ(GMR_OK, gmr_stack_create(spec.c_str(), &s, &e)) << e.message;
    return s;
  }
  std::string Error(const std::string &spec) {
    gmr_stack *s = nullptr;
    gmr_spec_error e;
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_stack_create(spec.c_str(), &s, &e)) << spec;
    EXPECT_EQ(nullptr, s);
    return e.message;
  }
};

TEST_F(StackComponents, PoolOptionsReachThePool) {
  gmr_stack *s = Build("pool(initial=64MiB, arenas=2, min_growth=4MiB) > cuda(kind=async)");
  ASSERT_NE(nullptr, s);
  gmr_pool_resource *pool = gmr_pool_resource_from_resource(gmr_stack_find(s, "pool_resource"));
  ASSERT_NE(nullptr, pool);
  EXPECT_EQ(2u, gmr_pool_resource_get_arena_count(pool));
  gmr_pool_resource_stats st;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &st));
  EXPECT_EQ(size_t{64} << 20, st.held_bytes);  // initial= was taken at create
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(gmr_stack_as_resource(s), 1 << 20, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &st));
  EXPECT_EQ(size_t{64} << 20, st.held_bytes);  // served from the initial chunk
  EXPECT_EQ(GMR_OK, gmr_deallocate(gmr_stack_as_resource(s), p, 1 << 20, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

TEST_F(StackComponents, FixedBlockOptionsReachTheResource) {
  gmr_stack *s = Build("fixed_block(block=64KiB, blocks_per_chunk=4, oversize=refuse) > "
                       "cuda(kind=device)");
  ASSERT_NE(nullptr, s);
  gmr_fixed_block_resource *fb =
      gmr_fixed_block_resource_from_resource(gmr_stack_find(s, "fixed_block_resource"));
  ASSERT_NE(nullptr, fb);
  EXPECT_EQ(size_t{64} << 10, gmr_fixed_block_resource_get_block_bytes(fb));
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED,
            gmr_allocate(gmr_stack_as_resource(s), (64 << 10) + 1, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_allocate(gmr_stack_as_resource(s), 1000, 0, nullptr, &p));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));  // one chunk of 4 blocks
  EXPECT_EQ(GMR_OK, gmr_deallocate(gmr_stack_as_resource(s), p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
}

TEST_F(StackComponents, TheGraphPoolStackBuildsAndServesACapture) {
  gmr_stack *s = Build(
      "tracking(per=stream) > limiting(limit=1GiB) > "
      "graph_arena(uncaptured=forward, policy=ordered_reuse, initial=8MiB) > pool > "
      "cuda(kind=async)");
  ASSERT_NE(nullptr, s);
  EXPECT_EQ(5u, gmr_stack_get_depth(s));
  gmr_graph_arena_resource *arena =
      gmr_graph_arena_resource_from_resource(gmr_stack_find(s, "graph_arena_resource"));
  ASSERT_NE(nullptr, arena);
  EXPECT_EQ(GMR_GRAPH_ARENA_ORDERED_REUSE, gmr_graph_arena_get_config(arena).capture_policy);

  gmr_stream stream = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_create(&stream));
  ASSERT_EQ(GMR_OK, gmr_stream_begin_capture(stream));
  uint64_t mallocs_before = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(gmr_stack_as_resource(s), 1 << 20, 0, stream, &p));
  EXPECT_EQ(mallocs_before, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC));
  ASSERT_EQ(GMR_OK, gmr_deallocate(gmr_stack_as_resource(s), p, 1 << 20, 0, stream));
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_end_capture(stream, &graph));  // nothing broke the capture
  EXPECT_EQ(GMR_OK, gmr_graph_destroy(graph));
  // The session was opened automatically (the arena saw the stream capture);
  // claiming it gives the graph's memory to the caller, who releases it once
  // the graph is gone.
  gmr_graph_memory *memory = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_end_capture(arena, stream, &memory));
  ASSERT_NE(nullptr, memory);
  gmr_graph_arena_stats as;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_get_stats(arena, &as));
  EXPECT_EQ(1u, as.capture_allocation_count);
  EXPECT_EQ(0u, as.upstream_calls_during_capture);
  EXPECT_EQ(0u, as.upstream_calls_in_session);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_stack_destroy(s));  // the graph memory is not released yet
  EXPECT_EQ(GMR_OK, gmr_graph_arena_release_memory(arena, memory));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
  EXPECT_EQ(GMR_OK, gmr_stream_destroy(stream));
}

TEST_F(StackComponents, BadOptionsAreExplained) {
  EXPECT_EQ("spec:1:6: unknown option 'intial' for pool (did you mean 'initial'?)",
            Error("pool(intial=1GiB) > cuda"));
  EXPECT_EQ("spec:1:1: cannot create pool: GMR_ERR_INVALID_ARGUMENT: granularity must be a "
            "power of two >= 256, min_growth <= max_growth, arenas at most 64, recent_frees at "
            "most 32",
            Error("pool(granularity=1000) > cuda"));
  EXPECT_EQ("spec:1:1: cannot create fixed_block: GMR_ERR_INVALID_ARGUMENT: block must be a "
            "positive multiple of 256, blocks_per_chunk > 0, and initial_chunks at most "
            "max_chunks",
            Error("fixed_block(block=1000) > cuda"));
  EXPECT_EQ("spec:1:20: invalid value 'fifo' for graph_arena option 'policy': expected "
            "monotone or ordered_reuse",
            Error("graph_arena(policy=fifo) > cuda"));
}

}  // namespace
