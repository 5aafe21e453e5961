// gmr_chunk_listener_adaptor on the simulation: listeners hear every chunk
// of a pool above it in acquired/releasing pairs (also when they are added
// and removed while chunks live), refusals in both directions change
// nothing, bad frees, destroy, the stack search, threads, and the spec.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gmr/nccl/chunk_listener_adaptor.h"
#include "gmr/cuda_resource.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/pool_resource.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Records what it hears; refuses on request.
struct Recorder {
  std::mutex mu;
  std::map<uintptr_t, size_t> live;  // what it was told is live
  std::vector<std::string> log;
  int acquired = 0;
  int released = 0;
  int refuse_acquire = 0;  // refuse the next N
  int refuse_release = 0;
  bool broken = false;  // heard a chunk twice, or a release of an unknown one

  static gmr_status OnAcquired(void *ctx, void *addr, size_t bytes, gmr_failure *f) {
    auto *r = static_cast<Recorder *>(ctx);
    std::lock_guard<std::mutex> g(r->mu);
    if (r->refuse_acquire > 0) {
      r->refuse_acquire--;
      std::snprintf(f->message, sizeof f->message, "recorder refuses %zu bytes", bytes);
      return GMR_ERR_UNSUPPORTED;  // a status the pool does not retry
    }
    auto key = reinterpret_cast<uintptr_t>(addr);
    if (r->live.count(key) != 0) r->broken = true;
    r->live[key] = bytes;
    r->acquired++;
    r->log.push_back("+" + std::to_string(bytes / kMiB));
    return GMR_OK;
  }
  static gmr_status OnReleasing(void *ctx, void *addr, size_t bytes, gmr_failure *f) {
    auto *r = static_cast<Recorder *>(ctx);
    std::lock_guard<std::mutex> g(r->mu);
    if (r->refuse_release > 0) {
      r->refuse_release--;
      std::snprintf(f->message, sizeof f->message, "recorder keeps %zu bytes", bytes);
      return GMR_ERR_BUSY;
    }
    auto it = r->live.find(reinterpret_cast<uintptr_t>(addr));
    if (it == r->live.end() || it->second != bytes) r->broken = true;
    if (it != r->live.end()) r->live.erase(it);
    r->released++;
    r->log.push_back("-" + std::to_string(bytes / kMiB));
    return GMR_OK;
  }
  gmr_chunk_listener Listener() {
    return gmr_chunk_listener{GMR_CHUNK_LISTENER_VERSION, OnAcquired, OnReleasing, this};
  }
};

class ChunkListener : public gmr_test::SimTest {
 protected:
  gmr_cuda_resource *cuda_ = nullptr;
  gmr_chunk_listener_adaptor *adaptor_ = nullptr;
  gmr_pool_resource *pool_ = nullptr;
  gmr_resource *a_ = nullptr;
  gmr_resource *top_ = nullptr;
  uint32_t ids_[2] = {0, 0};

  // Recorders live in the test body: detach them there.
  void RemoveListeners() {
    for (uint32_t &id : ids_) {
      if (id != 0) {
        EXPECT_EQ(GMR_OK, gmr_chunk_listener_adaptor_remove_listener(adaptor_, id, nullptr));
      }
      id = 0;
    }
  }

  void SetUp() override {
    SimTest::SetUp();
    ASSERT_EQ(GMR_OK, gmr_cuda_resource_create(nullptr, &cuda_));
    ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_create(gmr_cuda_resource_as_resource(cuda_),
                                                        &adaptor_));
    a_ = gmr_chunk_listener_adaptor_as_resource(adaptor_);
    gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
    c.min_growth_bytes = 4 * kMiB;
    c.max_growth_bytes = 4 * kMiB;
    c.arena_count = 1;
    ASSERT_EQ(GMR_OK, gmr_pool_resource_create(a_, &c, &pool_));
    top_ = gmr_pool_resource_as_resource(pool_);
  }
  void TearDown() override {
    if (pool_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(top_));
    }
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(a_));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_cuda_resource_as_resource(cuda_)));
    SimTest::TearDown();
  }
  gmr_chunk_listener_adaptor_stats Stats() {
    gmr_chunk_listener_adaptor_stats s = GMR_CHUNK_LISTENER_ADAPTOR_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_chunk_listener_adaptor_get_stats(adaptor_, &s));
    return s;
  }
  std::vector<gmr_chunk> Chunks() {
    size_t n = 0;
    EXPECT_EQ(GMR_OK, gmr_chunk_listener_adaptor_get_chunks(adaptor_, nullptr, 0, &n));
    std::vector<gmr_chunk> v(n);
    EXPECT_EQ(GMR_OK, gmr_chunk_listener_adaptor_get_chunks(adaptor_, v.data(), n, &n));
    return v;
  }
};

