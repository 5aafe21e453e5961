// gmr_nccl_library_open() loading stand-ins for libnccl.so.2 with dlopen:
// every entry point is found and reached; a library too old or without
// ncclCommRegister is refused, naming what is missing; a file that is not
// there is refused naming it. No CUDA call is made.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "gmr/sim/cuda_sim.h"
#include "gmr/nccl/nccl.h"

namespace {

std::string Stub(const char *variant) {
  const char *srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/gmr/tests/nccl/libstub_nccl_" +
         variant + ".so";
}

TEST(NcclLibrary, EveryEntryPointOfTheFileIsFoundAndReached) {
  // The communicator calls make devices current: two simulated ones.
  gmr_cuda_sim_config sim = GMR_CUDA_SIM_CONFIG_DEFAULT;
  sim.device_count = 2;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_enable(&sim));
  std::string path = Stub("ok");
  gmr_nccl_library *lib = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_nccl_library_open(path.c_str(), &lib, &f)) << f.message;
  EXPECT_EQ(22803, gmr_nccl_library_get_version(lib));
  const gmr_nccl_api *api = gmr_nccl_library_get_api(lib);
  EXPECT_EQ(nullptr, api->get_last_error) << "optional, and the stub has none";
  EXPECT_NE(nullptr, api->comm_register);
  // The test's own handle on the same file sees gmr's calls arrive.
  void *self = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(nullptr, self);
  auto calls = reinterpret_cast<int (*)()>(dlsym(self, "stub_nccl_calls"));
  ASSERT_NE(nullptr, calls);
  int before = calls();
  gmr_nccl_unique_id id;
  ASSERT_EQ(GMR_OK, gmr_nccl_get_unique_id(lib, &id, &f)) << f.message;
  gmr_nccl_comm *comms[2] = {nullptr, nullptr};
  const int devices[2] = {0, 1};
  ASSERT_EQ(GMR_OK, gmr_nccl_comm_init_all(lib, 2, devices, comms, &f)) << f.message;
  EXPECT_EQ(1, gmr_nccl_comm_get_device(comms[1]));
  EXPECT_EQ(1, gmr_nccl_comm_get_rank(comms[1]));
  int32_t send = 21, recv = 0;
  ASSERT_EQ(GMR_OK, gmr_nccl_group_start(lib, &f));
  ASSERT_EQ(GMR_OK, gmr_nccl_all_reduce(comms[0], &send, &recv, 1, GMR_NCCL_INT32, GMR_NCCL_SUM,
                                        nullptr, &f))
      << f.message;
  ASSERT_EQ(GMR_OK, gmr_nccl_group_end(lib, &f));
  EXPECT_EQ(42, recv) << "the arguments reached ncclAllReduce in NCCL's order";
  EXPECT_EQ(before + 7, calls()) << "id, init, 2 x device, group start, all-reduce, group end";
  EXPECT_EQ(GMR_ERR_BUSY, gmr_nccl_library_close(lib));
  for (gmr_nccl_comm *c : comms) EXPECT_EQ(GMR_OK, gmr_nccl_comm_destroy(c, &f)) << f.message;
  EXPECT_EQ(before + 9, calls()) << "and ncclCommDestroy twice";
  EXPECT_EQ(GMR_OK, gmr_nccl_library_close(lib));
  dlclose(self);
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_disable());
}

TEST(NcclLibrary, AFileThatIsNotThereIsNamed) {
  gmr_nccl_library *lib = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_library_open("/nonexistent/libnccl.so.2", &lib, &f));
  EXPECT_EQ(nullptr, lib);
  EXPECT_NE(nullptr, std::strstr(f.message, "dlopen(/nonexistent/libnccl.so.2)")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "install NCCL")) << f.message;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nccl_library_open(nullptr, nullptr, &f));
}

TEST(NcclLibrary, ALibraryWithoutRegistrationIsRefused) {
  gmr_nccl_library *lib = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_library_open(Stub("noreg").c_str(), &lib, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "ncclCommRegister")) << f.message;
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_library_open(Stub("old").c_str(), &lib, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "21806 is too old")) << f.message;
  EXPECT_EQ(nullptr, lib);
  // A library that is no NCCL at all.
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_library_open("libm.so.6", &lib, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "no ncclGetVersion")) << f.message;
}

}  // namespace
