// integrations/torch/history.cc: the allocation history of the shim
// (gmr_torch_record_history and friends in gmr_torch.h): a ring of the most
// recent entries under one mutex, filled by torch_allocator.cc (allocations,
// frees, failures) and graph_pools.cc (frees made when a capture ends).
//
// Recording is off by default; the entry points then look at one atomic
// flag. While on, each entry takes the ring's mutex briefly (PyTorch's
// caching allocator records under its own mutex too). The context function
// is called outside every lock, so it may run Python (gmr.torch's frames)
// and even free through the shim.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <new>
#include <vector>

#include "integrations/torch/gmr_torch.h"
#include "integrations/torch/shim_internal.h"

namespace gmr_torch {
namespace {

std::atomic<bool> recording{false};
std::atomic<gmr_torch_context_fn> context_fn{nullptr};

// The ring: `entries` grows up to `capacity`, then `next` is the oldest
// entry, overwritten by the next one.
std::mutex ring_mutex;
std::vector<gmr_torch_history_entry> entries;
size_t capacity = 0;
size_t next = 0;
uint64_t dropped = 0;

uint64_t now_us() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
      duration_cast<microseconds>(system_clock::now().time_since_epoch()).count());
}

// The entries oldest first (pre: ring_mutex held).
std::vector<gmr_torch_history_entry> in_order() {
  std::vector<gmr_torch_history_entry> out;
  out.reserve(entries.size());
  out.insert(out.end(), entries.begin() + static_cast<std::ptrdiff_t>(next), entries.end());
  out.insert(out.end(), entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(next));
  return out;
}

}  // namespace

bool history_on() { return recording.load(std::memory_order_relaxed); }

uint64_t history_context() {
  gmr_torch_context_fn fn = context_fn.load(std::memory_order_acquire);
  return fn != nullptr && history_on() ? fn() : 0;
}

void history_note(gmr_torch_history_action action, int device, const void *addr, size_t size,
                  gmr_stream stream, uint64_t context, size_t device_free) {
  if (!history_on()) return;
  gmr_torch_history_entry e;
  e.time_us = now_us();
  e.addr = reinterpret_cast<uintptr_t>(addr);
  e.size = size;
  e.stream = reinterpret_cast<uintptr_t>(stream);
  e.context = context;
  e.device_free = device_free;
  e.device = device;
  e.action = action;
  std::lock_guard<std::mutex> lock(ring_mutex);
  if (capacity == 0) return;  // stopped and cleared meanwhile
  if (entries.size() < capacity && next == 0) {
    try {
      entries.push_back(e);
      return;
    } catch (const std::bad_alloc &) {
      // No host memory to grow the ring: overwrite the oldest instead, or
      // lose this one when there is none.
      if (entries.empty()) {
        dropped++;
        return;
      }
    }
  }
  entries[next] = e;
  next = (next + 1) % entries.size();
  dropped++;
}

}  // namespace gmr_torch

using namespace gmr_torch;

extern "C" gmr_status gmr_torch_record_history(int enabled, size_t max_entries,
                                               gmr_torch_context_fn context) {
  std::lock_guard<std::mutex> lock(ring_mutex);
  if (!enabled) {
    recording.store(false, std::memory_order_relaxed);
    context_fn.store(nullptr, std::memory_order_release);
    return GMR_OK;
  }
  if (max_entries == 0 || max_entries > GMR_TORCH_HISTORY_MAX_ENTRIES) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  if (max_entries != capacity) {
    std::vector<gmr_torch_history_entry> kept = in_order();
    if (kept.size() > max_entries) {
      dropped += kept.size() - max_entries;
      kept.erase(kept.begin(), kept.end() - static_cast<std::ptrdiff_t>(max_entries));
    }
    entries.swap(kept);
    next = 0;  // in_order() put the oldest first
    capacity = max_entries;
  }
  context_fn.store(context, std::memory_order_release);
  recording.store(true, std::memory_order_relaxed);
  return GMR_OK;
}

extern "C" gmr_status gmr_torch_get_history(gmr_torch_history_entry *out, size_t capacity_out,
                                            size_t *out_count, uint64_t *out_dropped) {
  if (out_count == nullptr || (out == nullptr && capacity_out > 0)) {
    return GMR_ERR_INVALID_ARGUMENT;
  }
  std::lock_guard<std::mutex> lock(ring_mutex);
  size_t n = entries.size();
  size_t first = next;
  for (size_t i = 0; i < n && i < capacity_out; ++i) out[i] = entries[(first + i) % n];
  *out_count = n;
  if (out_dropped != nullptr) *out_dropped = dropped;
  return GMR_OK;
}

extern "C" gmr_status gmr_torch_clear_history(void) {
  std::lock_guard<std::mutex> lock(ring_mutex);
  std::vector<gmr_torch_history_entry>().swap(entries);
  next = 0;
  dropped = 0;
  if (!recording.load(std::memory_order_relaxed)) capacity = 0;
  return GMR_OK;
}
