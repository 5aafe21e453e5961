// tests/bench_cli_test.cc: the `bench` binary end to end, on the host
// simulation (--sim): its first line, its one table, its exit status and its
// errors; and the pool's footprint on the four real traces, which the
// simulation counts exactly (a regression test of BENCHMARKS.md's numbers).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string TempDir() {
  const char *dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string BenchBinary() {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/gmr/tools/bench/bench";
}

// A bundled trace, in the runfiles the bench binary brings.
std::string TraceFile(const std::string &name) {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/gmr/tools/traces/" + name;
}

std::string ReadFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string &text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

std::vector<std::string> Words(const std::string &line) {
  std::vector<std::string> words;
  std::stringstream ss(line);
  std::string w;
  while (ss >> w) words.push_back(w);
  return words;
}

struct Output {
  int exit_code = -1;
  std::string out;
  std::string err;
};

Output RunBench(const std::vector<std::string> &args) {
  static int counter = 0;
  std::string base = TempDir() + "/bench" + std::to_string(counter++);
  std::string out_path = base + ".out", err_path = base + ".err";
  std::string binary = BenchBinary();
  pid_t pid = fork();
  if (pid == 0) {
    int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out_fd < 0 || err_fd < 0) _exit(126);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    std::vector<char *> argv;
    argv.push_back(const_cast<char *>(binary.c_str()));
    for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  Output result;
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  return result;
}

// The table's rows by "workload stack".
std::map<std::string, std::vector<std::string>> Rows(const std::string &out) {
  std::map<std::string, std::vector<std::string>> rows;
  for (const std::string &line : Lines(out)) {
    std::vector<std::string> w = Words(line);
    if (w.size() >= 14 && (w[0].rfind("random", 0) == 0 || w[0].rfind("fixed", 0) == 0 ||
                           w[0].rfind("threads", 0) == 0 || w[0].rfind("trace:", 0) == 0)) {
      rows[w[0] + " " + w[1]] = w;
    }
  }
  return rows;
}

constexpr size_t kMean = 5;          // column of ns/call (traces: the cold mean)
constexpr size_t kWarm = 6;          // column of warm_ns (traces only)
constexpr size_t kSpeedup = 8;       // column of speedup
constexpr size_t kHeldOverLive = 10;  // column of held/live
constexpr size_t kFailures = 13;      // column of failures

