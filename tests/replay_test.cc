// tests/replay_test.cc: the replay engine (replay.h), the stack builder
// (stacks.h), timing and report helpers, on the host simulation of CUDA.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmr/sim/cuda_sim.h"
#include "gmr/device.h"
#include "gmr/resource.h"
#include "gmr/stack.h"
#include "tests/support/sim_fixture.h"
#include "tools/replay/locate.h"
#include "tools/replay/replay.h"
#include "tools/replay/report.h"
#include "tools/replay/stacks.h"
#include "tools/replay/timing.h"
#include "tools/replay/trace.h"

namespace {

std::string WriteTrace(const std::string &name, const std::string &content) {
  const char *dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  return path;
}

// Owns a parsed trace.
struct Trace {
  replay_trace *trace = nullptr;
  ~Trace() { replay_trace_destroy(trace); }
};

void ParseOrDie(const std::string &path, Trace *out) {
  char err[512];
  ASSERT_EQ(GMR_OK, replay_trace_read(path.c_str(), nullptr, &out->trace, err, sizeof err))
      << err;
}

// Create the named stack, replay, destroy the stack (recording how that went).
void RunStack(const replay_trace *trace, const char *name, replay_result *out) {
  replay_stack *stack = nullptr;
  char err[256];
  ASSERT_EQ(GMR_OK, replay_stack_create(name, &stack, err, sizeof err)) << err;
  EXPECT_EQ(GMR_OK, replay_run(trace, replay_stack_top(stack), 0, out)) << out->first_failure;
  replay_result_set_destroy_status(out, replay_stack_destroy(stack));
}

// Live bytes after each line in the comment; the peak is 6244 bytes.
const char kSmallTrace[] =
    "action,addr,size,stream,time_us\r\n"
    "alloc,4096,1024,0,1\r\n"             // A0  1024
    "alloc,8192,4096,0,2\r\n"             // A1  5120
    "free_requested,4096,1024,0,3\r\n"    //     4096
    "alloc,12288,2048,0,4\r\n"            // A2  6144
    "alloc,4096,100,0,5\r\n"              // A3  6244 (address 4096 reused): the peak
    "free_requested,8192,4096,0,6\r\n"    //     2148
    "free_requested,12288,2048,0,7\r\n";  //      100; A3 stays live to the end
const uint64_t kSmallPeakLiveBytes = 6244;

class ReplayTest : public gmr_test::SimTest {};

void ExpectSmallTraceCounts(const replay_result &r) {
  EXPECT_EQ(GMR_OK, r.run_status);
  EXPECT_EQ(4u, r.alloc_count);
  EXPECT_EQ(3u, r.free_count);
  EXPECT_EQ(1u, r.live_at_end_count);
  EXPECT_EQ(0u, r.failed_alloc_count);
  EXPECT_EQ(0u, r.failed_free_count);
  EXPECT_EQ(0u, r.skipped_free_count);
  EXPECT_EQ(0u, r.cleanup_failure_count);
  EXPECT_EQ(GMR_OK, r.destroy_status);
  EXPECT_EQ(0u, r.stream_create_count);  // only the default stream
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  EXPECT_EQ(0u, replay_result_failure_count(&r));
  EXPECT_STREQ("", r.first_failure);
  EXPECT_EQ(GMR_OK, r.footprint_status);
  EXPECT_LE(r.alloc_p50_ns, r.alloc_p99_ns);
  EXPECT_LE(r.free_p50_ns, r.free_p99_ns);
}

TEST_F(ReplayTest, HostStackCountsExactBytes) {
  Trace t;
  ParseOrDie(WriteTrace("small_host.csv", kSmallTrace), &t);
  ASSERT_EQ(kSmallPeakLiveBytes, t.trace->summary.peak_live_bytes);
  replay_result r;
  RunStack(t.trace, "host", &r);
  ExpectSmallTraceCounts(r);
  EXPECT_EQ(kSmallPeakLiveBytes, r.footprint.peak_held_bytes);
  EXPECT_EQ(100u, r.footprint.held_bytes);  // A3, read before the end-of-run free
  replay_result_free(&r);
}

TEST_F(ReplayTest, CudaDeviceStackCountsExactBytes) {
  Trace t;
  ParseOrDie(WriteTrace("small_device.csv", kSmallTrace), &t);
  replay_result r;
  RunStack(t.trace, "cuda_device", &r);
  ExpectSmallTraceCounts(r);
  EXPECT_EQ(kSmallPeakLiveBytes, r.footprint.peak_held_bytes);
  // One cudaMalloc per allocation; one cudaFree per free plus A3 at the end.
  EXPECT_EQ(4u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(4u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  replay_result_free(&r);
}

TEST_F(ReplayTest, CudaAsyncStackReportsThePoolReserve) {
  Trace t;
  ParseOrDie(WriteTrace("small_async.csv", kSmallTrace), &t);
  replay_result r;
  RunStack(t.trace, "cuda_async", &r);
  ExpectSmallTraceCounts(r);
  // The simulated pool rounds each allocation up to 256 bytes and keeps what
  // it reserved: A1 + A2 + A3 = 4096 + 2048 + 256.
  EXPECT_EQ(6400u, r.footprint.peak_held_bytes);
  EXPECT_EQ(4u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC_FROM_POOL_ASYNC));
  EXPECT_EQ(4u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE_ASYNC));
  replay_result_free(&r);
}

// A resource that records the stream of every call; memory from aligned_alloc.
struct StreamLog {
  std::vector<gmr_stream> alloc_streams;
  std::vector<gmr_stream> free_streams;
  size_t live_count = 0;
};

struct RecordingResource {
  gmr_resource base;  // first, as every resource
  StreamLog *log;
};

gmr_status RecordingAllocate(gmr_resource *self, size_t bytes, size_t alignment,
                             gmr_stream stream, void **out_ptr, gmr_failure *) {
  StreamLog *log = reinterpret_cast<RecordingResource *>(self)->log;
  *out_ptr = std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  if (*out_ptr == nullptr) return GMR_ERR_OUT_OF_MEMORY;
  log->alloc_streams.push_back(stream);
  log->live_count++;
  return GMR_OK;
}

gmr_status RecordingDeallocate(gmr_resource *self, void *ptr, size_t, size_t, gmr_stream stream) {
  StreamLog *log = reinterpret_cast<RecordingResource *>(self)->log;
  std::free(ptr);
  log->free_streams.push_back(stream);
  log->live_count--;
  return GMR_OK;
}

gmr_status RecordingDestroy(gmr_resource *) { return GMR_OK; }

const gmr_resource_vtbl kRecordingVtbl = {
    GMR_RESOURCE_VTBL_VERSION, "recording_resource", RecordingAllocate, RecordingDeallocate,
    RecordingDestroy,          nullptr,              nullptr,           nullptr,
    nullptr,                   nullptr,              nullptr,           nullptr};

TEST_F(ReplayTest, EachRecordedStreamGetsItsOwnStream) {
  const char trace[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,512,0,1\n"              // A0 on 0: the default stream
      "alloc,8192,512,7,2\n"              // A1 on 7
      "alloc,12288,512,9,3\n"             // A2 on 9
      "alloc,16384,512,7,4\n"             // A3 on 7
      "free_requested,8192,512,9,5\n"     // A1 freed on 9 (the free's own stream)
      "free_requested,4096,512,7,6\n";    // A0 freed on 7; A2, A3 live at the end
  Trace t;
  ParseOrDie(WriteTrace("streams.csv", trace), &t);
  StreamLog log;
  RecordingResource rec = {{&kRecordingVtbl}, &log};
  replay_result r;
  ASSERT_EQ(GMR_OK, replay_run(t.trace, &rec.base, 0, &r)) << r.first_failure;
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  EXPECT_EQ(2u, r.stream_create_count);
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_CREATE));
  EXPECT_EQ(2u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_DESTROY));
  EXPECT_EQ(0u, log.live_count);

  ASSERT_EQ(4u, log.alloc_streams.size());
  gmr_stream s7 = log.alloc_streams[1];
  gmr_stream s9 = log.alloc_streams[2];
  EXPECT_EQ(nullptr, log.alloc_streams[0]);
  EXPECT_NE(nullptr, s7);
  EXPECT_NE(nullptr, s9);
  EXPECT_NE(s7, s9);
  EXPECT_EQ(s7, log.alloc_streams[3]);
  // Trace frees on their recorded streams, then the end-of-run frees of A2
  // and A3 on the streams they were allocated on.
  const std::vector<gmr_stream> expected_frees = {s9, s7, s9, s7};
  EXPECT_EQ(expected_frees, log.free_streams);
  replay_result_free(&r);
}

