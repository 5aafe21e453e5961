// tests/replay_cli_test.cc: the `replay` binary end to end. Each test runs
// the built tool as a child process (always with --sim or on a machine
// without a GPU, so results do not depend on the machine) and checks its exit
// status, what it prints first, its table, and its error messages.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string TempDir() {
  const char *dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string ReplayBinary() {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/gmr/tools/replay/replay";
}

std::string ReadFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string WriteFile(const std::string &name, const std::string &content) {
  std::string path = TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  return path;
}

std::vector<std::string> Lines(const std::string &text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

bool StartsWith(const std::string &s, const std::string &prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

struct Output {
  int exit_code = -1;
  std::string out;
  std::string err;
};

struct RunOptions {
  std::string binary = ReplayBinary();
  std::string cwd;                // empty: the test's own
  bool clear_runfiles_env = false;  // as if started outside Bazel
};

Output RunReplay(const std::vector<std::string> &args, const RunOptions &options = RunOptions()) {
  static int counter = 0;
  std::string base = TempDir() + "/run" + std::to_string(counter++);
  std::string out_path = base + ".out";
  std::string err_path = base + ".err";
  pid_t pid = fork();
  if (pid == 0) {
    int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out_fd < 0 || err_fd < 0) _exit(126);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) _exit(126);
    if (options.clear_runfiles_env) {
      unsetenv("RUNFILES_DIR");
      unsetenv("TEST_SRCDIR");
      unsetenv("RUNFILES_MANIFEST_FILE");
    }
    std::vector<char *> argv;
    argv.push_back(const_cast<char *>(options.binary.c_str()));
    for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execv(options.binary.c_str(), argv.data());
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

const char kSimLine[] =
    "gmr replay: --sim given; replaying on the host simulation of the CUDA layer "
    "(timings are not GPU timings)";

TEST(ReplayCliTest, DefaultRunReplaysTheBundledTraceThroughThreeStacks) {
  Output r = RunReplay({"--sim"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_EQ("", r.err);
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 9u) << r.out;
  EXPECT_EQ(kSimLine, lines[0]);
  EXPECT_TRUE(StartsWith(lines[1], "trace ")) << lines[1];
  EXPECT_NE(std::string::npos,
            lines[1].find("gpt2_train.csv.gz (pytorch): 12355 requests (6179 allocs, 6176 "
                          "frees), 0 unmatched frees, 1 stream, sizes 4..823410688 B, peak live "
                          "7344.6 MiB, 3 live at end"))
      << lines[1];
  EXPECT_EQ("", lines[2]);
  EXPECT_TRUE(StartsWith(lines[3], "stack ")) << lines[3];
  // One row per stack, in the order asked for, then the reference row.
  EXPECT_TRUE(StartsWith(lines[4], "cuda_device ")) << lines[4];
  EXPECT_TRUE(StartsWith(lines[5], "cuda_async ")) << lines[5];
  EXPECT_TRUE(StartsWith(lines[6], "pool ")) << lines[6];
  for (int i : {4, 5, 6}) {
    std::istringstream row(lines[i]);
    std::string name, pass, temperature;
    size_t allocs = 0, frees = 0, failed = 99, live = 0;
    row >> name >> pass >> temperature >> allocs >> frees >> failed >> live;
    EXPECT_EQ("1", pass) << lines[i];  // one pass by default: the cold one
    EXPECT_EQ("cold", temperature) << lines[i];
    EXPECT_EQ(6179u, allocs) << lines[i];
    EXPECT_EQ(6176u, frees) << lines[i];
    EXPECT_EQ(0u, failed) << lines[i];
    EXPECT_EQ(3u, live) << lines[i];
  }
  EXPECT_NE(std::string::npos, lines[4].find(" 7344.6  1.000")) << lines[4];
  EXPECT_NE(std::string::npos, lines[6].find(" 7702.0  1.049")) << lines[6];  // the pool
  EXPECT_TRUE(StartsWith(lines[7], "recorder reserved ")) << lines[7];
  EXPECT_NE(std::string::npos, lines[7].find(" 7708.0  1.049")) << lines[7];
  EXPECT_TRUE(StartsWith(lines[8], "pass 1 starts on a fresh stack")) << lines[8];
  EXPECT_TRUE(StartsWith(lines[9], "mean ns: wall time of the pass")) << lines[9];
}

// The second table: the CUDA calls each stack made per pass. cudaMalloc and
// cudaMallocFromPoolAsync each serve every allocation of the trace.
TEST(ReplayCliTest, TheDriverCallsTableCountsEachStacksCalls) {
  Output r = RunReplay({"--sim"});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  std::vector<std::string> lines = Lines(r.out);
  size_t at = 0;
  while (at < lines.size() && !StartsWith(lines[at], "driver calls per pass")) ++at;
  ASSERT_LT(at + 4, lines.size()) << r.out;
  EXPECT_TRUE(StartsWith(lines[at + 1], "stack       pass    create     map")) << lines[at + 1];
  auto columns = [](const std::string &line) {
    std::istringstream row(line);
    std::string name, pass, temperature;
    std::vector<unsigned long long> v;
    row >> name >> pass >> temperature;
    unsigned long long x = 0;
    while (row >> x) v.push_back(x);
    return v;
  };
  // create map unmap release access reserve malloc free record query wait sync total
  std::vector<unsigned long long> device = columns(lines[at + 2]);
  ASSERT_EQ(13u, device.size()) << lines[at + 2];
  EXPECT_TRUE(StartsWith(lines[at + 2], "cuda_device 1 cold")) << lines[at + 2];
  EXPECT_EQ(6179u, device[6]) << lines[at + 2];
  EXPECT_EQ(6176u, device[7]) << lines[at + 2];
  EXPECT_EQ(0u, device[0]) << lines[at + 2];
  unsigned long long sum = 0;
  for (size_t k = 0; k + 1 < device.size(); ++k) sum += device[k];
  EXPECT_EQ(sum, device[12]) << lines[at + 2];
  std::vector<unsigned long long> async = columns(lines[at + 3]);
  ASSERT_EQ(13u, async.size()) << lines[at + 3];
  EXPECT_EQ(6179u, async[6]) << lines[at + 3];
  EXPECT_NE(std::string::npos, r.out.find("counted by the simulation of the CUDA layer")) << r.out;
}

// --sim-call-ns makes simulated calls slow, as a driver's: a growth of one
// 4 MiB handle with cuMemCreate taking 20 ms makes the pass's mean at least
// 20 ms over its two calls / 2.
TEST(ReplayCliTest, SimCallLatenciesSlowTheCallsTheyName) {
  std::string path = WriteFile("one_growth.csv",
                               "action,addr,size,stream,time_us\r\n"
                               "alloc,4096,4194304,0,1\r\n"
                               "free_requested,4096,4194304,0,2\r\n");
  Output r = RunReplay({"--sim", "--sim-call-ns", "cuMemCreate=20000000", "--stack",
                        "vmm(handle_divisor=0)", path});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  std::vector<std::string> lines = Lines(r.out);
  size_t at = 0;
  while (at < lines.size() && !StartsWith(lines[at], "vmm(handle_divisor=0) ")) ++at;
  ASSERT_LT(at, lines.size()) << r.out;
  std::istringstream row(lines[at].substr(std::string("vmm(handle_divisor=0)").size()));
  std::string pass, temperature;
  size_t allocs = 0, frees = 0, failed = 0, live = 0;
  double mean = 0;
  row >> pass >> temperature >> allocs >> frees >> failed >> live >> mean;
  EXPECT_GE(mean, 10e6) << lines[at];
  Output h200 = RunReplay({"--sim", "--sim-call-ns", "h200", "--stack", "vmm", path});
  EXPECT_EQ(0, h200.exit_code) << h200.err;
  Output unknown = RunReplay({"--sim", "--sim-call-ns", "cuMemFrobnicate=1", path});
  EXPECT_EQ(2, unknown.exit_code);
  EXPECT_NE(std::string::npos, unknown.err.find("'cuMemFrobnicate' is no CUDA call")) << unknown.err;
  Output bad = RunReplay({"--sim", "--sim-call-ns", "cuMemMap=fast", path});
  EXPECT_EQ(2, bad.exit_code);
  EXPECT_NE(std::string::npos, bad.err.find("--sim-call-ns cuMemMap")) << bad.err;
}

TEST(ReplayCliTest, MalformedLineFailsWithFileLineAndReason) {
  std::string path = WriteFile("bad.csv",
                               "action,addr,size,stream,time_us\r\n"
                               "alloc,4096,512,0,1\r\n"
                               "alloc,8192,0,0,2\r\n");
  Output r = RunReplay({"--sim", path});
  EXPECT_EQ(1, r.exit_code);
  EXPECT_EQ("gmr replay: " + path + ":3: allocation of 0 bytes\n", r.err);
  EXPECT_TRUE(StartsWith(r.out, kSimLine)) << r.out;

  Output skipped = RunReplay({"--sim", "--skip-malformed", "--stack", "host", path});
  EXPECT_EQ(0, skipped.exit_code) << skipped.out << skipped.err;
  EXPECT_NE(std::string::npos, skipped.out.find(", 1 malformed line skipped\n")) << skipped.out;
  EXPECT_NE(std::string::npos,
            skipped.out.find("\nfirst malformed line: " + path + ":3: allocation of 0 bytes\n"))
      << skipped.out;
}

TEST(ReplayCliTest, FailedAllocationsMakeTheRunFail) {
  // 2^62 bytes is more than gmr accepts (GMR_MAX_ALLOCATION_BYTES), so every
  // stack refuses it; the free of that allocation is skipped.
  std::string path = WriteFile("too_big.csv",
                               "action,addr,size,stream,time_us\n"
                               "alloc,4096,1024,0,1\n"
                               "alloc,8192,4611686018427387904,0,2\n"
                               "free_requested,8192,4611686018427387904,0,3\n"
                               "free_requested,4096,1024,0,4\n");
  Output r = RunReplay({"--sim", "--compare=cuda_device,host", "--trace", path});
  EXPECT_EQ(1, r.exit_code) << r.out << r.err;
  for (const char *stack : {"cuda_device", "host"}) {
    EXPECT_NE(std::string::npos,
              r.out.find(std::string("\n") + stack +
                         ": 1 failure (1 allocate, 0 deallocate, 1 skipped frees); first: line 3: "
                         "allocate 4611686018427387904 bytes on stream 0: "
                         "GMR_ERR_OUT_OF_MEMORY: "))
        << r.out;
  }
}

TEST(ReplayCliTest, UnknownStackFailsBeforeAnyWork) {
  Output r = RunReplay({"--sim", "--compare", "cuda_device,pooll"});
  EXPECT_EQ(2, r.exit_code);
  EXPECT_EQ("", r.out);
  EXPECT_EQ(
      "gmr replay: stack 'pooll': spec:1:1: unknown component 'pooll' (did you mean 'pool'? known: "
      "chunk_listener, cuda, cumem, fixed_block, graph_arena, host, limiting, log, nvtx_logging, "
      "oom, pool, symmetric, tracking, vmm, vmm_pages); "
      "aliases: cuda_device, cuda_async, cuda_managed, host, pool, fixed_block, graph_pool, "
      "vmm\n",
      r.err);
  Output typo = RunReplay({"--sim", "--stack", "tracking > limiting(limt=1GiB) > cuda"});
  EXPECT_EQ(2, typo.exit_code);
  EXPECT_EQ(
      "gmr replay: stack 'tracking > limiting(limt=1GiB) > cuda': spec:1:21: unknown option "
      "'limt' for limiting (did you mean 'limit'?); aliases: cuda_device, cuda_async, "
      "cuda_managed, host, pool, fixed_block, graph_pool, vmm\n",
      typo.err);
}

// The "done when": three specs in one --compare, one table, and a
// line per stack saying what its adaptors did.
TEST(ReplayCliTest, CompareTakesSpecsSeparatedBySemicolonsOrTopLevelCommas) {
  std::string path = WriteFile("three.csv",
                               "action,addr,size,stream,time_us\n"
                               "alloc,4096,1024,0,1\n"
                               "alloc,8192,2048,0,2\n"
                               "free_requested,4096,1024,0,3\n"
                               "alloc,16384,512,0,4\n"
                               "free_requested,8192,2048,0,5\n"
                               "free_requested,16384,512,0,6\n");
  const std::string fail = "tracking > limiting(limit=2KiB) > cuda(kind=async)";
  const std::string grow = "tracking > limiting(limit=2KiB, on_limit=increase) > cuda(kind=async)";
  Output r = RunReplay({"--sim", "--compare", "cuda_async," + fail + "; " + grow, path});
  EXPECT_EQ(1, r.exit_code) << r.out << r.err;  // the refusing stack failed a request
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 8u) << r.out;
  EXPECT_TRUE(StartsWith(lines[3], "stack ")) << lines[3];
  EXPECT_TRUE(StartsWith(lines[4], "cuda_async ")) << lines[4];
  EXPECT_TRUE(StartsWith(lines[5], fail + " ")) << lines[5];
  EXPECT_TRUE(StartsWith(lines[6], grow + " ")) << lines[6];
  EXPECT_TRUE(StartsWith(lines[7], "recorder reserved ")) << lines[7];
  std::istringstream row(lines[5].substr(fail.size()));
  std::string pass, temperature;
  size_t allocs = 0, frees = 0, failed = 0;
  row >> pass >> temperature >> allocs >> frees >> failed;
  EXPECT_EQ(3u, allocs);
  EXPECT_EQ(2u, frees);
  EXPECT_EQ(1u, failed);  // 1024 + 2048 > 2 KiB
  EXPECT_NE(std::string::npos,
            r.out.find("\nadaptors:\n" + fail +
                       ": tracking: peak 1024 bytes in 1 allocations, 1 owners, 0 bad frees; "
                       "limiting: limit 2048, peak used 1024, 1 refused, 0 raises, 0 overages"))
      << r.out;
  EXPECT_NE(std::string::npos,
            r.out.find("\n" + grow + ": tracking: peak 3072 bytes in 2 allocations, 1 owners, "
                       "0 bad frees; limiting: limit 3328, peak used 3072, 0 refused, 1 raises"))
      << r.out;
}

TEST(ReplayCliTest, RepeatedStackFlagsCompareToo) {
  std::string path = WriteFile("two.csv",
                               "action,addr,size,stream,time_us\n"
                               "alloc,4096,1024,0,1\n"
                               "free_requested,4096,1024,0,2\n");
  Output r = RunReplay({"--sim", "--stack", "host", "--stack",
                        "oom(policy=wait, wait_timeout_ms=10) > host", path});
  EXPECT_EQ(0, r.exit_code) << r.out << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 6u) << r.out;
  EXPECT_TRUE(StartsWith(lines[4], "host ")) << lines[4];
  EXPECT_TRUE(StartsWith(lines[5], "oom(policy=wait, wait_timeout_ms=10) > host ")) << lines[5];
}

TEST(ReplayCliTest, UnreadableTraceFails) {
  std::string missing = TempDir() + "/missing.csv.gz";
  Output r = RunReplay({"--sim", missing});
  EXPECT_EQ(1, r.exit_code);
  EXPECT_EQ("gmr replay: cannot open " + missing + ": No such file or directory\n", r.err);
}

TEST(ReplayCliTest, CommandLineErrors) {
  Output unknown = RunReplay({"--frobnicate"});
  EXPECT_EQ(2, unknown.exit_code);
  EXPECT_EQ("gmr replay: unknown option '--frobnicate' (see --help)\n", unknown.err);
  Output missing_value = RunReplay({"--stack"});
  EXPECT_EQ(2, missing_value.exit_code);
  EXPECT_EQ("gmr replay: --stack needs a value\n", missing_value.err);
  Output two_in_one = RunReplay({"--stack", "host, cuda"});  // --stack takes one spec
  EXPECT_EQ(2, two_in_one.exit_code);
  EXPECT_EQ("gmr replay: stack 'host, cuda': spec:1:5: expected '>' or the end of the spec, "
            "found ','; aliases: cuda_device, cuda_async, cuda_managed, host, pool, "
            "fixed_block, graph_pool, vmm\n",
            two_in_one.err);
  Output two_traces = RunReplay({"a.csv", "b.csv"});
  EXPECT_EQ(2, two_traces.exit_code);
  EXPECT_EQ("gmr replay: more than one trace given ('a.csv' and 'b.csv')\n", two_traces.err);
}

TEST(ReplayCliTest, HelpPrintsUsage) {
  Output r = RunReplay({"--help"});
  EXPECT_EQ(0, r.exit_code);
  EXPECT_TRUE(StartsWith(r.out, "usage: replay [options] [TRACE]\n")) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("A second table gives per pass the CUDA calls"))
      << r.out;
  EXPECT_NE(std::string::npos, r.out.find("access (cuMemSetAccess)")) << r.out;
  EXPECT_NE(std::string::npos,
            r.out.find("or an alias: cuda_device = cuda(kind=device), cuda_async = "
                       "cuda(kind=async), cuda_managed = cuda(kind=managed), host = host"))
      << r.out;
  Output components = RunReplay({"--components"});
  EXPECT_EQ(0, components.exit_code);
  EXPECT_NE(std::string::npos, components.out.find("limiting (adaptor): ")) << components.out;
}

