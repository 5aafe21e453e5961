// The NVTX memory-extension annotations of the three sub-allocating resources
// (pool_resource, fixed_block_resource, graph_arena_resource) on the host
// simulation, seen by the recording injection library: for scripted sequences
// the exact heap and region registrations, their order against the upstream
// calls, the error paths, and nothing at all with nvtx_annotate = false.
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/nvtx_mem.h"
#include "gmr/cuda_resource.h"
#include "gmr/device.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/pool_resource.h"
#include "gmr/sim/streams.h"
#include "gmr/stack.h"
#include "tests/support/gate_resource.h"
#include "tests/support/nvtx_recorder_client.h"
#include "tests/support/sim_fixture.h"

namespace {

using gmr_test::NvtxRecorder;
using Lines = std::vector<std::string>;

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

// The recorder numbers heaps across the process; renumber them H1, H2... in
// order of first appearance so expectations do not depend on test order.
Lines renumbered(const Lines &in) {
  std::map<std::string, std::string> names;
  Lines out;
  for (std::string line : in) {
    size_t at = line.find(" heap");
    if (at != std::string::npos) {
      size_t end = at + 5;
      while (end < line.size() && isdigit(static_cast<unsigned char>(line[end]))) end++;
      std::string old = line.substr(at + 1, end - at - 1);
      if (names.count(old) == 0) names[old] = "H" + std::to_string(names.size() + 1);
      line.replace(at + 1, old.size(), names[old]);
    }
    out.push_back(line);
  }
  return out;
}

Lines recorded() { return renumbered(NvtxRecorder::lines()); }

std::string hex(const void *p) { return NvtxRecorder::hex(p); }

std::string heap(int k, const void *base, size_t bytes, const char *name) {
  return "heap_register gmr H" + std::to_string(k) + " base=" + hex(base) +
         " size=" + std::to_string(bytes) + " usage=sub_allocator type=virtual_address name=\"" +
         name + "\"";
}
std::string heap_gone(int k) { return "heap_unregister gmr H" + std::to_string(k); }
std::string region(int k, const void *p, size_t bytes) {
  return "region_register gmr H" + std::to_string(k) + " " + hex(p) + " " + std::to_string(bytes);
}
std::string region_gone(const void *p) { return "region_unregister gmr " + hex(p); }

void *Alloc(gmr_resource *r, size_t bytes, gmr_stream s = nullptr, size_t align = 0) {
  void *p = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, align, s, &p)) << bytes;
  return p;
}

const char kPool[] = "pool_resource chunk";
const char kFixed[] = "fixed_block_resource chunk";
const char kArena[] = "graph_arena_resource chunk";

class NvtxAnnotation : public gmr_test::SimTest {
 protected:
  gmr_cuda_resource *cuda_ = nullptr;
  gmr_resource *up_ = nullptr;
  std::vector<gmr_stream> streams_;

  static void SetUpTestSuite() {
    // The process's first NVTX memory call loads the recorder and creates the
    // "gmr" domain: make it here, so that every test sees only its own calls
    // and "nothing recorded" means that nothing was called.
    static char warm[256];
    gmr__nvtx_mem_heap_unregister(gmr__nvtx_mem_heap_register(warm, sizeof warm, "warm-up"));
  }

  void SetUp() override {
    if (!gmr__nvtx_mem_compiled_in()) {
      GTEST_SKIP() << "built with GMR_DISABLE_NVTX: nothing to record";
    }
    ASSERT_TRUE(NvtxRecorder::loaded()) << "is NVTX_INJECTION64_PATH set by the BUILD file?";
    SimTest::SetUp();
    gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(&c, &cuda_));
    up_ = gmr_cuda_resource_as_resource(cuda_);
    NvtxRecorder::clear();
  }

  void TearDown() override {
    if (up_ == nullptr) return;  // skipped
    for (gmr_stream s : streams_) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_));
    SimTest::TearDown();
  }

  gmr_stream NewStream() {
    gmr_stream s = nullptr;
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
    streams_.push_back(s);
    return s;
  }

};

// ---- pool_resource -----------------------------------------------------------

