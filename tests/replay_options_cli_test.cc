// The `replay` binary's options of issue 14 end to end: --passes, --plot,
// snapshot pickles and --snapshot-device, and the refusal of bad values
// (--arena-reserve nan and friends) before any work.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

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

std::string Runfile(const std::string &path) {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/gmr/" + path;
}

std::string Read(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

struct Output {
  int exit_code = -1;
  std::string out, err;
};

// Runs the built tool with `args` (already shell-safe).
Output RunReplay(const std::string &args) {
  std::string out = TempDir() + "/out.txt", err = TempDir() + "/err.txt";
  int status = std::system(
      (Runfile("tools/replay/replay") + " " + args + " >" + out + " 2>" + err).c_str());
  Output o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = Read(out);
  o.err = Read(err);
  return o;
}

std::string SmallTrace() {
  std::string path = TempDir() + "/small.csv";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << "action,addr,size,stream,time_us\n"
         "alloc,4096,1024,0,1\n"
         "alloc,8192,4096,0,2\n"
         "free_requested,4096,1024,0,3\n"
         "free_requested,8192,4096,0,4\n";
  return path;
}

TEST(ReplayOptionsCli, BadPassCountsAreUsageErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0", "gmr replay: --passes 0: below the smallest allowed, 1 (give 1 to 1000)\n"},
      {"1001", "gmr replay: --passes 1001: above the largest allowed, 1000 (give 1 to 1000)\n"},
      {"99999999999999999999999", "gmr replay: --passes 99999999999999999999999: not a whole "
                                  "number (give 1 to 1000)\n"},
      {"-1", "gmr replay: --passes -1: not a whole number (give 1 to 1000)\n"},
      {"2.5", "gmr replay: --passes 2.5: not a whole number (give 1 to 1000)\n"},
      {"many", "gmr replay: --passes many: not a whole number (give 1 to 1000)\n"},
  };
  for (const auto &c : cases) {
    Output o = RunReplay("--sim --stack host --passes " + c.first + " " + SmallTrace());
    EXPECT_EQ(2, o.exit_code) << c.first;
    EXPECT_EQ(c.second, o.err) << c.first;
    EXPECT_EQ("", o.out) << "nothing ran";
  }
}

TEST(ReplayOptionsCli, ArenaReserveRefusesNanInfinityNegativeZeroAndFractions) {
  for (const char *value : {"nan", "inf", "-0", "-1MiB", "0.5", "1e9", "0x10"}) {
    Output o = RunReplay(std::string("--sim --stack host --arena-reserve ") + value + " " +
                         SmallTrace());
    EXPECT_EQ(2, o.exit_code) << value;
    EXPECT_NE(std::string::npos,
              o.err.find(std::string("gmr replay: --arena-reserve '") + value + "': "))
        << o.err;
    EXPECT_NE(std::string::npos, o.err.find("give sizes such as 600MiB")) << o.err;
  }
  Output o = RunReplay("--sim --stack host --arena-reserve 0.5 " + SmallTrace());
  EXPECT_NE(std::string::npos, o.err.find("'0.5': not a whole number of bytes")) << o.err;
  o = RunReplay("--sim --stack host --arena-reserve 1.5MiB " + SmallTrace());
  EXPECT_EQ(0, o.exit_code) << o.err;
}

TEST(ReplayOptionsCli, PassesPrintOneRowEachColdThenWarm) {
  Output o = RunReplay("--sim --stack pool --passes 3 " + SmallTrace());
  ASSERT_EQ(0, o.exit_code) << o.out << o.err;
  // The stack is named on its first row; the name column is 10 wide here.
  EXPECT_NE(std::string::npos, o.out.find("\npool       1 cold ")) << o.out;
  EXPECT_NE(std::string::npos, o.out.find("\n           2 warm ")) << o.out;
  EXPECT_NE(std::string::npos, o.out.find("\n           3 warm ")) << o.out;
  EXPECT_EQ(std::string::npos, o.out.find(" 4 warm ")) << o.out;
}

TEST(ReplayOptionsCli, PlotWritesAFileAndRefusesPathsItCannotWrite) {
  std::string svg = TempDir() + "/memory.svg";
  Output o = RunReplay("--sim --compare 'host;pool' --passes 2 --plot " + svg + " " +
                       SmallTrace());
  ASSERT_EQ(0, o.exit_code) << o.out << o.err;
  EXPECT_NE(std::string::npos, o.out.find("\nplot: " + svg + "\n")) << o.out;
  std::string doc = Read(svg);
  EXPECT_EQ(0u, doc.find("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ")) << doc;
  EXPECT_NE(std::string::npos, doc.find("data-stack=\"pool\"")) << doc;
  EXPECT_NE(std::string::npos, doc.find("</svg>\n")) << doc;

  o = RunReplay("--sim --stack host --plot " + TempDir() + "/no/such/dir/memory.html " +
                SmallTrace());
  EXPECT_EQ(2, o.exit_code);
  EXPECT_EQ("gmr replay: --plot " + TempDir() +
                "/no/such/dir/memory.html: cannot write the file: No such file or directory\n",
            o.err);
  EXPECT_EQ("", o.out) << "refused before any work";

  o = RunReplay("--sim --stack host --plot " + TempDir() + "/memory.png " + SmallTrace());
  EXPECT_EQ(2, o.exit_code);
  EXPECT_EQ("gmr replay: --plot " + TempDir() +
                "/memory.png: give a file name ending in .html or .svg\n",
            o.err);

  // A run that ends before drawing leaves no empty file behind.
  std::string html = TempDir() + "/unused.html";
  o = RunReplay("--sim --stack host --plot " + html + " " + TempDir() + "/missing.csv");
  EXPECT_EQ(1, o.exit_code);
  EXPECT_FALSE(Exists(html));
}

TEST(ReplayOptionsCli, SnapshotPicklesReplayDirectly) {
  Output o = RunReplay("--sim --compare 'cuda_async;pool' --passes 2 " +
                       Runfile("tools/replay/testdata/small_p4.pickle"));
  ASSERT_EQ(0, o.exit_code) << o.out << o.err;
  EXPECT_NE(std::string::npos,
            o.out.find("small_p4.pickle (snapshot): 9 requests (5 allocs, 4 frees), 0 unmatched "
                       "frees, 2 streams"))
      << o.out;

  std::string two = Runfile("tools/replay/testdata/two_devices.pickle");
  o = RunReplay("--sim --stack host " + two);
  EXPECT_EQ(1, o.exit_code);
  EXPECT_NE(std::string::npos, o.err.find("choose one with --snapshot-device")) << o.err;
  o = RunReplay("--sim --stack host --snapshot-device 1 " + two);
  EXPECT_EQ(0, o.exit_code) << o.err;
  EXPECT_NE(std::string::npos, o.out.find("(snapshot): 2 requests (1 alloc, 1 free)")) << o.out;
  o = RunReplay("--sim --stack host --snapshot-device first " + two);
  EXPECT_EQ(2, o.exit_code);
  EXPECT_EQ("gmr replay: --snapshot-device first: not a whole number (a device index, 0..1023)\n",
            o.err);

  o = RunReplay("--sim --stack host " + Runfile("tools/replay/testdata/bad_class.pickle"));
  EXPECT_EQ(1, o.exit_code);
  EXPECT_NE(std::string::npos,
            o.err.find("bad_class.pickle: pickle: byte 569: STACK_GLOBAL: opcode 0x93 "
                       "STACK_GLOBAL is outside the subset"))
      << o.err;
}

}  // namespace
