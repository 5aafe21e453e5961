// The version-3 extend slot (gmr_resource_extend: grow a live allocation in place)
// through every adaptor and the device guard: each forwards it to its
// upstream with its own bookkeeping (tracking records the new size and
// counts the bytes added, limiting charges the growth against its limits,
// log writes RMM-format rows, oom passes it through), and a refused or failed
// growth changes nothing anywhere.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmr/device.h"
#include "gmr/device_resource.h"
#include "gmr/host_resource.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/log_adaptor.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/policy.h"
#include "gmr/pool_resource.h"
#include "gmr/tracking_adaptor.h"
#include "gmr/vmm_pages_resource.h"
#include "tests/support/extend_leaf.h"
#include "tests/support/log_stats.h"
#include "tests/support/policies.h"
#include "tests/support/sim_fixture.h"

namespace {

constexpr size_t MiB = size_t{1} << 20;

gmr_stream S(uintptr_t v) { return reinterpret_cast<gmr_stream>(v); }

class ExtendTest : public gmr_test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    leaf_ = gmr_extend_leaf_create(16 * MiB, 64);
    ASSERT_NE(nullptr, leaf_);
    up_ = gmr_extend_leaf_as_resource(leaf_);
  }
  void TearDown() override {
    for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(*it)) << gmr_resource_get_type_name(*it);
    }
    if (up_ != nullptr) {
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(up_)) << "the leaf holds memory";
    }
    SimTest::TearDown();
  }
  gmr_resource *Own(gmr_resource *r) {
    owned_.push_back(r);
    return r;
  }
  gmr_resource *Tracking(gmr_resource *up) {
    gmr_tracking_adaptor *t = nullptr;
    EXPECT_EQ(GMR_OK, gmr_tracking_adaptor_create(up, nullptr, &t));
    return Own(gmr_tracking_adaptor_as_resource(t));
  }
  gmr_resource *Limiting(gmr_resource *up, size_t limit, bool per_stream = false) {
    gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
    c.limit_bytes = limit;
    c.per_stream = per_stream;
    gmr_limiting_adaptor *l = nullptr;
    EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_create(up, &c, &l));
    return Own(gmr_limiting_adaptor_as_resource(l));
  }
  void *Alloc(gmr_resource *r, size_t bytes, gmr_stream stream = nullptr) {
    void *p = nullptr;
    EXPECT_EQ(GMR_OK, gmr_resource_allocate(r, bytes, 0, stream, &p));
    return p;
  }

  gmr_extend_leaf *leaf_ = nullptr;
  gmr_resource *up_ = nullptr;
  std::vector<gmr_resource *> owned_;
};

// ---- every adaptor: forwarded, and nothing changes when it fails ----------

struct Layer {
  std::string name;
  std::function<gmr_resource *(gmr_resource *up, FILE *log)> make;
};

void PrintTo(const Layer &l, std::ostream *os) { *os << l.name; }

class EveryAdaptor : public ExtendTest, public ::testing::WithParamInterface<Layer> {
 protected:
  void SetUp() override {
    ExtendTest::SetUp();
    log_ = tmpfile();
    ASSERT_NE(nullptr, log_);
    top_ = Own(GetParam().make(up_, log_));
    ASSERT_NE(nullptr, top_);
  }
  void TearDown() override {
    ExtendTest::TearDown();
    if (log_ != nullptr) fclose(log_);
  }
  FILE *log_ = nullptr;
  gmr_resource *top_ = nullptr;
};

TEST_P(EveryAdaptor, GrowsTheAllocationBelowAndTheFreeTakesTheNewSize) {
  void *p = Alloc(top_, 1000);
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_extend(top_, p, 1000, 5000, 0, nullptr, &f)) << f.message;
  EXPECT_EQ(5120u, gmr_extend_leaf_size_of(leaf_, p)) << "the leaf grew it in place";
  EXPECT_EQ(1u, gmr_extend_leaf_extend_count(leaf_));
  static_cast<char *>(p)[4999] = 1;  // the new bytes are the caller's
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 5000, 0, nullptr));
  EXPECT_EQ(0u, gmr_extend_leaf_live_count(leaf_));
}

