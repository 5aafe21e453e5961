// gmr_symmetric_resource on the simulation: the same sequence of requests
// gives the same offsets on two devices whatever the streams and the state
// of their work; first fit and coalescing; frees of other streams are waited
// on by the GPU (never the host); regions, trim, bad input, threads, spec.
#include <gtest/gtest.h>

#include <cuda.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/nccl/cumem_resource.h"
#include "gmr/device.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "gmr/nccl/symmetric_resource.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kKiB = size_t{1} << 10;

class Symmetric : public gmr_test::SimTest {
 protected:
  Symmetric() { sim_config_.device_count = 2; }

  struct Rank {
    gmr_cumem_resource *cumem = nullptr;
    gmr_symmetric_resource *sym = nullptr;
    gmr_resource *r = nullptr;
  };
  Rank ranks_[2];

  void Make(int device, gmr_symmetric_resource_config c = GMR_SYMMETRIC_RESOURCE_CONFIG_DEFAULT) {
    gmr_cumem_resource_config cc = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;
    cc.device = device;
    Rank &k = ranks_[device];
    ASSERT_EQ(GMR_OK, gmr_cumem_resource_create(&cc, &k.cumem, nullptr));
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_symmetric_resource_create(gmr_cumem_resource_as_resource(k.cumem), &c,
                                                    &k.sym, &f))
        << f.message;
    k.r = gmr_symmetric_resource_as_resource(k.sym);
  }
  void TearDown() override {
    for (Rank &k : ranks_) {
      if (k.sym != nullptr) {
        EXPECT_EQ(GMR_OK, gmr_resource_destroy(k.r));
      }
      if (k.cumem != nullptr) {
        EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cumem_resource_as_resource(k.cumem)));
      }
    }
    SimTest::TearDown();
  }
  std::pair<size_t, size_t> Where(int rank, void *p) {
    size_t region = 0, offset = 0;
    EXPECT_EQ(GMR_OK, gmr_symmetric_resource_get_offset(ranks_[rank].sym, p, &region, &offset));
    return {region, offset};
  }
  gmr_symmetric_resource_stats Stats(int rank) {
    gmr_symmetric_resource_stats s = GMR_SYMMETRIC_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_symmetric_resource_get_stats(ranks_[rank].sym, &s));
    return s;
  }
};

// Two ranks run one random program of allocations and frees; rank 1 uses
// two streams, one of them held (its frees' events stay pending), rank 0 the
// default stream. Every allocation lands at the same (region, offset).
TEST_F(Symmetric, TheSameSequenceGivesTheSameOffsetsOnTwoDevices) {
  gmr_symmetric_resource_config c = GMR_SYMMETRIC_RESOURCE_CONFIG_DEFAULT;
  c.region_bytes = 32 * kMiB;
  Make(0, c);
  Make(1, c);
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  gmr_stream s1[2] = {nullptr, nullptr};
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1[0]));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1[1]));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1[1], true));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
  std::mt19937 rng(15);
  struct Live {
    void *p[2];
    size_t bytes;
  };
  std::vector<Live> live;
  size_t compared = 0;
  for (int step = 0; step < 600; ++step) {
    bool alloc = live.empty() || rng() % 100 < 55;
    if (alloc) {
      // Two statements: the operands of % are unsequenced (builds differed).
      const auto draw = rng();
      size_t bytes = 1 + draw % (rng() % 4 == 0 ? 40 * kMiB : 3 * kMiB);
      Live l{{nullptr, nullptr}, bytes};
      for (int rank = 0; rank < 2; ++rank) {
        ASSERT_EQ(GMR_OK, gmr_device_set_current(rank));
        gmr_stream s = rank == 0 ? nullptr : s1[step % 2];
        ASSERT_EQ(GMR_OK, gmr_resource_allocate(ranks_[rank].r, bytes, 0, s, &l.p[rank]));
      }
      EXPECT_EQ(Where(0, l.p[0]), Where(1, l.p[1])) << "step " << step;
      compared++;
      live.push_back(l);
    } else {
      size_t i = rng() % live.size();
      for (int rank = 0; rank < 2; ++rank) {
        ASSERT_EQ(GMR_OK, gmr_device_set_current(rank));
        gmr_stream s = rank == 0 ? nullptr : s1[(step / 3) % 2];
        ASSERT_EQ(GMR_OK,
                  gmr_resource_deallocate(ranks_[rank].r, live[i].p[rank], live[i].bytes, 0, s));
      }
      live.erase(live.begin() + static_cast<long>(i));
    }
  }
  EXPECT_GT(compared, 250u);
  EXPECT_EQ(Stats(0).region_count, Stats(1).region_count);
  EXPECT_EQ(Stats(0).held_bytes, Stats(1).held_bytes);
  EXPECT_GT(Stats(1).stream_wait_count, 0u) << "rank 1 reused memory across its streams";
  EXPECT_EQ(0u, Stats(0).stream_wait_count) << "one stream never waits on itself";
  for (const Live &l : live) {
    for (int rank = 0; rank < 2; ++rank) {
      ASSERT_EQ(GMR_OK, gmr_device_set_current(rank));
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(ranks_[rank].r, l.p[rank], l.bytes, 0, nullptr));
    }
  }
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1[1], false));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s1[0]));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s1[1]));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
}

