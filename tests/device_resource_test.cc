// The per-device registry (gmr/device_resource.h) on two simulated devices:
// lazy creation from the set spec, GMR_STACK or the default, with the device
// current; cross-device use restores the caller's device; concurrent first
// requests build one stack; set/reset; release with live allocations; and the
// release at process exit.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmr/gmr.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/sim/streams.h"
#include "stack/device_guard.h"
#include "tests/support/sim_fixture.h"

namespace {

class DeviceResourceTest : public gmr_test::SimTest {
 protected:
  DeviceResourceTest() {
    sim_config_.device_count = 2;
    sim_config_.device_memory_bytes = (size_t)1 << 30;
  }
  void SetUp() override {
    SimTest::SetUp();
    unsetenv("GMR_STACK");
    ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec(nullptr, nullptr));
  }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
    EXPECT_EQ(GMR_OK, gmr_device_resource_set_spec(nullptr, nullptr));
    unsetenv("GMR_STACK");
    SimTest::TearDown();
  }
  static size_t used(int device) {
    gmr_cuda_sim_usage u;
    EXPECT_EQ(GMR_OK, gmr_cuda_sim_get_device_usage(device, &u));
    return u.used_bytes;
  }
  static int current_device() {
    int d = -1;
    EXPECT_EQ(GMR_OK, gmr_device_get_current(&d));
    return d;
  }
};

TEST_F(DeviceResourceTest, CreatedLazilyFromTheDefaultSpecOncePerDevice) {
  EXPECT_EQ(nullptr, gmr_device_resource_get_spec(0));
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE));
  gmr_resource *a = nullptr;
  gmr_resource *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &a, nullptr));
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &b, nullptr));
  EXPECT_EQ(a, b);
  EXPECT_STREQ("device_guard", gmr_resource_get_type_name(a));
  EXPECT_STREQ("vmm_resource", gmr_resource_get_type_name(gmr_resource_get_upstream(a)));
  EXPECT_STREQ("vmm", GMR_DEVICE_RESOURCE_DEFAULT_SPEC) << "the frameworks' default too";
  EXPECT_STREQ(GMR_DEVICE_RESOURCE_DEFAULT_SPEC, gmr_device_resource_get_spec(0));
  // One memory allocation of the process's device, made current for it.
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(a, 1000, 0, nullptr, &p));
  EXPECT_EQ(1u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(a, p, 1000, 0, nullptr));
  // The current device's resource is device 0's.
  gmr_resource *c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get_current(&c, nullptr));
  EXPECT_EQ(a, c);
  // Device 1 gets its own.
  gmr_resource *d1 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &d1, nullptr));
  EXPECT_NE(a, d1);
}

// A device whose driver has no virtual memory management gets the
// stream-ordered pool instead of failing, unless the program named a stack.
TEST_F(DeviceResourceTest, WithoutVirtualMemoryTheDefaultFallsBackToThePool) {
  gmr_cuda_sim_vmm_config v = GMR_CUDA_SIM_VMM_CONFIG_DEFAULT;
  v.supported = false;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_configure_vmm(&v));
  gmr_resource *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &a, nullptr));
  EXPECT_STREQ("pool_resource", gmr_resource_get_type_name(gmr_resource_get_upstream(a)));
  EXPECT_STREQ(GMR_DEVICE_RESOURCE_FALLBACK_SPEC, gmr_device_resource_get_spec(0));
  EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
  // A stack the program named is never replaced: its error comes back.
  setenv("GMR_STACK", "vmm", 1);
  gmr_spec_error err = {};
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_device_resource_get(0, &a, &err));
  EXPECT_NE(nullptr, std::strstr(err.message, "virtual memory management")) << err.message;
  unsetenv("GMR_STACK");
}

