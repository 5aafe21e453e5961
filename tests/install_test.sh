#!/usr/bin/env bash
# tools/install.sh into a temporary prefix, then the README's C example built
# against it the three ways a user would (pkg-config shared, pkg-config
# static, CMake's find_package where cmake is installed); plus the libraries'
# SONAMEs and exported symbols, an optional library (tiers) through
# pkg-config and CMake components, and the Python package importing from the
# prefix. Each step is one test case in the XML report.
#
# The installed libraries hold no CUDA simulation (GMR_CUDA_SIM changes
# nothing in them), and this machine has no GPU: the dynamically linked
# examples run with the test build libgmr_testing.so (same SONAME, the same
# library plus the simulation) put first on the loader's path; the static
# example must fail cleanly at its first CUDA call.
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
minor=$(version_part MINOR)
version="$major.$minor.$(version_part PATCH)"
# The SONAME's version: 0.<minor> while the major is 0 (CHANGELOG.md).
if [ "$major" = 0 ]; then abi="0.$minor"; else abi="$major"; fi

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
           "lib/libgmr.so.$abi" lib/libgmr.so lib/libgmr.a lib/libgmr_torch.so \
           include/gmr/tiers/tier_manager.h include/gmr/scoped/scoped_pool.h \
           "lib/libgmr_tiers.so.$version" lib/libgmr_tiers.so lib/libgmr_tiers.a \
           "lib/libgmr_scoped.so.$version" lib/libgmr_scoped.so lib/libgmr_scoped.a \
           include/gmr/nccl/nccl.h "lib/libgmr_nccl.so.$version" lib/libgmr_nccl.a \
           lib/pkgconfig/gmr-tiers.pc lib/pkgconfig/gmr-scoped.pc lib/pkgconfig/gmr-nccl.pc \
           lib/pkgconfig/gmr.pc lib/pkgconfig/gmr-static.pc lib/cmake/gmr/gmrConfig.cmake \
           lib/cmake/gmr/gmrConfigVersion.cmake lib/python/gmr/__init__.py \
           lib/python/gmr/torch_shim/integrations/torch/torch_allocator.cc; do
    [ -e "$prefix/$f" ] || { echo "missing: $f"; return 1; }
  done
  # The simulation is for tests only.
  if [ -e "$prefix/include/gmr/sim" ] || ls "$prefix"/lib/libgmr_testing* >/dev/null 2>&1; then
    echo "the CUDA simulation was installed"
    return 1
  fi
}
step layout layout

# (Output is captured before grep -q: with pipefail, grep -q closing the pipe
# early would fail the producer with SIGPIPE.)
soname() {
  local dynamic lib
  for lib in libgmr libgmr_tiers libgmr_scoped libgmr_nccl; do
    dynamic=$(readelf -d "$prefix/lib/$lib.so.$version")
    grep -q "SONAME.*\[$lib.so.$abi\]" <<<"$dynamic" || { echo "$lib: $dynamic"; return 1; }
  done
  # The optional libraries use the core's copy of everything (one CUDA layer,
  # one registry): they need libgmr.so.
  dynamic=$(readelf -d "$prefix/lib/libgmr_tiers.so.$version")
  grep -q "NEEDED.*\[libgmr.so.$abi\]" <<<"$dynamic"
}
step soname soname

