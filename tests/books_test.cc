// core/books: the verdicts on frees, room for restores whatever happens in
// between, the visitor, collection, threads (run under --config=tsan), and
// the shards' bias to the one thread that uses them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "util/books.h"
#include "tests/books_probe.h"

namespace {

void *P(uintptr_t v) { return reinterpret_cast<void *>(v); }
gmr_stream S(uintptr_t v) { return reinterpret_cast<gmr_stream>(v); }

gmr__book_entry Entry(size_t bytes, size_t alignment = 256, gmr_stream stream = nullptr) {
  gmr__book_entry e = {bytes, alignment, stream, 0, nullptr, 0};
  return e;
}

class Books : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(gmr__books_init(&b_, 4, 8)); }
  void TearDown() override { gmr__books_deinit(&b_); }
  gmr__books b_;
};

TEST_F(Books, VerdictsUseTheVocabulary) {
  gmr__book_entry e = Entry(1000, 256, S(7));
  ASSERT_TRUE(gmr__books_insert(&b_, P(0x10000), &e));
  gmr__book_entry out = Entry(0);
  gmr_stream s7 = S(7), s8 = S(8);
  EXPECT_EQ(GMR__BOOK_SIZE_MISMATCH, gmr__books_take(&b_, P(0x10000), 999, 256, nullptr, &out));
  EXPECT_EQ(1000u, out.bytes);  // the live entry, to say what was expected
  EXPECT_EQ(GMR__BOOK_SIZE_MISMATCH, gmr__books_take(&b_, P(0x10000), 1000, 512, nullptr, &out));
  EXPECT_EQ(GMR__BOOK_STREAM_MISMATCH, gmr__books_take(&b_, P(0x10000), 1000, 256, &s8, &out));
  EXPECT_EQ(GMR__BOOK_UNKNOWN_POINTER, gmr__books_take(&b_, P(0x10100), 1000, 256, nullptr, &out));
  EXPECT_EQ(1u, gmr__books_count(&b_));
  ASSERT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(0x10000), 1000, 256, &s7, &out));
  EXPECT_EQ(0u, gmr__books_count(&b_));
  EXPECT_EQ(GMR__BOOK_DOUBLE_FREE, gmr__books_take(&b_, P(0x10000), 1000, 256, nullptr, &out));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr__book_verdict_status(GMR__BOOK_DOUBLE_FREE));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr__book_verdict_status(GMR__BOOK_UNKNOWN_POINTER));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr__book_verdict_status(GMR__BOOK_SIZE_MISMATCH));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr__book_verdict_status(GMR__BOOK_STREAM_MISMATCH));
  EXPECT_EQ(GMR_OK, gmr__book_verdict_status(GMR__BOOK_OK));
}

TEST_F(Books, AReusedAddressIsLiveAgainAndItsSecondFreeADoubleFree) {
  gmr__book_entry e = Entry(64), out = Entry(0);
  ASSERT_TRUE(gmr__books_insert(&b_, P(0x20000), &e));
  ASSERT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(0x20000), 64, 256, nullptr, &out));
  ASSERT_TRUE(gmr__books_insert(&b_, P(0x20000), &e));  // the address comes back
  ASSERT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(0x20000), 64, 256, nullptr, &out));
  EXPECT_EQ(GMR__BOOK_DOUBLE_FREE, gmr__books_take(&b_, P(0x20000), 64, 256, nullptr, &out));
}

TEST_F(Books, OldFreesAgeOutToUnknownPointer) {
  gmr__book_entry e = Entry(64), out = Entry(0);
  // Same 64 MiB region: one shard, whose ring remembers 8 frees.
  for (uintptr_t i = 1; i <= 20; ++i) {
    ASSERT_TRUE(gmr__books_insert(&b_, P(0x40000000 + i * 256), &e));
    ASSERT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(0x40000000 + i * 256), 64, 256, nullptr, &out));
  }
  EXPECT_EQ(GMR__BOOK_UNKNOWN_POINTER,
            gmr__books_take(&b_, P(0x40000000 + 1 * 256), 64, 256, nullptr, &out));
  EXPECT_EQ(GMR__BOOK_DOUBLE_FREE,
            gmr__books_take(&b_, P(0x40000000 + 20 * 256), 64, 256, nullptr, &out));
}

