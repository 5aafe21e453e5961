/*
 * tests/conformance/resource_conformance.h: the behaviour every gmr resource
 * (or stack) must have, as one value-parameterised GoogleTest suite over stack
 * factories (RMM's mr_ref_test_basic / allocation / mt).
 *
 * Each test runs on the host simulation (gmr_test::SimTest: it fails on any
 * leaked simulated object), builds the stack with the factory, and destroys it
 * top-down at the end (every destroy must return GMR_OK).
 *
 * Adding an instance is one line in a test file that includes this header:
 *
 *   GMR_CONFORMANCE_INSTANTIATE(MyStack, gmr_conformance::Stack{"my_stack", make_my_stack});
 *
 * where make_my_stack(std::vector<gmr_resource *> &owned) creates the stack
 * bottom-up, appends each resource it creates to `owned` (bottom first) and
 * returns the top (or nullptr after a failed ADD_FAILURE()). What a factory
 * creates that is not a resource the suite can destroy (a stack built from a
 * spec, a tier manager, a scope registry) it hands to AtTearDown(), which
 * destroys it in its place in the stack.
 *
 * Traits of the stack are fields of Stack. The defaults are the strict
 * contract (gmr/resource.h): alignments up to 256, destroy refuses with
 * GMR_ERR_BUSY while an allocation is live, every bad free is named
 * (GMR_ERR_UNKNOWN_POINTER / GMR_ERR_DOUBLE_FREE / GMR_ERR_FREE_MISMATCH),
 * thread-safe. A stack that cannot do one of these says why in the matching
 * `*_skip` field: the test that checks it is skipped with that reason.
 */
#ifndef GMR_TESTS_CONFORMANCE_RESOURCE_CONFORMANCE_H_
#define GMR_TESTS_CONFORMANCE_RESOURCE_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/sim/streams.h"
#include "tests/support/sim_fixture.h"

// Statuses print by name in failure messages (found by argument-dependent
// lookup: gmr_status lives in the global namespace).
inline void PrintTo(gmr_status st, std::ostream *os) { *os << gmr_status_name(st); }

namespace gmr_conformance {

struct Stack {
  std::string name;
  std::function<gmr_resource *(std::vector<gmr_resource *> &owned)> make;
  size_t max_alignment = 256;           // largest alignment the stack honours
  size_t large_bytes = size_t{3} << 20; // a size above any block size, still cheap
  // Each non-empty field is the reason the stack does not do what the
  // matching test checks; the test is skipped with it.
  std::string live_count_skip;   // destroy refuses (GMR_ERR_BUSY) while a block is live
  std::string bad_free_skip;     // wrong size / alignment and foreign pointers are named
  std::string double_free_skip;  // a second free of a block is GMR_ERR_DOUBLE_FREE
  std::string thread_skip;       // the header says "Thread-safe: yes"
};

// What a factory made that is not a resource in `owned` (a stack from a
// spec, a tier manager, a scope registry): its cleanup runs at tear-down in
// the order of the layers, just before the resources that were in `owned`
// when it was registered (its upstreams) are destroyed. Each returns the
// status of its destroy, which must be GMR_OK.
struct Cleanup {
  size_t above;  // owned.size() at registration
  std::function<gmr_status()> run;
};

inline std::vector<Cleanup> &Cleanups() {
  static std::vector<Cleanup> cleanups;
  return cleanups;
}

inline void AtTearDown(const std::vector<gmr_resource *> &owned, std::function<gmr_status()> run) {
  Cleanups().push_back(Cleanup{owned.size(), std::move(run)});
}

inline void PrintTo(const Stack &s, std::ostream *os) { *os << s.name; }

class Conformance : public gmr_test::SimTest, public ::testing::WithParamInterface<Stack> {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    if (HasFatalFailure()) return;
    top_ = GetParam().make(owned_);
    ASSERT_NE(nullptr, top_) << "the factory of " << GetParam().name << " failed";
  }

  // Top-down: owned resources and cleanups in the order they were stacked.
  void TearDown() override {
    auto &cleanups = Cleanups();
    while (!owned_.empty() || !cleanups.empty()) {
      if (!cleanups.empty() && cleanups.back().above >= owned_.size()) {
        EXPECT_EQ(GMR_OK, cleanups.back().run()) << "a cleanup of " << GetParam().name;
        cleanups.pop_back();
      } else {
        EXPECT_EQ(GMR_OK, gmr_resource_destroy(owned_.back()))
            << gmr_resource_get_type_name(owned_.back());
        owned_.pop_back();
      }
    }
    SimTest::TearDown();
  }