TEST_F(ReplayTest, MultiStreamTraceRunsOnCudaAsync) {
  // The simulated pool checks every stream handle: a stale or made-up stream
  // would fail the allocation.
  const char trace[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,512,11,1\n"
      "alloc,8192,512,12,2\n"
      "alloc,12288,512,13,3\n"
      "free_requested,4096,512,12,4\n"
      "free_requested,8192,512,13,5\n"
      "free_requested,12288,512,11,6\n";
  Trace t;
  ParseOrDie(WriteTrace("streams_async.csv", trace), &t);
  replay_result r;
  RunStack(t.trace, "cuda_async", &r);
  EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
  EXPECT_EQ(3u, r.stream_create_count);
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_STREAM_CREATE));
  EXPECT_EQ(3u, r.free_count);
  replay_result_free(&r);
}

TEST_F(ReplayTest, InjectedCudaFailureFailsOneAllocationAndSkipsItsFree) {
  const char trace[] =
      "action,addr,size,stream,time_us\n"
      "alloc,4096,1024,0,1\n"             // 2
      "alloc,8192,1024,0,2\n"             // 3
      "alloc,12288,1024,0,3\n"            // 4: the 3rd cudaMalloc, made to fail
      "alloc,16384,1024,0,4\n"            // 5
      "free_requested,4096,1024,0,5\n"    // 6
      "free_requested,12288,1024,0,6\n"   // 7: its allocation failed: skipped
      "free_requested,8192,1024,0,7\n"    // 8
      "free_requested,16384,1024,0,8\n";  // 9
  Trace t;
  ParseOrDie(WriteTrace("inject.csv", trace), &t);
  replay_stack *stack = nullptr;
  char err[256];
  ASSERT_EQ(GMR_OK, replay_stack_create("cuda_device", &stack, err, sizeof err)) << err;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MALLOC, 2, 1, 2));
  replay_result r;
  EXPECT_EQ(GMR_OK, replay_run(t.trace, replay_stack_top(stack), 0, &r));
  replay_result_set_destroy_status(&r, replay_stack_destroy(stack));

  EXPECT_EQ(4u, r.alloc_count);
  EXPECT_EQ(1u, r.failed_alloc_count);
  EXPECT_EQ(3u, r.free_count);
  EXPECT_EQ(1u, r.skipped_free_count);
  EXPECT_EQ(0u, r.failed_free_count);
  EXPECT_EQ(0u, r.live_at_end_count);
  EXPECT_EQ(GMR_OK, r.destroy_status);
  EXPECT_FALSE(replay_result_ok(&r));
  EXPECT_EQ(1u, replay_result_failure_count(&r));
  ASSERT_TRUE(r.has_alloc_failure);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, r.first_alloc_failure.status);
  EXPECT_EQ(2, r.first_alloc_failure.cuda_error);
  EXPECT_EQ(1024u, r.first_alloc_failure.bytes);
  EXPECT_EQ(0u, std::string(r.first_failure)
                    .find("line 4: allocate 1024 bytes on stream 0: GMR_ERR_OUT_OF_MEMORY: "
                          "cudaMalloc failed: "))
      << r.first_failure;
  EXPECT_EQ(4u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
  EXPECT_EQ(3u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_FREE));
  replay_result_free(&r);
}

