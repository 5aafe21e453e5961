/*
 * gmr/symmetric_resource.h: deprecated path, kept for one minor release (CHANGELOG.md).
 * The header moved to gmr/nccl/symmetric_resource.h, in the optional library
 * libgmr_nccl (Bazel //:gmr_nccl, pkg-config gmr-nccl).
 *
 * Thread-safe: as gmr/nccl/symmetric_resource.h says.
 */
#include "gmr/nccl/symmetric_resource.h"
