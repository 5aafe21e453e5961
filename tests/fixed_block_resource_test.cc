// fixed_block_resource on the host simulation: blocks, chunks, the block-list
// API, oversize requests, stream-ordered reuse with simulated events,
// maximum, upstream failures, trim, threads, and every upstream kind.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/host_resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/mock_resource.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

gmr_fixed_block_resource_config config(size_t block = 64 * KiB, size_t per_chunk = 8) {
  gmr_fixed_block_resource_config c = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  c.block_bytes = block;
  c.blocks_per_chunk = per_chunk;
  return c;
}

class FixedBlockTest : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    cuda_ = MakeCuda(GMR_CUDA_KIND_DEVICE);
  }

  void TearDown() override {
    for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(*it)) << gmr_resource_get_type_name(*it);
    }
    for (gmr_stream s : streams_) {
      EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, false));
      EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    }
    SimTest::TearDown();
  }

  gmr_resource *MakeCuda(gmr_cuda_kind kind) {
    gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    c.kind = kind;
    gmr_cuda_resource *r = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &r));
    owned_.push_back(gmr_cuda_resource_as_resource(r));
    return owned_.back();
  }

  gmr_fixed_block_resource *Make(const gmr_fixed_block_resource_config &c,
                                 gmr_resource *upstream = nullptr) {
    gmr_fixed_block_resource *f = nullptr;
    EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_create(upstream ? upstream : cuda_, &c, &f));
    if (f != nullptr) owned_.push_back(gmr_fixed_block_resource_as_resource(f));
    return f;
  }

  gmr_stream Stream() {
    gmr_stream s = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
    streams_.push_back(s);
    return s;
  }

  static gmr_fixed_block_resource_stats Stats(gmr_fixed_block_resource *f) {
    gmr_fixed_block_resource_stats s = GMR_FIXED_BLOCK_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_get_stats(f, &s));
    return s;
  }

  static void *Alloc(gmr_resource *r, size_t bytes, gmr_stream s = nullptr) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, s, &p)) << bytes;
    return p;
  }

  static uintptr_t U(void *p) { return reinterpret_cast<uintptr_t>(p); }

  gmr_resource *cuda_ = nullptr;
  std::vector<gmr_resource *> owned_;
  std::vector<gmr_stream> streams_;
};

TEST_F(FixedBlockTest, CreateChecksEveryArgument) {
  gmr_fixed_block_resource *f = reinterpret_cast<gmr_fixed_block_resource *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_fixed_block_resource_create(cuda_, nullptr, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_fixed_block_resource_create(nullptr, nullptr, &f));
  EXPECT_EQ(nullptr, f);
  auto bad = [&](void (*edit)(gmr_fixed_block_resource_config &)) {
    gmr_fixed_block_resource_config c = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
    edit(c);
    gmr_fixed_block_resource *q = reinterpret_cast<gmr_fixed_block_resource *>(0x1);
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_fixed_block_resource_create(cuda_, &c, &q));
    EXPECT_EQ(nullptr, q);
  };
  bad([](gmr_fixed_block_resource_config &c) { c.block_bytes = 0; });
  bad([](gmr_fixed_block_resource_config &c) { c.block_bytes = 1000; });
  bad([](gmr_fixed_block_resource_config &c) { c.blocks_per_chunk = 0; });
  bad([](gmr_fixed_block_resource_config &c) { c.blocks_per_chunk = SIZE_MAX / 512; });
  bad([](gmr_fixed_block_resource_config &c) {
    c.oversize = static_cast<gmr_fixed_block_oversize>(7);
  });
  bad([](gmr_fixed_block_resource_config &c) {
    c.max_chunk_count = 1;
    c.initial_chunk_count = 2;
  });
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_create(cuda_, nullptr, &f));  // the defaults
  owned_.push_back(gmr_fixed_block_resource_as_resource(f));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  EXPECT_STREQ("fixed_block_resource", gmr_resource_get_type_name(r));
  EXPECT_EQ(f, gmr_fixed_block_resource_from_resource(r));
  EXPECT_EQ(nullptr, gmr_fixed_block_resource_from_resource(cuda_));
  EXPECT_EQ(cuda_, gmr_resource_get_upstream(r));
  EXPECT_EQ(MiB, gmr_fixed_block_resource_get_block_bytes(f));
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  void *p = Alloc(r, 10);
  gmr_fixed_block_resource_stats s = Stats(f);
  EXPECT_EQ(128 * MiB, s.held_bytes);  // one chunk of 128 blocks of 1 MiB
  EXPECT_EQ(128u, s.block_count);
  EXPECT_EQ(1u, s.in_use_block_count);
  EXPECT_EQ(127u, s.free_block_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 10, 0, nullptr));
}