TEST_P(EveryAdaptor, ARefusedGrowthChangesNothing) {
  void *p = Alloc(top_, 1000);
  for (gmr_status refusal : {GMR_ERR_UNSUPPORTED, GMR_ERR_OUT_OF_MEMORY, GMR_ERR_CUDA}) {
    gmr_extend_leaf_refuse_extend(leaf_, refusal);
    gmr_failure f = GMR_FAILURE_INIT;
    EXPECT_EQ(refusal, gmr_resource_extend(top_, p, 1000, 5000, 0, nullptr, &f));
    EXPECT_EQ(5000u, f.bytes) << "the failure names the size asked for";
    EXPECT_STREQ("extend_leaf", gmr_resource_get_type_name(f.where)) << "the deepest layer failed";
  }
  gmr_extend_leaf_refuse_extend(leaf_, GMR_OK);
  EXPECT_EQ(1024u, gmr_extend_leaf_size_of(leaf_, p));
  // Still the old size everywhere: freed with it.
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 1000, 0, nullptr));
}

TEST_P(EveryAdaptor, AnUpstreamWithoutTheSlotIsUnsupported) {
  gmr_host_resource *h = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&h));
  gmr_resource *host = gmr_host_resource_as_resource(h);
  gmr_resource *top = GetParam().make(host, log_);
  void *p = Alloc(top, 1000);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_extend(top, p, 1000, 5000, 0, nullptr, &f));
  EXPECT_NE(std::string::npos, std::string(f.message).find("host_resource")) << f.message;
  EXPECT_EQ(host, f.where);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top, p, 1000, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(top));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(host));
}

std::vector<Layer> Layers() {
  return {
      {"tracking",
       [](gmr_resource *up, FILE *) {
         gmr_tracking_adaptor *t = nullptr;
         EXPECT_EQ(GMR_OK, gmr_tracking_adaptor_create(up, nullptr, &t));
         return gmr_tracking_adaptor_as_resource(t);
       }},
      {"limiting_counting",
       [](gmr_resource *up, FILE *) {
         gmr_limiting_adaptor *l = nullptr;
         EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_create(up, nullptr, &l));
         return gmr_limiting_adaptor_as_resource(l);
       }},
      {"limiting_per_stream",
       [](gmr_resource *up, FILE *) {
         gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
         c.limit_bytes = MiB;
         c.per_stream = true;
         gmr_limiting_adaptor *l = nullptr;
         EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_create(up, &c, &l));
         return gmr_limiting_adaptor_as_resource(l);
       }},
      {"oom",
       [](gmr_resource *up, FILE *) {
         gmr_oom_policy p = gmr_test::TrimRetryPolicy(2);
         gmr_oom_adaptor *o = nullptr;
         EXPECT_EQ(GMR_OK, gmr_oom_adaptor_create(up, &p, &o));
         return gmr_oom_adaptor_as_resource(o);
       }},
      {"log",
       [](gmr_resource *up, FILE *log) {
         gmr_log_adaptor_config c = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
         c.file = log;
         gmr_log_adaptor *l = nullptr;
         EXPECT_EQ(GMR_OK, gmr_log_adaptor_create(up, &c, &l));
         return gmr_log_adaptor_as_resource(l);
       }},
      {"nvtx_logging",
       [](gmr_resource *up, FILE *) {
         gmr_nvtx_logging_adaptor *n = nullptr;
         EXPECT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(up, nullptr, &n));
         return gmr_nvtx_logging_adaptor_as_resource(n);
       }},
  };
}

INSTANTIATE_TEST_SUITE_P(Adaptors, EveryAdaptor, ::testing::ValuesIn(Layers()),
                         [](const ::testing::TestParamInfo<Layer> &i) { return i.param.name; });

// ---- tracking ---------------------------------------------------------------

gmr_tracking_adaptor_stats TrackingStats(gmr_resource *r) {
  gmr_tracking_adaptor_stats s = GMR_TRACKING_ADAPTOR_STATS_INIT;
  EXPECT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(gmr_tracking_adaptor_from_resource(r), &s));
  return s;
}

