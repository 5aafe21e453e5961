// Every adaptor forwards every slot through the one base (core/adaptor.h,
// core/forward.h): over a leaf that records each call, each adaptor type
// passes allocate, deallocate, record_stream, allocate_capturing and extend
// to the leaf's slot exactly once with the same arguments, and with the
// failure record the layer above gave it (the public dispatch would have
// reset it: no adaptor re-enters gmr_resource_*); trim, the footprint and
// the memory info reach the leaf through the dispatch's walk; get_upstream
// names the layer below; a failure's record comes back up naming the leaf.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "adaptors/oom_internal.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/log_adaptor.h"
#include "gmr/nccl/chunk_listener_adaptor.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/tiers/tier_manager.h"
#include "gmr/tracking_adaptor.h"
#include "stack/device_guard.h"
#include "tests/support/policies.h"
#include "tests/support/sim_fixture.h"

namespace {

gmr_stream S(uintptr_t v) { return reinterpret_cast<gmr_stream>(v); }

constexpr char kFromAbove[] = "left by the layer above";

// A leaf with every slot, counting the calls and keeping the last arguments.
struct Leaf {
  gmr_resource base;
  gmr_resource_vtbl vtbl;
  std::set<void *> live;
  int allocate = 0, capturing = 0, deallocate = 0, record = 0, trim = 0, extend = 0;
  size_t bytes = 0, alignment = 0, new_bytes = 0;
  gmr_stream stream = nullptr;
  void *ptr = nullptr;
  std::string message_seen;  // the record's message when a slot was called
  int failures_left = 0;  // allocations to fail
};

Leaf *Of(const gmr_resource *r) { return reinterpret_cast<Leaf *>(const_cast<gmr_resource *>(r)); }

gmr_status LeafAllocateAs(gmr_resource *self, int *calls, size_t bytes, size_t alignment,
                          gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  Leaf *l = Of(self);
  ++*calls;
  l->bytes = bytes;
  l->alignment = alignment;
  l->stream = stream;
  l->message_seen = failure->message;
  if (l->failures_left > 0) {
    l->failures_left--;
    failure->cuda_error = 2;
    snprintf(failure->message, sizeof failure->message, "leaf: out of memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  *out_ptr = aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  l->live.insert(*out_ptr);
  return GMR_OK;
}

gmr_status LeafAllocate(gmr_resource *self, size_t bytes, size_t alignment, gmr_stream stream,
                        void **out_ptr, gmr_failure *failure) {
  return LeafAllocateAs(self, &Of(self)->allocate, bytes, alignment, stream, out_ptr, failure);
}

gmr_status LeafAllocateCapturing(gmr_resource *self, size_t bytes, size_t alignment,
                                 gmr_stream stream, void **out_ptr, gmr_failure *failure) {
  return LeafAllocateAs(self, &Of(self)->capturing, bytes, alignment, stream, out_ptr, failure);
}

gmr_status LeafDeallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                          gmr_stream stream) {
  Leaf *l = Of(self);
  l->deallocate++;
  l->ptr = ptr;
  l->bytes = bytes;
  l->alignment = alignment;
  l->stream = stream;
  if (l->live.erase(ptr) == 0) return GMR_ERR_UNKNOWN_POINTER;
  free(ptr);
  return GMR_OK;
}

gmr_status LeafDestroy(gmr_resource *) { return GMR_OK; }

gmr_status LeafRecordStream(gmr_resource *self, void *ptr, gmr_stream stream) {
  Leaf *l = Of(self);
  l->record++;
  l->ptr = ptr;
  l->stream = stream;
  return l->live.count(ptr) != 0 ? GMR_OK : GMR_ERR_UNKNOWN_POINTER;
}

gmr_status LeafTrim(gmr_resource *self, size_t *released) {
  Of(self)->trim++;
  *released = 4096;
  return GMR_OK;
}

gmr_status LeafFootprint(const gmr_resource *, gmr_footprint *out) {
  out->held_bytes = 111;
  out->peak_held_bytes = 222;
  return GMR_OK;
}

gmr_status LeafMemoryInfo(const gmr_resource *, gmr_memory_info *out) {
  out->held_bytes = 1000;
  out->largest_free_block_bytes = 200;
  return GMR_OK;
}

gmr_status LeafExtend(gmr_resource *self, void *ptr, size_t bytes, size_t new_bytes,
                      size_t alignment, gmr_stream stream, gmr_failure *failure) {
  Leaf *l = Of(self);
  l->extend++;
  l->ptr = ptr;
  l->bytes = bytes;
  l->new_bytes = new_bytes;
  l->alignment = alignment;
  l->stream = stream;
  l->message_seen = failure->message;
  return GMR_OK;  // the blocks are allocated with room to spare in these tests
}

void InitLeaf(Leaf *l) {
  std::memset(&l->vtbl, 0, sizeof l->vtbl);
  l->vtbl = {GMR_RESOURCE_VTBL_VERSION, "leaf", LeafAllocate, LeafDeallocate, LeafDestroy,
             nullptr, LeafTrim, LeafFootprint, LeafMemoryInfo, LeafRecordStream,
             LeafAllocateCapturing, LeafExtend};
  l->base.vtbl = &l->vtbl;
}

// One adaptor type: its layers over the leaf (top returned; `depth` layers
// down to it), and how they are destroyed.
struct Adaptor {
  std::string name;
  std::function<gmr_resource *(gmr_resource *leaf)> make;
  size_t depth = 1;
  bool extends = true;  // has the extend slot (a chunk listener's chunks never grow)
};

void PrintTo(const Adaptor &a, std::ostream *os) { *os << a.name; }

FILE *LogFile() {
  static FILE *f = tmpfile();
  return f;
}

gmr_tier_manager *g_manager = nullptr;  // the memory space's: it destroys the space

std::vector<Adaptor> Adaptors() {
  std::vector<Adaptor> v;
  v.push_back({"tracking", [](gmr_resource *up) {
                 gmr_tracking_adaptor *a = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_tracking_adaptor_create(up, nullptr, &a));
                 return gmr_tracking_adaptor_as_resource(a);
               }});
  v.push_back({"limiting_counting", [](gmr_resource *up) {
                 gmr_limiting_adaptor *a = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_create(up, nullptr, &a));
                 return gmr_limiting_adaptor_as_resource(a);
               }});
  v.push_back({"limiting_enforcing_per_stream", [](gmr_resource *up) {
                 gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
                 c.limit_bytes = 1 << 20;
                 c.per_stream = true;
                 gmr_limiting_adaptor *a = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_create(up, &c, &a));
                 return gmr_limiting_adaptor_as_resource(a);
               }});
  v.push_back({"limiting_with_on_oom", [](gmr_resource *up) {
                 gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
                 c.limit_bytes = 1 << 20;
                 gmr_oom_policy p = gmr_test::TrimRetryPolicy(1);
                 gmr_limiting_adaptor *lim = nullptr;
                 gmr_resource *top = nullptr;
                 EXPECT_EQ(GMR_OK, gmr__limiting_with_oom_create(up, &c, &p, &lim, &top));
                 return top;
               },
               2});
  v.push_back({"oom", [](gmr_resource *up) {
                 gmr_oom_policy p = gmr_test::TrimRetryPolicy(1);
                 gmr_oom_adaptor *a = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_oom_adaptor_create(up, &p, &a));
                 return gmr_oom_adaptor_as_resource(a);
               }});
  v.push_back({"log", [](gmr_resource *up) {
                 gmr_log_adaptor_config c = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
                 c.file = LogFile();
                 gmr_log_adaptor *a = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_log_adaptor_create(up, &c, &a));
                 return gmr_log_adaptor_as_resource(a);
               }});
  v.push_back({"nvtx_logging", [](gmr_resource *up) {
                 gmr_nvtx_logging_adaptor *a = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(up, nullptr, &a));
                 return gmr_nvtx_logging_adaptor_as_resource(a);
               }});
  v.push_back({"chunk_listener",
               [](gmr_resource *up) {
                 gmr_chunk_listener_adaptor *a = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_chunk_listener_adaptor_create(up, &a));
                 return gmr_chunk_listener_adaptor_as_resource(a);
               },
               1, false});
  v.push_back({"device_guard", [](gmr_resource *up) {
                 gmr__device_guard *g = nullptr;
                 EXPECT_EQ(GMR_OK, gmr__device_guard_create(up, 0, &g));
                 return gmr__device_guard_as_resource(g);
               }});
  // memory_space > limiting(per_stream) > leaf: a GPU space over a lent upstream.
  v.push_back({"memory_space",
               [](gmr_resource *up) -> gmr_resource * {
                 gmr_memory_space_config c = gmr_memory_space_config_default(GMR_TIER_GPU, 0);
                 c.capacity_bytes = 1 << 20;
                 c.stream_count = 0;
                 c.upstream = up;
                 gmr_failure f = GMR_FAILURE_INIT;
                 EXPECT_EQ(GMR_OK, gmr_tier_manager_create(&c, 1, &g_manager, &f)) << f.message;
                 if (g_manager == nullptr) return nullptr;
                 return gmr_memory_space_as_resource(
                     gmr_tier_manager_get_space(g_manager, gmr_memory_space_id{GMR_TIER_GPU, 0}));
               },
               2, false});
  return v;
}

