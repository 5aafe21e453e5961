// The `replay` binary's capture options end to end: --capture and
// --arena-reserve, their errors, and the capture line of the report.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string TempDir() {
  const char *dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string Read(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Output {
  int exit_code = -1;
  std::string out, err;
};

// Runs the built tool with `args` (already shell-safe), on the simulation.
Output RunReplay(const std::string &args) {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  std::string binary = std::string(srcdir != nullptr ? srcdir : ".") + "/gmr/tools/replay/replay";
  std::string out = TempDir() + "/out.txt", err = TempDir() + "/err.txt";
  int status = std::system((binary + " " + args + " >" + out + " 2>" + err).c_str());
  Output o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = Read(out);
  o.err = Read(err);
  return o;
}

std::string CaptureTrace() {
  std::string path = TempDir() + "/capture.csv";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << "action,addr,size,stream,time_us\n"
         "capture_begin,0,0,5,1\n"
         "alloc,4096,1000,5,2\n"
         "capture_end,0,0,5,3\n"
         "free_requested,4096,1000,5,4\n";
  return path;
}

TEST(ReplayCaptureCli, BadCaptureOptionsAreUsageErrors) {
  Output o = RunReplay("--sim --compare host --arena-reserve 1MiB,2MiB " + CaptureTrace());
  EXPECT_EQ(2, o.exit_code);
  EXPECT_EQ("gmr replay: --arena-reserve gives 2 sizes for 1 stacks\n", o.err);
  o = RunReplay("--sim --stack host --arena-reserve 12x " + CaptureTrace());
  EXPECT_EQ(2, o.exit_code);
  EXPECT_EQ("gmr replay: --arena-reserve '12x': not a number of bytes (digits, then K/M/G/T); "
            "give sizes such as 600MiB or 572MiB,190MiB\n",
            o.err);
  o = RunReplay("--sim --stack host --capture maybe " + CaptureTrace());
  EXPECT_EQ(2, o.exit_code);
  EXPECT_EQ("gmr replay: --capture takes real or off\n", o.err);
}

TEST(ReplayCaptureCli, ARealCaptureRefusesCudaMallocAndOffIgnoresIt) {
  Output o = RunReplay("--sim --stack cuda_device " + CaptureTrace());
  EXPECT_EQ(1, o.exit_code) << o.out << o.err;
  EXPECT_NE(std::string::npos,
            o.out.find("cuda_device: 1 capture begun, 0 broken or refused; 1 allocations inside, "
                       "0 served; no graph arena in the stack"))
      << o.out;
  o = RunReplay("--sim --stack cuda_device --capture off " + CaptureTrace());
  EXPECT_EQ(0, o.exit_code) << o.out << o.err;
  EXPECT_NE(std::string::npos, o.out.find("cuda_device: 0 captures begun")) << o.out;
}

}  // namespace