TEST(BooksNoRing, WithoutARingEveryDeadPointerIsUnknown) {
  gmr__books b;
  ASSERT_TRUE(gmr__books_init(&b, 1, 0));
  gmr__book_entry e = Entry(64), out = Entry(0);
  ASSERT_TRUE(gmr__books_insert(&b, P(0x1000), &e));
  ASSERT_EQ(GMR__BOOK_OK, gmr__books_take(&b, P(0x1000), 64, 256, nullptr, &out));
  EXPECT_EQ(GMR__BOOK_UNKNOWN_POINTER, gmr__books_take(&b, P(0x1000), 64, 256, nullptr, &out));
  gmr__books_deinit(&b);
}

TEST_F(Books, RestoreFindsRoomAfterTheTableWasFilledInBetween) {
  // Every entry in one region (one shard). Take many, insert many more (the
  // table grows meanwhile), then restore every take: all are live again.
  std::vector<gmr__book_entry> taken;
  gmr__book_entry out = Entry(0);
  for (uintptr_t i = 1; i <= 100; ++i) {
    gmr__book_entry e = Entry(i * 8);
    ASSERT_TRUE(gmr__books_insert(&b_, P(0x80000000 + i * 256), &e));
  }
  for (uintptr_t i = 1; i <= 100; ++i) {
    ASSERT_EQ(GMR__BOOK_OK,
              gmr__books_take(&b_, P(0x80000000 + i * 256), i * 8, 256, nullptr, &out));
    taken.push_back(out);
  }
  for (uintptr_t i = 101; i <= 400; ++i) {
    gmr__book_entry e = Entry(i * 8);
    ASSERT_TRUE(gmr__books_insert(&b_, P(0x80000000 + i * 256), &e));
  }
  for (uintptr_t i = 1; i <= 100; ++i) {
    EXPECT_TRUE(gmr__books_restore(&b_, P(0x80000000 + i * 256), &taken[i - 1]));
  }
  EXPECT_EQ(400u, gmr__books_count(&b_));
  for (uintptr_t i = 1; i <= 400; ++i) {
    ASSERT_EQ(GMR__BOOK_OK,
              gmr__books_take(&b_, P(0x80000000 + i * 256), i * 8, 256, nullptr, &out))
        << i;
  }
  EXPECT_EQ(0u, gmr__books_count(&b_));
}

TEST_F(Books, RestoresBeyondHalfTheTableGrowIt) {
  // One shard's table of 128 half full; every entry taken, as many others
  // inserted, then every take restored: past half the table it grows.
  gmr__book_entry out = Entry(0);
  std::vector<gmr__book_entry> taken;
  for (uintptr_t i = 1; i <= 64; ++i) {
    gmr__book_entry e = Entry(i);
    ASSERT_TRUE(gmr__books_insert(&b_, P(0xC0000000 + i * 256), &e));
  }
  for (uintptr_t i = 1; i <= 64; ++i) {
    ASSERT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(0xC0000000 + i * 256), i, 256, nullptr, &out));
    taken.push_back(out);
  }
  for (uintptr_t i = 65; i <= 128; ++i) {
    gmr__book_entry e = Entry(i);
    ASSERT_TRUE(gmr__books_insert(&b_, P(0xC0000000 + i * 256), &e));
  }
  for (uintptr_t i = 1; i <= 64; ++i) {
    ASSERT_TRUE(gmr__books_restore(&b_, P(0xC0000000 + i * 256), &taken[i - 1]));
  }
  EXPECT_EQ(128u, gmr__books_count(&b_));
  for (uintptr_t i = 1; i <= 128; ++i) {
    ASSERT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(0xC0000000 + i * 256), i, 256, nullptr, &out));
  }
}

gmr_status Tag(gmr__book_entry *e, void *ctx) {
  e->extra = ctx;
  return GMR_ERR_BUSY;  // whatever the visitor says is returned
}

TEST_F(Books, VisitorSeesTheLiveEntryOnly) {
  gmr__book_entry e = Entry(64), out = Entry(0);
  ASSERT_TRUE(gmr__books_insert(&b_, P(0x3000), &e));
  int marker = 0;
  EXPECT_EQ(GMR_ERR_BUSY, gmr__books_visit(&b_, P(0x3000), Tag, &marker));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr__books_visit(&b_, P(0x3100), Tag, &marker));
  ASSERT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(0x3000), 64, 256, nullptr, &out));
  EXPECT_EQ(&marker, out.extra);
}

