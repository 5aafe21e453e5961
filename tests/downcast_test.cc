// gmr_resource_downcast (gmr/resource.h): the one type-checked downcast
// behind every per-type *_from_resource(). It answers the handle for the
// right type, NULL for another type, a NULL resource or name, and a user's
// resource whose vtable borrows a gmr type name; the per-type inline
// functions answer the same.
// gmr_resource_find: the one walk down a stack to a layer of a given type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gmr/gmr.h"
#include "gmr/nccl/chunk_listener_adaptor.h"
#include "tests/support/sim_fixture.h"

namespace {

// A resource written outside gmr whose vtable claims to be a pool.
struct impostor {
  gmr_resource base;
};

gmr_status impostor_allocate(gmr_resource *, size_t, size_t, gmr_stream, void **,
                             gmr_failure *) {
  return GMR_ERR_OUT_OF_MEMORY;
}
gmr_status impostor_deallocate(gmr_resource *, void *, size_t, size_t, gmr_stream) {
  return GMR_ERR_UNKNOWN_POINTER;
}
gmr_status impostor_destroy(gmr_resource *) { return GMR_OK; }

const gmr_resource_vtbl kImpostorVtbl = {
    GMR_RESOURCE_VTBL_VERSION, "pool_resource", impostor_allocate, impostor_deallocate,
    impostor_destroy, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
};

// Every type name of libgmr, and the optional libraries' that a spec can
// build on the simulation.
const char *const kTypeNames[] = {
    "cuda_resource",        "host_resource",        "pool_resource",
    "vmm_resource",         "vmm_pages_resource",   "fixed_block_resource",
    "graph_arena_resource", "limiting_adaptor",     "tracking_adaptor",
    "oom_adaptor",          "log_adaptor",          "nvtx_logging_adaptor",
    "chunk_listener_adaptor",
};

// The families: a name that reaches every type of its family (their
// common handle), and those types.
bool InFamily(const std::string &family, const std::string &type) {
  return family == "vmm_pool_resource" && (type == "vmm_resource" || type == "vmm_pages_resource");
}

// The per-type inline function of `name` on `r` (the header's definition).
void *typed_from_resource(const std::string &name, gmr_resource *r) {
  if (name == "cuda_resource") return gmr_cuda_resource_from_resource(r);
  if (name == "host_resource") return gmr_host_resource_from_resource(r);
  if (name == "pool_resource") return gmr_pool_resource_from_resource(r);
  if (name == "vmm_pool_resource") return gmr_vmm_pool_resource_from_resource(r);
  // vmm and vmm_pages have the family's handle, and no function of their own.
  if (name == "vmm_resource" || name == "vmm_pages_resource") {
    return gmr_resource_downcast(r, name.c_str());
  }
  if (name == "fixed_block_resource") return gmr_fixed_block_resource_from_resource(r);
  if (name == "graph_arena_resource") return gmr_graph_arena_resource_from_resource(r);
  if (name == "limiting_adaptor") return gmr_limiting_adaptor_from_resource(r);
  if (name == "tracking_adaptor") return gmr_tracking_adaptor_from_resource(r);
  if (name == "oom_adaptor") return gmr_oom_adaptor_from_resource(r);
  if (name == "log_adaptor") return gmr_log_adaptor_from_resource(r);
  if (name == "nvtx_logging_adaptor") return gmr_nvtx_logging_adaptor_from_resource(r);
  if (name == "chunk_listener_adaptor") return gmr_chunk_listener_adaptor_from_resource(r);
  ADD_FAILURE() << "no typed downcast for " << name;
  return nullptr;
}

class Downcast : public gmr_test::SimTest {
 protected:
  void TearDown() override {
    for (auto it = stacks_.rbegin(); it != stacks_.rend(); ++it) {
      EXPECT_EQ(GMR_OK, gmr_stack_destroy(*it));
    }
    SimTest::TearDown();
  }
  // The layers of a stack built from `spec`, top first.
  std::vector<gmr_resource *> Layers(const char *spec) {
    gmr_stack *stack = nullptr;
    gmr_spec_error error;
    EXPECT_EQ(GMR_OK, gmr_stack_create(spec, &stack, &error)) << spec << ": " << error.message;
    std::vector<gmr_resource *> layers;
    if (stack == nullptr) return layers;
    stacks_.push_back(stack);
    for (size_t i = 0; i < gmr_stack_get_depth(stack); ++i) {
      layers.push_back(gmr_stack_get_layer(stack, i));
    }
    return layers;
  }
  std::vector<gmr_resource *> AllLayers() {
    std::vector<gmr_resource *> all;
    for (const char *spec :
         {"tracking > limiting(limit=1GiB) > oom(policy=trim_retry) > nvtx_logging > "
          "log(file=/dev/null) > pool > chunk_listener > cuda",
          "fixed_block > host", "graph_arena > cuda(kind=async)", "vmm", "vmm_pages"}) {
      for (gmr_resource *r : Layers(spec)) all.push_back(r);
    }
    return all;
  }
  std::vector<gmr_stack *> stacks_;
};

TEST_F(Downcast, RightTypeGivesTheHandleWrongTypeAndNullGiveNull) {
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_resource *r = gmr_host_resource_as_resource(host);
  EXPECT_EQ(static_cast<void *>(host), static_cast<void *>(r)) << "the resource comes first";

  EXPECT_EQ(static_cast<void *>(host), gmr_resource_downcast(r, "host_resource"));
  EXPECT_EQ(host, gmr_host_resource_from_resource(r));
  EXPECT_EQ(nullptr, gmr_resource_downcast(r, "pool_resource"));
  EXPECT_EQ(nullptr, gmr_pool_resource_from_resource(r));
  EXPECT_EQ(nullptr, gmr_resource_downcast(r, ""));
  EXPECT_EQ(nullptr, gmr_resource_downcast(r, "host"));  // a spec name is not a type name
  EXPECT_EQ(nullptr, gmr_resource_downcast(r, nullptr));
  EXPECT_EQ(nullptr, gmr_resource_downcast(nullptr, "host_resource"));
  EXPECT_EQ(nullptr, gmr_host_resource_from_resource(nullptr));
  EXPECT_EQ(nullptr, gmr_host_resource_as_resource(nullptr));
  gmr_resource no_vtable = {nullptr};
  EXPECT_EQ(nullptr, gmr_resource_downcast(&no_vtable, "host_resource"));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(r));
}