gmr_pool_resource_config PoolConfig(bool annotate) {
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 1;
  c.min_growth_bytes = MiB;
  c.max_growth_bytes = MiB;
  c.chunk_granularity_bytes = MiB;
  c.growth_percent = 0;
  c.release_on_growth = false;
  c.recent_free_count = 0;
  c.streams.nvtx_annotate = annotate;
  return c;
}

// The scripted sequence the pool tests share; returns what it allocated.
struct PoolScript {
  void *a, *b, *c, *d, *e;
  size_t trimmed;
};

PoolScript RunPoolScript(gmr_resource *r) {
  PoolScript s{};
  s.a = Alloc(r, 1000);
  s.b = Alloc(r, 4096);
  s.c = Alloc(r, 300, nullptr, 4 * KiB);  // padding in front stays free
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, s.a, 1000, 0, nullptr));
  s.d = Alloc(r, 100);        // a's place, smaller
  s.e = Alloc(r, 2 * MiB);    // a chunk of its own
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, s.b, 4096, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, s.c, 300, 4 * KiB, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, s.d, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, s.e, 2 * MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &s.trimmed));
  return s;
}

TEST_F(NvtxAnnotation, PoolRegistersChunksAndTheBytesAskedForOfEachBlock) {
  gmr_pool_resource_config config = PoolConfig(true);
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(up_, &config, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  EXPECT_EQ(Lines{}, recorded()) << "no chunk yet, nothing to describe";

  PoolScript s = RunPoolScript(r);
  EXPECT_EQ(3 * MiB, s.trimmed);
  EXPECT_EQ(s.a, s.d);
  EXPECT_EQ(static_cast<char *>(s.a) + 1024, s.b);  // 1000 rounded to 1024
  Lines want = {
      heap(1, s.a, MiB, kPool),  // the first chunk starts with a
      region(1, s.a, 1000),      // what was asked, not 1024
      region(1, s.b, 4096),
      region(1, s.c, 300),
      region_gone(s.a),
      region(1, s.d, 100),
      heap(2, s.e, 2 * MiB, kPool),
      region(2, s.e, 2 * MiB),
      region_gone(s.b),
      region_gone(s.c),
      region_gone(s.d),
      region_gone(s.e),
      heap_gone(2),  // trim: the newest chunk first
      heap_gone(1),
  };
  EXPECT_EQ(want, recorded());

  // A chunk still held at destroy: its heap goes before the chunk does.
  NvtxRecorder::clear();
  void *f = Alloc(r, 512);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, f, 512, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  want = {heap(1, f, MiB, kPool), region(1, f, 512), region_gone(f), heap_gone(1)};
  EXPECT_EQ(want, recorded());
}

TEST_F(NvtxAnnotation, PoolWithoutAnnotationMakesNoNvtxCall) {
  gmr_pool_resource_config config = PoolConfig(false);
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(up_, &config, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  PoolScript s = RunPoolScript(r);
  EXPECT_EQ(3 * MiB, s.trimmed);
  void *f = Alloc(r, 512);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, f, 512, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(Lines{}, recorded());
}

TEST_F(NvtxAnnotation, PoolUnregistersHeapsBeforeReleasingChunksToGrow) {
  gmr_pool_resource_config config = PoolConfig(true);
  config.release_on_growth = true;
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(up_, &config, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  void *x1 = Alloc(r, MiB);  // two full chunks of 1 MiB
  void *x2 = Alloc(r, MiB);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, x1, MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, x2, MiB, 0, nullptr));
  // 1.5 MiB fits in neither: both free chunks go back, then a 2 MiB chunk.
  void *y = Alloc(r, MiB + MiB / 2);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, y, MiB + MiB / 2, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  Lines want = {
      heap(1, x1, MiB, kPool),      region(1, x1, MiB),
      heap(2, x2, MiB, kPool),      region(2, x2, MiB),
      region_gone(x1),              region_gone(x2),
      heap_gone(2),                 heap_gone(1),
      heap(3, y, 2 * MiB, kPool),   region(3, y, MiB + MiB / 2),
      region_gone(y),               heap_gone(3),
  };
  EXPECT_EQ(want, recorded());
}

TEST_F(NvtxAnnotation, PoolChunkTheUpstreamRefusesToTakeBackIsDescribedAgain) {
  gmr_gate_resource *gate = gmr_gate_resource_create(up_);
  ASSERT_NE(nullptr, gate);
  gmr_pool_resource_config config = PoolConfig(true);
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_pool_resource_create(gmr_gate_resource_as_resource(gate), &config, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  void *x = Alloc(r, 1000);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 1000, 0, nullptr));
  gmr_gate_resource_refuse_frees(gate, 1, GMR_ERR_CAPTURE_UNSAFE);
  size_t released = 0;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, released);
  // Still usable, and described: a block in it is a region of the new heap.
  void *y = Alloc(r, 200);
  EXPECT_EQ(x, y);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, y, 200, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_gate_resource_as_resource(gate)));
  Lines want = {
      heap(1, x, MiB, kPool), region(1, x, 1000), region_gone(x),
      heap_gone(1),                // before the upstream was asked
      heap(2, x, MiB, kPool),      // the upstream refused: the chunk is ours again
      region(2, y, 200),      region_gone(y),     heap_gone(2),
  };
  EXPECT_EQ(want, recorded());
}

