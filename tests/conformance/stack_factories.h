/*
 * tests/conformance/stack_factories.h: the pieces the conformance instances
 * build their stacks from, one function per component. Each creates its
 * component over `up` (nullptr when the layer below failed: then it returns
 * nullptr too), appends it to `owned` and returns it as a gmr_resource.
 * Configurations are small, so the simulated device's use stays bounded.
 */
#ifndef GMR_TESTS_CONFORMANCE_STACK_FACTORIES_H_
#define GMR_TESTS_CONFORMANCE_STACK_FACTORIES_H_

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gmr/cuda_resource.h"
#include "gmr/fixed_block_resource.h"
#include "gmr/graph_arena_resource.h"
#include "gmr/host_resource.h"
#include "gmr/limiting_adaptor.h"
#include "gmr/log_adaptor.h"
#include "gmr/nvtx_logging_adaptor.h"
#include "gmr/oom_adaptor.h"
#include "gmr/pool_resource.h"
#include "gmr/stack.h"
#include "gmr/tracking_adaptor.h"
#include "tests/conformance/resource_conformance.h"
#include "tests/support/policies.h"

namespace gmr_conformance {

using Owned = std::vector<gmr_resource *>;

inline gmr_resource *Keep(Owned &owned, gmr_resource *r) {
  if (r != nullptr) owned.push_back(r);
  return r;
}

inline gmr_resource *Cuda(Owned &owned, gmr_cuda_kind kind) {
  gmr_cuda_resource_config c = GMR_CUDA_RESOURCE_CONFIG_DEFAULT;
  c.kind = kind;
  gmr_cuda_resource *r = nullptr;
  if (gmr_cuda_resource_create(&c, &r) != GMR_OK) return nullptr;
  return Keep(owned, gmr_cuda_resource_as_resource(r));
}

inline gmr_resource *Host(Owned &owned) {
  gmr_host_resource *r = nullptr;
  if (gmr_host_resource_create(&r) != GMR_OK) return nullptr;
  return Keep(owned, gmr_host_resource_as_resource(r));
}

inline gmr_resource *Pool(Owned &owned, gmr_resource *up, uint32_t arenas = 0,
                          bool stream_ordered = true) {
  if (up == nullptr) return nullptr;
  gmr_pool_resource_config c = GMR_POOL_RESOURCE_CONFIG_DEFAULT;
  c.arena_count = arenas;
  c.streams.stream_ordered = stream_ordered;
  gmr_pool_resource *p = nullptr;
  if (gmr_pool_resource_create(up, &c, &p) != GMR_OK) return nullptr;
  return Keep(owned, gmr_pool_resource_as_resource(p));
}

inline gmr_resource *FixedBlock(Owned &owned, gmr_resource *up, bool stream_ordered = true) {
  if (up == nullptr) return nullptr;
  gmr_fixed_block_resource_config c = GMR_FIXED_BLOCK_RESOURCE_CONFIG_DEFAULT;
  c.blocks_per_chunk = 16;
  c.streams.stream_ordered = stream_ordered;
  gmr_fixed_block_resource *f = nullptr;
  if (gmr_fixed_block_resource_create(up, &c, &f) != GMR_OK) return nullptr;
  return Keep(owned, gmr_fixed_block_resource_as_resource(f));
}

inline gmr_resource *GraphArena(Owned &owned, gmr_resource *up, gmr_graph_arena_uncaptured mode,
                                gmr_graph_arena_detection detection) {
  if (up == nullptr) return nullptr;
  gmr_graph_arena_resource_config c = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
  c.uncaptured = mode;
  c.detection = detection;
  c.chunk_bytes = size_t{16} << 20;
  gmr_graph_arena_resource *a = nullptr;
  if (gmr_graph_arena_resource_create(up, &c, &a) != GMR_OK) return nullptr;
  return Keep(owned, gmr_graph_arena_resource_as_resource(a));
}

inline gmr_resource *Tracking(Owned &owned, gmr_resource *up) {
  if (up == nullptr) return nullptr;
  gmr_tracking_adaptor_config c = GMR_TRACKING_ADAPTOR_CONFIG_DEFAULT;
  c.check_stream = false;  // the suite frees on other streams on purpose
  gmr_tracking_adaptor *t = nullptr;
  if (gmr_tracking_adaptor_create(up, &c, &t) != GMR_OK) return nullptr;
  return Keep(owned, gmr_tracking_adaptor_as_resource(t));
}

inline gmr_resource *Limiting(Owned &owned, gmr_resource *up, size_t limit,
                              bool per_stream = false) {
  if (up == nullptr) return nullptr;
  gmr_limiting_adaptor_config c = GMR_LIMITING_ADAPTOR_CONFIG_DEFAULT;
  c.limit_bytes = limit;
  c.per_stream = per_stream;
  gmr_limiting_adaptor *l = nullptr;
  if (gmr_limiting_adaptor_create(up, &c, &l) != GMR_OK) return nullptr;
  return Keep(owned, gmr_limiting_adaptor_as_resource(l));
}

inline gmr_resource *Oom(Owned &owned, gmr_resource *up) {
  if (up == nullptr) return nullptr;
  gmr_oom_policy p = gmr_test::TrimRetryPolicy(2);
  gmr_oom_adaptor *o = nullptr;
  if (gmr_oom_adaptor_create(up, &p, &o) != GMR_OK) return nullptr;
  return Keep(owned, gmr_oom_adaptor_as_resource(o));
}

// The log goes to a file of its own in the test's temporary directory; the
// adaptor owns it (closed at destroy).
inline gmr_resource *Log(Owned &owned, gmr_resource *up) {
  if (up == nullptr) return nullptr;
  static int serial = 0;
  const char *dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/conformance_log_" +
                     std::to_string(getpid()) + "_" + std::to_string(serial++) + ".csv";
  gmr_log_adaptor_config c = GMR_LOG_ADAPTOR_CONFIG_DEFAULT;
  c.path = path.c_str();
  c.flush = GMR_LOG_FLUSH_BUFFERED;
  gmr_log_adaptor *l = nullptr;
  if (gmr_log_adaptor_create(up, &c, &l) != GMR_OK) return nullptr;
  return Keep(owned, gmr_log_adaptor_as_resource(l));
}

inline gmr_resource *Nvtx(Owned &owned, gmr_resource *up) {
  if (up == nullptr) return nullptr;
  gmr_nvtx_logging_adaptor *n = nullptr;
  if (gmr_nvtx_logging_adaptor_create(up, nullptr, &n) != GMR_OK) return nullptr;
  return Keep(owned, gmr_nvtx_logging_adaptor_as_resource(n));
}

// A whole stack from a spec (gmr/stack.h). The stack owns its layers, so
// none goes into `owned`: the stack is destroyed at tear-down.
inline gmr_resource *FromSpec(Owned &owned, const char *spec) {
  gmr_stack *stack = nullptr;
  gmr_spec_error error;
  if (gmr_stack_create(spec, &stack, &error) != GMR_OK) {
    ADD_FAILURE() << error.message;
    return nullptr;
  }
  AtTearDown(owned, [stack] { return gmr_stack_destroy(stack); });
  return gmr_stack_as_resource(stack);
}

// A Stack with the strict defaults (resource_conformance.h).
inline Stack Make(const char *name, std::function<gmr_resource *(Owned &)> make,
                  size_t max_alignment) {
  Stack s;
  s.name = name;
  s.make = std::move(make);
  s.max_alignment = max_alignment;
  return s;
}

// Builders for the traits a stack lacks, each with its reason.
inline Stack NoLiveCount(Stack s, const char *why) {
  s.live_count_skip = why;
  return s;
}
inline Stack NoBadFreeNames(Stack s, const char *why) {
  s.bad_free_skip = why;
  return s;
}
inline Stack NoDoubleFreeName(Stack s, const char *why) {
  s.double_free_skip = why;
  return s;
}
inline Stack NotThreadSafe(Stack s, const char *why) {
  s.thread_skip = why;
  return s;
}

// Why a limiting adaptor that enforces a limit without per_stream cannot name
// a double free.
constexpr const char *kEnforcingLimitDoubleFree =
    "an enforcing limit without per_stream keeps counts, not pointers: a free of more "
    "bytes than are outstanding is GMR_ERR_FREE_MISMATCH whatever its cause";

constexpr size_t kPoolAlignment = size_t{1} << 20;  // pool honours up to 1 MiB
constexpr size_t kVmmAlignment = size_t{2} << 20;   // vmm honours up to its 2 MiB page
constexpr size_t kHostAlignment = size_t{1} << 30;  // host honours any it is asked

}  // namespace gmr_conformance

#endif  // GMR_TESTS_CONFORMANCE_STACK_FACTORIES_H_