TEST_F(FixedBlockTest, OneBlockPerRequestInAddressOrder) {
  gmr_fixed_block_resource *f = Make(config());
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  std::vector<void *> blocks;
  for (size_t bytes : {size_t{1}, size_t{100}, 64 * KiB, size_t{4097}}) blocks.push_back(Alloc(r, bytes));
  for (size_t i = 1; i < blocks.size(); ++i) EXPECT_EQ(U(blocks[0]) + i * 64 * KiB, U(blocks[i]));
  gmr_fixed_block_resource_stats s = Stats(f);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(8u, s.block_count);
  EXPECT_EQ(4u, s.in_use_block_count);
  EXPECT_EQ(4u, s.free_block_count);
  EXPECT_EQ(512 * KiB, s.held_bytes);
  EXPECT_EQ(1u, s.grow_count);
  std::vector<size_t> sizes = {1, 100, 64 * KiB, 4097};
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, blocks[i], sizes[i], 0, nullptr));
  }
  EXPECT_EQ(0u, Stats(f).in_use_block_count);
  // The last block freed is the first one reused (a stack keeps it warm).
  EXPECT_EQ(blocks.back(), Alloc(r, 64));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, blocks.back(), 64, 0, nullptr));
}

TEST_F(FixedBlockTest, NewChunksWhenTheFreeListIsEmptyUpToTheMaximum) {
  gmr_fixed_block_resource_config c = config(64 * KiB, 4);
  c.max_chunk_count = 2;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  std::vector<void *> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(Alloc(r, 1000));
  EXPECT_EQ(2u, Stats(f).chunk_count);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  std::set<void *> distinct(blocks.begin(), blocks.end());
  EXPECT_EQ(8u, distinct.size());
  void *p = nullptr;
  gmr_failure fl = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 1000, 0, nullptr, &p, &fl));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(r, fl.where);
  EXPECT_NE(nullptr, std::strstr(fl.message, "max_chunk_count")) << fl.message;
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  for (void *b : blocks) EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 1000, 0, nullptr));
}

TEST_F(FixedBlockTest, InitialChunksAreTakenAtCreate) {
  gmr_fixed_block_resource_config c = config(64 * KiB, 4);
  c.initial_chunk_count = 3;
  gmr_fixed_block_resource *f = Make(c);
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  gmr_fixed_block_resource_stats s = Stats(f);
  EXPECT_EQ(3u, s.chunk_count);
  EXPECT_EQ(12u, s.free_block_count);
  EXPECT_EQ(768 * KiB, s.held_bytes);
  EXPECT_EQ(768 * KiB, s.peak_held_bytes);
}

TEST_F(FixedBlockTest, FailedInitialChunkGivesBackTheOthers) {
  gmr_fixed_block_resource_config c = config(64 * KiB, 4);
  c.initial_chunk_count = 3;
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 2, 1, cudaErrorMemoryAllocation));
  gmr_fixed_block_resource *f = reinterpret_cast<gmr_fixed_block_resource *>(0x1);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_fixed_block_resource_create(cuda_, &c, &f));
  EXPECT_EQ(nullptr, f);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(0u, u.allocation_count);
}

TEST_F(FixedBlockTest, UpstreamOutOfMemoryRetriesSmallerChunks) {
  gmr_fixed_block_resource *f = Make(config(64 * KiB, 8));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  // 8 and 4 blocks fail, 2 blocks work.
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 2, cudaErrorMemoryAllocation));
  void *p = Alloc(r, 100);
  gmr_fixed_block_resource_stats s = Stats(f);
  EXPECT_EQ(2u, s.block_count);
  EXPECT_EQ(128 * KiB, s.held_bytes);
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  // Down to one block, then the failure is the upstream's, and nothing leaks.
  void *q = Alloc(r, 100);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, UINT64_MAX,
                                                cudaErrorMemoryAllocation));
  void *z = nullptr;
  gmr_failure fl = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 100, 0, nullptr, &z, &fl));
  EXPECT_EQ(cuda_, fl.where);
  EXPECT_EQ(int{cudaErrorMemoryAllocation}, fl.cuda_error);
  EXPECT_EQ(3u + 4u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));  // 8, 4, 2, 1
  EXPECT_EQ(2u, Stats(f).block_count);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 100, 0, nullptr));
}