TEST_F(ChunkListener, ListenersHearEveryChunkOfThePoolInPairs) {
  Recorder rec;
  gmr_chunk_listener l = rec.Listener();
  uint32_t id = 0;
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l, &id, nullptr));
  void *small = nullptr, *big = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 1024, 0, nullptr, &small));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 10 * kMiB, 0, nullptr, &big));
  EXPECT_EQ((std::vector<std::string>{"+4", "+10"}), rec.log) << "one growth step, one chunk of its own";
  std::vector<gmr_chunk> chunks = Chunks();
  ASSERT_EQ(2u, chunks.size());
  EXPECT_LT(chunks[0].addr, chunks[1].addr) << "address order";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, small, 1024, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, big, 10 * kMiB, 0, nullptr));
  EXPECT_EQ(2, rec.acquired);
  EXPECT_EQ(0, rec.released) << "the pool keeps its chunks until trim";
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(top_, &released));
  EXPECT_EQ(14 * kMiB, released);
  EXPECT_EQ(2, rec.released);
  EXPECT_TRUE(rec.live.empty());
  EXPECT_FALSE(rec.broken);
  gmr_chunk_listener_adaptor_stats s = Stats();
  EXPECT_EQ(0u, s.chunk_count);
  EXPECT_EQ(2u, s.acquired_count);
  EXPECT_EQ(2u, s.released_count);
  EXPECT_EQ(GMR_OK, gmr_chunk_listener_adaptor_remove_listener(adaptor_, id, nullptr));
}

TEST_F(ChunkListener, ALateListenerHearsTheLiveChunksAndARemovedOneHearsThemGo) {
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 3 * kMiB, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 6 * kMiB, 0, nullptr, &q));
  Recorder rec;
  gmr_chunk_listener l = rec.Listener();
  uint32_t id = 0;
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l, &id, nullptr));
  EXPECT_EQ(2, rec.acquired);
  EXPECT_EQ(Stats().chunk_bytes, 10 * kMiB);
  EXPECT_EQ(1u, Stats().listener_count);
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(a_)) << "a listener and chunks hold it";
  EXPECT_EQ(GMR_OK, gmr_chunk_listener_adaptor_remove_listener(adaptor_, id, nullptr));
  EXPECT_EQ(2, rec.released);
  EXPECT_TRUE(rec.live.empty());
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_chunk_listener_adaptor_remove_listener(adaptor_, id, nullptr))
      << "removed already";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 3 * kMiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, q, 6 * kMiB, 0, nullptr));
  EXPECT_FALSE(rec.broken);
}

TEST_F(ChunkListener, ARefusedChunkGoesBackAndTheAllocationFailsWithTheReason) {
  Recorder first, second;
  gmr_chunk_listener l1 = first.Listener(), l2 = second.Listener();
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l1, &ids_[0], nullptr));
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l2, &ids_[1], nullptr));
  second.refuse_acquire = 1;
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_allocate_ex(top_, kMiB, 0, nullptr, &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_NE(nullptr, std::strstr(f.message, "recorder refuses")) << f.message;
  EXPECT_EQ(a_, f.where) << "the failure names the layer whose listener refused";
  EXPECT_EQ(1, first.acquired);
  EXPECT_EQ(1, first.released) << "the listener that accepted hears it go";
  EXPECT_TRUE(first.live.empty());
  gmr_cuda_sim_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(0, &u));
  EXPECT_EQ(0u, u.used_bytes) << "the chunk went back to the device";
  EXPECT_EQ(1u, Stats().refused_acquire_count);
  // Accepted the next time.
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, kMiB, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, kMiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_trim(top_, nullptr));
  EXPECT_FALSE(first.broken || second.broken);
  EXPECT_TRUE(second.live.empty());
  RemoveListeners();
}

