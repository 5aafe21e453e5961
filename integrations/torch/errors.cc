// integrations/torch/errors.cc: how the shim reports failures: exceptions
// PyTorch maps to Python errors, the per-thread last message, and a
// rate-limited log on stderr.
//
// With GMR_TORCH_WITH_C10 (the build against PyTorch's headers,
// tools/frameworks/build_torch_shim.sh) the exceptions are c10's own, which
// PyTorch's Python bindings map to torch.cuda.OutOfMemoryError and
// RuntimeError (torch/csrc/Exceptions.h). Without, they are
// std::runtime_error, which PyTorch reports as RuntimeError; that build is
// what CI tests on the simulation, where no PyTorch is installed.
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "integrations/torch/gmr_torch.h"
#include "integrations/torch/shim_internal.h"

#ifdef GMR_TORCH_WITH_C10
#include <c10/util/Exception.h>
#endif

namespace gmr_torch {
namespace {

thread_local std::string last_error;

constexpr int kLoggedPerKind = 16;
std::atomic<int> logged[static_cast<int>(log_kind::count)];

}  // namespace

void set_last_error(const std::string &message) { last_error = message; }

[[noreturn]] void throw_error(gmr_status status, const std::string &message) {
  set_last_error(message);
  bool out_of_memory = status == GMR_ERR_OUT_OF_MEMORY || status == GMR_ERR_LIMIT_EXCEEDED;
#ifdef GMR_TORCH_WITH_C10
  if (out_of_memory) TORCH_CHECK_WITH(OutOfMemoryError, false, message);
  TORCH_CHECK(false, message);
#endif
  (void)out_of_memory;
  throw std::runtime_error(message);
}

void log_message(log_kind kind, const std::string &message) {
  int n = logged[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
  if (n < kLoggedPerKind) {
    std::fprintf(stderr, "gmr.torch: %s\n", message.c_str());
  } else if (n == kLoggedPerKind) {
    std::fprintf(stderr,
                 "gmr.torch: %s\ngmr.torch: (further messages of this kind are counted in "
                 "gmr.torch.stats(), not logged)\n",
                 message.c_str());
  }
}

}  // namespace gmr_torch

extern "C" size_t gmr_torch_get_last_error(char *buffer, size_t buffer_bytes) {
  const std::string &m = gmr_torch::last_error;
  if (buffer != nullptr && buffer_bytes > 0) {
    size_t n = m.size() < buffer_bytes - 1 ? m.size() : buffer_bytes - 1;
    m.copy(buffer, n);
    buffer[n] = '\0';
  }
  return m.size();
}

extern "C" bool gmr_torch_raises_torch_errors(void) {
#ifdef GMR_TORCH_WITH_C10
  return true;
#else
  return false;
#endif
}