  // Destroy the top while a block is live: GMR_ERR_BUSY expected. When it
  // was destroyed all the same, it is forgotten (not destroyed twice, not
  // used again) and false is returned: the test must stop.
  bool ExpectBusy() {
    gmr_status st = gmr_resource_destroy(top_);
    EXPECT_EQ(GMR_ERR_BUSY, st) << "destroy with a live block";
    if (st != GMR_OK) return true;
    owned_.erase(std::remove(owned_.begin(), owned_.end(), top_), owned_.end());
    top_ = nullptr;
    return false;
  }

  gmr_resource *top_ = nullptr;
  std::vector<gmr_resource *> owned_;
};

// Live blocks, checked for overlap as they are added: a resource that hands
// out the same bytes twice fails here.
class LiveSet {
 public:
  void Add(void *p, size_t bytes) {
    uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
    auto next = blocks_.lower_bound(lo);
    if (next != blocks_.end()) {
      ASSERT_LE(hi, next->first) << "block " << p << " overlaps a live block";
    }
    if (next != blocks_.begin()) {
      auto prev = std::prev(next);
      ASSERT_LE(prev->first + prev->second, lo) << "block " << p << " overlaps a live block";
    }
    blocks_[lo] = bytes;
  }
  void Remove(void *p) { blocks_.erase(reinterpret_cast<uintptr_t>(p)); }

 private:
  std::map<uintptr_t, size_t> blocks_;
};

TEST_P(Conformance, ZeroBytesGivesNullAndFreeingNullIsANoOp) {
  void *p = reinterpret_cast<void *>(0x100);
  EXPECT_EQ(GMR_OK, gmr_resource_allocate(top_, 0, 0, nullptr, &p));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, nullptr, 0, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, nullptr, 64, 0, nullptr));
}

TEST_P(Conformance, ManySizesAreWritableAlignedAndDisjoint) {
  const Stack &s = GetParam();
  std::vector<size_t> sizes = {1, 7, 255, 256, 257, 1000, 4095, 4096, 65537, (size_t{1} << 20) - 1,
                               size_t{1} << 20, (size_t{1} << 20) + 1, s.large_bytes};
  std::vector<std::pair<void *, size_t>> live;
  LiveSet set;
  unsigned char pattern = 1;
  for (int round = 0; round < 3; ++round) {
    for (size_t bytes : sizes) {
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, bytes, 0, nullptr, &p)) << bytes;
      ASSERT_NE(nullptr, p);
      EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % 256) << bytes;
      ASSERT_NO_FATAL_FAILURE(set.Add(p, bytes));
      std::memset(p, pattern++, bytes);  // simulated memory is host memory
      live.emplace_back(p, bytes);
    }
  }
  // Every block still holds its own pattern: nothing was handed out twice.
  pattern = 1;
  for (auto &b : live) {
    const unsigned char *c = static_cast<const unsigned char *>(b.first);
    EXPECT_EQ(pattern, c[0]);
    EXPECT_EQ(pattern, c[b.second - 1]);
    pattern++;
  }
  for (auto &b : live)
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, b.first, b.second, 0, nullptr));
}

TEST_P(Conformance, HonoursEveryAlignmentItSupportsAndRefusesLarger) {
  const Stack &s = GetParam();
  for (size_t align = 1; align <= s.max_alignment; align *= 2) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 3000, align, nullptr, &p)) << align;
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % align) << align;
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 3000, align, nullptr)) << align;
  }
  if (s.max_alignment < (size_t{1} << 30)) {
    void *p = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    gmr_status st = gmr_resource_allocate_ex(top_, 3000, s.max_alignment * 2, nullptr, &p, &f);
    EXPECT_EQ(GMR_ERR_UNSUPPORTED, st) << "alignment " << s.max_alignment * 2;
    if (st == GMR_OK) {
      // It honours more than the stack says: give the block back, so that
      // tear-down still finds nothing live.
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 3000, s.max_alignment * 2, nullptr));
    } else {
      EXPECT_EQ(nullptr, p);
      EXPECT_STRNE("", f.message);
    }
  }
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_allocate(top_, 64, 3, nullptr, &p));
}

