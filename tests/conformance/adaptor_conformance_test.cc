// The conformance suite (resource_conformance.h) for the adaptors, alone over
// the leaves and composed over pools, and for stacks built from specs (the
// graph pool of docs/graph_pool.md).
#include <gtest/gtest.h>

#include <vector>

#include "tests/conformance/resource_conformance.h"
#include "tests/conformance/stack_factories.h"

namespace {

using namespace gmr_conformance;  // NOLINT: the factories read as a spec

// The logging adaptors keep no count of live blocks (gmr/log_adaptor.h,
// gmr/nvtx_logging_adaptor.h), so a stack topped by one is destroyed layer by
// layer and only the layers below refuse.
constexpr const char *kLogCountsNothing =
    "the log adaptor counts nothing live: its destroy never waits";
constexpr const char *kNvtxCountsNothing =
    "the NVTX adaptor counts nothing live: its destroy never waits";

GMR_CONFORMANCE_INSTANTIATE(
    Adaptors,
    Make("tracking_cuda_device",
         [](Owned &o) { return Tracking(o, Cuda(o, GMR_CUDA_KIND_DEVICE)); }, 256),
    // Counting (no limit): frees pass to the leaf's books.
    Make("limiting_counting_host", [](Owned &o) { return Limiting(o, Host(o), GMR_LIMIT_NONE); },
         kHostAlignment),
    // Enforcing: a free of more than is outstanding is refused before the leaf.
    NoDoubleFreeName(
        Make("limiting_enforcing_cuda_async",
             [](Owned &o) { return Limiting(o, Cuda(o, GMR_CUDA_KIND_ASYNC), size_t{1} << 34); },
             256),
        kEnforcingLimitDoubleFree),
    NoDoubleFreeName(
        Make("limiting_per_stream_cuda_device",
             [](Owned &o) {
               return Limiting(o, Cuda(o, GMR_CUDA_KIND_DEVICE), size_t{1} << 34, true);
             },
             256),
        "per_stream keeps a table of live pointers only (no ring of recent frees): a "
        "second free is not live, hence GMR_ERR_UNKNOWN_POINTER"),
    Make("oom_cuda_pinned", [](Owned &o) { return Oom(o, Cuda(o, GMR_CUDA_KIND_PINNED)); }, 256),
    NoLiveCount(Make("log_host", [](Owned &o) { return Log(o, Host(o)); }, kHostAlignment),
                kLogCountsNothing),
    NoLiveCount(Make("nvtx_logging_cuda_device",
                     [](Owned &o) { return Nvtx(o, Cuda(o, GMR_CUDA_KIND_DEVICE)); }, 256),
                kNvtxCountsNothing));

// The representative stacks of issue 9: each adaptor over a pool, and the
// full stacks people run.
GMR_CONFORMANCE_INSTANTIATE(
    ComposedStacks,
    Make("tracking_limiting_pool_cuda_async",
         [](Owned &o) {
           return Tracking(o, Limiting(o, Pool(o, Cuda(o, GMR_CUDA_KIND_ASYNC)), GMR_LIMIT_NONE));
         },
         kPoolAlignment),
    Make("tracking_limited_pool_cuda_device",
         [](Owned &o) {
           return Tracking(o,
                           Limiting(o, Pool(o, Cuda(o, GMR_CUDA_KIND_DEVICE)), size_t{1} << 34));
         },
         kPoolAlignment),
    NoLiveCount(Make("log_pool_cuda_async",
                     [](Owned &o) { return Log(o, Pool(o, Cuda(o, GMR_CUDA_KIND_ASYNC))); },
                     kPoolAlignment),
                kLogCountsNothing),
    NoLiveCount(Make("nvtx_logging_pool_cuda_async",
                     [](Owned &o) { return Nvtx(o, Pool(o, Cuda(o, GMR_CUDA_KIND_ASYNC))); },
                     kPoolAlignment),
                kNvtxCountsNothing),
    Make("oom_pool_cuda_async", [](Owned &o) { return Oom(o, Pool(o, Cuda(o, GMR_CUDA_KIND_ASYNC))); },
         kPoolAlignment),
    NoLiveCount(
        Make("nvtx_log_oom_tracking_pool_host",
             [](Owned &o) { return Nvtx(o, Log(o, Oom(o, Tracking(o, Pool(o, Host(o)))))); },
             kPoolAlignment),
        kNvtxCountsNothing));

// Stacks from specs: what tools/replay and gmr_stack_create() users run.
GMR_CONFORMANCE_INSTANTIATE(
    SpecStacks,
    // tools/replay's `graph_pool` alias (docs/graph_pool.md), stream check off.
    Make("graph_pool_spec",
         [](Owned &o) {
           // check_stream=false: the suite frees on other streams on purpose.
           return FromSpec(
               o,
               "tracking(per=stream, check_stream=false) > limiting > graph_arena("
               "uncaptured=forward, policy=ordered_reuse, detect=hinted) > pool > "
               "cuda(kind=device)");
         },
         kPoolAlignment),
    NoDoubleFreeName(
        Make("limited_pool_spec",
             [](Owned &o) {
               return FromSpec(o,
                               "limiting(limit=8GiB, on_oom=trim_retry) > pool > cuda(kind=async)");
             },
             kPoolAlignment),
        kEnforcingLimitDoubleFree));

}  // namespace