TEST_F(ReplayTest, MalformedSpecsFailSayWhereAndListTheAliases) {
  const std::pair<const char *, const char *> cases[] = {
      {"pooll", "spec:1:1: unknown component 'pooll' (did you mean 'pool'? known: "
                "chunk_listener, cuda, cumem, fixed_block, graph_arena, host, limiting, log, "
                "nvtx_logging, oom, pool, symmetric, tracking, vmm, vmm_pages)"},
      {"cuda_Device", "spec:1:1: unknown component 'cuda_Device' (known: chunk_listener, cuda, "
                      "cumem, fixed_block, graph_arena, host, limiting, log, nvtx_logging, oom, "
                      "pool, symmetric, tracking, vmm, vmm_pages)"},
      {"", "spec: the spec is empty: name at least one resource, e.g. 'cuda(kind=async)'"},
      {"host,cuda_async", "spec:1:5: expected '>' or the end of the spec, found ','"},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.first);
    replay_stack *stack = reinterpret_cast<replay_stack *>(0x1);
    char err[1024] = "";
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, replay_stack_create(c.first, &stack, err, sizeof err));
    EXPECT_EQ(nullptr, stack);
    EXPECT_EQ(std::string("stack '") + c.first + "': " + c.second +
                  "; aliases: cuda_device, cuda_async, cuda_managed, host, pool, fixed_block, "
                  "graph_pool, vmm",
              err);
    char check_err[1024] = "";
    EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, replay_stack_check(c.first, check_err, sizeof check_err));
    EXPECT_STREQ(err, check_err);
  }
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, replay_stack_create(nullptr, nullptr, nullptr, 0));
  // No CUDA call was made for any of them.
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_GET_DEVICE_COUNT));
}

