#!/usr/bin/env bash
# Installs gmr under PREFIX for builds that are not Bazel (Make, CMake, plain
# cc) and for Python:
#
#   tools/install.sh PREFIX
#
#   PREFIX/include/gmr/*.h                 the core library's public headers
#   PREFIX/include/gmr/tiers/, scoped/     the optional libraries' headers
#   PREFIX/lib/libgmr.so.X.Y.Z             core shared library (SONAME libgmr.so.0.Y while
#   PREFIX/lib/libgmr.so.0.Y, libgmr.so      X is 0, else libgmr.so.X: CHANGELOG.md's
#                                          version rule), the CUDA runtime linked in
#                                          statically
#   PREFIX/lib/libgmr.a                    static library (link the CUDA runtime too)
#   PREFIX/lib/libgmr_tiers.so.X.Y.Z, .a   optional: memory tiers (needs libgmr)
#   PREFIX/lib/libgmr_scoped.so.X.Y.Z, .a  optional: scoped per-thread pools (needs libgmr)
#   PREFIX/lib/libgmr_nccl.so.X.Y.Z, .a    optional: NCCL, cumem, symmetric, chunk listener
#                                          (each optional library has the same SONAME rule)
#   PREFIX/lib/libgmr_torch.so             PyTorch allocator entry points (docs/frameworks.md)
#   PREFIX/lib/pkgconfig/gmr.pc            cc app.c $(pkg-config --cflags --libs gmr)
#   PREFIX/lib/pkgconfig/gmr-static.pc     ... $(pkg-config --cflags --libs gmr-static)
#   PREFIX/lib/pkgconfig/gmr-tiers.pc,     the optional libraries (Requires: gmr)
#                     gmr-scoped.pc, gmr-nccl.pc
#   PREFIX/lib/cmake/gmr/gmrConfig.cmake   find_package(gmr [COMPONENTS tiers scoped nccl])
#                                          -> gmr::gmr, gmr::gmr_static, gmr::tiers, gmr::scoped,
#                                             gmr::nccl
#   PREFIX/lib/python/gmr/                 the Python package (PYTHONPATH=PREFIX/lib/python),
#                                          with the torch shim's sources (gmr.torch.build_shim)
#
# Builds with Bazel (-c opt) first, unless --prebuilt DIR names a folder laid
# out as bazel-bin that already holds dist/libgmr.so, dist/libgmr.a, the
# optional libraries (dist/libgmr_{tiers,scoped,nccl}.so/.a) and
# integrations/torch/libgmr_torch.so (the install test uses this; so can a
# packager). The CUDA simulation (libgmr_testing) is never installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

prebuilt=""
if [ "${1:-}" = "--prebuilt" ]; then
  prebuilt="${2:?--prebuilt needs a folder}"
  shift 2
