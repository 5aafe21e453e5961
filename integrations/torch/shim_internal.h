// integrations/torch/shim_internal.h (internal): what the files of the torch
// shim share. C++17; nothing here is exported from libgmr_torch.so.
#ifndef GMR_INTEGRATIONS_TORCH_SHIM_INTERNAL_H_
#define GMR_INTEGRATIONS_TORCH_SHIM_INTERNAL_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "gmr/resource.h"
#include "gmr/status.h"

namespace gmr_torch {

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

// True while a begin_allocate_to_pool of `device` is open (one atomic load).
bool graph_pool_active(int device);

// If `stream` belongs to an open graph pool of `device` and is capturing,
// allocate for that pool and return true with *status set; otherwise return
// false and touch nothing.
bool allocate_for_graph_pool(int device, gmr_resource *resource, size_t size, gmr_stream stream,
                             void **out, gmr_failure *failure, gmr_status *status);

// torch_allocator.cc --------------------------------------------------------

extern std::atomic<uint64_t> capture_allocation_count;

// A readable sentence for a failed request.
std::string describe_failure(gmr_status status, const gmr_failure &failure, size_t size,
                             int device, gmr_stream stream);

}  // namespace gmr_torch

#endif  // GMR_INTEGRATIONS_TORCH_SHIM_INTERNAL_H_