TEST_F(FixedBlockTest, OtherUpstreamErrorsAreReportedAtOnce) {
  gmr_fixed_block_resource *f = Make(config());
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 0, 1, cudaErrorLaunchFailure));
  void *p = nullptr;
  gmr_failure fl = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_ex(r, 100, 0, nullptr, &p, &fl));
  EXPECT_EQ(int{cudaErrorLaunchFailure}, fl.cuda_error);
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(0u, Stats(f).held_bytes);
}

TEST_F(FixedBlockTest, LargerRequestsAreForwardedOrRefused) {
  gmr_fixed_block_resource *fwd = Make(config());
  gmr_resource *r = gmr_fixed_block_resource_as_resource(fwd);
  void *big = Alloc(r, 3 * MiB);
  gmr_fixed_block_resource_stats s = Stats(fwd);
  EXPECT_EQ(1u, s.forwarded_count);
  EXPECT_EQ(3 * MiB, s.forwarded_bytes);
  EXPECT_EQ(3 * MiB, s.held_bytes);
  EXPECT_EQ(0u, s.chunk_count);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  int local = 0;
  // One vocabulary for bad frees (issue 9): gmr/resource.h.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, big, 2 * MiB, 0, nullptr));  // size
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, &local, 3 * MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, big, 3 * MiB, 0, nullptr));
  s = Stats(fwd);
  EXPECT_EQ(0u, s.forwarded_count);
  EXPECT_EQ(0u, s.held_bytes);
  EXPECT_EQ(3 * MiB, s.peak_held_bytes);
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_deallocate(r, big, 3 * MiB, 0, nullptr));  // twice: gone upstream

  gmr_fixed_block_resource_config c = config();
  c.oversize = GMR_FIXED_BLOCK_OVERSIZE_REFUSE;
  gmr_fixed_block_resource *ref = Make(c);
  void *p = nullptr;
  gmr_failure fl = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_allocate_ex(gmr_fixed_block_resource_as_resource(ref),
                                                          64 * KiB + 1, 0, nullptr, &p, &fl));
  EXPECT_NE(nullptr, std::strstr(fl.message, "allocate_blocks")) << fl.message;
  EXPECT_EQ(0u, Stats(ref).held_bytes);
}

TEST_F(FixedBlockTest, FailedForwardedFreeKeepsItTracked) {
  gmr_mock_resource *mock = gmr_mock_resource_create(cuda_);
  owned_.push_back(gmr_mock_resource_as_resource(mock));
  gmr_fixed_block_resource *f = Make(config(), gmr_mock_resource_as_resource(mock));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  void *big = Alloc(r, 2 * MiB);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_FREE, 0, 1, cudaErrorLaunchFailure));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_deallocate(r, big, 2 * MiB, 0, nullptr));
  EXPECT_EQ(1u, Stats(f).forwarded_count);
  EXPECT_EQ(2 * MiB, Stats(f).held_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, big, 2 * MiB, 0, nullptr));
  EXPECT_EQ(0u, Stats(f).forwarded_count);
}

TEST_F(FixedBlockTest, AlignmentAbove256IsUnsupported) {
  gmr_fixed_block_resource *f = Make(config());
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  void *p = nullptr;
  gmr_failure fl = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_allocate_ex(r, 100, 512, nullptr, &p, &fl));
  EXPECT_STRNE("", fl.message);
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
}

TEST_F(FixedBlockTest, BadFreesChangeNothing) {
  gmr_fixed_block_resource *f = Make(config());
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  void *p = Alloc(r, 300);
  int local = 0;
  // One vocabulary for bad frees (issue 9): gmr/resource.h.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 301, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 300, 512, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, static_cast<char *>(p) + 256, 300,
                                                             0, nullptr));  // inside a block
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, static_cast<char *>(p) + 64 * KiB,
                                                             300, 0, nullptr));  // a free block
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, &local, 300, 0, nullptr));
  EXPECT_EQ(1u, Stats(f).in_use_block_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 300, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 300, 0, nullptr));
  EXPECT_EQ(0u, Stats(f).in_use_block_count);
}