TEST_F(DeviceResourceTest, ASetSpecWinsOverGmrStack) {
  setenv("GMR_STACK", "tracking > cuda(kind=device)", 1);
  gmr_resource *r = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &r, nullptr));
  EXPECT_STREQ("tracking_adaptor", gmr_resource_get_type_name(gmr_resource_get_upstream(r)));
  EXPECT_STREQ("tracking > cuda(kind=device)", gmr_device_resource_get_spec(0));

  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("limiting(limit=1MiB) > cuda", nullptr));
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &r, nullptr));
  EXPECT_STREQ("limiting_adaptor", gmr_resource_get_type_name(gmr_resource_get_upstream(r)));
  // Device 0 keeps the stack it was created with.
  EXPECT_STREQ("tracking > cuda(kind=device)", gmr_device_resource_get_spec(0));
}

TEST_F(DeviceResourceTest, MalformedGmrStackFailsEachRequestWithTheSpecError) {
  setenv("GMR_STACK", "pool > cuda(kidn=async)", 1);
  gmr_resource *r = reinterpret_cast<gmr_resource *>(0x1);
  gmr_spec_error error;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_device_resource_get(0, &r, &error));
  EXPECT_EQ(nullptr, r);
  EXPECT_NE(std::string::npos, std::string(error.message).find("GMR_STACK:1:"))
      << error.message;
  EXPECT_NE(std::string::npos, std::string(error.message).find("kidn")) << error.message;
  EXPECT_EQ(nullptr, gmr_device_resource_get_spec(0));
  EXPECT_EQ(0u, used(0));
  // Fixed, the next request succeeds.
  setenv("GMR_STACK", "cuda(kind=device)", 1);
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &r, &error));
  EXPECT_NE(nullptr, r);
}

TEST_F(DeviceResourceTest, MalformedSetSpecIsRefusedAndThePreviousStays) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("cuda(kind=device)", nullptr));
  gmr_spec_error error;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_device_resource_set_spec("pool >", &error));
  EXPECT_STRNE("", error.message);
  gmr_resource *r = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &r, nullptr));
  EXPECT_STREQ("cuda(kind=device)", gmr_device_resource_get_spec(0));
}

TEST_F(DeviceResourceTest, BadDevicesAndArgumentsAreRefused) {
  gmr_resource *r = nullptr;
  gmr_spec_error error;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_device_resource_get(2, &r, &error));
  EXPECT_NE(std::string::npos, std::string(error.message).find("device 2 does not exist"))
      << error.message;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_device_resource_get(-1, &r, &error));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT,
            gmr_device_resource_get(GMR_DEVICE_RESOURCE_MAX_DEVICES, &r, &error));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_device_resource_get(0, nullptr, &error));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_device_resource_get_current(nullptr, nullptr));
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_device_resource_set(5, nullptr, nullptr));
  gmr_resource bogus = {nullptr};
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_device_resource_set(0, &bogus, nullptr));
  EXPECT_EQ(0u, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
}

TEST_F(DeviceResourceTest, FailedCreationChangesNothingAndIsRetried) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("cuda(kind=async)", nullptr));
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_POOL_CREATE, 0, 1,
                                                2 /* cudaErrorMemoryAllocation */));
  gmr_resource *r = nullptr;
  gmr_spec_error error;
  EXPECT_NE(GMR_OK, gmr_device_resource_get(1, &r, &error));
  EXPECT_EQ(nullptr, r);
  EXPECT_STRNE("", error.message);
  EXPECT_EQ(0, current_device());
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &r, &error)) << error.message;
  EXPECT_EQ(0, current_device());
}

