// vmm's stream events in batches (issue 32, stream_ordered/stream_event.h):
// once a second stream shares an engine, a free records its stream's event
// only when the stream's fresh frees fill a batch, at the stream's next call
// after another stream found that its fresh memory would have served, or at
// every free while others keep taking its memory (hot). Every test checks
// each allocation with the stream-ordering oracle (tests/support/order_oracle.h):
// no byte goes to a stream that is not ordered after the work that may use it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "gmr/device.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "tests/support/order_oracle.h"
#include "tests/vmm/vmm_fine_fixture.h"

namespace {

using gmr_test::kMiB;
using gmr_test::kPage;
using gmr_test::Stats;

// A batch, as stream_event.h counts it (GMR__STREAM_EVENT_BATCH_FREES).
constexpr uint64_t kBatchFrees = 64;

uint64_t Calls(gmr_cuda_call c) { return gmr_cuda_sim_get_call_count(c); }

// Driver calls that create, map or unmap physical memory.
uint64_t MemoryCalls() {
  return Calls(GMR_CUDA_CALL_MEM_CREATE) + Calls(GMR_CUDA_CALL_MEM_MAP) +
         Calls(GMR_CUDA_CALL_MEM_UNMAP);
}

class VmmBatchEvents : public gmr_test::FineTest {
 protected:
  order_oracle *oracle_ = nullptr;
  gmr_stream a_ = nullptr, b_ = nullptr;

  void SetUp() override {
    FineTest::SetUp();
    oracle_ = order_oracle_create();
    ASSERT_NE(nullptr, oracle_);
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&a_));
    ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&b_));
  }
  void TearDown() override {
    if (a_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, false));
    }
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, false));
    if (pool_ != nullptr) {
      gmr_test::ExpectInvariants(pool_);
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(r_));
      pool_ = nullptr;
    }
    if (a_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(a_));
    }
    EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(b_));
    order_oracle_destroy(oracle_);
    FineTest::TearDown();
  }
  // The defaults (as the replay's `vmm`) in one engine: both streams meet.
  void MakeOneEngine() {
    gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
    c.shard_count = 1;
    Make(c);
  }
  // Allocate on `s` and check the memory with the oracle.
  void *Take(size_t bytes, gmr_stream s) {
    void *p = Alloc(bytes, s);
    char why[512];
    EXPECT_TRUE(order_oracle_check_allocation(oracle_, p, bytes, s, why, sizeof why)) << why;
    return p;
  }
  // Free on `s`, the oracle told that `s`'s work so far may still use it.
  void Give(void *p, size_t bytes, gmr_stream s) {
    EXPECT_TRUE(order_oracle_note_free(oracle_, p, bytes, &s, 1));
    Free(p, bytes, s);
  }
  uint64_t Records() { return Stats(pool_).event_record_count; }
  // Both streams past their first frees (which record at once, as a new
  // stream's do): from now on frees record in batches.
  void Warm() {
    for (gmr_stream s : {a_, b_}) {
      for (int i = 0; i < 4; ++i) Give(Take(64 << 10, s), 64 << 10, s);
    }
  }
  // `count` buffers of 64 KiB on `s`, allocated (oracle-checked), not freed.
  std::vector<void *> Batch(gmr_stream s, int count) {
    std::vector<void *> v;
    for (int i = 0; i < count; ++i) v.push_back(Take(64 << 10, s));
    return v;
  }
};

