/*
 * gmr/chunk_listener_adaptor.h: deprecated path, kept for one minor release (CHANGELOG.md).
 * The header moved to gmr/nccl/chunk_listener_adaptor.h, in the optional library
 * libgmr_nccl (Bazel //:gmr_nccl, pkg-config gmr-nccl).
 *
 * Thread-safe: as gmr/nccl/chunk_listener_adaptor.h says.
 */
#include "gmr/nccl/chunk_listener_adaptor.h"
