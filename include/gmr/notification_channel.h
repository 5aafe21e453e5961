/*
 * gmr/notification_channel.h: deprecated path, kept for one minor release (CHANGELOG.md).
 * The header moved to gmr/tiers/notification_channel.h, in the optional library
 * libgmr_tiers (Bazel //:gmr_tiers, pkg-config gmr-tiers).
 *
 * Thread-safe: as gmr/tiers/notification_channel.h says.
 */
#include "gmr/tiers/notification_channel.h"