TEST_F(Downcast, AUserResourceNeverPassesForAGmrTypeWhateverItsName) {
  impostor user = {{&kImpostorVtbl}};
  ASSERT_EQ(GMR_OK, gmr_resource_check(&user.base));
  EXPECT_STREQ("pool_resource", gmr_resource_get_type_name(&user.base));
  // A pool exists, so the name is a registered gmr type: the vtable decides.
  gmr_pool_resource *pool = nullptr;
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(gmr_host_resource_as_resource(host), nullptr, &pool));
  EXPECT_EQ(pool, gmr_pool_resource_from_resource(gmr_pool_resource_as_resource(pool)));
  EXPECT_EQ(nullptr, gmr_resource_downcast(&user.base, "pool_resource"));
  EXPECT_EQ(nullptr, gmr_pool_resource_from_resource(&user.base));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_pool_resource_as_resource(pool)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_host_resource_as_resource(host)));
}

TEST_F(Downcast, EveryTypeDowncastsToItselfAndToNothingElse) {
  std::vector<gmr_resource *> layers = AllLayers();
  std::vector<std::string> seen;
  for (gmr_resource *layer : layers) {
    const std::string type = gmr_resource_get_type_name(layer);
    seen.push_back(type);
    for (const char *name : kTypeNames) {
      void *want = type == name ? static_cast<void *>(layer) : nullptr;
      EXPECT_EQ(want, gmr_resource_downcast(layer, name)) << type << " as " << name;
      EXPECT_EQ(want, typed_from_resource(name, layer)) << type << " as " << name;
    }
    const std::string family = "vmm_pool_resource";
    void *want = InFamily(family, type) ? static_cast<void *>(layer) : nullptr;
    EXPECT_EQ(want, gmr_resource_downcast(layer, family.c_str())) << type << " as " << family;
    EXPECT_EQ(want, typed_from_resource(family, layer)) << type << " as " << family;
  }
  for (const char *name : kTypeNames) {
    EXPECT_NE(seen.end(), std::find(seen.begin(), seen.end(), name))
        << "no layer of type " << name << " was built";
  }
}

TEST_F(Downcast, FindWalksDownToTheFirstLayerOfTheType) {
  std::vector<gmr_resource *> layers =
      Layers("tracking > limiting(limit=1GiB) > tracking > pool > cuda");
  ASSERT_EQ(5u, layers.size());
  gmr_resource *top = layers[0];
  EXPECT_EQ(top, gmr_resource_find(top, "tracking_adaptor")) << "the top itself";
  EXPECT_EQ(layers[2], gmr_resource_find(layers[1], "tracking_adaptor")) << "the first below";
  EXPECT_EQ(layers[3], gmr_resource_find(top, "pool_resource"));
  EXPECT_EQ(layers[4], gmr_resource_find(top, "cuda_resource"));
  EXPECT_EQ(gmr_resource_downcast(layers[3], "pool_resource"),
            gmr_pool_resource_from_resource(gmr_resource_find(top, "pool_resource")));
  EXPECT_EQ(nullptr, gmr_resource_find(layers[3], "limiting_adaptor")) << "only downwards";
  EXPECT_EQ(nullptr, gmr_resource_find(top, "vmm_pool_resource"));
  EXPECT_EQ(nullptr, gmr_resource_find(top, ""));
  EXPECT_EQ(nullptr, gmr_resource_find(top, nullptr));
  EXPECT_EQ(nullptr, gmr_resource_find(nullptr, "pool_resource"));
}

