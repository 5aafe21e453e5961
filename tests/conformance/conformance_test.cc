// The conformance suite (resource_conformance.h) for the library's resources
// and stacks. One GMR_CONFORMANCE_INSTANTIATE line per group.
#include <gtest/gtest.h>

#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/host_resource.h"
#include "gmr/pool_resource.h"
#include "tests/conformance/resource_conformance.h"

namespace {

using gmr_conformance::Stack;
using Owned = std::vector<gmr_resource *>;

gmr_resource *cuda(Owned &owned, gmr_cuda_kind kind) {
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = kind;
  gmr_cuda_resource *r = nullptr;
  if (gmr_cuda_resource_create(&c, &r) != GMR_OK) return nullptr;
  owned.push_back(gmr_cuda_resource_as_resource(r));
  return owned.back();
}

gmr_resource *host(Owned &owned) {
  gmr_host_resource *r = nullptr;
  if (gmr_host_resource_create(&r) != GMR_OK) return nullptr;
  owned.push_back(gmr_host_resource_as_resource(r));
  return owned.back();
}

gmr_resource *pool(Owned &owned, gmr_resource *upstream, uint32_t arenas, bool stream_ordered) {
  if (upstream == nullptr) return nullptr;
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = arenas;
  c.stream_ordered = stream_ordered;
  gmr_pool_resource *p = nullptr;
  if (gmr_pool_resource_create(upstream, &c, &p) != GMR_OK) return nullptr;
  owned.push_back(gmr_pool_resource_as_resource(p));
  return owned.back();
}

gmr_resource *fixed_block(Owned &owned, gmr_resource *upstream, bool stream_ordered) {
  if (upstream == nullptr) return nullptr;
  gmr_fixed_block_resource_config c = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  c.blocks_per_chunk = 16;  // keep the simulated device's use small
  c.stream_ordered = stream_ordered;
  gmr_fixed_block_resource *f = nullptr;
  if (gmr_fixed_block_resource_create(upstream, &c, &f) != GMR_OK) return nullptr;
  owned.push_back(gmr_fixed_block_resource_as_resource(f));
  return owned.back();
}

Stack leaf(const char *name, std::function<gmr_resource *(Owned &)> make, size_t max_alignment) {
  Stack s;
  s.name = name;
  s.make = std::move(make);
  s.max_alignment = max_alignment;
  return s;
}

Stack checked(Stack s) {
  s.checks_free_size = true;
  return s;
}

GMR_CONFORMANCE_INSTANTIATE(
    Leaves,
    leaf("cuda_device", [](Owned &o) { return cuda(o, GMR_CUDA_KIND_DEVICE); }, 256),
    leaf("cuda_async", [](Owned &o) { return cuda(o, GMR_CUDA_KIND_ASYNC); }, 256),
    leaf("cuda_pinned", [](Owned &o) { return cuda(o, GMR_CUDA_KIND_PINNED); }, 256),
    leaf("host", [](Owned &o) { return host(o); }, size_t{1} << 30));

GMR_CONFORMANCE_INSTANTIATE(
    Pool,
    checked(leaf("pool_cuda_device", [](Owned &o) { return pool(o, cuda(o, GMR_CUDA_KIND_DEVICE), 0, true); }, size_t{1} << 20)),
    checked(leaf("pool_cuda_async", [](Owned &o) { return pool(o, cuda(o, GMR_CUDA_KIND_ASYNC), 0, true); }, size_t{1} << 20)),
    checked(leaf("pool_one_arena_cuda_device", [](Owned &o) { return pool(o, cuda(o, GMR_CUDA_KIND_DEVICE), 1, true); }, size_t{1} << 20)),
    checked(leaf("pool_four_arenas_cuda_pinned", [](Owned &o) { return pool(o, cuda(o, GMR_CUDA_KIND_PINNED), 4, true); }, size_t{1} << 20)),
    checked(leaf("pool_unordered_host", [](Owned &o) { return pool(o, host(o), 2, false); }, size_t{1} << 20)));

GMR_CONFORMANCE_INSTANTIATE(
    FixedBlock,
    checked(leaf("fixed_block_cuda_device", [](Owned &o) { return fixed_block(o, cuda(o, GMR_CUDA_KIND_DEVICE), true); }, 256)),
    checked(leaf("fixed_block_cuda_pinned", [](Owned &o) { return fixed_block(o, cuda(o, GMR_CUDA_KIND_PINNED), true); }, 256)),
    checked(leaf("fixed_block_unordered_host", [](Owned &o) { return fixed_block(o, host(o), false); }, 256)),
    checked(leaf("pool_over_fixed_block", [](Owned &o) { return pool(o, fixed_block(o, cuda(o, GMR_CUDA_KIND_DEVICE), true), 2, true); }, size_t{1} << 20)));

}  // namespace