TEST_F(ReplayTest, AliasesAllowSurroundingSpacesAndSpecsBuildWholeStacks) {
  char err[1024] = "";
  EXPECT_EQ(GMR_OK, replay_stack_check(" cuda_device ", err, sizeof err)) << err;
  replay_stack *stack = nullptr;
  ASSERT_EQ(GMR_OK, replay_stack_create("tracking > limiting(limit=1MiB) > cuda(kind=async)",
                                        &stack, err, sizeof err))
      << err;
  EXPECT_EQ(3u, gmr_stack_get_depth(replay_stack_get(stack)));
  char line[1024];
  replay_stack_describe(stack, line, sizeof line);
  EXPECT_STREQ("tracking: peak 0 bytes in 0 allocations, 0 owners, 0 bad frees; limiting: limit "
               "1048576, peak used 0, 0 refused, 0 raises, 0 overages (max 0 bytes over), oom: "
               "0 failures, 0 retries, 0 recovered, 0 gave up, 0 trims (0 bytes), 0 waits (0 "
               "timed out)",
               line);
  EXPECT_EQ(GMR_OK, replay_stack_destroy(stack));
  ASSERT_EQ(GMR_OK, replay_stack_create("host", &stack, err, sizeof err));
  replay_stack_describe(stack, line, sizeof line);
  EXPECT_STREQ("", line);
  EXPECT_EQ(GMR_OK, replay_stack_destroy(stack));
}

TEST_F(ReplayTest, EveryKnownStackCanBeCreated) {
  ASSERT_EQ(8u, replay_stack_known_count());
  EXPECT_EQ(nullptr, replay_stack_known_name(8));
  for (size_t i = 0; i < replay_stack_known_count(); ++i) {
    const char *name = replay_stack_known_name(i);
    SCOPED_TRACE(name);
    char err[256] = "";
    EXPECT_EQ(GMR_OK, replay_stack_check(name, err, sizeof err));
    replay_stack *stack = nullptr;
    ASSERT_EQ(GMR_OK, replay_stack_create(name, &stack, err, sizeof err)) << err;
    EXPECT_STREQ(name, replay_stack_name(stack));
    gmr_resource *top = replay_stack_top(stack);
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(top, 4096, 0, nullptr, &p));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, p, 4096, 0, nullptr));
    EXPECT_EQ(GMR_OK, replay_stack_destroy(stack));
  }
}