# Each library exports exactly the functions its headers declare with GMR_API
# (libgmr: include/gmr/*.h; libgmr_X: include/gmr/X/*.h) under GMR_PUBLIC, no
# CUDA runtime symbols; libgmr also exports its extension interface, exactly
# the functions core/, stack/ and adaptors/ headers declare with GMR_EXTENSION_API,
# under GMR_EXTENSION_<N> (N: GMR_EXTENSION_VERSION of core/extension.h),
# and nothing else of its internals. The optional libraries export no
# internals, and import libgmr's only through that node.
exports() {
  python3 - "$root" "$prefix/lib" <<'PY'
import glob, re, subprocess, sys
src, lib = sys.argv[1], sys.argv[2]
def declared(pattern, marker, prefix):
    names = set()
    for h in glob.glob(src + "/" + pattern):
        text = open(h).read()
        pattern_ = marker + r"\b([^;{}]*?)\b(" + prefix + r"\w+)\s*\("
        names |= {m.group(2) for m in re.finditer(pattern_, text, re.S)}
    return names
node = "GMR_EXTENSION_" + re.search(r"#define GMR_EXTENSION_VERSION (\d+)",
                                    open(src + "/core/extension.h").read()).group(1)
extension = (declared("core/*.h", "GMR_EXTENSION_API", "gmr__") |
             declared("stack/*.h", "GMR_EXTENSION_API", "gmr__") |
             declared("adaptors/*.h", "GMR_EXTENSION_API", "gmr__"))
bad = not extension
for name, headers in (("libgmr", "include/gmr/*.h"), ("libgmr_tiers", "include/gmr/tiers/*.h"),
                      ("libgmr_scoped", "include/gmr/scoped/*.h"),
                      ("libgmr_nccl", "include/gmr/nccl/*.h")):
    api = declared(headers, "GMR_API", "gmr_(?!_)")
    path = "%s/%s.so" % (lib, name)
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    public, internal, other = set(), {}, set()
    for line in out.splitlines():
        symbol = line.split()[-1]
        base, _, version = symbol.partition("@@")
        if base in ("GMR_PUBLIC", node):
            continue
        if base.startswith("gmr__"):
            internal[base] = version
        elif base.startswith("gmr_"):
            public.add(base)
        else:
            other.add(symbol)
    print("%s: %d exported symbols: %d public (declared %d), %d internal"
          % (name, len(out.splitlines()), len(public), len(api), len(internal)))
    problems = []
    if public != api:
        problems.append("public: exported but not declared %s, declared but not exported %s"
                        % (sorted(public - api), sorted(api - public)))
    if other:
        problems.append("other exports: %s" % sorted(other)[:20])
    if name == "libgmr":
        if set(internal) != extension:
            problems.append("internals: exported but not GMR_EXTENSION_API %s, declared but "
                            "not exported %s" % (sorted(set(internal) - extension),
                                                 sorted(extension - set(internal))))
        wrong = sorted(s for s, v in internal.items() if v != node)
        if wrong:
            problems.append("extension symbols outside %s: %s" % (node, wrong))
        if any(s.startswith(("gmr_cuda_sim", "gmr_tier", "gmr_scope", "gmr_nccl", "gmr_cumem"))
               for s in public):
            problems.append("libgmr exports the simulation or an optional library")
    else:
        if internal:
            problems.append("an optional library exports internals: %s" % sorted(internal)[:20])
        imported = subprocess.run(["nm", "-D", "--undefined-only", path], capture_output=True,
                                  text=True, check=True).stdout
        for line in imported.splitlines():
            symbol = line.split()[-1]
            base, _, version = symbol.partition("@")
            if base.startswith("gmr__") and (base not in extension or version != node):
                problems.append("imports %s, not libgmr's extension interface" % symbol)
    for p in problems:
        print("  " + p)
    bad |= bool(problems)
print("extension interface (%s): %d functions" % (node, len(extension)))
sys.exit(1 if bad else 0)
PY
}
step exports exports

# The README's example, as a user copies it.
awk '/install_test.sh builds this example/ {grab = 1; next}
     grab && /^```c/ {inside = 1; next}
     inside && /^```/ {exit}
     inside {print}' "$root/README.md" >"$work/example.c"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# libgmr.so.N resolved to the test build (the simulation) for running.
simdir="$work/simlib"
mkdir -p "$simdir"
ln -sf "$root/dist/libgmr_testing.so" "$simdir/libgmr.so.$abi"
run_sim() { env LD_LIBRARY_PATH="$simdir" GMR_CUDA_SIM=1 "$@"; }

pkg_config_shared() {
  [ -s "$work/example.c" ] || { echo "no example found in README.md"; return 1; }
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" "$work/example.c" \
    $(pkg-config --cflags --libs gmr) -o "$work/example_shared" || return 1
  local linked
  linked=$(ldd "$work/example_shared")
  echo "$linked"
  grep -q "libgmr.so.$abi => $prefix/lib/" <<<"$linked" &&
    run_sim "$work/example_shared"
}
step readme_example_pkg_config_shared pkg_config_shared

