// The stream canary (issue 30, item 4): on a real GPU, with no simulation, no
// stream ever gets memory that another stream's work still uses. Each round a
// long kernel on stream A re-reads a buffer X that A has already freed
// (stream-ordered) and counts the words that differ from A's pattern, while
// the other streams allocate, fill with patterns of their own, check them and
// free: any memory handed to another stream without a wait on A's work shows
// as wrong words in a checksum. Rounds also take the other ways memory moves
// between streams: a request large enough to make the pool take (and merge)
// other streams' free lists, waits that chain B -> C -> D (what found
// rmm#2489's defect in the simulation), A's own calls between the takers (so
// on-demand records happen while A is busy), and record_stream: X read by a
// long kernel on U, recorded on U, freed on A, then asked for by A itself.
//
// Every check must find zero wrong words. Besides, the test counts the
// "handoffs while pending": allocations that returned memory overlapping a
// range freed on another stream whose work up to that free was still running
// (a test event recorded after the free, not complete): how often the
// allocator gave such memory and therefore had to order the taker behind it.
// A positive control runs the same rounds over a test allocator that ignores
// streams and must be caught.
//
// Environment: GMR_CANARY_ROUNDS (60), GMR_CANARY_SEED, GMR_CANARY_MAX_MIB
// (largest X, 48), GMR_CANARY_SPEC (run this spec instead of the four stacks).
// Skips (with the reason) without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "gmr/resource.h"
#include "gmr/stack.h"
#include "tests/gpu/canary_kernels.h"
#include "tests/support/gpu_fixture.h"

namespace {

using gmr_test::CanaryKernels;
using gmr_test::CanaryRecord;

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

uint64_t EnvU64(const char *name, uint64_t fallback) {
  const char *v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 10);
}

struct StackCase {
  std::string name;
  std::string spec;
  int streams;
};

// gtest's listing shows the spec, not the bytes of the struct.
void PrintTo(const StackCase &c, std::ostream *os) {
  *os << "'" << c.spec << "' with " << c.streams << " streams";
}

std::vector<StackCase> Cases() {
  std::vector<std::pair<std::string, std::string>> stacks = {
      {"vmm", "vmm"},
      {"pool", "pool > cuda"},
      {"vmm_pages", "vmm_pages"},
      {"tracking_limiting_pool", "tracking > limiting(limit=4GiB) > pool > cuda"},
  };
  if (const char *spec = std::getenv("GMR_CANARY_SPEC")) {
    if (*spec != '\0') stacks = {{"custom", spec}};
  }
  std::vector<StackCase> out;
  for (const auto &s : stacks) {
    for (int n : {3, 4}) out.push_back({s.first, s.second, n});
  }
  return out;
}

// splitmix64: the same program for the same seed on every stack.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t Below(uint64_t n) { return Next() % n; }
  size_t Between(size_t lo, size_t hi) { return lo + static_cast<size_t>(Below(hi - lo + 1)); }
  bool OneIn(uint64_t n) { return Below(n) == 0; }

 private:
  uint64_t state_;
};

// ---- a test allocator that ignores streams (the positive control) -------------------

// Freed blocks go straight back to a cache that any stream takes from: what
// an allocator that forgets stream order does. Blocks come from cudaMalloc.
struct BlindCache {
  gmr_resource base;  // first: a BlindCache * is a gmr_resource *
  struct Block {
    void *ptr;
    size_t bytes;
  };
  std::vector<Block> free_blocks;
  std::vector<Block> all_blocks;
  size_t live = 0;
};

gmr_status BlindAllocate(gmr_resource *self, size_t bytes, size_t, gmr_stream, void **out_ptr,
                         gmr_failure *) {
  auto *c = reinterpret_cast<BlindCache *>(self);
  auto best = c->free_blocks.end();
  for (auto it = c->free_blocks.begin(); it != c->free_blocks.end(); ++it) {
    if (it->bytes >= bytes && (best == c->free_blocks.end() || it->bytes < best->bytes)) best = it;
  }
  if (best != c->free_blocks.end()) {
    *out_ptr = best->ptr;
    c->free_blocks.erase(best);
  } else {
    if (cudaMalloc(out_ptr, bytes) != cudaSuccess) return GMR_ERR_OUT_OF_MEMORY;
    c->all_blocks.push_back({*out_ptr, bytes});
  }
  ++c->live;
  return GMR_OK;
}