TEST_F(ReplayTest, DestroyWhileBusyIsAFailure) {
  replay_stack *stack = nullptr;
  char err[256];
  ASSERT_EQ(GMR_OK, replay_stack_create("host", &stack, err, sizeof err)) << err;
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(replay_stack_top(stack), 64, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_BUSY, replay_stack_destroy(stack));
  // Nothing was destroyed: the stack still works.
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(replay_stack_top(stack), p, 64, 0, nullptr));
  EXPECT_EQ(GMR_OK, replay_stack_destroy(stack));

  replay_result r = {};
  replay_result_set_destroy_status(&r, GMR_ERR_BUSY);
  EXPECT_FALSE(replay_result_ok(&r));
  EXPECT_EQ(1u, replay_result_failure_count(&r));
  EXPECT_EQ(0u, std::string(r.first_failure).find("destroying the stack: GMR_ERR_BUSY"))
      << r.first_failure;
}

class ReplayNoPoolsTest : public gmr_test::SimTest {
 protected:
  ReplayNoPoolsTest() { sim_config_.memory_pools_supported = false; }
};

TEST_F(ReplayNoPoolsTest, CudaAsyncWithoutPoolsFailsToCreate) {
  replay_stack *stack = nullptr;
  char err[256] = "";
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, replay_stack_create("cuda_async", &stack, err, sizeof err));
  EXPECT_EQ(nullptr, stack);
  EXPECT_STREQ("stack 'cuda_async': spec:1:1: cannot create cuda: GMR_ERR_UNSUPPORTED: kind=async "
               "needs CUDA memory pools, which device 0 does not support "
               "(cudaDevAttrMemoryPoolsSupported is 0): use kind=device",
               err);
}

// ---- the bundled trace --------------------------------------------------

std::string BundledTrace(const char *name) {
  char path[4096];
  char looked[8192];
  if (replay_locate_bundled_trace(nullptr, name, path, sizeof path, looked, sizeof looked) !=
      GMR_OK) {
    ADD_FAILURE() << name << " not found; looked in: " << looked;
    return "";
  }
  return path;
}

// Peak of live bytes with every size rounded up to 256, which is what the
// simulated pool reserves (it never gives memory back during the replay).
uint64_t PeakRoundedTo256(const replay_trace *t) {
  uint64_t live = 0;
  uint64_t peak = 0;
  for (size_t i = 0; i < t->event_count; ++i) {
    const replay_event &e = t->events[i];
    uint64_t rounded = (e.size_bytes + 255) / 256 * 256;
    if (e.op == REPLAY_OP_ALLOC) live += rounded;
    if (e.op == REPLAY_OP_FREE) live -= rounded;
    if (live > peak) peak = live;
  }
  return peak;
}

TEST_F(ReplayTest, BundledGpt2TraceReplaysWithoutFailures) {
  std::string path = BundledTrace("gpt2_train.csv.gz");
  ASSERT_FALSE(path.empty());
  Trace t;
  ParseOrDie(path, &t);
  // Expected values verified independently of this code with
  //   zcat tools/traces/gpt2_train.csv.gz | awk -F, '{sub(/\r$/,"")} NR>1 ...'
  // (an awk pass that pairs free_requested with alloc by address, keeps the
  // running and peak sums of live and of segment bytes, and min/max sizes):
  //   allocs=6179 frees=6176 unmatched=0 streams=1 min=4 max=823410688
  //   peak=7701353160 segpeak=8082423808 liveatend=3, 18669 lines.
  const replay_trace_summary &s = t.trace->summary;
  EXPECT_EQ(REPLAY_TRACE_FORMAT_PYTORCH, t.trace->format);
  EXPECT_EQ(6179u, s.alloc_count);
  EXPECT_EQ(6176u, s.free_count);
  EXPECT_EQ(12355u, s.request_count);
  EXPECT_EQ(0u, s.unmatched_free_count);
  EXPECT_EQ(3u, s.live_at_end_count);
  EXPECT_EQ(1u, s.stream_count);
  EXPECT_EQ(0u, t.trace->stream_values[0]);
  EXPECT_EQ(4u, s.min_size_bytes);
  EXPECT_EQ(823410688u, s.max_size_bytes);
  EXPECT_EQ(UINT64_C(7701353160), s.peak_live_bytes);
  EXPECT_TRUE(s.has_reserved_reference);
  EXPECT_EQ(UINT64_C(8082423808), s.reference_peak_reserved_bytes);
  EXPECT_EQ(0u, s.capture_count);
  EXPECT_EQ(0u, s.malformed_count);
  EXPECT_EQ(18669u, s.line_count);

  for (const char *name : {"cuda_device", "cuda_async"}) {
    SCOPED_TRACE(name);
    replay_result r;
    RunStack(t.trace, name, &r);
    EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
    EXPECT_EQ(0u, replay_result_failure_count(&r));
    EXPECT_EQ(6179u, r.alloc_count);
    EXPECT_EQ(6176u, r.free_count);
    EXPECT_EQ(3u, r.live_at_end_count);
    EXPECT_EQ(0u, r.stream_create_count);
    ASSERT_EQ(GMR_OK, r.footprint_status);
    if (std::string(name) == "cuda_device") {
      EXPECT_EQ(UINT64_C(7701353160), r.footprint.peak_held_bytes);
    } else {
      EXPECT_EQ(PeakRoundedTo256(t.trace), r.footprint.peak_held_bytes);
      EXPECT_GE(r.footprint.peak_held_bytes, s.peak_live_bytes);
    }
    replay_result_free(&r);
  }
}