TEST_F(ExtendTest, TrackingCountsTheBytesAddedAndKeepsOneAllocation) {
  gmr_resource *t = Tracking(up_);
  gmr_stream s = S(0x5000);
  void *p = Alloc(t, 1000, s);
  ASSERT_EQ(GMR_OK, gmr_resource_extend(t, p, 1000, 3000, 0, S(0x6000), nullptr));
  gmr_tracking_adaptor_stats st = TrackingStats(t);
  EXPECT_EQ(3000, st.bytes.current);
  EXPECT_EQ(3000, st.bytes.peak);
  EXPECT_EQ(3000, st.bytes.total);
  EXPECT_EQ(1, st.allocations.current);
  EXPECT_EQ(1, st.allocations.total);
  // The growth belongs to the allocation's owner (its stream), not the
  // stream the growth was ordered on.
  gmr_tracking_adaptor_owner_stats o = GMR_TRACKING_ADAPTOR_OWNER_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_owner_stats(gmr_tracking_adaptor_from_resource(t),
                                                         reinterpret_cast<uintptr_t>(s), &o));
  EXPECT_EQ(3000, o.bytes.current);
  EXPECT_EQ(1, o.allocations.current);
  // The books hold the new size: the old one is a mismatch now.
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_deallocate(t, p, 1000, 0, s));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(t, p, 3000, 0, s));
  st = TrackingStats(t);
  EXPECT_EQ(0, st.bytes.current);
  EXPECT_EQ(3000, st.bytes.peak);
}

TEST_F(ExtendTest, TrackingRefusesABadExtendBeforeTheUpstreamSeesIt) {
  gmr_resource *t = Tracking(up_);
  void *p = Alloc(t, 1000);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_extend(t, p, 999, 3000, 0, nullptr, &f));
  EXPECT_EQ(t, f.where);
  EXPECT_STRNE("", f.message);
  EXPECT_EQ(GMR_ERR_FREE_MISMATCH, gmr_resource_extend(t, p, 1000, 3000, 512, nullptr, &f));
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_extend(t, &local, 1000, 3000, 0, nullptr, &f));
  EXPECT_EQ(0u, gmr_extend_leaf_extend_count(leaf_)) << "the upstream never saw them";
  EXPECT_EQ(1000, TrackingStats(t).bytes.current);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(t, p, 1000, 0, nullptr));
}

TEST_F(ExtendTest, TrackingScopesCountTheGrowthAsBytesOnly) {
  gmr_resource *t = Tracking(up_);
  gmr_tracking_adaptor *a = gmr_tracking_adaptor_from_resource(t);
  void *p = Alloc(t, 1000);
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_push_scope(a));
  ASSERT_EQ(GMR_OK, gmr_resource_extend(t, p, 1000, 4000, 0, nullptr, nullptr));
  gmr_tracking_adaptor_stats scope = GMR_TRACKING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_pop_scope(a, &scope));
  EXPECT_EQ(3000, scope.bytes.current);
  EXPECT_EQ(3000, scope.bytes.total);
  EXPECT_EQ(0, scope.allocations.current);
  EXPECT_EQ(0, scope.allocations.total);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(t, p, 4000, 0, nullptr));
}

// ---- limiting ---------------------------------------------------------------

gmr_limiting_adaptor *L(gmr_resource *r) { return gmr_limiting_adaptor_from_resource(r); }

