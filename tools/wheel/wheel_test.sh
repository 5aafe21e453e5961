#!/usr/bin/env bash
# The wheel, as a user gets it: tools/wheel/build.sh builds it from the
# libraries Bazel built (the runfiles are laid out as bazel-bin), pip's PEP 517
# path through pyproject.toml builds the same bytes, and a fresh virtual
# environment installs it offline (pip install --no-index) and imports it
# from outside the source tree: gmr.version() is the version of
# include/gmr/version.h and comes from the wheel's own libgmr.so, the optional
# libraries and the torch shim's sources are found inside the wheel, and pip
# uninstalls every file. Each step is one test case in the XML report.
#
# The wheel carries the production libgmr.so, which has no CUDA simulation
# (it ignores GMR_CUDA_SIM) and sees no GPU here; the last step runs the
# installed package on the simulation by naming the test library
# libgmr_testing.so with GMR_LIBRARY, the documented override.
set -uo pipefail
root="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-gmr}"
work="${TEST_TMPDIR:?}/wheel"
rm -rf "$work"
mkdir -p "$work"
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
unset PYTHONPATH GMR_LIBRARY GMR_LIBRARY_DIR GMR_TORCH_LIBRARY GMR_CUDA_SIM GMR_STACK

cases=()
failures=0
step() {  # step NAME command...: runs it, records a test case
  local name=$1
  shift
  local log="$work/$name.log"
  if "$@" >"$log" 2>&1; then
    cases+=("<testcase name=\"$name\" classname=\"wheel_test\"/>")
    echo "PASS $name"
  else
    failures=$((failures + 1))
    local text
    text=$(sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' "$log" | tail -n 40)
    cases+=("<testcase name=\"$name\" classname=\"wheel_test\"><failure message=\"$name failed\">$text</failure></testcase>")
    echo "FAIL $name"
    cat "$log"
  fi
}

version_part() {
  sed -n "s/^#define GMR_VERSION_$1 \\([0-9][0-9]*\\).*/\\1/p" "$root/include/gmr/version.h"
}
version="$(version_part MAJOR).$(version_part MINOR).$(version_part PATCH)"

# Under --config=asan/tsan the libraries are instrumented: python needs the
# sanitizer's runtime first.
# shellcheck source=/dev/null
source "$root/tests/support/sanitizer_env.sh"
san=$(sanitizer_for "$root/dist/libgmr.so")
python_env=()
if [ -n "$san" ]; then
  python_env=("LD_PRELOAD=$(sanitizer_preload "$san")" "ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1")
fi
venv="$work/venv"
py() { (cd "$work" && env "${python_env[@]}" "$venv/bin/python" "$@"); }

build() {
  "$root/tools/wheel/build.sh" --prebuilt "$root" --out "$work/dist" || return 1
  local found=("$work"/dist/gmr-*.whl)
  [ "${#found[@]}" -eq 1 ] || { echo "expected one wheel: ${found[*]}"; return 1; }
  [[ "$(basename "${found[0]}")" == gmr-"$version"-py3-none-linux_*.whl ]] ||
    { echo "unexpected name ${found[0]} (version $version)"; return 1; }
}
step build build
wheel=$(ls "$work"/dist/gmr-*.whl 2>/dev/null | head -n 1)

# What is missing is named, and no wheel is left behind.
refuses() {  # refuses EXPECTED-TEXT make_wheel-arguments...
  local expected=$1
  shift
  local text
  if text=$(python3 "$root/tools/wheel/make_wheel.py" --out "$work/refused" "$@" 2>&1); then
    echo "make_wheel $* succeeded"; return 1
  fi
  echo "$text"
  grep -qF "$expected" <<<"$text" || { echo "no '$expected' in the message"; return 1; }
  [ -z "$(ls "$work/refused" 2>/dev/null)" ] || { echo "left: $(ls "$work/refused")"; return 1; }
}
mkdir -p "$work/empty"
step refuses_missing_libraries refuses "missing: $work/empty/dist/libgmr.so" --prebuilt "$work/empty"
step refuses_missing_version refuses "no version header" --prebuilt "$root" --root "$work/empty"

fresh_venv() {
  python3 -m venv "$venv" ||
    { echo "python3 -m venv failed: install python3-venv (tools/setup.sh does)"; return 1; }
  [ ! -e "$venv/lib/python3"*/site-packages/gmr ]
}
step fresh_venv fresh_venv

# The standard way (pyproject.toml, the in-tree backend) gives the same bytes.
pep517() {
  (cd "$root" && GMR_PREBUILT="$root" "$venv/bin/python" -m pip wheel --no-build-isolation \
    --no-index --no-deps -w "$work/pep517" .) || return 1
  cmp "$wheel" "$work/pep517/$(basename "$wheel")"
}
step pep517_same_wheel pep517

step pip_install "$venv/bin/pip" install --no-index "$wheel"

import_version() {
  py - "$version" "$venv" <<'PY'
import os, sys
import gmr
from gmr import _lib
expected, venv = sys.argv[1], os.path.realpath(sys.argv[2])
print(gmr.version())
assert gmr.version() == expected, (gmr.version(), expected)
package = os.path.dirname(os.path.realpath(gmr.__file__))
assert package.startswith(venv), package
assert os.path.realpath(_lib.lib_path()) == os.path.join(package, "lib", "libgmr.so"), _lib.lib_path()
assert not gmr.simulated()
import importlib.metadata
assert importlib.metadata.version("gmr") == expected
PY
}
step import_version import_version

bundled_pieces() {
  py <<'PY'
import os
import gmr, gmr.cuda_core, gmr.cupy, gmr.numba, gmr.torch   # no framework needed to import
from gmr import _lib
lib = os.path.join(os.path.dirname(os.path.realpath(gmr.__file__)), "lib")
try:
    gmr.check_spec("pool > cumem")   # libgmr loads no library by itself
    raise AssertionError("cumem known before libgmr_nccl was loaded")
except gmr.SpecError as e:
    assert "libgmr_nccl" in str(e), e
for name in ("tiers", "scoped", "nccl"):
    handle = _lib.optional_lib(name)
    assert os.path.realpath(handle._name) == os.path.join(lib, "libgmr_%s.so" % name), handle._name
gmr.load_library("nccl")
gmr.check_spec("pool > cumem")   # libgmr_nccl registered its components as it loaded
assert os.path.realpath(_lib.torch_lib_path()) == os.path.join(lib, "libgmr_torch.so")
sources, include = gmr.torch._source_root()   # what gmr.torch.use() builds the shim from
assert os.path.isfile(os.path.join(sources, "integrations", "torch", "torch_allocator.cc"))
assert os.path.isfile(os.path.join(include, "gmr", "device_resource.h")), include
assert not os.path.exists(os.path.join(include, "gmr", "sim"))
print("bundled:", sorted(os.listdir(lib)))
PY
}
step bundled_pieces bundled_pieces

on_the_simulation() {
  GMR_LIBRARY="$root/dist/libgmr_testing.so" GMR_CUDA_SIM="devices=2,memory=1GiB" py <<'PY'
import gmr
assert gmr.simulated() and gmr.device_count() == 2
gmr.set_device_spec("tracking > pool > cuda(kind=async)")
p = gmr.allocate(1, 1 << 20)
assert gmr.stack_stats(1)["layers"][1]["bytes"]["current"] == 1 << 20
gmr.deallocate(1, p, 1 << 20)
gmr.release_all()
print("allocated and freed on the simulation through the installed package")
PY
}
step on_the_simulation on_the_simulation

uninstall() {
  "$venv/bin/pip" uninstall -y gmr || return 1
  local left
  left=$(ls "$venv"/lib/python3*/site-packages | grep '^gmr')
  [ -z "$left" ] || { echo "left after uninstall: $left"; return 1; }
}
step uninstall uninstall

readme_shows_it() {
  grep -F 'tools/wheel/build.sh' "$root/README.md" &&
    grep -F 'pip install --no-index dist/gmr-*.whl' "$root/README.md"
}
step readme_shows_it readme_shows_it

if [ -n "${XML_OUTPUT_FILE:-}" ]; then
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuites><testsuite name=\"wheel_test\" tests=\"${#cases[@]}\" failures=\"$failures\">"
    printf '%s\n' "${cases[@]}"
    echo "</testsuite></testsuites>"
  } >"$XML_OUTPUT_FILE"
fi
[ "$failures" -eq 0 ]