TEST_F(Symmetric, FirstFitInAddressOrderWithCoalescing) {
  Make(0);
  gmr_resource *r = ranks_[0].r;
  void *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, kMiB, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 2 * kMiB, 0, nullptr, &b));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 0, nullptr, &c));
  EXPECT_EQ(std::make_pair(size_t{0}, size_t{0}), Where(0, a));
  EXPECT_EQ(std::make_pair(size_t{0}, kMiB), Where(0, b));
  EXPECT_EQ(std::make_pair(size_t{0}, 3 * kMiB), Where(0, c));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 2 * kMiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, kMiB, 0, nullptr, &d));
  EXPECT_EQ(std::make_pair(size_t{0}, kMiB), Where(0, d)) << "the first hole that fits";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, kMiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, d, kMiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 3 * kMiB, 0, nullptr, &a));
  EXPECT_EQ(std::make_pair(size_t{0}, size_t{0}), Where(0, a)) << "three freed MiB merged";
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(c) % 4096) << "blocks start on 4 KiB";
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r, &info));
  EXPECT_EQ(256 * kMiB, info.held_bytes);
  EXPECT_EQ(3 * kMiB + 4 * kKiB, info.live_bytes);
  EXPECT_EQ(1u, info.free_block_count);
  EXPECT_EQ(256 * kMiB - 3 * kMiB - 4 * kKiB, info.largest_free_block_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * kMiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, c, 100, 0, nullptr));
}

TEST_F(Symmetric, MemoryFreedOnAnotherStreamIsWaitedOnByTheGpu) {
  Make(0);
  gmr_resource *r = ranks_[0].r;
  gmr_stream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s2));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1, true));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, kMiB, 0, s1, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, kMiB, 0, s1));
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, kMiB, 0, s1, &q));
  EXPECT_EQ(p, q) << "reused at once by its own stream";
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(s1));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, kMiB, 0, s1));
  uint64_t syncs = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_SYNCHRONIZE) +
                   gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_SYNCHRONIZE) +
                   gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_QUERY);
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, kMiB, 0, s2, &q));
  EXPECT_EQ(p, q) << "placement ignores that s1's work is still pending";
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(s2)) << "s2 waits for s1's free on the GPU";
  EXPECT_EQ(syncs, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_SYNCHRONIZE) +
                       gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_SYNCHRONIZE) +
                       gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_EVENT_QUERY))
      << "the host neither waits nor asks";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, q, kMiB, 0, s2));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(s1, false));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s1));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s2));
}

TEST_F(Symmetric, RegionsAreNumberedInOrderAndTrimGivesBackTheLastFreeOnes) {
  gmr_symmetric_resource_config c = GMR_SYMMETRIC_RESOURCE_CONFIG_DEFAULT;
  c.region_bytes = 8 * kMiB;
  c.max_region_count = 3;
  Make(0, c);
  gmr_resource *r = ranks_[0].r;
  void *a = nullptr, *b = nullptr, *big = nullptr, *x = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 6 * kMiB, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 6 * kMiB, 0, nullptr, &b));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 20 * kMiB, 0, nullptr, &big));
  EXPECT_EQ(std::make_pair(size_t{1}, size_t{0}), Where(0, b));
  EXPECT_EQ(std::make_pair(size_t{2}, size_t{0}), Where(0, big)) << "a region of its own";
  void *base = nullptr;
  size_t bytes = 0;
  ASSERT_EQ(GMR_OK, gmr_symmetric_resource_get_region(ranks_[0].sym, 2, &base, &bytes));
  EXPECT_EQ(big, base);
  EXPECT_EQ(20 * kMiB, bytes);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_symmetric_resource_get_region(ranks_[0].sym, 3, &base, &bytes));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 7 * kMiB, 0, nullptr, &x, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "max_region_count")) << f.message;
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 6 * kMiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, big, 20 * kMiB, 0, nullptr));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(20 * kMiB, released) << "only the last region; region 0 stays (b keeps region 1)";
  EXPECT_EQ(2u, Stats(0).region_count);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 6 * kMiB, 0, nullptr));
  released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(16 * kMiB, released);
  EXPECT_EQ(0u, Stats(0).region_count);
  EXPECT_EQ(0u, Stats(0).held_bytes);
  EXPECT_EQ(36 * kMiB, Stats(0).peak_held_bytes);
}