TEST_F(FixedBlockTest, BlockListsAreAllOrNothingAndFreedAsOne) {
  gmr_fixed_block_resource_config c = config(64 * KiB, 4);
  c.max_chunk_count = 3;  // 12 blocks at most
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_block_list *list = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_fixed_block_resource_allocate_blocks(f, 10, nullptr, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_fixed_block_resource_allocate_blocks(nullptr, 10, nullptr, &list));
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_allocate_blocks(f, 0, nullptr, &list));
  EXPECT_EQ(nullptr, list);
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_allocate_blocks(f, 10 * 64 * KiB + 1, nullptr, &list));
  ASSERT_NE(nullptr, list);
  EXPECT_EQ(11u, list->block_count);
  EXPECT_EQ(64 * KiB, list->block_bytes);
  EXPECT_EQ(10 * 64 * KiB + 1, list->requested_bytes);
  std::set<void *> distinct(list->blocks, list->blocks + list->block_count);
  EXPECT_EQ(11u, distinct.size());
  for (size_t i = 0; i < list->block_count; ++i) {
    EXPECT_EQ(0u, U(list->blocks[i]) % 256);
    std::memset(list->blocks[i], static_cast<int>(i), 64 * KiB);
  }
  EXPECT_EQ(3u, Stats(f).chunk_count);
  EXPECT_EQ(11u, Stats(f).in_use_block_count);
  // A block of a list cannot be freed on its own.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH,
            gmr_resource_deallocate(r, list->blocks[0], 64 * KiB, 0, nullptr));
  // Two more blocks do not exist: nothing is taken.
  gmr_block_list *more = nullptr;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_fixed_block_resource_allocate_blocks(f, 2 * 64 * KiB, nullptr, &more));
  EXPECT_EQ(nullptr, more);
  EXPECT_EQ(11u, Stats(f).in_use_block_count);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_deallocate_blocks(f, list, nullptr));
  EXPECT_EQ(0u, Stats(f).in_use_block_count);
  EXPECT_EQ(12u, Stats(f).free_block_count);
  // A list given back twice, or not ours, changes nothing.
  gmr_block_list fake = {1, 64 * KiB, 1, nullptr};
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_fixed_block_resource_deallocate_blocks(f, &fake, nullptr));
  EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_deallocate_blocks(f, nullptr, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_fixed_block_resource_deallocate_blocks(nullptr, nullptr, nullptr));
}

// ---- stream ordering --------------------------------------------------------

uint64_t EventCalls() {
  return gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_RECORD) +
         gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_QUERY) +
         gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_SYNCHRONIZE) +
         gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_WAIT_EVENT);
}

TEST_F(FixedBlockTest, TheDefaultStreamReusesAtOnceWithoutEvents) {
  gmr_fixed_block_resource *f = Make(config(64 * KiB, 1));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  void *p = Alloc(r, 100, nullptr);
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
    EXPECT_EQ(p, Alloc(r, 100, nullptr));
  }
  EXPECT_EQ(0u, EventCalls());
  EXPECT_EQ(1u, Stats(f).chunk_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
}

// A stream the program created may be destroyed right after the call that
// named it: with record_at_every_free every free on it records the event
// then (RMM's rule, the default before records on demand), and the resource
// never touches the stream again (seen on an H100: recording on a destroyed
// stream crashes the driver). fixed_block_streams_test.cc checks the default.
TEST_F(FixedBlockTest, ACreatedStreamIsNeverTouchedAfterTheCallThatNamedIt) {
  gmr_fixed_block_resource_config c = config(64 * KiB, 1);
  c.streams.record_at_every_free = true;
  gmr_fixed_block_resource *f = Make(c);
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s = nullptr;  // not Stream(): the test destroys it itself
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  void *p = Alloc(r, 100, s);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
    EXPECT_EQ(p, Alloc(r, 100, s));
  }
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
  EXPECT_EQ(7u, Stats(f).event_record_count);  // the chunk and each of the 6 frees
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
  uint64_t stale = gmr_cuda_sim_get_stale_handle_count();
  EXPECT_EQ(p, Alloc(r, 100, nullptr));  // s's block, through its event alone
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(64u * KiB, released);
  EXPECT_EQ(stale, gmr_cuda_sim_get_stale_handle_count());
}