class Base : public gmr_test::SimTest, public ::testing::WithParamInterface<Adaptor> {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    InitLeaf(&leaf_);
    top_ = GetParam().make(&leaf_.base);
    ASSERT_NE(nullptr, top_);
  }
  void TearDown() override {
    if (g_manager != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_tier_manager_destroy(g_manager));
      g_manager = nullptr;
    } else {
      for (gmr_resource *r = top_; r != nullptr && r != &leaf_.base;) {
        gmr_resource *below = gmr_resource_get_upstream(r);
        EXPECT_EQ(GMR_OK, gmr_resource_destroy(r)) << gmr_resource_get_type_name(r);
        r = below;
      }
    }
    EXPECT_TRUE(leaf_.live.empty());
    SimTest::TearDown();
  }
  // A record as a layer above hands it down: whole, with a message in it.
  static gmr_failure FromAbove() {
    gmr_failure f = GMR_FAILURE_INIT;
    snprintf(f.message, sizeof f.message, "%s", kFromAbove);
    return f;
  }
  Leaf leaf_;
  gmr_resource *top_ = nullptr;
};

TEST_P(Base, GetUpstreamNamesTheLayerBelowDownToTheLeaf) {
  gmr_resource *r = top_;
  for (size_t i = 0; i < GetParam().depth; ++i) {
    ASSERT_NE(nullptr, r);
    r = gmr_resource_get_upstream(r);
  }
  EXPECT_EQ(&leaf_.base, r);
}