TEST_F(NvtxAnnotation, PoolFreedByOtherThreadsAndArenasBalancesEveryRegistration) {
  gmr_pool_resource_config config = PoolConfig(true);
  config.arena_count = 4;
  config.recent_free_count = 8;
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(up_, &config, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  constexpr int kThreads = 4;
  constexpr int kBlocks = 200;
  std::vector<std::vector<void *>> made(kThreads, std::vector<void *>(kBlocks, nullptr));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kBlocks; ++i) {
        if (gmr_resource_allocate(r, 100 + i, 0, nullptr, &made[t][i]) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  threads.clear();
  // Each thread frees another thread's blocks (another arena's, mostly).
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<void *> &theirs = made[(t + 1) % kThreads];
      for (int i = 0; i < kBlocks; ++i) {
        if (gmr_resource_deallocate(r, theirs[i], 100 + i, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  std::map<std::string, int> kinds;
  for (const std::string &line : NvtxRecorder::lines()) kinds[line.substr(0, line.find(' '))]++;
  EXPECT_EQ(kThreads * kBlocks, kinds["region_register"]);
  EXPECT_EQ(kThreads * kBlocks, kinds["region_unregister"]);
  EXPECT_LE(1, kinds["heap_register"]);
  EXPECT_EQ(kinds["heap_register"], kinds["heap_unregister"]);
  EXPECT_EQ(4u, kinds.size()) << "no other kind of line, no BAD line";
}

// ---- fixed_block_resource ------------------------------------------------------

gmr_fixed_block_resource_config FixedConfig(bool annotate) {
  gmr_fixed_block_resource_config c = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  c.block_bytes = KiB;
  c.blocks_per_chunk = 4;
  c.streams.nvtx_annotate = annotate;
  return c;
}

struct FixedScript {
  void *a, *b, *big;
  gmr_block_list copy;  // the list's blocks, copied before it is given back
  void *blocks[3];
  size_t trimmed;
};

FixedScript RunFixedScript(gmr_fixed_block_resource *fb) {
  gmr_resource *r = gmr_fixed_block_resource_as_resource(fb);
  FixedScript s{};
  s.a = Alloc(r, 1000);
  s.b = Alloc(r, 10);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, s.a, 1000, 0, nullptr));
  gmr_block_list *list = nullptr;
  EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_allocate_blocks(fb, 2500, nullptr, &list));
  if (list != nullptr) {
    EXPECT_EQ(3u, list->block_count);
    for (size_t i = 0; i < 3 && i < list->block_count; ++i) s.blocks[i] = list->blocks[i];
  }
  s.big = Alloc(r, 8 * KiB);  // forwarded: the upstream's own allocation
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, s.big, 8 * KiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_fixed_block_resource_deallocate_blocks(fb, list, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, s.b, 10, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &s.trimmed));
  return s;
}

TEST_F(NvtxAnnotation, FixedBlockRegistersChunksBlocksAndListBlocks) {
  gmr_fixed_block_resource_config config = FixedConfig(true);
  gmr_fixed_block_resource *fb = nullptr;
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_create(up_, &config, &fb));
  FixedScript s = RunFixedScript(fb);
  EXPECT_EQ(4 * KiB, s.trimmed);
  char *base = static_cast<char *>(s.a);  // blocks go out in address order
  EXPECT_EQ(base + KiB, s.b);
  EXPECT_EQ(base, s.blocks[0]);  // the block freed last comes out first
  EXPECT_EQ(base + 2 * KiB, s.blocks[1]);
  EXPECT_EQ(base + 3 * KiB, s.blocks[2]);
  Lines want = {
      heap(1, base, 4 * KiB, kFixed),
      region(1, s.a, 1000),  // the bytes asked for
      region(1, s.b, 10),
      region_gone(s.a),
      region(1, s.blocks[0], KiB),  // list blocks: the whole block
      region(1, s.blocks[1], KiB),
      region(1, s.blocks[2], KiB),
      region_gone(s.blocks[0]),  // the forwarded 8 KiB made no line
      region_gone(s.blocks[1]),
      region_gone(s.blocks[2]),
      region_gone(s.b),
      heap_gone(1),
  };
  EXPECT_EQ(want, recorded());

  NvtxRecorder::clear();
  gmr_resource *r = gmr_fixed_block_resource_as_resource(fb);
  void *c = Alloc(r, 256);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, c, 256, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  want = {heap(1, c, 4 * KiB, kFixed), region(1, c, 256), region_gone(c), heap_gone(1)};
  EXPECT_EQ(want, recorded());
}

