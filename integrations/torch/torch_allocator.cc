// integrations/torch/torch_allocator.cc: the alloc/free entry points of both
// modes, the table of live pointers (and its listing for snapshots), and the
// init, reset, memory-fraction and record_stream hooks (gmr_torch.h). Calls
// and failures go into the allocation history (history.cc) while it records.
//
// C++ (not C) because direct-mode failures must be thrown to PyTorch, from
// the outermost frame, after gmr's C code has returned and released its locks.
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "gmr/device.h"
#include "gmr/device_resource.h"
#include "gmr/limiting_adaptor.h"
#include "integrations/torch/gmr_torch.h"
#include "integrations/torch/shim_internal.h"

namespace gmr_torch {

std::atomic<uint64_t> capture_allocation_count{0};

namespace {

struct allocation {
  gmr_resource *resource;  // the resource that allocated it (frees go back there)
  size_t size;
  gmr_stream stream;       // the allocation's stream
  int device;
  bool mempool;            // allocated by the MemPool entry point
  bool pooled;             // served from a graph pool (graph_pools.cc)
  gmr_torch_mempool_id pool;
  std::vector<gmr_stream> waits;  // recorded streams the resource could not honour
  uint64_t context;               // the history's context number at the allocation (0: none)
};

// Sharded by pointer: each alloc and free takes one shard's mutex briefly.
constexpr size_t kShards = 64;
struct alignas(64) shard {
  std::mutex mutex;
  std::unordered_map<void *, allocation> live;
};
shard shards[kShards];

shard &shard_of(const void *p) {
  uintptr_t k = reinterpret_cast<uintptr_t>(p);
  return shards[((k >> 8) ^ (k >> 20)) % kShards];
}

// Per-device figures behind torch.cuda.memory_stats() (gmr_torch_device_stats)
// and, summed, the shim's counters (gmr_torch_counters). The accumulated ones
// only grow; reset_accumulated_memory_stats moves their base instead, so the
// shim's totals survive it.
enum accumulated { kAllocations, kFrees, kAllocatedBytes, kFreedBytes, kFailures, kRetries,
                   kAccumulatedCount };

struct alignas(64) device_counters {
  std::atomic<uint64_t> live_count{0};
  std::atomic<uint64_t> peak_live_count{0};
  std::atomic<uint64_t> live_bytes{0};
  std::atomic<uint64_t> peak_live_bytes{0};
  std::atomic<uint64_t> total[kAccumulatedCount];  // since the process started
  std::atomic<uint64_t> base[kAccumulatedCount];   // `total` at the last reset
};
device_counters per_device[kMaxDevices];  // static: zero-initialised

void add(int device, accumulated k, uint64_t n) {
  per_device[device].total[k].fetch_add(n, std::memory_order_relaxed);
}

uint64_t since_reset(const device_counters &c, accumulated k) {
  return c.total[k].load(std::memory_order_relaxed) - c.base[k].load(std::memory_order_relaxed);
}

void raise_peak(std::atomic<uint64_t> &peak, uint64_t now) {
  uint64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void count_allocation(int device, size_t size) {
  device_counters &c = per_device[device];
  raise_peak(c.peak_live_count, c.live_count.fetch_add(1, std::memory_order_relaxed) + 1);
  raise_peak(c.peak_live_bytes, c.live_bytes.fetch_add(size, std::memory_order_relaxed) + size);
  add(device, kAllocations, 1);
  add(device, kAllocatedBytes, size);
}

void count_free(int device, size_t size) {
  device_counters &c = per_device[device];
  c.live_count.fetch_sub(1, std::memory_order_relaxed);
  c.live_bytes.fetch_sub(size, std::memory_order_relaxed);
  add(device, kFrees, 1);
  add(device, kFreedBytes, size);
}

std::atomic<uint64_t> refused_free_count{0};
std::atomic<uint64_t> failed_free_count{0};
std::atomic<uint64_t> record_stream_count{0};
std::atomic<uint64_t> record_stream_fallback_count{0};
std::atomic<uint64_t> devices_used{0};  // bit d: the shim allocated on device d
std::atomic<int> torch_device_count{-1};

// Set by an atexit handler registered after the first allocation, so it runs
// before the registry's own (gmr/device_resource.h), which destroys the
// stacks: frees that PyTorch's static destructors make after that are
// dropped (the process is ending) instead of reaching a destroyed stack.
std::atomic<bool> exiting{false};
std::once_flag exit_handler_once;

void mark_exiting() { exiting.store(true, std::memory_order_release); }

std::string pointer_text(const void *p) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(p));
  return buffer;
}

std::string bytes_text(size_t bytes) {
  char buffer[64];
  if (bytes >= (size_t{1} << 30)) {
    std::snprintf(buffer, sizeof buffer, "%zu bytes (%.2f GiB)", bytes, bytes / 1073741824.0);
  } else if (bytes >= (size_t{1} << 20)) {
    std::snprintf(buffer, sizeof buffer, "%zu bytes (%.2f MiB)", bytes, bytes / 1048576.0);
  } else {
    std::snprintf(buffer, sizeof buffer, "%zu bytes", bytes);
  }
  return buffer;
}

// Runs `fn` with `device` current and restores the caller's device.
template <typename Fn>
gmr_status with_device(int device, Fn fn) {
  int saved = -1;
  gmr_status st = gmr_device_get_current(&saved);
  if (st != GMR_OK) return st;
  if (saved != device && (st = gmr_device_set_current(device)) != GMR_OK) return st;
  st = fn();
  if (saved != device) (void)gmr_device_set_current(saved);
  return st;
}

// One attempt: a graph pool, the restore of an expected address, or the
// stack (a segment during a capture in MemPool mode: capture-safe).
gmr_status allocate_once(gmr_resource *stack, size_t size, int device, gmr_stream stream,
                         bool mempool, pool_block *out, gmr_failure *failure) {
  gmr_status st = GMR_OK;
  if (!mempool && address_expected() &&
      allocate_at_expected(device, size, stream, out, failure, &st)) {
    return st;
  }
  if (!mempool && graph_pool_active(device) &&
      allocate_for_graph_pool(device, stack, size, stream, out, failure, &st)) {
    return st;
  }
  out->resource = stack;
  // PyTorch's caching allocator asks for a segment during capture inside a
  // relaxed-mode guard; gmr must not add nodes to the graph.
  bool capturing = false;
  if (mempool) (void)gmr_stream_get_capture_info(stream, &capturing, nullptr);
  if (capturing) {
    capture_allocation_count.fetch_add(1, std::memory_order_relaxed);
    return gmr_resource_allocate_capturing(stack, size, 0, stream, &out->ptr, failure);
  }
  return gmr_resource_allocate_ex(stack, size, 0, stream, &out->ptr, failure);
}

// The device's free bytes for the history's OOM entry (0 when unknown).
size_t device_free_bytes(int device) {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  gmr_status st =
      with_device(device, [&] { return gmr_device_get_memory_info(&free_bytes, &total_bytes); });
  return st == GMR_OK ? free_bytes : 0;
}

gmr_status allocate_recorded(size_t size, int device, gmr_stream stream, bool mempool, void **out,
                             std::string *message, uint64_t context);

// One request, and its entry in the history when that records.
gmr_status allocate(size_t size, int device, gmr_stream stream, bool mempool, void **out,
                    std::string *message) {
  *out = nullptr;
  if (size == 0) return GMR_OK;
  if (device < 0 || device >= kMaxDevices) {
    *message = "gmr: device " + std::to_string(device) + " is out of range";
    return GMR_ERR_INVALID_ARGUMENT;
  }
  uint64_t context = history_on() ? history_context() : 0;
  gmr_status st = allocate_recorded(size, device, stream, mempool, out, message, context);
  if (history_on()) {
    if (st == GMR_OK) {
      history_note(GMR_TORCH_HISTORY_ALLOC, device, *out, size, stream, context, 0);
    } else if (st == GMR_ERR_OUT_OF_MEMORY || st == GMR_ERR_LIMIT_EXCEEDED) {
      history_note(GMR_TORCH_HISTORY_OOM, device, nullptr, size, stream, context,
                   device_free_bytes(device));
    }
  }
  return st;
}

gmr_status allocate_recorded(size_t size, int device, gmr_stream stream, bool mempool, void **out,
                             std::string *message, uint64_t context) {
  gmr_resource *resource = nullptr;
  gmr_spec_error error;
  gmr_status st = gmr_device_resource_get(device, &resource, &error);
  if (st != GMR_OK) {
    add(device, kFailures, 1);
    *message = "gmr: cannot create the memory resource of device " + std::to_string(device) +
               " (" + gmr_status_name(st) + "): " + error.message;
    return st;
  }
  gmr_failure failure = GMR_FAILURE_INIT;  // the shim's own refusals fill only the message
  pool_block block;
  st = allocate_once(resource, size, device, stream, mempool, &block, &failure);
  if (st == GMR_ERR_OUT_OF_MEMORY && graph_pools_have_pending(device)) {
    // PyTorch frees released graph pools' memory before it gives up.
    (void)with_device(device, [&] {
      release_graph_pools(device);
      return GMR_OK;
    });
    add(device, kRetries, 1);
    block = pool_block();
    failure = GMR_FAILURE_INIT;
    st = allocate_once(resource, size, device, stream, mempool, &block, &failure);
  }
  if (st != GMR_OK) {
    add(device, kFailures, 1);
    *message = describe_failure(st, failure, size, device, stream);
    return st;
  }
  *out = block.ptr;
  bool pooled = block.resource != resource;
  try {
    shard &s = shard_of(*out);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.live.emplace(*out, allocation{block.resource, size, stream, device, mempool, pooled,
                                    block.pool, {}, context});
  } catch (const std::bad_alloc &) {
    if (pooled) note_pool_free(device, block.pool, *out);
    (void)gmr_resource_deallocate(block.resource, *out, size, 0, stream);
    *out = nullptr;
    add(device, kFailures, 1);
    *message = "gmr: no host memory to record an allocation of " + bytes_text(size);
    return GMR_ERR_OUT_OF_MEMORY;
  }
  std::call_once(exit_handler_once, [] { (void)std::atexit(mark_exiting); });
  count_allocation(device, size);
  devices_used.fetch_or(uint64_t{1} << device, std::memory_order_relaxed);
  return GMR_OK;
}

void release(void *ptr, size_t size, int device, gmr_stream stream, bool mempool) {
  if (ptr == nullptr || exiting.load(std::memory_order_acquire)) return;
  allocation a;
  {
    shard &s = shard_of(ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.live.find(ptr);
    const char *why = nullptr;
    if (it == s.live.end()) {
      why = "gmr did not allocate it, or freed it already";
    } else if (it->second.size != size || it->second.device != device) {
      why = "its size or device differs from the allocation's";
    } else if (it->second.mempool != mempool) {
      why = "it was allocated by the other mode's entry point";
    }
    if (why != nullptr) {
      refused_free_count.fetch_add(1, std::memory_order_relaxed);
      std::string m = "refused to free " + pointer_text(ptr) + " (" + bytes_text(size) +
                      ", device " + std::to_string(device) + "): " + why;
      if (it != s.live.end()) {
        m += " (allocated as " + bytes_text(it->second.size) + " on device " +
             std::to_string(it->second.device) + ")";
      }
      m += "; nothing was passed to CUDA";
      set_last_error(m);
      log_message(log_kind::refused_free, m);
      return;
    }
    a = std::move(it->second);
    s.live.erase(it);
  }
  (void)stream;  // PyTorch passes the allocation's stream; the record has it
  count_free(a.device, a.size);
  history_note(GMR_TORCH_HISTORY_FREE_REQUESTED, a.device, ptr, a.size, a.stream, a.context, 0);
  if (a.pooled) {
    note_pool_free(a.device, a.pool, ptr);
  } else if (defer_free_in_capture(a.device, ptr, a.size, a.resource, a.stream, a.waits)) {
    return;  // made when the capture has ended (graph_pools.cc records its completion)
  }
  if (!a.waits.empty()) {
    // The memory may be reused by work ordered after the allocation stream:
    // order that stream after the other streams' work so far.
    gmr_status st = wait_for_streams(a.device, a.stream, a.waits);
    if (st != GMR_OK) {
      // Freeing now could hand the block to work that overlaps the other
      // streams: keep it (a leak) rather than risk corrupting memory.
      failed_free_count.fetch_add(1, std::memory_order_relaxed);
      std::string m = "cannot order the free of " + pointer_text(ptr) +
                      " after its recorded streams (" + gmr_status_name(st) +
                      "); the block is kept, not freed";
      set_last_error(m);
      log_message(log_kind::failed_free, m);
      return;
    }
  }
  gmr_status st = gmr_resource_deallocate(a.resource, ptr, a.size, 0, a.stream);
  if (st == GMR_OK) {
    history_note(GMR_TORCH_HISTORY_FREE_COMPLETED, a.device, ptr, a.size, a.stream, a.context, 0);
  } else {
    failed_free_count.fetch_add(1, std::memory_order_relaxed);
    std::string m = "the stack of device " + std::to_string(a.device) + " refused to free " +
                    pointer_text(ptr) + " (" + bytes_text(a.size) + "): " +
                    gmr_status_name(st) + ": " + gmr_status_string(st);
    set_last_error(m);
    log_message(log_kind::failed_free, m);
  }
}

}  // namespace

bool describe_live(void *ptr, size_t *size, gmr_stream *stream) {
  shard &s = shard_of(ptr);
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.live.find(ptr);
  if (it == s.live.end()) return false;
  *size = it->second.size;
  *stream = it->second.stream;
  return true;
}

gmr_status wait_for_streams(int device, gmr_stream stream, const std::vector<gmr_stream> &waits) {
  return with_device(device, [&] {
    gmr_status first = GMR_OK;
    for (gmr_stream w : waits) {
      gmr_status ws = gmr_stream_wait_stream(stream, w);
      if (first == GMR_OK) first = ws;
    }
    return first;
  });
}

std::string describe_failure(gmr_status status, const gmr_failure &failure, size_t size,
                             int device, gmr_stream stream) {
  std::string m = std::string("gmr: ") +
                  (status == GMR_ERR_OUT_OF_MEMORY    ? "out of memory"
                   : status == GMR_ERR_LIMIT_EXCEEDED ? "memory limit reached"
                                                      : "allocation failed") +
                  " (" + gmr_status_name(status) + ") allocating " + bytes_text(size) +
                  " on device " + std::to_string(device) + ", stream " + pointer_text(stream);
  if (failure.where != nullptr) {
    m += "; refused by ";
    m += gmr_resource_get_type_name(failure.where);
  }
  if (failure.message[0] != '\0') {
    m += ": ";
    m += failure.message;
  }
  if (failure.free_info_known) {
    m += "; it held " + bytes_text(failure.free_bytes) + " free, the largest free block " +
         bytes_text(failure.largest_free_block_bytes);
  }
  const char *spec = gmr_device_resource_get_spec(device);
  if (spec != nullptr) {
    m += "; stack: ";
    m += spec;
  }
  if (status == GMR_ERR_CAPTURE_UNSAFE) {
    m += ". This stack cannot take memory from CUDA while a stream captures a CUDA graph "
         "(cudaMallocFromPoolAsync would add a node to the graph): use one whose bottom can, "
         "such as gmr.torch.use(\"vmm\") or \"pool > cuda(kind=device)\", or warm the stack up "
         "before the capture so that it holds the memory already";
  }
  return m;
}

}  // namespace gmr_torch