TEST_F(ExtendTest, LimitingCountingChargesTheDifferenceOfCharges) {
  gmr_resource *l = Limiting(up_, GMR_LIMIT_NONE);
  void *p = Alloc(l, 1000);  // charged 1024
  EXPECT_EQ(1024u, gmr_limiting_adaptor_get_used_bytes(L(l)));
  ASSERT_EQ(GMR_OK, gmr_resource_extend(l, p, 1000, 1020, 0, nullptr, nullptr));
  EXPECT_EQ(1024u, gmr_limiting_adaptor_get_used_bytes(L(l))) << "same charge: nothing added";
  ASSERT_EQ(GMR_OK, gmr_resource_extend(l, p, 1020, 3000, 0, nullptr, nullptr));
  EXPECT_EQ(3072u, gmr_limiting_adaptor_get_used_bytes(L(l)));
  gmr_limiting_adaptor_stats st = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(L(l), &st));
  EXPECT_EQ(1u, st.allocation_count);
  EXPECT_EQ(3072u, st.peak_used_bytes);
  // A limit arriving later finds the grown charge outstanding.
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_set_limit(L(l), 4096));
  EXPECT_EQ(3072u, gmr_limiting_adaptor_get_used_bytes(L(l)));
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_extend(l, p, 3000, 5000, 0, nullptr, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(l, p, 3000, 0, nullptr));
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(L(l)));
}

TEST_F(ExtendTest, LimitingRefusesAGrowthPastTheLimitBeforeTheUpstream) {
  gmr_resource *l = Limiting(up_, 4096);
  void *p = Alloc(l, 3000);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_extend(l, p, 3000, 5000, 0, nullptr, &f));
  EXPECT_EQ(l, f.where);
  EXPECT_NE(std::string::npos, std::string(f.message).find("4096")) << f.message;
  EXPECT_EQ(0u, gmr_extend_leaf_extend_count(leaf_));
  EXPECT_EQ(3072u, gmr_limiting_adaptor_get_used_bytes(L(l)));
  gmr_limiting_adaptor_stats st = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(L(l), &st));
  EXPECT_EQ(1u, st.refused_count);
  // Within the limit it grows; the peak follows.
  ASSERT_EQ(GMR_OK, gmr_resource_extend(l, p, 3000, 4000, 0, nullptr, &f));
  EXPECT_EQ(4096u, gmr_limiting_adaptor_get_used_bytes(L(l)));
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(L(l), &st));
  EXPECT_EQ(4096u, st.peak_used_bytes);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(l, p, 4000, 0, nullptr));
}

TEST_F(ExtendTest, LimitingGivesTheChargeBackWhenTheUpstreamCannotGrow) {
  gmr_resource *l = Limiting(up_, MiB);
  void *p = Alloc(l, 1000);
  gmr_extend_leaf_refuse_extend(leaf_, GMR_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_extend(l, p, 1000, 300000, 0, nullptr, nullptr));
  EXPECT_EQ(1024u, gmr_limiting_adaptor_get_used_bytes(L(l)));
  gmr_limiting_adaptor_stats st = GMR_LIMITING_ADAPTOR_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stats(L(l), &st));
  EXPECT_EQ(1024u, st.peak_used_bytes) << "a growth that failed never reached the peak";
  gmr_extend_leaf_refuse_extend(leaf_, GMR_OK);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(l, p, 1000, 0, nullptr));
}

TEST_F(ExtendTest, LimitingPerStreamChargesTheAllocationsStream) {
  gmr_resource *l = Limiting(up_, MiB, true);
  gmr_stream a = S(0xa000), b = S(0xb000);
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_set_stream_limit(L(l), a, 4096));
  void *p = Alloc(l, 1000, a);
  // Ordered on b, charged to a (where the allocation lives), against a's limit.
  ASSERT_EQ(GMR_OK, gmr_resource_extend(l, p, 1000, 4000, 0, b, nullptr));
  size_t used_a = 0, used_b = 0;
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(L(l), a, &used_a, nullptr));
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(L(l), b, &used_b, nullptr));
  EXPECT_EQ(4096u, used_a);
  EXPECT_EQ(0u, used_b);
  EXPECT_EQ(GMR_ERR_LIMIT_EXCEEDED, gmr_resource_extend(l, p, 4000, 5000, 0, b, nullptr))
      << "a's limit, not b's";
  EXPECT_EQ(4096u, gmr_limiting_adaptor_get_used_bytes(L(l))) << "the global charge went back";
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_extend(l, &local, 1000, 4000, 0, a, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(l, p, 4000, 0, a));
  ASSERT_EQ(GMR_OK, gmr_limiting_adaptor_get_stream_usage(L(l), a, &used_a, nullptr));
  EXPECT_EQ(0u, used_a);
}

