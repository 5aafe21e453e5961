// The messages of the VMM resources' refusals (issue 20): each says what was asked,
// the limit and the option (or argument) to change. initial_pages more than
// the device can map, in C and in a spec, vmm and vmm_pages; stream options
// the VMM resources do not read; sleep and wake given a NULL pool or options
// without their header.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "gmr/sim/cuda_sim.h"
#include "gmr/resource.h"
#include "gmr/stack.h"
#include "gmr/vmm_pool_resource.h"
#include "tests/support/sim_fixture.h"
#include "tests/vmm/vmm_test_util.h"

namespace {

using gmr_test::kMiB;

bool Has(const char *text, const std::string &part) { return std::strstr(text, part.c_str()); }

class VmmPoolMessages : public gmr_test::SimTest {
 protected:
  // A device of 64 MiB: 32 pages of 2 MiB.
  VmmPoolMessages() { sim_config_.device_memory_bytes = 64 * kMiB; }
};

TEST_F(VmmPoolMessages, InitialPagesMoreThanTheDeviceHoldsNamesTheOptionAndTheLimit) {
  for (gmr_test::Placement placement : {gmr_test::Placement::kPages, gmr_test::Placement::kFine}) {
    SCOPED_TRACE(placement == gmr_test::Placement::kFine ? "vmm" : "vmm_pages");
    gmr_vmm_pool_resource_config c = gmr_test::TestConfig(16, 40);
    gmr_vmm_pool_resource *pool = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_test::CreateVmm(placement, &c, &pool, &f));
    EXPECT_EQ(nullptr, pool);
    EXPECT_TRUE(Has(f.message, "initial_pages=40")) << f.message;
    EXPECT_TRUE(Has(f.message, "room for 32")) << f.message;
    EXPECT_TRUE(Has(f.message, "lower initial_pages")) << f.message;
    EXPECT_NE(0, f.cuda_error) << "the driver's code stays in the record";
    gmr_cuda_sim_vmm_usage vmm;
    ASSERT_EQ(GMR_OK, gmr_cuda_sim_get_vmm_usage(&vmm));
    EXPECT_EQ(0u, vmm.physical_count) << "every page mapped on the way went back";
  }
  // Past what any size can express: the limit is the device's room too.
  gmr_vmm_pool_resource_config c = gmr_test::TestConfig(16, SIZE_MAX / 2);
  gmr_vmm_pool_resource *pool = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_vmm_pages_resource_create(&c, &pool, &f));
  EXPECT_TRUE(Has(f.message, "initial_pages=" + std::to_string(SIZE_MAX / 2))) << f.message;
  EXPECT_TRUE(Has(f.message, "room for 32")) << f.message;
}

// Of the stream options the pools share (gmr/stream_ordered_options.h), the
// VMM resources read streams_outlive_resource only: any other field away from
// its default is refused by name, nothing made; streams_outlive alone is fine.
TEST_F(VmmPoolMessages, StreamOptionsTheyDoNotReadAreRefusedByName) {
  struct Case {
    const char *name;
    void (*set)(gmr_stream_ordered_options *);
  };
  const Case cases[] = {
      {"stream_ordered = false", [](gmr_stream_ordered_options *o) { o->stream_ordered = false; }},
      {"nvtx_annotate", [](gmr_stream_ordered_options *o) { o->nvtx_annotate = true; }},
      {"record_at_every_free",
       [](gmr_stream_ordered_options *o) { o->record_at_every_free = true; }},
      {"stream_ids", [](gmr_stream_ordered_options *o) { o->stream_ids = true; }},
  };
  for (gmr_test::Placement placement : {gmr_test::Placement::kPages, gmr_test::Placement::kFine}) {
    for (const Case &k : cases) {
      SCOPED_TRACE(std::string(placement == gmr_test::Placement::kFine ? "vmm " : "vmm_pages ") +
                   k.name);
      gmr_vmm_pool_resource_config c = gmr_test::TestConfig(16);
      k.set(&c.streams);
      gmr_vmm_pool_resource *pool = nullptr;
      gmr_failure f = GMR_FAILURE_INIT;
      EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_test::CreateVmm(placement, &c, &pool, &f));
      EXPECT_EQ(nullptr, pool);
      EXPECT_TRUE(Has(f.message, std::string("streams.") + k.name)) << f.message;
      EXPECT_TRUE(Has(f.message, "streams_outlive_resource only")) << f.message;
    }
    gmr_vmm_pool_resource_config c = gmr_test::TestConfig(16);
    c.streams.streams_outlive_resource = true;
    gmr_vmm_pool_resource *pool = nullptr;
    ASSERT_EQ(GMR_OK, gmr_test::CreateVmm(placement, &c, &pool, nullptr));
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_vmm_pool_resource_as_resource(pool)));
  }
}

TEST_F(VmmPoolMessages, InitialPagesInASpecNamesTheOptionAndTheLimit) {
  for (const char *spec : {"vmm_pages(initial_pages=40)", "vmm(initial_pages=40)"}) {
    SCOPED_TRACE(spec);
    gmr_stack *stack = nullptr;
    gmr_spec_error error;
    EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_stack_create(spec, &stack, &error));
    EXPECT_TRUE(Has(error.message, "initial_pages=40")) << error.message;
    EXPECT_TRUE(Has(error.message, "room for 32")) << error.message;
  }
}