fi
if [ $# -ne 1 ]; then
  echo "usage: tools/install.sh [--prebuilt DIR] PREFIX" >&2
  exit 2
fi
mkdir -p "$1"
prefix="$(cd "$1" && pwd)"

if [ -z "$prebuilt" ]; then
  (cd "$root" && bazel build -c opt //dist:libgmr //dist:libgmr_tiers //dist:libgmr_scoped //dist:libgmr_nccl \
    //integrations/torch:libgmr_torch)
  prebuilt="$root/bazel-bin"
fi
libs=("$prebuilt/dist/libgmr.so" "$prebuilt/dist/libgmr.a"
      "$prebuilt/integrations/torch/libgmr_torch.so")
optional=(tiers scoped nccl)
for o in "${optional[@]}"; do
  libs+=("$prebuilt/dist/libgmr_$o.so" "$prebuilt/dist/libgmr_$o.a")
done
for f in "${libs[@]}"; do
  [ -f "$f" ] || { echo "install: $f is missing" >&2; exit 1; }
done

version_part() {
  sed -n "s/^#define GMR_VERSION_$1 \\([0-9][0-9]*\\).*/\\1/p" "$root/include/gmr/version.h"
}
major=$(version_part MAJOR)
minor=$(version_part MINOR)
patch=$(version_part PATCH)
version="$major.$minor.$patch"
# The SONAME's version (CHANGELOG.md): a 0.x minor version may break
# binaries, so while the major is 0 the minor is part of it.
if [ "$major" = 0 ]; then abi="0.$minor"; else abi="$major"; fi

# The CUDA runtime a static link needs (the shared library carries its own).
cuda="${CUDA_PATH:-/usr/local/cuda}"
cudart_dir="$cuda/lib64"
[ -d "$cudart_dir" ] || cudart_dir="$cuda/lib"

install -d "$prefix/include/gmr" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/gmr" \
  "$prefix/lib/python/gmr"
install -m 644 "$root"/include/gmr/*.h "$prefix/include/gmr/"
for o in "${optional[@]}"; do
  install -d "$prefix/include/gmr/$o"
  install -m 644 "$root"/include/gmr/"$o"/*.h "$prefix/include/gmr/$o/"
  install -m 755 "$prebuilt/dist/libgmr_$o.so" "$prefix/lib/libgmr_$o.so.$version"
  ln -sf "libgmr_$o.so.$version" "$prefix/lib/libgmr_$o.so.$abi"
  ln -sf "libgmr_$o.so.$abi" "$prefix/lib/libgmr_$o.so"
  install -m 644 "$prebuilt/dist/libgmr_$o.a" "$prefix/lib/libgmr_$o.a"
  cat >"$prefix/lib/pkgconfig/gmr-$o.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: gmr-$o
Description: gmr's optional $o library (gmr/$o/)
Version: $version
Requires: gmr = $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lgmr_$o
EOF
done
install -m 755 "${libs[0]}" "$prefix/lib/libgmr.so.$version"
ln -sf "libgmr.so.$version" "$prefix/lib/libgmr.so.$abi"
ln -sf "libgmr.so.$abi" "$prefix/lib/libgmr.so"
install -m 644 "${libs[1]}" "$prefix/lib/libgmr.a"
install -m 755 "${libs[2]}" "$prefix/lib/libgmr_torch.so"
install -m 644 "$root"/python/gmr/*.py "$root"/python/gmr/py.typed "$prefix/lib/python/gmr/"
# The shim's source, so gmr.torch can rebuild it against the local PyTorch
# (torch.cuda.OutOfMemoryError needs PyTorch's headers; docs/frameworks.md).
install -d "$prefix/lib/python/gmr/torch_shim/integrations/torch"
install -m 644 "$root"/integrations/torch/*.h "$root"/integrations/torch/*.cc \
  "$prefix/lib/python/gmr/torch_shim/integrations/torch/"

cat >"$prefix/lib/pkgconfig/gmr.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: gmr
Description: Composable GPU memory resources (C11); the CUDA runtime is linked in
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lgmr
EOF

cat >"$prefix/lib/pkgconfig/gmr-static.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: gmr-static
Description: Composable GPU memory resources (C11), static, with the static CUDA runtime
Version: $version
Cflags: -I\${includedir}
Libs: \${libdir}/libgmr.a -L$cudart_dir -lcudart_static -ldl -lpthread -lrt -lm
EOF

cat >"$prefix/lib/cmake/gmr/gmrConfig.cmake" <<EOF
# gmr $version: find_package(gmr) gives gmr::gmr (shared, the CUDA runtime
# linked in) and gmr::gmr_static (static, with the static CUDA runtime);
# the optional libraries as components: gmr::tiers, gmr::scoped, gmr::nccl
# (shared, they need gmr::gmr).
get_filename_component(_gmr_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET gmr::gmr)
  add_library(gmr::gmr SHARED IMPORTED)
  set_target_properties(gmr::gmr PROPERTIES
    IMPORTED_LOCATION "\${_gmr_prefix}/lib/libgmr.so.$version"
    IMPORTED_SONAME "libgmr.so.$abi"
    INTERFACE_INCLUDE_DIRECTORIES "\${_gmr_prefix}/include")
  add_library(gmr::gmr_static STATIC IMPORTED)
  set_target_properties(gmr::gmr_static PROPERTIES
    IMPORTED_LOCATION "\${_gmr_prefix}/lib/libgmr.a"
    INTERFACE_INCLUDE_DIRECTORIES "\${_gmr_prefix}/include"
    INTERFACE_LINK_LIBRARIES "$cudart_dir/libcudart_static.a;dl;pthread;rt;m")
  foreach(_gmr_c tiers scoped nccl)
    add_library(gmr::\${_gmr_c} SHARED IMPORTED)
    set_target_properties(gmr::\${_gmr_c} PROPERTIES
      IMPORTED_LOCATION "\${_gmr_prefix}/lib/libgmr_\${_gmr_c}.so.$version"
      IMPORTED_SONAME "libgmr_\${_gmr_c}.so.$abi"
      INTERFACE_INCLUDE_DIRECTORIES "\${_gmr_prefix}/include"
      INTERFACE_LINK_LIBRARIES gmr::gmr)
  endforeach()
endif()
foreach(_gmr_c \${gmr_FIND_COMPONENTS})
  if(_gmr_c STREQUAL "tiers" OR _gmr_c STREQUAL "scoped" OR _gmr_c STREQUAL "nccl")
    set(gmr_\${_gmr_c}_FOUND TRUE)
  else()
    set(gmr_\${_gmr_c}_FOUND FALSE)
    if(gmr_FIND_REQUIRED_\${_gmr_c})
      set(gmr_FOUND FALSE)
      set(gmr_NOT_FOUND_MESSAGE "gmr has no component \${_gmr_c} (tiers, scoped, nccl)")
    endif()
  endif()
endforeach()
unset(_gmr_prefix)
EOF

# What a find_package(gmr X.Y) must share with this version: the SONAME's
# version (a 0.x minor may break binaries; from 1.0 on only the major does).
if [ "$major" = 0 ]; then
  same_abi="PACKAGE_FIND_VERSION_MAJOR STREQUAL \"0\" AND"
  same_abi="$same_abi PACKAGE_FIND_VERSION_MINOR STREQUAL \"$minor\""
else
  same_abi="PACKAGE_FIND_VERSION_MAJOR STREQUAL \"$major\""
fi
cat >"$prefix/lib/cmake/gmr/gmrConfigVersion.cmake" <<EOF
# Compatible when the version is at least the one asked for and the binary
# interface is the same (CHANGELOG.md's version rule: CMake's
# SameMinorVersion while the major version is 0, SameMajorVersion after).
set(PACKAGE_VERSION "$version")
if($same_abi AND
   NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
elseif(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
EOF

echo "gmr $version installed under $prefix"