TEST_F(NvtxAnnotation, FixedBlockWithoutAnnotationMakesNoNvtxCall) {
  gmr_fixed_block_resource_config config = FixedConfig(false);
  config.initial_chunk_count = 1;
  gmr_fixed_block_resource *fb = nullptr;
  ASSERT_EQ(GMR_OK, gmr_fixed_block_resource_create(up_, &config, &fb));
  FixedScript s = RunFixedScript(fb);
  EXPECT_EQ(4 * KiB, s.trimmed);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_fixed_block_resource_as_resource(fb)));
  EXPECT_EQ(Lines{}, recorded());
}

TEST_F(NvtxAnnotation, FixedBlockInitialChunksAndARefusedReleaseKeepHeapsRight) {
  gmr_gate_resource *gate = gmr_gate_resource_create(up_);
  ASSERT_NE(nullptr, gate);
  gmr_fixed_block_resource_config config = FixedConfig(true);
  config.initial_chunk_count = 1;
  gmr_fixed_block_resource *fb = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_fixed_block_resource_create(gmr_gate_resource_as_resource(gate), &config, &fb));
  gmr_resource *r = gmr_fixed_block_resource_as_resource(fb);
  void *a = Alloc(r, 512);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 512, 0, nullptr));
  gmr_gate_resource_refuse_frees(gate, 1, GMR_ERR_CAPTURE_UNSAFE);
  size_t released = 0;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, released);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_gate_resource_as_resource(gate)));
  Lines want = {
      heap(1, a, 4 * KiB, kFixed),  // at create
      region(1, a, 512),      region_gone(a),
      heap_gone(1),                 // trim, before asking the upstream
      heap(2, a, 4 * KiB, kFixed),  // refused: ours again
      heap_gone(2),                 // destroy
  };
  EXPECT_EQ(want, recorded());
}

// ---- graph_arena_resource ------------------------------------------------------

gmr_graph_arena_resource_config ArenaConfig(
    bool annotate, gmr_graph_arena_policy policy = GMR_GRAPH_ARENA_MONOTONE) {
  gmr_graph_arena_resource_config c = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
  c.initial_capacity_bytes = MiB;
  c.chunk_bytes = MiB;
  c.capture_policy = policy;
  c.detection = GMR_GRAPH_ARENA_DETECT_EXPLICIT;  // sessions only where the test opens them
  c.nvtx_annotate = annotate;
  return c;
}

struct ArenaScript {
  void *u, *w, *x, *y, *big;
  size_t trimmed;
};

// Uncaptured blocks freed outside and inside a capture, captured blocks freed
// in and after the capture, release, reset, growth and trim.
ArenaScript RunArenaScript(gmr_graph_arena_resource *a, gmr_stream s) {
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  ArenaScript k{};
  k.u = Alloc(r, 1000);
  k.w = Alloc(r, 2000);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, k.u, 1000, 0, nullptr));  // outside any capture
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  k.x = Alloc(r, 500, s);
  k.y = Alloc(r, 300, s);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, k.x, 500, 0, s));  // in the capture: bookkeeping
  EXPECT_EQ(GMR_OK,
            gmr_resource_deallocate(r, k.w, 2000, 0, s));  // uncaptured, freed in the capture
  gmr_graph_memory *m = nullptr;
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, k.y, 300, 0, s));  // after it, the memory still held
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  k.big = Alloc(r, 3 * MiB);  // grows by a chunk of its own
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, k.big, 3 * MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &k.trimmed));
  return k;
}

