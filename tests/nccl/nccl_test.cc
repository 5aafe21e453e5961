// gmr/nccl/nccl.h on two simulated devices with the fake NCCL
// (tests/support/fake_nccl.h): pools registered per physical allocation and
// kept registered as they grow, deregistered before memory goes back to the
// driver, symmetric offsets inside registrations on both ranks, and every
// bad input (NCCL missing, freed memory, a communicator destroyed with
// registrations, a pool trimmed while registered, NCCL refusing) with a
// clear status and nothing leaked.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmr/nccl/chunk_listener_adaptor.h"
#include "gmr/sim/cuda_sim.h"
#include "gmr/nccl/cumem_resource.h"
#include "gmr/device.h"
#include "gmr/nccl/nccl.h"
#include "gmr/stack.h"
#include "gmr/nccl/symmetric_resource.h"
#include "tests/support/fake_nccl.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

gmr_test_fake_nccl_counts Counts() {
  gmr_test_fake_nccl_counts c;
  gmr_test_fake_nccl_get_counts(&c);
  return c;
}

class Nccl : public gmr_test::SimTest {
 protected:
  Nccl() { sim_config_.device_count = 2; }
  gmr_nccl_library *lib_ = nullptr;
  gmr_nccl_comm *comms_[2] = {nullptr, nullptr};
  std::vector<gmr_stack *> stacks_;

  void SetUp() override {
    SimTest::SetUp();
    gmr_test_fake_nccl_reset();
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_nccl_library_open_api(gmr_test_fake_nccl_api(), &lib_, &f)) << f.message;
    const int devices[2] = {0, 1};
    ASSERT_EQ(GMR_OK, gmr_nccl_comm_init_all(lib_, 2, devices, comms_, &f)) << f.message;
  }
  void TearDown() override {
    for (gmr_nccl_comm *c : comms_) {
      EXPECT_EQ(GMR_OK, gmr_nccl_comm_destroy(c, nullptr));
    }
    EXPECT_EQ(GMR_OK, gmr_nccl_library_close(lib_));
    for (gmr_stack *s : stacks_) EXPECT_EQ(GMR_OK, gmr_stack_destroy(s));
    EXPECT_EQ(0u, gmr_test_fake_nccl_verify());
    gmr_test_fake_nccl_counts c = Counts();
    for (size_t i = 0; i < c.violation_count; ++i) {
      ADD_FAILURE() << "fake NCCL: " << gmr_test_fake_nccl_violation(i);
    }
    EXPECT_EQ(0u, c.live_registration_count) << "a registration leaked";
    EXPECT_EQ(0u, c.live_comm_count) << "a communicator leaked";
    gmr_test_fake_nccl_reset();
    SimTest::TearDown();
  }
  gmr_resource *Stack(const std::string &spec) {
    gmr_stack *s = nullptr;
    gmr_spec_error e;
    EXPECT_EQ(GMR_OK, gmr_stack_create(spec.c_str(), &s, &e)) << e.message;
    stacks_.push_back(s);
    return gmr_stack_as_resource(s);
  }
  static gmr_nccl_registration_stats Stats(gmr_nccl_registration *reg) {
    gmr_nccl_registration_stats s = GMR_NCCL_REGISTRATION_STATS_INIT;
    EXPECT_EQ(GMR_OK, gmr_nccl_registration_get_stats(reg, &s));
    return s;
  }
};

TEST_F(Nccl, CommunicatorsKnowTheirDeviceAndRank) {
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(i, gmr_nccl_comm_get_device(comms_[i]));
    EXPECT_EQ(i, gmr_nccl_comm_get_rank(comms_[i]));
    EXPECT_EQ(2, gmr_nccl_comm_get_rank_count(comms_[i]));
    EXPECT_NE(nullptr, gmr_nccl_comm_get_handle(comms_[i]));
  }
  EXPECT_EQ(GMR_TEST_FAKE_NCCL_VERSION, gmr_nccl_library_get_version(lib_));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_nccl_library_close(lib_)) << "communicators still use it";
  // One rank at a time, as one process per GPU does.
  gmr_nccl_unique_id id;
  ASSERT_EQ(GMR_OK, gmr_nccl_get_unique_id(lib_, &id, nullptr));
  gmr_nccl_comm *c = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nccl_comm_init_rank(lib_, 2, &id, 1, 1, &c, nullptr));
  EXPECT_EQ(1, gmr_nccl_comm_get_device(c));
  int now = -1;
  ASSERT_EQ(GMR_OK, gmr_device_get_current(&now));
  EXPECT_EQ(0, now) << "the caller's device is restored";
  gmr_nccl_comm *bad = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nccl_comm_init_rank(lib_, 2, &id, 2, 0, &bad, nullptr));
  EXPECT_EQ(nullptr, bad);
  EXPECT_EQ(GMR_OK, gmr_nccl_comm_destroy(c, nullptr));
  ASSERT_EQ(GMR_OK, gmr_nccl_group_start(lib_, nullptr));
  ASSERT_EQ(GMR_OK, gmr_nccl_group_end(lib_, nullptr));
  EXPECT_EQ(1u, Counts().group_count);
}