TEST_F(Books, CollectCopiesEveryLiveAllocation) {
  gmr__book_item *items = nullptr;
  size_t n = 99;
  ASSERT_EQ(GMR_OK, gmr__books_collect(&b_, &items, &n));
  EXPECT_EQ(0u, n);
  EXPECT_EQ(nullptr, items);
  std::set<uintptr_t> want;
  for (uintptr_t i = 1; i <= 50; ++i) {
    uintptr_t p = i << 22;  // many regions: many shards
    gmr__book_entry e = Entry(i);
    ASSERT_TRUE(gmr__books_insert(&b_, P(p), &e));
    want.insert(p);
  }
  ASSERT_EQ(GMR_OK, gmr__books_collect(&b_, &items, &n));
  ASSERT_EQ(50u, n);
  std::set<uintptr_t> got;
  for (size_t i = 0; i < n; ++i) {
    got.insert(items[i].ptr);
    EXPECT_EQ(items[i].ptr >> 22, items[i].entry.bytes);
  }
  free(items);
  EXPECT_EQ(want, got);
  for (uintptr_t p : want) {
    gmr__book_entry out = Entry(0);
    ASSERT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(p), p >> 22, 256, nullptr, &out));
  }
}

TEST_F(Books, ThreadsInsertTakeCommitAndRestoreConcurrently) {
  constexpr int kThreads = 8;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Even threads share one 64 MiB region (so a shard); odd ones have
      // their own. No two threads use the same address.
      uintptr_t base = t % 2 == 0 ? (uintptr_t{1} << 32) + static_cast<uintptr_t>(t / 2) * 4000 * 256
                                  : (uintptr_t{2} + static_cast<uintptr_t>(t)) << 32;
      std::vector<uintptr_t> live;
      for (int i = 0; i < 3000; ++i) {
        uintptr_t p = base + static_cast<uintptr_t>(i % 4000) * 256;
        if (live.size() < 64 && (i % 3 != 2)) {
          gmr__book_entry e = Entry(static_cast<size_t>(t + 1));
          bool already = false;
          for (uintptr_t q : live) already = already || q == p;
          if (already) continue;
          if (!gmr__books_insert(&b_, P(p), &e)) failures++;
          live.push_back(p);
        } else if (!live.empty()) {
          uintptr_t q = live.back();
          live.pop_back();
          gmr__book_entry out = Entry(0);
          if (gmr__books_take(&b_, P(q), static_cast<size_t>(t + 2), 256, nullptr, &out) !=
              GMR__BOOK_SIZE_MISMATCH) {
            failures++;
          }
          if (gmr__books_take(&b_, P(q), static_cast<size_t>(t + 1), 256, nullptr, &out) !=
              GMR__BOOK_OK) {
            failures++;
            continue;
          }
          if (i % 7 == 0) {  // a release below that failed: live again
            if (!gmr__books_restore(&b_, P(q), &out)) failures++;
            live.push_back(q);
          } else {
          }
        }
      }
      for (uintptr_t q : live) {
        gmr__book_entry out = Entry(0);
        if (gmr__books_take(&b_, P(q), static_cast<size_t>(t + 1), 256, nullptr, &out) !=
            GMR__BOOK_OK) {
          failures++;
        }
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0u, gmr__books_count(&b_));
}

