// integrations/torch/graph_pools.cc: PyTorch's private memory pools
// (torch.cuda.graph, graph_pool_handle, CUDA graph trees) in direct mode,
// whatever the stack (gmr_torch.h, docs/frameworks.md).
//
// PyTorch calls begin(device, pool id, filter) before cudaStreamBeginCapture
// (or, for CUDA graph trees' warm-up, with a filter that accepts the calling
// thread's requests on any stream), end(device, id) after the capture, and
// release(device, id) when a graph is reset or destroyed
// (aten/src/ATen/cuda/CUDAGraph.cpp). The contract of its private pools
// (c10/cuda/CUDACachingAllocator.cpp):
//  - while a pool is begun, a request whose stream the filter accepts
//    (capturing or not: the most recent begin first) is served from the pool;
//  - a pool's memory serves only that pool's requests until the pool's last
//    user releases it, also for blocks freed in the meantime;
//  - memory of a released pool returns to the allocator only once no work of
//    its graphs can still run (empty_cache synchronises first).
//
// Here every device has a graph arena of the shim's own over its stack
// (graph_arena(uncaptured=forward, policy=ordered_reuse, detection=explicit),
// made at the first pool request): a pool is one or more of its graph
// memories, filled through explicit sessions on the pool's streams, so a
// capture never makes a CUDA call unless the arena must grow, and then only
// through the stack's allocate_capturing. Requests outside pools never touch
// the arena. A released pool's memories wait in `pending` until the next
// safe point (empty_cache, or an out-of-memory retry): the device is
// synchronised, then they are released and the arena's idle chunks go back to
// the stack.
//
// Frees the stack would see on a stream that captures (a tensor allocated
// before the capture and freed inside it) wait for the end of the routing:
// the capture must not gain nodes, and the graph may still use the memory.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "gmr/device.h"
#include "gmr/device_resource.h"
#include "gmr/graph_arena_resource.h"
#include "integrations/torch/gmr_torch.h"
#include "integrations/torch/shim_internal.h"

