// integrations/torch/storages.cc: giving storages their owning data pointer
// back, and taking it away, when a checkpoint of a graph pool is restored
// (gmr_torch_storage_adopt / _disown, gmr_torch.h).
//
// CUDA graph trees keep the outputs of replayed graphs as storages that do
// not own their memory; when a tree goes back to an earlier state, PyTorch's
// setCheckpointPoolState binding (torch/csrc/cuda/Module.cpp) makes the
// storages of blocks allocated again owners, with the current allocator's
// deleter, and takes the deleter from stale ones. Python cannot set a
// storage's DataPtr, so these few lines are C++ against PyTorch's headers
// (the build of gmr.torch.build_shim(); without them they report -2).
#include <cstdint>

#include "integrations/torch/gmr_torch.h"

#ifdef GMR_TORCH_WITH_C10
#include <c10/core/StorageImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

extern "C" int gmr_torch_storage_adopt(int64_t storage_impl) {
#ifdef GMR_TORCH_WITH_C10
  auto *storage = reinterpret_cast<c10::StorageImpl *>(storage_impl);
  if (storage->data_ptr().get_context() != nullptr) return -1;
  void *ptr = storage->mutable_data_ptr().get();
  c10::Device device = storage->data_ptr().device();
  auto *allocator = c10::cuda::CUDACachingAllocator::get();
  storage->set_data_ptr_noswap(c10::DataPtr(ptr, ptr, allocator->raw_deleter(), device));
  return 0;
#else
  (void)storage_impl;
  return -2;
#endif
}

extern "C" int gmr_torch_storage_disown(int64_t storage_impl) {
#ifdef GMR_TORCH_WITH_C10
  auto *storage = reinterpret_cast<c10::StorageImpl *>(storage_impl);
  auto *allocator = c10::cuda::CUDACachingAllocator::get();
  bool swapped = storage->mutable_data_ptr().compare_exchange_deleter(
      allocator->raw_deleter(), c10::detail::deleteNothing);
  return swapped ? 0 : -1;
#else
  (void)storage_impl;
  return -2;
#endif
}