pkg_config_static() {
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" "$work/example.c" \
    $(pkg-config --cflags --libs gmr-static) -o "$work/example_static" || return 1
  local linked
  linked=$(ldd "$work/example_static")
  ! grep -q libgmr <<<"$linked" || return 1
  # No simulation inside and no GPU here: the first CUDA call fails and the
  # example says so (exit 1, a gmr status on stderr), whatever GMR_CUDA_SIM
  # says. On a machine with a GPU it runs (exit 0).
  local out rc
  out=$(GMR_CUDA_SIM=1 "$work/example_static" 2>&1)
  rc=$?
  echo "exit $rc: $out"
  [ "$rc" -eq 0 ] || { [ "$rc" -eq 1 ] && grep -q "GMR_ERR_" <<<"$out"; }
}
step readme_example_pkg_config_static pkg_config_static

cmake_build() {
  mkdir -p "$work/cmake" &&
    cp "$work/example.c" "$work/cmake/" &&
    cat >"$work/cmake/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(example C)
find_package(gmr $major.$minor REQUIRED)
add_executable(example example.c)
target_link_libraries(example gmr::gmr)
CMAKE
  cmake -S "$work/cmake" -B "$work/cmake/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="${san_flags[*]}" &&
    cmake --build "$work/cmake/build" &&
    run_sim "$work/cmake/build/example" || return 1
  # Another 0.x minor version has another binary interface: not compatible.
  if [ "$major" = 0 ]; then
    mkdir -p "$work/cmake_old" &&
      sed "s/find_package(gmr $major.$minor /find_package(gmr 0.$((minor - 1)) /" \
        "$work/cmake/CMakeLists.txt" >"$work/cmake_old/CMakeLists.txt" &&
      cp "$work/example.c" "$work/cmake_old/" &&
      ! cmake -S "$work/cmake_old" -B "$work/cmake_old/build" -DCMAKE_PREFIX_PATH="$prefix"
  fi
}
if command -v cmake >/dev/null; then
  step readme_example_cmake cmake_build
else
  skip readme_example_cmake "cmake is not installed"
fi

# libgmr knows no component of libgmr_nccl and loads no library: a program
# linked with libgmr only that names cumem in a spec is told which library
# to link or load; once the program loads libgmr_nccl (dlopen) its
# components are known (it registers them as it loads); a program linked
# with it (pkg-config gmr-nccl) knows them from the start.
cat >"$work/nccl_spec.c" <<'C'
#include <dlfcn.h>
#include <gmr/gmr.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  gmr_spec_error error;
  gmr_status st = gmr_stack_check("pool > cumem", &error);
  printf("before: %s %s\n", gmr_status_name(st), error.message);
  if (argc < 2) return st == GMR_OK ? 0 : 1;
  if (st != GMR_ERR_INVALID_ARGUMENT || strstr(error.message, "libgmr_nccl") == NULL) return 2;
  if (dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) == NULL) return 3;
  st = gmr_stack_check("pool > cumem", &error);
  printf("after dlopen: %s %s\n", gmr_status_name(st), error.message);
  return st == GMR_OK ? 0 : 4;
}
C
nccl_spec() {
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" "$work/nccl_spec.c" \
    $(pkg-config --cflags --libs gmr) -ldl -o "$work/nccl_spec_core" || return 1
  local linked
  linked=$(ldd "$work/nccl_spec_core")
  echo "$linked"
  ! grep -q libgmr_nccl <<<"$linked" || return 1
  "$work/nccl_spec_core" "$prefix/lib/libgmr_nccl.so.$abi" || return 1
  # Linked, though no function of it is called: the loader loads it.
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" "$work/nccl_spec.c" -Wl,--no-as-needed \
    $(pkg-config --cflags --libs gmr-nccl) -ldl -o "$work/nccl_spec_linked" || return 1
  "$work/nccl_spec_linked"
}
step nccl_components_come_with_their_library nccl_spec


# An optional library, as a user links it: pkg-config gmr-tiers, and CMake's
# find_package(gmr COMPONENTS tiers).
cat >"$work/tiers_example.c" <<'C'
#include <gmr/tiers/tier_manager.h>
#include <stdio.h>

int main(void) {
  gmr_tier tier = GMR_TIER_COUNT;
  if (gmr_tier_from_name("HOST", &tier) != GMR_OK) return 1;
  printf("tier %s\n", gmr_tier_name(tier));
  return 0;
}
C
tiers_pkg_config() {
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" "$work/tiers_example.c" \
    $(pkg-config --cflags --libs gmr-tiers) -o "$work/tiers_example" || return 1
  local linked
  linked=$(ldd "$work/tiers_example")
  echo "$linked"
  grep -q "libgmr_tiers.so.$abi => $prefix/lib/" <<<"$linked" &&
    grep -q "libgmr.so.$abi => $prefix/lib/" <<<"$linked" && "$work/tiers_example"
}
step tiers_pkg_config tiers_pkg_config

