// integrations/torch/chunk_streams.cc: the layer between the graph pool arena
// of a device (graph_pools.cc) and the device's stack, which gives each chunk
// back on the stream it was taken on.
//
// The arena gives its chunks back on the default stream (trim, destroy) or on
// a capture's stream, after the shim synchronised the device; a stack may
// check that a free names the allocation's stream (tracking's check_stream)
// and refuse it otherwise. PyTorch's streams are never destroyed, so the
// stream a chunk was taken on is still there when it goes back.
//
// When a vmm pool serves the stack (gmr_resource_find), each chunk
// gets the tag GMR_TORCH_GRAPH_POOL_TAG, so that sleep can treat the memory
// of CUDA graphs apart from the rest (gmr.serving: the tag "graphs"). A
// stack that sub-allocates above the pool (pool > vmm_pages) hands out no
// pool allocation to tag: its chunks keep the pool's tag.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>

#include "gmr/vmm_pool_sleep.h"
#include "integrations/torch/shim_internal.h"

namespace gmr_torch {
namespace {

struct chunk_streams {
  gmr_resource base;  // first: usable as a gmr_resource
  gmr_resource *upstream;
  gmr_vmm_pool_resource *vmm;  // the vmm pool under upstream, or nullptr
  std::mutex mutex;
  std::unordered_map<void *, gmr_stream> streams;
};

chunk_streams *self_of(gmr_resource *r) { return reinterpret_cast<chunk_streams *>(r); }

gmr_status remember(chunk_streams *c, size_t bytes, gmr_stream stream, void *ptr,
                    gmr_failure *failure) {
  // No CUDA call: safe during a capture. A chunk the pool did not hand out
  // itself (a sub-allocator above it) is not its to tag.
  if (c->vmm != nullptr) {
    (void)gmr_vmm_pool_resource_set_tag(c->vmm, ptr, GMR_TORCH_GRAPH_POOL_TAG);
  }
  try {
    std::lock_guard<std::mutex> lock(c->mutex);
    c->streams[ptr] = stream;
    return GMR_OK;
  } catch (const std::bad_alloc &) {
    (void)gmr_resource_deallocate(c->upstream, ptr, bytes, 0, stream);
    std::snprintf(failure->message, sizeof failure->message, "gmr.torch: no host memory");
    return GMR_ERR_OUT_OF_MEMORY;
  }
}

gmr_status cs_allocate(gmr_resource *self, size_t bytes, size_t alignment, gmr_stream stream,
                       void **out, gmr_failure *failure) {
  chunk_streams *c = self_of(self);
  gmr_status st = gmr_resource_allocate_ex(c->upstream, bytes, alignment, stream, out, failure);
  return st == GMR_OK ? remember(c, bytes, stream, *out, failure) : st;
}

gmr_status cs_allocate_capturing(gmr_resource *self, size_t bytes, size_t alignment,
                                 gmr_stream stream, void **out, gmr_failure *failure) {
  chunk_streams *c = self_of(self);
  gmr_status st =
      gmr_resource_allocate_capturing(c->upstream, bytes, alignment, stream, out, failure);
  return st == GMR_OK ? remember(c, bytes, stream, *out, failure) : st;
}

gmr_status cs_deallocate(gmr_resource *self, void *ptr, size_t bytes, size_t alignment,
                         gmr_stream stream) {
  chunk_streams *c = self_of(self);
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    auto it = c->streams.find(ptr);
    if (it == c->streams.end()) return GMR_ERR_UNKNOWN_POINTER;
    stream = it->second;
  }
  gmr_status st = gmr_resource_deallocate(c->upstream, ptr, bytes, alignment, stream);
  if (st == GMR_OK) {
    std::lock_guard<std::mutex> lock(c->mutex);
    c->streams.erase(ptr);
  }
  return st;
}

gmr_status cs_destroy(gmr_resource *self) {
  chunk_streams *c = self_of(self);
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    if (!c->streams.empty()) return GMR_ERR_BUSY;
  }
  delete c;
  return GMR_OK;
}

gmr_resource *cs_get_upstream(const gmr_resource *self) {
  return reinterpret_cast<const chunk_streams *>(self)->upstream;
}

gmr_status cs_get_footprint(const gmr_resource *self, gmr_footprint *out) {
  return gmr_resource_get_footprint(cs_get_upstream(self), out);
}

gmr_status cs_get_memory_info(const gmr_resource *self, gmr_memory_info *out) {
  return gmr_resource_get_memory_info(cs_get_upstream(self), out);
}

gmr_resource_vtbl make_vtbl() {
  gmr_resource_vtbl v{};
  v.version = GMR_RESOURCE_VTBL_VERSION;
  v.type_name = "torch_chunk_streams";
  v.allocate = cs_allocate;
  v.deallocate = cs_deallocate;
  v.destroy = cs_destroy;
  v.get_upstream = cs_get_upstream;
  v.get_footprint = cs_get_footprint;
  v.get_memory_info = cs_get_memory_info;
  v.allocate_capturing = cs_allocate_capturing;
  return v;
}

const gmr_resource_vtbl vtbl = make_vtbl();

}  // namespace

gmr_resource *chunk_streams_create(gmr_resource *upstream) {
  chunk_streams *c = new (std::nothrow) chunk_streams();
  if (c == nullptr) return nullptr;
  c->base.vtbl = &vtbl;
  c->upstream = upstream;
  c->vmm = gmr_vmm_pool_resource_from_resource(gmr_resource_find(upstream, "vmm_pool_resource"));
  return &c->base;
}

}  // namespace gmr_torch
