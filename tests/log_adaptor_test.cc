// log_adaptor: RMM's CSV format, row order under threads (a free row always
// precedes the next allocate row of the same address), durability modes,
// write errors, and bad arguments.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmr/log_adaptor.h"
#include "gmr/resource.h"
#include "tests/support/gate_resource.h"
#include "tests/support/log_stats.h"
#include "tests/support/mock_resource.h"

namespace {

struct Row {
  long thread;
  int hours, minutes, seconds, micros;
  std::string action;
  uint64_t pointer;
  uint64_t size;
  uint64_t stream;
};

std::string temp_path(const std::string &name) {
  const char *dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::vector<std::string> read_lines(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Reads an unsigned number in `base` from s[*at..], exactly `width` digits
// when width > 0; false on anything else.
bool take_number(const std::string &s, size_t *at, int base, size_t width, uint64_t *out) {
  size_t start = *at;
  uint64_t value = 0;
  while (*at < s.size()) {
    char c = s[*at];
    int digit = (c >= '0' && c <= '9') ? c - '0' : (base == 16 && c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (digit < 0) break;
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(digit);
    (*at)++;
    if (width > 0 && *at - start == width) break;
  }
  *out = value;
  return *at > start && (width == 0 || *at - start == width);
}

bool take(const std::string &s, size_t *at, const std::string &what) {
  if (s.compare(*at, what.size(), what) != 0) return false;
  *at += what.size();
  return true;
}

// Parse one data row; fails the test on anything that is not RMM's format:
// THREAD,HH:MM:SS.UUUUUU,ACTION,0xPOINTER,SIZE,STREAM (lower-case hex).
Row parse(const std::string &line) {
  Row r{};
  size_t at = 0;
  uint64_t v[5] = {};
  bool ok = take_number(line, &at, 10, 0, &v[0]) && take(line, &at, ",") &&
            take_number(line, &at, 10, 2, &v[1]) && take(line, &at, ":") &&
            take_number(line, &at, 10, 2, &v[2]) && take(line, &at, ":") &&
            take_number(line, &at, 10, 2, &v[3]) && take(line, &at, ".") &&
            take_number(line, &at, 10, 6, &v[4]) && take(line, &at, ",");
  if (ok) {
    for (const char *action : {"allocate failure,", "allocate,", "free,"}) {
      if (take(line, &at, action)) {
        r.action = std::string(action, std::strlen(action) - 1);
        break;
      }
    }
    ok = !r.action.empty();
  }
  ok = ok && take(line, &at, "0x") && take_number(line, &at, 16, 0, &r.pointer) &&
       take(line, &at, ",") && take_number(line, &at, 10, 0, &r.size) && take(line, &at, ",") &&
       take_number(line, &at, 16, 0, &r.stream) && at == line.size();
  EXPECT_TRUE(ok) << "not an RMM log row: " << line;
  r.thread = static_cast<long>(v[0]);
  r.hours = static_cast<int>(v[1]);
  r.minutes = static_cast<int>(v[2]);
  r.seconds = static_cast<int>(v[3]);
  r.micros = static_cast<int>(v[4]);
  return r;
}

long micros_of_day(const Row &r) {
  return ((r.hours * 60L + r.minutes) * 60L + r.seconds) * 1000000L + r.micros;
}

class LogAdaptorTest : public ::testing::Test {
 protected:
  gmr_mock_resource *mock_ = nullptr;

  void SetUp() override {
    mock_ = gmr_mock_resource_create(nullptr);
    ASSERT_NE(nullptr, mock_);
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_mock_resource_as_resource(mock_)));
  }

  gmr_log_adaptor *make_to_path(const std::string &path,
                                gmr_log_flush flush = GMR_LOG_FLUSH_EVERY_ROW,
                                gmr_resource *upstream = nullptr) {
    gmr_log_adaptor_config config = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
    config.path = path.c_str();
    config.flush = flush;
    gmr_log_adaptor *log = nullptr;
    EXPECT_EQ(GMR_OK, gmr_log_adaptor_create(
                          upstream != nullptr ? upstream : gmr_mock_resource_as_resource(mock_),
                          &config, &log));
    return log;
  }
};

TEST_F(LogAdaptorTest, WritesRmmRowsForAllocateFailureAndFree) {
  const std::string path = temp_path("rows.csv");
  gmr_log_adaptor *log = make_to_path(path);
  ASSERT_NE(nullptr, log);
  gmr_resource *r = gmr_log_adaptor_as_resource(log);
  const gmr_stream s = reinterpret_cast<gmr_stream>(uintptr_t{0x7f3c2c000b40});

  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 1 << 20, 0, nullptr, &a));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 256, 0, s, &b));
  gmr_mock_resource_try_fail(mock_, 0, 1, GMR_ERR_OUT_OF_MEMORY, 2);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate(r, 12345, 0, s, &c));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 256, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 1 << 20, 0, nullptr));
  EXPECT_EQ(5u, gmr_test::LogStats(log).row_count);
  EXPECT_EQ(0u, gmr_test::LogStats(log).write_error_count);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));

  std::vector<std::string> lines = read_lines(path);
  ASSERT_EQ(6u, lines.size());
  EXPECT_EQ("Thread,Time,Action,Pointer,Size,Stream", lines[0]);
  const long tid = static_cast<long>(syscall(SYS_gettid));
  struct Want {
    const char *action;
    uint64_t pointer, size, stream;
  } want[] = {
      {"allocate", reinterpret_cast<uintptr_t>(a), 1 << 20, 0},
      {"allocate", reinterpret_cast<uintptr_t>(b), 256, 0x7f3c2c000b40},
      {"allocate failure", 0, 12345, 0x7f3c2c000b40},
      {"free", reinterpret_cast<uintptr_t>(b), 256, 0x7f3c2c000b40},
      {"free", reinterpret_cast<uintptr_t>(a), 1 << 20, 0},
  };
  long previous = -1;
  for (size_t i = 0; i < 5; ++i) {
    Row row = parse(lines[i + 1]);
    EXPECT_EQ(tid, row.thread) << lines[i + 1];
    EXPECT_EQ(want[i].action, row.action) << lines[i + 1];
    EXPECT_EQ(want[i].pointer, row.pointer) << lines[i + 1];
    EXPECT_EQ(want[i].size, row.size) << lines[i + 1];
    EXPECT_EQ(want[i].stream, row.stream) << lines[i + 1];
    long t = micros_of_day(row);
    if (previous >= 0 && t < previous) {
      EXPECT_LT(previous - t, 1000000L) << "time went backwards (only midnight may wrap)";
    }
    previous = t;
  }
  // The exact text of the two column styles RMM uses.
  EXPECT_NE(std::string::npos, lines[3].find(",allocate failure,0x0,12345,7f3c2c000b40"));
  EXPECT_NE(std::string::npos, lines[5].find(",1048576,0"));
}

