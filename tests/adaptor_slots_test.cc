// Every adaptor and the optional slots of version 2 (issues 11, 12, 14):
// record_stream and allocate_capturing are forwarded with the adaptor's own
// bookkeeping, get_memory_info is answered from below, and a failure record
// with free information reaches an OOM policy above unchanged, through every
// adaptor.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmr/limiting_adaptor.h"
#include "gmr/log_adaptor.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/policy.h"
#include "gmr/tracking_adaptor.h"
#include "adaptors/oom_internal.h"
#include "tests/support/log_stats.h"
#include "tests/support/policies.h"

namespace {

gmr_stream S(uintptr_t v) { return reinterpret_cast<gmr_stream>(v); }

// A leaf that says what it saw. Its vtable can leave the optional slots out.
struct Probe {
  gmr_resource base;
  gmr_resource_vtbl vtbl;
  std::mutex mutex;
  std::set<void *> live;
  std::vector<std::pair<void *, gmr_stream>> recorded;
  int capturing_calls = 0;
  int plain_calls = 0;
  int record_calls = 0;
  bool fail_next = false;  // fail the next allocation with free information
};

Probe *Of(const gmr_resource *r) {
  return reinterpret_cast<Probe *>(const_cast<gmr_resource *>(r));
}

gmr_status ProbeAllocateAs(gmr_resource *self, bool capturing, size_t bytes, size_t alignment,
                           void **out_ptr, gmr_failure *failure) {
  Probe *p = Of(self);
  std::lock_guard<std::mutex> lock(p->mutex);
  (capturing ? p->capturing_calls : p->plain_calls)++;
  if (p->fail_next) {
    p->fail_next = false;
    failure->free_info_known = true;
    failure->free_bytes = 12345;
    failure->largest_free_block_bytes = 678;
    snprintf(failure->message, sizeof failure->message, "probe: fragmented");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  *out_ptr = aligned_alloc(alignment, rounded);
  if (*out_ptr == nullptr) return GMR_ERR_OUT_OF_MEMORY;
  p->live.insert(*out_ptr);
  return GMR_OK;
}

gmr_status ProbeAllocate(gmr_resource *self, size_t bytes, size_t alignment, gmr_stream,
                         void **out_ptr, gmr_failure *failure) {
  return ProbeAllocateAs(self, false, bytes, alignment, out_ptr, failure);
}

gmr_status ProbeAllocateCapturing(gmr_resource *self, size_t bytes, size_t alignment, gmr_stream,
                                  void **out_ptr, gmr_failure *failure) {
  return ProbeAllocateAs(self, true, bytes, alignment, out_ptr, failure);
}

gmr_status ProbeDeallocate(gmr_resource *self, void *ptr, size_t, size_t, gmr_stream) {
  Probe *p = Of(self);
  std::lock_guard<std::mutex> lock(p->mutex);
  if (p->live.erase(ptr) == 0) return GMR_ERR_UNKNOWN_POINTER;
  free(ptr);
  return GMR_OK;
}

gmr_status ProbeDestroy(gmr_resource *) { return GMR_OK; }

gmr_status ProbeRecordStream(gmr_resource *self, void *ptr, gmr_stream stream) {
  Probe *p = Of(self);
  std::lock_guard<std::mutex> lock(p->mutex);
  p->record_calls++;
  if (p->live.count(ptr) == 0) return GMR_ERR_UNKNOWN_POINTER;
  p->recorded.emplace_back(ptr, stream);
  return GMR_OK;
}

gmr_status ProbeMemoryInfo(const gmr_resource *, gmr_memory_info *out) {
  out->held_bytes = 1000;
  out->live_bytes = 600;
  out->free_bytes = 300;
  out->largest_free_block_bytes = 200;
  out->free_block_count = 2;
  return GMR_OK;
}

void InitProbe(Probe *p, bool with_optional_slots) {
  std::memset(&p->vtbl, 0, sizeof p->vtbl);
  p->vtbl.version = GMR_RESOURCE_VTBL_VERSION;
  p->vtbl.type_name = "probe";
  p->vtbl.allocate = ProbeAllocate;
  p->vtbl.deallocate = ProbeDeallocate;
  p->vtbl.destroy = ProbeDestroy;
  if (with_optional_slots) {
    p->vtbl.get_memory_info = ProbeMemoryInfo;
    p->vtbl.record_stream = ProbeRecordStream;
    p->vtbl.allocate_capturing = ProbeAllocateCapturing;
  }
  p->base.vtbl = &p->vtbl;
}

// One adaptor over an upstream; `make` returns its resource, `check_charged`
// asserts what the adaptor counted for `bytes` live through it.
struct Adaptor {
  std::string name;
  std::function<gmr_resource *(gmr_resource *upstream)> make;
  std::function<void(gmr_resource *top, size_t live_bytes)> check_counted;
  bool checks_pointers = false;  // refuses record_stream of a pointer it never gave
};

void PrintTo(const Adaptor &a, std::ostream *os) { *os << a.name; }

FILE *LogFile() {
  static FILE *f = tmpfile();
  return f;
}

std::vector<Adaptor> Adaptors() {
  std::vector<Adaptor> v;
  v.push_back({"tracking",
               [](gmr_resource *up) {
                 gmr_tracking_adaptor *t = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_tracking_adaptor_create(up, nullptr, &t));
                 return gmr_tracking_adaptor_as_resource(t);
               },
               [](gmr_resource *top, size_t live) {
                 gmr_tracking_adaptor_stats s = GMR_TRACKING_ADAPTOR_STATS_INIT;
                 ASSERT_EQ(GMR_OK, gmr_tracking_adaptor_get_stats(
                                       gmr_tracking_adaptor_from_resource(top), &s));
                 EXPECT_EQ(static_cast<int64_t>(live), s.bytes.current);
               },
               true});
  v.push_back({"limiting",
               [](gmr_resource *up) {
                 gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
                 c.limit_bytes = 1 << 20;
                 gmr_limiting_adaptor *l = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_limiting_adaptor_create(up, &c, &l));
                 return gmr_limiting_adaptor_as_resource(l);
               },
               [](gmr_resource *top, size_t live) {
                 EXPECT_EQ((live + 255) / 256 * 256, gmr_limiting_adaptor_get_used_bytes(
                                                         gmr_limiting_adaptor_from_resource(top)));
               }});
  // limiting(on_oom=trim_retry, per_stream=true): two layers.
  v.push_back({"limiting_with_oom_policy",
               [](gmr_resource *up) {
                 gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
                 gmr_oom_policy on_oom = gmr_test::TrimRetryPolicy(1);  // nothing to trim: fails
                 c.per_stream = true;
                 gmr_limiting_adaptor *l = nullptr;
                 gmr_resource *top = nullptr;
                 EXPECT_EQ(GMR_OK, gmr__limiting_with_oom_create(up, &c, &on_oom, &l, &top));
                 return top;
               },
               [](gmr_resource *top, size_t live) {
                 EXPECT_EQ((live + 255) / 256 * 256,
                           gmr_limiting_adaptor_get_used_bytes(gmr_limiting_adaptor_from_resource(
                               gmr_resource_find(top, "limiting_adaptor"))));
               }});
  v.push_back({"oom",
               [](gmr_resource *up) {
                 gmr_oom_policy p = gmr_test::TrimRetryPolicy(1);  // nothing to trim: fails
                 gmr_oom_adaptor *o = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_oom_adaptor_create(up, &p, &o));
                 return gmr_oom_adaptor_as_resource(o);
               },
               [](gmr_resource *top, size_t live) {
                 EXPECT_EQ(live == 0 ? 0u : 1u,
                           gmr_oom_adaptor_get_live_count(gmr_oom_adaptor_from_resource(top)));
               }});
  v.push_back({"log",
               [](gmr_resource *up) {
                 gmr_log_adaptor_config c = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
                 c.file = LogFile();
                 gmr_log_adaptor *l = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_log_adaptor_create(up, &c, &l));
                 return gmr_log_adaptor_as_resource(l);
               },
               [](gmr_resource *top, size_t live) {
                 // a live block was logged
                 uint64_t rows = gmr_test::LogStats(gmr_log_adaptor_from_resource(top)).row_count;
                 if (live != 0) {
                   EXPECT_GE(rows, 1u);
                 }
               }});
  v.push_back({"nvtx_logging",
               [](gmr_resource *up) {
                 gmr_nvtx_logging_adaptor *n = nullptr;
                 EXPECT_EQ(GMR_OK, gmr_nvtx_logging_adaptor_create(up, nullptr, &n));
                 return gmr_nvtx_logging_adaptor_as_resource(n);
               },
               [](gmr_resource *, size_t) {}});
  return v;
}