TEST_F(Nccl, APoolIsRegisteredChunkByChunkAsItGrowsAndShrinks) {
  gmr_resource *pool = Stack(
      "pool(min_growth=8MiB, max_growth=8MiB) > chunk_listener > cumem(device=0, nccl_ready=true, "
      "peer_access=all)");
  void *a = nullptr;
  ASSERT_EQ(GMR_OK,
            gmr_resource_allocate(pool, kMiB, 0, nullptr, &a));  // a chunk before registration
  gmr_nccl_registration *reg = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[0], pool, &reg, &f)) << f.message;
  EXPECT_EQ(1u, Stats(reg).chunk_count) << "the live chunk is registered at once";
  EXPECT_EQ(1u, Stats(reg).segment_count) << "a cumem chunk is one physical allocation";
  EXPECT_TRUE(gmr_nccl_registration_covers(reg, a, kMiB));
  void *b = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(pool, 20 * kMiB, 0, nullptr, &b));  // a new chunk
  EXPECT_EQ(2u, Stats(reg).chunk_count);
  EXPECT_TRUE(gmr_test_fake_nccl_is_registered(gmr_nccl_comm_get_handle(comms_[0]), b, 20 * kMiB));
  EXPECT_TRUE(gmr_nccl_registration_covers(reg, b, 20 * kMiB)) << "zero-copy for the whole block";
  int local = 0;
  EXPECT_FALSE(gmr_nccl_registration_covers(reg, &local, 4));
  EXPECT_EQ(28 * kMiB, Stats(reg).registered_bytes);
  // A pool trimmed while registered: each chunk is deregistered first.
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(pool, b, 20 * kMiB, 0, nullptr));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(pool, &released));
  EXPECT_EQ(20 * kMiB, released);
  EXPECT_EQ(1u, Stats(reg).chunk_count);
  EXPECT_EQ(1u, Counts().deregister_count);
  EXPECT_EQ(0u, Counts().violation_count) << "deregistered while still mapped";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(pool, a, kMiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_nccl_deregister(reg, &f)) << f.message;
  EXPECT_EQ(0u, Counts().live_registration_count);
  EXPECT_EQ(2u, Counts().deregister_count);
}

TEST_F(Nccl, VmmPoolChunksAreRegisteredPageByPage) {
  gmr_resource *pool = Stack(
      "pool(min_growth=8MiB, max_growth=8MiB) > chunk_listener > vmm_pages(device=0, "
      "va_chunk=256MiB, nccl_ready=true)");
  void *a = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(pool, 3 * kMiB, 0, nullptr, &a));
  gmr_nccl_registration *reg = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[0], pool, &reg, nullptr));
  gmr_nccl_registration_stats s = Stats(reg);
  EXPECT_EQ(1u, s.chunk_count);
  EXPECT_EQ(4u, s.segment_count) << "an 8 MiB chunk of 2 MiB pages: four physical allocations";
  auto *base = static_cast<char *>(a);
  EXPECT_TRUE(gmr_nccl_registration_covers(reg, base, kMiB));
  EXPECT_FALSE(gmr_nccl_registration_covers(reg, base, 3 * kMiB))
      << "a buffer over two pages is not zero-copy (NCCL < 2.29 maps one on its peers)";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(pool, a, 3 * kMiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_trim(pool, nullptr));
  EXPECT_EQ(0u, Stats(reg).segment_count);
  EXPECT_EQ(GMR_OK, gmr_nccl_deregister(reg, nullptr));
}