TEST_F(LogAdaptorTest, RefusedFreeWritesNoRowAndTheRetryDoes) {
  gmr_gate_resource *gate = gmr_gate_resource_create(gmr_mock_resource_as_resource(mock_));
  ASSERT_NE(nullptr, gate);
  const std::string path = temp_path("refused.csv");
  gmr_log_adaptor *log = make_to_path(path, GMR_LOG_FLUSH_EVERY_ROW,
                                      gmr_gate_resource_as_resource(gate));
  gmr_resource *r = gmr_log_adaptor_as_resource(log);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 640, 0, nullptr, &p));
  gmr_gate_resource_refuse_frees(gate, 1, GMR_ERR_CAPTURE_UNSAFE);
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_deallocate(r, p, 640, 0, nullptr));
  EXPECT_EQ(1u, gmr_test::LogStats(log).row_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 640, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_gate_resource_as_resource(gate)));

  std::vector<std::string> lines = read_lines(path);
  ASSERT_EQ(3u, lines.size());
  EXPECT_EQ("allocate", parse(lines[1]).action);
  EXPECT_EQ("free", parse(lines[2]).action);
}

TEST_F(LogAdaptorTest, EveryRowModeHandsEachRowToTheSystemBeforeReturning) {
  const std::string path = temp_path("durable.csv");
  gmr_log_adaptor *log = make_to_path(path, GMR_LOG_FLUSH_EVERY_ROW);
  gmr_resource *r = gmr_log_adaptor_as_resource(log);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 64, 0, nullptr, &p));
  // Read through another FILE while the adaptor's is open.
  EXPECT_EQ(2u, read_lines(path).size());
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64, 0, nullptr));
  EXPECT_EQ(3u, read_lines(path).size());
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(LogAdaptorTest, BufferedModeHoldsRowsUntilFlushOrDestroy) {
  const std::string path = temp_path("buffered.csv");
  gmr_log_adaptor *log = make_to_path(path, GMR_LOG_FLUSH_BUFFERED);
  gmr_resource *r = gmr_log_adaptor_as_resource(log);
  EXPECT_EQ(1u, read_lines(path).size()) << "the header is flushed at create";
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 64, 0, nullptr, &p));
  EXPECT_EQ(1u, read_lines(path).size()) << "one short row stays in the stdio buffer";
  EXPECT_EQ(GMR_OK, gmr_log_adaptor_flush(log));
  EXPECT_EQ(2u, read_lines(path).size());
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64, 0, nullptr));
  EXPECT_EQ(2u, read_lines(path).size());
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(3u, read_lines(path).size()) << "destroy flushes";
}

