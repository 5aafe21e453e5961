// The conformance suite (resource_conformance.h) for the resources that are
// parts of bigger objects: a GPU memory space of a tier manager
// (gmr/tiers/memory_space.h), a thread's scoped pool (gmr/scoped/scoped_pool.h), the NUMA
// host leaf under a HOST space (gmr/tiers/numa_host_resource.h), and the
// process-wide resource of a device (gmr/device_resource.h).
#include <gtest/gtest.h>

#include <vector>

#include "gmr/device_resource.h"
#include "gmr/tiers/memory_space.h"
#include "gmr/tiers/numa_host_resource.h"
#include "gmr/scoped/scoped_pool.h"
#include "gmr/tiers/tier_manager.h"
#include "tests/conformance/resource_conformance.h"
#include "tests/conformance/stack_factories.h"

namespace {

using namespace gmr_conformance;  // NOLINT: the factories read as a spec

// The allocator of a GPU space: memory_space > limiting(per_stream) > spec.
gmr_resource *GpuSpace(Owned &owned, const char *stack_spec) {
  gmr_memory_space_config c = gmr_memory_space_config_default(GMR_TIER_GPU, 0);
  c.capacity_bytes = size_t{16} << 30;
  c.stream_count = 0;
  snprintf(c.stack_spec, sizeof c.stack_spec, "%s", stack_spec);
  gmr_tier_manager *m = nullptr;
  gmr_failure f = GMR_FAILURE_INIT;
  if (gmr_tier_manager_create(&c, 1, &m, &f) != GMR_OK) {
    ADD_FAILURE() << f.message;
    return nullptr;
  }
  AtTearDown(owned, [m] { return gmr_tier_manager_destroy(m); });
  return gmr_memory_space_as_resource(gmr_tier_manager_get_space_at(m, 0));
}

// The calling thread's pool of a registry over `up` (device 0).
gmr_resource *ScopedPool(Owned &owned, gmr_resource *up) {
  if (up == nullptr) return nullptr;
  gmr_scope_registry_config c = GMR_SCOPE_REGISTRY_CONFIG_DEFAULT;
  gmr_scope_registry *registry = nullptr;
  if (gmr_scope_registry_create(&up, 1, &c, &registry) != GMR_OK) return nullptr;
  AtTearDown(owned, [registry] { return gmr_scope_registry_destroy(registry); });
  gmr_scoped_pool *pool = nullptr;
  if (gmr_scope_registry_get_pool(registry, &pool) != GMR_OK) return nullptr;
  return gmr_scoped_pool_as_resource(pool);
}

gmr_resource *NumaHost(Owned &owned) {
  gmr_numa_host_resource_config c = GMR_NUMA_HOST_RESOURCE_CONFIG_DEFAULT;
  gmr_numa_host_resource *r = nullptr;
  if (gmr_numa_host_resource_create(&c, &r) != GMR_OK) return nullptr;
  return Keep(owned, gmr_numa_host_resource_as_resource(r));
}

// The registry's resource of device 0, built from `spec` and released again.
gmr_resource *DeviceResource(Owned &owned, const char *spec) {
  gmr_spec_error error;
  if (gmr_device_resource_set_spec(spec, &error) != GMR_OK) {
    ADD_FAILURE() << error.message;
    return nullptr;
  }
  AtTearDown(owned, [] { return gmr_device_resource_release_all(); });
  gmr_resource *r = nullptr;
  if (gmr_device_resource_get(0, &r, &error) != GMR_OK) {
    ADD_FAILURE() << error.message;
    return nullptr;
  }
  return r;
}

constexpr const char *kSpaceOwned =
    "the tier manager owns the space: destroy on it is GMR_ERR_UNSUPPORTED, and "
    "gmr_tier_manager_destroy() is the one that waits for live memory";
constexpr const char *kSpaceBooks =
    "a space keeps a table of live allocations only (no ring of recent frees): a second "
    "free is not live there, hence GMR_ERR_UNKNOWN_POINTER";
constexpr const char *kRegistryOwned =
    "the registry owns the device's stack: gmr_device_resource_release_all() leaves a stack "
    "with live memory in place instead of refusing";

GMR_CONFORMANCE_INSTANTIATE(
    Tiers,
    NoDoubleFreeName(
        NoLiveCount(Make("gpu_space_cuda_async",
                         [](Owned &o) { return GpuSpace(o, "cuda(kind=async)"); }, 256),
                    kSpaceOwned),
        kSpaceBooks),
    NoDoubleFreeName(
        NoLiveCount(Make("gpu_space_pool_cuda_async",
                         [](Owned &o) { return GpuSpace(o, "pool > cuda(kind=async)"); },
                         kPoolAlignment),
                    kSpaceOwned),
        kSpaceBooks),
    Make("numa_host", [](Owned &o) { return NumaHost(o); }, 4096),
    Make("fixed_block_numa_host", [](Owned &o) { return FixedBlock(o, NumaHost(o), false); },
         256));

// A scoped pool is a graph arena outside captures: any alignment, frees are
// bookkeeping until a scope exit or reset gives the bytes back.
Stack ScopedStack(const char *name, std::function<gmr_resource *(Owned &)> make) {
  return NotThreadSafe(
      NoLiveCount(Make(name, std::move(make), kHostAlignment),
                  "the registry owns the pool: destroy on it is GMR_ERR_UNSUPPORTED, and "
                  "gmr_scope_registry_destroy() is the one that refuses while blocks are live"),
      "a scoped pool allocates only in its own thread (gmr/scoped/scoped_pool.h; scoped_pool_test "
      "checks that other threads are refused)");
}

GMR_CONFORMANCE_INSTANTIATE(
    Scoped,
    ScopedStack("scoped_pool_pool_cuda_async",
                [](Owned &o) { return ScopedPool(o, Pool(o, Cuda(o, GMR_CUDA_KIND_ASYNC))); }),
    ScopedStack("scoped_pool_host", [](Owned &o) { return ScopedPool(o, Host(o)); }));

GMR_CONFORMANCE_INSTANTIATE(
    DeviceRegistry,
    NoLiveCount(Make("device_resource_default",
                     [](Owned &o) { return DeviceResource(o, GMR_DEVICE_RESOURCE_DEFAULT_SPEC); },
                     kVmmAlignment),
                kRegistryOwned));

}  // namespace
