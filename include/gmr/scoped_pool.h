/*
 * gmr/scoped_pool.h: deprecated path, kept for one minor release
 * (CHANGELOG.md). The header moved to gmr/scoped/scoped_pool.h, in the
 * optional library libgmr_scoped (Bazel //:gmr_scoped, pkg-config
 * gmr-scoped).
 *
 * Thread-safe: as gmr/scoped/scoped_pool.h says.
 */
#include "gmr/scoped/scoped_pool.h"