TEST_F(LogAdaptorTest, BorrowedFileIsWrittenButNotClosed) {
  std::FILE *file = std::tmpfile();
  ASSERT_NE(nullptr, file);
  gmr_log_adaptor_config config = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
  config.file = file;
  gmr_log_adaptor *log = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_log_adaptor_create(gmr_mock_resource_as_resource(mock_), &config, &log));
  gmr_resource *r = gmr_log_adaptor_as_resource(log);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  // Still open: we can write and read it.
  EXPECT_GE(std::fputs("end\n", file), 0);
  std::rewind(file);
  std::vector<std::string> lines;
  char buf[256];
  while (std::fgets(buf, sizeof buf, file) != nullptr) lines.emplace_back(buf);
  ASSERT_EQ(4u, lines.size());
  EXPECT_EQ("Thread,Time,Action,Pointer,Size,Stream\n", lines[0]);
  EXPECT_EQ("allocate", parse(lines[1].substr(0, lines[1].size() - 1)).action);
  EXPECT_EQ("free", parse(lines[2].substr(0, lines[2].size() - 1)).action);
  EXPECT_EQ("end\n", lines[3]);
  std::fclose(file);
}

TEST_F(LogAdaptorTest, WriteErrorsAreCountedAndNeverFailTheAllocation) {
  std::FILE *full = std::fopen("/dev/full", "w");
  if (full == nullptr) GTEST_SKIP() << "/dev/full is not available here";
  gmr_log_adaptor_config config = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
  config.file = full;
  gmr_log_adaptor *log = nullptr;
  ASSERT_EQ(GMR_OK, gmr_log_adaptor_create(gmr_mock_resource_as_resource(mock_), &config, &log));
  EXPECT_EQ(1u, gmr_test::LogStats(log).write_error_count) << "the header could not be written";
  gmr_resource *r = gmr_log_adaptor_as_resource(log);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 100, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 100, 0, nullptr));
  EXPECT_EQ(3u, gmr_test::LogStats(log).write_error_count);
  EXPECT_EQ(0u, gmr_test::LogStats(log).row_count);
  EXPECT_EQ(0u, gmr_mock_resource_live_bytes(mock_));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  std::fclose(full);
}

