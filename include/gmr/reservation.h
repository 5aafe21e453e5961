/*
 * gmr/reservation.h: deprecated path, kept for one minor release (CHANGELOG.md).
 * The header moved to gmr/tiers/reservation.h, in the optional library
 * libgmr_tiers (Bazel //:gmr_tiers, pkg-config gmr-tiers).
 *
 * Thread-safe: as gmr/tiers/reservation.h says.
 */
#include "gmr/tiers/reservation.h"
