// vmm (fine placement) on the simulation:
// 256-byte placement over shared pages, bad frees, alignment, growth,
// moving free memory instead of holding more, and no driver call at all
// once a repeating program's memory is in place.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/vmm/vmm_fine_fixture.h"

namespace {

using gmr_test::FineConfig;
using gmr_test::kMiB;
using gmr_test::kPage;
using gmr_test::Stats;
using gmr_test::VmmCalls;

class VmmFine : public gmr_test::FineTest {};

TEST_F(VmmFine, RequestsShareThePagesTheyTouch) {
  Make();
  void *a = Alloc(kPage - 4096);
  void *b = Alloc(4096);
  EXPECT_EQ(static_cast<char *>(a) + kPage - 4096, b) << "the tail of the page, not a new page";
  EXPECT_EQ(kPage, Held());
  std::vector<void *> small;
  for (int i = 0; i < 64; ++i) small.push_back(Alloc(1000));
  EXPECT_EQ(2 * kPage, Held()) << "64 x 1,024 bytes: the start of a second page";
  gmr_vmm_pool_resource_stats s = Stats(pool_);
  EXPECT_EQ(66u, s.live_count);
  EXPECT_EQ(kPage + 64 * 1024u, s.live_bytes) << "256-byte rounding";
  EXPECT_EQ(0u, s.small_live_count) << "no separate small path";
  std::memset(a, 1, kPage - 4096);
  std::memset(b, 2, 4096);
  EXPECT_EQ(1, static_cast<char *>(a)[kPage - 4097]);
  for (void *p : small) Free(p, 1000);
  Free(a, kPage - 4096);
  Free(b, 4096);
  EXPECT_EQ(0u, Stats(pool_).live_count);
}

TEST_F(VmmFine, AlignmentUpToThePageIsHonouredAndAboveIsRefused) {
  Make();
  void *pad = Alloc(256);
  for (size_t align : {size_t{512}, size_t{4096}, size_t{1} << 20, kPage}) {
    void *p = Alloc(1000, nullptr, align);
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % align) << align;
    EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 1000, 0, nullptr))
        << "freed with another alignment";
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 1000, align, nullptr));
  }
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_allocate_ex(r_, 1000, 2 * kPage, nullptr, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "at most its page")) << f.message;
  Free(pad, 256);
}

TEST_F(VmmFine, BadFreesUseTheVocabularyAndChangeNothing) {
  Make();
  void *p = Alloc(5000);
  void *q = Alloc(3 * kPage);
  const gmr_vmm_pool_resource_stats before = Stats(pool_);
  int outside = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(r_, &outside, 5000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER,
            gmr_resource_deallocate(r_, static_cast<char *>(p) + 256, 256, 0, nullptr))
      << "inside an allocation";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 6000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 5100, 0, nullptr))
      << "the same 256-byte rounding is not the same size";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 4999, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 5000, 128, nullptr))
      << "an alignment below the unit is still another alignment";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 5000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 5000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, q, kPage, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, q, 3 * kPage, 4096, nullptr));
  gmr_vmm_pool_resource_stats after = Stats(pool_);
  EXPECT_EQ(before.live_count - 1, after.live_count);
  EXPECT_EQ(before.mapped_bytes, after.mapped_bytes);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(r_)) << "q is live";
  Free(q, 3 * kPage);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, q, 3 * kPage, 0, nullptr));
}

// Fine placement keeps the size and alignment asked for per allocation (the
// region already has them): a free or extend that names what they round to
// is refused and changes nothing, and alignment 0 is the 256 it stands for.
TEST_F(VmmFine, AFreeMustNameTheSizeAndAlignmentAskedFor) {
  Make();
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 1000, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r_, 1000, 64, nullptr, &q));
  const gmr_vmm_pool_resource_stats before = Stats(pool_);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 999, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, p, 1024, 0, nullptr))
      << "the 256-byte units it rounds to";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(r_, q, 1000, 0, nullptr))
      << "256, not the 64 asked for";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_extend(r_, p, 999, 5000, 0, nullptr, nullptr));
  const gmr_vmm_pool_resource_stats after = Stats(pool_);
  EXPECT_EQ(before.live_count, after.live_count);
  EXPECT_EQ(before.live_bytes, after.live_bytes);
  EXPECT_EQ(before.extend_count, after.extend_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, p, 1000, 256, nullptr)) << "0 asked means 256";
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r_, q, 1000, 64, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(r_, q, 999, 64, nullptr))
      << "freed: whatever the size";
}