// A copy of the binary outside Bazel finds the default trace in
// <argv0>.runfiles, and says where it looked when there is none.
TEST(ReplayCliTest, CopiedBinaryFindsItsRunfilesOrSaysWhereItLooked) {
  std::string dir = TempDir() + "/copied";
  std::string traces = dir + "/replay.runfiles/gmr/tools/traces";
  ASSERT_EQ(0, std::system(("mkdir -p '" + traces + "'").c_str()));
  RunOptions options;
  options.binary = dir + "/replay";
  options.cwd = dir;
  options.clear_runfiles_env = true;
  ASSERT_EQ(0, std::system(("cp '" + ReplayBinary() + "' '" + options.binary + "'").c_str()));

  Output not_found = RunReplay({"--sim"}, options);
  EXPECT_EQ(1, not_found.exit_code);
  EXPECT_NE(std::string::npos,
            not_found.err.find("gmr replay: the bundled trace gpt2_train.csv.gz was not found; "
                               "looked in: tools/traces/gpt2_train.csv.gz, " +
                               options.binary +
                               ".runfiles/gmr/tools/traces/gpt2_train.csv.gz"))
      << not_found.err;

  // A small stand-in for the bundled trace, so the run stays quick.
  WriteFile("copied/replay.runfiles/gmr/tools/traces/gpt2_train.csv.gz",
            "action,addr,size,stream,time_us\nalloc,4096,512,0,1\n");
  Output found = RunReplay({"--sim", "--stack", "host"}, options);
  EXPECT_EQ(0, found.exit_code) << found.out << found.err;
  EXPECT_NE(std::string::npos,
            found.out.find("trace " + options.binary +
                           ".runfiles/gmr/tools/traces/gpt2_train.csv.gz (pytorch): 1 request (1 alloc, "
                           "0 frees)"))
      << found.out;
}

}  // namespace