TEST_F(FixedBlockTest, AnotherStreamTakesABlockOnceTheEventCompleted) {
  gmr_fixed_block_resource *f = Make(config(64 * KiB, 1));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s1 = Stream(), s2 = Stream();
  void *p = Alloc(r, 100, s1);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s1));
  EXPECT_EQ(2u, Stats(f).event_record_count);  // the chunk's and the free's, on s1
  EXPECT_EQ(p, Alloc(r, 100, s2));
  gmr_fixed_block_resource_stats s = Stats(f);
  EXPECT_EQ(2u, s.event_record_count);  // s2 needed no new record
  EXPECT_EQ(1u, s.event_query_count);
  EXPECT_EQ(0u, s.stream_wait_count);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(s2));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s2));
}

TEST_F(FixedBlockTest, AnotherStreamWaitsForPendingWork) {
  gmr_fixed_block_resource *f = Make(config(64 * KiB, 1));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s1 = Stream(), s2 = Stream();
  void *p = Alloc(r, 100, s1);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s1));
  EXPECT_EQ(p, Alloc(r, 100, s2));
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(s2));
  EXPECT_EQ(1u, Stats(f).stream_wait_count);
  EXPECT_EQ(1u, Stats(f).chunk_count);
  // s2 now orders that block: a third stream needs s2's event, not s1's.
  gmr_stream s3 = Stream();
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s2, true));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s2));
  EXPECT_EQ(p, Alloc(r, 100, s3));
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(s3));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s3));
}

TEST_F(FixedBlockTest, DuringCaptureOnlyTheStreamsOwnBlocksAreUsed) {
  gmr_fixed_block_resource *f = Make(config(64 * KiB, 1));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s = Stream(), other = Stream();
  void *p = Alloc(r, 100, s);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
  void *o = Alloc(r, 100, other);   // takes s's block (its event is done) ...
  void *o2 = Alloc(r, 100, other);  // ... and a new chunk
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, o, 100, 0, other));
  void *mine = Alloc(r, 100, s);  // back to s, through other's event
  EXPECT_EQ(p, mine);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, mine, 100, 0, s));  // s owns exactly one free block
  uint64_t mallocs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC);
  uint64_t events = EventCalls();
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  void *q = Alloc(r, 100, s);
  EXPECT_EQ(mine, q);
  void *z = nullptr;
  gmr_failure fl = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_ex(r, 100, 0, s, &z, &fl));
  EXPECT_NE(nullptr, std::strstr(fl.message, "capture")) << fl.message;
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 100, 0, s));
  gmr_graph g = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(mallocs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(events, EventCalls());
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, o2, 100, 0, other));
}

// ---- trim, upstreams, threads ---------------------------------------------------

TEST_F(FixedBlockTest, TrimGivesBackChunksWhoseBlocksAreAllFree) {
  gmr_fixed_block_resource *f = Make(config(64 * KiB, 2));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  gmr_stream s = Stream();
  std::vector<void *> b;
  for (int i = 0; i < 6; ++i) b.push_back(Alloc(r, 100, s));  // 3 chunks
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s, true));
  for (int i : {0, 1, 2, 4}) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b[i], 100, 0, s));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(128 * KiB, released);  // only the first chunk has both blocks free
  gmr_fixed_block_resource_stats st = Stats(f);
  EXPECT_EQ(2u, st.chunk_count);
  EXPECT_EQ(4u, st.block_count);
  EXPECT_EQ(2u, st.free_block_count);
  EXPECT_EQ(1u, st.release_count);
  EXPECT_EQ(1u, st.event_synchronize_count);
  EXPECT_EQ(256 * KiB, st.held_bytes);
  EXPECT_EQ(384 * KiB, st.peak_held_bytes);
  for (int i : {3, 5}) ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b[i], 100, 0, s));
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(256 * KiB, released);
  EXPECT_EQ(0u, Stats(f).held_bytes);
  EXPECT_EQ(0u, Stats(f).free_block_count);
  // It grows again after a trim.
  void *p = Alloc(r, 100, s);
  EXPECT_EQ(1u, Stats(f).chunk_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, s));
}

