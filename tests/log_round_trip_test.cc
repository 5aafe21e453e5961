// The log adaptor's file read back by tools/replay: replay a real trace
// through a stack with the log adaptor, read the log (RMM format), and the
// log asks for the same operations, on as many streams, with the same peak
// of live bytes. Replaying the log again gives the same log.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gmr/log_adaptor.h"
#include "gmr/resource.h"
#include "tests/support/log_stats.h"
#include "tests/support/sim_fixture.h"
#include "tools/replay/locate.h"
#include "tools/replay/replay.h"
#include "tools/replay/trace.h"

namespace {

// A leaf that hands out addresses without memory behind them (nothing is
// touched; a 7 GiB peak costs nothing), reusing a freed address for the next
// request of the same rounded size, as real allocators do, so the reader
// must pair frees with allocations by address over time.
struct AddressLeaf {
  gmr_resource base;
  uintptr_t next = uintptr_t{1} << 40;
  std::map<size_t, std::vector<uintptr_t>> freed;  // rounded size -> addresses
  size_t live = 0;
};

size_t rounded(size_t bytes) { return (bytes + 255) / 256 * 256; }

gmr_status leaf_allocate(gmr_resource *self, size_t bytes, size_t, gmr_stream, void **out,
                         gmr_failure *) {
  AddressLeaf *leaf = reinterpret_cast<AddressLeaf *>(self);
  std::vector<uintptr_t> &same = leaf->freed[rounded(bytes)];
  uintptr_t p;
  if (!same.empty()) {
    p = same.back();
    same.pop_back();
  } else {
    p = leaf->next;
    leaf->next += rounded(bytes);
  }
  leaf->live++;
  *out = reinterpret_cast<void *>(p);
  return GMR_OK;
}

gmr_status leaf_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t, gmr_stream) {
  AddressLeaf *leaf = reinterpret_cast<AddressLeaf *>(self);
  leaf->freed[rounded(bytes)].push_back(reinterpret_cast<uintptr_t>(ptr));
  leaf->live--;
  return GMR_OK;
}

gmr_status leaf_destroy(gmr_resource *self) {
  return reinterpret_cast<AddressLeaf *>(self)->live == 0 ? GMR_OK : GMR_ERR_BUSY;
}

const gmr_resource_vtbl leaf_vtbl = {GMR_RESOURCE_VTBL_VERSION, "address_leaf", leaf_allocate,
                                     leaf_deallocate, leaf_destroy, nullptr, nullptr, nullptr,
                                     nullptr, nullptr, nullptr, nullptr};

struct Trace {
  replay_trace *trace = nullptr;
  ~Trace() { replay_trace_destroy(trace); }
};

std::string Bundled(const char *name) {
  char path[4096], looked[8192];
  if (replay_locate_bundled_trace(nullptr, name, path, sizeof path, looked, sizeof looked) !=
      GMR_OK) {
    ADD_FAILURE() << name << " not found; looked in: " << looked;
    return "";
  }
  return path;
}

