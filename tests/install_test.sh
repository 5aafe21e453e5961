#!/usr/bin/env bash
# tools/install.sh into a temporary prefix, then the README's C example built
# against it the three ways a user would (pkg-config shared, pkg-config
# static, CMake's find_package where cmake is installed), each run on the
# simulation (GMR_CUDA_SIM=1); plus the library's SONAME and exported symbols,
# and the Python package importing from the prefix. Each step is one test case
# in the XML report.
set -uo pipefail
root="${TEST_SRCDIR:?}/${TEST_WORKSPACE:-gmr}"
work="${TEST_TMPDIR:?}/install"
prefix="$work/prefix"
rm -rf "$work"
mkdir -p "$work"

cases=()
failures=0
step() {  # step NAME command...: runs it, records a test case
  local name=$1
  shift
  local log="$work/$name.log"
  if "$@" >"$log" 2>&1; then
    cases+=("<testcase name=\"$name\" classname=\"install_test\"/>")
    echo "PASS $name"
  else
    failures=$((failures + 1))
    local text
    text=$(sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' "$log" | tail -n 40)
    cases+=("<testcase name=\"$name\" classname=\"install_test\"><failure message=\"$name failed\">$text</failure></testcase>")
    echo "FAIL $name"
    cat "$log"
  fi
}
skip() {
  cases+=("<testcase name=\"$1\" classname=\"install_test\"><skipped message=\"$2\"/></testcase>")
  echo "SKIP $1: $2"
}

version_part() {
  sed -n "s/^#define GMR_VERSION_$1 \\([0-9][0-9]*\\).*/\\1/p" "$root/include/gmr/version.h"
}
major=$(version_part MAJOR)
version="$major.$(version_part MINOR).$(version_part PATCH)"

step install "$root/tools/install.sh" --prebuilt "$root" "$prefix"

# Under --config=asan/tsan the libraries are instrumented: programs built
# against them need the same -fsanitize, and python3 the runtime preloaded.
# shellcheck source=/dev/null
source "$root/tests/support/sanitizer_env.sh"
san=$(sanitizer_for "$root/dist/libgmr.so")
san_flags=()
python_env=()
if [ -n "$san" ]; then
  san_flags=("-fsanitize=$san")
  python_env=("LD_PRELOAD=$(sanitizer_preload "$san")"
              "ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1")
fi

layout() {
  for f in include/gmr/gmr.h include/gmr/device_resource.h "lib/libgmr.so.$version" \
           "lib/libgmr.so.$major" lib/libgmr.so lib/libgmr.a lib/libgmr_torch.so \
           lib/pkgconfig/gmr.pc lib/pkgconfig/gmr-static.pc lib/cmake/gmr/gmrConfig.cmake \
           lib/cmake/gmr/gmrConfigVersion.cmake lib/python/gmr/__init__.py \
           lib/python/gmr/torch_shim/integrations/torch/torch_allocator.cc; do
    [ -e "$prefix/$f" ] || { echo "missing: $f"; return 1; }
  done
}
step layout layout

# (Output is captured before grep -q: with pipefail, grep -q closing the pipe
# early would fail the producer with SIGPIPE.)
soname() {
  local dynamic
  dynamic=$(readelf -d "$prefix/lib/libgmr.so.$version")
  grep -q "SONAME.*\[libgmr.so.$major\]" <<<"$dynamic"
}
step soname soname

# Exactly the functions the public headers declare with GMR_API are exported:
# no gmr__ internals, no CUDA runtime symbols.
exports() {
  python3 - "$root/include/gmr" "$prefix/lib/libgmr.so" <<'PY'
import glob, re, subprocess, sys
declared = set()
for h in glob.glob(sys.argv[1] + "/*.h"):
    text = open(h).read()
    declared |= {m.group(2) for m in re.finditer(r"GMR_API\b([^;{}]*?)\b(gmr_\w+)\s*\(", text, re.S)}
out = subprocess.run(["nm", "-D", "--defined-only", sys.argv[2]], capture_output=True, text=True,
                     check=True).stdout
exported = {line.split()[-1] for line in out.splitlines() if line.strip()}
extra, missing = sorted(exported - declared), sorted(declared - exported)
print("exported:", len(exported), "declared:", len(declared))
if extra: print("exported but not declared with GMR_API:", extra)
if missing: print("declared with GMR_API but not exported:", missing)
sys.exit(1 if extra or missing or not declared else 0)
PY
}
step exports exports

# The README's example, as a user copies it.
awk '/install_test.sh builds this example/ {grab = 1; next}
     grab && /^```c/ {inside = 1; next}
     inside && /^```/ {exit}
     inside {print}' "$root/README.md" >"$work/example.c"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"

pkg_config_shared() {
  [ -s "$work/example.c" ] || { echo "no example found in README.md"; return 1; }
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" "$work/example.c" \
    $(pkg-config --cflags --libs gmr) -o "$work/example_shared" || return 1
  local linked
  linked=$(ldd "$work/example_shared")
  echo "$linked"
  grep -q "libgmr.so.$major => $prefix/lib/" <<<"$linked" &&
    GMR_CUDA_SIM=1 "$work/example_shared"
}
step readme_example_pkg_config_shared pkg_config_shared

pkg_config_static() {
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" "$work/example.c" \
    $(pkg-config --cflags --libs gmr-static) -o "$work/example_static" || return 1
  local linked
  linked=$(ldd "$work/example_static")
  ! grep -q libgmr <<<"$linked" &&
    GMR_CUDA_SIM=1 "$work/example_static"
}
step readme_example_pkg_config_static pkg_config_static

cmake_build() {
  mkdir -p "$work/cmake" &&
    cp "$work/example.c" "$work/cmake/" &&
    cat >"$work/cmake/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(example C)
find_package(gmr 0.1 REQUIRED)
add_executable(example example.c)
target_link_libraries(example gmr::gmr)
CMAKE
  cmake -S "$work/cmake" -B "$work/cmake/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="${san_flags[*]}" &&
    cmake --build "$work/cmake/build" &&
    GMR_CUDA_SIM=1 "$work/cmake/build/example"
}
if command -v cmake >/dev/null; then
  step readme_example_cmake cmake_build
else
  skip readme_example_cmake "cmake is not installed"
fi

python_from_prefix() {
  env "${python_env[@]}" PYTHONPATH="$prefix/lib/python" GMR_CUDA_SIM=1 python3 -c "
import gmr
assert gmr.version() == '$version', gmr.version()
assert gmr.simulated()
import gmr._lib as l
assert l.lib_path().startswith('$prefix/lib/'), l.lib_path()
assert l.torch_lib_path().startswith('$prefix/lib/'), l.torch_lib_path()
print(gmr.stack_stats(0)['layers'])
"
}
if command -v python3 >/dev/null; then
  step python_from_prefix python_from_prefix
else
  skip python_from_prefix "python3 is not installed"
fi

if [ -n "${XML_OUTPUT_FILE:-}" ]; then
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuites><testsuite name=\"install_test\" tests=\"${#cases[@]}\" failures=\"$failures\">"
    printf '%s\n' "${cases[@]}"
    echo "</testsuite></testsuites>"
  } >"$XML_OUTPUT_FILE"
fi
[ "$failures" -eq 0 ]