// The replay destroys its streams before the stack (as programs do). On an
// H100 a pool that recorded an event on such a destroyed stream at its own
// destroy crashed the driver; the simulation counts every CUDA call that names
// a dead stream, and the fixture fails the test if there was one.
TEST_F(ReplayTest, MultiStreamTraceThroughThePoolsNeverTouchesADestroyedStream) {
  std::string path = BundledTrace("multistream.csv.gz");
  ASSERT_FALSE(path.empty());
  Trace t;
  ParseOrDie(path, &t);
  ASSERT_EQ(4u, t.trace->summary.stream_count);
  for (const char *name : {"pool", "fixed_block", "graph_pool"}) {
    SCOPED_TRACE(name);
    replay_result r;
    RunStack(t.trace, name, &r);
    EXPECT_TRUE(replay_result_ok(&r)) << r.first_failure;
    EXPECT_EQ(800u, r.alloc_count);
    EXPECT_EQ(800u, r.free_count);
    EXPECT_EQ(4u, r.stream_create_count);
    EXPECT_EQ(0u, gmr_cuda_sim_get_stale_handle_count());
    replay_result_free(&r);
  }
}

// ---- timing and report helpers ------------------------------------------

TEST(ReplayTimingTest, PercentilesAreNearestRank) {
  std::vector<uint64_t> v;
  for (uint64_t i = 100; i >= 1; --i) v.push_back(i);
  replay_sort_u64(v.data(), v.size());
  EXPECT_EQ(1u, v.front());
  EXPECT_EQ(50u, replay_percentile_u64(v.data(), v.size(), 50));
  EXPECT_EQ(99u, replay_percentile_u64(v.data(), v.size(), 99));
  EXPECT_EQ(100u, replay_percentile_u64(v.data(), v.size(), 100));
  const uint64_t ten[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(5u, replay_percentile_u64(ten, 10, 50));
  EXPECT_EQ(10u, replay_percentile_u64(ten, 10, 99));
  const uint64_t one[] = {42};
  EXPECT_EQ(42u, replay_percentile_u64(one, 1, 50));
  EXPECT_EQ(42u, replay_percentile_u64(one, 1, 99));
  EXPECT_EQ(0u, replay_percentile_u64(nullptr, 0, 50));
}

TEST(ReplayTimingTest, MedianOfRunTimes) {
  double odd[] = {9.0, 1.0, 5.0};
  EXPECT_DOUBLE_EQ(5.0, replay_median_double(odd, 3));
  EXPECT_DOUBLE_EQ(1.0, odd[0]) << "sorted in place";
  double even[] = {4.0, 1.0, 3.0, 2.0};
  EXPECT_DOUBLE_EQ(2.5, replay_median_double(even, 4));
  EXPECT_DOUBLE_EQ(0.0, replay_median_double(nullptr, 0));
}

TEST(ReplayTimingTest, OverheadIsSubtractedAndClampedAtZero) {
  EXPECT_EQ(30u, replay_elapsed_ns(100, 150, 20));
  EXPECT_EQ(0u, replay_elapsed_ns(100, 150, 60));
  EXPECT_EQ(0u, replay_elapsed_ns(150, 100, 0));
  uint64_t a = replay_clock_now_ns();
  uint64_t overhead = replay_clock_overhead_ns(101);
  uint64_t b = replay_clock_now_ns();
  EXPECT_LE(overhead, b - a);  // the median of 101 reads fits in the time they took
}

TEST(ReplayReportTest, SizesInMibWithOneDecimal) {
  char buf[32];
  EXPECT_STREQ("7344.6", replay_report_format_mib(UINT64_C(7701353160), buf, sizeof buf));
  EXPECT_STREQ("0.0", replay_report_format_mib(4, buf, sizeof buf));
  EXPECT_STREQ("1.0", replay_report_format_mib(1048576, buf, sizeof buf));
}

TEST(ReplayReportTest, TableHasOneRowPerStackAndTheReference) {
  std::string path = WriteTrace(
      "report.csv",
      "action,addr,size,stream,time_us\n"
      "segment_alloc,0,4194304,0,1\n"
      "alloc,4096,2097152,0,1\n"
      "alloc,8192,1048576,0,2\n");  // peak live 3 MiB; recorder reserved 4 MiB
  Trace t;
  ParseOrDie(path, &t);
  replay_result results[2] = {};
  results[0].alloc_count = 2;
  results[0].alloc_p50_ns = 120;
  results[0].alloc_p99_ns = 4500;
  results[0].footprint_status = GMR_OK;
  results[0].footprint.peak_held_bytes = 3 * 1048576 + 104858;  // 3.1 MiB
  results[0].timer_overhead_ns = 17;
  results[1].alloc_count = 2;
  results[1].failed_alloc_count = 1;
  results[1].footprint_status = GMR_ERR_UNSUPPORTED;
  std::snprintf(results[1].first_failure, sizeof results[1].first_failure, "line 3: boom");
  const char *names[2] = {"cuda_device", "host"};

  char *text = nullptr;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  ASSERT_NE(nullptr, out);
  replay_report_print_summary(out, t.trace);
  replay_report_print_table(out, t.trace, names, results, 2);
  std::fclose(out);
  std::string report(text, size);
  std::free(text);

  EXPECT_EQ(0u, report.find("trace " + path +
                            " (pytorch): 2 requests (2 allocs, 0 frees), 0 unmatched frees, "
                            "1 stream, sizes 1048576..2097152 B, peak live 3.0 MiB, "
                            "2 live at end\n"))
      << report;
  // Results without passes get one row from their totals; no wall clock: the
  // mean is n/a; no memory info: the fragmentation is n/a.
  EXPECT_NE(std::string::npos,
            report.find("cuda_device -            2       0      0        0      n/a        120 / "
                        "4500             0 / 0       3.1  1.033       n/a\n"))
      << report;
  EXPECT_NE(std::string::npos,
            report.find("host        -            2       0      1        0      n/a             0 / "
                        "0             0 / 0       n/a    n/a       n/a\n"))
      << report;
  EXPECT_NE(std::string::npos, report.find("recorder reserved")) << report;
  // The reference row spans the name and pass columns (18 characters here),
  // leaves the call columns empty (77 characters), then " %9s %6.3f".
  EXPECT_NE(std::string::npos,
            report.find("\nrecorder reserved" + std::string(1 + 77 + 7, ' ') + "4.0  1.333\n"))
      << report;
  EXPECT_NE(std::string::npos, report.find("overhead\n    (17 ns, median of back-to-back reads)")) << report;
  EXPECT_NE(std::string::npos,
            report.find("host: 1 failure (1 allocate, 0 deallocate, 0 skipped frees); first: "
                        "line 3: boom\n"))
      << report;
}

}  // namespace