class Slots : public ::testing::TestWithParam<Adaptor> {
 protected:
  void Make(bool with_optional_slots) {
    InitProbe(&probe_, with_optional_slots);
    top_ = GetParam().make(&probe_.base);
    ASSERT_NE(nullptr, top_);
  }
  void TearDown() override {
    DestroyAdaptors();
    EXPECT_TRUE(probe_.live.empty());
  }
  // The adaptor's layers, top first, down to the probe.
  void DestroyAdaptors() {
    while (top_ != nullptr && top_ != &probe_.base) {
      gmr_resource *below = gmr_resource_get_upstream(top_);
      EXPECT_EQ(GMR_OK, gmr_resource_destroy(top_));
      top_ = below;
    }
    top_ = nullptr;
  }
  Probe probe_;
  gmr_resource *top_ = nullptr;
};

TEST_P(Slots, RecordStreamIsForwardedToTheUpstream) {
  Make(true);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 1000, 0, S(1), &p));
  EXPECT_EQ(GMR_OK, gmr_resource_record_stream(top_, p, S(5)));
  ASSERT_EQ(1u, probe_.recorded.size());
  EXPECT_EQ(p, probe_.recorded[0].first);
  EXPECT_EQ(S(5), probe_.recorded[0].second);
  int local = 0;
  EXPECT_EQ(GMR_ERR_UNKNOWN_POINTER, gmr_resource_record_stream(top_, &local, S(5)));
  // An adaptor that keeps books refuses before the upstream sees it.
  EXPECT_EQ(GetParam().checks_pointers ? 1 : 2, probe_.record_calls);
  EXPECT_EQ(1u, probe_.recorded.size());
  EXPECT_EQ(GMR_ERR_INVALID_ARGUMENT, gmr_resource_record_stream(top_, nullptr, S(5)));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 1000, 0, S(1)));
}

