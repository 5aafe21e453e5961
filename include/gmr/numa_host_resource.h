/*
 * gmr/numa_host_resource.h: deprecated path, kept for one minor release (CHANGELOG.md).
 * The header moved to gmr/tiers/numa_host_resource.h, in the optional library
 * libgmr_tiers (Bazel //:gmr_tiers, pkg-config gmr-tiers).
 *
 * Thread-safe: as gmr/tiers/numa_host_resource.h says.
 */
#include "gmr/tiers/numa_host_resource.h"