TEST_P(Base, AllocateAndDeallocateReachTheLeafOnceWithTheRecordFromAbove) {
  gmr_failure f = FromAbove();
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, top_->vtbl->allocate(top_, 1000, 512, S(3), &p, &f)) << f.message;
  EXPECT_EQ(1, leaf_.allocate);
  EXPECT_EQ(0, leaf_.capturing);
  EXPECT_EQ(1000u, leaf_.bytes);
  EXPECT_EQ(512u, leaf_.alignment);
  EXPECT_EQ(S(3), leaf_.stream);
  EXPECT_EQ(kFromAbove, leaf_.message_seen) << "a layer reset the record on the way down";
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 1000, 512, S(3)));
  EXPECT_EQ(1, leaf_.deallocate);
  EXPECT_EQ(p, leaf_.ptr);
  EXPECT_EQ(1000u, leaf_.bytes);
  EXPECT_EQ(512u, leaf_.alignment);
  EXPECT_EQ(S(3), leaf_.stream);
}

TEST_P(Base, AllocateCapturingReachesTheLeafsCapturingSlotOnce) {
  gmr_failure f = FromAbove();
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, top_->vtbl->allocate_capturing(top_, 700, 256, S(4), &p, &f)) << f.message;
  EXPECT_EQ(1, leaf_.capturing);
  EXPECT_EQ(0, leaf_.allocate);
  EXPECT_EQ(700u, leaf_.bytes);
  EXPECT_EQ(S(4), leaf_.stream);
  EXPECT_EQ(kFromAbove, leaf_.message_seen);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 700, 256, S(4)));
  EXPECT_EQ(1, leaf_.deallocate);
}

TEST_P(Base, RecordStreamReachesTheLeafOnce) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 1000, 0, S(1), &p));
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(top_, p, S(9)));
  EXPECT_EQ(1, leaf_.record);
  EXPECT_EQ(p, leaf_.ptr);
  EXPECT_EQ(S(9), leaf_.stream);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 1000, 0, S(1)));
}

TEST_P(Base, ExtendReachesTheLeafOnceWithTheRecordFromAbove) {
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 4096, 0, S(1), &p));
  gmr_failure f = FromAbove();
  if (!GetParam().extends) {
    EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_extend(top_, p, 1000, 2000, 0, S(1), &f));
    EXPECT_EQ(0, leaf_.extend);
    ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 4096, 0, S(1)));
    return;
  }
  ASSERT_EQ(GMR_OK, top_->vtbl->extend(top_, p, 4096, 6000, 256, S(1), &f)) << f.message;
  EXPECT_EQ(1, leaf_.extend);
  EXPECT_EQ(p, leaf_.ptr);
  EXPECT_EQ(4096u, leaf_.bytes);
  EXPECT_EQ(6000u, leaf_.new_bytes);
  EXPECT_EQ(S(1), leaf_.stream);
  EXPECT_EQ(kFromAbove, leaf_.message_seen);
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 6000, 0, S(1)));
}

TEST_P(Base, TrimFootprintAndMemoryInfoReachTheLeafThroughTheWalk) {
  size_t released = 0;
  EXPECT_EQ(GMR_OK, gmr_resource_trim(top_, &released));
  EXPECT_EQ(1, leaf_.trim) << "trimmed once: an adaptor leaves the walk to the dispatch";
  EXPECT_EQ(4096u, released);
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(top_, &fp));
  EXPECT_EQ(111u, fp.held_bytes);
  EXPECT_EQ(222u, fp.peak_held_bytes);
  gmr_memory_info mi = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(top_, &mi));
  EXPECT_EQ(1000u, mi.held_bytes);
  EXPECT_EQ(200u, mi.largest_free_block_bytes);
}

TEST_P(Base, AFailureOfTheLeafComesBackUpNamingIt) {
  leaf_.failures_left = 100;  // an OOM policy's retry fails too
  void *p = reinterpret_cast<void *>(0x1);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(top_, 1000, 0, S(2), &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, f.status);
  EXPECT_EQ(&leaf_.base, f.where);
  EXPECT_EQ(1000u, f.bytes);
  EXPECT_EQ(S(2), f.stream);
  EXPECT_EQ(2, f.cuda_error);
  EXPECT_STREQ("leaf: out of memory", f.message);
  leaf_.failures_left = 0;
}

INSTANTIATE_TEST_SUITE_P(EveryAdaptor, Base, ::testing::ValuesIn(Adaptors()),
                         [](const ::testing::TestParamInfo<Adaptor> &i) { return i.param.name; });

}  // namespace