// Stream A allocates and frees four batches of small buffers per round; B
// takes a buffer from A's memory each round and hands it back (A waits for
// B, then frees it). A is held: its work stays pending, so B waits for A's
// record on the GPU. A records once per batch, not once per free, and the
// pool holds no more after the first rounds.
TEST_F(VmmBatchEvents, TradingStreamsRecordOncePerBatch) {
  MakeOneEngine();
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  constexpr int kRounds = 24, kSmall = 4 * static_cast<int>(kBatchFrees);
  uint64_t frees = 0, records_before = 0, frees_before = 0, syncs = 0;
  size_t held_after_warmup = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (round == 2) {
      records_before = Records();
      frees_before = frees;
      held_after_warmup = Held();
      syncs = Calls(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
    }
    std::vector<void *> small;
    for (int i = 0; i < kSmall; ++i) small.push_back(Take(64 << 10, a_));
    for (void *p : small) Give(p, 64 << 10, a_);
    void *p = Take(1 * kMiB, b_);
    ASSERT_EQ(GMR_OK, gmr_stream_wait_stream(a_, b_)); /* B's use ends before A's reuse */
    Give(p, 1 * kMiB, a_);
    frees += kSmall + 1;
  }
  const uint64_t records = Records() - records_before;
  const uint64_t traded = frees - frees_before;
  std::printf("%llu frees, %llu records (%.4f per free), %llu waits by B\n",
              static_cast<unsigned long long>(traded), static_cast<unsigned long long>(records),
              double(records) / double(traded),
              static_cast<unsigned long long>(gmr_cuda_sim_get_stream_wait_count(b_)));
  EXPECT_LE(records, traded / kBatchFrees + 4) << "about one record per batch";
  EXPECT_GE(gmr_cuda_sim_get_stream_wait_count(b_), static_cast<uint64_t>(kRounds - 2))
      << "B took A's pending memory by waiting, round after round";
  EXPECT_EQ(held_after_warmup, Held()) << "B's buffers came from A's memory";
  EXPECT_EQ(syncs, Calls(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE)) << "the device was synchronised";
}

// A repeating two-stream program (issue 32's regression): stream A
// allocates buffers and frees them, then stream B needs that memory, then
// A again. Both streams are held (their work stays pending, as on a busy
// GPU), so memory passes only through recorded events that the taker waits
// for. After a warm-up the program repeats with no physical memory created,
// mapped or unmapped, no growth and no device synchronisation. A stream
// that recorded only at its next call after a demand (on demand, no
// batches) leaves every round's frees uncovered when the other stream
// needs them: the taker then synchronises the device every round, or,
// where the device cannot be synchronised (a capture elsewhere), grows or
// moves memory every round.

// A batch's record fails (cudaEventRecord refused): its frees stay fresh,
// so another stream does not get that memory while A's work may use it
// (the oracle checks it; device synchronisations are refused too, so B
// grows instead), every free still succeeds, and A's next free records
// again, after which B takes the memory by waiting for that record.
TEST_F(VmmBatchEvents, AFailedRecordLeavesItsFreesUncovered) {
  MakeOneEngine();
  Warm();
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, true));
  std::vector<void *> a = Batch(a_, static_cast<int>(kBatchFrees));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, UINT64_MAX,
                                                cudaErrorStreamCaptureUnsupported));
  const uint64_t refused_before = Calls(GMR_CUDA_CALL_EVENT_RECORD);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_EVENT_RECORD, 0, UINT64_MAX,
                                                cudaErrorLaunchFailure));
  for (void *p : a) Give(p, 64 << 10, a_); /* each returns GMR_OK (Free checks) */
  EXPECT_LT(refused_before, Calls(GMR_CUDA_CALL_EVENT_RECORD)) << "the batch tried to record";
  const size_t held = Held();
  void *b1 = Take(2 * kMiB, b_); /* not A's fresh memory: B grows */
  EXPECT_GT(Held(), held);
  EXPECT_EQ(0u, gmr_cuda_sim_get_stream_wait_count(b_));
  // Records work again: A's next free records the whole batch.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, UINT64_MAX,
                                                cudaErrorStreamCaptureUnsupported));
  const uint64_t records = Records();
  Give(Take(64 << 10, a_), 64 << 10, a_);
  EXPECT_GT(Records(), records);
  const size_t held_now = Held();
  void *b2 = Take(2 * kMiB, b_); /* A's memory, after a GPU-side wait */
  EXPECT_EQ(held_now, Held());
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(b_));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  Give(b1, 2 * kMiB, b_);
  Give(b2, 2 * kMiB, b_);
}