gmr_status BlindDeallocate(gmr_resource *self, void *ptr, size_t, size_t, gmr_stream) {
  auto *c = reinterpret_cast<BlindCache *>(self);
  for (const auto &b : c->all_blocks) {
    if (b.ptr == ptr) {
      c->free_blocks.push_back(b);  // no event, no wait: the defect under test
      --c->live;
      return GMR_OK;
    }
  }
  return GMR_ERR_UNKNOWN_POINTER;
}

gmr_status BlindDestroy(gmr_resource *self) {
  auto *c = reinterpret_cast<BlindCache *>(self);
  if (c->live != 0) return GMR_ERR_BUSY;
  cudaDeviceSynchronize();
  for (const auto &b : c->all_blocks) cudaFree(b.ptr);
  delete c;
  return GMR_OK;
}

gmr_status BlindRecordStream(gmr_resource *, void *, gmr_stream) { return GMR_OK; }

// Positional: C++17 has no designated initialisers.
const gmr_resource_vtbl kBlindVtbl = {
    GMR_RESOURCE_VTBL_VERSION, "stream_blind_cache", BlindAllocate, BlindDeallocate, BlindDestroy,
    nullptr, nullptr, nullptr, nullptr, BlindRecordStream, nullptr, nullptr};

// ---- the canary ------------------------------------------------------------------------

struct Totals {
  uint64_t checks = 0;
  uint64_t wrong_words = 0;
  uint64_t wrong_checks = 0;
  uint64_t unfinished_checks = 0;  // passes done != passes asked
  uint64_t handoffs = 0;           // allocations overlapping memory still in use elsewhere
  uint64_t handoff_bytes = 0;
  uint64_t record_stream_handoffs = 0;  // ... where the pending stream was a record_stream use
  uint64_t allocations = 0;
  uint64_t out_of_memory = 0;
  uint64_t late_starts = 0;  // rounds whose long check was not seen starting in time
};

class Canary {
 public:
  Canary(gmr_resource *r, int streams, uint64_t seed, int rounds, size_t max_x)
      : r_(r), n_(streams), rng_(seed), rounds_(rounds), max_x_(max_x) {}

  ~Canary() {
    for (cudaEvent_t e : event_pool_) cudaEventDestroy(e);
    for (const Freed &f : freed_) {
      for (const auto &u : f.events) cudaEventDestroy(u.second);
    }
    if (user_event_ != nullptr) cudaEventDestroy(user_event_);
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    if (records_ != nullptr) cudaFree(records_);
    if (started_ != nullptr) cudaFreeHost(started_);
  }