// ---- oom ------------------------------------------------------------------

TEST_F(ExtendTest, OomAdaptorPassesGrowthWithoutItsPolicy) {
  int decide_calls = 0;
  gmr_oom_policy policy = gmr_test::RetryPolicy(
      [](void *ctx, const gmr_failure *) {
        ++*static_cast<int *>(ctx);
        return GMR_OOM_ACTION_RETRY;
      },
      &decide_calls, 3);
  gmr_oom_adaptor *o = nullptr;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(up_, &policy, &o));
  gmr_resource *r = Own(gmr_oom_adaptor_as_resource(o));
  void *p = Alloc(r, 1000);
  gmr_extend_leaf_refuse_extend(leaf_, GMR_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_extend(r, p, 1000, 5000, 0, nullptr, nullptr));
  EXPECT_EQ(0, decide_calls) << "the caller allocates elsewhere; that allocation runs the policy";
  gmr_extend_leaf_refuse_extend(leaf_, GMR_OK);
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r, p, 1000, 5000, 0, nullptr, nullptr));
  EXPECT_EQ(1u, gmr_oom_adaptor_get_live_count(o));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 5000, 0, nullptr));
  EXPECT_EQ(0u, gmr_oom_adaptor_get_live_count(o));
}

// ---- log ------------------------------------------------------------------

std::vector<std::string> ReadLines(FILE *f) {
  fflush(f);
  rewind(f);
  std::vector<std::string> lines;
  char buf[256];
  while (fgets(buf, sizeof buf, f) != nullptr) lines.emplace_back(buf);
  return lines;
}

// "Action,Pointer,Size,Stream" of a row (Thread and Time dropped).
std::string Tail(const std::string &row) {
  size_t first = row.find(',');
  size_t second = row.find(',', first + 1);
  std::string t = row.substr(second + 1);
  if (!t.empty() && t.back() == '\n') t.pop_back();
  return t;
}

TEST_F(ExtendTest, LogWritesAGrowthAsAFreeAndAnAllocationAtTheSameAddress) {
  FILE *file = tmpfile();
  ASSERT_NE(nullptr, file);
  gmr_log_adaptor_config c = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
  c.file = file;
  gmr_log_adaptor *log = nullptr;
  ASSERT_EQ(GMR_OK, gmr_log_adaptor_create(up_, &c, &log));
  gmr_resource *r = gmr_log_adaptor_as_resource(log);
  void *p = Alloc(r, 1000);
  gmr_extend_leaf_refuse_extend(leaf_, GMR_ERR_UNSUPPORTED);
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_extend(r, p, 1000, 5000, 0, S(0x7f00), nullptr));
  gmr_extend_leaf_refuse_extend(leaf_, GMR_OK);
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r, p, 1000, 5000, 0, S(0x7f00), nullptr));
  ASSERT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 5000, 0, nullptr));
  EXPECT_EQ(4u, gmr_test::LogStats(log).row_count) << "no row for the refused growth";
  ASSERT_EQ(GMR_OK, gmr_resource_destroy(r));
  char ptr[32];
  snprintf(ptr, sizeof ptr, "0x%llx",
           static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
  std::string at(ptr);
  std::vector<std::string> lines = ReadLines(file);
  ASSERT_EQ(5u, lines.size());
  EXPECT_EQ(std::string(GMR_LOG_ADAPTOR_HEADER) + "\n", lines[0]);
  EXPECT_EQ("allocate," + at + ",1000,0", Tail(lines[1]));
  EXPECT_EQ("free," + at + ",1000,7f00", Tail(lines[2]));
  EXPECT_EQ("allocate," + at + ",5000,7f00", Tail(lines[3]));
  EXPECT_EQ("free," + at + ",5000,0", Tail(lines[4]));
  fclose(file);
}

// ---- through a pool: a chunk grows in place through the adaptors -----------