// Making the device current reads the caller's device first: a refused
// cudaGetDevice is named as such (it was reported as "cudaSetDevice(1)
// failed"), a refused cudaSetDevice as that; either changes nothing.
TEST_F(DeviceResourceTest, RefusedDeviceSwitchNamesTheCallThatFailed) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("cuda(kind=device)", nullptr));
  struct Fault {
    gmr_cuda_call call;
    int error;
    const char *named;
    const char *not_named;
  };
  const Fault faults[] = {
      {GMR_CUDA_CALL_GET_DEVICE, 999 /* cudaErrorUnknown */, "cudaGetDevice failed", "cudaSetDevice"},
      {GMR_CUDA_CALL_SET_DEVICE, 101 /* cudaErrorInvalidDevice */, "cudaSetDevice failed",
       "cudaGetDevice"},
  };
  for (const Fault &fault : faults) {
    SCOPED_TRACE(gmr_cuda_call_name(fault.call));
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(fault.call, 0, 1, fault.error));
    gmr_resource *r = nullptr;
    gmr_spec_error error;
    EXPECT_EQ(GMR_ERR_CUDA, gmr_device_resource_get(1, &r, &error));
    EXPECT_EQ(nullptr, r);
    EXPECT_NE(nullptr, std::strstr(error.message, fault.named)) << error.message;
    EXPECT_NE(nullptr, std::strstr(error.message, "device 1")) << error.message;
    EXPECT_EQ(nullptr, std::strstr(error.message, fault.not_named)) << error.message;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
    EXPECT_EQ(0, current_device());
  }
  gmr_resource *r = nullptr;
  gmr_spec_error error;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &r, &error)) << error.message;
  EXPECT_EQ(0, current_device());
}

TEST_F(DeviceResourceTest, ResourceOfAnotherDeviceAllocatesThereAndRestoresTheCaller) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("cuda(kind=device)", nullptr));
  ASSERT_EQ(0, current_device());
  gmr_resource *r1 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &r1, nullptr));
  EXPECT_EQ(0, current_device()) << "creation must restore the caller's device";
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r1, 4096, 0, nullptr, &p));
  EXPECT_EQ(0, current_device());
  EXPECT_EQ(0u, used(0));
  EXPECT_EQ(4096u, used(1));
  // Freed from device 1 being current goes to device 1 and restores too.
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  gmr_resource *r0 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &r0, nullptr));
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r0, 512, 0, nullptr, &q));
  EXPECT_EQ(512u, used(0));
  EXPECT_EQ(1, current_device());
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r1, p, 4096, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r0, q, 512, 0, nullptr));
  EXPECT_EQ(1, current_device());
  EXPECT_EQ(0u, used(0));
  EXPECT_EQ(0u, used(1));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
}

// A pool records events on the free's stream; an event made while another
// device is current cannot be recorded there (CUDA and the simulation refuse
// it), so this works only because the registry's guard makes the pool's
// device current around each call.
TEST_F(DeviceResourceTest, PoolOfAnotherDeviceWorksOnItsOwnStreams) {
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  gmr_stream s1 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&s1));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
  gmr_resource *r1 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &r1, nullptr));
  for (int i = 0; i < 4; ++i) {
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r1, 1 << 20, 0, s1, &p));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r1, p, 1 << 20, 0, s1));
    void *q = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r1, 1 << 20, 0, nullptr, &q));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r1, q, 1 << 20, 0, nullptr));
  }
  EXPECT_EQ(0, current_device());
  EXPECT_EQ(0u, used(0));
  EXPECT_GT(used(1), 0u);
  EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(s1));
}

// The guard itself: every call that may reach CUDA runs with the guard's
// device current, and the caller's device is back afterwards.
struct DeviceProbe {
  gmr_resource base;
  int allocate_device = -1;
  int deallocate_device = -1;
  int record_device = -1;
  int capturing_device = -1;
  alignas(256) char storage[256];
};

gmr_status probe_allocate(gmr_resource *self, size_t, size_t, gmr_stream, void **out,
                          gmr_failure *) {
  auto *p = reinterpret_cast<DeviceProbe *>(self);
  EXPECT_EQ(GMR_OK, gmr_device_get_current(&p->allocate_device));
  *out = p->storage;
  return GMR_OK;
}
gmr_status probe_deallocate(gmr_resource *self, void *, size_t, size_t, gmr_stream) {
  auto *p = reinterpret_cast<DeviceProbe *>(self);
  EXPECT_EQ(GMR_OK, gmr_device_get_current(&p->deallocate_device));
  return GMR_OK;
}
gmr_status probe_destroy(gmr_resource *) { return GMR_OK; }
gmr_status probe_record_stream(gmr_resource *self, void *, gmr_stream) {
  auto *p = reinterpret_cast<DeviceProbe *>(self);
  EXPECT_EQ(GMR_OK, gmr_device_get_current(&p->record_device));
  return GMR_OK;
}
gmr_status probe_allocate_capturing(gmr_resource *self, size_t, size_t, gmr_stream, void **out,
                                    gmr_failure *) {
  auto *p = reinterpret_cast<DeviceProbe *>(self);
  EXPECT_EQ(GMR_OK, gmr_device_get_current(&p->capturing_device));
  *out = p->storage;
  return GMR_OK;
}