std::string TempPath(const std::string &name) {
  const char *dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// Replay `trace` through log_adaptor > AddressLeaf, writing `log_path`.
void ReplayThroughLog(const replay_trace *trace, const std::string &log_path,
                      replay_result *out) {
  AddressLeaf leaf;
  leaf.base.vtbl = &leaf_vtbl;
  gmr_log_adaptor_config config = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
  config.path = log_path.c_str();
  gmr_log_adaptor *log = nullptr;
  ASSERT_EQ(GMR_OK, gmr_log_adaptor_create(&leaf.base, &config, &log));
  ASSERT_EQ(GMR_OK, replay_run(trace, gmr_log_adaptor_as_resource(log), 0, out))
      << out->first_failure;
  EXPECT_EQ(0u, gmr_test::LogStats(log).write_error_count);
  EXPECT_EQ(out->alloc_count + out->free_count + out->live_at_end_count,
            gmr_test::LogStats(log).row_count);
  replay_result_set_destroy_status(out, gmr_resource_destroy(gmr_log_adaptor_as_resource(log)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(&leaf.base));
  EXPECT_TRUE(replay_result_ok(out)) << out->first_failure;
}

class LogRoundTrip : public gmr_test::SimTest,
                     public ::testing::WithParamInterface<const char *> {};

TEST_P(LogRoundTrip, LogAsksForTheSameOperationsStreamsAndPeak) {
  std::string original_path = Bundled(GetParam());
  ASSERT_FALSE(original_path.empty());
  Trace original;
  char err[512];
  ASSERT_EQ(GMR_OK, replay_trace_read(original_path.c_str(), nullptr, &original.trace, err,
                                      sizeof err))
      << err;
  const replay_trace_summary &o = original.trace->summary;

  const std::string log_path = TempPath(std::string(GetParam()) + ".rmm.csv");
  replay_result first;
  ReplayThroughLog(original.trace, log_path, &first);
  EXPECT_EQ(o.alloc_count, first.alloc_count);
  EXPECT_EQ(o.free_count, first.free_count);
  replay_result_free(&first);

  Trace logged;
  ASSERT_EQ(GMR_OK,
            replay_trace_read(log_path.c_str(), nullptr, &logged.trace, err, sizeof err))
      << err;
  const replay_trace_summary &l = logged.trace->summary;
  EXPECT_EQ(REPLAY_TRACE_FORMAT_RMM, logged.trace->format);
  EXPECT_EQ(o.alloc_count, l.alloc_count);
  // The replay frees what the trace leaves live, and the log records those too.
  EXPECT_EQ(o.free_count + o.live_at_end_count, l.free_count);
  EXPECT_EQ(o.request_count + o.live_at_end_count, l.request_count);
  EXPECT_EQ(0u, l.live_at_end_count);
  EXPECT_EQ(0u, l.unmatched_free_count);
  EXPECT_EQ(0u, l.alloc_failure_row_count);
  EXPECT_EQ(0u, l.malformed_count);
  EXPECT_EQ(o.peak_live_bytes, l.peak_live_bytes);
  EXPECT_EQ(o.min_size_bytes, l.min_size_bytes);
  EXPECT_EQ(o.max_size_bytes, l.max_size_bytes);
  // Every stream survives: the log writes stream handles in hexadecimal and
  // the reader reads them so (RMM's own reader reads decimal and loses them).
  EXPECT_EQ(o.stream_count, l.stream_count);

  // Replaying the log through the same stack writes the same log again.
  const std::string again_path = TempPath(std::string(GetParam()) + ".again.csv");
  replay_result second;
  ReplayThroughLog(logged.trace, again_path, &second);
  EXPECT_EQ(l.alloc_count, second.alloc_count);
  EXPECT_EQ(l.free_count, second.free_count);
  EXPECT_EQ(0u, second.live_at_end_count);
  replay_result_free(&second);
  Trace again;
  ASSERT_EQ(GMR_OK,
            replay_trace_read(again_path.c_str(), nullptr, &again.trace, err, sizeof err))
      << err;
  EXPECT_EQ(l.request_count, again.trace->summary.request_count);
  EXPECT_EQ(l.peak_live_bytes, again.trace->summary.peak_live_bytes);
  EXPECT_EQ(l.stream_count, again.trace->summary.stream_count);
}

INSTANTIATE_TEST_SUITE_P(RealTraces, LogRoundTrip,
                         ::testing::Values("gpt2_train.csv.gz", "multistream.csv.gz"));

class LogRoundTripKnown : public gmr_test::SimTest {};

TEST_F(LogRoundTripKnown, Gpt2TraceKeepsItsIndependentlyVerifiedNumbers) {
  // The numbers tests/replay_test.cc verified independently for the original.
  std::string path = Bundled("gpt2_train.csv.gz");
  ASSERT_FALSE(path.empty());
  Trace original;
  char err[512];
  ASSERT_EQ(GMR_OK, replay_trace_read(path.c_str(), nullptr, &original.trace, err, sizeof err));
  replay_result r;
  const std::string log_path = TempPath("gpt2_known.rmm.csv");
  ReplayThroughLog(original.trace, log_path, &r);
  replay_result_free(&r);
  Trace logged;
  ASSERT_EQ(GMR_OK, replay_trace_read(log_path.c_str(), nullptr, &logged.trace, err, sizeof err));
  EXPECT_EQ(6179u, logged.trace->summary.alloc_count);
  EXPECT_EQ(6179u, logged.trace->summary.free_count);
  EXPECT_EQ(UINT64_C(7701353160), logged.trace->summary.peak_live_bytes);
}

}  // namespace
