// vmm (fine placement) on the simulation: in-place growth (extend),
// trim, sleep and wake, and injected driver failures at every call of a
// growth, a move and a wake, each leaving the pool as it was.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/vmm/vmm_fine_fixture.h"

namespace {

using gmr_test::FineConfig;
using gmr_test::kPage;
using gmr_test::Stats;
using gmr_test::VmmCalls;

class VmmFineFeatures : public gmr_test::FineTest {};

TEST_F(VmmFineFeatures, ExtendGrowsIntoFreeBytesThenIntoAHole) {
  Make();
  void *p = Alloc(3000);
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r_, p, 3000, kPage - 1024, 0, nullptr, &f)) << f.message;
  EXPECT_EQ(kPage, Held()) << "the rest of its page";
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r_, p, kPage - 1024, 3 * kPage, 0, nullptr, &f))
      << f.message;
  EXPECT_EQ(3 * kPage, Held()) << "two pages mapped after it";
  std::memset(p, 5, 3 * kPage);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_extend(r_, p, 3000, 4 * kPage, 0, nullptr, &f));
  void *next = Alloc(256);
  EXPECT_EQ(static_cast<char *>(p) + 3 * kPage, next);
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_extend(r_, p, 3 * kPage, 4 * kPage, 0, nullptr, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "in place")) << f.message;
  EXPECT_EQ(2u, Stats(pool_).live_count) << "p and next";
  EXPECT_EQ(2u, Stats(pool_).extend_count);
  Free(next, 256);
  Free(p, 3 * kPage);
  int outside = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_extend(r_, &outside, 256, 512, 0, nullptr, &f));
  EXPECT_EQ(GMR_ERR_DOUBLE_FREE, gmr_resource_extend(r_, p, 3 * kPage, 4 * kPage, 0, nullptr, &f));
}

TEST_F(VmmFineFeatures, TrimGivesBackWhatIsWhollyFreeAndKeepsLiveBytes) {
  gmr_vmm_pool_resource_config c = FineConfig();
  c.handle_divisor = 0;
  Make(c);
  void *a = Alloc(4 * kPage);
  void *b = Alloc(kPage / 2);
  std::memset(b, 3, kPage / 2);
  Free(a, 4 * kPage);
  const size_t used = Device().used_bytes;
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
  EXPECT_EQ(4 * kPage, released);
  EXPECT_EQ(used - 4 * kPage, Device().used_bytes) << "the device has it back";
  EXPECT_EQ(kPage, Held());
  EXPECT_EQ(3, static_cast<char *>(b)[kPage / 2 - 1]);
  void *again = Alloc(4 * kPage);
  EXPECT_EQ(a, again) << "the addresses are mapped again";
  Free(again, 4 * kPage);
  Free(b, kPage / 2);
}

TEST_F(VmmFineFeatures, SleepGivesEverythingBackAndWakeRestoresSavedContents) {
  Make();
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, 1));
  void *weights = Alloc(kPage + 4096);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_default_tag(pool_, 2));
  void *cache = Alloc(5000);
  void *scratch = Alloc(kPage);
  std::memset(weights, 0x5a, kPage + 4096);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_set_tag(pool_, scratch, 3));
  const size_t used = Device().used_bytes;
  gmr_vmm_pool_sleep_options so = GMR_VMM_POOL_SLEEP_OPTIONS_INIT;
  so.save_tag_mask = 1u << 1;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, &so, &f)) << f.message;
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  EXPECT_EQ(0u, Device().used_bytes) << "every page went back (was " << used << ")";
  EXPECT_EQ(0u, Held());
  gmr_test::ExpectInvariants(pool_);
  void *p = nullptr;
  EXPECT_EQ(GMR_ERR_BUSY, gmr_resource_allocate_ex(r_, 100, 0, nullptr, &p, &f));
  Free(cache, 5000);  // freeing while asleep is allowed
  gmr_vmm_pool_wake_options wo = GMR_VMM_POOL_WAKE_OPTIONS_INIT;
  wo.wake_all = false;
  wo.wake_tag_mask = 1u << 1;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, &wo, &f)) << f.message;
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_)) << "scratch still sleeps";
  gmr_test::ExpectInvariants(pool_);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  EXPECT_FALSE(gmr_vmm_pool_resource_is_asleep(pool_));
  const unsigned char *w = static_cast<const unsigned char *>(weights);
  for (size_t i = 0; i < kPage + 4096; i += 999) ASSERT_EQ(0x5a, w[i]) << i;
  std::memset(scratch, 1, kPage);
  EXPECT_EQ(2u, Stats(pool_).live_count);
  gmr_test::ExpectInvariants(pool_);
  void *after = Alloc(3000);
  Free(after, 3000);
  Free(weights, kPage + 4096);
  Free(scratch, kPage);
  EXPECT_EQ(1u, Stats(pool_).sleep_count);
  EXPECT_EQ(2u, Stats(pool_).wake_count);
}