  // Sets up, runs every round, synchronises and reads the records.
  void Run(Totals *t) {
    t_ = t;
    ASSERT_EQ(cudaSuccess, k_.load());
    int dev = 0, khz = 0;
    ASSERT_EQ(cudaSuccess, cudaGetDevice(&dev));
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) != cudaSuccess || khz <= 0) {
      khz = 1500000;  // a guess; only the checks' length depends on it
    }
    cycles_per_ms_ = static_cast<long long>(khz);
    streams_.resize(static_cast<size_t>(n_));
    for (cudaStream_t &s : streams_) {
      ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    }
    ASSERT_EQ(cudaSuccess, cudaEventCreateWithFlags(&user_event_, cudaEventDisableTiming));
    max_records_ = static_cast<size_t>(rounds_) * kRecordsPerRound;
    ASSERT_EQ(cudaSuccess, cudaMalloc(reinterpret_cast<void **>(&records_),
                                      max_records_ * sizeof(CanaryRecord)));
    ASSERT_EQ(cudaSuccess, cudaMemset(records_, 0, max_records_ * sizeof(CanaryRecord)));
    ASSERT_EQ(cudaSuccess, cudaHostAlloc(reinterpret_cast<void **>(&started_),
                                         static_cast<size_t>(rounds_) * sizeof(unsigned),
                                         cudaHostAllocMapped));
    std::fill(started_, started_ + rounds_, 0u);
    ASSERT_EQ(cudaSuccess,
              cudaHostGetDevicePointer(reinterpret_cast<void **>(&started_dev_), started_, 0));
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());

    for (int round = 0; round < rounds_ && !HasFatalFailure(); ++round) Round(round);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize()) << cudaGetErrorString(cudaGetLastError());
    for (const Freed &f : freed_) ReleaseEvents(f);
    freed_.clear();
    Collect();
  }

 private:
  static constexpr size_t kRecordsPerRound = 48;

  struct Buf {
    void *p = nullptr;
    size_t bytes = 0;
    int stream = 0;
  };
  // A range freed on `stream`: in use until the test's events recorded after
  // the free (on the freeing stream and on record_stream users) complete.
  struct Freed {
    uintptr_t lo, hi;
    std::vector<std::pair<int, cudaEvent_t>> events;
  };
  struct CheckInfo {
    int round;
    int stream;
    const char *what;
    size_t bytes;
    unsigned passes;
  };

  static bool HasFatalFailure() { return ::testing::Test::HasFatalFailure(); }

  cudaStream_t S(int i) const { return streams_[static_cast<size_t>(i)]; }

  cudaEvent_t TakeEvent() {
    if (!event_pool_.empty()) {
      cudaEvent_t e = event_pool_.back();
      event_pool_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    EXPECT_EQ(cudaSuccess, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void ReleaseEvents(const Freed &f) {
    for (const auto &u : f.events) event_pool_.push_back(u.second);
  }

  // Allocates on stream `s`; counts a handoff when the memory overlaps a
  // range freed elsewhere whose work is not done. False on out of memory.
  bool Alloc(int s, size_t bytes, Buf *out) {
    void *p = nullptr;
    gmr_status st = gmr_resource_allocate(r_, bytes, 0, S(s), &p);
    ++t_->allocations;
    if (st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED) {
      ++t_->out_of_memory;
      return false;
    }
    EXPECT_EQ(GMR_OK, st) << "allocate " << bytes << " on stream " << s;
    if (st != GMR_OK) return false;
    uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
    for (size_t i = 0; i < freed_.size();) {
      Freed &f = freed_[i];
      bool pending_elsewhere = false, pending_use = false, any_pending = false;
      for (size_t k = 0; k < f.events.size(); ++k) {
        cudaError_t q = cudaEventQuery(f.events[k].second);
        if (q == cudaSuccess) continue;
        EXPECT_EQ(cudaErrorNotReady, q) << cudaGetErrorString(q);
        any_pending = true;
        if (f.events[k].first != s) {
          pending_elsewhere = true;
          pending_use = pending_use || k > 0;  // events[0] is the freeing stream's
        }
      }
      if (!any_pending) {
        ReleaseEvents(f);
        freed_[i] = freed_.back();
        freed_.pop_back();
        continue;
      }
      if (pending_elsewhere && lo < f.hi && f.lo < hi) {
        ++t_->handoffs;
        t_->handoff_bytes += std::min(hi, f.hi) - std::max(lo, f.lo);
        if (pending_use) ++t_->record_stream_handoffs;
      }
      ++i;
    }
    *out = {p, bytes, s};
    return true;
  }

  // Frees `b` on its stream; `user` (or -1) is a stream that record_stream named.
  void Free(const Buf &b, int user = -1) {
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, b.p, b.bytes, 0, S(b.stream)));
    Freed f{reinterpret_cast<uintptr_t>(b.p), reinterpret_cast<uintptr_t>(b.p) + b.bytes, {}};
    for (int s : {b.stream, user}) {
      if (s < 0) continue;
      cudaEvent_t e = TakeEvent();
      ASSERT_EQ(cudaSuccess, cudaEventRecord(e, S(s)));
      f.events.push_back({s, e});
    }
    freed_.push_back(f);
  }

  // Launches a check of `b` (filled with `seed`) on stream `on`; with
  // `started`, it sets the round's flag when it begins.
  void Check(const Buf &b, uint32_t seed, int on, int round, const char *what, unsigned passes,
             double ms_between, bool started) {
    ASSERT_LT(infos_.size(), max_records_) << "more checks than records";
    size_t words = b.bytes / 4;
    // Enough threads that a pass takes well under the spin; few enough that
    // the other streams' kernels run beside.
    unsigned blocks = static_cast<unsigned>(std::clamp<size_t>(words / (256 * 1024), 1, 48));
    CanaryRecord *rec = records_ + infos_.size();
    unsigned *flag = started ? started_dev_ + round : nullptr;
    ASSERT_EQ(cudaSuccess,
              k_.check(b.p, b.bytes, seed, passes,
                       static_cast<long long>(ms_between * static_cast<double>(cycles_per_ms_)),
                       rec, flag, blocks, S(on)));
    infos_.push_back({round, on, what, b.bytes, passes});
    ++t_->checks;
  }

  uint32_t Seed() {
    uint32_t s = 0;
    while (s == 0) s = static_cast<uint32_t>(rng_.Next());
    return s;
  }

  // Waits (host) until the round's long check runs, so that what the other
  // streams do next happens while it reads.
  void WaitStarted(int round) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    volatile unsigned *flag = started_ + round;
    while (*flag == 0u) {
      if (std::chrono::steady_clock::now() > deadline) {
        ++t_->late_starts;  // not a failure: only the overlap with it is less sure
        return;
      }
      std::this_thread::yield();
    }
  }

  size_t XSize(int cls) {
    switch (cls) {
      case 0:
        return Round16(rng_.Between(256, 16 * KiB));
      case 1:
        return Round16(rng_.Between(64 * KiB, 2 * MiB));
      default:
        return Round16(rng_.Between(std::min(8 * MiB, max_x_ / 2), max_x_));
    }
  }
  static size_t Round16(size_t b) { return std::max<size_t>(16, b & ~size_t{15}); }

  // A size that makes the allocator want X's memory (or a neighbour's).
  size_t TakerSize(size_t x) {
    switch (rng_.Below(7)) {
      case 0:
      case 1:
        return x;
      case 2:
        return Round16(x / 2);
      case 3:
        return x + 64 * KiB;
      case 4:
        return 2 * x;  // more than X: merges X with its free neighbours
      case 5:
        return Round16(x + x / 2);
      default:
        return XSize(static_cast<int>(rng_.Below(3)));
    }
  }

  int Other() { return 1 + static_cast<int>(rng_.Below(static_cast<uint64_t>(n_ - 1))); }

  // Takes `bytes` on `s`, fills it with a pattern of its own and checks it
  // for a while; frees it now or leaves it in `held`.
  void Take(int s, size_t bytes, int round, std::vector<Buf> *held, bool free_now) {
    Buf b;
    if (!Alloc(s, bytes, &b)) return;
    uint32_t seed = Seed();
    ASSERT_EQ(cudaSuccess, k_.fill(b.p, b.bytes, seed, S(s)));
    Check(b, seed, s, round, "taker", 3, 0.5, false);
    if (free_now) {
      Free(b);
    } else {
      held->push_back(b);
    }
  }

  // A's own small pair: a call naming A while A's long check runs (pools
  // record on demand at a stream's next call).
  void Heartbeat(int round) {
    Buf b;
    if (!Alloc(0, Round16(rng_.Between(256, 64 * KiB)), &b)) return;
    uint32_t seed = Seed();
    ASSERT_EQ(cudaSuccess, k_.fill(b.p, b.bytes, seed, S(0)));
    Check(b, seed, 0, round, "A heartbeat", 1, 0.0, false);
    Free(b);
  }

  // The program's own order between two of B, C, D (never A): T2 waits for
  // what T has queued.
  void ChainWait(int from, int to) {
    ASSERT_EQ(cudaSuccess, cudaEventRecord(user_event_, S(from)));
    ASSERT_EQ(cudaSuccess, cudaStreamWaitEvent(S(to), user_event_, 0));
  }

  void Round(int round) {
    // Type: 0 random takers, 1 a request larger than X first, 2 chained waits,
    // 3 record_stream. Class of X: small, medium, large; every type sees each.
    const int type = round % 4;
    const int cls = (round / 4) % 3;
    const size_t x = XSize(cls);
    Buf xb;
    if (!Alloc(0, x, &xb)) return;
    const uint32_t xseed = Seed();
    ASSERT_EQ(cudaSuccess, k_.fill(xb.p, xb.bytes, xseed, S(0)));
    int user = -1;
    if (type != 3) {
      // ~12 ms of reading X on A; X freed on A while it runs.
      Check(xb, xseed, 0, round, "X on A", 8, 1.5, true);
      WaitStarted(round);
      Free(xb);
    } else {
      // X read on U (ordered after A's fill by the program), recorded on U,
      // freed on A: nobody, A included, may have it before U's check ends.
      user = Other();
      ChainWait(0, user);  // the one wait on A: the fill, not what comes after
      Check(xb, xseed, user, round, "X on record_stream user", 8, 1.5, true);
      WaitStarted(round);
      ASSERT_EQ(GMR_OK, gmr_resource_record_stream(r_, xb.p, S(user)));
      Free(xb, user);
    }
    ASSERT_FALSE(HasFatalFailure());

    std::vector<Buf> held;
    const int b = 1, c = 2, d = n_ > 3 ? 3 : 1;
    switch (type) {
      case 1:  // a request larger than X, so the pool takes (merges) other lists
        Take(b, 2 * x + 64 * KiB, round, &held, false);
        Heartbeat(round);
        Take(c, x, round, &held, rng_.OneIn(2));
        Take(d, Round16(x / 2), round, &held, rng_.OneIn(2));
        break;
      case 2:  // B -> C -> D: each takes after the program ordered it behind the last
        Take(b, x, round, &held, true);
        ChainWait(b, c);
        Take(c, Round16(x / 2), round, &held, true);
        if (n_ > 3) {
          ChainWait(c, d);
          Take(d, x, round, &held, false);
        }
        break;
      case 3:  // A itself asks first
        Take(0, x, round, &held, true);
        break;
      default:
        break;
    }
    const int steps = 3 * (n_ - 1) + 2;
    for (int i = 0; i < steps && !HasFatalFailure(); ++i) {
      int s = (type == 3 && rng_.OneIn(3)) ? 0 : Other();
      Take(s, TakerSize(x), round, &held, rng_.OneIn(2));
      if (n_ > 2 && s != 0 && rng_.OneIn(3)) {
        int to = Other();
        if (to != s) ChainWait(s, to);
      }
      if (type != 3 && rng_.OneIn(3)) Heartbeat(round);
    }
    // The rest, in an order of their own.
    while (!held.empty() && !HasFatalFailure()) {
      size_t i = static_cast<size_t>(rng_.Below(held.size()));
      Free(held[i]);
      held[i] = held.back();
      held.pop_back();
    }
    if (freed_.size() > 4096) {
      // Bounded bookkeeping: the oldest ranges are done long since.
      ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
      for (const Freed &f : freed_) ReleaseEvents(f);
      freed_.clear();
    }
  }

  void Collect() {
    std::vector<CanaryRecord> recs(infos_.size());
    ASSERT_EQ(cudaSuccess, cudaMemcpy(recs.data(), records_, recs.size() * sizeof(CanaryRecord),
                                      cudaMemcpyDeviceToHost));
    int shown = 0;
    for (size_t i = 0; i < recs.size(); ++i) {
      const CanaryRecord &rc = recs[i];
      const CheckInfo &in = infos_[i];
      if (rc.passes != in.passes) ++t_->unfinished_checks;
      if (rc.wrong_words == 0) continue;
      t_->wrong_words += rc.wrong_words;
      ++t_->wrong_checks;
      if (shown++ < 10) {
        std::printf("stream_canary: WRONG round %d, %s (stream %d, %zu bytes): %llu words "
                    "differ, first at word %llu (found 0x%08llx)\n",
                    in.round, in.what, in.stream, in.bytes, rc.wrong_words,
                    rc.first_wrong_plus_one - 1, rc.word_found);
      }
    }
  }

  gmr_resource *r_;
  int n_;
  Rng rng_;
  int rounds_;
  size_t max_x_;
  Totals *t_ = nullptr;
  CanaryKernels k_;
  long long cycles_per_ms_ = 0;
  std::vector<cudaStream_t> streams_;
  cudaEvent_t user_event_ = nullptr;
  std::vector<cudaEvent_t> event_pool_;
  std::vector<Freed> freed_;
  std::vector<CheckInfo> infos_;
  CanaryRecord *records_ = nullptr;
  size_t max_records_ = 0;
  unsigned *started_ = nullptr;      // host-mapped, one flag per round
  unsigned *started_dev_ = nullptr;  // the same, as the device sees it
};