TEST_F(ChunkListener, ARefusedReleaseKeepsTheChunkAndTrimSaysSo) {
  Recorder first, second;
  gmr_chunk_listener l1 = first.Listener(), l2 = second.Listener();
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l1, &ids_[0], nullptr));
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l2, &ids_[1], nullptr));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, kMiB, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, kMiB, 0, nullptr));
  second.refuse_release = 1;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_trim(top_, nullptr));
  EXPECT_EQ(1u, Stats().chunk_count) << "the chunk stayed";
  EXPECT_EQ(1u, first.live.size()) << "the first listener was told the chunk is back";
  EXPECT_EQ(1u, second.live.size());
  EXPECT_EQ(1u, Stats().refused_release_count);
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(top_, &fp));
  EXPECT_EQ(4 * kMiB, fp.held_bytes) << "the pool kept it";
  EXPECT_EQ(GMR_OK, gmr_resource_trim(top_, nullptr));
  EXPECT_TRUE(first.live.empty());
  EXPECT_TRUE(second.live.empty());
  EXPECT_FALSE(first.broken || second.broken);
  RemoveListeners();
}

TEST_F(ChunkListener, AListenerThatRefusesALiveChunkIsNotAdded) {
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 5 * kMiB, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 6 * kMiB, 0, nullptr, &q));
  Recorder rec;
  gmr_chunk_listener l = rec.Listener();
  // Accepts the first live chunk, refuses the second: the first is undone.
  struct Once {
    static gmr_status Acquire(void *ctx, void *addr, size_t bytes, gmr_failure *f) {
      auto *r = static_cast<Recorder *>(ctx);
      if (r->acquired == 1) {
        std::snprintf(f->message, sizeof f->message, "second refused");
        return GMR_ERR_OUT_OF_MEMORY;
      }
      return Recorder::OnAcquired(ctx, addr, bytes, f);
    }
  };
  l.on_acquired = Once::Acquire;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
            gmr_chunk_listener_adaptor_add_listener(adaptor_, &l, nullptr, &f));
  EXPECT_STREQ("second refused", f.message);
  EXPECT_EQ(1, rec.released);
  EXPECT_TRUE(rec.live.empty());
  EXPECT_EQ(0u, Stats().listener_count);
  l.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_chunk_listener_adaptor_add_listener(adaptor_, &l, nullptr, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 5 * kMiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, q, 6 * kMiB, 0, nullptr));
}

TEST_F(ChunkListener, ARemovalARefusalInterruptsIsUndone) {
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 5 * kMiB, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 6 * kMiB, 0, nullptr, &q));
  Recorder rec;
  gmr_chunk_listener l = rec.Listener();
  uint32_t id = 0;
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l, &id, nullptr));
  // Releases the first chunk, refuses the second: the first is told back.
  struct Second {
    static gmr_status Release(void *ctx, void *addr, size_t bytes, gmr_failure *f) {
      auto *r = static_cast<Recorder *>(ctx);
      if (r->released == 1) return GMR_ERR_BUSY;
      return Recorder::OnReleasing(ctx, addr, bytes, f);
    }
  };
  // Same id, the refusing variant: remove and add again through the API.
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_remove_listener(adaptor_, id, nullptr));
  rec.released = 0;
  rec.acquired = 0;
  l.on_releasing = Second::Release;
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l, &id, nullptr));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_chunk_listener_adaptor_remove_listener(adaptor_, id, nullptr));
  EXPECT_EQ(2u, rec.live.size()) << "told the released chunk is back";
  EXPECT_EQ(1u, Stats().listener_count);
  rec.released = 5;  // let it go now
  EXPECT_EQ(GMR_OK, gmr_chunk_listener_adaptor_remove_listener(adaptor_, id, nullptr));
  EXPECT_TRUE(rec.live.empty());
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 5 * kMiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, q, 6 * kMiB, 0, nullptr));
}

TEST_F(ChunkListener, BadFreesAreRefusedWithoutForwarding) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(a_, 2 * kMiB, 0, nullptr, &p));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_deallocate(a_, &local, 4, 0, nullptr));
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(a_, p, kMiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(a_, p, 2 * kMiB, 0, nullptr));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_deallocate(a_, p, 2 * kMiB, 0, nullptr));
  gmr_resource *extendable = a_;
  EXPECT_EQ(nullptr, extendable->vtbl->extend) << "chunks never grow in place";
}

// A free with another alignment is refused before any listener hears of it:
// a bad free must never make NCCL deregister (and register again) a chunk.
TEST_F(ChunkListener, AFreeWithAnotherAlignmentReachesNoListener) {
  Recorder rec;
  gmr_chunk_listener l = rec.Listener();
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l, &ids_[0], nullptr));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(a_, 2 * kMiB, 128, nullptr, &p));
  EXPECT_EQ(1, rec.acquired);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(a_, p, 2 * kMiB, 0, nullptr))
      << "256, not the 128 asked for";
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(a_, p, 2 * kMiB, 512, nullptr));
  EXPECT_EQ(0, rec.released);
  EXPECT_EQ(1, rec.acquired) << "nobody was told the chunk went and came back";
  EXPECT_EQ(1u, Stats().chunk_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(a_, p, 2 * kMiB, 128, nullptr));
  EXPECT_EQ(1, rec.released);
  EXPECT_FALSE(rec.broken);
  RemoveListeners();
}