TEST_F(VmmFineFeatures, AWakeTheDeviceCannotServeChangesNothing) {
  Make();
  void *a = Alloc(3 * kPage);
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_sleep(pool_, nullptr, &f)) << f.message;
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_CREATE, 0, 1,
                                                cudaError_t(CUDA_ERROR_OUT_OF_MEMORY)));
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_vmm_pool_resource_wake(pool_, nullptr, &f));
  EXPECT_EQ(0u, Device().used_bytes);
  EXPECT_TRUE(gmr_vmm_pool_resource_is_asleep(pool_));
  gmr_test::ExpectInvariants(pool_);
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_wake(pool_, nullptr, &f)) << f.message;
  Free(a, 3 * kPage);
}

// Each driver call of a growth refused in turn: the request fails with the
// driver's code, and the pool and the device are as before.
TEST_F(VmmFineFeatures, EveryFailedCallOfAGrowthLeavesThePoolAsItWas) {
  gmr_vmm_pool_resource_config c = FineConfig();
  c.handle_divisor = 1;  // one handle per page of held memory: several per growth
  Make(c);
  void *base = Alloc(2 * kPage);
  for (gmr_cuda_call call :
       {GMR_CUDA_CALL_MEM_CREATE, GMR_CUDA_CALL_MEM_MAP, GMR_CUDA_CALL_MEM_SET_ACCESS}) {
    for (uint64_t skip = 0; skip < 3; ++skip) {
      SCOPED_TRACE(gmr_cuda_call_name(call) + std::string(" after ") + std::to_string(skip));
      const size_t used = Device().used_bytes;
      const size_t held = Held();
      const std::string layout = gmr_test::Layout(pool_);
      cudaError_t err = call == GMR_CUDA_CALL_MEM_CREATE ? cudaError_t(CUDA_ERROR_OUT_OF_MEMORY)
                                                         : cudaErrorInvalidValue;
      ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(call, skip, UINT64_MAX, err));
      void *p = nullptr;
      gmr_failure f = GMR_FAILURE_INIT;
      gmr_status st = gmr_resource_allocate_ex(r_, 5 * kPage, 0, nullptr, &p, &f);
      EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
      if (st == GMR_OK) {  // fewer calls than `skip`: it succeeded
        Free(p, 5 * kPage);
        continue;
      }
      EXPECT_EQ(call == GMR_CUDA_CALL_MEM_CREATE ? GMR_ERR_OUT_OF_MEMORY : GMR_ERR_CUDA, st);
      EXPECT_EQ(int(err), f.cuda_error);
      EXPECT_NE(nullptr, std::strstr(f.message, gmr_cuda_call_name(call))) << f.message;
      EXPECT_EQ(used, Device().used_bytes);
      EXPECT_EQ(held, Held());
      EXPECT_EQ(layout, gmr_test::Layout(pool_));
      gmr_test::ExpectInvariants(pool_);
      // Nothing is broken for good (pytorch#188008): the same request works.
      ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, 5 * kPage, 0, nullptr, &p, &f)) << f.message;
      std::memset(p, 3, 5 * kPage);
      Free(p, 5 * kPage);
      ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, nullptr));  // the next try grows again
    }
  }
  Free(base, 2 * kPage);
}

// A move refused half-way: the request fails and what was moved went back
// to the device; every region is consistent.
TEST_F(VmmFineFeatures, AFailedMoveGivesBackWhatItMovedAndBreaksNothing) {
  Make();
  void *a = Alloc(3 * kPage);
  void *b = Alloc(kPage);
  void *c = Alloc(3 * kPage);
  void *d = Alloc(kPage);
  std::memset(b, 4, kPage);
  Free(a, 3 * kPage);
  Free(c, 3 * kPage);
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_MAP, 1, 1, cudaErrorInvalidValue));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_allocate_ex(r_, 6 * kPage, 0, nullptr, &p, &f));
  EXPECT_EQ(GMR_OK, gmr_cuda_sim_clear_failures());
  gmr_test::ExpectInvariants(pool_);
  EXPECT_LE(Held(), 8 * kPage);
  EXPECT_EQ(4, static_cast<char *>(b)[100]);
  void *e = Alloc(6 * kPage);
  std::memset(e, 1, 6 * kPage);
  Free(e, 6 * kPage);
  Free(b, kPage);
  Free(d, kPage);
}

