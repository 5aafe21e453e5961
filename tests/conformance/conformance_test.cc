// The conformance suite (resource_conformance.h) for the library's resources
// alone and under the pools: every cuda kind the simulation supports, host,
// pool, fixed_block and graph_arena in its two uncaptured modes. Adaptors and
// stacks: adaptor_conformance_test.cc; tiers, scoped pools and the device
// registry: tiers_conformance_test.cc; vmm_pages: tests/vmm.
#include <gtest/gtest.h>

#include <vector>

#include "tests/conformance/resource_conformance.h"
#include "tests/conformance/stack_factories.h"

namespace {

using namespace gmr_conformance;  // NOLINT: the factories read as a spec

GMR_CONFORMANCE_INSTANTIATE(
    Leaves,
    Make("cuda_device", [](Owned &o) { return Cuda(o, GMR_CUDA_KIND_DEVICE); }, 256),
    Make("cuda_async", [](Owned &o) { return Cuda(o, GMR_CUDA_KIND_ASYNC); }, 256),
    Make("cuda_managed", [](Owned &o) { return Cuda(o, GMR_CUDA_KIND_MANAGED); }, 256),
    Make("cuda_pinned", [](Owned &o) { return Cuda(o, GMR_CUDA_KIND_PINNED); }, 256),
    Make("host", [](Owned &o) { return Host(o); }, kHostAlignment));

GMR_CONFORMANCE_INSTANTIATE(
    Pool,
    Make("pool_cuda_device", [](Owned &o) { return Pool(o, Cuda(o, GMR_CUDA_KIND_DEVICE)); },
         kPoolAlignment),
    Make("pool_cuda_async", [](Owned &o) { return Pool(o, Cuda(o, GMR_CUDA_KIND_ASYNC)); },
         kPoolAlignment),
    Make("pool_one_arena_cuda_device",
         [](Owned &o) { return Pool(o, Cuda(o, GMR_CUDA_KIND_DEVICE), 1); }, kPoolAlignment),
    Make("pool_four_arenas_cuda_pinned",
         [](Owned &o) { return Pool(o, Cuda(o, GMR_CUDA_KIND_PINNED), 4); }, kPoolAlignment),
    Make("pool_unordered_host", [](Owned &o) { return Pool(o, Host(o), 2, false); },
         kPoolAlignment));

GMR_CONFORMANCE_INSTANTIATE(
    FixedBlock,
    Make("fixed_block_cuda_device",
         [](Owned &o) { return FixedBlock(o, Cuda(o, GMR_CUDA_KIND_DEVICE)); }, 256),
    Make("fixed_block_cuda_pinned",
         [](Owned &o) { return FixedBlock(o, Cuda(o, GMR_CUDA_KIND_PINNED)); }, 256),
    Make("fixed_block_unordered_host", [](Owned &o) { return FixedBlock(o, Host(o), false); },
         256),
    Make("pool_over_fixed_block",
         [](Owned &o) { return Pool(o, FixedBlock(o, Cuda(o, GMR_CUDA_KIND_DEVICE)), 2); },
         kPoolAlignment));

// With uncaptured=forward and no forwarded block live, a pointer outside the
// arena's chunks cannot be one of its blocks: the arena answers
// GMR_ERR_UNKNOWN_POINTER itself rather than hand the free to an upstream that
// may keep no books (graph_arena_sessions_test asserts this), so the last
// double free of the test is not named.
constexpr const char *kForwardedDoubleFree =
    "uncaptured=forward with nothing forwarded live refuses a foreign pointer as "
    "GMR_ERR_UNKNOWN_POINTER without asking the upstream";

// The graph arena in both uncaptured modes (no capture runs here: the
// capture paths have their own tests, graph_arena_*_test).
GMR_CONFORMANCE_INSTANTIATE(
    GraphArena,
    Make("graph_arena_cuda_device",
         [](Owned &o) {
           return GraphArena(o, Cuda(o, GMR_CUDA_KIND_DEVICE), GMR_GRAPH_ARENA_UNCAPTURED_ARENA,
                             GMR_GRAPH_ARENA_DETECT_AUTO);
         },
         kHostAlignment),
    Make("graph_arena_explicit_pool_cuda_device",
         [](Owned &o) {
           return GraphArena(o, Pool(o, Cuda(o, GMR_CUDA_KIND_DEVICE)),
                             GMR_GRAPH_ARENA_UNCAPTURED_ARENA, GMR_GRAPH_ARENA_DETECT_EXPLICIT);
         },
         kHostAlignment),
    NoDoubleFreeName(
        Make("graph_arena_forward_pool_cuda_device",
             [](Owned &o) {
               return GraphArena(o, Pool(o, Cuda(o, GMR_CUDA_KIND_DEVICE)),
                                 GMR_GRAPH_ARENA_UNCAPTURED_FORWARD, GMR_GRAPH_ARENA_DETECT_HINTED);
             },
             kPoolAlignment),
        kForwardedDoubleFree),
    NoDoubleFreeName(
        Make("graph_arena_forward_cuda_async",
             [](Owned &o) {
               return GraphArena(o, Cuda(o, GMR_CUDA_KIND_ASYNC),
                                 GMR_GRAPH_ARENA_UNCAPTURED_FORWARD, GMR_GRAPH_ARENA_DETECT_AUTO);
             },
             256),
        kForwardedDoubleFree));

}  // namespace
