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
 * returns the top (or nullptr after a failed ADD_FAILURE()). Traits of the
 * stack (largest alignment, whether it counts live allocations, whether it
 * checks the size given at free) are fields of Stack with safe defaults.
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
#include "tests/support/sim_fixture.h"

namespace gmr_conformance {

struct Stack {
  std::string name;
  std::function<gmr_resource *(std::vector<gmr_resource *> &owned)> make;
  size_t max_alignment = 256;        // largest alignment the stack honours
  bool counts_live = true;           // destroy returns GMR_ERR_BUSY with a live allocation
  bool checks_free_size = false;     // bad frees are refused with the status that names them
  bool names_bad_frees = false;      // bad frees get gmr/resource.h's vocabulary (books kept)
  bool thread_safe = true;           // the header says "Thread-safe: yes"
  size_t large_bytes = size_t{3} << 20; // a size above any block size, still cheap
};

inline void PrintTo(const Stack &s, std::ostream *os) { *os << s.name; }

class Conformance : public gmr_test::SimTest, public ::testing::WithParamInterface<Stack> {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    if (HasFatalFailure()) return;
    top_ = GetParam().make(owned_);
    ASSERT_NE(nullptr, top_) << "the factory of " << GetParam().name << " failed";
  }

  void TearDown() override {
    for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(*it)) << gmr_resource_type_name(*it);
    }
    owned_.clear();
    SimTest::TearDown();
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
  EXPECT_EQ(GMR_OK, gmr_allocate(top_, 0, 0, nullptr, &p));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(GMR_OK, gmr_deallocate(top_, nullptr, 0, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_deallocate(top_, nullptr, 64, 0, nullptr));
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
      ASSERT_EQ(GMR_OK, gmr_allocate(top_, bytes, 0, nullptr, &p)) << bytes;
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
  for (auto &b : live) EXPECT_EQ(GMR_OK, gmr_deallocate(top_, b.first, b.second, 0, nullptr));
}

TEST_P(Conformance, HonoursEveryAlignmentItSupportsAndRefusesLarger) {
  const Stack &s = GetParam();
  for (size_t align = 1; align <= s.max_alignment; align *= 2) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_allocate(top_, 3000, align, nullptr, &p)) << align;
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % align) << align;
    EXPECT_EQ(GMR_OK, gmr_deallocate(top_, p, 3000, align, nullptr)) << align;
  }
  if (s.max_alignment < (size_t{1} << 30)) {
    void *p = nullptr;
    gmr_failure f;
    EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_allocate_ex(top_, 3000, s.max_alignment * 2, nullptr, &p, &f));
    EXPECT_EQ(nullptr, p);
    EXPECT_STRNE("", f.message);
  }
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_allocate(top_, 64, 3, nullptr, &p));
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
      ASSERT_EQ(GMR_OK, gmr_allocate(top_, bytes, 0, nullptr, &p)) << i;
      ASSERT_NO_FATAL_FAILURE(set.Add(p, bytes));
      live.emplace_back(p, bytes);
    } else {
      size_t k = std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng);
      ASSERT_EQ(GMR_OK, gmr_deallocate(top_, live[k].first, live[k].second, 0, nullptr));
      set.Remove(live[k].first);
      live[k] = live.back();
      live.pop_back();
    }
    if (live.size() > 200) {  // keep the simulated device's use bounded
      ASSERT_EQ(GMR_OK, gmr_deallocate(top_, live[0].first, live[0].second, 0, nullptr));
      set.Remove(live[0].first);
      live[0] = live.back();
      live.pop_back();
    }
  }
  for (auto &b : live) EXPECT_EQ(GMR_OK, gmr_deallocate(top_, b.first, b.second, 0, nullptr));
}

TEST_P(Conformance, AllocateOnOneStreamFreeOnAnother) {
  gmr_stream a = nullptr, b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stream_create(&a));
  ASSERT_EQ(GMR_OK, gmr_stream_create(&b));
  for (int i = 0; i < 50; ++i) {
    void *p = nullptr, *q = nullptr;
    ASSERT_EQ(GMR_OK, gmr_allocate(top_, 4096 * (1 + i % 5), 0, a, &p));
    ASSERT_EQ(GMR_OK, gmr_allocate(top_, 100000, 0, b, &q));
    EXPECT_NE(p, q);
    EXPECT_EQ(GMR_OK, gmr_deallocate(top_, p, 4096 * (1 + i % 5), 0, b));
    EXPECT_EQ(GMR_OK, gmr_deallocate(top_, q, 100000, 0, a));
  }
  EXPECT_EQ(GMR_OK, gmr_stream_synchronize(a));
  EXPECT_EQ(GMR_OK, gmr_stream_synchronize(b));
  // The stack may hold memory freed on the streams: give it back before the
  // streams go away.
  EXPECT_EQ(GMR_OK, gmr_resource_trim(top_, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stream_destroy(a));
  EXPECT_EQ(GMR_OK, gmr_stream_destroy(b));
}