TEST_P(Conformance, RandomAllocationsNeverOverlap) {
  // RMM's random_allocations: allocate with probability 0.73, else free a
  // random live block; sizes uniform in [1, 4 MiB].
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<size_t> size_dist(1, size_t{4} << 20);
  std::vector<std::pair<void *, size_t>> live;
  LiveSet set;
  for (int i = 0; i < 3000; ++i) {
    if (live.empty() || std::bernoulli_distribution(0.73)(rng)) {
      size_t bytes = size_dist(rng);
      void *p = nullptr;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, bytes, 0, nullptr, &p)) << i;
      ASSERT_NO_FATAL_FAILURE(set.Add(p, bytes));
      live.emplace_back(p, bytes);
    } else {
      size_t k = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, live[k].first, live[k].second, 0, nullptr));
      set.Remove(live[k].first);
      live[k] = live.back();
      live.pop_back();
    }
    if (live.size() > 200) {  // keep the simulated device's use bounded
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, live[0].first, live[0].second, 0, nullptr));
      set.Remove(live[0].first);
      live[0] = live.back();
      live.pop_back();
    }
  }
  for (auto &b : live)
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, b.first, b.second, 0, nullptr));
}

TEST_P(Conformance, AllocateOnOneStreamFreeOnAnother) {
  gmr_stream a = nullptr, b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a));
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b));
  for (int i = 0; i < 50; ++i) {
    void *p = nullptr, *q = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 4096 * (1 + i % 5), 0, a, &p));
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 100000, 0, b, &q));
    EXPECT_NE(p, q);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 4096 * (1 + i % 5), 0, b));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, q, 100000, 0, a));
  }
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_synchronize(a));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_synchronize(b));
  // The stack may hold memory freed on the streams: give it back before the
  // streams go away.
  EXPECT_EQ(GMR_OK, gmr_resource_trim(top_, nullptr));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b));
}

TEST_P(Conformance, FootprintIsConsistent) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 5000, 0, nullptr, &p));
  gmr_footprint fp;
  gmr_status st = gmr_resource_get_footprint(top_, &fp);
  if (st == GMR_OK) {
    EXPECT_GE(fp.held_bytes, 5000u);
    EXPECT_GE(fp.peak_held_bytes, fp.held_bytes);
  } else {
    EXPECT_EQ(GMR_ERR_UNSUPPORTED, st);
  }
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 5000, 0, nullptr));
  size_t released = 12345;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(top_, &released));
  EXPECT_NE(12345u, released);
}

TEST_P(Conformance, DestroyWithALiveAllocationIsBusy) {
  const Stack &s = GetParam();
  if (!s.live_count_skip.empty()) GTEST_SKIP() << s.name << ": " << s.live_count_skip;
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 777, 0, nullptr, &p));
  if (!ExpectBusy()) return;
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 777, 0, nullptr));
}

// What a stack tells about its memory, to check that a refused call changed
// nothing. Fields a stack does not report stay 0 on both sides.
struct Books {
  gmr_memory_info info = GMR_MEMORY_INFO_INIT;
  gmr_footprint footprint = {0, 0};

  static Books Of(const gmr_resource *r) {
    Books b;
    if (gmr_resource_get_memory_info(r, &b.info) != GMR_OK) {
      gmr_memory_info empty = GMR_MEMORY_INFO_INIT;
      b.info = empty;
    }
    if (gmr_resource_get_footprint(r, &b.footprint) != GMR_OK) b.footprint = {0, 0};
    return b;
  }
};

inline void ExpectSameBooks(const Books &before, const Books &after) {
  EXPECT_EQ(before.info.held_bytes, after.info.held_bytes);
  EXPECT_EQ(before.info.live_bytes, after.info.live_bytes);
  EXPECT_EQ(before.info.free_bytes, after.info.free_bytes);
  EXPECT_EQ(before.info.free_block_count, after.info.free_block_count);
  EXPECT_EQ(before.footprint.held_bytes, after.footprint.held_bytes);
}

// gmr/resource.h's vocabulary for bad frees: each is refused with the status
// that names it, and the block is still allocated and intact afterwards.
TEST_P(Conformance, BadFreesAreNamedAndChangeNothing) {
  const Stack &s = GetParam();
  if (!s.bad_free_skip.empty()) GTEST_SKIP() << s.name << ": " << s.bad_free_skip;
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 1000, 0, nullptr, &p));
  unsigned char *bytes = static_cast<unsigned char *>(p);
  std::memset(p, 0x3c, 1000);
  Books before = Books::Of(top_);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(top_, p, 999, 0, nullptr))
      << "smaller size";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(top_, p, 4000, 0, nullptr))
      << "larger size";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(top_, p, 1000, 512, nullptr))
      << "alignment";
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(top_, &local, 1000, 0, nullptr))
      << "a pointer it never gave";
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(top_, bytes + 256, 512, 0, nullptr))
      << "a pointer inside a live block";
  // Malformed arguments keep their own status.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_deallocate(top_, p, 1000, 3, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_deallocate(top_, p, 0, 0, nullptr));
  EXPECT_EQ(0x3c, bytes[0]);
  EXPECT_EQ(0x3c, bytes[999]);
  ExpectSameBooks(before, Books::Of(top_));
  if (s.live_count_skip.empty() && !ExpectBusy()) return;
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 1000, 0, nullptr));
}