int Rounds() { return static_cast<int>(std::max<uint64_t>(4, EnvU64("GMR_CANARY_ROUNDS", 60))); }
size_t MaxX() { return std::max<size_t>(1, EnvU64("GMR_CANARY_MAX_MIB", 48)) * MiB; }

void Report(const std::string &label, int rounds, uint64_t seed, const Totals &t) {
  std::printf("stream_canary: %s rounds=%d seed=%" PRIu64 " checks=%" PRIu64
              " wrong_words=%" PRIu64 " wrong_checks=%" PRIu64 " unfinished_checks=%" PRIu64
              " handoffs_while_pending=%" PRIu64 " handoff_bytes=%" PRIu64
              " record_stream_handoffs=%" PRIu64 " allocations=%" PRIu64
              " out_of_memory=%" PRIu64 " late_starts=%" PRIu64 "\n",
              label.c_str(), rounds, seed, t.checks, t.wrong_words, t.wrong_checks,
              t.unfinished_checks, t.handoffs, t.handoff_bytes, t.record_stream_handoffs,
              t.allocations, t.out_of_memory, t.late_starts);
  std::fflush(stdout);
  ::testing::Test::RecordProperty("wrong_words", std::to_string(t.wrong_words));
  ::testing::Test::RecordProperty("handoffs_while_pending", std::to_string(t.handoffs));
  ::testing::Test::RecordProperty("handoff_bytes", std::to_string(t.handoff_bytes));
}

