/*
 * gmr/tier_manager.h: deprecated path, kept for one minor release (CHANGELOG.md).
 * The header moved to gmr/tiers/tier_manager.h, in the optional library
 * libgmr_tiers (Bazel //:gmr_tiers, pkg-config gmr-tiers).
 *
 * Thread-safe: as gmr/tiers/tier_manager.h says.
 */
#include "gmr/tiers/tier_manager.h"