TEST_P(Conformance, DoubleFreeIsNamedAndChangesNothing) {
  const Stack &s = GetParam();
  if (!s.bad_free_skip.empty()) GTEST_SKIP() << s.name << ": " << s.bad_free_skip;
  if (!s.double_free_skip.empty()) GTEST_SKIP() << s.name << ": " << s.double_free_skip;
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 1000, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 3000, 0, nullptr, &q));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 1000, 0, nullptr));
  Books before = Books::Of(top_);
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(top_, p, 1000, 0, nullptr));
  ExpectSameBooks(before, Books::Of(top_));
  // The other block is untouched: it frees once, and only once.
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, q, 3000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(top_, q, 3000, 0, nullptr));
  // TearDown's destroy (GMR_OK expected) shows that nothing stayed live.
}

TEST_P(Conformance, ThreadsGetDisjointBlocks) {
  const Stack &s = GetParam();
  if (!s.thread_skip.empty()) GTEST_SKIP() << s.name << ": " << s.thread_skip;
  // Each thread writes its id into every byte of its blocks and checks them
  // before freeing: two threads given the same bytes would see each other's id.
  constexpr int kThreads = 8;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::pair<unsigned char *, size_t>> mine;
      for (int i = 0; i < 400; ++i) {
        if (mine.size() < 16 && (mine.empty() || rng() % 4 != 0)) {
          size_t bytes = 1 + rng() % 300000;
          void *p = nullptr;
          if (gmr_resource_allocate(top_, bytes, 0, nullptr, &p) != GMR_OK) {
            failures++;
            continue;
          }
          std::memset(p, t + 1, bytes);
          mine.emplace_back(static_cast<unsigned char *>(p), bytes);
        } else {
          size_t k = rng() % mine.size();
          auto b = mine[k];
          for (size_t j = 0; j < b.second; j += 997) {
            if (b.first[j] != t + 1) failures++;
          }
          if (b.first[b.second - 1] != t + 1) failures++;
          if (gmr_resource_deallocate(top_, b.first, b.second, 0, nullptr) != GMR_OK) failures++;
          mine[k] = mine.back();
          mine.pop_back();
        }
      }
      for (auto &b : mine) {
        if (gmr_resource_deallocate(top_, b.first, b.second, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
}

TEST_P(Conformance, MemoryFreedByAnotherThreadIsAccepted) {
  const Stack &s = GetParam();
  if (!s.thread_skip.empty()) GTEST_SKIP() << s.name << ": " << s.thread_skip;
  std::vector<std::pair<void *, size_t>> blocks(64);
  std::thread producer([&] {
    for (size_t i = 0; i < blocks.size(); ++i) {
      blocks[i].second = 1000 + i * 512;
      EXPECT_EQ(GMR_OK,
                gmr_resource_allocate(top_, blocks[i].second, 0, nullptr, &blocks[i].first));
    }
  });
  producer.join();
  std::thread consumer([&] {
    for (auto &b : blocks)
      EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, b.first, b.second, 0, nullptr));
  });
  consumer.join();
}

}  // namespace gmr_conformance

// One line per stack: GMR_CONFORMANCE_INSTANTIATE(Prefix, Stack{...}, Stack{...}).
// (gtest wants the suite's unqualified name, hence the using-declaration.)
#define GMR_CONFORMANCE_INSTANTIATE(prefix, ...)                                            \
  using ::gmr_conformance::Conformance;                                                     \
  INSTANTIATE_TEST_SUITE_P(prefix, Conformance,                                             \
                           ::testing::Values(__VA_ARGS__),                                  \
                           [](const ::testing::TestParamInfo<::gmr_conformance::Stack> &i) { \
                             return i.param.name;                                           \
                           })

#endif  // GMR_TESTS_CONFORMANCE_RESOURCE_CONFORMANCE_H_