TEST_P(Slots, RecordStreamIsUnsupportedWhenTheUpstreamCannot) {
  Make(false);
  void *p = nullptr;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate(top_, 1000, 0, S(1), &p));
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_record_stream(top_, p, S(5)));
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 1000, 0, S(1)));
}

TEST_P(Slots, AllocateCapturingGoesToTheUpstreamsSlotWithTheAdaptorsBookkeeping) {
  Make(true);
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_capturing(top_, 1000, 0, S(2), &p, &f)) << f.message;
  EXPECT_EQ(1, probe_.capturing_calls);
  EXPECT_EQ(0, probe_.plain_calls);
  GetParam().check_counted(top_, 1000);
  // Freed with the ordinary deallocate, through the adaptor's books.
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(top_, p, 1000, 0, S(2)));
  GetParam().check_counted(top_, 0);
}

TEST_P(Slots, AllocateCapturingIsCaptureUnsafeWhenTheUpstreamCannotAndCountsNothing) {
  Make(false);
  void *p = reinterpret_cast<void *>(0x1);
  gmr_failure f = GMR_FAILURE_INIT;
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, gmr_resource_allocate_capturing(top_, 1000, 0, S(2), &p, &f));
  EXPECT_EQ(nullptr, p);
  EXPECT_EQ(&probe_.base, f.where);
  EXPECT_EQ(GMR_ERR_CAPTURE_UNSAFE, f.status);
  EXPECT_NE(nullptr, std::strstr(f.message, "probe")) << f.message;
  EXPECT_EQ(0, probe_.plain_calls);  // no fallback to a plain allocation
  GetParam().check_counted(top_, 0);
}