TEST_F(NvtxAnnotation, GraphArenaKeepsRegionsWhileAGraphMayStillTouchTheBytes) {
  gmr_stream s = NewStream();
  gmr_graph_arena_resource_config config = ArenaConfig(true);
  gmr_graph_arena_resource *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_create(up_, &config, &a));
  ArenaScript k = RunArenaScript(a, s);
  EXPECT_EQ(3 * MiB, k.trimmed);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(a)));
  Lines want = {
      heap(1, k.u, MiB, kArena),  // at create; u is the first block of it
      region(1, k.u, 1000),
      region(1, k.w, 2000),
      region_gone(k.u),  // freed outside any capture
      region(1, k.x, 500),
      region(1, k.y, 300),
      // x freed in the capture, w freed in it, y freed after it: nothing.
      region_gone(k.x),  // the memory released: its freed blocks go
      region_gone(k.y),
      region_gone(k.w),  // reset: the uncaptured bytes come back
      heap(2, k.big, 3 * MiB, kArena),
      region(2, k.big, 3 * MiB),
      region_gone(k.big),
      heap_gone(2),  // trim (the initial chunk stays)
      heap_gone(1),  // destroy
  };
  EXPECT_EQ(want, recorded());
}

TEST_F(NvtxAnnotation, GraphArenaWithoutAnnotationMakesNoNvtxCall) {
  gmr_stream s = NewStream();
  gmr_graph_arena_resource_config config = ArenaConfig(false);
  gmr_graph_arena_resource *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_create(up_, &config, &a));
  ArenaScript k = RunArenaScript(a, s);
  EXPECT_EQ(3 * MiB, k.trimmed);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_graph_arena_resource_as_resource(a)));
  EXPECT_EQ(Lines{}, recorded());
}

TEST_F(NvtxAnnotation, GraphArenaLiveBlocksOutliveTheirMemoryAndRewindsGiveBytesBack) {
  gmr_stream s = NewStream();
  gmr_graph_arena_resource_config config = ArenaConfig(true);
  gmr_graph_arena_resource *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_create(up_, &config, &a));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  NvtxRecorder::clear();  // the heap, as above

  // A captured block still live when its memory is released keeps its
  // region until it is freed.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *x = Alloc(r, 1000, s);
  gmr_graph_memory *m = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 1000, 0, s));

  // Outside sessions a rewind gives the bytes back: their regions go.
  uint64_t mark = 0;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, nullptr, &mark));
  void *p = Alloc(r, 100);
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, nullptr, mark, &released));
  EXPECT_EQ(1u, released);

  // In a session (monotone) a rewind is bookkeeping: the region stays with
  // the memory until it is released.
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_checkpoint(a, s, &mark));
  void *q = Alloc(r, 100, s);
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_rewind(a, s, mark, &released));
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
  Lines before_release = recorded();
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));

  Lines want = {
      region(1, x, 1000),
      region_gone(x),  // freed after its memory was released
      region(1, p, 100),
      region_gone(p),  // rewound outside sessions
      region(1, q, 100),
  };
  EXPECT_EQ(want, before_release);
  want.push_back(region_gone(q));  // its memory released
  want.push_back(heap_gone(1));
  EXPECT_EQ(want, recorded());
}

