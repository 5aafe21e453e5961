/*
 * gmr/stream_pool.h: deprecated path, kept for one minor release (CHANGELOG.md).
 * The header moved to gmr/tiers/stream_pool.h, in the optional library
 * libgmr_tiers (Bazel //:gmr_tiers, pkg-config gmr-tiers).
 *
 * Thread-safe: as gmr/tiers/stream_pool.h says.
 */
#include "gmr/tiers/stream_pool.h"