TEST_F(ExtendTest, APoolGrowsItsChunkInPlaceThroughTrackingAndLimiting) {
  gmr_resource *l = Limiting(up_, 64 * MiB);
  gmr_resource *t = Tracking(l);
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 1;
  c.min_growth_bytes = 4 * MiB;  // one chunk of 4 MiB, then growth by 4 MiB
  c.max_growth_bytes = 4 * MiB;
  c.growth_percent = 0;
  c.release_on_growth = false;
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(t, &c, &pool));
  gmr_resource *r = Own(gmr_pool_resource_as_resource(pool));
  void *a = Alloc(r, 3 * MiB);
  void *b = Alloc(r, 3 * MiB);  // no room: the chunk grows through both adaptors
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) + 3 * MiB, reinterpret_cast<uintptr_t>(b));
  EXPECT_EQ(1u, gmr_extend_leaf_allocate_count(leaf_));
  EXPECT_EQ(1u, gmr_extend_leaf_extend_count(leaf_));
  gmr_footprint fp;
  ASSERT_EQ(GMR_OK, gmr_resource_get_footprint(r, &fp));
  gmr_tracking_adaptor_stats st = TrackingStats(t);
  EXPECT_EQ(static_cast<int64_t>(fp.held_bytes), st.bytes.current)
      << "tracking counts what the pool holds";
  EXPECT_EQ(1, st.allocations.current);
  EXPECT_EQ(fp.held_bytes, gmr_limiting_adaptor_get_used_bytes(L(l)));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 3 * MiB, 0, nullptr));
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  EXPECT_EQ(fp.held_bytes, released);
  EXPECT_EQ(0, TrackingStats(t).bytes.current);
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(L(l)));
}

// The same through vmm_pages, which grows by mapping pages after the chunk
// (tests/gpu/adaptor_extend_gpu_test runs this on a GPU).
TEST_F(ExtendTest, APoolOverVmmPoolGrowsInPlaceThroughLimitingAndTracking) {
  gmr_vmm_pool_resource_config vc = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  vc.small_pool = false;
  vc.va_chunk_bytes = size_t{1} << 30;
  gmr_vmm_pool_resource *vmm = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pages_resource_create(&vc, &vmm, &f)) << f.message;
  gmr_resource *v = gmr_vmm_pool_resource_as_resource(vmm);
  gmr_resource *t = Tracking(v);
  gmr_resource *l = Limiting(t, 64 * MiB);
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = 1;
  c.min_growth_bytes = 4 * MiB;
  c.max_growth_bytes = 4 * MiB;
  c.growth_percent = 0;
  c.release_on_growth = false;
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(l, &c, &pool));
  gmr_resource *r = gmr_pool_resource_as_resource(pool);
  void *a = Alloc(r, 3 * MiB);
  void *b = Alloc(r, 3 * MiB);
  EXPECT_EQ(static_cast<char *>(a) + 3 * MiB, b);
  gmr_pool_resource_stats ps = GMR_POOL_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &ps));
  EXPECT_EQ(1u, ps.in_place_growth_count);
  std::memset(a, 0x5a, 6 * MiB);  // simulated device memory is host memory
  EXPECT_EQ(static_cast<int64_t>(ps.held_bytes), TrackingStats(t).bytes.current);
  EXPECT_EQ(ps.held_bytes, gmr_limiting_adaptor_get_used_bytes(L(l)));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, a, 3 * MiB, 0, nullptr));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, b, 3 * MiB, 0, nullptr));
  // gmr_resource_trim walks the whole stack and sums what every layer gave
  // back: the pool its grown chunk (to vmm_pages, through limiting and
  // tracking), then vmm_pages the same bytes of pages (to the driver). Seen
  // on an H100: 16 MiB released for an 8 MiB chunk.
  gmr_vmm_pool_resource_stats vs = GMR_VMM_POOL_RESOURCE_STATS_INIT;
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_get_stats(vmm, &vs));
  size_t mapped = vs.mapped_bytes;
  EXPECT_EQ(ps.held_bytes, mapped) << "vmm_pages maps exactly the pool's chunk";
  size_t released = 0;
  ASSERT_EQ(GMR_OK, gmr_resource_trim(r, &released));
  ASSERT_EQ(GMR_OK, gmr_pool_resource_get_stats(pool, &ps));
  EXPECT_EQ(0u, ps.held_bytes) << "the pool gave its chunk back";
  ASSERT_EQ(GMR_OK, gmr_vmm_pool_resource_get_stats(vmm, &vs));
  EXPECT_EQ(0u, vs.mapped_bytes) << "vmm_pages gave its pages back";
  EXPECT_EQ(2 * mapped, released) << "the pool's chunk, then vmm_pages' pages";
  EXPECT_EQ(0, TrackingStats(t).bytes.current);
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(L(l)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  EXPECT_EQ(0, TrackingStats(t).bytes.current);
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(L(l)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(l));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(t));
  owned_.clear();
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(v));
}

