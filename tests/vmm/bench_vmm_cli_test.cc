// tools/bench_vmm end to end on the simulation: it runs every step, checks
// that each took the intended path, and prints one table.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

TEST(BenchVmmCli, RunsEveryStepOnTheSimulation) {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  std::string cmd = std::string(srcdir != nullptr ? srcdir : ".") +
                    "/gmr/tools/bench_vmm/bench_vmm --sim --pages 4 --rounds 1 2>&1";
  FILE *f = popen(cmd.c_str(), "r");
  ASSERT_NE(nullptr, f);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, f) != nullptr) out += buf;
  int status = pclose(f);
  EXPECT_EQ(0, status) << out;
  EXPECT_NE(std::string::npos, out.find("host simulation, 4 pages per step")) << out;
  for (const char *step : {"map (create+map+access)", "unmap (trim: unmap+release)",
                           "defrag (remap N, unmap old)", "wake (restoring copies)"}) {
    EXPECT_NE(std::string::npos, out.find(step)) << out;
  }
  FILE *bad = popen((std::string(srcdir != nullptr ? srcdir : ".") +
                     "/gmr/tools/bench_vmm/bench_vmm --pages 0 2>&1")
                        .c_str(),
                    "r");
  ASSERT_NE(nullptr, bad);
  while (fgets(buf, sizeof buf, bad) != nullptr) {
  }
  EXPECT_EQ(2, WEXITSTATUS(pclose(bad)));
}

}  // namespace
