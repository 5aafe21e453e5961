#!/usr/bin/env bash
# Builds gmr's wheel into dist/ (the project command; offline, standard library only):
#
#   tools/wheel/build.sh                         # bazel build -c opt, then dist/gmr-X.Y.Z-py3-none-<platform>.whl
#   tools/wheel/build.sh --prebuilt DIR          # libraries already built, in a folder laid out as bazel-bin
#   tools/wheel/build.sh --out DIR               # the wheel elsewhere
#
# Then, in any virtual environment (no network needed):
#   pip install --no-index dist/gmr-*.whl
#   python -c "import gmr; print(gmr.version())"
#
# What the wheel holds, and the version's one source (include/gmr/version.h):
# tools/wheel/make_wheel.py. `pip wheel --no-build-isolation --no-index .` builds
# the same wheel through pyproject.toml.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
command -v python3 >/dev/null || { echo "build.sh: python3 is not installed (tools/setup.sh installs it)" >&2; exit 1; }
exec python3 "$root/tools/wheel/make_wheel.py" "$@"