// ---- threads ----------------------------------------------------------------

// Threads allocate, try to grow (the leaf grows only its newest block, so
// most tries are refused) and free with whatever size they ended with: the
// books of tracking and limiting end exact, and the bytes tracking counted in
// all are the requests plus the growths that succeeded.
TEST_F(ExtendTest, ThreadsGrowingAndFreeingLeaveExactBooks) {
  gmr_resource *l = Limiting(up_, 16 * MiB);
  gmr_resource *t = Tracking(l);
  constexpr int kThreads = 4, kRounds = 300;
  std::atomic<int> wrong{0};
  std::atomic<long> grown{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        void *p = nullptr;
        if (gmr_resource_allocate(t, 1000, 0, nullptr, &p) != GMR_OK) {
          wrong++;
          continue;
        }
        size_t bytes = 1000;
        gmr_status st = gmr_resource_extend(t, p, 1000, 3000, 0, nullptr, nullptr);
        if (st == GMR_OK) {
          bytes = 3000;
          grown++;
        } else if (st != GMR_ERR_UNSUPPORTED) {
          wrong++;
        }
        if (gmr_resource_deallocate(t, p, bytes, 0, nullptr) != GMR_OK) wrong++;
      }
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, wrong.load());
  EXPECT_EQ(static_cast<unsigned long>(grown.load()), gmr_extend_leaf_extend_count(leaf_));
  gmr_tracking_adaptor_stats st = TrackingStats(t);
  EXPECT_EQ(0, st.bytes.current);
  EXPECT_EQ(0, st.allocations.current);
  EXPECT_EQ(int64_t{kThreads} * kRounds * 1000 + grown.load() * 2000, st.bytes.total);
  EXPECT_EQ(int64_t{kThreads} * kRounds, st.allocations.total);
  EXPECT_EQ(0u, gmr_limiting_adaptor_get_used_bytes(L(l)));
  EXPECT_EQ(0u, gmr_extend_leaf_live_count(leaf_));
}

// ---- the device registry's guard ---------------------------------------------

class DeviceGuardExtend : public gmr_test::SimTest {
 protected:
  DeviceGuardExtend() { sim_config_.device_count = 2; }
  void TearDown() override {
    EXPECT_EQ(GMR_OK, gmr_device_resource_release_all());
    SimTest::TearDown();
  }
};

TEST_F(DeviceGuardExtend, ForwardsGrowthOnTheResourcesDeviceAndRestoresTheCallers) {
  ASSERT_EQ(GMR_OK, gmr_device_resource_set_spec("vmm_pages(small_pool=false)", nullptr));
  gmr_resource *r = nullptr;
  gmr_spec_error error;
  ASSERT_EQ(GMR_OK, gmr_device_resource_get(0, &r, &error)) << error.message;
  ASSERT_STREQ("device_guard", gmr_resource_get_type_name(r));
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(r, 2 * MiB, 0, nullptr, &p));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(1));
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_extend(r, p, 2 * MiB, 6 * MiB, 0, nullptr, &f)) << f.message;
  int current = -1;
  ASSERT_EQ(GMR_OK, gmr_device_get_current(&current));
  EXPECT_EQ(1, current) << "the caller's device is current again";
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 6 * MiB, 0, nullptr));
  ASSERT_EQ(GMR_OK, gmr_device_set_current(0));
}

}  // namespace