using namespace gmr_torch;

extern "C" void *gmr_torch_alloc(size_t size, int device, gmr_stream stream) {
  void *p = nullptr;
  std::string message;
  gmr_status st = allocate(size, device, stream, false, &p, &message);
  if (st != GMR_OK) throw_error(st, message);
  return p;
}

extern "C" void gmr_torch_free(void *ptr, size_t size, int device, gmr_stream stream) {
  release(ptr, size, device, stream, false);
}

extern "C" void *gmr_torch_mempool_alloc(size_t size, int device, gmr_stream stream) {
  void *p = nullptr;
  std::string message;
  gmr_status st = allocate(size, device, stream, true, &p, &message);
  if (st != GMR_OK) {
    set_last_error(message);
    return nullptr;
  }
  return p;
}

extern "C" void gmr_torch_mempool_free(void *ptr, size_t size, int device, gmr_stream stream) {
  release(ptr, size, device, stream, true);
}

extern "C" void gmr_torch_init(int device_count) {
  torch_device_count.store(device_count, std::memory_order_relaxed);
}

extern "C" void gmr_torch_reset(void) {
  uint64_t used = devices_used.load(std::memory_order_relaxed);
  for (int d = 0; d < kMaxDevices; ++d) {
    if ((used & (uint64_t{1} << d)) == 0) continue;
    gmr_resource *r = nullptr;
    if (gmr_device_resource_get(d, &r, nullptr) != GMR_OK) continue;
    size_t released = 0;
    gmr_status st = with_device(d, [&] {
      release_graph_pools(d);
      gmr_status trimmed = gmr_resource_trim(r, &released);
      // A pool gives chunks back with stream-ordered frees (cudaFreeAsync
      // below cuda(kind=async)); they reach the driver's pool only when
      // their streams get there. PyTorch's empty_cache synchronises too.
      if (trimmed != GMR_OK || gmr_device_synchronize() != GMR_OK) return trimmed;
      size_t more = 0;
      trimmed = gmr_resource_trim(r, &more);
      released += more;
      return trimmed;
    });
    if (st != GMR_OK) {
      std::string m = "empty_cache: trimming the stack of device " + std::to_string(d) +
                      " failed: " + gmr_status_name(st);
      set_last_error(m);
      log_message(log_kind::reset, m);
    }
  }
}