TEST_P(Slots, MemoryInfoIsAnsweredFromBelow) {
  Make(true);
  gmr_memory_info mi = GMR_MEMORY_INFO_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_get_memory_info(top_, &mi));
  EXPECT_EQ(1000u, mi.held_bytes);
  EXPECT_EQ(600u, mi.live_bytes);
  EXPECT_EQ(300u, mi.free_bytes);
  EXPECT_EQ(200u, mi.largest_free_block_bytes);
  EXPECT_EQ(2u, mi.free_block_count);
  // Nobody below answers: unsupported, zeroed.
  DestroyAdaptors();
  Make(false);
  EXPECT_EQ(GMR_ERR_UNSUPPORTED, gmr_resource_get_memory_info(top_, &mi));
  EXPECT_EQ(0u, mi.held_bytes);
}

// An OOM policy above the adaptor sees the record the probe filled.
struct SeenByPolicy {
  std::vector<gmr_failure> failures;
};

gmr_oom_action Remember(const gmr_oom_policy *policy, const gmr_failure *failure,
                        const gmr_oom_services *) {
  static_cast<SeenByPolicy *>(policy->ctx)->failures.push_back(*failure);
  return GMR_OOM_ACTION_RETRY;
}

TEST_P(Slots, TheFailureRecordReachesAnOomPolicyAboveUnchanged) {
  Make(true);
  SeenByPolicy seen;
  gmr_oom_policy policy = gmr_test::OomPolicy("fail");
  policy.name = "remember";
  policy.decide = Remember;
  policy.ctx = &seen;
  policy.max_attempts = 1;
  gmr_oom_adaptor *oom = nullptr;
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(top_, &policy, &oom));
  gmr_resource *r = gmr_oom_adaptor_as_resource(oom);
  probe_.fail_next = true;
  void *p = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  ASSERT_EQ(GMR_OK, gmr_resource_allocate_ex(r, 5000, 0, S(3), &p, &f));  // the retry succeeds
  ASSERT_EQ(1u, seen.failures.size());
  const gmr_failure &got = seen.failures[0];
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, got.status);
  EXPECT_EQ(&probe_.base, got.where);
  EXPECT_EQ(5000u, got.bytes);
  EXPECT_EQ(S(3), got.stream);
  EXPECT_TRUE(got.free_info_known);
  EXPECT_EQ(12345u, got.free_bytes);
  EXPECT_EQ(678u, got.largest_free_block_bytes);
  EXPECT_STREQ("probe: fragmented", got.message);
  EXPECT_EQ(0u, got.attempt);
  EXPECT_EQ(GMR_OK, gmr_resource_deallocate(r, p, 5000, 0, S(3)));

  // Without a retry, the caller gets the same record.
  probe_.fail_next = true;
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
  gmr_oom_policy fail = gmr_test::OomPolicy("fail");
  ASSERT_EQ(GMR_OK, gmr_oom_adaptor_create(top_, &fail, &oom));
  r = gmr_oom_adaptor_as_resource(oom);
  EXPECT_EQ(GMR_ERR_OUT_OF_MEMORY, gmr_resource_allocate_ex(r, 5000, 0, S(3), &p, &f));
  EXPECT_EQ(&probe_.base, f.where);
  EXPECT_TRUE(f.free_info_known);
  EXPECT_EQ(678u, f.largest_free_block_bytes);
  GetParam().check_counted(top_, 0);
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

INSTANTIATE_TEST_SUITE_P(EveryAdaptor, Slots, ::testing::ValuesIn(Adaptors()),
                         [](const ::testing::TestParamInfo<Adaptor> &i) { return i.param.name; });

}  // namespace