// A shard used by one thread only is biased to it (no locked instruction);
// the first other thread ends the bias for good, and every verdict stays
// what the lock would give.
TEST_F(Books, AShardIsBiasedToItsOneThreadUntilAnotherComes) {
  if (!books_probe_asymmetric()) GTEST_SKIP() << "no membarrier here: shards are never biased";
  const uintptr_t p = uintptr_t{5} << 32, q = p + 256;
  EXPECT_EQ(BOOKS_PROBE_NONE_YET, books_probe_bias_of(&b_, P(p)));
  gmr__book_entry e = Entry(64);
  ASSERT_TRUE(gmr__books_insert(&b_, P(p), &e));
  ASSERT_TRUE(gmr__books_insert(&b_, P(q), &e));
  EXPECT_EQ(BOOKS_PROBE_MINE, books_probe_bias_of(&b_, P(p)));
  gmr__book_entry out = Entry(0);
  ASSERT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(q), 64, 256, nullptr, &out));
  EXPECT_EQ(BOOKS_PROBE_MINE, books_probe_bias_of(&b_, P(p)));
  std::thread other([&] {
    EXPECT_EQ(BOOKS_PROBE_OTHER, books_probe_bias_of(&b_, P(p)));
    gmr__book_entry o = Entry(0);
    EXPECT_EQ(GMR__BOOK_SIZE_MISMATCH, gmr__books_take(&b_, P(p), 65, 256, nullptr, &o));
    EXPECT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(p), 64, 256, nullptr, &o));
    EXPECT_EQ(GMR__BOOK_DOUBLE_FREE, gmr__books_take(&b_, P(q), 64, 256, nullptr, &o));
    EXPECT_EQ(BOOKS_PROBE_LOCKED, books_probe_bias_of(&b_, P(p)));
  });
  other.join();
  EXPECT_EQ(BOOKS_PROBE_LOCKED, books_probe_bias_of(&b_, P(p)));
  EXPECT_EQ(GMR__BOOK_DOUBLE_FREE, gmr__books_take(&b_, P(p), 64, 256, nullptr, &out));
  ASSERT_TRUE(gmr__books_insert(&b_, P(p), &e));
  EXPECT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(p), 64, 256, nullptr, &out));
  EXPECT_EQ(0u, gmr__books_count(&b_));
}

// Collection from another thread ends the bias of the shards it reads and
// finds every live entry the owner made.
TEST_F(Books, CollectFromAnotherThreadSeesTheOwnersEntries) {
  const uintptr_t base = uintptr_t{6} << 32;
  gmr__book_entry e = Entry(128);
  for (uintptr_t i = 0; i < 10; ++i) ASSERT_TRUE(gmr__books_insert(&b_, P(base + i * 256), &e));
  size_t n = 0;
  std::thread reader([&] {
    gmr__book_item *items = nullptr;
    ASSERT_EQ(GMR_OK, gmr__books_collect(&b_, &items, &n));
    free(items);
  });
  reader.join();
  EXPECT_EQ(10u, n);
  if (books_probe_asymmetric()) {
    EXPECT_EQ(BOOKS_PROBE_LOCKED, books_probe_bias_of(&b_, P(base)));
  }
  gmr__book_entry out = Entry(0);
  for (uintptr_t i = 0; i < 10; ++i) {
    EXPECT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(base + i * 256), 128, 256, nullptr, &out));
  }
}

// The owner works its shard without the lock while another thread comes
// and goes in the same shard: the handshake that ends the bias loses and
// doubles nothing (a race here is what --config=tsan looks for).
TEST_F(Books, AnOwnerAtWorkWhileAnotherThreadEndsItsBias) {
  const uintptr_t base = uintptr_t{7} << 32;
  std::atomic<bool> started{false};
  std::atomic<int> failures{0};
  std::thread owner_loop([&] {
    // The shard's first and only user until the test thread comes.
    gmr__book_entry keep = Entry(512);
    if (!gmr__books_insert(&b_, P(base), &keep)) failures++;
    for (int i = 0; i < 20000; ++i) {
      uintptr_t p = base + 256 * static_cast<uintptr_t>(1 + i % 100);
      gmr__book_entry e = Entry(256);
      if (!gmr__books_insert(&b_, P(p), &e)) failures++;
      if (i == 100) started = true;
      gmr__book_entry out = Entry(0);
      if (gmr__books_take(&b_, P(p), 256, 256, nullptr, &out) != GMR__BOOK_OK) failures++;
    }
  });
  while (!started.load()) std::this_thread::yield();
  for (int i = 0; i < 2000; ++i) {
    gmr__book_entry out = Entry(0);
    if (gmr__books_take(&b_, P(base), 512, 256, nullptr, &out) != GMR__BOOK_OK) failures++;
    if (!gmr__books_restore(&b_, P(base), &out)) failures++;
  }
  owner_loop.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(1u, gmr__books_count(&b_));
  gmr__book_entry out = Entry(0);
  EXPECT_EQ(GMR__BOOK_OK, gmr__books_take(&b_, P(base), 512, 256, nullptr, &out));
}

}  // namespace
