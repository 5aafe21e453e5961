// The conformance suite (resource_conformance.h) for the adaptors, alone and
// composed, over the leaves and the pool; and the leaves' bad-free vocabulary.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/host_resource.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/log_adaptor.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/pool_resource.h"
#include "gmr/tracking_adaptor.h"
#include "tests/conformance/resource_conformance.h"

namespace {

using gmr_conformance::Stack;
using Owned = std::vector<gmr_resource *>;

gmr_resource *Keep(Owned &owned, gmr_resource *r) {
  if (r != nullptr) owned.push_back(r);
  return r;
}

gmr_resource *Cuda(Owned &owned, gmr_cuda_kind kind) {
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = kind;
  gmr_cuda_resource *r = nullptr;
  if (gmr_cuda_resource_create(&c, &r) != GMR_OK) return nullptr;
  return Keep(owned, gmr_cuda_resource_as_resource(r));
}

gmr_resource *Host(Owned &owned) {
  gmr_host_resource *r = nullptr;
  if (gmr_host_resource_create(&r) != GMR_OK) return nullptr;
  return Keep(owned, gmr_host_resource_as_resource(r));
}

gmr_resource *Pool(Owned &owned, gmr_resource *up) {
  if (up == nullptr) return nullptr;
  gmr_pool_resource *p = nullptr;
  if (gmr_pool_resource_create(up, nullptr, &p) != GMR_OK) return nullptr;
  return Keep(owned, gmr_pool_resource_as_resource(p));
}

gmr_resource *Tracking(Owned &owned, gmr_resource *up) {
  if (up == nullptr) return nullptr;
  gmr_tracking_adaptor_config c = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  c.check_stream = false;  // the suite frees on other streams on purpose
  gmr_tracking_adaptor *t = nullptr;
  if (gmr_tracking_adaptor_create(up, &c, &t) != GMR_OK) return nullptr;
  return Keep(owned, gmr_tracking_adaptor_as_resource(t));
}

gmr_resource *Limiting(Owned &owned, gmr_resource *up, size_t limit) {
  if (up == nullptr) return nullptr;
  gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  c.limit_bytes = limit;
  gmr_limiting_adaptor *l = nullptr;
  if (gmr_limiting_adaptor_create(up, &c, &l) != GMR_OK) return nullptr;
  return Keep(owned, gmr_limiting_adaptor_as_resource(l));
}

gmr_resource *Oom(Owned &owned, gmr_resource *up) {
  if (up == nullptr) return nullptr;
  gmr_oom_policy p = gmr_oom_policy_trim_retry(2);
  gmr_oom_adaptor *o = nullptr;
  if (gmr_oom_adaptor_create(up, &p, &o) != GMR_OK) return nullptr;
  return Keep(owned, gmr_oom_adaptor_as_resource(o));
}

gmr_resource *Log(Owned &owned, gmr_resource *up) {
  if (up == nullptr) return nullptr;
  static FILE *file = tmpfile();
  gmr_log_adaptor_config c = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
  c.file = file;
  c.flush = GMR_LOG_FLUSH_BUFFERED;
  gmr_log_adaptor *l = nullptr;
  if (gmr_log_adaptor_create(up, &c, &l) != GMR_OK) return nullptr;
  return Keep(owned, gmr_log_adaptor_as_resource(l));
}

gmr_resource *Nvtx(Owned &owned, gmr_resource *up) {
  if (up == nullptr) return nullptr;
  gmr_nvtx_logging_adaptor *n = nullptr;
  if (gmr_nvtx_logging_adaptor_create(up, nullptr, &n) != GMR_OK) return nullptr;
  return Keep(owned, gmr_nvtx_logging_adaptor_as_resource(n));
}

Stack Make(const char *name, std::function<gmr_resource *(Owned &)> make, size_t max_alignment,
           bool names_bad_frees, bool counts_live = true) {
  Stack s;
  s.name = name;
  s.make = std::move(make);
  s.max_alignment = max_alignment;
  s.names_bad_frees = names_bad_frees;
  s.counts_live = counts_live;
  return s;
}

constexpr size_t kPoolAlignment = size_t{1} << 20;

// The leaves keep books (issue 9): the vocabulary holds for them alone.
GMR_CONFORMANCE_INSTANTIATE(
    LeafBooks,
    Make("cuda_device", [](Owned &o) { return Cuda(o, GMR_CUDA_KIND_DEVICE); }, 256, true),
    Make("cuda_async", [](Owned &o) { return Cuda(o, GMR_CUDA_KIND_ASYNC); }, 256, true),
    Make("cuda_managed", [](Owned &o) { return Cuda(o, GMR_CUDA_KIND_MANAGED); }, 256, true),
    Make("cuda_pinned", [](Owned &o) { return Cuda(o, GMR_CUDA_KIND_PINNED); }, 256, true),
    Make("host", [](Owned &o) { return Host(o); }, size_t{1} << 30, true));

GMR_CONFORMANCE_INSTANTIATE(
    Adaptors,
    Make("tracking_cuda_device",
         [](Owned &o) { return Tracking(o, Cuda(o, GMR_CUDA_KIND_DEVICE)); }, 256, true),
    // Counting (no limit): frees pass to the leaf's books.
    Make("limiting_counting_host", [](Owned &o) { return Limiting(o, Host(o), GMR_LIMIT_NONE); },
         size_t{1} << 30, true),
    // Enforcing: a free of more than is outstanding is refused before the leaf.
    Make("limiting_enforcing_cuda_async",
         [](Owned &o) { return Limiting(o, Cuda(o, GMR_CUDA_KIND_ASYNC), size_t{1} << 34); }, 256,
         false),
    Make("oom_cuda_pinned", [](Owned &o) { return Oom(o, Cuda(o, GMR_CUDA_KIND_PINNED)); }, 256,
         true),
    // The log and NVTX adaptors count nothing live: their destroy never waits.
    Make("log_host", [](Owned &o) { return Log(o, Host(o)); }, size_t{1} << 30, true, false),
    Make("nvtx_logging_cuda_device",
         [](Owned &o) { return Nvtx(o, Cuda(o, GMR_CUDA_KIND_DEVICE)); }, 256, true, false));

GMR_CONFORMANCE_INSTANTIATE(
    ComposedStacks,
    Make("tracking_limiting_pool_cuda_async",
         [](Owned &o) {
           return Tracking(o, Limiting(o, Pool(o, Cuda(o, GMR_CUDA_KIND_ASYNC)), GMR_LIMIT_NONE));
         },
         kPoolAlignment, true),
    Make("tracking_limited_pool_cuda_device",
         [](Owned &o) {
           return Tracking(o,
                           Limiting(o, Pool(o, Cuda(o, GMR_CUDA_KIND_DEVICE)), size_t{1} << 34));
         },
         kPoolAlignment, true),
    Make("nvtx_log_oom_tracking_pool_host",
         [](Owned &o) { return Nvtx(o, Log(o, Oom(o, Tracking(o, Pool(o, Host(o)))))); },
         kPoolAlignment, true, false));

}  // namespace
