// The conformance suite (tests/conformance/resource_conformance.h) for the
// layers of issue 15 and the stacks NCCL registration uses: cumem alone,
// chunk_listener over it, `pool > chunk_listener > cumem`, and symmetric
// over cumem.
#include <gtest/gtest.h>

#include <vector>

#include "gmr/nccl/chunk_listener_adaptor.h"
#include "gmr/nccl/cumem_resource.h"
#include "gmr/pool_resource.h"
#include "gmr/nccl/symmetric_resource.h"
#include "tests/conformance/resource_conformance.h"

namespace {

using gmr_conformance::Stack;
using Owned = std::vector<gmr_resource *>;

gmr_resource *cumem(Owned &owned) {
  gmr_cumem_resource_config c = GMR_CUMEM_RESOURCE_CONFIG_DEFAULT;
  c.nccl_ready = true;
  gmr_cumem_resource *r = nullptr;
  if (gmr_cumem_resource_create(&c, &r, nullptr) != GMR_OK) return nullptr;
  owned.push_back(gmr_cumem_resource_as_resource(r));
  return owned.back();
}

gmr_resource *listener_over(Owned &owned, gmr_resource *upstream) {
  gmr_chunk_listener_adaptor *a = nullptr;
  if (upstream == nullptr || gmr_chunk_listener_adaptor_create(upstream, &a) != GMR_OK) {
    return nullptr;
  }
  owned.push_back(gmr_chunk_listener_adaptor_as_resource(a));
  return owned.back();
}

gmr_resource *pool_over(Owned &owned, gmr_resource *upstream) {
  gmr_pool_resource *p = nullptr;
  if (upstream == nullptr || gmr_pool_resource_create(upstream, nullptr, &p) != GMR_OK) {
    return nullptr;
  }
  owned.push_back(gmr_pool_resource_as_resource(p));
  return owned.back();
}

gmr_resource *symmetric_over(Owned &owned, gmr_resource *upstream) {
  gmr_symmetric_resource_config c = GMR_SYMMETRIC_RESOURCE_CONFIG_DEFAULT;
  c.region_bytes = size_t{64} << 20;
  gmr_symmetric_resource *s = nullptr;
  if (upstream == nullptr || gmr_symmetric_resource_create(upstream, &c, &s, nullptr) != GMR_OK) {
    return nullptr;
  }
  owned.push_back(gmr_symmetric_resource_as_resource(s));
  return owned.back();
}

Stack stack(const char *name, std::function<gmr_resource *(Owned &)> make, size_t max_alignment) {
  Stack s;
  s.name = name;
  s.make = std::move(make);
  s.max_alignment = max_alignment;
  return s;
}

GMR_CONFORMANCE_INSTANTIATE(
    Nccl, stack("cumem", cumem, size_t{1} << 30),
    stack("chunk_listener_over_cumem", [](Owned &o) { return listener_over(o, cumem(o)); },
          size_t{1} << 30),
    stack("pool_over_chunk_listener_over_cumem",
          [](Owned &o) { return pool_over(o, listener_over(o, cumem(o))); },
          GMR_POOL_MAX_ALIGNMENT),
    stack("symmetric_over_cumem", [](Owned &o) { return symmetric_over(o, cumem(o)); }, 4096));

}  // namespace
