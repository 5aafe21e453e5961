/*
 * gmr/nccl.h: deprecated path, kept for one minor release (CHANGELOG.md).
 * The header moved to gmr/nccl/nccl.h, in the optional library
 * libgmr_nccl (Bazel //:gmr_nccl, pkg-config gmr-nccl).
 *
 * Thread-safe: as gmr/nccl/nccl.h says.
 */
#include "gmr/nccl/nccl.h"