TEST(BenchCliTest, QuickRunSaysSimulationAndPrintsOneRowPerWorkloadAndStack) {
  Output r = RunBench({"--sim", "--quick", "--workloads", "random,fixed,threads", "--threads",
                       "1,2", "--stacks", "pool,fixed_block,cuda_async"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(0u, lines[0].rfind("gmr bench: SIMULATED device (--sim given)", 0)) << lines[0];
  auto rows = Rows(r.out);
  EXPECT_EQ(3u * (1 + 2 + 2), rows.size()) << r.out;  // random, fixed x2 sizes, threads x2
  for (const char *stack : {"pool", "fixed_block", "cuda_async"}) {
    for (const char *w : {"random(<=1024KiB)", "fixed(64KiB)", "fixed(1024KiB)",
                          "threads=1(<=64KiB)", "threads=2(<=64KiB)"}) {
      auto it = rows.find(std::string(w) + " " + stack);
      ASSERT_NE(rows.end(), it) << w << " " << stack << "\n" << r.out;
      EXPECT_EQ("0", it->second[kFailures]) << w << " " << stack;
    }
  }
  // A threads row of one thread is its own reference.
  EXPECT_EQ("1.00", rows["threads=1(<=64KiB) pool"][kSpeedup]);
  EXPECT_EQ("-", rows["random(<=1024KiB) pool"][kWarm]) << "no warm pass outside the traces";
  EXPECT_EQ("", r.err);
}

TEST(BenchCliTest, PoolFootprintOnTheRealTracesIsExactOnTheSimulation) {
  Output r = RunBench({"--sim", "--workloads", "traces", "--stacks", "pool", "--seconds", "600"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  auto rows = Rows(r.out);
  // Peak held / peak live with the default configuration (BENCHMARKS.md).
  EXPECT_EQ("1.049", rows["trace:gpt2_train pool"][kHeldOverLive]) << r.out;
  EXPECT_EQ("1.036", rows["trace:resnet50_train pool"][kHeldOverLive]) << r.out;
  EXPECT_EQ("1.072", rows["trace:gpt2_graph_capture pool"][kHeldOverLive]) << r.out;
  EXPECT_EQ("1.536", rows["trace:multistream pool"][kHeldOverLive]) << r.out;
  for (const auto &row : rows) {
    EXPECT_EQ("0", row.second[kFailures]) << row.first;
    // A cold and a warm mean (3 passes by default); no timings compared.
    EXPECT_GT(std::atof(row.second[kMean].c_str()), 0.0) << row.first;
    EXPECT_GT(std::atof(row.second[kWarm].c_str()), 0.0) << row.first;
  }
  EXPECT_NE(std::string::npos, r.out.find("warm_ns: the best mean of passes 2..3")) << r.out;
}

TEST(BenchCliTest, OnePassHasNoWarmMeanAndBadPassCountsAreRefused) {
  Output r = RunBench({"--sim", "--workloads", "traces", "--stacks", "pool", "--passes", "1",
                       "--trace", TraceFile("multistream.csv.gz")});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  auto rows = Rows(r.out);
  ASSERT_EQ(1u, rows.size()) << r.out;
  EXPECT_EQ("-", rows.begin()->second[kWarm]);
  for (const char *bad : {"0", "1001", "x", "-2"}) {
    Output o = RunBench({"--sim", "--workloads", "traces", "--passes", bad});
    EXPECT_EQ(2, o.exit_code) << bad;
    EXPECT_NE(std::string::npos, o.err.find(std::string("bench: --passes ") + bad + ": "))
        << o.err;
  }
  for (const char *bad : {"nan", "inf", "1e3", "-1"}) {
    EXPECT_EQ(2, RunBench({"--seconds", bad}).exit_code) << bad;
    EXPECT_EQ(2, RunBench({"--random-max-bytes", bad}).exit_code) << bad;
  }
}

TEST(BenchCliTest, AnUnknownStackIsAUsageErrorListingTheKnownOnes) {
  Output r = RunBench({"--sim", "--stacks", "pool,pol"});
  EXPECT_EQ(2, r.exit_code);
  EXPECT_EQ("bench: stack 'pol': spec:1:1: unknown component 'pol' (did you mean 'pool'? known: "
            "chunk_listener, cuda, cumem, fixed_block, graph_arena, host, limiting, log, "
            "nvtx_logging, oom, pool, symmetric, tracking, vmm, vmm_pages); aliases: "
            "cuda_device, cuda_async, cuda_managed, host, pool, fixed_block, graph_pool, vmm, "
            "pool_device, pool_one_arena, fixed_block_device, pool_host\n",
            r.err);
  EXPECT_EQ("", r.out);  // nothing ran
}

TEST(BenchCliTest, StacksMayBeSpecsWithCommasInsideParentheses) {
  Output r = RunBench({"--sim", "--quick", "--workloads", "fixed", "--stacks",
                       "pool(arenas=1, recent_frees=0) > cuda(kind=async); host"});
  EXPECT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.out.find("pool(arenas=1, recent_frees=0) > cuda(kind=async)"))
      << r.out;
  EXPECT_NE(std::string::npos, r.out.find("host")) << r.out;
}

TEST(BenchCliTest, BadArgumentsAreUsageErrors) {
  EXPECT_EQ(2, RunBench({"--workloads", "randm"}).exit_code);
  EXPECT_EQ(2, RunBench({"--threads", "0"}).exit_code);
  EXPECT_EQ(2, RunBench({"--fixed-bytes", "12x"}).exit_code);
  EXPECT_EQ(2, RunBench({"--seconds", "-1"}).exit_code);
  EXPECT_EQ(2, RunBench({"--frobnicate"}).exit_code);
  Output help = RunBench({"--help"});
  EXPECT_EQ(0, help.exit_code);
  EXPECT_NE(std::string::npos, help.out.find("usage: bench")) << help.out;
}

// rmm#2507's holes: fixed_block's 1 MiB blocks make each 512 B hole a whole
// block, so 65,536 holes need 128 GiB of the simulated 80: the row says why
// the workload does not apply (not a failure), and the failed setup gives
// every block back, so the next row has the whole device again.
TEST(BenchCliTest, HolesThatCannotFitTheDeviceDoNotApplyAndLeaveItWhole) {
  Output r = RunBench({"--sim", "--workloads", "holes", "--holes", "65536", "--ops", "2000",
                       "--stacks", "fixed_block;fixed_block(block=1KiB) > cuda"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  std::string na, small;
  for (const std::string &line : Lines(r.out)) {
    if (line.rfind("holes(65536)", 0) != 0) continue;
    std::vector<std::string> w = Words(line);
    ASSERT_GE(w.size(), 2u) << line;
    (w[1] == "fixed_block" ? na : small) = line;
  }
  EXPECT_NE(std::string::npos,
            na.find("does not apply: each 512 B request holds 1024 KiB here (80.0 GiB after "
                    "81920 blocks), so 131073 blocks need 128.0 GiB, more than the device's "
                    "80.0 GiB"))
      << r.out;
  std::vector<std::string> w = Words(small);
  ASSERT_EQ(16u, w.size()) << small;  // no message: it ran
  EXPECT_NE("-", w[5]) << small;      // pair_p50
  EXPECT_EQ("0", w[15]) << small;     // failures
  EXPECT_EQ("", r.err);
}

TEST(BenchCliTest, AnUnreadableTraceFailsTheRun) {
  Output r = RunBench({"--sim", "--quick", "--workloads", "traces", "--stacks", "pool", "--trace",
                       TempDir() + "/no-such-trace.csv.gz"});
  EXPECT_EQ(1, r.exit_code) << r.out;
  EXPECT_NE(std::string::npos, r.err.find("no-such-trace")) << r.err;
}

}  // namespace