namespace gmr_torch {
namespace {

struct pool_state {
  gmr_torch_mempool_id id;
  int use_count = 0;                         // begins not yet released (PyTorch's pool refcount)
  bool active = false;                       // between begin and end
  uint64_t activation = 0;                   // order of the begin: the latest wins
  std::function<bool(gmr_stream)> filter;    // while active
  struct memory {
    gmr_graph_memory *handle;  // one reference held
    gmr_stream stream;         // the stream that first filled it (memory_snapshot's segment)
  };
  std::vector<memory> memories;
  std::vector<gmr_stream> sessions;          // streams with an open session for this pool
  std::unordered_set<void *> live;           // blocks of the pool not yet freed
};

struct deferred_free {
  void *ptr;
  size_t size;
  gmr_resource *resource;
  gmr_stream stream;
  int device;
  std::vector<gmr_stream> waits;  // recorded streams the stack could not honour
};

struct device_pools {
  std::mutex mutex;
  std::atomic<int> active_count{0};
  std::vector<std::unique_ptr<pool_state>> pools;
  std::vector<gmr_graph_memory *> pending;  // memories of released pools
  std::vector<deferred_free> deferred;      // frees made on a capturing stream
  gmr_graph_arena_resource *arena = nullptr;
  gmr_resource *chunks = nullptr;           // the arena's upstream: chunk_streams over the stack
  uint64_t next_activation = 1;
};

device_pools devices[kMaxDevices];

std::string id_text(const gmr_torch_mempool_id &id) {
  return "(" + std::to_string(id.first) + ", " + std::to_string(id.second) + ")";
}

void hook_error(const std::string &message) {
  set_last_error(message);
  log_message(log_kind::hook, message);
}

pool_state *find(device_pools &d, const gmr_torch_mempool_id &id) {
  for (auto &p : d.pools) {
    if (p->id == id) return p.get();
  }
  return nullptr;
}

// Destroy the arena and its chunk layer if they hold nothing. Lock held.
bool drop_arena(device_pools &d) {
  if (gmr_resource_destroy(gmr_graph_arena_resource_as_resource(d.arena)) != GMR_OK) return false;
  (void)gmr_resource_destroy(d.chunks);  // empty once the arena gave every chunk back
  d.arena = nullptr;
  d.chunks = nullptr;
  return true;
}

// The arena of `device` over `stack`, made now if needed. Lock held.
gmr_status arena_for(int device, device_pools &d, gmr_resource *stack, gmr_failure *failure) {
  if (d.arena != nullptr) {
    if (gmr_resource_get_upstream(d.chunks) == stack) return GMR_OK;
    // The device's stack was replaced (gmr_device_resource_set): an idle
    // arena follows it; one that still holds pool memory cannot.
    if (!drop_arena(d)) {
      std::snprintf(failure->message, sizeof failure->message,
                    "gmr.torch: the stack of device %d was replaced while CUDA graph pools still "
                    "hold memory of the old one; release the graphs and call "
                    "torch.cuda.empty_cache() first",
                    device);
      return GMR_ERR_BUSY;
    }
  }
  if (gmr_graph_arena_resource_from_resource(gmr_resource_find(stack, "graph_arena_resource")) !=
      nullptr) {
    // Its automatic sessions would keep the pool arena's growth as graph
    // memory of their own, which nobody releases.
    std::snprintf(failure->message, sizeof failure->message,
                  "gmr.torch: CUDA graphs get private pools of gmr.torch's own over any stack: "
                  "remove graph_arena(...) from the spec");
    return GMR_ERR_UNSUPPORTED;
  }
  gmr_graph_arena_resource_config cfg = GMR_GRAPH_ARENA_RESOURCE_CONFIG_DEFAULT;
  cfg.chunk_bytes = size_t{2} << 20;  // PyTorch's small segment: growth in 2 MiB steps
  cfg.capture_policy = GMR_GRAPH_ARENA_ORDERED_REUSE;
  cfg.detection = GMR_GRAPH_ARENA_DETECT_EXPLICIT;
  cfg.uncaptured = GMR_GRAPH_ARENA_UNCAPTURED_FORWARD;
  d.chunks = chunk_streams_create(stack);
  if (d.chunks == nullptr) {
    std::snprintf(failure->message, sizeof failure->message, "gmr.torch: no host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
  gmr_status st = gmr_graph_arena_resource_create(d.chunks, &cfg, &d.arena);
  if (st != GMR_OK) {
    (void)gmr_resource_destroy(d.chunks);
    d.chunks = nullptr;
    std::snprintf(failure->message, sizeof failure->message,
                  "gmr.torch: cannot create the graph pool arena of device %d (%s)", device,
                  gmr_status_name(st));
    return st;
  }
  return GMR_OK;
}

// Close `p`'s session on `stream` and keep its memory. Lock held.
void end_session(device_pools &d, int device, pool_state &p, gmr_stream stream) {
  gmr_graph_memory *m = nullptr;
  gmr_status st = gmr_graph_arena_resource_end_capture(d.arena, stream, &m);
  if (st != GMR_OK) {
    hook_error("end_allocate_to_pool(device " + std::to_string(device) + ", pool " +
               id_text(p.id) + "): closing the arena session failed: " + gmr_status_name(st));
  } else if (std::any_of(p.memories.begin(), p.memories.end(),
                         [m](const pool_state::memory &x) { return x.handle == m; })) {
    (void)gmr_graph_arena_resource_release_graph_memory(d.arena, m);  // keep one reference
  } else {
    p.memories.push_back({m, stream});
  }
  p.sessions.erase(std::remove(p.sessions.begin(), p.sessions.end(), stream), p.sessions.end());
}

void end_routing(device_pools &d, int device, pool_state &p) {
  while (!p.sessions.empty()) end_session(d, device, p, p.sessions.back());
  if (p.active) d.active_count.fetch_sub(1, std::memory_order_release);
  p.active = false;
  p.filter = nullptr;
}

// A session of `p` on `stream`, opened now if needed (closing another
// pool's session on that stream first). Lock held.
gmr_status session_for(device_pools &d, int device, pool_state &p, gmr_stream stream,
                       gmr_failure *failure) {
  if (std::find(p.sessions.begin(), p.sessions.end(), stream) != p.sessions.end()) return GMR_OK;
  for (auto &other : d.pools) {
    if (other.get() != &p &&
        std::find(other->sessions.begin(), other->sessions.end(), stream) !=
            other->sessions.end()) {
      end_session(d, device, *other, stream);
    }
  }
  // Append to a memory of the pool that no other stream fills now (graphs
  // sharing a pool share its memory); forked streams get memories of their own.
  gmr_graph_memory *share = nullptr;
  for (const pool_state::memory &m : p.memories) {
    gmr_graph_memory_info info;
    if (gmr_graph_arena_resource_get_graph_memory_info(d.arena, m.handle, &info) == GMR_OK &&
        !info.capturing) {
      share = m.handle;
      break;
    }
  }
  p.sessions.reserve(p.sessions.size() + 1);  // may throw bad_alloc before anything changes
  gmr_status st = gmr_graph_arena_resource_begin_capture(d.arena, stream, share);
  if (st != GMR_OK) {
    std::snprintf(failure->message, sizeof failure->message,
                  "gmr.torch: cannot open a graph pool session for pool %s on device %d (%s)",
                  id_text(p.id).c_str(), device, gmr_status_name(st));
    return st;
  }
  p.sessions.push_back(stream);
  return GMR_OK;
}

// The latest begun pool whose filter accepts `stream` (PyTorch's get_pool).
// Lock held.
pool_state *match(device_pools &d, gmr_stream stream) {
  pool_state *best = nullptr;
  for (auto &p : d.pools) {
    if (!p->active || !p->filter || (best != nullptr && p->activation < best->activation)) {
      continue;
    }
    bool accepted = false;
    try {
      accepted = p->filter(stream);  // PyTorch's filter queries the capture (may throw)
    } catch (...) {
      accepted = false;
    }
    if (accepted) best = p.get();
  }
  return best;
}

// Free what waited for the captures to end. Lock held; no pool active.
void flush_deferred(device_pools &d) {
  std::vector<deferred_free> frees;
  frees.swap(d.deferred);
  for (const deferred_free &f : frees) {
    gmr_status st = f.waits.empty() ? GMR_OK : wait_for_streams(f.device, f.stream, f.waits);
    if (st != GMR_OK) {
      std::string m = "cannot order a free deferred to the end of a capture after its recorded "
                      "streams (" + std::string(gmr_status_name(st)) + "); the block is kept";
      set_last_error(m);
      log_message(log_kind::failed_free, m);
      continue;
    }
    st = gmr_resource_deallocate(f.resource, f.ptr, f.size, 0, f.stream);
    if (st == GMR_OK) {
      history_note(GMR_TORCH_HISTORY_FREE_COMPLETED, f.device, f.ptr, f.size, f.stream, 0, 0);
    } else {
      std::string m = "a free deferred to the end of a capture failed: " +
                      std::string(gmr_status_name(st));
      set_last_error(m);
      log_message(log_kind::failed_free, m);
    }
  }
}

// Release the memories of released pools once the device is idle, and give
// the arena's idle chunks back. Lock held; `device` current.
void release_pending(device_pools &d, int device) {
  if (d.active_count.load(std::memory_order_acquire) > 0 || d.arena == nullptr) return;
  flush_deferred(d);
  if (!d.pending.empty()) {
    // Their graphs' last launches may still run: PyTorch's empty_cache waits
    // for the device before it frees a released pool's segments.
    gmr_status st = gmr_device_synchronize();
    if (st != GMR_OK) {
      hook_error("empty_cache(device " + std::to_string(device) +
                 "): cannot synchronise the device (" + gmr_status_name(st) +
                 "); released graph pools keep their memory");
      return;
    }
    for (gmr_graph_memory *m : d.pending) {
      st = gmr_graph_arena_resource_release_graph_memory(d.arena, m);
      if (st != GMR_OK) {
        hook_error("empty_cache(device " + std::to_string(device) +
                   "): releasing a graph pool's memory failed: " + gmr_status_name(st));
      }
    }
    d.pending.clear();
  }
  size_t released = 0;
  gmr_status trimmed = gmr_resource_trim(gmr_graph_arena_resource_as_resource(d.arena), &released);
  if (trimmed != GMR_OK) {
    hook_error("empty_cache(device " + std::to_string(device) +
               "): giving the graph pool arena's idle memory back failed: " +
               gmr_status_name(trimmed));
  }
  // Pools that are gone and whose blocks are all freed leave no trace.
  d.pools.erase(std::remove_if(d.pools.begin(), d.pools.end(),
                               [](const std::unique_ptr<pool_state> &p) {
                                 return p->use_count <= 0 && p->live.empty();
                               }),
                d.pools.end());
  // An arena that holds nothing goes too (the stack may be replaced later).
  if (d.pools.empty()) (void)drop_arena(d);
}

bool valid_device(int device, const char *hook) {
  if (device >= 0 && device < kMaxDevices) return true;
  hook_error(std::string(hook) + ": device " + std::to_string(device) + " is out of range");
  return false;
}

thread_local bool expect_address = false;
thread_local void *expected_ptr = nullptr;
thread_local gmr_torch_mempool_id expected_pool;
thread_local int expected_device = -1;

}  // namespace

bool graph_pool_active(int device) {
  return device >= 0 && device < kMaxDevices &&
         devices[device].active_count.load(std::memory_order_acquire) > 0;
}

bool address_expected() { return expect_address; }

bool allocate_for_graph_pool(int device, gmr_resource *stack, size_t size, gmr_stream stream,
                             pool_block *out, gmr_failure *failure, gmr_status *status) {
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  pool_state *p = match(d, stream);
  if (p == nullptr) return false;
  *status = arena_for(device, d, stack, failure);
  if (*status == GMR_OK) *status = session_for(d, device, *p, stream, failure);
  if (*status == GMR_OK) {
    *status = gmr_resource_allocate_ex(gmr_graph_arena_resource_as_resource(d.arena), size, 0,
                                       stream, &out->ptr, failure);
  }
  if (*status == GMR_OK) {
    try {
      p->live.insert(out->ptr);
    } catch (const std::bad_alloc &) {
      (void)gmr_resource_deallocate(gmr_graph_arena_resource_as_resource(d.arena), out->ptr, size,
                                    0, stream);
      out->ptr = nullptr;
      *status = GMR_ERR_OUT_OF_MEMORY;
      std::snprintf(failure->message, sizeof failure->message, "gmr.torch: no host memory");
      return true;
    }
    out->resource = gmr_graph_arena_resource_as_resource(d.arena);
    out->pool = p->id;
    capture_allocation_count.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

bool allocate_at_expected(int device, size_t size, gmr_stream stream, pool_block *out,
                          gmr_failure *failure, gmr_status *status) {
  if (!expect_address) return false;
  expect_address = false;
  void *want = expected_ptr;
  if (device != expected_device) {
    *status = GMR_ERR_INVALID_ARGUMENT;
    std::snprintf(failure->message, sizeof failure->message,
                  "gmr.torch: an address of device %d was expected, the request is for device %d",
                  expected_device, device);
    return true;
  }
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  pool_state *p = find(d, expected_pool);
  *status = GMR_ERR_INVALID_ARGUMENT;
  if (p != nullptr && d.arena != nullptr) {
    for (const pool_state::memory &m : p->memories) {
      *status =
          gmr_graph_arena_resource_allocate_at(d.arena, m.handle, want, size, stream, nullptr);
      if (*status == GMR_OK) break;
    }
  }
  if (*status != GMR_OK) {
    std::snprintf(failure->message, sizeof failure->message,
                  "gmr.torch: restoring a block of %zu bytes at %p in graph pool %s of device %d "
                  "failed (%s): the pool does not hold those bytes free",
                  size, want, id_text(expected_pool).c_str(), device, gmr_status_name(*status));
    return true;
  }
  try {
    p->live.insert(want);
  } catch (const std::bad_alloc &) {
    (void)gmr_resource_deallocate(gmr_graph_arena_resource_as_resource(d.arena), want, size, 0,
                                  stream);
    *status = GMR_ERR_OUT_OF_MEMORY;
    return true;
  }
  out->ptr = want;
  out->resource = gmr_graph_arena_resource_as_resource(d.arena);
  out->pool = p->id;
  return true;
}

void note_pool_free(int device, const gmr_torch_mempool_id &pool, void *ptr) {
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  pool_state *p = find(d, pool);
  if (p != nullptr) p->live.erase(ptr);
}

bool defer_free_in_capture(int device, void *ptr, size_t size, gmr_resource *resource,
                           gmr_stream stream, const std::vector<gmr_stream> &waits) {
  if (!graph_pool_active(device) || stream == nullptr) return false;
  bool capturing = false;
  if (gmr_stream_get_capture_info(stream, &capturing, nullptr) != GMR_OK || !capturing) {
    return false;
  }
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  try {
    d.deferred.push_back(deferred_free{ptr, size, resource, stream, device, waits});
  } catch (const std::bad_alloc &) {
    return false;  // freed now: the stack decides what a free in capture means
  }
  return true;
}

void release_graph_pools(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  release_pending(d, device);
}

bool graph_pools_have_pending(int device) {
  if (device < 0 || device >= kMaxDevices) return false;
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  return !d.pending.empty() && d.active_count.load(std::memory_order_acquire) == 0;
}

}  // namespace gmr_torch

using namespace gmr_torch;

extern "C" void gmr_torch_begin_allocate_to_pool(int device, gmr_torch_mempool_id id,
                                                 std::function<bool(gmr_stream)> filter) {
  if (!valid_device(device, "begin_allocate_to_pool")) return;
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  try {
    pool_state *p = find(d, id);
    if (p == nullptr || p->use_count <= 0) {
      if (p == nullptr) {
        d.pools.push_back(std::make_unique<pool_state>());
        p = d.pools.back().get();
      }
      p->id = id;
      p->use_count = 0;
    }
    if (p->active) {
      hook_error("begin_allocate_to_pool(device " + std::to_string(device) + ", pool " +
                 id_text(id) + "): the pool is begun already; the new filter replaces the old");
    } else {
      d.active_count.fetch_add(1, std::memory_order_release);
    }
    p->use_count++;
    p->active = true;
    p->activation = d.next_activation++;
    p->filter = std::move(filter);
  } catch (const std::bad_alloc &) {
    hook_error("begin_allocate_to_pool(device " + std::to_string(device) +
               "): no host memory; the pool's requests are served as ordinary allocations");
  }
}

extern "C" void gmr_torch_end_allocate_to_pool(int device, gmr_torch_mempool_id id) {
  if (!valid_device(device, "end_allocate_to_pool")) return;
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  pool_state *p = find(d, id);
  if (p == nullptr || !p->active) {
    hook_error("end_allocate_to_pool(device " + std::to_string(device) + ", pool " + id_text(id) +
               "): no allocation to this pool was begun");
    return;
  }
  end_routing(d, device, *p);
  // Frees that waited for the capture: it has ended (PyTorch calls end after
  // cudaStreamEndCapture), unless another pool still routes a capture.
  if (d.active_count.load(std::memory_order_acquire) == 0) flush_deferred(d);
}

extern "C" void gmr_torch_release_pool(int device, gmr_torch_mempool_id id) {
  if (!valid_device(device, "release_pool")) return;
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  pool_state *p = find(d, id);
  if (p == nullptr || p->use_count <= 0) return;  // never begun: nothing to release
  // Graphs that share a pool (torch.cuda.graph(pool=...)) each begin it and
  // each release it; its memory goes when the last one does.
  if (--p->use_count > 0) return;
  if (p->active) end_routing(d, device, *p);
  try {
    d.pending.reserve(d.pending.size() + p->memories.size());
  } catch (const std::bad_alloc &) {
    hook_error("release_pool(device " + std::to_string(device) +
               "): no host memory; the pool's memory stays with it");
    p->use_count = 1;
    return;
  }
  for (const pool_state::memory &m : p->memories) d.pending.push_back(m.handle);
  p->memories.clear();
  // The pool id is gone for PyTorch; blocks still live keep their bytes until
  // they are freed after the memory's release.
  if (p->live.empty()) {
    d.pools.erase(std::remove_if(d.pools.begin(), d.pools.end(),
                                 [p](const std::unique_ptr<pool_state> &x) { return x.get() == p; }),
                  d.pools.end());
  }
}

extern "C" gmr_status gmr_torch_expect_address(int device, uint64_t pool_first,
                                               uint64_t pool_second, void *ptr) {
  if (device < 0 || device >= kMaxDevices || ptr == nullptr) return GMR_ERR_INVALID_ARGUMENT;
  expect_address = true;
  expected_ptr = ptr;
  expected_pool = gmr_torch_mempool_id{pool_first, pool_second};
  expected_device = device;
  return GMR_OK;
}

extern "C" gmr_status gmr_torch_get_pool_blocks(int device, uint64_t pool_first,
                                                uint64_t pool_second, uintptr_t *ptrs,
                                                size_t *sizes, uintptr_t *streams,
                                                size_t capacity, size_t *out_count) {
  if (out_count != nullptr) *out_count = 0;
  if (device < 0 || device >= kMaxDevices || out_count == nullptr ||
      (capacity > 0 && (ptrs == nullptr || sizes == nullptr || streams == nullptr))) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  device_pools &d = devices[device];
  std::vector<void *> blocks;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    pool_state *p = find(d, gmr_torch_mempool_id{pool_first, pool_second});
    if (p == nullptr || p->use_count <= 0) return GMR_ERR_UNKNOWN_POINTER;
    try {
      blocks.assign(p->live.begin(), p->live.end());
    } catch (const std::bad_alloc &) {
      return GMR_ERR_OUT_OF_MEMORY;
    }
  }
  std::sort(blocks.begin(), blocks.end());
  *out_count = blocks.size();
  size_t n = 0;
  for (void *b : blocks) {
    if (n == capacity) break;
    size_t size = 0;
    gmr_stream stream = nullptr;
    if (!describe_live(b, &size, &stream)) continue;  // freed meanwhile
    ptrs[n] = reinterpret_cast<uintptr_t>(b);
    sizes[n] = size;
    streams[n] = reinterpret_cast<uintptr_t>(stream);
    ++n;
  }
  if (n < *out_count && n < capacity) *out_count = n;
  return GMR_OK;
}

extern "C" gmr_status gmr_torch_get_graph_pool_info(int device, gmr_torch_graph_pool_info *out) {
  if (out == nullptr || out->size < sizeof(gmr_torch_graph_pool_info) || out->version == 0 ||
      device < 0 || device >= kMaxDevices) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  out->pool_count = 0;
  out->active_pool_count = static_cast<size_t>(d.active_count.load(std::memory_order_acquire));
  out->live_block_count = 0;
  for (auto &p : d.pools) {
    if (p->use_count > 0) out->pool_count++;
    out->live_block_count += p->live.size();
  }
  out->pending_memory_count = d.pending.size();
  out->deferred_free_count = d.deferred.size();
  out->arena_held_bytes = 0;
  if (d.arena != nullptr) {
    gmr_graph_arena_resource_stats s = GMR_GRAPH_ARENA_RESOURCE_STATS_INIT;
    if (gmr_graph_arena_resource_get_stats(d.arena, &s) == GMR_OK) {
      out->arena_held_bytes = s.held_bytes;
    }
  }
  return GMR_OK;
}

extern "C" gmr_status gmr_torch_get_pool_ids(int device, uint64_t *firsts, uint64_t *seconds,
                                             size_t capacity, size_t *out_count) {
  if (out_count != nullptr) *out_count = 0;
  if (device < 0 || device >= kMaxDevices || out_count == nullptr ||
      (capacity > 0 && (firsts == nullptr || seconds == nullptr))) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  size_t n = 0;
  for (auto &p : d.pools) {
    if (p->use_count <= 0) continue;
    if (n < capacity) {
      firsts[n] = p->id.first;
      seconds[n] = p->id.second;
    }
    ++n;
  }
  *out_count = n;
  return GMR_OK;
}

extern "C" gmr_status gmr_torch_get_pool_segments(int device, uint64_t pool_first,
                                                  uint64_t pool_second, uintptr_t *streams,
                                                  size_t *held_bytes, size_t capacity,
                                                  size_t *out_count) {
  if (out_count != nullptr) *out_count = 0;
  if (device < 0 || device >= kMaxDevices || out_count == nullptr ||
      (capacity > 0 && (streams == nullptr || held_bytes == nullptr))) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  pool_state *p = find(d, gmr_torch_mempool_id{pool_first, pool_second});
  if (p == nullptr || p->use_count <= 0) return GMR_ERR_UNKNOWN_POINTER;
  size_t n = p->memories.size();
  for (size_t i = 0; i < n && i < capacity; ++i) {
    gmr_graph_memory_info info;
    held_bytes[i] = gmr_graph_arena_resource_get_graph_memory_info(d.arena, p->memories[i].handle,
                                                                  &info) == GMR_OK
                        ? info.held_bytes
                        : 0;
    streams[i] = reinterpret_cast<uintptr_t>(p->memories[i].stream);
  }
  *out_count = n;
  return GMR_OK;
}