// A is destroyed with a recorded batch and fresh frees behind it, its work
// still pending (it runs on after the destroy). B gets the recorded memory
// by waiting for A's event (legal after the destroy: nothing names A), and
// A's fresh memory only after a device synchronisation; nothing ever names
// A again (the fixture fails on a call with a stale handle).
TEST_F(VmmBatchEvents, ADestroyedStreamsFreshFreesWaitForTheDevice) {
  MakeOneEngine();
  Warm();
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold_beyond_destroy(a_));
  std::vector<void *> covered = Batch(a_, static_cast<int>(kBatchFrees));
  void *fence = Take(64 << 10, b_); /* keeps the two apart (they would merge) */
  void *fresh = Take(8 * kMiB, a_);
  for (void *p : covered) Give(p, 64 << 10, a_); /* a full batch: recorded */
  Give(fresh, 8 * kMiB, a_);                     /* after the record: fresh */
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(a_));
  a_ = nullptr;
  const size_t held = Held();
  const uint64_t syncs = Calls(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
  void *b1 = Take(3 * kMiB, b_); /* A's recorded batch: a wait for A's event */
  EXPECT_EQ(1u, gmr_cuda_sim_get_stream_wait_count(b_));
  EXPECT_EQ(syncs, Calls(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE));
  void *b2 = Take(8 * kMiB, b_); /* A's fresh memory: the device is synchronised */
  EXPECT_EQ(syncs + 1, Calls(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE));
  EXPECT_EQ(held, Held()) << "both came from A's memory";
  Give(b1, 3 * kMiB, b_);
  Give(b2, 8 * kMiB, b_);
  Give(fence, 64 << 10, b_);
}

// A stream that others keep taking memory from records at every free (hot).
// A is made hot, records a free (its memory covered, its work pending: A is
// held beyond its destroy), and is destroyed; C gets A's handle and frees
// on it. C's record must not stand for A's covered memory (a record on C is
// no order after A's work): the free checks the stream's id first, finds
// another stream and gives C a slot of its own, so B takes A's memory only
// by waiting for A's own event (the oracle checks it).
TEST_F(VmmBatchEvents, ASuccessorOnTheHandleDoesNotCoverTheDeadStreamsMemory) {
  MakeOneEngine();
  Warm();
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, UINT64_MAX,
                                                cudaErrorStreamCaptureUnsupported));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold_beyond_destroy(a_));
  std::vector<std::pair<void *, size_t>> b_kept;
  for (int demand = 0; demand < 4; ++demand) { /* only A's fresh memory would serve B */
    Give(Take(6 * kMiB, a_), 6 * kMiB, a_);
    b_kept.emplace_back(Take(6 * kMiB, b_), 6 * kMiB);
  }
  Give(Take(1 * kMiB, a_), 1 * kMiB, a_);
  void *last = Take(1 * kMiB, a_);
  const uint64_t records = Calls(GMR_CUDA_CALL_EVENT_RECORD);
  Give(last, 1 * kMiB, a_);
  ASSERT_EQ(records + 1, Calls(GMR_CUDA_CALL_EVENT_RECORD)) << "A is hot: its free records";
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_reuse_stream_handles(true));
  const gmr_stream dead = a_;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_destroy(a_));
  a_ = nullptr;
  gmr_stream c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&c));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_reuse_stream_handles(false));
  ASSERT_EQ(dead, c) << "the simulation gives C the dead stream's handle";
  Give(Take(32 * kMiB, c), 32 * kMiB, c); /* more than A left: C's own memory */
  for (int i = 0; i < 4; ++i) b_kept.emplace_back(Take(1 * kMiB, b_), 1 * kMiB);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  for (auto &k : b_kept) Give(k.first, k.second, b_);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(c));
}

