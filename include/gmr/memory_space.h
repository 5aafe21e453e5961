/*
 * gmr/memory_space.h: deprecated path, kept for one minor release (CHANGELOG.md).
 * The header moved to gmr/tiers/memory_space.h, in the optional library
 * libgmr_tiers (Bazel //:gmr_tiers, pkg-config gmr-tiers).
 *
 * Thread-safe: as gmr/tiers/memory_space.h says.
 */
#include "gmr/tiers/memory_space.h"