class StreamCanary : public gmr_test::GpuTest, public ::testing::WithParamInterface<StackCase> {};

TEST_P(StreamCanary, NoStreamSeesAnotherStreamsWrites) {
  const StackCase &c = GetParam();
  gmr_stack *stack = nullptr;
  gmr_spec_error err = {};
  ASSERT_EQ(GMR_OK, gmr_stack_create(c.spec.c_str(), &stack, &err)) << err.message;
  const int rounds = Rounds();
  const uint64_t seed = EnvU64("GMR_CANARY_SEED", 30) * 16 + static_cast<uint64_t>(c.streams);
  Totals t;
  {
    Canary canary(gmr_stack_as_resource(stack), c.streams, seed, rounds, MaxX());
    canary.Run(&t);
  }
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(stack));
  Report("'" + c.spec + "' streams=" + std::to_string(c.streams), rounds, seed, t);
  EXPECT_EQ(0u, t.wrong_words) << c.spec << ": another stream's writes reached memory in use";
  EXPECT_EQ(0u, t.unfinished_checks) << "checks that did not run every pass";
}

INSTANTIATE_TEST_SUITE_P(Stacks, StreamCanary, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<StackCase> &info) {
                           return info.param.name + "_" + std::to_string(info.param.streams) +
                                  "streams";
                         });

// The positive control: the same rounds over an allocator that hands freed
// memory to any stream at once. The canary must see it (wrong words), else
// zero wrong words above would prove nothing.
using StreamCanaryControl = gmr_test::GpuTest;

TEST_F(StreamCanaryControl, AnAllocatorThatIgnoresStreamsIsCaught) {
  auto *blind = new BlindCache();
  blind->base.vtbl = &kBlindVtbl;
  const int rounds = 12;
  const uint64_t seed = EnvU64("GMR_CANARY_SEED", 30) * 16;
  Totals t;
  {
    Canary canary(&blind->base, 3, seed, rounds, 8 * MiB);
    canary.Run(&t);
  }
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(&blind->base));
  Report("stream_blind_cache (control) streams=3", rounds, seed, t);
  EXPECT_GT(t.handoffs, 0u) << "the control never handed over memory in use";
  EXPECT_GT(t.wrong_words, 0u) << "the canary did not see a stream-blind allocator";
}

}  // namespace
