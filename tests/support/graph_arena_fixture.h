// tests/support/graph_arena_fixture.h: the fixtures of the graph arena's
// tests on the simulation. GraphArena (and GraphArenaPolicy, parameterised by
// the capture policy): a cuda(kind=device) upstream by default.
// ArenaCapture: capture_leaf upstreams that can or cannot allocate during
// capture. Streams and leaves are destroyed after the test.
#ifndef GMR_TESTS_SUPPORT_GRAPH_ARENA_FIXTURE_H_
#define GMR_TESTS_SUPPORT_GRAPH_ARENA_FIXTURE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/capture_leaf.h"
#include "tests/support/sim_fixture.h"

namespace gmr_test {

// A thread that keeps allocating on `stream` through `r` (sizes base + step *
// ((i * 7 + t) % classes)), fills each block with the byte t, keeps the
// newest `keep` live and checks a block's first and last byte when freeing
// it, until `done` and at least 100 rounds; every refused call or wrong byte
// counts in `failures`. For tests where uncaptured traffic runs beside
// captures.
inline std::thread ForwardingThread(gmr_resource *r, gmr_stream stream, int t, size_t base,
                                    size_t step, unsigned classes, size_t keep,
                                    std::atomic<bool> &done, std::atomic<int> &failures) {
  return std::thread([=, &done, &failures] {
    std::vector<std::pair<unsigned char *, size_t>> live;
    for (unsigned i = 0; !done.load() || i < 100; ++i) {
      size_t n = base + step * ((i * 7 + static_cast<unsigned>(t)) % classes);
      void *p = nullptr;
      if (gmr_resource_allocate(r, n, 0, stream, &p) != GMR_OK) {
        failures++;
        continue;
      }
      std::memset(p, t, n);
      live.push_back({static_cast<unsigned char *>(p), n});
      if (live.size() > keep) {
        auto [q, m] = live.front();
        live.erase(live.begin());
        if (q[0] != t || q[m - 1] != t) failures++;
        if (gmr_resource_deallocate(r, q, m, 0, stream) != GMR_OK) failures++;
      }
    }
    for (auto [q, m] : live) {
      if (gmr_resource_deallocate(r, q, m, 0, stream) != GMR_OK) failures++;
    }
  });
}

inline constexpr size_t KiB = size_t{1} << 10;
inline constexpr size_t MiB = size_t{1} << 20;
inline constexpr int kGlobalMode = 0;  // cudaStreamCaptureModeGlobal

inline uintptr_t addr(const void *p) { return reinterpret_cast<uintptr_t>(p); }

class GraphArena : public SimTest {
 protected:
  gmr_cuda_resource *cuda_ = nullptr;
  gmr_resource *up_ = nullptr;
  std::vector<gmr_stream> streams_;