// The positive control of the fake: what gmr avoids is caught when done by hand.
TEST_F(Nccl, TheFakeCatchesRegistrationsGmrAvoids) {
  const gmr_nccl_api *api = gmr_test_fake_nccl_api();
  gmr_nccl_comm_handle c0 = gmr_nccl_comm_get_handle(comms_[0]);
  gmr_resource *pages = Stack("vmm_pages(device=0, va_chunk=64MiB, small_pool=false)");
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(pages, 4 * kMiB, 0, nullptr, &p));
  void *h = nullptr;
  EXPECT_EQ(GMR_NCCL_INVALID_ARGUMENT, api->comm_register(c0, p, 4 * kMiB, &h))
      << "two pages are two physical allocations";
  gmr_resource *one = Stack("cumem(device=1)");
  void *q = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(one, kMiB, 0, nullptr, &q));
  EXPECT_EQ(GMR_NCCL_INVALID_ARGUMENT, api->comm_register(c0, q, kMiB, &h))
      << "device 1 memory with the communicator of device 0";
  ASSERT_EQ(GMR_NCCL_SUCCESS, api->comm_register(c0, p, 2 * kMiB, &h));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(pages, p, 4 * kMiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_trim(pages, nullptr));  // the pages go back, still registered
  EXPECT_EQ(1u, gmr_test_fake_nccl_verify());
  EXPECT_EQ(GMR_NCCL_SUCCESS, api->comm_deregister(c0, h));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(one, q, kMiB, 0, nullptr));
  EXPECT_EQ(4u, Counts().violation_count);
  EXPECT_NE(nullptr, std::strstr(gmr_test_fake_nccl_violation(0), "crosses the end"));
  EXPECT_NE(nullptr, std::strstr(gmr_test_fake_nccl_violation(1), "device 1 memory"));
  EXPECT_NE(nullptr, std::strstr(gmr_test_fake_nccl_violation(2), "outlived its memory"));
  EXPECT_NE(nullptr, std::strstr(gmr_test_fake_nccl_violation(3), "went back to the driver"));
  gmr_test_fake_nccl_clear_violations();
}

TEST_F(Nccl, SymmetricBuffersHaveTheSameOffsetInTheirRegistrationOnBothRanks) {
  gmr_resource *sym[2];
  gmr_nccl_registration *reg[2];
  for (int d = 0; d < 2; ++d) {
    sym[d] = Stack("symmetric(region_size=16MiB) > chunk_listener > cumem(device=" +
                   std::to_string(d) + ", nccl_ready=true, peer_access=all)");
    ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[d], sym[d], &reg[d], nullptr));
  }
  const size_t sizes[] = {3 * kMiB, 100, 9 * kMiB, 20 * kMiB, 5 * kMiB};
  void *p[2][5];
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(GMR_OK, gmr_device_set_current(d));
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(GMR_OK, gmr_resource_allocate(sym[d], sizes[i], 0, nullptr, &p[d][i]));
    }
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(sym[d], p[d][2], sizes[2], 0, nullptr));
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(sym[d], 2 * kMiB, 0, nullptr, &p[d][2]));
  }
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
  gmr_symmetric_resource *s0 = gmr_symmetric_resource_from_resource(sym[0]);
  gmr_symmetric_resource *s1 = gmr_symmetric_resource_from_resource(sym[1]);
  for (int i = 0; i < 5; ++i) {
    size_t r0 = 0, o0 = 0, r1 = 0, o1 = 0;
    ASSERT_EQ(GMR_OK, gmr_symmetric_resource_get_offset(s0, p[0][i], &r0, &o0));
    ASSERT_EQ(GMR_OK, gmr_symmetric_resource_get_offset(s1, p[1][i], &r1, &o1));
    EXPECT_EQ(r0, r1) << i;
    EXPECT_EQ(o0, o1) << i;
    size_t bytes = i == 2 ? 2 * kMiB : sizes[i];
    EXPECT_TRUE(gmr_nccl_registration_covers(reg[0], p[0][i], bytes)) << i;
    EXPECT_TRUE(gmr_nccl_registration_covers(reg[1], p[1][i], bytes)) << i;
    void *base0 = nullptr, *base1 = nullptr;
    size_t n0 = 0, n1 = 0;
    ASSERT_EQ(GMR_OK, gmr_symmetric_resource_get_region(s0, r0, &base0, &n0));
    ASSERT_EQ(GMR_OK, gmr_symmetric_resource_get_region(s1, r1, &base1, &n1));
    EXPECT_TRUE(gmr_test_fake_nccl_is_registered(gmr_nccl_comm_get_handle(comms_[0]), base0, n0))
        << "each region is one registration";
    EXPECT_TRUE(gmr_test_fake_nccl_is_registered(gmr_nccl_comm_get_handle(comms_[1]), base1, n1));
  }
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(GMR_OK, gmr_device_set_current(d));
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(GMR_OK,
                gmr_resource_deallocate(sym[d], p[d][i], i == 2 ? 2 * kMiB : sizes[i], 0, nullptr));
    }
    EXPECT_EQ(GMR_OK, gmr_nccl_deregister(reg[d], nullptr));
  }
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
}