// The size and alignment asked for name an allocation, not the 4 KiB they
// round to: a free of 999 bytes for 1,000 is refused, changing nothing (no
// placement moves, so the ranks stay symmetric), and the correct free after
// it succeeds instead of reading as a double free.
TEST_F(Symmetric, AFreeMustNameTheSizeAndAlignmentAskedFor) {
  Make(0);
  gmr_resource *r = ranks_[0].r;
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 3000, 512, nullptr, &q));
  const gmr_symmetric_resource_stats before = Stats(0);
  const std::pair<size_t, size_t> where_p = Where(0, p);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 999, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 1001, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 4096, 0, nullptr))
      << "the block it rounds to";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 1000, 512, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, q, 3000, 0, nullptr))
      << "q asked for 512-byte alignment";
  const gmr_symmetric_resource_stats after = Stats(0);
  EXPECT_EQ(before.live_count, after.live_count);
  EXPECT_EQ(before.live_bytes, after.live_bytes);
  EXPECT_EQ(before.free_block_count, after.free_block_count);
  EXPECT_EQ(before.event_record_count, after.event_record_count) << "no free was recorded";
  EXPECT_EQ(where_p, Where(0, p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 999, 0, nullptr))
      << "freed: whatever the size";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, q, 3000, 512, nullptr));
  // The next request lands where p was: the refused frees moved nothing.
  void *again = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1000, 0, nullptr, &again));
  EXPECT_EQ(where_p, Where(0, again));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, again, 1000, 0, nullptr));
}

TEST_F(Symmetric, BadInputChangesNothing) {
  Make(0);
  gmr_resource *r = ranks_[0].r;
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_allocate_ex(r, 100, 8192, nullptr, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "alignment_bytes")) << f.message;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 5000, 4096, nullptr, &p));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r, &local, 4, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 9000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 8192, 4096, nullptr))
      << "the same rounded size is not the size asked for";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r, p, 5000, 0, nullptr))
      << "the allocation asked for 4096-byte alignment";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 5000, 4096, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r, p, 5000, 4096, nullptr));
  size_t region = 0, offset = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_symmetric_resource_get_offset(ranks_[0].sym, p, &region, &offset));
  // The upstream refusing a region leaves nothing behind.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_CREATE, 0, 1,
                                                CUDA_ERROR_OUT_OF_MEMORY));
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, nullptr));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(r, kMiB, 0, nullptr, &p));
  EXPECT_EQ(0u, Stats(0).region_count);
  // Config checks.
  gmr_symmetric_resource *s = nullptr;
  gmr_symmetric_resource_config c = GMR_SYMMETRIC_RESOURCE_CONFIG_DEFAULT;
  c.alignment_bytes = 3000;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_symmetric_resource_create(gmr_cumem_resource_as_resource(ranks_[0].cumem), &c, &s,
                                          &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "power of two")) << f.message;
  c.alignment_bytes = 0;
  c.region_bytes = 5000;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_symmetric_resource_create(gmr_cumem_resource_as_resource(ranks_[0].cumem), &c, &s,
                                          &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "multiple")) << f.message;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_symmetric_resource_create(nullptr, nullptr, &s, &f));
  EXPECT_EQ(nullptr, s);
}

TEST_F(Symmetric, ACapturingStreamIsRefused) {
  Make(0);
  gmr_resource *r = ranks_[0].r;
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, kMiB, 0, s, &p));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(s));
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate(r, kMiB, 0, s, &q));
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_deallocate(r, p, kMiB, 0, s));
  gmr_graph g = nullptr;
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g));
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, kMiB, 0, s));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

TEST_F(Symmetric, ThreadsGetDisjointBlocks) {
  Make(0);
  gmr_resource *r = ranks_[0].r;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<void *, size_t>> mine;
      for (int i = 0; i < 300; ++i) {
        size_t bytes = 4096 * size_t(1 + (i * 13 + t) % 17);
        void *p = nullptr;
        if (gmr_resource_allocate(r, bytes, 0, nullptr, &p) != GMR_OK) {
          failures++;
          continue;
        }
        std::memset(p, t + 1, bytes);
        mine.emplace_back(p, bytes);
        if (i % 3 == 2) {
          auto [q, n] = mine.front();
          for (size_t k = 0; k < n; k += 512) {
            if (static_cast<unsigned char *>(q)[k] != t + 1) failures++;
          }
          if (gmr_resource_deallocate(r, q, n, 0, nullptr) != GMR_OK) failures++;
          mine.erase(mine.begin());
        }
      }
      for (auto [q, n] : mine) {
        if (gmr_resource_deallocate(r, q, n, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0u, Stats(0).live_count);
}

TEST_F(Symmetric, SpecsStackItOverRegisteredMemory) {
  gmr_stack *stack = nullptr;
  gmr_spec_error e;
  ASSERT_EQ(GMR_OK, gmr_stack_create("symmetric(region_size=64MiB, alignment=64KiB) > "
                                     "chunk_listener > cumem(nccl_ready=true)",
                                     &stack, &e))
      << e.message;
  gmr_resource *top = gmr_stack_as_resource(stack);
  gmr_symmetric_resource *s = gmr_symmetric_resource_from_resource(top);
  ASSERT_NE(nullptr, s);
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 1000, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 1000, 0, nullptr, &q));
  size_t region = 9, offset = 9;
  ASSERT_EQ(GMR_OK, gmr_symmetric_resource_get_offset(s, q, &region, &offset));
  EXPECT_EQ(0u, region);
  EXPECT_EQ(64 * kKiB, offset);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, q, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_stack_create("symmetric(alignment=100) > cuda", &stack, &e));
  EXPECT_NE(nullptr, std::strstr(e.message, "power of two")) << e.message;
}

}  // namespace