TEST_P(Conformance, FootprintIsConsistent) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(top_, 5000, 0, nullptr, &p));
  gmr_footprint fp;
  gmr_status st = gmr_resource_get_footprint(top_, &fp);
  if (st == GMR_OK) {
    EXPECT_GE(fp.held_bytes, 5000u);
    EXPECT_GE(fp.peak_held_bytes, fp.held_bytes);
  } else {
    EXPECT_EQ(GMR_ERR_UNSUPPORTED, st);
  }
  EXPECT_EQ(GMR_OK, gmr_deallocate(top_, p, 5000, 0, nullptr));
  size_t released = 12345;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(top_, &released));
  EXPECT_NE(12345u, released);
}

TEST_P(Conformance, DestroyWithALiveAllocationIsBusy) {
  if (!GetParam().counts_live) GTEST_SKIP() << GetParam().name << " does not count live allocations";
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(top_, 777, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(top_));
  EXPECT_EQ(GMR_OK, gmr_deallocate(top_, p, 777, 0, nullptr));
}

TEST_P(Conformance, FreeWithTheWrongSizeChangesNothing) {
  if (!GetParam().checks_free_size) GTEST_SKIP() << GetParam().name << " trusts the size at free";
  // One vocabulary for bad frees (gmr/resource.h).
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(top_, 1000, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_deallocate(top_, p, 999, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_deallocate(top_, p, 1000, 512, nullptr));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_deallocate(top_, &local, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_deallocate(top_, p, 1000, 0, nullptr));
  gmr_status twice = gmr_deallocate(top_, p, 1000, 0, nullptr);
  EXPECT_TRUE(twice == GMR_ERR_DOUBLE_FREE || twice == GMR_ERR_UNKNOWN_POINTER)
      << gmr_status_name(twice);
}

// gmr/resource.h's vocabulary for bad frees, for stacks that keep books: each
// is refused, and the block is still allocated and intact afterwards.
TEST_P(Conformance, BadFreesAreNamedAndChangeNothing) {
  if (!GetParam().names_bad_frees) GTEST_SKIP() << GetParam().name << " keeps no books of its frees";
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_allocate(top_, 1000, 0, nullptr, &p));
  std::memset(p, 0x3c, 1000);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_deallocate(top_, p, 999, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_deallocate(top_, p, 1000, 128, nullptr));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_deallocate(top_, &local, 1000, 0, nullptr));
  EXPECT_EQ(0x3c, static_cast<unsigned char *>(p)[999]);
  if (GetParam().counts_live) {
    EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(top_));  // still live
  }
  EXPECT_EQ(GMR_OK, gmr_deallocate(top_, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_deallocate(top_, p, 1000, 0, nullptr));
}

TEST_P(Conformance, ThreadsGetDisjointBlocks) {
  if (!GetParam().thread_safe) GTEST_SKIP() << GetParam().name << " is not thread-safe";
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
          if (gmr_allocate(top_, bytes, 0, nullptr, &p) != GMR_OK) {
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
          if (gmr_deallocate(top_, b.first, b.second, 0, nullptr) != GMR_OK) failures++;
          mine[k] = mine.back();
          mine.pop_back();
        }
      }
      for (auto &b : mine) {
        if (gmr_deallocate(top_, b.first, b.second, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
}

TEST_P(Conformance, MemoryFreedByAnotherThreadIsAccepted) {
  if (!GetParam().thread_safe) GTEST_SKIP() << GetParam().name << " is not thread-safe";
  std::vector<std::pair<void *, size_t>> blocks(64);
  std::thread producer([&] {
    for (size_t i = 0; i < blocks.size(); ++i) {
      blocks[i].second = 1000 + i * 512;
      EXPECT_EQ(GMR_OK, gmr_allocate(top_, blocks[i].second, 0, nullptr, &blocks[i].first));
    }
  });
  producer.join();
  std::thread consumer([&] {
    for (auto &b : blocks) EXPECT_EQ(GMR_OK, gmr_deallocate(top_, b.first, b.second, 0, nullptr));
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