TEST_F(Nccl, NcclMissingNamesTheLibrary) {
  gmr_nccl_library *lib = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_library_open("libnccl-not-here.so.2", &lib, &f));
  EXPECT_EQ(nullptr, lib);
  EXPECT_NE(nullptr, std::strstr(f.message, "dlopen(libnccl-not-here.so.2)")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "install NCCL (libnccl2)")) << f.message;
  // A table without a required entry point, or too old a version.
  gmr_nccl_api api = *gmr_test_fake_nccl_api();
  api.comm_register = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nccl_library_open_api(&api, &lib, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "ncclCommRegister")) << f.message;
  api = *gmr_test_fake_nccl_api();
  api.size = 8;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nccl_library_open_api(&api, &lib, &f));
  gmr_test_fake_nccl_set_version(21806);
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_library_open_api(gmr_test_fake_nccl_api(), &lib, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "too old")) << f.message;
  gmr_test_fake_nccl_set_version(GMR_TEST_FAKE_NCCL_VERSION);
  gmr_test_fake_nccl_fail(GMR_TEST_FAKE_NCCL_VERSION_CALL, 0, 1, GMR_NCCL_SYSTEM_ERROR);
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_library_open_api(gmr_test_fake_nccl_api(), &lib, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "ncclGetVersion failed: ncclSystemError")) << f.message;
  EXPECT_EQ(nullptr, lib);
}

TEST_F(Nccl, RegisteringFreedMemoryIsAnUnknownPointer) {
  gmr_resource *leaf = Stack("cumem(device=0, nccl_ready=true)");
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(leaf, 4 * kMiB, 0, nullptr, &p));
  gmr_nccl_registration *reg = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nccl_register_buffer(comms_[0], p, 4 * kMiB, &reg, nullptr));
  EXPECT_TRUE(gmr_nccl_registration_covers(reg, p, 4 * kMiB));
  ASSERT_EQ(GMR_OK, gmr_nccl_deregister(reg, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(leaf, p, 4 * kMiB, 0, nullptr));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_nccl_register_buffer(comms_[0], p, 4 * kMiB, &reg, &f));
  EXPECT_EQ(nullptr, reg);
  EXPECT_NE(nullptr, std::strstr(f.message, "freed")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "CUDA_ERROR_NOT_FOUND")) << f.message;
  EXPECT_EQ(0u, Counts().live_registration_count);
  // Half live, half beyond the allocation's end: nothing stays registered.
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(leaf, 2 * kMiB, 0, nullptr, &p));
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_nccl_register_buffer(comms_[0], p, 64 * kMiB, &reg, &f));
  EXPECT_EQ(2u, Counts().register_count) << "the first part was registered";
  EXPECT_EQ(2u, Counts().deregister_count) << "and undone";
  EXPECT_EQ(0u, Counts().live_registration_count);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nccl_register_buffer(comms_[0], p, 0, &reg, &f));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(leaf, p, 2 * kMiB, 0, nullptr));
}