extern "C" void gmr_torch_set_memory_fraction(double fraction, int device) {
  std::string call = "torch.cuda.set_per_process_memory_fraction(" + std::to_string(fraction) +
                     ", device=" + std::to_string(device) + ")";
  if (!(fraction >= 0.0 && fraction <= 1.0)) {
    throw_error(GMR_ERR_INVALID_ARGUMENT, "gmr: " + call + ": the fraction must be in [0, 1]");
  }
  gmr_resource *r = nullptr;
  gmr_spec_error error;
  gmr_status st = gmr_device_resource_get(device, &r, &error);
  if (st != GMR_OK) throw_error(st, "gmr: " + call + ": " + error.message);
  gmr_limiting_adaptor *limiting =
      gmr_limiting_adaptor_from_resource(gmr_resource_find(r, "limiting_adaptor"));
  if (limiting == nullptr) {
    const char *spec = gmr_device_resource_get_spec(device);
    throw_error(GMR_ERR_UNSUPPORTED,
                "gmr: " + call + ": the stack of device " + std::to_string(device) + " (" +
                    (spec != nullptr ? spec : "set by the program") +
                    ") has no limiting layer; put limiting(...) into the spec");
  }
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  st = with_device(device, [&] { return gmr_device_get_memory_info(&free_bytes, &total_bytes); });
  if (st != GMR_OK) throw_error(st, "gmr: " + call + ": cudaMemGetInfo failed");
  auto limit = static_cast<size_t>(fraction * static_cast<double>(total_bytes));
  st = gmr_limiting_adaptor_set_limit(limiting, limit);
  if (st != GMR_OK) {
    throw_error(st, "gmr: " + call + ": setting the limit to " + bytes_text(limit) + " failed");
  }
}

