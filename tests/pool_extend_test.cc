// pool_resource over an upstream that grows allocations in place (the extend
// slot of gmr/resource.h, as vmm_pool has it): the pool grows a chunk whose
// free tail then holds the request, instead of taking a new chunk; when the
// upstream refuses, it takes a new chunk as before.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <thread>

#include "gmr/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/pool_resource.h"
#include "tests/pool_test_fixture.h"
#include "tests/support/sim_fixture.h"

namespace {

using namespace pool_test;

// A bump arena over a host buffer whose last allocation can grow in place.
struct ExtendUpstream {
  gmr_resource base;
  char *buffer;
  size_t capacity;
  size_t used;
  std::map<uintptr_t, size_t> *live;
  int allocate_count;
  int extend_count;
  gmr_status refuse;  // GMR_OK: extend when the space after is free
};

ExtendUpstream *Up(gmr_resource *r) { return reinterpret_cast<ExtendUpstream *>(r); }

gmr_status eu_allocate(gmr_resource *self, size_t bytes, size_t, gmr_stream, void **out,
                       gmr_failure *) {
  ExtendUpstream *u = Up(self);
  size_t rounded = (bytes + 255) / 256 * 256;
  if (u->used + rounded > u->capacity) return GMR_ERR_OUT_OF_MEMORY;
  *out = u->buffer + u->used;
  (*u->live)[reinterpret_cast<uintptr_t>(*out)] = rounded;
  u->used += rounded;
  u->allocate_count++;
  return GMR_OK;
}

gmr_status eu_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t, gmr_stream) {
  ExtendUpstream *u = Up(self);
  auto it = u->live->find(reinterpret_cast<uintptr_t>(ptr));
  if (it == u->live->end()) return GMR_ERR_UNKNOWN_POINTER;
  if (it->second != (bytes + 255) / 256 * 256) return GMR_ERR_FREE_MISMATCH;
  if (static_cast<char *>(ptr) + it->second == u->buffer + u->used) {
    u->used = static_cast<size_t>(static_cast<char *>(ptr) - u->buffer);  // the top: reusable
  }
  u->live->erase(it);
  return GMR_OK;
}

gmr_status eu_extend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes, size_t,
                     gmr_stream, gmr_failure *) {
  ExtendUpstream *u = Up(self);
  auto it = u->live->find(reinterpret_cast<uintptr_t>(ptr));
  if (it == u->live->end()) return GMR_ERR_UNKNOWN_POINTER;
  if (it->second != bytes) return GMR_ERR_FREE_MISMATCH;
  if (u->refuse != GMR_OK) return u->refuse;
  if (static_cast<char *>(ptr) + bytes != u->buffer + u->used) return GMR_ERR_UNSUPPORTED;
  if (u->used + (new_bytes - bytes) > u->capacity) return GMR_ERR_OUT_OF_MEMORY;
  u->used += new_bytes - bytes;
  it->second = new_bytes;
  u->extend_count++;
  return GMR_OK;
}

gmr_status eu_destroy(gmr_resource *) { return GMR_OK; }

const gmr_resource_vtbl extend_upstream_vtbl = {
    GMR_RESOURCE_VTBL_VERSION, "extend_upstream", eu_allocate, eu_deallocate, eu_destroy,
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, eu_extend};

class PoolExtendTest : public PoolTest {
 protected:
  void SetUp() override {
    PoolTest::SetUp();
    up_.base.vtbl = &extend_upstream_vtbl;
    up_.capacity = 64 * MiB;
    up_.buffer = static_cast<char *>(std::aligned_alloc(256, up_.capacity));
    up_.live = &live_;
  }
  void TearDown() override {
    for (gmr_pool_resource *p : pools_) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_pool_resource_as_resource(p)));
    }
    pools_.clear();
    EXPECT_TRUE(live_.empty()) << "the pool left upstream allocations behind";
    std::free(up_.buffer);
    PoolTest::TearDown();
  }
  uintptr_t Base() const { return reinterpret_cast<uintptr_t>(up_.buffer); }

  ExtendUpstream up_{};
  std::map<uintptr_t, size_t> live_;
};

TEST_F(PoolExtendTest, AChunkGrowsInPlaceMergedWithItsFreeTail) {
  gmr_resource *r = Make(small_config(4 * MiB), &up_.base);
  void *a = Alloc(r, 3 * MiB);  // a chunk of 4 MiB: 1 MiB of free tail
  void *b = Alloc(r, 3 * MiB);  // no block of 3 MiB: the chunk grows
  EXPECT_EQ(U(a) + 3 * MiB, U(b));
  gmr_pool_stats s = Stats(r);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(1u, s.grow_count);
  EXPECT_EQ(1u, s.in_place_growth_count);
  // The tail now holds max(request, growth step) = 4 MiB: 4 MiB added
  // (3 MiB, rounded to the 2 MiB granularity).
  EXPECT_EQ(8 * MiB, s.held_bytes);
  EXPECT_EQ(2 * MiB, s.largest_free_block_bytes);
  EXPECT_EQ(1, up_.allocate_count);
  EXPECT_EQ(1, up_.extend_count);
  ExpectInvariants(r);
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, a, 3 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_deallocate(r, b, 3 * MiB, 0, nullptr));
  EXPECT_EQ(1u, Stats(r).free_block_count);  // one block over the whole grown chunk
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(8 * MiB, released);  // given back with its grown size
  EXPECT_TRUE(live_.empty());
}

TEST_F(PoolExtendTest, ARefusedExtensionMeansANewChunk) {
  for (gmr_status refusal : {GMR_ERR_UNSUPPORTED, GMR_ERR_OUT_OF_MEMORY}) {
    up_.refuse = refusal;
    gmr_pool_resource *p = nullptr;
    gmr_pool_resource_config c = small_config(4 * MiB);
    ASSERT_EQ(GMR_OK, gmr_pool_resource_create(&up_.base, &c, &p));
    gmr_resource *r = gmr_pool_resource_as_resource(p);
    void *a = Alloc(r, 3 * MiB), *b = Alloc(r, 3 * MiB);
    gmr_pool_stats s = Stats(r);
    EXPECT_EQ(2u, s.chunk_count) << gmr_status_name(refusal);
    EXPECT_EQ(0u, s.in_place_growth_count);
    EXPECT_EQ(8 * MiB, s.held_bytes);
    ExpectInvariants(r);
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, a, 3 * MiB, 0, nullptr));
    ASSERT_EQ(GMR_OK, gmr_deallocate(r, b, 3 * MiB, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

TEST_F(PoolExtendTest, AFreeFromAnotherArenaFindsTheGrownPart) {
  gmr_pool_resource_config c = small_config(4 * MiB);
  c.arena_count = 2;
  gmr_resource *r = Make(c, &up_.base);
  gmr_stream s = Stream();
  void *a = nullptr, *b = nullptr;
  std::thread([&] {
    a = Alloc(r, 3 * MiB, s);
    b = Alloc(r, 3 * MiB, s);  // in the grown part
  }).join();
  EXPECT_EQ(1u, Stats(r).in_place_growth_count);
  // Freed by another thread on the default stream, whose arena (that
  // thread's) does not hold them: found through the table of chunks, which
  // knows the grown size.
  std::thread([&] {
    EXPECT_EQ(GMR_OK, gmr_deallocate(r, b, 3 * MiB, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_deallocate(r, a, 3 * MiB, 0, nullptr));
  }).join();
  EXPECT_EQ(0u, Stats(r).in_use_count);
  ExpectInvariants(r);
}

}  // namespace
