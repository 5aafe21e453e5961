// tools/bench_vmm's vmm_calls and bench_handles end to end on the simulation:
// each runs, prints what it measures, and refuses bad arguments with exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct ToolRun {
  int status = -1;
  std::string out;
};

ToolRun Exec(const std::string &args) {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  std::string cmd = std::string(srcdir != nullptr ? srcdir : ".") + "/gmr/" + args + " 2>&1";
  ToolRun r;
  FILE *f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  char buf[512];
  while (fgets(buf, sizeof buf, f) != nullptr) r.out += buf;
  r.status = WEXITSTATUS(pclose(f));
  return r;
}

TEST(VmmToolsCli, VmmCallsCountsDriverCallsPerPass) {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  std::string trace = std::string(srcdir != nullptr ? srcdir : ".") +
                      "/gmr/tools/traces/multistream.csv.gz";
  ToolRun r = Exec("tools/bench_vmm/vmm_calls --passes 2 vmm " + trace);
  EXPECT_EQ(0, r.status) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("multistream.csv.gz   pass 1 peak/live 1.")) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("pass 2")) << r.out;
  EXPECT_NE(std::string::npos, r.out.find(" create ")) << r.out;
  ToolRun bad = Exec("tools/bench_vmm/vmm_calls --passes 0 vmm " + trace);
  EXPECT_EQ(2, bad.status) << bad.out;
  ToolRun spec = Exec("tools/bench_vmm/vmm_calls 'vmm(growth_percent=5000)' " + trace);
  EXPECT_EQ(1, spec.status) << spec.out;
  EXPECT_NE(std::string::npos, spec.out.find("growth_percent")) << spec.out;
}

TEST(VmmToolsCli, BenchHandlesTimesEveryCallBySize) {
  ToolRun r = Exec("tools/bench_vmm/bench_handles --sim --rounds 1 --max-mib 8");
  EXPECT_EQ(0, r.status) << r.out;
  EXPECT_NE(std::string::npos, r.out.find("host simulation")) << r.out;
  for (const char *col : {"create", "map", "access", "unmap", "release", "remap", "batch"}) {
    EXPECT_NE(std::string::npos, r.out.find(col)) << r.out;
  }
  EXPECT_NE(std::string::npos, r.out.find("\n         8 ")) << "the 8 MiB row\n" << r.out;
  ToolRun bad = Exec("tools/bench_vmm/bench_handles --rounds 0");
  EXPECT_EQ(2, bad.status) << bad.out;
}

}  // namespace