# An optional library calls libgmr only through its public API and the
# extension interface: the installed libgmr_tiers.so on the test build of
# libgmr (same SONAME, the simulation inside) creates a pinned host resource
# (its type registered in libgmr's table, so it downcasts), allocates through
# libgmr's dispatch (cudaHostRegister through libgmr's CUDA layer) and frees.
cat >"$work/tiers_run.c" <<'C'
#include <gmr/gmr.h>
#include <gmr/tiers/numa_host_resource.h>
#include <stdio.h>

int main(void) {
  gmr_numa_host_resource *h = NULL;
  if (gmr_numa_host_resource_create(NULL, &h) != GMR_OK) return 1;
  gmr_resource *r = gmr_numa_host_resource_as_resource(h);
  if (gmr_numa_host_resource_from_resource(r) != h) return 2;
  void *p = NULL;
  gmr_failure f = GMR_FAILURE_INIT;
  gmr_status st = gmr_resource_allocate_ex(r, 1 << 20, 0, NULL, &p, &f);
  printf("allocate: %s %s\n", gmr_status_name(st), f.message);
  if (st != GMR_OK) return 3;
  if (gmr_resource_deallocate(r, p, 1 << 20, 0, NULL) != GMR_OK) return 4;
  if (gmr_resource_destroy(r) != GMR_OK) return 5;
  printf("simulated: %d\n", (int)gmr_cuda_is_simulated());
  return gmr_cuda_is_simulated() ? 0 : 6;
}
C
tiers_across_libraries() {
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" "$work/tiers_run.c" \
    $(pkg-config --cflags --libs gmr-tiers) -o "$work/tiers_run" || return 1
  local linked
  linked=$(run_sim ldd "$work/tiers_run")
  echo "$linked"
  grep -q "libgmr_tiers.so.$abi => $prefix/lib/" <<<"$linked" &&
    grep -q "libgmr.so.$abi => $simdir/" <<<"$linked" && run_sim "$work/tiers_run"
}
step tiers_across_libraries tiers_across_libraries

tiers_cmake() {
  mkdir -p "$work/cmake_tiers" &&
    cp "$work/tiers_example.c" "$work/cmake_tiers/" &&
    cat >"$work/cmake_tiers/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(tiers_example C)
find_package(gmr $major.$minor REQUIRED COMPONENTS tiers)
add_executable(tiers_example tiers_example.c)
target_link_libraries(tiers_example gmr::tiers)
CMAKE
  cmake -S "$work/cmake_tiers" -B "$work/cmake_tiers/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="${san_flags[*]}" &&
    cmake --build "$work/cmake_tiers/build" &&
    "$work/cmake_tiers/build/tiers_example" || return 1
  # An unknown component is refused.
  mkdir -p "$work/cmake_bad" &&
    sed 's/COMPONENTS tiers/COMPONENTS tiers nosuch/' "$work/cmake_tiers/CMakeLists.txt" \
      >"$work/cmake_bad/CMakeLists.txt" && cp "$work/tiers_example.c" "$work/cmake_bad/" &&
    ! cmake -S "$work/cmake_bad" -B "$work/cmake_bad/build" -DCMAKE_PREFIX_PATH="$prefix"
}
if command -v cmake >/dev/null; then
  step tiers_cmake tiers_cmake
else
  skip tiers_cmake "cmake is not installed"
fi

python_from_prefix() {
  env "${python_env[@]}" PYTHONPATH="$prefix/lib/python" GMR_CUDA_SIM=1 python3 -c "
import gmr
assert gmr.version() == '$version', gmr.version()
assert not gmr.simulated(), 'GMR_CUDA_SIM switched the installed library to the simulation'
import gmr._lib as l
assert l.lib_path().startswith('$prefix/lib/'), l.lib_path()
assert l.torch_lib_path().startswith('$prefix/lib/'), l.torch_lib_path()
tiers = l.optional_lib('tiers')
assert tiers._name.startswith('$prefix/lib/libgmr_tiers.so'), tiers._name
assert hasattr(tiers, 'gmr_tier_manager_create')
print('python from the prefix: core', l.lib_path(), 'tiers', tiers._name)
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