TEST_F(NvtxAnnotation, GraphArenaOrderedReuseWidensFreedRegionsAndNeverOverlapsThem) {
  gmr_stream s = NewStream();
  gmr_graph_arena_resource_config config = ArenaConfig(true, GMR_GRAPH_ARENA_ORDERED_REUSE);
  gmr_graph_arena_resource *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_create(up_, &config, &a));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  NvtxRecorder::clear();

  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_begin_capture(a, s, nullptr));
  void *x = Alloc(r, 1000, s);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, x, 1000, 0, s));
  void *y = Alloc(r, 512, s);  // reuses x's bytes later in the capture
  EXPECT_EQ(x, y);
  gmr_graph_memory *m = nullptr;
  ASSERT_EQ(GMR_OK, gmr_graph_arena_resource_end_capture(a, s, &m));
  Lines in_capture = recorded();
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_release_graph_memory(a, m));  // y still live
  Lines at_release = recorded();
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, y, 512, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));

  Lines want = {
      region(1, x, 1000),
      region_gone(x),      // freed into the reuse list:
      region(1, x, 1024),  // the whole carved range (y may use its rounding)
  };
  EXPECT_EQ(want, in_capture) << "y, carved from x's bytes, gets no region of its own";
  want.push_back(region_gone(x));  // the memory gives x's range back...
  want.push_back(region(1, y, 512));  // ...and y, still live, is described alone
  EXPECT_EQ(want, at_release);
  want.push_back(region_gone(y));
  want.push_back(heap_gone(1));
  EXPECT_EQ(want, recorded());
}

TEST_F(NvtxAnnotation, GraphArenaChunkTheUpstreamRefusesToTakeBackIsDescribedAgain) {
  gmr_gate_resource *gate = gmr_gate_resource_create(up_);
  ASSERT_NE(nullptr, gate);
  gmr_graph_arena_resource_config config = ArenaConfig(true);
  config.initial_capacity_bytes = 0;
  gmr_graph_arena_resource *a = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_graph_arena_resource_create(gmr_gate_resource_as_resource(gate), &config, &a));
  gmr_resource *r = gmr_graph_arena_resource_as_resource(a);
  void *p = Alloc(r, 256);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 256, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_graph_arena_resource_reset(a, nullptr));
  gmr_gate_resource_refuse_frees(gate, 1, GMR_ERR_CAPTURE_UNSAFE);
  size_t released = 0;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_trim(r, &released));
  EXPECT_EQ(0u, released);
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(MiB, released);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_gate_resource_as_resource(gate)));
  Lines want = {
      heap(1, p, MiB, kArena), region(1, p, 256), region_gone(p),
      heap_gone(1),             // the first trim, before the upstream refused
      heap(2, p, MiB, kArena),  // ours again
      heap_gone(2),             // the second trim
  };
  EXPECT_EQ(want, recorded());
}

// ---- specs ---------------------------------------------------------------------

TEST_F(NvtxAnnotation, SpecOptionReachesEachResource) {
  struct Case {
    const char *spec;
    const char *heap_name;
    size_t chunk_bytes;
  } cases[] = {
      {"pool(nvtx_annotate=true, arenas=1, min_growth=1MiB, max_growth=1MiB, granularity=1MiB) "
       "> cuda(kind=device)",
       kPool, MiB},
      {"fixed_block(nvtx_annotate=yes, block=1KiB, blocks_per_chunk=4) > cuda(kind=device)",
       kFixed, 4 * KiB},
      {"graph_arena(nvtx_annotate=on, chunk=1MiB) > cuda(kind=device)", kArena, MiB},
  };
  for (const Case &c : cases) {
    NvtxRecorder::clear();
    gmr_stack *stack = nullptr;
    gmr_spec_error e;
    ASSERT_EQ(GMR_OK, gmr_stack_create(c.spec, &stack, &e)) << e.message;
    gmr_resource *r = gmr_stack_as_resource(stack);
    void *p = Alloc(r, 100);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
    Lines want = {heap(1, p, c.chunk_bytes, c.heap_name), region(1, p, 100), region_gone(p),
                  heap_gone(1)};
    EXPECT_EQ(want, recorded()) << c.spec;
  }
  // The default is off.
  for (const char *spec : {"pool > cuda(kind=device)", "fixed_block > cuda(kind=device)",
                           "graph_arena > cuda(kind=device)"}) {
    NvtxRecorder::clear();
    gmr_stack *stack = nullptr;
    gmr_spec_error e;
    ASSERT_EQ(GMR_OK, gmr_stack_create(spec, &stack, &e)) << e.message;
    gmr_resource *r = gmr_stack_as_resource(stack);
    void *p = Alloc(r, 100);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
    EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
    EXPECT_EQ(Lines{}, recorded()) << spec;
  }
}

}  // namespace