TEST_F(VmmFineFeatures, ARefusedVaReservationIsReported) {
  Make(FineConfig(4));
  void *a = Alloc(3 * kPage);
  ASSERT_EQ(GMR_OK, gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_MEM_ADDRESS_RESERVE, 0, 1,
                                                cudaErrorMemoryAllocation));
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r_, 4 * kPage, 0, nullptr, &p, &f));
  EXPECT_NE(nullptr, std::strstr(f.message, "cuMemAddressReserve")) << f.message;
  EXPECT_EQ(1u, Stats(pool_).va_chunk_count);
  void *q = Alloc(4 * kPage);
  EXPECT_EQ(2u, Stats(pool_).va_chunk_count) << "a chunk of its own";
  Free(q, 4 * kPage);
  Free(a, 3 * kPage);
}

// Random allocations, frees, growths in place, trims and streams with the
// moving threshold at zero (memory moves whenever it can): every live block
// keeps its bytes and the pool stays consistent.
TEST_F(VmmFineFeatures, RandomWorkKeepsEveryBlockAndTheInvariants) {
  gmr_vmm_pool_resource_config c = FineConfig(48);
  c.growth_percent = 50;
  c.handle_divisor = 4;
  c.remap_permille = 0;
  Make(c);
  gmr_stream streams[2] = {nullptr, nullptr};
  ASSERT_EQ(GMR_OK, gmr_cuda_stream_create(&streams[1]));
  struct Block {
    unsigned char *p;
    size_t bytes;
    unsigned char fill;
    gmr_stream s;
  };
  std::vector<Block> live;
  unsigned x = 2024;
  auto next = [&x] {
    x = x * 1103515245u + 12345u;
    return x >> 8;
  };
  for (int i = 0; i < 1500; ++i) {
    unsigned op = next() % 10;
    if (op < 5 || live.empty()) {
      // Two statements: the operands of % are unsequenced, and builds
      // differed in which next() ran first (another program under ASan).
      const unsigned r = next();
      const size_t span = next() % 4 == 0 ? 5 * kPage : 64 * 1024;
      size_t bytes = 1 + r % span;
      gmr_stream s = streams[next() % 2];
      void *p = nullptr;
      gmr_failure f = GMR_FAILURE_INIT;
      ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(r_, bytes, 0, s, &p, &f)) << f.message;
      unsigned char fill = static_cast<unsigned char>(next());
      std::memset(p, fill, bytes);
      live.push_back({static_cast<unsigned char *>(p), bytes, fill, s});
    } else if (op < 9) {
      size_t k = next() % live.size();
      Block b = live[k];
      for (size_t j = 0; j < b.bytes; j += 1 + b.bytes / 7) ASSERT_EQ(b.fill, b.p[j]) << i;
      ASSERT_EQ(b.fill, b.p[b.bytes - 1]) << i;
      ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, b.p, b.bytes, 0, b.s));
      live.erase(live.begin() + static_cast<long>(k));
    } else if (next() % 2 == 0) {
      Block &b = live[next() % live.size()];
      size_t more = b.bytes + 1 + next() % kPage;
      gmr_failure f = GMR_FAILURE_INIT;
      gmr_status st = gmr_resource_extend(r_, b.p, b.bytes, more, 0, b.s, &f);
      ASSERT_TRUE(st == GMR_OK || st == GMR_ERR_UNSUPPORTED) << gmr_status_name(st) << f.message;
      if (st == GMR_OK) {
        std::memset(b.p + b.bytes, b.fill, more - b.bytes);
        b.bytes = more;
      }
    } else {
      size_t released = 0;
      ASSERT_EQ(GMR_OK, gmr_resource_trim(r_, &released));
    }
    if (i % 250 == 0) gmr_test::ExpectInvariants(pool_);
  }
  for (Block &b : live) {
    ASSERT_EQ(b.fill, b.p[0]);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r_, b.p, b.bytes, 0, b.s));
  }
  EXPECT_GT(Stats(pool_).remapped_page_count, 0u) << "memory moved on the way";
  gmr_test::ExpectInvariants(pool_);
  EXPECT_EQ(GMR_OK, gmr_cuda_stream_destroy(streams[1]));
}

TEST_F(VmmFineFeatures, DestroyRefusedByTheDriverLeavesAUsablePool) {
  Make();
  void *a = Alloc(kPage);
  Free(a, kPage);
  ASSERT_EQ(GMR_OK,
            gmr_cuda_sim_inject_failure(GMR_CUDA_CALL_DEVICE_SYNCHRONIZE, 0, 1, cudaErrorUnknown));
  EXPECT_EQ(GMR_ERR_CUDA, gmr_resource_destroy(r_));
  void *b = Alloc(kPage);
  EXPECT_EQ(a, b);
  Free(b, kPage);
}

}  // namespace