TEST_F(VmmFine, AddressesFreedLongAgoStillReadAsUnknownOrDoubleFrees) {
  Make();
  // Many distinct addresses freed: the record of freed addresses is bounded,
  // and any bad free still gets a bad-free status.
  std::vector<void *> v;
  for (int i = 0; i < 6000; ++i) v.push_back(Alloc(256 * (1 + i % 7)));
  for (int i = 0; i < 6000; ++i) Free(v[i], 256 * (1 + i % 7));
  gmr_status st = gmr_resource_deallocate(r_, v[0], 256, 0, nullptr);
  EXPECT_TRUE(st == GMR_ERR_DOUBLE_FREE || st == GMR_ERR_UNKNOWN_POINTER) << gmr_status_name(st);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE,
            gmr_resource_deallocate(r_, v[5999], 256 * (1 + 5999 % 7), 0, nullptr));
}

TEST_F(VmmFine, GrowthMapsATailOfTheGivenShareAndRepeatsNoCall) {
  gmr_vmm_pool_resource_config c = FineConfig();
  c.growth_percent = 100;
  c.remap_permille = GMR_VMM_POOL_REMAP_NEVER;
  Make(c);
  void *a = Alloc(4 * kPage);
  EXPECT_EQ(4 * kPage, Held()) << "nothing held yet: the request only";
  void *b = Alloc(kPage);
  EXPECT_EQ(8 * kPage, Held()) << "100% of what is held, the request included";
  const uint64_t calls = VmmCalls();
  void *c2 = Alloc(3 * kPage);
  EXPECT_EQ(calls, VmmCalls()) << "the tail serves it";
  Free(a, 4 * kPage);
  Free(b, kPage);
  Free(c2, 3 * kPage);
}

TEST_F(VmmFine, FreeMemoryMovesInsteadOfGrowingPastTheThreshold) {
  gmr_vmm_pool_resource_config c = FineConfig();
  c.handle_divisor = 0;
  Make(c);
  // Four separate growths: four handles, side by side.
  void *a = Alloc(3 * kPage);
  void *b = Alloc(kPage);
  void *c3 = Alloc(3 * kPage);
  void *d = Alloc(kPage);
  std::memset(b, 7, kPage);
  ASSERT_EQ(8 * kPage, Held());
  Free(a, 3 * kPage);
  Free(c3, 3 * kPage);
  // 6 free pages, but not 6 side by side: below the peak of live bytes (8
  // pages) the pool moves the two free handles instead of holding more.
  const uint64_t unmaps = Stats(pool_).unmap_count;
  const size_t device_before = Device().used_bytes;
  void *e = Alloc(6 * kPage);
  EXPECT_EQ(8 * kPage, Held()) << "no new memory";
  EXPECT_EQ(device_before, Device().used_bytes);
  EXPECT_EQ(unmaps + 2, Stats(pool_).unmap_count) << "two handles moved";
  EXPECT_EQ(1u, Stats(pool_).defrag_count);
  EXPECT_EQ(6u, Stats(pool_).remapped_page_count);
  std::memset(e, 9, 6 * kPage);
  EXPECT_EQ(7, static_cast<char *>(b)[kPage - 1]) << "the live block kept its pages";
  Free(e, 6 * kPage);
  Free(b, kPage);
  Free(d, kPage);
}

TEST_F(VmmFine, WithMovingOffTheRequestHoldsMore) {
  gmr_vmm_pool_resource_config c = FineConfig();
  c.remap_permille = GMR_VMM_POOL_REMAP_NEVER;
  Make(c);
  void *a = Alloc(3 * kPage);
  void *b = Alloc(kPage);
  Free(a, 3 * kPage);
  void *e = Alloc(4 * kPage);
  EXPECT_EQ(8 * kPage, Held());
  EXPECT_EQ(0u, Stats(pool_).unmap_count);
  Free(e, 4 * kPage);
  Free(b, kPage);
}