// The stats struct's header: the library fills what fits in the caller's
// `size` and never the header, as for every caller-allocated struct.
TEST_F(LogAdaptorTest, StatsFillWhatFitsTheCallersSizeAndNothingPastIt) {
  gmr_log_adaptor *log = make_to_path(temp_path("stats.csv"));
  ASSERT_NE(nullptr, log);
  gmr_resource *r = gmr_log_adaptor_as_resource(log);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 64, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 64, 0, nullptr));

  // A caller whose struct ends after row_count.
  const size_t smaller = offsetof(gmr_log_adaptor_stats, write_error_count);
  std::vector<unsigned char> bytes(sizeof(gmr_log_adaptor_stats) + 16, 0xA5);
  auto *stats = reinterpret_cast<gmr_log_adaptor_stats *>(bytes.data());
  stats->size = smaller;
  stats->version = 1;
  ASSERT_EQ(GMR_OK, gmr_log_adaptor_get_stats(log, stats));
  EXPECT_EQ(smaller, stats->size) << "the header is the caller's";
  EXPECT_EQ(1u, stats->version);
  EXPECT_EQ(2u, stats->row_count);
  for (size_t i = smaller; i < bytes.size(); ++i) {
    EXPECT_EQ(0xA5, bytes[i]) << "byte " << i << " past the caller's size was written";
  }
  // Below the header, or version 0: refused, nothing written.
  gmr_log_adaptor_stats bad = GMR_LOG_ADAPTOR_STATS_INIT;
  bad.size = sizeof bad.size;
  bad.row_count = 77;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_get_stats(log, &bad));
  EXPECT_EQ(77u, bad.row_count);
  bad = GMR_LOG_ADAPTOR_STATS_INIT;
  bad.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_get_stats(log, &bad));
  EXPECT_EQ(2u, gmr_test::LogStats(log).row_count);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(LogAdaptorTest, BadArgumentsAreRefusedAndCreateNothing) {
  gmr_resource *up = gmr_mock_resource_as_resource(mock_);
  gmr_log_adaptor_config config = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
  gmr_log_adaptor *out = reinterpret_cast<gmr_log_adaptor *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_create(up, &config, &out))
      << "neither path nor file";
  EXPECT_EQ(nullptr, out);
  config.path = "x.csv";
  config.file = stderr;
  out = reinterpret_cast<gmr_log_adaptor *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_create(up, &config, &out)) << "both";
  EXPECT_EQ(nullptr, out);
  config.file = nullptr;
  config.path = "/nonexistent-directory/for/sure/log.csv";
  out = reinterpret_cast<gmr_log_adaptor *>(0x1);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_create(up, &config, &out));
  EXPECT_EQ(nullptr, out);
  const std::string path = temp_path("never.csv");
  config.path = path.c_str();
  config.flush = static_cast<gmr_log_flush>(7);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_create(up, &config, &out));
  EXPECT_EQ(nullptr, out);
  config.flush = GMR_LOG_FLUSH_EVERY_ROW;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_create(up, nullptr, &out));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_create(nullptr, &config, &out));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_create(up, &config, nullptr));
  std::ifstream never(path);
  EXPECT_FALSE(never.good()) << "a refused create must not create the file";

  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_flush(nullptr));
  gmr_log_adaptor_stats stats = GMR_LOG_ADAPTOR_STATS_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_get_stats(nullptr, &stats));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_log_adaptor_get_stats(nullptr, nullptr));
  EXPECT_EQ(nullptr, gmr_log_adaptor_as_resource(nullptr));
  EXPECT_EQ(nullptr, gmr_log_adaptor_from_resource(nullptr));
}

