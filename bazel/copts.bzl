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

# Tests use gtest macros, which trip -Wpedantic's variadic-macro check on
# zero-argument TEST_P suites; everything else stays on.
GMR_TEST_COPTS = GMR_COPTS