const gmr_resource_vtbl probe_vtbl = {
    GMR_RESOURCE_VTBL_VERSION, "device_probe", probe_allocate, probe_deallocate, probe_destroy,
    nullptr, nullptr, nullptr, nullptr, probe_record_stream, probe_allocate_capturing, nullptr};

TEST_F(DeviceResourceTest, GuardMakesItsDeviceCurrentAroundEachCall) {
  DeviceProbe probe;
  probe.base.vtbl = &probe_vtbl;
  gmr__device_guard *guard = nullptr;
  ASSERT_EQ(GMR_OK, gmr__device_guard_create(&probe.base, 1, &guard));
  gmr_resource *g = gmr__device_guard_as_resource(guard);
  EXPECT_EQ(&probe.base, gmr_resource_get_upstream(g));
  EXPECT_EQ(1, gmr__device_guard_get_device(guard));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(g, 64, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(g, p, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(g, p, 64, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(g, 64, 0, nullptr, &p, nullptr));
  EXPECT_EQ(1, probe.allocate_device);
  EXPECT_EQ(1, probe.deallocate_device);
  EXPECT_EQ(1, probe.record_device);
  EXPECT_EQ(1, probe.capturing_device);
  EXPECT_EQ(0, current_device());
  // A failing device switch fails the call and changes nothing.
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_SET_DEVICE, 0, 1,
                                                101 /* cudaErrorInvalidDevice */));
  probe.allocate_device = -1;
  gmr_failure failure = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_ex(g, 64, 0, nullptr, &p, &failure));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(101, failure.cuda_error);
  EXPECT_EQ(-1, probe.allocate_device);
  EXPECT_EQ(0, current_device());
  EXPECT_EQ(nullptr, gmr__device_guard_from_resource(&probe.base));
  EXPECT_EQ(guard, gmr__device_guard_from_resource(g));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(g));
}

TEST_F(DeviceResourceTest, ThreadsShareOneStackPerDeviceAndKeepTheirDevice) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("tracking > cuda(kind=device)", nullptr));
  constexpr int kThreads = 8;
  constexpr int kRounds = 200;
  std::vector<gmr_resource *> seen(kThreads * 2, nullptr);
  std::atomic<int> failures{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int mine = t % 2;
      if (gmr_device_set_current(mine) != GMR_OK) failures++;
      while (!go.load()) std::this_thread::yield();
      for (int d = 0; d < 2; ++d) {
        if (gmr_device_resource_get(d, &seen[t * 2 + d], nullptr) != GMR_OK) failures++;
      }
      for (int i = 0; i < kRounds; ++i) {
        gmr_resource *r = seen[t * 2 + (i % 2)];
        void *p = nullptr;
        size_t bytes = 256u * (1 + (i % 7));
        if (gmr_resource_allocate(r, bytes, 0, nullptr, &p) != GMR_OK) failures++;
        int now = -1;
        if (gmr_device_get_current(&now) != GMR_OK || now != mine) failures++;
        if (gmr_resource_deallocate(r, p, bytes, 0, nullptr) != GMR_OK) failures++;
      }
    });
  }
  go = true;
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  for (int t = 1; t < kThreads; ++t) {
    EXPECT_EQ(seen[0], seen[t * 2]);
    EXPECT_EQ(seen[1], seen[t * 2 + 1]);
  }
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_EQ(0u, used(0));
  EXPECT_EQ(0u, used(1));
  EXPECT_EQ(static_cast<uint64_t>(kThreads * kRounds),
            gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MALLOC));
}

