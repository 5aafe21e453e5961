"""Compiler options shared by every gmr target."""

# -std is set per language in .bazelrc (--conlyopt / --cxxopt), so one list
# serves C libraries and the C++ tests alike.
GMR_COPTS = [
    "-Wall",
    "-Wextra",
    "-Wpedantic",
    "-Werror",
]

# C sources only: prototypes must name their parameters' types.
GMR_C_COPTS = GMR_COPTS + ["-Wstrict-prototypes"]

# The libraries' own sources (core, util, stream_ordered, resources, adaptors,
# stack, and the optional libraries): every symbol is hidden unless its
# declaration says GMR_API (the public API) or GMR_EXTENSION_API (libgmr's
# extension interface, core/extension.h), so a shared library exports those
# and nothing else.
GMR_LIB_COPTS = GMR_C_COPTS + ["-fvisibility=hidden"]

# Tests use gtest macros, which trip -Wpedantic's variadic-macro check on
# zero-argument TEST_P suites; everything else stays on.
GMR_TEST_COPTS = GMR_COPTS
