// The conformance suite (tests/conformance/resource_conformance.h) for the
// VMM resources: vmm_pages alone (with and without its small path), vmm
// (also over small VA chunks so that it reserves more), and vmm_pages under
// gmr's pool.
#include <gtest/gtest.h>

#include <vector>

#include "gmr/pool_resource.h"
#include "gmr/vmm_pages_resource.h"
#include "gmr/vmm_pool_resource.h"
#include "gmr/vmm_resource.h"
#include "tests/conformance/resource_conformance.h"

namespace {

using gmr_conformance::Stack;
using Owned = std::vector<gmr_resource *>;

gmr_resource *make_vmm(Owned &owned, bool small_pool, bool fine = false,
                       size_t va_chunk = size_t{1} << 30) {
  gmr_vmm_pool_resource_config c = GMR_VMM_POOL_RESOURCE_CONFIG_DEFAULT;
  c.small_pool = small_pool;
  c.va_chunk_bytes = va_chunk;
  gmr_vmm_pool_resource *p = nullptr;
  gmr_status st = fine ? gmr_vmm_resource_create(&c, &p, nullptr)
                       : gmr_vmm_pages_resource_create(&c, &p, nullptr);
  if (st != GMR_OK) return nullptr;
  owned.push_back(gmr_vmm_pool_resource_as_resource(p));
  return owned.back();
}

gmr_resource *pool_over(Owned &owned, gmr_resource *upstream) {
  if (upstream == nullptr) return nullptr;
  gmr_pool_resource *p = nullptr;
  if (gmr_pool_resource_create(upstream, nullptr, &p) != GMR_OK) return nullptr;
  owned.push_back(gmr_pool_resource_as_resource(p));
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
    VmmPool,
    stack("vmm_pages", [](Owned &o) { return make_vmm(o, true); }, size_t{2} << 20),
    stack("vmm", [](Owned &o) { return make_vmm(o, true, true); }, size_t{2} << 20),
    stack("vmm_small_va_chunks",
          [](Owned &o) { return make_vmm(o, true, true, size_t{16} << 20); }, size_t{2} << 20),
    stack("vmm_pages_without_small_path", [](Owned &o) { return make_vmm(o, false); },
          size_t{2} << 20),
    stack("pool_over_vmm_pages", [](Owned &o) { return pool_over(o, make_vmm(o, true)); },
          size_t{1} << 20));

}  // namespace