TEST_F(DeviceResourceTest, SetBorrowsAResourceAndNullGoesBackToTheRegistrys) {
  gmr_stack *mine = nullptr;
  ASSERT_EQ(GMR_OK, gmr_stack_create("cuda(kind=device, device=1)", &mine, nullptr));
  gmr_resource *own = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &own, nullptr));
  gmr_resource *previous = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_set(1, gmr_stack_as_resource(mine), &previous));
  EXPECT_EQ(own, previous);
  gmr_resource *now = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &now, nullptr));
  EXPECT_EQ(gmr_stack_as_resource(mine), now);
  EXPECT_EQ(nullptr, gmr_device_resource_get_spec(1)) << "not the registry's stack";
  // Back to the registry's own, which stayed alive.
  ASSERT_EQ(GMR_OK, gmr_device_resource_set(1, nullptr, &previous));
  EXPECT_EQ(gmr_stack_as_resource(mine), previous);
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &now, nullptr));
  EXPECT_EQ(own, now);
  // A set resource is forgotten at release, never destroyed.
  ASSERT_EQ(GMR_OK, gmr_device_resource_set(0, gmr_stack_as_resource(mine), nullptr));
  EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(gmr_stack_as_resource(mine), 256, 0, nullptr, &p));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(gmr_stack_as_resource(mine), p, 256, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_stack_destroy(mine));
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &now, nullptr));
  EXPECT_STREQ("device_guard", gmr_resource_get_type_name(now));
}

TEST_F(DeviceResourceTest, ReleaseWithLiveAllocationsKeepsAWorkingResource) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("tracking > cuda(kind=device)", nullptr));
  gmr_resource *r0 = nullptr;
  gmr_resource *r1 = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &r0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &r1, nullptr));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r1, 1024, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_device_resource_release_all());
  // Device 0's stack is gone; device 1's survives whole (tracking refused
  // first) and still frees on device 1 from device 0.
  EXPECT_EQ(nullptr, gmr_device_resource_get_spec(0));
  EXPECT_STREQ("tracking > cuda(kind=device)", gmr_device_resource_get_spec(1));
  gmr_resource *again = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(1, &again, nullptr));
  EXPECT_EQ(r1, again);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(again, p, 1024, 0, nullptr));
  EXPECT_EQ(0u, used(1));
  EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
  EXPECT_EQ(nullptr, gmr_device_resource_get_spec(1));
}

// At exit the registry destroys what it created: run in a child process,
// whose own atexit handler (registered first, so it runs last) checks that
// both devices' stacks were destroyed: their memory given back and every
// virtual address range they reserved freed.
void check_released_at_exit() {
  gmr_cuda_sim_usage u0, u1;
  bool ok = gmr_cuda_sim_get_device_usage(0, &u0) == GMR_OK &&
            gmr_cuda_sim_get_device_usage(1, &u1) == GMR_OK && u0.used_bytes == 0 &&
            u1.used_bytes == 0 &&
            gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE) >= 1 &&
            gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_ADDRESS_FREE) ==
                gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE);
  fprintf(stderr, ok ? "released at exit\n" : "NOT released at exit\n");
  fflush(stderr);
  _exit(ok ? 0 : 3);
}

void create_and_exit() {
  atexit(check_released_at_exit);
  gmr_resource *r0 = nullptr;
  gmr_resource *r1 = nullptr;
  if (gmr_device_resource_get(1, &r1, nullptr) != GMR_OK) _exit(4);
  if (gmr_device_resource_get(0, &r0, nullptr) != GMR_OK) _exit(4);
  void *p = nullptr;
  if (gmr_resource_allocate(r0, 1 << 20, 0, nullptr, &p) != GMR_OK) _exit(5);
  if (gmr_resource_deallocate(r0, p, 1 << 20, 0, nullptr) != GMR_OK) _exit(5);
  exit(0);
}

TEST_F(DeviceResourceTest, StacksAreDestroyedAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(create_and_exit(), ::testing::ExitedWithCode(0), "released at exit");
}

}  // namespace