// During a capture A records nothing (a record would join the user's graph),
// whatever its batches, and the capture stays valid; B, outside the capture,
// does not get A's fresh memory meanwhile. After the capture A's next free
// records the batch, and B takes the memory.
TEST_F(VmmBatchEvents, ACapturingStreamRecordsNothing) {
  MakeOneEngine();
  Warm();
  std::vector<void *> warm = Batch(a_, static_cast<int>(2 * kBatchFrees));
  for (void *p : warm) Give(p, 64 << 10, a_);
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_begin_capture(a_));
  const uint64_t records = Calls(GMR_CUDA_CALL_EVENT_RECORD);
  for (int round = 0; round < 3; ++round) {
    std::vector<void *> in = Batch(a_, static_cast<int>(kBatchFrees));
    for (void *p : in) Give(p, 64 << 10, a_);
  }
  EXPECT_EQ(records, Calls(GMR_CUDA_CALL_EVENT_RECORD)) << "recorded on the capturing stream";
  void *b1 = Take(4 * kMiB, b_); /* the oracle: not A's memory freed in the capture */
  gmr_graph graph = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_end_capture(a_, &graph))
      << "broken by " << gmr_cuda_call_name(gmr_cuda_sim_get_capture_breaker());
  EXPECT_EQ(GMR_OK, gmr_cuda_graph_destroy(graph));
  Give(Take(64 << 10, a_), 64 << 10, a_); /* the batch is full: records now */
  EXPECT_EQ(records + 1, Calls(GMR_CUDA_CALL_EVENT_RECORD));
  const size_t held = Held();
  void *b2 = Take(2 * kMiB, b_);
  EXPECT_EQ(held, Held()) << "A's memory went to B after the capture";
  Give(b1, 4 * kMiB, b_);
  Give(b2, 2 * kMiB, b_);
}

// How the program's GPU behaves: streams held (work pending) or not, and
// whether the device may be synchronised (not while a capture runs
// elsewhere: CUDA refuses it in every mode).
struct HandOffCase {
  bool held;
  bool sync_refused;
  const char *name;
};

class VmmBatchHandOff : public VmmBatchEvents,
                        public ::testing::WithParamInterface<HandOffCase> {};

TEST_P(VmmBatchHandOff, ARepeatingTwoStreamProgramSettles) {
  const HandOffCase c = GetParam();
  MakeOneEngine();
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(a_, c.held));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_stream_hold(b_, c.held));
  if (c.sync_refused) {
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, UINT64_MAX,
                                                  cudaErrorStreamCaptureUnsupported));
  }
  const size_t sizes[] = {3 * kMiB, 700 << 10, 5 * kMiB, 1 * kMiB, 9 * kMiB,
                          200 << 10, 2 * kMiB, 6 * kMiB};
  auto use = [&](gmr_stream s) {
    std::vector<void *> live;
    for (size_t bytes : sizes) live.push_back(Take(bytes, s));
    for (size_t i = 0; i < live.size(); ++i) Give(live[i], sizes[i], s);
  };
  constexpr int kWarmup = 12, kRounds = 40;
  uint64_t memory_calls = 0, syncs = 0, records = 0, frees = 0;
  size_t held = 0;
  for (int round = 0; round < kRounds; ++round) {
    if (round == kWarmup) {
      memory_calls = MemoryCalls();
      syncs = Calls(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE);
      records = Records();
      held = Held();
    }
    use(a_);
    use(b_);
    if (round < kWarmup) continue;
    frees += 2 * (sizeof sizes / sizeof sizes[0]);
    EXPECT_EQ(memory_calls, MemoryCalls()) << "round " << round << " created or moved memory";
    EXPECT_EQ(held, Held()) << "round " << round << " held more";
  }
  EXPECT_EQ(syncs, Calls(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE)) << "the device was synchronised";
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  std::printf("steady rounds: %llu frees, %llu records, held %zu MiB\n",
              static_cast<unsigned long long>(frees),
              static_cast<unsigned long long>(Records() - records), held / kMiB);
}

INSTANTIATE_TEST_SUITE_P(Gpu, VmmBatchHandOff,
                         ::testing::Values(HandOffCase{true, false, "Busy"},
                                           HandOffCase{false, false, "Idle"},
                                           HandOffCase{false, true, "IdleNoDeviceSync"},
                                           HandOffCase{true, true, "BusyNoDeviceSync"}),
                         [](const ::testing::TestParamInfo<HandOffCase> &info) {
                           return std::string(info.param.name);
                         });

}  // namespace