TEST_F(Nccl, ACommunicatorWithRegistrationsIsNotDestroyed) {
  gmr_resource *pool = Stack("pool > chunk_listener > cumem(device=1, nccl_ready=true)");
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(pool, kMiB, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
  gmr_nccl_registration *reg = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[1], pool, &reg, nullptr));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_nccl_comm_destroy(comms_[1], &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "1 registration")) << f.message;
  EXPECT_EQ(2u, Counts().live_comm_count) << "nothing was destroyed";
  EXPECT_EQ(1u, Counts().live_registration_count);
  // Destroying the stack below a registration is refused too.
  gmr_chunk_listener_adaptor *cl =
      gmr_chunk_listener_adaptor_from_resource(gmr_resource_find(pool, "chunk_listener_adaptor"));
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_destroy(gmr_chunk_listener_adaptor_as_resource(cl)));
  ASSERT_EQ(GMR_OK, gmr_nccl_deregister(reg, nullptr));
  EXPECT_EQ(GMR_OK, gmr_nccl_comm_destroy(comms_[1], &f)) << f.message;
  comms_[1] = nullptr;
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(pool, p, kMiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
}

TEST_F(Nccl, ADeregistrationNcclRefusesKeepsTheMemoryUntilItSucceeds) {
  gmr_resource *pool = Stack("pool > chunk_listener > cumem(device=0, nccl_ready=true)");
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(pool, kMiB, 0, nullptr, &p));
  gmr_nccl_registration *reg = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[0], pool, &reg, nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(pool, p, kMiB, 0, nullptr));
  gmr_test_fake_nccl_fail(GMR_TEST_FAKE_NCCL_DEREGISTER, 0, 1, GMR_NCCL_INTERNAL_ERROR);
  EXPECT_EQ(GMR_ERR_NCCL, gmr_resource_trim(pool, nullptr));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(pool, &fp));
  EXPECT_GT(fp.held_bytes, 0u) << "the chunk stayed with the pool";
  EXPECT_EQ(1u, Stats(reg).segment_count) << "and registered";
  EXPECT_EQ(1u, Stats(reg).failure_count);
  EXPECT_EQ(0u, gmr_test_fake_nccl_verify());
  // The same through gmr_nccl_deregister: it stays valid and can be retried.
  gmr_test_fake_nccl_fail(GMR_TEST_FAKE_NCCL_DEREGISTER, 0, 1, GMR_NCCL_INTERNAL_ERROR);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_deregister(reg, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "ncclCommDeregister")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "ncclInternalError")) << f.message;
  EXPECT_EQ(1u, Stats(reg).segment_count);
  ASSERT_EQ(GMR_OK, gmr_resource_trim(pool, nullptr));
  EXPECT_EQ(0u, Stats(reg).segment_count);
  EXPECT_EQ(GMR_OK, gmr_nccl_deregister(reg, nullptr));
}

TEST_F(Nccl, ARegistrationNcclRefusesFailsTheAllocationAndLeaksNothing) {
  gmr_resource *pool = Stack("pool > chunk_listener > cumem(device=0, nccl_ready=true)");
  gmr_nccl_registration *reg = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[0], pool, &reg, nullptr));
  gmr_test_fake_nccl_fail(GMR_TEST_FAKE_NCCL_REGISTER, 0, 1, GMR_NCCL_SYSTEM_ERROR);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_NCCL, gmr_resource_allocate_ex(pool, kMiB, 0, nullptr, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "ncclCommRegister")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "ncclSystemError")) << f.message;
  gmr_cuda_sim_vmm_usage u;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&u));
  EXPECT_EQ(0u, u.physical_count) << "the chunk went back to the driver";
  EXPECT_EQ(0u, Stats(reg).chunk_count);
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(pool, kMiB, 0, nullptr, &p)) << "and the next one works";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(pool, p, kMiB, 0, nullptr));
  // register_pool itself refused: nothing stays attached or registered.
  gmr_resource *other = Stack("pool > chunk_listener > cumem(device=0)");
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(other, kMiB, 0, nullptr, &p));
  gmr_test_fake_nccl_fail(GMR_TEST_FAKE_NCCL_REGISTER, 0, 1, GMR_NCCL_INVALID_ARGUMENT);
  gmr_nccl_registration *r2 = nullptr;
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_register_pool(comms_[0], other, &r2, &f));
  EXPECT_EQ(nullptr, r2);
  gmr_chunk_listener_adaptor_stats cs = GMR_CHUNK_LISTENER_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_chunk_listener_adaptor_get_stats(
                        gmr_chunk_listener_adaptor_from_resource(
                            gmr_resource_find(other, "chunk_listener_adaptor")),
                        &cs));
  EXPECT_EQ(0u, cs.listener_count);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(other, p, kMiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_nccl_deregister(reg, nullptr));
}