  void SetUp() override {
    SimTest::SetUp();
    gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &cuda_));
    up_ = gmr_cuda_resource_as_resource(cuda_);
  }

  void TearDown() override {
    for (gmr_stream s : streams_) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_));
    for (gmr_capture_leaf *l : leaves_) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_capture_leaf_as_resource(l)));
    }
    SimTest::TearDown();
  }

  std::vector<gmr_capture_leaf *> leaves_;

  // A cudaMalloc leaf that can (or cannot) allocate during capture, destroyed
  // after the test's arenas.
  gmr_capture_leaf *Leaf(bool can_capture) {
    gmr_capture_leaf *l = gmr_capture_leaf_create(can_capture);
    EXPECT_NE(nullptr, l);
    leaves_.push_back(l);
    return l;
  }

  static gmr_resource *R(gmr_capture_leaf *l) { return gmr_capture_leaf_as_resource(l); }

  gmr_stream NewStream() {
    gmr_stream s = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
    streams_.push_back(s);
    return s;
  }

  static gmr_graph_arena_resource_config Config(
      size_t initial, size_t chunk = 0, gmr_graph_arena_policy policy = GMR_GRAPH_ARENA_MONOTONE) {
    gmr_graph_arena_resource_config c = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
    c.initial_capacity_bytes = initial;
    c.chunk_bytes = chunk;
    c.capture_policy = policy;
    return c;
  }

  gmr_graph_arena_resource *Make(const gmr_graph_arena_resource_config &c,
                                 gmr_resource *up = nullptr) {
    gmr_graph_arena_resource *a = nullptr;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_create(up != nullptr ? up : up_, &c, &a));
    return a;
  }

  static gmr_graph_arena_resource_stats Stats(gmr_graph_arena_resource *a) {
    gmr_graph_arena_resource_stats st = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_get_stats(a, &st));
    return st;
  }

  static void *Alloc(gmr_resource *r, size_t bytes, gmr_stream s = nullptr) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, s, &p)) << bytes;
    return p;
  }

  // The first byte of the arena's only chunk, found by the first uncaptured
  // allocation (then rewound away).
  static uintptr_t Base(gmr_graph_arena_resource *a) {
    uint64_t mark = 0;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, nullptr, &mark));
    void *p = Alloc(gmr_graph_arena_resource_as_resource(a), 1);
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, nullptr, mark, nullptr));
    return addr(p);
  }
};

class GraphArenaPolicy : public GraphArena,
                         public ::testing::WithParamInterface<gmr_graph_arena_policy> {
 protected:
  bool reuse() const { return GetParam() == GMR_GRAPH_ARENA_ORDERED_REUSE; }
};

class ArenaCapture : public gmr_test::SimTest {
 protected:
  std::vector<gmr_stream> streams_;
  std::vector<gmr_capture_leaf *> leaves_;

  void TearDown() override {
    for (gmr_stream s : streams_) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    for (gmr_capture_leaf *l : leaves_) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_capture_leaf_as_resource(l)));
    }
    SimTest::TearDown();
  }

  gmr_stream NewStream() {
    gmr_stream s = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
    streams_.push_back(s);
    return s;
  }

  // A cudaMalloc leaf that can (or cannot) allocate during capture.
  gmr_capture_leaf *Leaf(bool can_capture) {
    gmr_capture_leaf *l = gmr_capture_leaf_create(can_capture);
    EXPECT_NE(nullptr, l);
    leaves_.push_back(l);
    return l;
  }

  static gmr_resource *R(gmr_capture_leaf *l) { return gmr_capture_leaf_as_resource(l); }

  static gmr_graph_arena_resource_config Config(
      size_t initial, size_t chunk, gmr_graph_arena_policy policy = GMR_GRAPH_ARENA_MONOTONE) {
    gmr_graph_arena_resource_config c = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
    c.initial_capacity_bytes = initial;
    c.chunk_bytes = chunk;
    c.capture_policy = policy;
    return c;
  }

  static gmr_graph_arena_resource *Make(const gmr_graph_arena_resource_config &c,
                                        gmr_resource *up) {
    gmr_graph_arena_resource *a = nullptr;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_create(up, &c, &a));
    return a;
  }

  static gmr_graph_arena_resource_stats Stats(gmr_graph_arena_resource *a) {
    gmr_graph_arena_resource_stats st = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_get_stats(a, &st));
    return st;
  }

  static void *Alloc(gmr_resource *r, size_t bytes, gmr_stream s) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, s, &p)) << bytes;
    return p;
  }

  // End the real capture (it must be valid) and the arena's session.
  static gmr_graph_memory *EndCapture(gmr_graph_arena_resource *a, gmr_stream s) {
    gmr_graph g = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_end_capture(s, &g)) << "the capture was invalidated";
    EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(g));
    gmr_graph_memory *m = nullptr;
    EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
    return m;
  }
};

}  // namespace gmr_test

#endif  // GMR_TESTS_SUPPORT_GRAPH_ARENA_FIXTURE_H_