extern "C" void gmr_torch_record_stream(void *ptr, gmr_stream stream) {
  gmr_resource *resource = nullptr;
  gmr_stream allocation_stream = nullptr;
  int device = -1;
  {
    shard &s = shard_of(ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.live.find(ptr);
    if (it == s.live.end()) {
      std::string m = "record_stream(" + pointer_text(ptr) + ", stream " + pointer_text(stream) +
                      "): gmr did not allocate this pointer (or it was freed); ignored";
      set_last_error(m);
      log_message(log_kind::record_stream, m);
      return;
    }
    resource = it->second.resource;
    allocation_stream = it->second.stream;
    device = it->second.device;
  }
  record_stream_count.fetch_add(1, std::memory_order_relaxed);
  if (stream == allocation_stream) return;  // the free is ordered on it anyway
  gmr_status st = gmr_resource_record_stream(resource, ptr, stream);
  if (st == GMR_OK) return;
  if (st == GMR_ERR_UNSUPPORTED) {
    shard &s = shard_of(ptr);
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.live.find(ptr);
    if (it == s.live.end()) return;  // freed meanwhile by another thread
    auto &waits = it->second.waits;
    for (gmr_stream w : waits) {
      if (w == stream) return;
    }
    try {
      waits.push_back(stream);
      record_stream_fallback_count.fetch_add(1, std::memory_order_relaxed);
      return;
    } catch (const std::bad_alloc &) {
      st = GMR_ERR_OUT_OF_MEMORY;
    }
  }
  std::string m = "record_stream(" + pointer_text(ptr) + ", stream " + pointer_text(stream) +
                  ") on device " + std::to_string(device) + " failed: " + gmr_status_name(st);
  set_last_error(m);
  log_message(log_kind::record_stream, m);
}

extern "C" gmr_status gmr_torch_get_counters(gmr_torch_counters *out) {
  if (out == nullptr || out->size < sizeof(gmr_torch_counters) || out->version == 0) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  out->live_count = out->live_bytes = out->allocation_count = out->failed_allocation_count = 0;
  for (const device_counters &c : per_device) {
    out->live_count += c.live_count.load(std::memory_order_relaxed);
    out->live_bytes += c.live_bytes.load(std::memory_order_relaxed);
    out->allocation_count += c.total[kAllocations].load(std::memory_order_relaxed);
    out->failed_allocation_count += c.total[kFailures].load(std::memory_order_relaxed);
  }
  out->refused_free_count = refused_free_count.load(std::memory_order_relaxed);
  out->failed_free_count = failed_free_count.load(std::memory_order_relaxed);
  out->record_stream_count = record_stream_count.load(std::memory_order_relaxed);
  out->record_stream_fallback_count = record_stream_fallback_count.load(std::memory_order_relaxed);
  out->capture_allocation_count = capture_allocation_count.load(std::memory_order_relaxed);
  return GMR_OK;
}

extern "C" gmr_status gmr_torch_get_device_stats(int device, gmr_torch_device_stats *out) {
  if (out == nullptr || out->size < sizeof(gmr_torch_device_stats) || out->version == 0 ||
      device < 0 || device >= kMaxDevices) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  const device_counters &c = per_device[device];
  out->live_count = c.live_count.load(std::memory_order_relaxed);
  out->peak_live_count = c.peak_live_count.load(std::memory_order_relaxed);
  out->live_bytes = c.live_bytes.load(std::memory_order_relaxed);
  out->peak_live_bytes = c.peak_live_bytes.load(std::memory_order_relaxed);
  out->allocation_count = since_reset(c, kAllocations);
  out->free_count = since_reset(c, kFrees);
  out->allocated_bytes = since_reset(c, kAllocatedBytes);
  out->freed_bytes = since_reset(c, kFreedBytes);
  out->failed_allocation_count = since_reset(c, kFailures);
  out->retry_count = since_reset(c, kRetries);
  return GMR_OK;
}

extern "C" gmr_status gmr_torch_reset_peak_stats(int device) {
  if (device < 0 || device >= kMaxDevices) return GMR_ERR_INVALID_ARGUMENT;
  device_counters &c = per_device[device];
  c.peak_live_count.store(c.live_count.load(std::memory_order_relaxed), std::memory_order_relaxed);
  c.peak_live_bytes.store(c.live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
  return GMR_OK;
}

extern "C" gmr_status gmr_torch_reset_accumulated_stats(int device) {
  if (device < 0 || device >= kMaxDevices) return GMR_ERR_INVALID_ARGUMENT;
  device_counters &c = per_device[device];
  for (int k = 0; k < kAccumulatedCount; ++k) {
    c.base[k].store(c.total[k].load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  return GMR_OK;
}

extern "C" gmr_status gmr_torch_get_live_allocations(int device, uintptr_t *ptrs, size_t *sizes,
                                                    uintptr_t *streams, uint64_t *contexts,
                                                    size_t capacity, size_t *out_count) {
  if (device < 0 || device >= kMaxDevices || out_count == nullptr ||
      (capacity > 0 && (ptrs == nullptr || sizes == nullptr || streams == nullptr ||
                        contexts == nullptr))) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  struct row {
    uintptr_t ptr;
    size_t size;
    uintptr_t stream;
    uint64_t context;
  };
  std::vector<row> rows;
  try {
    for (shard &s : shards) {
      std::lock_guard<std::mutex> lock(s.mutex);
      for (const auto &[ptr, a] : s.live) {
        if (a.device != device) continue;
        rows.push_back(row{reinterpret_cast<uintptr_t>(ptr), a.size,
                           reinterpret_cast<uintptr_t>(a.stream), a.context});
      }
    }
  } catch (const std::bad_alloc &) {
    return GMR_ERR_OUT_OF_MEMORY;
  }
  std::sort(rows.begin(), rows.end(), [](const row &x, const row &y) { return x.ptr < y.ptr; });
  for (size_t i = 0; i < rows.size() && i < capacity; ++i) {
    ptrs[i] = rows[i].ptr;
    sizes[i] = rows[i].size;
    streams[i] = rows[i].stream;
    contexts[i] = rows[i].context;
  }
  *out_count = rows.size();
  return GMR_OK;
}