TEST_F(Nccl, MisusedRegistrationsAreRefusedWithAReason) {
  gmr_resource *plain = Stack("pool > cumem(device=0)");
  gmr_nccl_registration *reg = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nccl_register_pool(comms_[0], plain, &reg, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "chunk_listener")) << f.message;
  gmr_resource *pool = Stack("pool > chunk_listener > cumem(device=0)");
  ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[0], pool, &reg, nullptr));
  gmr_nccl_registration *again = nullptr;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nccl_register_pool(comms_[0], pool, &again, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "already")) << f.message;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_nccl_register_pool(nullptr, pool, &again, &f));
  // The fake has no collective: the call says so instead of crashing.
  int x = 0;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_nccl_all_reduce(comms_[0], &x, &x, 1, GMR_NCCL_INT32,
                                                     GMR_NCCL_SUM, nullptr, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "ncclAllReduce")) << f.message;
  EXPECT_EQ(GMR_OK, gmr_nccl_deregister(reg, nullptr));
  EXPECT_EQ(GMR_OK, gmr_nccl_deregister(nullptr, nullptr));
}

TEST_F(Nccl, AWrappedCommunicatorIsLeftToItsOwner) {
  gmr_nccl_comm_handle raw = nullptr;
  gmr_nccl_unique_id id;
  ASSERT_EQ(GMR_OK, gmr_nccl_get_unique_id(lib_, &id, nullptr));
  ASSERT_EQ(GMR_NCCL_SUCCESS, gmr_test_fake_nccl_api()->comm_init_rank(&raw, 1, id, 0));
  gmr_nccl_comm *w = nullptr;
  ASSERT_EQ(GMR_OK, gmr_nccl_comm_wrap(lib_, raw, &w, nullptr));
  EXPECT_EQ(raw, gmr_nccl_comm_get_handle(w));
  EXPECT_EQ(GMR_OK, gmr_nccl_comm_destroy(w, nullptr));
  EXPECT_EQ(3u, Counts().live_comm_count) << "the wrapper went, the communicator stayed";
  EXPECT_EQ(GMR_NCCL_SUCCESS, gmr_test_fake_nccl_api()->comm_destroy(raw));
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_NCCL, gmr_nccl_comm_wrap(lib_, raw, &w, &f)) << "a destroyed communicator";
  EXPECT_EQ(nullptr, w);
  EXPECT_NE(nullptr, std::strstr(f.message, "ncclCommCuDevice")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "ncclInvalidArgument")) << f.message;
  EXPECT_NE(nullptr, std::strstr(f.message, "live communicator")) << f.message;
  EXPECT_EQ(1u, Counts().violation_count) << "the fake saw the call on a destroyed one";
  gmr_test_fake_nccl_clear_violations();
}

TEST_F(Nccl, ThreadsAllocateOnBothRanksWhileRegistered) {
  gmr_resource *pool[2];
  gmr_nccl_registration *reg[2];
  for (int d = 0; d < 2; ++d) {
    pool[d] = Stack("pool(min_growth=2MiB, max_growth=2MiB, release_on_growth=true) > "
                    "chunk_listener > cumem(device=" + std::to_string(d) + ", nccl_ready=true)");
    ASSERT_EQ(GMR_OK, gmr_nccl_register_pool(comms_[d], pool[d], &reg[d], nullptr));
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      int d = t % 2;
      if (gmr_device_set_current(d) != GMR_OK) failures++;
      for (int i = 0; i < 150; ++i) {
        size_t bytes = size_t(1 + (i * 5 + t) % 7) * kMiB;
        void *p = nullptr;
        if (gmr_resource_allocate(pool[d], bytes, 0, nullptr, &p) != GMR_OK) {
          failures++;
          continue;
        }
        if (!gmr_nccl_registration_covers(reg[d], p, bytes)) failures++;
        if (gmr_resource_deallocate(pool[d], p, bytes, 0, nullptr) != GMR_OK) failures++;
        if (i % 25 == 0 && gmr_resource_trim(pool[d], nullptr) != GMR_OK) failures++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, failures.load());
  EXPECT_EQ(0u, gmr_test_fake_nccl_verify());
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(GMR_OK, gmr_nccl_deregister(reg[d], nullptr));
  }
}

}  // namespace
