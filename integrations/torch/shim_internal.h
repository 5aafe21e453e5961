// integrations/torch/shim_internal.h (internal): what the files of the torch
// shim share. C++17; nothing here is exported from libgmr_torch.so.
#ifndef GMR_INTEGRATIONS_TORCH_SHIM_INTERNAL_H_
#define GMR_INTEGRATIONS_TORCH_SHIM_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "gmr/resource.h"
#include "gmr/status.h"
#include "integrations/torch/gmr_torch.h"

namespace gmr_torch {

constexpr int kMaxDevices = 64;

// errors.cc -----------------------------------------------------------------

// Throw the exception PyTorch turns into the right Python error:
// torch.cuda.OutOfMemoryError for OUT_OF_MEMORY and LIMIT_EXCEEDED,
// RuntimeError for anything else (see gmr_torch.h).
[[noreturn]] void throw_error(gmr_status status, const std::string &message);

// What the calling thread's last failure was (gmr_torch_get_last_error).
void set_last_error(const std::string &message);

// The kinds of message logged on stderr, each rate-limited on its own.
enum class log_kind { refused_free, failed_free, record_stream, hook, reset, count };

// "gmr.torch: <message>" on stderr, for the first 16 of `kind`; then one line
// saying the rest are only counted.
void log_message(log_kind kind, const std::string &message);

// graph_pools.cc ------------------------------------------------------------

// A block served from a graph pool: where it is and who frees it.
struct pool_block {
  void *ptr = nullptr;
  gmr_resource *resource = nullptr;  // the device's graph pool arena
  gmr_torch_mempool_id pool;
};

// True while a begin_allocate_to_pool of `device` is open (one atomic load).
bool graph_pool_active(int device);

// If a begun pool of `device` accepts `stream` (its filter; capturing or
// not), allocate from it over `stack` and return true with *status set;
// otherwise return false and touch nothing.
bool allocate_for_graph_pool(int device, gmr_resource *stack, size_t size, gmr_stream stream,
                             pool_block *out, gmr_failure *failure, gmr_status *status);

// True when the calling thread asked for an exact address
// (gmr_torch_expect_address) that its next allocation must take.
bool address_expected();

// Serve the calling thread's expected address (restoring a checkpoint of a
// pool): true with *status set when one was expected (the expectation is
// used up either way), false otherwise.
bool allocate_at_expected(int device, size_t size, gmr_stream stream, pool_block *out,
                          gmr_failure *failure, gmr_status *status);

// The pool block at `ptr` was freed: forget it in the pool's live set.
void note_pool_free(int device, const gmr_torch_mempool_id &pool, void *ptr);

// While a pool routes a capture on `device`, a free of an ordinary block on
// a stream that captures waits for the end of the routing (the graph may
// still use the memory, and the stack must not add nodes to the capture).
// True when it was deferred; `waits` are streams to order before the free.
bool defer_free_in_capture(int device, void *ptr, size_t size, gmr_resource *resource,
                           gmr_stream stream, const std::vector<gmr_stream> &waits);

// A safe point of `device` (empty_cache, an out-of-memory retry), with the
// device current: when no pool of it routes, frees deferred by captures are
// made, the device is synchronised, the memories of released pools are
// released and the graph pool arena's idle chunks go back to the stack.
void release_graph_pools(int device);

// True when released pools of `device` still hold memory that a safe point
// would give back.
bool graph_pools_have_pending(int device);

// chunk_streams.cc ----------------------------------------------------------

// A layer over `upstream` that frees each allocation on the stream it was
// allocated on, whatever stream the free names (the graph pool arena's
// chunks; a stack may check the stream of a free). NULL for no host memory.
// Destroyed with gmr_resource_destroy (GMR_ERR_BUSY while allocations live).
gmr_resource *chunk_streams_create(gmr_resource *upstream);

// history.cc ----------------------------------------------------------------

// True while the allocation history records (one relaxed atomic load).
bool history_on();

// The context function's number for an allocation being made now (0 when
// not recording or there is none). Call it with no lock held: it may run
// Python and free through the shim.
uint64_t history_context();

// Append an entry to the history when it records (nothing otherwise);
// never throws.
void history_note(gmr_torch_history_action action, int device, const void *addr, size_t size,
                  gmr_stream stream, uint64_t context, size_t device_free);

// torch_allocator.cc --------------------------------------------------------

extern std::atomic<uint64_t> capture_allocation_count;

// The size and stream of the live allocation at `ptr` (false if none).
bool describe_live(void *ptr, size_t *size, gmr_stream *stream);

// Order `stream` after each of `waits` (recorded streams the stack could not
// honour), with the allocation's device current.
gmr_status wait_for_streams(int device, gmr_stream stream, const std::vector<gmr_stream> &waits);

// A readable sentence for a failed request.
std::string describe_failure(gmr_status status, const gmr_failure &failure, size_t size,
                             int device, gmr_stream stream);

}  // namespace gmr_torch

#endif  // GMR_INTEGRATIONS_TORCH_SHIM_INTERNAL_H_