TEST_F(FixedBlockTest, WorksOverPinnedAndHostUpstreams) {
  gmr_resource *pinned = MakeCuda(GMR_CUDA_KIND_PINNED);
  gmr_host_resource *h = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&h));
  owned_.push_back(gmr_host_resource_as_resource(h));
  gmr_fixed_block_resource *on_pinned = Make(config(), pinned);
  gmr_fixed_block_resource_config hc = config();
  hc.streams.stream_ordered = false;
  gmr_fixed_block_resource *on_host = Make(hc, gmr_host_resource_as_resource(h));
  for (gmr_fixed_block_resource *f : {on_pinned, on_host}) {
    gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
    gmr_stream s1 = Stream(), s2 = Stream();
    void *p = Alloc(r, 1000, s1);
    std::memset(p, 0x5a, 64 * KiB);  // host-accessible in both cases
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, s1));
    EXPECT_EQ(p, Alloc(r, 1000, s2));
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, s2));
  }
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_HOST_ALLOC));
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  // Only the pinned (stream-ordered) one records events: for its chunk and for
  // each free on a created stream.
  EXPECT_EQ(3u, Stats(on_pinned).event_record_count);
  EXPECT_EQ(0u, Stats(on_host).event_record_count);
}

TEST_F(FixedBlockTest, ThreadsNeverShareABlock) {
  gmr_fixed_block_resource *f = Make(config(4 * KiB, 16));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(f);
  constexpr int kThreads = 8;
  std::vector<gmr_stream> streams;
  for (int t = 0; t < kThreads; ++t) streams.push_back(Stream());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<unsigned char *> mine;
      for (int i = 0; i < 2000; ++i) {
        if (mine.size() < 8 && (i % 3 != 2 || mine.empty())) {
          void *p = nullptr;
          if (gmr_resource_allocate(r, 4 * KiB, 0, streams[t], &p) != GMR_OK) {
            failures++;
            continue;
          }
          std::memset(p, t + 1, 4 * KiB);
          mine.push_back(static_cast<unsigned char *>(p));
        } else {
          unsigned char *p = mine.back();
          mine.pop_back();
          if (p[0] != t + 1 || p[4 * KiB - 1] != t + 1) failures++;
          if (gmr_resource_deallocate(r, p, 4 * KiB, 0, streams[t]) != GMR_OK) failures++;
        }
        if (i % 500 == 0) {
          gmr_block_list *list = nullptr;
          if (gmr_fixed_block_resource_allocate_blocks(f, 20 * KiB, streams[t], &list) != GMR_OK ||
              gmr_fixed_block_resource_deallocate_blocks(f, list, streams[t]) != GMR_OK) {
            failures++;
          }
        }
      }
      for (unsigned char *p : mine) {
        if (gmr_resource_deallocate(r, p, 4 * KiB, 0, streams[t]) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  gmr_fixed_block_resource_stats s = Stats(f);
  EXPECT_EQ(0u, s.in_use_block_count);
  EXPECT_EQ(s.block_count, s.free_block_count);
}

}  // namespace

TEST_F(FixedBlockTest, StatsHonourTheSizeVersionHeader) {
  gmr_fixed_block_resource_config c = config(64 * KiB, 4);
  gmr_fixed_block_resource *f = Make(c);
  ASSERT_NE(nullptr, f);
  gmr_fixed_block_resource_stats s = GMR_FIXED_BLOCK_RESOURCE_STATS_INIT;
  s.size = sizeof(size_t);  // shorter than the header
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_fixed_block_resource_get_stats(f, &s));
  s = GMR_FIXED_BLOCK_RESOURCE_STATS_INIT;
  s.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_fixed_block_resource_get_stats(f, &s));
  EXPECT_EQ(0u, s.block_bytes);
  s = GMR_FIXED_BLOCK_RESOURCE_STATS_INIT;
  s.size = offsetof(gmr_fixed_block_resource_stats, chunk_count);  // an older, shorter struct
  s.chunk_count = 77;
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_get_stats(f, &s));
  EXPECT_EQ(64 * KiB, s.block_bytes);
  EXPECT_EQ(77u, s.chunk_count);
  EXPECT_EQ(GMR_FIXED_BLOCK_RESOURCE_STATS_VERSION, s.version);
}