// The program repeats: after the first round every request is served from
// memory in place, with no driver call.
TEST_F(VmmFine, ARepeatingProgramMakesNoDriverCallAfterItsFirstRound) {
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  c.va_chunk_bytes = 256 * kPage;
  Make(c);
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  auto round = [&] {
    std::vector<std::pair<void *, size_t>> live;
    unsigned x = 12345;
    for (int i = 0; i < 400; ++i) {
      x = x * 1103515245u + 12345u;
      size_t bytes = 256 + (x >> 8) % (3 * kPage);
      live.emplace_back(Alloc(bytes, i % 3 == 0 ? s : nullptr), bytes);
      if (live.size() > 12) {
        size_t k = (x >> 4) % live.size();
        Free(live[k].first, live[k].second, k % 3 == 0 ? s : nullptr);
        live.erase(live.begin() + static_cast<long>(k));
      }
    }
    for (auto &p : live) Free(p.first, p.second);
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(s));
  };
  round();
  round();
  const uint64_t calls = VmmCalls();
  const size_t held = Held();
  round();
  EXPECT_EQ(calls, VmmCalls()) << "the third round finds everything in place";
  EXPECT_EQ(held, Held());
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// The loop of tests/gpu/vmm_fine_gpu_test.cc with the `vmm` defaults, shaped
// like a training step: activations of many sizes kept until the step ends
// (freed last in, first out), a temporary freed at once after each.
TEST_F(VmmFine, ATrainingLikeLoopRepeatsWithoutDriverCalls) {
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  Make(c);
  gmr_stream s = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s));
  auto step = [&] {
    std::vector<std::pair<void *, size_t>> kept;
    unsigned x = 99;
    for (int i = 0; i < 100; ++i) {
      x = x * 1103515245u + 12345u;
      size_t bytes = 512 + (x >> 8) % (24 * kMiB);
      kept.emplace_back(Alloc(bytes, s), bytes);
      size_t temp = 256 + (x >> 4) % (6 * kMiB);
      Free(Alloc(temp, s), temp, s);
    }
    while (!kept.empty()) {
      Free(kept.back().first, kept.back().second, s);
      kept.pop_back();
    }
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(s));
  };
  step();
  step();
  const uint64_t calls = VmmCalls();
  step();
  EXPECT_EQ(calls, VmmCalls());
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s));
}

// Four streams trading random-sized buffers (the bundled multistream trace's
// shape) leave free bytes that no page holds whole, so every round would
// move memory again; each such move doubles the slack the pool may hold
// instead, and the rounds settle with no driver call, within the cap.
TEST_F(VmmFine, StreamsTradingBuffersSettleAfterAFewMoves) {
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  c.shard_count = 1;
  Make(c);
  gmr_stream s[4] = {};
  for (auto &st : s) ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&st));
  struct Buffer {
    void *p;
    size_t bytes;
    int stream;
  };
  std::vector<Buffer> live;
  size_t live_bytes = 0, peak_live = 0;
  auto round = [&] {  // the same requests every round, as a program's steps
    unsigned x = 4242;
    for (int i = 0; i < 200; ++i) {
      x = x * 1103515245u + 12345u;
      if (live.size() == 16) {  // replace a buffer, on its own stream
        size_t k = (x >> 4) % live.size();
        Free(live[k].p, live[k].bytes, s[live[k].stream]);
        live_bytes -= live[k].bytes;
        live.erase(live.begin() + static_cast<long>(k));
      }
      size_t bytes = 60000 + (x >> 8) % (16 * kMiB);
      int st = static_cast<int>((x >> 20) % 4);
      live.push_back({Alloc(bytes, s[st]), bytes, st});
      live_bytes += bytes;
      if (live_bytes > peak_live) peak_live = live_bytes;
    }
    for (auto &b : live) Free(b.p, b.bytes, s[b.stream]);
    live.clear();
    live_bytes = 0;
    for (auto &st : s) ASSERT_EQ(GMR_OK, gmr_cuda_stream_synchronize(st));
  };
  uint64_t calls = VmmCalls();
  int settled_at = -1;
  for (int r = 0; r < 16 && settled_at < 0; ++r) {
    round();
    if (r >= 2 && VmmCalls() == calls) settled_at = r;
    calls = VmmCalls();
  }
  EXPECT_GE(settled_at, 0) << "memory still moves after 16 rounds";
  // What the pool then holds: at most the remap threshold (1.5%) plus the
  // largest slack (32%) above the peak of live bytes, and the page rounding.
  EXPECT_LE(Held(), peak_live + peak_live * 335 / 1000 + 2 * kPage);
  for (auto &st : s) EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(st));
}