TEST_F(ChunkListener, FindWalksDownTheStack) {
  EXPECT_EQ(adaptor_, gmr_chunk_listener_adaptor_from_resource(
                          gmr_resource_find(top_, "chunk_listener_adaptor")));
  EXPECT_EQ(adaptor_, gmr_chunk_listener_adaptor_from_resource(
                          gmr_resource_find(a_, "chunk_listener_adaptor")));
  EXPECT_EQ(nullptr, gmr_chunk_listener_adaptor_from_resource(gmr_resource_find(
                         gmr_cuda_resource_as_resource(cuda_), "chunk_listener_adaptor")));
  EXPECT_EQ(nullptr, gmr_chunk_listener_adaptor_from_resource(
                         gmr_resource_find(nullptr, "chunk_listener_adaptor")));
  EXPECT_EQ(nullptr, gmr_chunk_listener_adaptor_from_resource(top_));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_chunk_listener_adaptor_create(nullptr, &adaptor_));
  EXPECT_EQ(nullptr, adaptor_);
  adaptor_ = gmr_chunk_listener_adaptor_from_resource(a_);
}

TEST_F(ChunkListener, AFullListIsBusy) {
  std::vector<Recorder> recs(GMR_CHUNK_LISTENER_MAX + 1);
  std::vector<uint32_t> ids;
  for (int i = 0; i < GMR_CHUNK_LISTENER_MAX; ++i) {
    gmr_chunk_listener l = recs[i].Listener();
    uint32_t id = 0;
    ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l, &id, nullptr));
    ids.push_back(id);
  }
  gmr_chunk_listener l = recs.back().Listener();
  EXPECT_EQ(GMR_ERR_BUSY, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l, nullptr, nullptr));
  for (uint32_t id : ids) {
    EXPECT_EQ(GMR_OK, gmr_chunk_listener_adaptor_remove_listener(adaptor_, id, nullptr));
  }
}

TEST_F(ChunkListener, ThreadsAllocateWhileListenersComeAndGo) {
  Recorder steady;
  gmr_chunk_listener l = steady.Listener();
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_add_listener(adaptor_, &l, &ids_[0], nullptr));
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        void *p = nullptr;
        size_t bytes = size_t(1 + (i * 7 + t) % 9) * kMiB;
        if (gmr_resource_allocate(a_, bytes, 0, nullptr, &p) != GMR_OK) {
          failures++;
          continue;
        }
        if (gmr_resource_deallocate(a_, p, bytes, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop.load()) {
      Recorder visitor;
      gmr_chunk_listener v = visitor.Listener();
      uint32_t id = 0;
      if (gmr_chunk_listener_adaptor_add_listener(adaptor_, &v, &id, nullptr) != GMR_OK ||
          gmr_chunk_listener_adaptor_remove_listener(adaptor_, id, nullptr) != GMR_OK) {
        failures++;
      }
      if (!visitor.live.empty() || visitor.broken) failures++;
    }
  });
  for (int t = 0; t < 3; ++t) threads[t].join();
  stop = true;
  threads.back().join();
  EXPECT_EQ(0, failures.load());
  EXPECT_TRUE(steady.live.empty());
  EXPECT_FALSE(steady.broken);
  EXPECT_EQ(steady.acquired, steady.released);
  EXPECT_EQ(600, steady.acquired);
  RemoveListeners();
}

TEST_F(ChunkListener, SpecsPutItBelowAPool) {
  gmr_stack *stack = nullptr;
  gmr_spec_error e;
  ASSERT_EQ(GMR_OK, gmr_stack_create("pool > chunk_listener > cuda", &stack, &e)) << e.message;
  gmr_resource *top = gmr_stack_as_resource(stack);
  gmr_chunk_listener_adaptor *found =
      gmr_chunk_listener_adaptor_from_resource(gmr_resource_find(top, "chunk_listener_adaptor"));
  ASSERT_NE(nullptr, found);
  EXPECT_STREQ("chunk_listener_adaptor",
               gmr_resource_get_type_name(gmr_chunk_listener_adaptor_as_resource(found)));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 100, 0, nullptr, &p));
  gmr_chunk_listener_adaptor_stats s = GMR_CHUNK_LISTENER_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_get_stats(found, &s));
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, p, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
}

}  // namespace
