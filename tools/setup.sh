#!/usr/bin/env bash
# Installs what gmr's build needs on Debian 12, and nothing when it is all
# there already (safe to run before every build).
#   Bazel 4.2.3 (bazel-bootstrap), GoogleTest (libgtest-dev), zlib (zlib1g-dev),
#   a C/C++ compiler (g++), pkg-config and python3 with venv (the install,
#   wheel and Python tests; CMake, when installed, is used by the install test too).
#   With --fuzz also clang and libFuzzer (clang, libclang-rt-14-dev), for
#   fuzz/run.sh and the fuzzing stage of .ci/run.
# The CUDA toolkit is not a Debian package: it must be at /usr/local/cuda, or
# at $CUDA_PATH.
set -euo pipefail

packages=(bazel-bootstrap libgtest-dev zlib1g-dev g++ pkg-config python3 python3-venv)
for arg in "$@"; do
  case "$arg" in
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    *) echo "setup: unknown option $arg (known: --fuzz)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [ ! -f "$cuda/include/cuda_runtime_api.h" ] || [ ! -f "$cuda/lib64/libcudart_static.a" ]; then
  echo "setup: no CUDA toolkit at $cuda (install CUDA 12 or 13, or set CUDA_PATH)" >&2
  exit 1
fi