TEST_F(VmmFine, MemoryInfoSaysWhatIsFreeAndTheLargestBlock) {
  Make();
  void *a = Alloc(3 * kPage);
  void *b = Alloc(kPage);
  void *c = Alloc(kPage);
  Free(a, 3 * kPage);
  Free(c, kPage);
  gmr_memory_info m = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(r_, &m));
  EXPECT_EQ(5 * kPage, m.held_bytes);
  EXPECT_EQ(kPage, m.live_bytes);
  EXPECT_EQ(4 * kPage, m.free_bytes);
  EXPECT_EQ(3 * kPage, m.largest_free_block_bytes);
  EXPECT_EQ(2u, m.free_block_count);
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r_, &fp));
  EXPECT_EQ(5 * kPage, fp.held_bytes);
  EXPECT_EQ(5 * kPage, fp.peak_held_bytes);
  Free(b, kPage);
}

TEST_F(VmmFine, RegionsListAndDumpDescribeFinePlacement) {
  Make();
  void *a = Alloc(1000);
  void *b = Alloc(kPage);
  std::vector<gmr_vmm_pool_region> v = gmr_test::Regions(pool_);
  ASSERT_GE(v.size(), 3u);
  EXPECT_EQ(GMR_VMM_POOL_REGION_LIVE, v[0].kind);
  EXPECT_EQ(1024u, v[0].bytes);
  EXPECT_EQ(GMR_VMM_POOL_REGION_LIVE, v[1].kind);
  EXPECT_EQ(kPage, v[1].bytes);
  EXPECT_EQ(GMR_VMM_POOL_REGION_FREE, v[2].kind) << "the rest of the second page";
  EXPECT_EQ(kPage - 1024, v[2].bytes);
  EXPECT_EQ(GMR_VMM_POOL_REGION_HOLE, v.back().kind);
  char buf[4096];
  size_t needed = 0;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_dump(pool_, buf, sizeof buf, &needed));
  EXPECT_NE(nullptr, std::strstr(buf, "live")) << buf;
  EXPECT_NE(nullptr, std::strstr(buf, "hole")) << buf;
  EXPECT_LE(needed, sizeof buf);
  Free(a, 1000);
  Free(b, kPage);
}

TEST_F(VmmFine, ConfigOutsideItsRangeIsRefusedWithTheLimit) {
  gmr_vmm_pool_resource_config c = FineConfig();
  c.growth_percent = 1001;
  gmr_vmm_pool_resource *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_resource_create(&c, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "at most 1000")) << f.message;
  EXPECT_EQ(nullptr, p);
  c = FineConfig();
  c.remap_permille = 10001;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_resource_create(&c, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "at most 10000")) << f.message;
}

TEST_F(VmmFine, InitialPagesAreOneFreeRegion) {
  gmr_vmm_pool_resource_config c = FineConfig();
  c.initial_pages = 4;
  Make(c);
  EXPECT_EQ(4 * kPage, Held());
  const uint64_t calls = VmmCalls();
  void *a = Alloc(3 * kPage + 5 * kMiB / 10);
  EXPECT_EQ(calls, VmmCalls());
  Free(a, 3 * kPage + 5 * kMiB / 10);
}

}  // namespace