TEST_F(LogAdaptorTest, IsAStackableResourceThatForwardsTrim) {
  gmr_log_adaptor *log = make_to_path(temp_path("stack.csv"));
  gmr_resource *r = gmr_log_adaptor_as_resource(log);
  EXPECT_STREQ("log_adaptor", gmr_resource_get_type_name(r));
  EXPECT_EQ(log, gmr_log_adaptor_from_resource(r));
  EXPECT_EQ(nullptr, gmr_log_adaptor_from_resource(gmr_mock_resource_as_resource(mock_)));
  EXPECT_EQ(gmr_mock_resource_as_resource(mock_), gmr_resource_get_upstream(r));
  gmr_mock_resource_set_trim_release(mock_, 512);
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(512u, released);
  EXPECT_EQ(0u, gmr_test::LogStats(log).row_count) << "trim is not an allocation";
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

// A leaf that hands the most recently freed block to whichever thread asks
// next: addresses move between threads at once, which is what makes a late
// free row visible.
struct LifoLeaf {
  gmr_resource base;
  std::mutex mutex;
  std::vector<char *> free_blocks;
  std::vector<char> slab;
  static constexpr size_t kBlockBytes = 512;
};

gmr_status lifo_allocate(gmr_resource *self, size_t bytes, size_t, gmr_stream, void **out,
                         gmr_failure *) {
  LifoLeaf *leaf = reinterpret_cast<LifoLeaf *>(self);
  if (bytes > LifoLeaf::kBlockBytes) return GMR_ERR_UNSUPPORTED;
  std::lock_guard<std::mutex> lock(leaf->mutex);
  if (leaf->free_blocks.empty()) return GMR_ERR_OUT_OF_MEMORY;
  *out = leaf->free_blocks.back();
  leaf->free_blocks.pop_back();
  return GMR_OK;
}

gmr_status lifo_deallocate(gmr_resource *self, void *ptr, size_t, size_t, gmr_stream) {
  LifoLeaf *leaf = reinterpret_cast<LifoLeaf *>(self);
  std::lock_guard<std::mutex> lock(leaf->mutex);
  leaf->free_blocks.push_back(static_cast<char *>(ptr));
  return GMR_OK;
}

gmr_status lifo_destroy(gmr_resource *) { return GMR_OK; }

const gmr_resource_vtbl lifo_vtbl = {GMR_RESOURCE_VTBL_VERSION, "lifo_leaf", lifo_allocate,
                                     lifo_deallocate, lifo_destroy, nullptr, nullptr, nullptr,
                                     nullptr, nullptr, nullptr, nullptr};

// Threads allocate, and free one another's blocks, through a leaf that reuses
// an address the moment it is freed. Read in file order, the log must never
// show an address allocated while it is live, nor a free of an address not
// live: the failure RMM's adaptors had (#2304) when books followed release.
TEST_F(LogAdaptorTest, ThreadsNeverSeeAnAddressReusedBeforeItsFreeRow) {
  constexpr size_t kBlocks = 32;
  LifoLeaf leaf;
  leaf.base.vtbl = &lifo_vtbl;
  leaf.slab.resize(kBlocks * LifoLeaf::kBlockBytes + 256);
  char *first = reinterpret_cast<char *>(
      (reinterpret_cast<uintptr_t>(leaf.slab.data()) + 255) & ~uintptr_t{255});
  for (size_t i = 0; i < kBlocks; ++i) leaf.free_blocks.push_back(first + i * LifoLeaf::kBlockBytes);

  const std::string path = temp_path("threads.csv");
  gmr_log_adaptor *log = make_to_path(path, GMR_LOG_FLUSH_BUFFERED, &leaf.base);
  gmr_resource *r = gmr_log_adaptor_as_resource(log);
  constexpr int kThreads = 8;
  constexpr int kOps = 3000;
  // Blocks any thread may free: (pointer, size).
  std::mutex shared_mutex;
  std::vector<std::pair<void *, size_t>> shared;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < kOps; ++i) {
        std::pair<void *, size_t> victim{nullptr, 0};
        {
          std::lock_guard<std::mutex> lock(shared_mutex);
          if (!shared.empty() && (rng() % 2 == 0 || shared.size() > kBlocks / 2)) {
            size_t k = rng() % shared.size();
            victim = shared[k];
            shared[k] = shared.back();
            shared.pop_back();
          }
        }
        if (victim.first != nullptr) {
          if (gmr_resource_deallocate(r, victim.first, victim.second, 0, nullptr) != GMR_OK)
            failures++;
          continue;
        }
        size_t bytes = 1 + rng() % LifoLeaf::kBlockBytes;
        void *p = nullptr;
        if (gmr_resource_allocate(r, bytes, 0, nullptr, &p) != GMR_OK)
          continue;  // leaf empty: fine
        std::lock_guard<std::mutex> lock(shared_mutex);
        shared.emplace_back(p, bytes);
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  for (auto &b : shared)
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b.first, b.second, 0, nullptr));
  const uint64_t rows = gmr_test::LogStats(log).row_count;
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));

  std::vector<std::string> lines = read_lines(path);
  ASSERT_EQ(rows + 1, lines.size());
  std::map<uint64_t, uint64_t> live;  // pointer -> size
  std::set<long> thread_ids;
  size_t allocs = 0, frees = 0, failed = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    Row row = parse(lines[i]);
    thread_ids.insert(row.thread);
    if (row.action == "allocate") {
      allocs++;
      ASSERT_EQ(0u, live.count(row.pointer)) << "line " << i << " allocates a live address";
      live[row.pointer] = row.size;
    } else if (row.action == "allocate failure") {
      failed++;
    } else {
      frees++;
      auto it = live.find(row.pointer);
      ASSERT_NE(live.end(), it) << "line " << i << " frees an address that is not live";
      EXPECT_EQ(it->second, row.size) << "line " << i;
      live.erase(it);
    }
  }
  EXPECT_TRUE(live.empty());
  EXPECT_EQ(allocs, frees);
  EXPECT_GT(allocs, size_t{kThreads} * kOps / 4);
  // The workers, and this thread for the blocks left at the end.
  EXPECT_EQ(static_cast<size_t>(kThreads) + (shared.empty() ? 0 : 1), thread_ids.size());
}

}  // namespace