// A family's name ("vmm_pool_resource": vmm and vmm_pages) reaches the
// first layer of any of its types, and a user's vtable that borrows the
// family's name is passed over as one that borrows a type's.
TEST_F(Downcast, FindByAFamilysNameReachesEitherMemberAndOnlyGmrs) {
  for (const char *spec : {"tracking > vmm", "tracking > pool > vmm_pages"}) {
    SCOPED_TRACE(spec);
    std::vector<gmr_resource *> layers = Layers(spec);
    ASSERT_FALSE(layers.empty());
    gmr_resource *vmm = layers.back();
    EXPECT_EQ(vmm, gmr_resource_find(layers[0], "vmm_pool_resource"));
    EXPECT_EQ(vmm, gmr_resource_find(layers[0], gmr_resource_get_type_name(vmm)));
    EXPECT_EQ(static_cast<void *>(vmm), gmr_resource_downcast(vmm, "vmm_pool_resource"));
    EXPECT_EQ(nullptr, gmr_resource_downcast(layers[0], "vmm_pool_resource"));
  }
  EXPECT_EQ(nullptr, gmr_resource_find(Layers("tracking > pool > vmm")[0], "vmm_pages_resource"))
      << "a member's own name reaches that member only";
  static const gmr_resource_vtbl borrowed = {
      GMR_RESOURCE_VTBL_VERSION, "vmm_pool_resource", impostor_allocate, impostor_deallocate,
      impostor_destroy, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
  };
  impostor user = {{&borrowed}};
  EXPECT_EQ(nullptr, gmr_resource_downcast(&user.base, "vmm_pool_resource"));
  EXPECT_EQ(nullptr, gmr_resource_find(&user.base, "vmm_pool_resource"))
      << "the family's name is gmr's: a user's layer named so is not one";
}

TEST_F(Downcast, FindPassesOverAUserResourceThatBorrowsAGmrTypeName) {
  gmr_host_resource *host = nullptr;
  ASSERT_EQ(GMR_OK, gmr_host_resource_create(&host));
  gmr_pool_resource *pool = nullptr;
  ASSERT_EQ(GMR_OK, gmr_pool_resource_create(gmr_host_resource_as_resource(host), nullptr, &pool));
  // A user's adaptor named "pool_resource" above the real pool.
  struct named_adaptor {
    gmr_resource base;
    gmr_resource *upstream;
  };
  static named_adaptor *self = nullptr;
  static const gmr_resource_vtbl vtbl = {
      GMR_RESOURCE_VTBL_VERSION,
      "pool_resource",
      impostor_allocate,
      impostor_deallocate,
      impostor_destroy,
      [](const gmr_resource *) -> gmr_resource * { return self->upstream; },
      nullptr,
      nullptr,
      nullptr,
      nullptr,
      nullptr,
      nullptr,
  };
  named_adaptor user = {{&vtbl}, gmr_pool_resource_as_resource(pool)};
  self = &user;
  EXPECT_EQ(gmr_pool_resource_as_resource(pool), gmr_resource_find(&user.base, "pool_resource"))
      << "the gmr pool below, not the user's layer named like it";
  // A name no gmr type has matches the user's type by its name.
  static const gmr_resource_vtbl mine = {
      GMR_RESOURCE_VTBL_VERSION,
      "my_adaptor",
      impostor_allocate,
      impostor_deallocate,
      impostor_destroy,
      vtbl.get_upstream,
      nullptr,
      nullptr,
      nullptr,
      nullptr,
      nullptr,
      nullptr,
  };
  user.base.vtbl = &mine;
  EXPECT_EQ(&user.base, gmr_resource_find(&user.base, "my_adaptor"));
  EXPECT_EQ(gmr_host_resource_as_resource(host), gmr_resource_find(&user.base, "host_resource"));
  self = nullptr;
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_pool_resource_as_resource(pool)));
  EXPECT_EQ(GMR_OK, gmr_resource_destroy(gmr_host_resource_as_resource(host)));
}

}  // namespace