TEST_F(VmmPoolMessages, SleepAndWakeSayWhatIsWrongWithTheirArguments) {
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_sleep(nullptr, nullptr, &f));
  EXPECT_TRUE(Has(f.message, "gmr_vmm_pool_resource_sleep: pool is NULL")) << f.message;
  f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_wake(nullptr, nullptr, &f));
  EXPECT_TRUE(Has(f.message, "gmr_vmm_pool_resource_wake: pool is NULL")) << f.message;
  // NULL failure record: the status alone.
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_sleep(nullptr, nullptr, nullptr));

  gmr_vmm_pool_resource_config c = gmr_test::TestConfig(16);
  gmr_vmm_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&c, &pool, nullptr));
  gmr_vmm_pool_sleep_options so = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  so.size = 4;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_sleep(pool, &so, &f));
  EXPECT_TRUE(Has(f.message, "size 4")) << f.message;
  // Version 1's struct is enough (a program built before version 2 still works).
  const size_t v1 = offsetof(gmr_vmm_pool_sleep_options, save_tag_mask) + sizeof(uint64_t);
  EXPECT_TRUE(Has(f.message, "size >= " + std::to_string(v1))) << f.message;
  EXPECT_TRUE(Has(f.message, "GMR_VMM_POOL_SLEEP_OPTIONS_INIT")) << f.message;
  so = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  so.host = static_cast<gmr_vmm_pool_host_kind>(7);
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_sleep(pool, &so, &f));
  EXPECT_TRUE(Has(f.message, "host kind 7")) << f.message;
  EXPECT_TRUE(Has(f.message, "GMR_VMM_POOL_HOST_PAGEABLE")) << f.message;
  gmr_vmm_pool_wake_options wo = GMR_VMM_POOL_WAKE_OPTIONS_INIT;
  wo.version = 0;
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_vmm_pool_resource_wake(pool, &wo, &f));
  EXPECT_TRUE(Has(f.message, "version 0")) << f.message;
  EXPECT_TRUE(Has(f.message, "GMR_VMM_POOL_WAKE_OPTIONS_INIT")) << f.message;
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool)) << "nothing changed";
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_vmm_pool_resource_as_resource(pool)));
}

// A request (or an extension) above all of the device's memory is refused
// with a message naming the device's size before anything is planned for
// it: no driver call, no host memory in proportion to the request (the spec
// fuzzer found `pool(initial=67000378MB) > vmm` planning 32 million handles,
// 4 GiB of host books, before the first cuMemCreate failed). Nothing changes:
// the pool serves what fits afterwards.
TEST_F(VmmPoolMessages, ARequestAboveTheDevicesMemoryIsRefusedBeforeAnythingIsPlanned) {
  for (gmr_test::Placement placement : {gmr_test::Placement::kPages, gmr_test::Placement::kFine}) {
    SCOPED_TRACE(placement == gmr_test::Placement::kFine ? "vmm" : "vmm_pages");
    gmr_vmm_pool_resource_config c = gmr_test::TestConfig(16);
    gmr_vmm_pool_resource *pool = nullptr;
    gmr_failure f = GMR_FAILURE_INIT;
    ASSERT_EQ(GMR_OK, gmr_test::CreateVmm(placement, &c, &pool, &f)) << f.message;
    gmr_resource *r = gmr_vmm_pool_resource_as_resource(pool);
    const uint64_t creates = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE);
    const uint64_t reserves = gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE);
    for (size_t bytes : {64 * kMiB + 1, (size_t)67000378 << 20}) {
      void *p = nullptr;
      f = GMR_FAILURE_INIT;
      EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, bytes, 0, nullptr, &p, &f));
      EXPECT_EQ(nullptr, p);
      EXPECT_TRUE(Has(f.message, std::to_string(bytes) + " bytes asked for")) << f.message;
      EXPECT_TRUE(Has(f.message, "device 0's memory in all (67108864 bytes)")) << f.message;
    }
    EXPECT_EQ(creates, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_CREATE));
    EXPECT_EQ(reserves, gmr_cuda_sim_get_call_count(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE));
    // An extension past the device's memory: the same refusal, the block as it was.
    void *p = nullptr;
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 4 * kMiB, 0, nullptr, &p));
    f = GMR_FAILURE_INIT;
    EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY,
              gmr_resource_extend(r, p, 4 * kMiB, (size_t)1 << 46, 0, nullptr, &f));
    EXPECT_TRUE(Has(f.message, "more than device 0's memory in all")) << f.message;
    std::memset(p, 0x5a, 4 * kMiB);
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 4 * kMiB, 0, nullptr)) << "still 4 MiB";
    // What fits is served.
    ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 32 * kMiB, 0, nullptr, &p));
    EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 32 * kMiB, 0, nullptr));
    gmr_test::ExpectInvariants(pool);
    EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  }
}

}  // namespace
