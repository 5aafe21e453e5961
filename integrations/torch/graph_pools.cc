// integrations/torch/graph_pools.cc: PyTorch's allocate-to-pool hooks
// (torch.cuda.graph) mapped onto graph_arena sessions (gmr_torch.h).
//
// PyTorch calls begin(device, pool id, filter) before cudaStreamBeginCapture,
// end(device, id) after cudaStreamEndCapture, and release(device, id) when
// the graph is reset or destroyed (aten/src/ATen/cuda/CUDAGraph.cpp). The
// filter says whether a stream captures into that graph. Between begin and
// end, an allocation on a stream the filter accepts, while that stream
// captures, goes to the pool:
//  - with a graph_arena in the device's stack: the first such allocation on
//    a stream opens an explicit arena session on it; the first stream of a
//    pool appends to the pool's graph memory (so graphs that share a pool,
//    torch.cuda.graph(pool=...), share memory), other streams of the same
//    capture (forked side streams) get memories of their own. At end the
//    sessions close and the pool keeps one reference to each memory; the
//    last release (one per begin, as PyTorch counts a private pool's users)
//    drops them.
//  - without one: gmr_allocate_capturing(), which serves the request without
//    breaking the capture if the stack can (GMR_ERR_CAPTURE_UNSAFE if not).
#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "gmr/device.h"
#include "gmr/device_resource.h"
#include "gmr/graph_arena_resource.h"
#include "integrations/torch/gmr_torch.h"
#include "integrations/torch/shim_internal.h"

namespace gmr_torch {
namespace {

constexpr int kMaxDevices = 64;

struct pool_state {
  gmr_torch_mempool_id id;
  int use_count = 0;                          // begins not yet released (PyTorch's pool refcount)
  bool active = false;                        // between begin and end
  std::function<bool(gmr_stream)> filter;     // while active
  std::vector<gmr_graph_memory *> memories;   // one reference held for each
  std::vector<gmr_stream> session_streams;    // explicit sessions of this capture
};

struct device_pools {
  std::mutex mutex;
  std::atomic<int> active_count{0};
  std::vector<pool_state> pools;
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
    if (p.id == id) return &p;
  }
  return nullptr;
}

gmr_graph_arena_resource *arena_of(int device) {
  gmr_resource *r = nullptr;
  if (gmr_get_device_resource(device, &r, nullptr) != GMR_OK) return nullptr;
  return gmr_graph_arena_resource_find_in_stack(r);
}

// Close the pool's sessions and keep their memories. Lock held.
void end_sessions(int device, pool_state &p) {
  gmr_graph_arena_resource *arena = p.session_streams.empty() ? nullptr : arena_of(device);
  for (gmr_stream s : p.session_streams) {
    gmr_graph_memory *m = nullptr;
    gmr_status st = gmr_graph_arena_resource_end_capture(arena, s, &m);
    if (st != GMR_OK) {
      hook_error("end_allocate_to_pool(device " + std::to_string(device) + ", pool " +
                 id_text(p.id) + "): closing the arena session failed: " + gmr_status_name(st));
      continue;
    }
    if (std::find(p.memories.begin(), p.memories.end(), m) != p.memories.end()) {
      (void)gmr_graph_arena_resource_release_graph_memory(arena, m);  // keep exactly one reference
    } else {
      p.memories.push_back(m);
    }
  }
  p.session_streams.clear();
  if (p.active) devices[device].active_count.fetch_sub(1, std::memory_order_release);
  p.active = false;
  p.filter = nullptr;
}

bool valid_device(int device, const char *hook) {
  if (device >= 0 && device < kMaxDevices) return true;
  hook_error(std::string(hook) + ": device " + std::to_string(device) + " is out of range");
  return false;
}

}  // namespace

bool graph_pool_active(int device) {
  return device >= 0 && device < kMaxDevices &&
         devices[device].active_count.load(std::memory_order_acquire) > 0;
}

bool allocate_for_graph_pool(int device, gmr_resource *resource, size_t size, gmr_stream stream,
                             void **out, gmr_failure *failure, gmr_status *status) {
  device_pools &d = devices[device];
  gmr_graph_arena_resource *arena = nullptr;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    pool_state *match = nullptr;
    for (auto &p : d.pools) {
      if (!p.active || !p.filter) continue;
      bool accepted = false;
      try {
        accepted = p.filter(stream);  // PyTorch's filter queries the capture (may throw)
      } catch (...) {
        accepted = false;
      }
      if (accepted) {
        match = &p;
        break;
      }
    }
    if (match == nullptr) return false;
    bool capturing = false;
    if (gmr_stream_get_capture_info(stream, &capturing, nullptr) != GMR_OK || !capturing) {
      return false;  // a use_mem_pool-style filter outside capture: gmr is the pool already
    }
    arena = gmr_graph_arena_resource_find_in_stack(resource);
    if (arena != nullptr && std::find(match->session_streams.begin(), match->session_streams.end(),
                                      stream) == match->session_streams.end()) {
      gmr_graph_memory *share =
          match->session_streams.empty() && !match->memories.empty() ? match->memories.front()
                                                                     : nullptr;
      gmr_status st = gmr_graph_arena_resource_begin_capture(arena, stream, share);
      if (st == GMR_OK) {
        match->session_streams.push_back(stream);
      } else {
        // The arena's own capture detection still serves the stream.
        hook_error("opening a graph arena session for pool " + id_text(match->id) +
                   " on stream failed: " + gmr_status_name(st));
      }
    }
  }
  capture_allocation_count.fetch_add(1, std::memory_order_relaxed);
  *status = arena != nullptr ? gmr_allocate_ex(resource, size, 0, stream, out, failure)
                             : gmr_allocate_capturing(resource, size, 0, stream, out, failure);
  return true;
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
    if (p == nullptr) {
      d.pools.emplace_back();
      p = &d.pools.back();
      p->id = id;
    }
    if (!p->active) d.active_count.fetch_add(1, std::memory_order_release);
    p->use_count++;
    p->active = true;
    p->filter = std::move(filter);
  } catch (const std::bad_alloc &) {
    hook_error("begin_allocate_to_pool(device " + std::to_string(device) +
               "): no host memory; the capture is served as ordinary allocations");
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
  end_sessions(device, *p);
}

extern "C" void gmr_torch_release_pool(int device, gmr_torch_mempool_id id) {
  if (!valid_device(device, "release_pool")) return;
  device_pools &d = devices[device];
  std::lock_guard<std::mutex> lock(d.mutex);
  pool_state *p = find(d, id);
  if (p == nullptr) return;  // never begun: nothing to release
  // Graphs that share a pool (torch.cuda.graph(pool=...)) each begin it and
  // each release it; its memory goes when the last one does.
  if (--p->use_count > 0) return;
  if (p->active) end_sessions(device, *p);
  gmr_graph_arena_resource *arena = p->memories.empty() ? nullptr : arena_of(device);
  for (gmr_graph_memory *m : p->memories) {
    gmr_status st = gmr_graph_arena_resource_release_graph_memory(arena, m);
    if (st != GMR_OK) {
      hook_error("release_pool(device " + std::to_string(device) + ", pool " + id_text(id) +
                 "): releasing graph memory failed: " + gmr_status_name(st));
    }
  }
  d.pools.erase(d.pools.begin() + (p - d.pools.data()));
}
